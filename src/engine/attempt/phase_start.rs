//! Where a phase started, kept across runs: a phase that fails leaves the workspace as it was
//! before its first attempt (`start.json` in its folder of the run), and a run that resumes the
//! failed one judges the phase from there, not from the workspace as the failed run left it. So a
//! forbidden change a failed run left behind still fails the phase, and work already done before
//! counts as the phase's.

use std::sync::Arc;

use crate::engine::context::{Run, RunContext};
use crate::event::Event;
use crate::model::{Isolation, Phase};
use crate::workspace::{ListedFile, Snapshot};

/// The file in a phase's folder of a run that holds where it started.
const FILE_NAME: &str = "start.json";

/// Where `phase` started in the run this one resumes, when it did not pass there and left one.
pub(super) fn resumed(ctx: &RunContext, phase: &Phase) -> Option<Arc<Snapshot>> {
    if phase.isolation == Isolation::Worktree {
        return None;
    }
    let resumed = ctx.resumes.as_ref()?;
    if resumed.passed.contains(&phase.name.value) {
        return None;
    }
    let path = resumed.folder.phase_dir(&phase.name.value).join(FILE_NAME);
    let text = std::fs::read_to_string(path).ok()?;
    let listing: Vec<ListedFile> = serde_json::from_str(&text).ok()?;
    Some(Arc::new(Snapshot::from_listing(listing)))
}

/// Keeps where `phase` started (`before`), in its folder of this run.
pub(super) fn keep(run: &Run, phase: &Phase, before: Option<&Snapshot>) {
    let Some(before) = before else { return };
    let dir = run.ctx.folder.phase_dir(&phase.name.value);
    let written = serde_json::to_vec(&before.listing())
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            std::fs::create_dir_all(&dir)?;
            crate::store::run::write_atomic(&dir.join(FILE_NAME), &bytes)
        });
    if let Err(e) = written {
        run.emit(Event::Warning {
            message: format!(
                "cannot keep where \"{}\" started ({e}): a run that resumes it judges it from the workspace as it finds it",
                phase.name.value
            ),
        });
    }
}
