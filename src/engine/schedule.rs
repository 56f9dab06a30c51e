//! The scheduler: phases start as their dependencies pass, at most `max-parallel` at once, until
//! every selected phase is decided; a failed dependency skips its dependents, `on-failure "stop"`
//! and cancellation stop new starts, and the run's `timeout` cancels what runs. A `for-each`
//! phase is made into its items' phases once it is ready (`expand.rs`): they join the tables as
//! phases of their own, at most its `max-parallel` at once, and it is decided once they all are.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::attempt::{PhaseResult, run_phase};
use super::context::{Run, millis};
use super::fingerprint;
use super::plan::{self, PhasePlan, Reason};
use crate::event::{CancelReason, Event, PhaseStatus};
use crate::graph::PhaseGraph;
use crate::model::{OnFailure, PhaseId, Worker};

/// How many `run` steps ready to start may have their records removed ahead of their start, in
/// the sync of the phases that start now. A helixflow killed outright loses at most these records
/// of phases that did not start (they run again next time); otherwise they are put back.
const AHEAD: usize = 32;

/// Starts phases as their dependencies pass, at most `max_parallel` at once. Returns whether any
/// phase did not pass.
pub(super) async fn schedule(
    run: &Arc<Run>,
    selected: &[PhaseId],
    plans: Vec<PhasePlan>,
    max_parallel: usize,
    timeout: Option<Duration>,
) -> bool {
    let mut scheduler = Scheduler::new(run, selected, plans, max_parallel);
    // A planner that is up to date still has its phases: they join now.
    for i in 0..scheduler.state.len() {
        if scheduler.state[i] == Some(PhaseStatus::UpToDate) {
            scheduler.join_generated(i);
        }
    }
    let mut running: JoinSet<(usize, PhaseResult)> = JoinSet::new();
    // Phases that passed, writing their records: their work is over, so they leave room for the
    // next phase at once, but their dependents wait until the record is written.
    let mut recording: JoinSet<(usize, PhaseResult)> = JoinSet::new();
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    loop {
        scheduler.start_ready(&mut running);
        if running.is_empty() && recording.is_empty() {
            break;
        }
        let joined = tokio::select! {
            Some(joined) = running.join_next() => Ended::Ran(joined),
            Some(joined) = recording.join_next() => Ended::Recorded(joined),
            () = sleep_until(deadline) => {
                let limit = humantime::format_duration(timeout.unwrap_or_default());
                run.state.cancel.cancel(CancelReason::TimedOut(limit.to_string()));
                continue;
            }
        };
        // Every phase that has ended by now is taken in this turn, so that the next phases
        // start after one sync of the records for all of them.
        let mut joined = Some(joined);
        while let Some(ended) = joined {
            match ended {
                Ended::Ran(Ok((i, result))) if result.status == PhaseStatus::Passed => {
                    let id = PhaseId::from_table(i);
                    let phase = run.phase(id);
                    let work_of = move |run: &Run| {
                        super::attempt::work_files(&run.ctx.folder, &run.phase(id).name.value)
                    };
                    let work =
                        fingerprint::stamps_no_file(&run.ctx.pipeline, phase).then(|| work_of(run));
                    if let Some(work) = work.as_ref().filter(|work| work.is_empty()) {
                        // A few small files to write: here, rather than pay for a hand-off to
                        // another thread and back (a run of quick steps would after each).
                        record(run, id, work);
                        scheduler.finished(i, result);
                    } else {
                        let run = run.clone();
                        recording.spawn_blocking(move || {
                            let work = work.unwrap_or_else(|| work_of(&run));
                            record(&run, id, &work);
                            (i, result)
                        });
                    }
                }
                Ended::Ran(Ok((i, result))) | Ended::Recorded(Ok((i, result))) => {
                    scheduler.finished(i, result);
                }
                Ended::Ran(Err(_)) | Ended::Recorded(Err(_)) => {
                    // A phase task panicked: a bug in helixflow. Stop cleanly rather than hang.
                    run.state.cancel.cancel(CancelReason::Internal);
                    scheduler.any_failed = true;
                }
            }
            joined = running
                .try_join_next()
                .map(Ended::Ran)
                .or_else(|| recording.try_join_next().map(Ended::Recorded));
        }
    }
    scheduler.any_failed
}

