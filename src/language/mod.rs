//! The pipeline language: KDL text → checked model.

mod check;
mod compile;
mod decode;
pub mod format;
pub mod kdl;
pub mod loader;
mod prompt;
pub mod schema;
mod state_location;
mod template;
mod validate;

pub use compile::{Compilation, Options, TemplateDef, compile};
pub use decode::{compile_glob, escape_problem};
pub use loader::{FsLoader, Loader};
pub use state_location::{StateLocation, state_location};
