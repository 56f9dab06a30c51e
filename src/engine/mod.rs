//! The run engine: scheduling phases over the DAG, one attempt at a time per phase, and emitting
//! [`crate::event::Event`]s.

pub(crate) mod approvals;
mod approver;
mod attempt;
pub(crate) mod check;
mod context;
pub(crate) mod control;
pub(crate) mod error;
mod expand;
pub(crate) mod fingerprint;
mod generated;
mod isolation;
mod observe;
pub(crate) mod plan;
pub(crate) mod run;
mod schedule;
pub(crate) mod session;
mod signals;
mod state;

pub(crate) use attempt::{attempt_prompt, helixflow_program};
pub(crate) use context::gate_env;
pub(crate) use context::{Bundles, GRACE, RunOptions};
pub(crate) use run::execute;
