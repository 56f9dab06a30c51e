//! What changes while a run goes on, in named parts: each part has its own lock and the only
//! methods that write it, so a reader sees who may change what.
//!
//! | part | written by |
//! |---|---|
//! | [`Events`] | everyone: it only sends, redacted, to the dispatcher |
//! | [`Budget`] | phase tasks take retries and add spend; the scheduler sets `stopping` |
//! | [`Cancellation`] | the scheduler (timeout, a failed task) and the signal task |
//! | [`LiveAttempts`] | the worker step of an attempt; read by the control socket |
//! | [`Alongside`] | phase tasks, through [`PhaseRunning`] and [`AttemptWindow`] guards |
//! | [`SnapshotCache`] | whoever takes a snapshot of the workspace |
//! | [`PhaseTable`] | the scheduler, adding the phases made while the run goes on |
//! | [`FanOuts`] | the scheduler (items made, ended); phase tasks add an item's spend |

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use crate::event::usage::{Spend, Usage};
use crate::event::{CancelReason, Event, GateReport, RunStatus};
use crate::model::{Phase, PhaseId, Pipeline};
use crate::process::Cancel;
use crate::redact::Redactor;
use crate::workspace::Snapshot;

/// The run's mutable state.
pub(crate) struct RunState {
    pub events: Events,
    pub budget: Budget,
    pub cancel: Cancellation,
    pub live: LiveAttempts,
    /// Phases waiting for `helixflow approve`, for the control socket.
    pub approvals: super::approver::WaitingApprovals,
    pub alongside: Alongside,
    pub snapshots: SnapshotCache,
    pub phases: PhaseTable,
    pub fan_outs: FanOuts,
}

impl RunState {
    /// A run's state as it starts: nothing spent, nothing running, nothing cancelled.
    pub(crate) fn new(events: Events, pipeline: &Pipeline) -> Self {
        let retry_budget = pipeline.retry_budget;
        Self {
            phases: PhaseTable::new(pipeline),
            fan_outs: FanOuts::default(),
            events,
            budget: Budget::new(retry_budget),
            cancel: Cancellation::default(),
            live: LiveAttempts::default(),
            approvals: super::approver::WaitingApprovals::default(),
            alongside: Alongside::default(),
            snapshots: SnapshotCache::default(),
        }
    }
}

/// Sends events to the journal and the reporters, redacted first.
pub(crate) struct Events {
    sender: mpsc::Sender<Event>,
    redactor: Arc<Redactor>,
}

impl Events {
    pub(crate) fn new(sender: mpsc::Sender<Event>, redactor: Arc<Redactor>) -> Self {
        Self { sender, redactor }
    }

    /// Sends an event to the journal and the reporters.
    pub(crate) fn emit(&self, event: Event) {
        // The dispatcher outlives every phase task; a send can only fail after it stopped.
        let _ = self.sender.send(event.redacted(&self.redactor));
    }
}

/// The run's budgets: retries left (`retry-budget`), what its attempts cost (`max-cost`), and
/// whether `on-failure "stop"` ended the granting of new work.
pub(crate) struct Budget {
    /// `None` is unlimited.
    retries_left: Option<AtomicU32>,
    spend: Mutex<Spend>,
    stopping: AtomicBool,
}

impl Budget {
    pub(crate) fn new(retry_budget: Option<u32>) -> Self {
        Self {
            retries_left: retry_budget.map(AtomicU32::new),
            spend: Mutex::default(),
            stopping: AtomicBool::new(false),
        }
    }

    /// Whether `on-failure "stop"` was triggered: no new phases, no more retries.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Grants no new phase or retry from now on (the scheduler, after `on-failure "stop"`).
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
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
}

/// The run's cancellation: the tokens every child watches, why they fired (the first reason
/// wins), and the status the run ends with because of it.
#[derive(Default)]
pub(crate) struct Cancellation {
    pub tokens: Cancel,
    reason: Mutex<Option<CancelReason>>,
    status: Mutex<Option<RunStatus>>,
}

impl Cancellation {
    /// Cancels every running phase for `reason`; the first reason and status stay.
    pub(crate) fn cancel(&self, reason: CancelReason) {
        let status = reason.run_status();
        if let Ok(mut r) = self.reason.lock() {
            r.get_or_insert(reason);
        }
        if let Ok(mut s) = self.status.lock() {
            s.get_or_insert(status);
        }
        self.tokens.soft.cancel();
    }

    /// Whether the run was cancelled (softly: children get TERM, then KILL after the grace).
    pub(crate) fn is_cancelled(&self) -> bool {
        self.tokens.soft.is_cancelled()
    }