/// What the scheduler knows. Its tables are indexed like the run's table of phases
/// (`PhaseId::index`), and grow with it.
struct Scheduler<'r> {
    run: &'r Arc<Run>,
    /// Each phase's selected dependencies.
    dependencies: Vec<Vec<usize>>,
    /// How each phase ended; `None` while it waits or runs.
    state: Vec<Option<PhaseStatus>>,
    /// Attempts each phase made.
    attempts: Vec<u32>,
    /// The phases neither started nor decided, in order: each pass looks at these only.
    waiting: Vec<usize>,
    started: Vec<bool>,
    /// For the phase of an item: its `for-each` phase.
    group_of: Vec<Option<usize>>,
    /// Each `for-each` phase made into items, by its index.
    groups: HashMap<usize, Group>,
    /// Plans up to date as far as was known before the run, downstream of work made while it
    /// runs: decided once their dependencies are.
    deferred: HashMap<usize, PhasePlan>,
    /// Phases that started in this run, by name: a phase made later that depends on one runs.
    ran: BTreeSet<String>,
    /// Why no phase starts any more, after `on-failure "stop"`.
    stop_reason: Option<String>,
    any_failed: bool,
    max_parallel: usize,
}

/// The items of a `for-each` phase.
struct Group {
    items: Vec<usize>,
    /// Items running now.
    running: usize,
    /// At most this many at once.
    max_parallel: usize,
    /// Items of an earlier run no longer in the list.
    dropped: usize,
    /// When it was made into items.
    since: Instant,
}

