//! The implicit `protect` gate: protected files stay byte-identical, permission bits included,
//! through the attempt and through every gate command that runs after it.

use super::files::glob_set;
use super::{Finding, GateContext, GateInfo, changed};
use crate::model::Phase;
use crate::workspace::{ProtectedPaths, Snapshot, SnapshotOptions};

/// What helixflow says about the `protect` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "Protected files must stay as they were before the attempt, byte for byte and with the \
             same permissions; restore them:",
    how_to_fix: "restore the protected files exactly as they were",
    outside_a_run: Some("judged only inside a run, against the attempt's starting point"),
};

/// A detail for each protected file the attempt changed, bookkeeping included.
pub(super) fn protect_gate(ctx: &GateContext<'_>) -> Finding {
    let set = match glob_set(&ctx.phase.protect) {
        Ok(set) => set,
        Err(problem) => return Finding::failed(problem),
    };
    Finding::from_problems(
        changed(ctx.changes)
            .chain(changed(ctx.bookkeeping))
            .filter(|(path, _)| set.is_match(path))
            .map(|(path, how)| format!("protected file `{path}` was {how}"))
            .collect(),
    )
}

/// Protected files as they were when last looked at, to catch a gate command or fix that changes
/// one: the `protect` gate judged them before any declared gate ran.
pub(super) struct ProtectWatch {
    /// `None` when the phase protects nothing.
    protected: Option<ProtectedPaths>,
    /// The protected files when last looked at; `None` before the first command ran.
    last: Option<Snapshot>,
    /// A detail for each protected file changed by the gate running now.
    pub(super) notes: Vec<String>,
}

impl ProtectWatch {
    pub(super) fn new(phase: &Phase) -> Self {
        Self {
            protected: ProtectedPaths::new(&phase.protect).ok().flatten(),
            last: None,
            notes: Vec::new(),
        }
    }

    /// Takes note of the protected files before the first command runs.
    pub(super) async fn start(&mut self, ctx: &GateContext<'_>) {
        if self.protected.is_some() && self.last.is_none() {
            match self.take(ctx).await {
                Ok((_, now)) => self.last = Some(now),
                Err(error) => self.notes.push(error),
            }
        }
    }

    /// Notes each protected file that changed while `what` (a command, named for people) ran.
    pub(super) async fn look(&mut self, ctx: &GateContext<'_>, what: &str) {
        if self.protected.is_none() {
            return;
        }
        match self.take(ctx).await {
            Ok((Some(last), now)) => {
                let changes = last.diff(&now);
                self.notes.extend(changed(&changes).map(|(path, how)| {
                    format!(
                        "protected file `{path}` was {how} while {what} ran; protected files must \
                         stay byte-identical"
                    )
                }));
                self.last = Some(now);
            }
            Ok((None, now)) => self.last = Some(now),
            Err(error) => self.notes.push(error),
        }
    }

    /// The protected files now, walking only where they can be, and those last looked at.
    async fn take(
        &mut self,
        ctx: &GateContext<'_>,
    ) -> Result<(Option<Snapshot>, Snapshot), String> {
        let Some(protected) = self.protected.clone() else {
            return Ok((None, Snapshot::default()));
        };
        let last = self.last.take();
        let reuse = match &last {
            Some(last) => last.clone(),
            None => ctx.after.only_protected(&protected),
        };
        let options = SnapshotOptions {
            exclude: ctx.exclude.to_vec(),
            protected: Some(protected),
            only_protected: true,
            ..SnapshotOptions::default()
        };
        let workspace = ctx.workspace.to_owned();
        let taken =
            tokio::task::spawn_blocking(move || Snapshot::take(&workspace, &options, Some(&reuse)))
                .await;
        match taken {
            Ok(Ok(now)) => Ok((last, now)),
            Ok(Err(error)) => Err(format!("the protected files could not be checked: {error}")),
            Err(error) => Err(format!("the protected files could not be checked: {error}")),
        }
    }
}
