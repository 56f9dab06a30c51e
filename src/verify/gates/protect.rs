//! The implicit `protect` gate: protected files stay byte-identical, permission bits included,
//! through the attempt and through every gate command that runs after it.

use super::files::glob_set;
use super::scope::LeftToOthers;
use super::{Finding, GateContext, GateInfo, changed};
use crate::model::Phase;
use crate::text::code_name;
use crate::workspace::{IgnoreRules, ProtectedPaths, Snapshot, SnapshotOptions, protect_root};

/// What helixflow says about the `protect` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "Protected files must stay as they were before the attempt, byte for byte and with the \
             same permissions; restore them:",
    how_to_fix: "restore the protected files exactly as they were",
    outside_a_run: Some("judged only inside a run, against the attempt's starting point"),
};

/// A detail for each protected file the phase changed, bookkeeping included. A change that a
/// phase running alongside claims (by its `scope` or `outputs`) is that phase's work, as for
/// `scope`: this phase is neither blamed nor told to undo it.
pub(super) fn protect_gate(ctx: &GateContext<'_>) -> Finding {
    let set = match glob_set(&ctx.phase.protect) {
        Ok(set) => set,
        Err(problem) => return Finding::failed(problem),
    };
    let others = LeftToOthers::of(ctx);
    let mut finding = Finding::from_problems(
        changed(ctx.changes)
            .filter(|(path, _)| !others.contains(path))
            .chain(changed(ctx.bookkeeping))
            .filter(|(path, _)| set.is_match(path))
            .map(|(path, how)| format!("protected file {} was {how}", code_name(path)))
            .collect(),
    );
    let protected_of_others = others.only(|path| set.is_match(path));
    finding.details.extend(protected_of_others.notes());
    finding
}

/// Whether a change to `path` is judged, given the ignore rules `rules` of the workspace `root`
/// and the phase's `protect` patterns. A file that is not ignored is. An ignored one is only where
/// a pattern that matches it points into ignored ground itself: it names the file (`.env`), or
/// its folder before the first wildcard is ignored (`data/**` with `data/` ignored). The caches
/// and artifacts tools write into ignored folders under a protected tree (`src/**` holding
/// `__pycache__/`) are nobody's change.
pub(crate) fn judged_where_ignored(
    rules: &IgnoreRules,
    root: &std::path::Path,
    protect: &[String],
    path: &str,
) -> bool {
    if !rules.ignores(root, path) {
        return true;
    }
    protect.iter().any(|pattern| {
        let matches = crate::glob::compile_glob(&super::clean(pattern))
            .is_ok_and(|glob| glob.compile_matcher().is_match(path));
        matches
            && protect_root(pattern)
                .is_some_and(|(root_path, is_dir)| rules.ignores_entry(root, &root_path, is_dir))
    })
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
                let rules = ctx.after.ignore_rules();
                let judged = |path: &str| {
                    rules.as_ref().is_none_or(|rules| {
                        judged_where_ignored(rules, ctx.workspace, &ctx.phase.protect, path)
                    })
                };
                let changed = changed(&changes).filter(|(path, _)| judged(path));
                self.notes.extend(changed.map(|(path, how)| {
                    format!(
                        "protected file {} was {how} while {what} ran; protected files must \
                         stay byte-identical",
                        code_name(path)
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
