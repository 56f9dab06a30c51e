//! What a run reads and never writes ([`RunContext`]: the pipeline, the options, the run's folder),
//! and [`Run`], the context with the run's state (`state.rs`) as every phase task holds it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::state::RunState;
use crate::event::Event;
use crate::model::{Phase, PhaseId, Pipeline, Worker};
use crate::process::Cancel;
use crate::redact::Redactor;
use crate::store::run::RunDir;
use crate::workspace::{Changes, IgnoreRules, ProtectedPaths, Snapshot, SnapshotOptions};

/// How long a child gets between TERM and KILL.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

/// Options of one run.
#[derive(Clone)]
pub(crate) struct RunOptions {
    /// Phases at once; overrides the pipeline's `max-parallel`.
    pub jobs: Option<u32>,
    /// Run only these phases (their other dependencies are taken as done).
    pub only: Vec<String>,
    /// Time between TERM and KILL.
    pub grace: Duration,
    /// helixflow's own report files (`--events FILE`, `--junit FILE`): like the state folder,
    /// they are left out of workspace snapshots, so writing them is never taken for an agent's
    /// change. Absolute, or relative to the workspace.
    pub reports: Vec<PathBuf>,
    /// Who answers `approval` gates on the spot; `None`: the run waits for `helixflow approve`.
    pub approver: Option<Arc<dyn super::approver::Approver>>,
    /// Phases re-run whatever their records say (`--force`, `--from`).
    pub force: Force,
    /// Which passing phases write a bundle; the workspace is snapshotted before and after every
    /// attempt of those, not only when a check reads the changes.
    pub bundles: Bundles,
}

/// Which passing phases leave a bundle (`phases/<phase>/bundle.hxb`), whose snapshots cost two
/// walks of the workspace per attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bundles {
    /// Agent phases and isolated phases (the default): the walks are small beside an agent.
    Agents,
    /// Every phase, `run` steps included (`run --bundles`; the exported CI jobs use it).
    All,
    /// None (`run --no-bundles`).
    None,
}

impl Bundles {
    /// Whether a passing attempt of `phase` leaves a bundle.
    pub(crate) fn wanted(self, phase: &Phase) -> bool {
        match self {
            Bundles::All => true,
            Bundles::None => false,
            Bundles::Agents => {
                matches!(phase.worker, crate::model::Worker::Agent(_))
                    || phase.isolation == crate::model::Isolation::Worktree
            }
        }
    }
}

/// What the user asked to re-run whatever the records say.
#[derive(Debug, Clone, Default)]
pub(crate) struct Force {
    /// `--force` without a phase: every phase.
    pub all: bool,
    /// `--force PHASE`, repeatable.
    pub phases: Vec<String>,
    /// `--from PHASE`: that phase and every phase downstream of it.
    pub from: Option<String>,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("jobs", &self.jobs)
            .field("only", &self.only)
            .field("grace", &self.grace)
            .field("reports", &self.reports)
            .field("approver", &self.approver.is_some())
            .field("force", &self.force)
            .field("bundles", &self.bundles)
            .finish()
    }
}

impl RunOptions {
    /// Phases at once: `jobs` when given, else the pipeline's `max-parallel`.
    pub(crate) fn max_parallel(&self, pipeline: &Pipeline) -> u32 {
        self.jobs.unwrap_or(pipeline.max_parallel).max(1)
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            jobs: None,
            only: Vec::new(),
            grace: GRACE,
            reports: Vec::new(),
            force: Force::default(),
            approver: None,
            bundles: Bundles::Agents,
        }
    }
}

/// What a run knows from its start and never changes: the pipeline, the options, the run's
/// folder and what the snapshots leave out. Helpers that only read take this (or a part of it).
pub(crate) struct RunContext {
    pub pipeline: Pipeline,
    /// The run's folder under the state folder.
    pub folder: RunDir,
    pub redactor: Arc<Redactor>,
    pub options: RunOptions,
    /// The control socket's path, when it could be opened.
    pub socket: Option<PathBuf>,
    /// What workspace snapshots and gate searches leave out: the state folder and helixflow's
    /// own report files.
    pub excluded: Vec<PathBuf>,
    /// The records of passed phases: removed when a phase starts, written when it passes.
    pub records: crate::store::passed::Records,
    /// The compiled pipelines kept in the state folder, as the run found them.
    pub pipeline_cache: crate::store::pipeline_cache::CacheWatch,
    /// The unfinished run this one continues: a phase that did not pass there is judged from
    /// where it started there (its `start.json`).
    pub resumes: Option<Resumed>,
    /// That run's summary, for the plans of the phases made while this one goes on.
    pub previous: Option<crate::store::run_json::RunSummary>,
    /// The parts of the workspace's git repository no agent or verifier may change.
    pub repository: crate::workspace::RepositoryGuard,
    /// Whether agents and steps are started from the blocking pool: when more may run at once
    /// than there are cores (see `ChildSpec::spawn_in_pool`).
    pub spawn_in_pool: bool,
}

