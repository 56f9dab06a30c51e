//! The `paths-exist` gate: every path listed under a key of a document exists.

use super::document::Listed;
use super::files::all_files;
use super::outputs::missing_listed;
use super::{Finding, GateContext, GateInfo};

/// What helixflow says about the `paths-exist` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "Paths listed in the document do not exist:",
    how_to_fix: "create every listed path, or correct the list",
    outside_a_run: None,
};

/// What the gate checks, for the agent.
pub(super) fn describe(doc: &str, key: &str) -> String {
    format!("every path under `{key}` in {doc} exists")
}

/// Checks the paths listed under `key` in `doc`, naming same-named files elsewhere for each
/// missing one.
pub(super) fn paths_exist_gate(
    ctx: &GateContext<'_>,
    doc: &str,
    key: &str,
    listed: &Listed,
) -> Finding {
    let everywhere = std::cell::OnceCell::new();
    let all = || -> &[String] { everywhere.get_or_init(|| all_files(ctx)) };
    Finding::from_problems(missing_listed(
        ctx,
        doc,
        key,
        listed,
        "a listed path must be in the workspace",
        all,
    ))
}
