//! The `approval` gate: a person approves the work. A person decides (`engine::approvals`) once
//! every other gate passed; the gate runner only holds its place in the order.

use super::{Finding, GateInfo};

/// What helixflow says about the `approval` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "The work was not approved:",
    how_to_fix: "address the reviewer's reason",
    outside_a_run: Some("decided by a person during a run"),
};

/// What the gate checks, for the agent.
pub(super) fn describe() -> String {
    "a person approves the work".to_owned()
}

/// The gate's place in the order, until a person decides.
pub(super) fn approval_gate() -> Finding {
    Finding::skipped("decided by a person once every other check passed")
}
