//! The pipeline language: KDL text → checked model.

mod check;
mod compile;
mod decode;
mod fastkdl;
pub mod format;
pub mod lexer;
pub mod loader;
pub mod parse;
mod prompt;
pub mod schema;
mod state_location;
mod template;
mod validate;

pub use compile::{Compilation, Options, TemplateDef, compile};
pub use decode::{compile_glob, escape_problem};
pub use loader::{FsLoader, Loader};
pub use state_location::{StateLocation, state_location};