impl<'r> Scheduler<'r> {
    fn new(
        run: &'r Arc<Run>,
        selected: &[PhaseId],
        plans: Vec<PhasePlan>,
        max_parallel: usize,
    ) -> Self {
        let pipeline = &run.ctx.pipeline;
        let count = pipeline.phases.len();
        let mut is_selected = vec![false; count];
        for &id in selected {
            is_selected[id.index()] = true;
        }
        let by_name: HashMap<&str, usize> = pipeline
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.value.as_str(), i))
            .collect();
        let dependencies = pipeline
            .phases
            .iter()
            .map(|phase| {
                phase
                    .depends_on
                    .iter()
                    .filter_map(|d| by_name.get(d.value.as_str()).copied())
                    .filter(|&d| is_selected[d])
                    .collect()
            })
            .collect();
        let mut state = vec![None; count];
        let mut deferred = HashMap::new();
        for plan in plans {
            if plan.deferred {
                deferred.insert(plan.id.index(), plan);
            } else if plan.is_up_to_date() {
                state[plan.id.index()] = Some(PhaseStatus::UpToDate);
            }
        }
        let waiting = PhaseGraph::new(pipeline)
            .levels()
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .filter(|&i| is_selected[i] && state[i].is_none())
            .collect();
        Scheduler {
            run,
            dependencies,
            state,
            attempts: vec![0; count],
            waiting,
            started: vec![false; count],
            group_of: vec![None; count],
            groups: HashMap::new(),
            deferred,
            ran: BTreeSet::new(),
            stop_reason: None,
            any_failed: false,
            max_parallel,
        }
    }

    /// Skips the waiting phases that can no longer run, decides those downstream of work made
    /// while the run goes on, makes ready `for-each` phases into items, and starts the phases
    /// that are ready while there is room; again while any of that changes what is ready.
    fn start_ready(&mut self, running: &mut JoinSet<(usize, PhaseResult)>) {
        while self.pass(running) {}
    }

    /// One pass over the waiting phases; whether a phase was decided or made without starting.
    fn pass(&mut self, running: &mut JoinSet<(usize, PhaseResult)>) -> bool {
        let waiting = std::mem::take(&mut self.waiting);
        let mut changed = false;
        let mut starting = Vec::new();
        // Asked once per pass, not once per waiting phase (a look at the cancellation takes a
        // lock).
        let stopped = self.stop_reason.is_some() || self.run.state.cancel.is_cancelled();
        for &i in &waiting {
            if let Some(reason) = self.why_skipped(i, stopped) {
                self.skip(i, reason);
                changed = true;
                continue;
            }
            let ready = self.dependencies[i].iter().all(|&d| done(self.state[d]));
            if !ready || self.started[i] || self.state[i].is_some() {
                continue;
            }
            if self.deferred.contains_key(&i) && !self.decide_deferred(i) {
                changed = true;
                continue;
            }
            if self.run.phase(PhaseId::from_table(i)).for_each.is_some() {
                self.started[i] = true;
                self.expand(i);
                changed = true;
                continue;
            }
            if running.len() + starting.len() < self.max_parallel && self.group_has_room(i) {
                self.start(i, &mut starting);
            }
        }
        let mut waiting = waiting;
        waiting.append(&mut self.waiting);
        self.remove_records(&starting, &waiting);
        for i in starting {
            let (run, id) = (self.run.clone(), PhaseId::from_table(i));
            running.spawn(async move { (i, run_phase(run, id).await) });
        }
        self.waiting = waiting;
        self.waiting
            .retain(|&i| !self.started[i] && self.state[i].is_none());
        changed
    }

    /// Phase `i` starts once its record is removed: it joins `starting`.
    fn start(&mut self, i: usize, starting: &mut Vec<usize>) {
        self.started[i] = true;
        let id = PhaseId::from_table(i);
        self.ran.insert(self.run.phase(id).name.value.clone());
        if let Some(group) = self.group_of[i].and_then(|g| self.groups.get_mut(&g)) {
            group.running += 1;
        }
        starting.push(i);
    }

    /// Whether the `for-each` phase of item `i` lets one more of its items start.
    fn group_has_room(&self, i: usize) -> bool {
        self.group_of[i]
            .and_then(|g| self.groups.get(&g))
            .is_none_or(|group| group.running < group.max_parallel)
    }

    /// Phase `i` will not run, for `reason`.
    fn skip(&mut self, i: usize, reason: String) {
        self.finished(
            i,
            PhaseResult {
                status: PhaseStatus::Skipped,
                attempts: 0,
                reason: Some(reason),
                duration: Duration::ZERO,
            },
        );
    }

    /// Decides phase `i`, planned up to date but downstream of work made while the run goes on:
    /// up to date when none of its dependencies ran; otherwise it runs, and says why. Returns
    /// whether it runs.
    fn decide_deferred(&mut self, i: usize) -> bool {
        let Some(plan) = self.deferred.remove(&i) else {
            return true;
        };
        let ran: Vec<String> = self.dependencies[i]
            .iter()
            .filter(|&&d| self.state[d] != Some(PhaseStatus::UpToDate))
            .map(|&d| self.run.phase(PhaseId::from_table(d)).name.value.clone())
            .collect();
        if ran.is_empty() {
            self.state[i] = Some(PhaseStatus::UpToDate);
            tell_plan(self.run, &plan);
            self.join_generated(i);
            return false;
        }
        self.run.emit(Event::PhaseQueued {
            phase: plan.phase,
            reasons: vec![Reason::UpstreamRuns { phases: ran }.to_string()],
        });
        true
    }

    /// The records of the phases about to start go first, durably, in one sync with the records
    /// of the passes since the last turn: a phase that does not pass again, or whose helixflow is
    /// killed or loses power while it runs, is not up to date afterwards. The same sync removes
    /// the records of up to [`AHEAD`] `run` steps of `waiting` that are ready to start, set aside
    /// until they do (and put back when the run ends without starting them): a chain of quick
    /// steps pays one sync per [`AHEAD`] steps, not one each.
    fn remove_records(&self, starting: &[usize], waiting: &[usize]) {
        let records = &self.run.ctx.records;
        // Before the first phase starts, what is in the folder (a run that starts nothing never
        // lists it).
        if !starting.is_empty() {
            records.watch();
        }
        let name = |i: usize| self.run.phase(PhaseId::from_table(i)).name.value.as_str();
        let fresh: Vec<&str> = starting
            .iter()
            .map(|&i| name(i))
            .filter(|n| !records.is_aside(n))
            .collect();
        if !fresh.is_empty() {
            let ahead: Vec<&str> = waiting
                .iter()
                .filter(|&&i| {
                    let phase = self.run.phase(PhaseId::from_table(i));
                    // A `for-each` phase never starts itself (its items do): a record of it set
                    // aside would come back at the end of the run, whatever its items did.
                    !self.started[i]
                        && self.state[i].is_none()
                        && matches!(phase.worker, Worker::Run(_))
                        && phase.for_each.is_none()
                        && self.dependencies[i].iter().all(|&d| done(self.state[d]))
                })
                .map(|&i| name(i))
                .filter(|n| !records.is_aside(n))
                .take(AHEAD)
                .collect();
            if let Err(e) = records.remove_before_start(&fresh, &ahead) {
                self.run.emit(Event::Warning {
                    message: format!(
                        "cannot remove the records of {} before they start: {e}",
                        crate::text::name_list(&fresh, 5)
                    ),
                });
            }
        }
        for &i in starting {
            records.started(name(i));
        }
    }

    /// Why phase `i` will not run: a dependency did not pass, the run stopped (`stopped`: by
    /// `on-failure "stop"` or cancelled), or (an item) the budget its attempts would spend from
    /// is spent.
    fn why_skipped(&self, i: usize, stopped: bool) -> Option<String> {
        let state = &self.state;
        if let Some(&d) = self.dependencies[i]
            .iter()
            .find(|&&d| state[d].is_some() && !done(state[d]))
        {
            let how = match state[d] {
                Some(PhaseStatus::Failed) => "failed",
                Some(PhaseStatus::Cancelled) => "was cancelled",
                _ => "was skipped",
            };
            let name = &self.run.phase(PhaseId::from_table(d)).name.value;
            return Some(format!("dependency \"{name}\" {how}"));
        }
        if stopped {
            return Some(
                self.stop_reason
                    .clone()
                    .unwrap_or_else(|| self.run.state.cancel.reason()),
            );
        }
        if self.group_of[i].is_some() && !self.started[i] {
            let phase = self.run.phase(PhaseId::from_table(i));
            let spend = crate::event::usage::Spend::default();
            if let Some(reason) = super::attempt::budget_spent(self.run, phase, &spend) {
                return Some(format!("never started: {reason}"));
            }
        }
        None
    }

    /// Phase `i` ended with `result`: noted, told, and with `on-failure "stop"` the end of new
    /// starts; the last item of a `for-each` phase decides that phase.
    fn finished(&mut self, i: usize, result: PhaseResult) {
        let phase = self.run.phase(PhaseId::from_table(i));
        self.state[i] = Some(result.status);
        self.attempts[i] = result.attempts;
        if result.status != PhaseStatus::Passed && result.status != PhaseStatus::UpToDate {
            self.any_failed = true;
        }
        if result.status == PhaseStatus::Failed
            && phase.on_failure == OnFailure::Stop
            && self.stop_reason.is_none()
        {
            self.stop_reason = Some(format!(
                "the run stopped after \"{}\" failed",
                phase.name.value
            ));
            self.run.state.budget.stop();
        }
        self.run.emit(Event::PhaseFinished {
            phase: phase.name.value.clone(),
            status: result.status,
            attempts: result.attempts,
            duration_ms: millis(result.duration),
            reason: result.reason,
        });
        if done(Some(result.status)) {
            self.join_generated(i);
        }
        if let Some(g) = self.group_of[i] {
            if let Some(group) = self.groups.get_mut(&g)
                && self.started[i]
            {
                group.running = group.running.saturating_sub(1);
            }
            self.conclude_group(g);
        }
    }

    /// The plans of the phases `ids` the run made while it goes on (items, planners' phases).
    fn plan_made(&self, ids: &[PhaseId]) -> Vec<plan::PhasePlan> {
        let run = self.run;
        let made: Vec<_> = ids.iter().map(|&id| (id, run.phase(id))).collect();
        plan::plan_made(
            &run.ctx.pipeline,
            &made,
            &run.ctx.options.force,
            &run.ctx.records,
            &run.ctx.redactor,
            &run.ctx.excluded,
            run.ctx.previous.as_ref(),
            &self.ran,
        )
    }

    /// Makes the ready `for-each` phase `i` into its items' phases, planned (each up to date or
    /// queued); a phase whose items cannot be had fails before any starts.
    fn expand(&mut self, i: usize) {
        let run = self.run;
        let template = run.phase(PhaseId::from_table(i));
        let made = match super::expand::make_items(run, template) {
            Ok(made) => made,
            Err(reason) => {
                let result = PhaseResult {
                    status: PhaseStatus::Failed,
                    attempts: 0,
                    reason: Some(reason),
                    duration: Duration::ZERO,
                };
                return self.finished(i, result);
            }
        };
        let names: Vec<String> = made.phases.iter().map(|p| p.name.value.clone()).collect();
        let ids = run.state.phases.add(made.phases);
        run.emit(Event::PhasesMade {
            phase: template.name.value.clone(),
            made: names,
            dropped: made.dropped.clone(),
        });
        let plans = self.plan_made(&ids);
        let for_each = template.for_each.as_ref();
        self.groups.insert(
            i,
            Group {
                items: ids.iter().map(|id| id.index()).collect(),
                running: 0,
                max_parallel: for_each
                    .and_then(|f| f.max_parallel)
                    .map_or(usize::MAX, |n| n as usize),
                dropped: made.dropped.len(),
                since: Instant::now(),
            },
        );
        for plan in plans {
            self.add(plan.id.index(), self.dependencies[i].clone(), Some(i));
            tell_plan(run, &plan);
            if plan.is_up_to_date() {
                self.state[plan.id.index()] = Some(PhaseStatus::UpToDate);
            } else {
                self.waiting.push(plan.id.index());
            }
        }
        self.conclude_group(i);
    }

    /// Adds the phases planner `i` wrote, once it passed or is up to date: they join after it,
    /// each with its own plan, and the phases that depend on it wait for them too.
    fn join_generated(&mut self, i: usize) {
        let run = self.run;
        let planner = run.phase(PhaseId::from_table(i));
        if planner.generates.is_none() {
            return;
        }
        let workspace = &run.ctx.pipeline.workspace;
        let made = match super::generated::phases(&run.ctx.pipeline, planner, workspace) {
            Ok(made) => dependencies_first(made),
            Err(errors) => {
                run.emit(Event::Warning {
                    message: format!(
                        "the phases \"{}\" wrote do not join the run: {}",
                        planner.name.value,
                        errors.join("; ")
                    ),
                });
                return;
            }
        };
        let names: Vec<String> = made.iter().map(|p| p.name.value.clone()).collect();
        let ids = run.state.phases.add(made);
        run.emit(Event::PhasesMade {
            phase: planner.name.value.clone(),
            made: names,
            dropped: Vec::new(),
        });
        let joined: Vec<usize> = ids.iter().map(|id| id.index()).collect();
        for &id in &ids {
            let dependencies = run
                .phase(id)
                .depends_on
                .iter()
                .filter_map(|d| run.state.phases.id(&d.value))
                .map(PhaseId::index)
                .collect();
            self.add(id.index(), dependencies, None);
        }
        for j in 0..self.dependencies.len() {
            if !joined.contains(&j) && self.dependencies[j].contains(&i) {
                self.dependencies[j].extend(&joined);
            }
        }
        let plans = self.plan_made(&ids);
        for plan in plans {
            tell_plan(run, &plan);
            if plan.is_up_to_date() {
                self.state[plan.id.index()] = Some(PhaseStatus::UpToDate);
            } else {
                self.waiting.push(plan.id.index());
            }
        }
    }

    /// A phase made while the run goes on joins the tables.
    fn add(&mut self, index: usize, dependencies: Vec<usize>, group: Option<usize>) {
        let len = index + 1;
        if self.state.len() < len {
            self.dependencies.resize(len, Vec::new());
            self.state.resize(len, None);
            self.attempts.resize(len, 0);
            self.started.resize(len, false);
            self.group_of.resize(len, None);
        }
        self.dependencies[index] = dependencies;
        self.group_of[index] = group;
    }

    /// Decides the `for-each` phase `g` once every item is: passed when every item passed or was
    /// up to date (up to date when all were, none was dropped and its record still holds),
    /// failed otherwise, with the items counted.
    fn conclude_group(&mut self, g: usize) {
        let Some(group) = self.groups.get(&g) else {
            return;
        };
        if self.state[g].is_some() || group.items.iter().any(|&i| self.state[i].is_none()) {
            return;
        }
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for &i in &group.items {
            *counts.entry(count_label(self.state[i])).or_default() += 1;
        }
        let all_passed = group.items.iter().all(|&i| done(self.state[i]));
        let status = if all_passed {
            self.record_group(g)
        } else if group
            .items
            .iter()
            .any(|&i| self.state[i] == Some(PhaseStatus::Cancelled))
        {
            PhaseStatus::Cancelled
        } else {
            PhaseStatus::Failed
        };
        let reason = group_reason(&counts, group.items.len(), group.dropped);
        let attempts = group.items.iter().map(|&i| self.attempts[i]).sum();
        let duration = group.since.elapsed();
        self.finished(
            g,
            PhaseResult {
                status,
                attempts,
                reason: Some(reason),
                duration,
            },
        );
    }

    /// The record of the `for-each` phase `g`, all of whose items passed: written when it differs
    /// from the one it had. Its status: up to date when every item was, and the record held.
    fn record_group(&self, g: usize) -> PhaseStatus {
        let run = self.run;
        let group = &self.groups[&g];
        let phase = run.phase(PhaseId::from_table(g));
        let fingerprint_of = |name: &str| run.ctx.records.fingerprint(name);
        let upstream = fingerprint::upstream(phase, fingerprint_of);
        let items = group
            .items
            .iter()
            .map(|&i| {
                let name = run.phase(PhaseId::from_table(i)).name.value.clone();
                let fingerprint =
                    fingerprint_of(&name).unwrap_or_else(|| fingerprint::NOT_PASSED.to_owned());
                (name, fingerprint)
            })
            .collect();
        let record = fingerprint::fan_out_record(
            &run.ctx.pipeline,
            phase,
            &run.ctx.folder.run_id,
            &run.ctx.redactor,
            upstream,
            items,
        );
        let before = run.ctx.records.read(&phase.name.value).ok().flatten();
        let all_up_to_date = group
            .items
            .iter()
            .all(|&i| self.state[i] == Some(PhaseStatus::UpToDate));
        if all_up_to_date
            && group.dropped == 0
            && before.is_some_and(|b| b.fingerprint == record.fingerprint)
        {
            return PhaseStatus::UpToDate;
        }
        if let Err(e) = run.ctx.records.write(&record) {
            run.emit(Event::Warning {
                message: format!(
                    "cannot record that \"{}\" passed ({e}); its dependents will run again next time",
                    phase.name.value
                ),
            });
        }
        PhaseStatus::Passed
    }
}

