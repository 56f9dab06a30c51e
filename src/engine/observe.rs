//! What an attempt did to its workspace, observed the same way wherever it is judged: after the
//! attempt, and for a `helixflow verify` receipt while it works. The snapshot is taken off the
//! async runtime's threads, by the ignore rules from before the attempt (an ignore file the agent
//! wrote or changed hides none of its changes), and the agent's bookkeeping is set apart.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use super::context::{Run, gate_env, snapshot_options, split_bookkeeping, take_snapshot};
use crate::model::{Phase, Pipeline};
use crate::verify::gates::judged_where_ignored;
use crate::verify::judge::{Changed, Scene};
use crate::workspace::{Changes, Snapshot};

/// The workspace after (part of) an attempt, and what the attempt changed.
pub(crate) struct Observed {
    pub after: Snapshot,
    pub changes: Changes,
    pub bookkeeping: Changes,
}

impl Observed {
    /// What the attempt changed, as the judge reads it.
    pub(crate) fn changed(&self) -> Changed<'_> {
        Changed {
            changes: &self.changes,
            bookkeeping: &self.bookkeeping,
        }
    }
}

/// Observes `workspace` now against `before`, the workspace when the attempt began. Without a
/// `before` nothing reads the changes; the workspace is still listed when `list` asks for it
/// (near-miss hints on missing outputs).
pub(crate) async fn observe(
    run: &Run,
    phase: &Phase,
    workspace: &Path,
    before: Option<&Arc<Snapshot>>,
    list: bool,
) -> std::io::Result<Observed> {
    let after = if before.is_some() || list {
        let rules = before.and_then(|before| before.ignore_rules());
        let options = snapshot_options(&run.ctx, phase, false, rules);
        take_snapshot(run, workspace, options, before.map(AsRef::as_ref)).await?
    } else {
        Snapshot::default()
    };
    let (changes, bookkeeping) = match before {
        Some(before) => changes_since(&run.ctx.pipeline, phase, workspace, before, &after),
        None => (Changes::default(), Changes::default()),
    };
    Ok(Observed {
        after,
        changes,
        bookkeeping,
    })
}

/// What changed in `workspace` from `before` to `after`, as a phase's gates read it: the
/// changes, and apart from them the changes to its agent's `bookkeeping` files.
pub(crate) fn changes_since(
    pipeline: &Pipeline,
    phase: &Phase,
    workspace: &Path,
    before: &Snapshot,
    after: &Snapshot,
) -> (Changes, Changes) {
    let mut changes = before.diff(after);
    // Ignored files are in the snapshots only because a `protect` pattern reaches them; those
    // that are caches under a protected tree are nobody's change.
    if let Some(rules) = before.ignore_rules().or_else(|| after.ignore_rules())
        && !phase.protect.is_empty()
    {
        changes.split_off(|path| !judged_where_ignored(&rules, workspace, &phase.protect, path));
    }
    let bookkeeping = split_bookkeeping(pipeline, phase, &mut changes);
    (changes, bookkeeping)
}

/// The environment gate commands of `phase` get on top of helixflow's.
pub(crate) fn env(run: &Run, phase: &Phase) -> Vec<(OsString, OsString)> {
    gate_env(&run.ctx.pipeline, phase)
}

/// Where the gates of a run judge `workspace`, with `env` and their logs in `logs`.
pub(crate) fn scene<'a>(
    run: &'a Run,
    workspace: &'a Path,
    env: &'a [(OsString, OsString)],
    logs: &'a Path,
) -> Scene<'a> {
    Scene {
        workspace,
        exclude: &run.ctx.excluded,
        env,
        logs,
        cancel: run.cancel(),
        grace: run.ctx.options.grace,
        redactor: run.ctx.redactor.clone(),
        phases: run.state.phases.all(),
    }
}
