//! The run engine: scheduling phases over the DAG, one attempt at a time per phase, supervising
//! every child process, and emitting [`event::Event`]s.

pub mod event;
pub mod process;
pub mod response;