/// The phases a planner wrote, each after the ones it depends on (a cycle is reported by lint
/// before they get here).
fn dependencies_first(mut made: Vec<crate::model::Phase>) -> Vec<crate::model::Phase> {
    let mut ordered = Vec::with_capacity(made.len());
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let names: BTreeSet<String> = made.iter().map(|p| p.name.value.clone()).collect();
    while !made.is_empty() {
        let before = made.len();
        let (ready, later): (Vec<_>, Vec<_>) = made.into_iter().partition(|p| {
            p.depends_on
                .iter()
                .all(|d| !names.contains(&d.value) || placed.contains(&d.value))
        });
        placed.extend(ready.iter().map(|p| p.name.value.clone()));
        ordered.extend(ready);
        made = later;
        if made.len() == before {
            ordered.append(&mut made);
        }
    }
    ordered
}

/// How an item is counted under its phase.
fn count_label(status: Option<PhaseStatus>) -> &'static str {
    match status {
        Some(PhaseStatus::Passed) => "passed",
        Some(PhaseStatus::Failed) => "failed",
        Some(PhaseStatus::UpToDate) => "up to date",
        Some(PhaseStatus::Cancelled) => "cancelled",
        Some(PhaseStatus::Skipped) | None => "never started",
    }
}

/// `37 passed, 2 failed, 161 up to date; dropped: 3 items`.
fn group_reason(counts: &BTreeMap<&'static str, usize>, items: usize, dropped: usize) -> String {
    let mut parts: Vec<String> = [
        "passed",
        "failed",
        "up to date",
        "cancelled",
        "never started",
    ]
    .iter()
    .filter_map(|label| counts.get(label).map(|n| format!("{n} {label}")))
    .collect();
    if items == 0 {
        parts.push("no items".to_owned());
    }
    let mut reason = parts.join(", ");
    if dropped > 0 {
        let noun = if dropped == 1 { "item" } else { "items" };
        reason.push_str(&format!("; dropped: {dropped} {noun}"));
    }
    reason
}

