//! The run engine: scheduling phases over the DAG, one attempt at a time per phase, and emitting
//! [`crate::event::Event`]s.

pub mod approvals;
mod approver;
mod attempt;
mod context;
pub mod control;
pub mod run;

pub(crate) use attempt::attempt_prompt;
pub use context::gate_env;
pub use context::{GRACE, RunOptions};
pub use run::{RunOutcome, execute};
