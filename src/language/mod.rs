//! The pipeline language: KDL text → checked model.

mod check;
mod compile;
mod decode;
pub(crate) mod format;
mod imports;
pub(crate) mod item;
pub(crate) mod kdl;
pub(crate) mod loader;
mod overlap;
pub(crate) mod placeholders;
mod prompt;
mod run_time;
pub(crate) mod schema;
mod state_location;
mod template;
mod validate;

pub use compile::{Compilation, Options, compile};
pub(crate) use compile::{GeneratedFile, compile_generated};
pub(crate) use decode::escape_problem;
pub use loader::{FsLoader, Loader};
pub(crate) use state_location::state_location;
