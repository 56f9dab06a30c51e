//! The pipeline language: KDL text → checked model.

mod check;
mod compile;
mod decode;
pub mod format;
pub mod kdl;
pub mod loader;
pub mod placeholders;
mod prompt;
pub mod schema;
mod state_location;
mod template;
mod validate;

pub use compile::{Compilation, Options, compile};
pub use decode::escape_problem;
pub use loader::{FsLoader, Loader};
pub use state_location::{StateLocation, state_location};
pub use template::TemplateDef;