/// A run under way, as its tasks hold it: what never changes, and the state in named parts.
pub(crate) struct Run {
    pub ctx: RunContext,
    pub state: RunState,
}

impl Run {
    /// The phase with this id: one of the pipeline's, or one made while the run goes on.
    pub(crate) fn phase(&self, id: PhaseId) -> &Phase {
        self.state.phases.get(id)
    }

    /// Sends an event to the journal and the reporters.
    pub(crate) fn emit(&self, event: Event) {
        self.state.events.emit(event);
    }

    /// The cancellation tokens every child of the run watches.
    pub(crate) fn cancel(&self) -> &Cancel {
        &self.state.cancel.tokens
    }

    /// The phases that ran at some time during the attempt of `id` under way, in pipeline
    /// order; none for an isolated phase.
    pub(crate) fn phases_alongside(&self, id: PhaseId) -> Vec<&Phase> {
        // An attempt in a worktree of its own sees no other phase's changes: every change there
        // is its own, whatever other phases claim.
        if self.phase(id).isolation == crate::model::Isolation::Worktree {
            return Vec::new();
        }
        self.state
            .alongside
            .of(id)
            .into_iter()
            .map(|other| self.phase(other))
            .collect()
    }
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The environment gates, verifiers and `escalate` get on top of helixflow's: the pipeline's
/// `env`, then the phase's.
pub(crate) fn gate_env(
    pipeline: &crate::model::Pipeline,
    phase: &Phase,
) -> Vec<(OsString, OsString)> {
    pipeline
        .env
        .iter()
        .chain(&phase.env)
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

/// Moves the changes to files the phase's agent keeps for itself (its `bookkeeping` globs) out
/// of `changes`, and returns them.
pub(crate) fn split_bookkeeping(
    pipeline: &Pipeline,
    phase: &Phase,
    changes: &mut Changes,
) -> Changes {
    let Worker::Agent(agent) = &phase.worker else {
        return Changes::default();
    };
    let globs = &pipeline.agents[&agent.value].bookkeeping;
    if globs.is_empty() {
        return Changes::default();
    }
    let set = crate::glob::set(globs);
    changes.split_off(|path| set.is_match(path))
}

/// Largest file whose contents a snapshot keeps for diffs and restores.
const KEPT_CONTENTS: u64 = 1 << 20;

/// How the engine snapshots the workspace for `phase`: never the state folder or helixflow's
/// report files; its protected files even where ignored; contents kept on request; judged by
/// `rules` when given.
pub(crate) fn snapshot_options(
    ctx: &RunContext,
    phase: &Phase,
    keep_contents: bool,
    rules: Option<IgnoreRules>,
) -> SnapshotOptions {
    snapshot_options_excluding(&ctx.excluded, phase, keep_contents, rules)
}

/// [`snapshot_options`] for a workspace judged outside a run, leaving out `excluded`.
pub(crate) fn snapshot_options_excluding(
    excluded: &[std::path::PathBuf],
    phase: &Phase,
    keep_contents: bool,
    rules: Option<IgnoreRules>,
) -> SnapshotOptions {
    SnapshotOptions {
        exclude: excluded.to_vec(),
        keep_contents_under: keep_contents.then_some(KEPT_CONTENTS),
        // Lint rejects a glob that does not compile; the `protect` gate reports it all the same.
        protected: ProtectedPaths::new(&phase.protect).ok().flatten(),
        only_protected: false,
        rules,
        fine_timestamps: false,
    }
}

/// Takes a snapshot, reusing file hashes from `previous` or else from the run's latest snapshot
/// (any earlier snapshot serves: a hash is reused only for a file whose size, times and inode are
/// unchanged), so only files that changed are read again.
pub(crate) async fn take_snapshot(
    run: &Run,
    workspace: &std::path::Path,
    mut options: SnapshotOptions,
    previous: Option<&Snapshot>,
) -> std::io::Result<Snapshot> {
    // The cache is the workspace's: an attempt's worktree keeps its hashes to itself, and its
    // files, which helixflow wrote and then let settle (see `isolation`), are judged by their
    // fine timestamps.
    let cached = workspace == run.ctx.pipeline.workspace;
    options.fine_timestamps = !cached;
    let workspace = workspace.to_path_buf();
    let previous = match previous {
        Some(previous) => Some(previous.clone()),
        None if cached => run.state.snapshots.latest(),
        None => None,
    };
    let snapshot = tokio::task::spawn_blocking(move || {
        Snapshot::take(&workspace, &options, previous.as_ref())
    })
    .await
    .map_err(std::io::Error::other)??;
    if cached {
        run.state.snapshots.keep(&snapshot);
    }
    Ok(snapshot)
}

/// The unfinished run a run continues: its folder, and the phases that passed there.
#[derive(Debug)]
pub(crate) struct Resumed {
    pub folder: RunDir,
    pub passed: std::collections::HashSet<String>,
}