    /// Why running phases were cancelled, in words; empty when they were not.
    pub(crate) fn reason(&self) -> String {
        self.reason
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(ToString::to_string))
            .unwrap_or_default()
    }

    /// The status the run ends with because it was cancelled; `None` when it was not.
    pub(crate) fn status(&self) -> Option<RunStatus> {
        self.status.lock().ok().and_then(|s| *s)
    }
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
    pub phase: PhaseId,
    pub attempt: u32,
    /// The attempt's workspace: the pipeline's, or the attempt's worktree.
    pub workspace: PathBuf,
    /// The workspace before the attempt; `None` when nothing the phase checks reads changes
    /// (no scope, protect or changes gate, no self or sub-agent verification).
    pub before: Option<Arc<Snapshot>>,
    pub dir: PathBuf,
    pub receipts: Mutex<Vec<Receipt>>,
}

/// Attempts now running, for `helixflow verify` over the control socket.
#[derive(Debug, Default)]
pub(crate) struct LiveAttempts(Mutex<BTreeMap<PhaseId, Arc<LiveAttempt>>>);

impl LiveAttempts {
    /// Notes an attempt as running until [`LiveAttempts::end`].
    pub(crate) fn begin(&self, live: Arc<LiveAttempt>) {
        if let Ok(mut attempts) = self.0.lock() {
            attempts.insert(live.phase, live);
        }
    }

    /// The attempt of `phase` has ended.
    pub(crate) fn end(&self, phase: PhaseId) {
        if let Ok(mut attempts) = self.0.lock() {
            attempts.remove(&phase);
        }
    }

    /// The attempt of `phase` running now.
    pub(crate) fn get(&self, phase: PhaseId) -> Option<Arc<LiveAttempt>> {
        self.0.lock().ok().and_then(|a| a.get(&phase).cloned())
    }
}

/// The latest workspace snapshot of the run, a cache of file hashes for the next one.
#[derive(Default)]
pub(crate) struct SnapshotCache(Mutex<Option<Snapshot>>);

impl SnapshotCache {
    pub(crate) fn latest(&self) -> Option<Snapshot> {
        self.0.lock().ok().and_then(|latest| latest.clone())
    }

    pub(crate) fn keep(&self, snapshot: &Snapshot) {
        if let Ok(mut latest) = self.0.lock() {
            *latest = Some(snapshot.clone());
        }
    }
}

/// Which phases ran alongside each attempt under way. A change another phase made while an
/// attempt ran is in that attempt's snapshots too; knowing who else ran lets the gates leave
/// such a change to the phase whose `scope` or `outputs` claim it.
#[derive(Debug, Default)]
pub(crate) struct Alongside(Mutex<AlongsideSets>);

#[derive(Debug, Default)]
struct AlongsideSets {
    /// The phases running now.
    running: BTreeSet<PhaseId>,
    /// For each phase with an attempt under way: every other phase running at any time since it
    /// began.
    attempts: HashMap<PhaseId, BTreeSet<PhaseId>>,
}

impl Alongside {
    /// The phases that ran at some time during the attempt of `phase` under way, in pipeline
    /// order.
    pub(crate) fn of(&self, phase: PhaseId) -> Vec<PhaseId> {
        self.0
            .lock()
            .ok()
            .and_then(|sets| sets.attempts.get(&phase).cloned())
            .map(|set| set.into_iter().collect())
            .unwrap_or_default()
    }
}

/// Notes a phase as running for as long as it lives.
pub(crate) struct PhaseRunning<'s> {
    alongside: &'s Alongside,
    phase: PhaseId,
}

impl<'s> PhaseRunning<'s> {
    pub(crate) fn start(alongside: &'s Alongside, phase: PhaseId) -> PhaseRunning<'s> {
        if let Ok(mut sets) = alongside.0.lock() {
            for (&attempt_of, seen) in &mut sets.attempts {
                if attempt_of != phase {
                    seen.insert(phase);
                }
            }
            sets.running.insert(phase);
        }
        PhaseRunning { alongside, phase }
    }
}

impl Drop for PhaseRunning<'_> {
    fn drop(&mut self) {
        if let Ok(mut sets) = self.alongside.0.lock() {
            sets.running.remove(&self.phase);
        }
    }
}

/// Notes the phases running alongside an attempt for as long as it lives.
pub(crate) struct AttemptWindow<'s> {
    alongside: &'s Alongside,
    phase: PhaseId,
}

