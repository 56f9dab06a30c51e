//! The run engine: scheduling phases over the DAG, one attempt at a time per phase, supervising
//! every child process, and emitting [`event::Event`]s.

pub mod approvals;
mod attempt;
pub mod control;
pub mod process;
pub mod prompt;
pub mod response;
pub mod run;
mod shell;
pub(crate) mod transcript;
pub mod watchdog;

pub(crate) use attempt::attempt_prompt;
pub use attempt::gate_env;
pub use run::{GRACE, RunOptions, RunOutcome, execute};
