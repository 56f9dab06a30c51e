//! The run engine: scheduling phases over the DAG, one attempt at a time per phase, and emitting
//! [`crate::event::Event`]s.

pub mod approvals;
mod attempt;
pub mod control;
pub mod run;

pub(crate) use attempt::attempt_prompt;
pub use attempt::gate_env;
pub use run::{GRACE, RunOptions, RunOutcome, execute};
