//! The pipeline language: KDL text → checked model.

mod check;
mod compile;
mod decode;
pub(crate) mod format;
pub(crate) mod kdl;
pub(crate) mod loader;
mod overlap;
pub(crate) mod placeholders;
mod prompt;
pub(crate) mod schema;
mod state_location;
mod template;
mod validate;

pub use compile::{Compilation, Options, compile};
pub(crate) use decode::escape_problem;
pub use loader::{FsLoader, Loader};
pub(crate) use state_location::state_location;
