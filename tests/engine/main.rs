//! Integration tests that call the library directly — gates, process supervision, snapshots,
//! sub-agent verification, the syntax gate, the reporters, the language layer under random
//! mutations — and the checks that read the sources (the layers, the layout of these tests).
//! `cargo test --test engine gates::` runs one module.

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario with its assertions, read top to bottom"
)]

mod gates;
mod layers;
mod process;
mod proptest_lint;
mod report;
mod snapshot;
mod subagent;
mod syntax_gate;
mod two_binaries;