/// A phase's plan in the journal: up to date (its record written back with its new file
/// stamps), or why it runs.
pub(super) fn tell_plan(run: &Run, plan: &plan::PhasePlan) {
    if let Some(record) = &plan.restamped
        && let Err(e) = run.ctx.records.write(record)
    {
        run.emit(Event::Warning {
            message: format!("cannot update the record of \"{}\": {e}", plan.phase),
        });
    }
    match &plan.up_to_date {
        Some(run_id) => run.emit(Event::PhaseFinished {
            phase: plan.phase.clone(),
            status: PhaseStatus::UpToDate,
            attempts: 0,
            duration_ms: 0,
            reason: Some(format!(
                "passed in run {run_id}; nothing it depends on changed since"
            )),
        }),
        None => run.emit(Event::PhaseQueued {
            phase: plan.phase.clone(),
            reasons: plan.reasons.iter().map(ToString::to_string).collect(),
        }),
    }
}

/// Whether a phase that ended this way lets its dependents start.
fn done(status: Option<PhaseStatus>) -> bool {
    matches!(status, Some(PhaseStatus::Passed | PhaseStatus::UpToDate))
}

/// How a phase's task ended: its work, or the writing of its record once it passed.
enum Ended {
    Ran(Result<(usize, PhaseResult), tokio::task::JoinError>),
    Recorded(Result<(usize, PhaseResult), tokio::task::JoinError>),
}

