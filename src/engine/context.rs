//! The run's shared state: what the scheduler, every phase task and the control socket read and
//! update while a run goes on. Everything else in the engine depends on this file, and it on
//! nothing in the engine.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::event::usage::{Spend, Usage};
use crate::event::{Event, GateReport, RunStatus};
use crate::model::{Phase, Pipeline, Worker};
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

/// State shared by the scheduler and the phase tasks.
pub(crate) struct Shared {
    pub pipeline: Pipeline,
    pub run: RunDir,
    pub redactor: Arc<Redactor>,
    pub cancel: Cancel,
    pub options: RunOptions,
    pub(super) events: mpsc::Sender<Event>,
    pub(super) stopping: AtomicBool,
    /// Retries left in the run's budget; `None` is unlimited.
    pub(super) retries_left: Option<AtomicU32>,
    pub(super) cancel_reason: Mutex<String>,
    /// What the run's attempts cost so far, for its `max-cost`.
    pub(super) spend: Mutex<Spend>,
    /// Attempts now running, for `helixflow verify` over the control socket.
    pub live: LiveAttempts,
    /// The control socket's path, when it could be opened.
    pub socket: Option<PathBuf>,
    /// What workspace snapshots and gate searches leave out: the state folder and helixflow's
    /// own report files.
    pub excluded: Vec<PathBuf>,
    /// The records of passed phases: removed when a phase starts, written when it passes.
    pub records: crate::store::passed::Records,
    /// The parts of the workspace's git repository no agent or verifier may change.
    pub repository: crate::workspace::RepositoryGuard,
    /// The latest workspace snapshot of the run, a cache of file hashes for the next one.
    pub latest_snapshot: Mutex<Option<crate::workspace::Snapshot>>,
    /// Which phases ran alongside each attempt under way.
    pub alongside: Mutex<Alongside>,
    /// Whether agents and steps are started from the blocking pool: when more may run at once
    /// than there are cores (see `ChildSpec::spawn_in_pool`).
    pub spawn_in_pool: bool,
}

impl Shared {
    /// Sends an event to the journal and the reporters.
    pub(crate) fn emit(&self, event: Event) {
        // The dispatcher outlives every phase task; a send can only fail after it stopped.
        let _ = self.events.send(event.redacted(&self.redactor));
    }

