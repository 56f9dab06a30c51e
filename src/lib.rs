//! helixflow: verifiable multi-phase pipelines for AI coding agents.
//!
//! Data flows one way: text → checked model ([`language`]) → DAG ([`graph`]) → engine → events →
//! reporters.

/// `eprintln!` that never panics: with standard error closed (`helixflow run 2>&1 | head -1`) the
/// message is lost, but the command still ends with its own exit code instead of a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod agent;
pub mod cli;
pub mod diagnostics;
pub mod engine;
pub mod event;
pub mod glob;
pub mod graph;
pub mod language;
pub mod lsp;
pub mod model;
pub mod process;
pub mod redact;
pub mod report;
pub mod store;
pub mod text;
pub mod verify;
pub mod workspace;

/// Exit codes shared by every command (see the README).
pub mod exit {
    /// Success (lint: no errors).
    pub const SUCCESS: i32 = 0;
    /// A phase failed (lint: findings of error severity).
    pub const FAILURE: i32 = 1;
    /// The pipeline file is invalid, or bad usage.
    pub const INVALID: i32 = 2;
    /// helixflow itself failed.
    pub const INTERNAL: i32 = 3;
    /// Interrupted.
    pub const INTERRUPTED: i32 = 130;
}