/// Writes the record of a phase that passed, which made or changed the files `work`, before the
/// scheduler hears of it (synced with the
/// next turn's removals, or when the run ends); a warning when it cannot.
fn record(run: &Run, id: PhaseId, work: &[String]) {
    let phase = run.phase(id);
    let upstream = fingerprint::upstream(phase, |name| run.ctx.records.fingerprint(name));
    let record = fingerprint::record(
        &run.ctx.pipeline,
        phase,
        &run.ctx.folder.run_id,
        &run.ctx.redactor,
        &run.ctx.excluded,
        upstream,
        work,
    );
    let written = run
        .ctx
        .records
        .write(&record)
        .and_then(|()| restamp_others(run, &record, work));
    if let Err(e) = written {
        run.emit(Event::Warning {
            message: format!(
                "cannot record that \"{}\" passed ({e}); it will run again next time",
                phase.name.value
            ),
        });
    }
}

/// A phase that passed changed files other phases' records stamp (a later phase edited what an
/// earlier one made): those records take the new stamps, since a verified change is not the
/// user's edit that makes a phase run again.
fn restamp_others(
    run: &Run,
    record: &crate::store::passed::PhaseRecord,
    work: &[String],
) -> std::io::Result<()> {
    if work.is_empty() {
        return Ok(());
    }
    // The files as this phase left them, whether or not its own record stamps them (a phase
    // with declared outputs stamps only those).
    let now = fingerprint::stamps(
        &run.ctx.pipeline.workspace,
        work,
        Some(&record.outputs),
        &crate::workspace::Stats::default(),
    );
    for (_, other) in run.state.phases.iter() {
        if other.name.value == record.phase {
            continue;
        }
        let Some(mut theirs) = run.ctx.records.read(&other.name.value)? else {
            continue;
        };
        let mut changed = false;
        for path in work {
            if let (Some(stamp), Some(now)) = (theirs.outputs.get_mut(path), now.get(path))
                && stamp != now
            {
                *stamp = now.clone();
                changed = true;
            }
        }
        if changed {
            run.ctx.records.write(&theirs)?;
        }
    }
    Ok(())
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