    /// Whether `on-failure "stop"` was triggered: no new phases, no more retries.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Takes one retry from the run's budget; false when it is spent.
    pub(crate) fn take_retry(&self) -> bool {
        match &self.retries_left {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    /// Retries left in the run's budget now; `None` when it is unlimited.
    pub(crate) fn retries_left(&self) -> Option<u32> {
        self.retries_left
            .as_ref()
            .map(|left| left.load(Ordering::SeqCst))
    }

    /// What the run's attempts cost so far.
    pub(crate) fn spend(&self) -> Spend {
        self.spend.lock().map(|s| *s).unwrap_or_default()
    }

    /// Adds an attempt's usage to the run's spend.
    pub(crate) fn add_spend(&self, usage: &Usage) {
        if let Ok(mut spend) = self.spend.lock() {
            spend.add(usage);
        }
    }

    /// Why running phases were cancelled.
    pub(crate) fn cancel_reason(&self) -> String {
        self.cancel_reason
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    pub(super) fn cancel_with(
        &self,
        reason: &str,
        status: &Mutex<Option<RunStatus>>,
        as_status: RunStatus,
    ) {
        if let Ok(mut r) = self.cancel_reason.lock()
            && r.is_empty()
        {
            reason.clone_into(&mut r);
        }
        if let Ok(mut s) = status.lock() {
            s.get_or_insert(as_status);
        }
        self.cancel.soft.cancel();
    }
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A passing or failing check made during an attempt.
#[derive(Debug, Clone)]
pub(crate) struct Receipt {
    pub success: bool,
    pub gates: Vec<GateReport>,
    /// The workspace when the receipt was written: anything that differs later was changed
    /// after verifying.
    pub snapshot: Snapshot,
}

/// A running attempt, as the control socket sees it.
#[derive(Debug)]
pub(crate) struct LiveAttempt {
    pub attempt: u32,
    /// The attempt's workspace: the pipeline's, or the attempt's worktree.
    pub workspace: PathBuf,
    /// The workspace before the attempt; `None` when nothing the phase checks reads changes
    /// (no scope, protect or changes gate, no self or sub-agent verification).
    pub before: Option<Arc<Snapshot>>,
    pub dir: PathBuf,
    pub receipts: Mutex<Vec<Receipt>>,
}

/// Running attempts by phase name.
pub(crate) type LiveAttempts = Mutex<BTreeMap<String, Arc<LiveAttempt>>>;

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
pub(crate) fn split_bookkeeping(shared: &Shared, phase: &Phase, changes: &mut Changes) -> Changes {
    let Worker::Agent(agent) = &phase.worker else {
        return Changes::default();
    };
    let globs = &shared.pipeline.agents[&agent.value].bookkeeping;
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
    shared: &Shared,
    phase: &Phase,
    keep_contents: bool,
    rules: Option<IgnoreRules>,
) -> SnapshotOptions {
    SnapshotOptions {
        exclude: shared.excluded.clone(),
        keep_contents_under: keep_contents.then_some(KEPT_CONTENTS),
        // Lint rejects a glob that does not compile; the `protect` gate reports it all the same.
        protected: ProtectedPaths::new(&phase.protect).ok().flatten(),
        only_protected: false,
        rules,
    }
}

/// Takes a snapshot, reusing file hashes from `previous` or else from the run's latest snapshot
/// (any earlier snapshot serves: a hash is reused only for a file whose size, times and inode are
/// unchanged), so only files that changed are read again.
pub(crate) async fn take_snapshot(
    shared: &Shared,
    workspace: &std::path::Path,
    options: SnapshotOptions,
    previous: Option<&Snapshot>,
) -> std::io::Result<Snapshot> {
    // The cache is the workspace's: an attempt's worktree keeps its hashes to itself.
    let cached = workspace == shared.pipeline.workspace;
    let workspace = workspace.to_path_buf();
    let previous = match previous {
        Some(previous) => Some(previous.clone()),
        None if cached => shared
            .latest_snapshot
            .lock()
            .ok()
            .and_then(|latest| latest.clone()),
        None => None,
    };
    let snapshot = tokio::task::spawn_blocking(move || {
        Snapshot::take(&workspace, &options, previous.as_ref())
    })
    .await
    .map_err(std::io::Error::other)??;
    if cached && let Ok(mut latest) = shared.latest_snapshot.lock() {
        *latest = Some(snapshot.clone());
    }
    Ok(snapshot)
}

/// Which phases ran alongside each attempt under way. A change another phase made while an
/// attempt ran is in that attempt's snapshots too; knowing who else ran lets the gates leave
/// such a change to the phase whose `scope` or `outputs` claim it.
#[derive(Debug, Default)]
pub(crate) struct Alongside {
    /// The phases running now.
    running: BTreeSet<usize>,
    /// For each phase with an attempt under way: every other phase running at any time since it
    /// began.
    attempts: HashMap<usize, BTreeSet<usize>>,
}

/// The phases that ran at some time during the attempt of phase `index` under way, in pipeline
/// order; none for an isolated phase.
pub(crate) fn phases_alongside(shared: &Shared, index: usize) -> Vec<&Phase> {
    // An attempt in a worktree of its own sees no other phase's changes: every change there is
    // its own, whatever other phases claim.
    if shared
        .pipeline
        .phases
        .get(index)
        .is_some_and(|phase| phase.isolation == crate::model::Isolation::Worktree)
    {
        return Vec::new();
    }
    let indices: Vec<usize> = shared
        .alongside
        .lock()
        .ok()
        .and_then(|alongside| alongside.attempts.get(&index).cloned())
        .map(|set| set.into_iter().collect())
        .unwrap_or_default();
    indices
        .into_iter()
        .filter_map(|i| shared.pipeline.phases.get(i))
        .collect()
}

/// The index of `phase` in the pipeline.
pub(crate) fn phase_index(shared: &Shared, phase: &Phase) -> usize {
    shared
        .pipeline
        .phases
        .iter()
        .position(|p| std::ptr::eq(p, phase))
        .unwrap_or(usize::MAX)
}

/// Notes a phase as running for as long as it lives.
pub(crate) struct PhaseRunning<'s> {
    shared: &'s Shared,
    index: usize,
}

impl<'s> PhaseRunning<'s> {
    pub(crate) fn start(shared: &'s Shared, index: usize) -> PhaseRunning<'s> {
        if let Ok(mut alongside) = shared.alongside.lock() {
            for (&attempt_of, seen) in &mut alongside.attempts {
                if attempt_of != index {
                    seen.insert(index);
                }
            }
            alongside.running.insert(index);
        }
        PhaseRunning { shared, index }
    }
}

impl Drop for PhaseRunning<'_> {
    fn drop(&mut self) {
        if let Ok(mut alongside) = self.shared.alongside.lock() {
            alongside.running.remove(&self.index);
        }
    }
}

/// Notes the phases running alongside an attempt for as long as it lives.
pub(crate) struct AttemptWindow<'s> {
    shared: &'s Shared,
    index: usize,
}

impl<'s> AttemptWindow<'s> {
    pub(crate) fn open(shared: &'s Shared, index: usize) -> AttemptWindow<'s> {
        if let Ok(mut alongside) = shared.alongside.lock() {
            let mut seen = alongside.running.clone();
            seen.remove(&index);
            alongside.attempts.insert(index, seen);
        }
        AttemptWindow { shared, index }
    }
}

impl Drop for AttemptWindow<'_> {
    fn drop(&mut self) {
        if let Ok(mut alongside) = self.shared.alongside.lock() {
            alongside.attempts.remove(&self.index);
        }
    }
}
