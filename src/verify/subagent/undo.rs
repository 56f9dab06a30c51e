//! Undoing what the verifier changed: the workspace is compared with the snapshot taken before the
//! review, every change is restored from it, and a fresh snapshot shows what is still not undone.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::text::name_list;
use crate::workspace::{Changes, Snapshot, SnapshotOptions};

/// The most paths named in a void verdict's reason.
const MAX_NAMED_IN_REASON: usize = 20;

/// What the verifier changed, and what of it could not be undone.
#[derive(Debug, Default)]
pub(super) struct Restoration {
    pub(super) changed: Changes,
    pub(super) not_restored: Vec<String>,
    /// The first error met while restoring, when there was one.
    error: Option<String>,
}

impl Restoration {
    pub(super) fn changed_paths(&self) -> Vec<String> {
        self.changed.all().map(str::to_owned).collect()
    }

    /// The reason a verdict is void because of these changes.
    pub(super) fn reason(&self) -> String {
        let mut parts = Vec::new();
        for (verb, paths) in [
            ("created", &self.changed.created),
            ("modified", &self.changed.modified),
            ("deleted", &self.changed.deleted),
        ] {
            if !paths.is_empty() {
                parts.push(format!("{verb} {}", name_list(paths, MAX_NAMED_IN_REASON)));
            }
        }
        let mut reason = format!(
            "the verifier changed the workspace, which a review must not do: {}",
            parts.join(", ")
        );
        if self.not_restored.is_empty() {
            reason.push_str(" (all undone)");
        } else {
            let _ = write!(
                reason,
                " (could not undo {}",
                name_list(&self.not_restored, MAX_NAMED_IN_REASON)
            );
            if let Some(error) = &self.error {
                let _ = write!(reason, ": {error}");
            }
            reason.push(')');
        }
        reason
    }
}

/// Compares the workspace with `guard`, the snapshot taken before the review, and undoes every
/// change; a fresh snapshot then shows what is still not as it was.
pub(super) fn undo_changes(
    workspace: &Path,
    guard: &Snapshot,
    options: &SnapshotOptions,
    others: &impl Fn(&str) -> bool,
) -> io::Result<Restoration> {
    let after = Snapshot::take(workspace, options, Some(guard))?;
    let mut changed = guard.diff(&after);
    // Left to the phases running alongside, whose work they are.
    changed.split_off(others);
    if changed.is_empty() {
        return Ok(Restoration::default());
    }
    let error = guard
        .restore(workspace, &changed)
        .err()
        .map(|e| e.to_string());
    let now = Snapshot::take(workspace, options, Some(&after))?;
    let mut still = guard.diff(&now);
    still.split_off(others);
    let mut not_restored: Vec<String> = still.all().map(str::to_owned).collect();
    not_restored.sort_unstable();
    Ok(Restoration {
        changed,
        not_restored,
        error,
    })
}