impl<'s> AttemptWindow<'s> {
    pub(crate) fn open(alongside: &'s Alongside, phase: PhaseId) -> AttemptWindow<'s> {
        if let Ok(mut sets) = alongside.0.lock() {
            let mut seen = sets.running.clone();
            seen.remove(&phase);
            sets.attempts.insert(phase, seen);
        }
        AttemptWindow { alongside, phase }
    }
}

impl Drop for AttemptWindow<'_> {
    fn drop(&mut self) {
        if let Ok(mut sets) = self.alongside.0.lock() {
            sets.attempts.remove(&self.phase);
        }
    }
}

/// Every phase of the run by id: the pipeline's, then those made while it runs (the items of
/// `for-each` phases, the phases a planner writes). Entries are only added, and never move, so a
/// phase task keeps a plain reference to its phase.
pub(crate) struct PhaseTable {
    /// The pipeline's phases: ids from 0.
    base: std::sync::Arc<Vec<Phase>>,
    /// The phases made while the run goes on: ids from `base.len()`.
    made: boxcar::Vec<Phase>,
    by_name: Mutex<HashMap<String, PhaseId>>,
    /// Every phase as one slice, for the gates (a near miss never points at a file another phase
    /// declares): `base` until a phase is made, then one copy of the table after each addition,
    /// the latest at `latest - 1`.
    copies: boxcar::Vec<Vec<Phase>>,
    latest: AtomicUsize,
}

impl PhaseTable {
    /// The table of a run of `pipeline`: its phases, with their ids.
    pub(crate) fn new(pipeline: &Pipeline) -> Self {
        let mut by_name = HashMap::with_capacity(pipeline.phases.len());
        for (index, phase) in pipeline.phases.iter().enumerate() {
            by_name
                .entry(phase.name.value.clone())
                .or_insert(PhaseId::from_table(index));
        }
        Self {
            base: std::sync::Arc::clone(&pipeline.phases),
            made: boxcar::Vec::new(),
            by_name: Mutex::new(by_name),
            copies: boxcar::Vec::new(),
            latest: AtomicUsize::new(0),
        }
    }

    /// Every phase now, as one slice.
    pub(crate) fn all(&self) -> &[Phase] {
        match self.latest.load(Ordering::SeqCst) {
            0 => &self.base,
            latest => &self.copies[latest - 1],
        }
    }

    /// The phase with this id.
    pub(crate) fn get(&self, id: PhaseId) -> &Phase {
        let index = id.index();
        self.base
            .get(index)
            .unwrap_or_else(|| &self.made[index - self.base.len()])
    }

    /// The id of the phase with this name.
    pub(crate) fn id(&self, name: &str) -> Option<PhaseId> {
        self.by_name.lock().ok()?.get(name).copied()
    }

    /// Adds phases made while the run goes on; their ids, in order. Only the scheduler adds.
    pub(crate) fn add(&self, made: Vec<Phase>) -> Vec<PhaseId> {
        let mut by_name = self.by_name.lock().unwrap_or_else(PoisonError::into_inner);
        let ids = made
            .into_iter()
            .map(|phase| {
                let name = phase.name.value.clone();
                let id = PhaseId::from_table(self.base.len() + self.made.push(phase));
                by_name.entry(name).or_insert(id);
                id
            })
            .collect();
        let copy = self.iter().map(|(_, phase)| phase.clone()).collect();
        self.latest
            .store(self.copies.push(copy) + 1, Ordering::SeqCst);
        ids
    }

    /// Every phase now, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (PhaseId, &Phase)> {
        let base = self.base.len();
        self.base
            .iter()
            .enumerate()
            .chain(
                self.made
                    .iter()
                    .map(move |(index, phase)| (base + index, phase)),
            )
            .map(|(index, phase)| (PhaseId::from_table(index), phase))
    }
}

/// What the items of each `for-each` phase spent together, against the phase's `max-cost`.
#[derive(Default)]
pub(crate) struct FanOuts(Mutex<HashMap<PhaseId, Spend>>);

impl FanOuts {
    /// Adds an item's attempt to what the items of `of` spent.
    pub(crate) fn add_spend(&self, of: PhaseId, usage: &Usage) {
        if let Ok(mut spends) = self.0.lock() {
            spends.entry(of).or_default().add(usage);
        }
    }

    /// What the items of `of` spent so far.
    pub(crate) fn spend(&self, of: PhaseId) -> Spend {
        self.0
            .lock()
            .ok()
            .and_then(|spends| spends.get(&of).copied())
            .unwrap_or_default()
    }
}
