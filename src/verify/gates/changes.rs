//! The `changes` gate: the attempt changed at least `min` files.

use std::fmt::Write as _;

use super::scope::LeftToOthers;
use super::{Finding, GateContext, GateInfo, changed, count, name_list};

/// What helixflow says about the `changes` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "The attempt did not change enough files:",
    how_to_fix: "do the work: the attempt has to change files",
    outside_a_run: Some("judged only inside a run, against the attempt's starting point"),
};

/// What the gate checks, for the agent.
pub(super) fn describe(min: u32) -> String {
    format!("at least {min} file(s) changed")
}

/// Counts the attempt's changes, leaving out those that are another phase's work.
pub(super) fn changes_gate(ctx: &GateContext<'_>, min: u32) -> Finding {
    let others = LeftToOthers::of(ctx);
    let paths: Vec<&str> = changed(ctx.changes)
        .map(|(path, _)| path)
        .filter(|path| !others.contains(path))
        .collect();
    let total = paths.len();
    let mut finding = if total >= usize::try_from(min).unwrap_or(usize::MAX) {
        Finding::from_problems(Vec::new())
    } else {
        let mut detail = format!(
            "the attempt changed {}; at least {min} expected",
            count(total, "file", "files")
        );
        if total == 0 {
            detail.push_str(" — was the work done?");
        } else {
            let _ = write!(detail, " (changed: {})", name_list(&paths, 10));
        }
        Finding::failed(detail)
    };
    finding.details.extend(others.notes());
    finding
}
