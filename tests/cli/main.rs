//! Integration tests that drive the real `helixflow` binary: one test binary, one module per
//! subcommand or theme. `cargo test --test cli run::` runs one module; the library is linked
//! once for all of them (each test binary that links it is 130–175 MB in a debug build).

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario with its assertions, read top to bottom"
)]

#[path = "../common/mod.rs"]
mod common;

mod approvals;
mod bundle;
mod bundle_fuzz;
mod bypass;
mod check;
mod cost;
mod daemons;
mod editors;
mod escalation;
mod escapes;
mod examples;
mod fmt;
mod for_each;
mod github_actions;
mod graph;
mod hooks;
mod hostile;
mod isolation;
mod lint;
mod lint_fixtures;
mod lock;
mod lsp;
mod mcp;
mod misc;
mod pipeline_cache;
mod plan_memo;
mod planner;
mod prompts;
mod remote_imports;
mod report;
mod run;
mod scope_protect;
mod secrets;
mod uptodate;
mod verdict;
mod verify_modes;
