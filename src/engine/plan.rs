//! Which phases a run starts and why: each selected phase is *up to date* (it passed before and
//! nothing it depends on changed since) or *will run*, with every reason found. `helixflow run`
//! skips the up-to-date ones, `run --dry-run` and `helixflow status` show the same plan.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::Serialize;

use super::fingerprint::{self, Definition};
use crate::graph::PhaseGraph;
use crate::model::{Phase, PhaseId, Pipeline};
use crate::redact::Redactor;
use crate::store::passed::{FileStamp, PhaseRecord, Records};
use crate::store::plan_memo::{PlanMemo, Remembered, Seen};
use crate::store::run::list_runs;
use crate::store::run_json::RunSummary;
use crate::workspace::{Stats, in_parallel_on_cores};

pub(crate) use super::context::Force;

/// One changed part of a phase's definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PartChange {
    /// The part, e.g. ``gate `tests` command``.
    pub part: String,
    /// Its text when the phase passed (none: the part is new).
    pub old: Option<String>,
    /// Its text now (none: the part is gone).
    pub new: Option<String>,
}

/// Files that differ from a record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct FileChanges {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

impl FileChanges {
    fn between(
        then: &BTreeMap<String, FileStamp>,
        now: &BTreeMap<String, FileStamp>,
    ) -> FileChanges {
        let mut changes = FileChanges::default();
        for (path, stamp) in now {
            match then.get(path) {
                None => changes.added.push(path.clone()),
                Some(old) if old.hash != stamp.hash => changes.modified.push(path.clone()),
                Some(_) => {}
            }
        }
        changes.deleted = then
            .keys()
            .filter(|p| !now.contains_key(*p))
            .cloned()
            .collect();
        changes
    }

    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }
}

impl fmt::Display for FileChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut groups = Vec::new();
        for (label, paths) in [
            ("modified", &self.modified),
            ("added", &self.added),
            ("deleted", &self.deleted),
        ] {
            if !paths.is_empty() {
                groups.push(format!("{label} {}", list(paths)));
            }
        }
        f.write_str(&groups.join("; "))
    }
}

/// An import from a git repository that moved since a phase passed, with the agent or template
/// of the phase that changed with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct ImportMove {
    /// ``agent `claude` `` or ``template `python-module` ``.
    pub what: String,
    /// The file it is defined in: its repository, `//`, its path there.
    pub import: String,
    /// The import's `rev` when the phase passed.
    pub old_rev: String,
    /// Its `rev` now.
    pub new_rev: String,
    /// The commit it was read at when the phase passed.
    pub old_commit: String,
    /// The commit it is read at now.
    pub new_commit: String,
}

impl fmt::Display for ImportMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = |c: &str| c.get(..12).unwrap_or(c).to_owned();
        let rev = if self.old_rev == self.new_rev {
            format!("rev \"{}\"", self.new_rev)
        } else {
            format!("rev \"{}\" → \"{}\"", self.old_rev, self.new_rev)
        };
        write!(
            f,
            "{} changed: its import {} moved ({rev}, commit {} → {})",
            self.what,
            self.import,
            short(&self.old_commit),
            short(&self.new_commit)
        )
    }
}

/// Why a phase will run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "reason")]
pub(crate) enum Reason {
    /// No record of a pass (first run, or it failed or was interrupted since).
    NeverPassed,
    /// `always-run #true`.
    AlwaysRun,
    /// `--force`, or `--force PHASE` naming it.
    Forced,
    /// `--from PHASE`: it is that phase or downstream of it.
    From { phase: String },
    /// An import from a git repository moved to another commit (or `rev`), and the agent or
    /// template the phase takes from it changed with it.
    ImportMoved(ImportMove),
    /// The compiled phase, its agent or its declared environment changed.
    DefinitionChanged {
        changes: Vec<PartChange>,
        #[serde(skip_serializing_if = "Option::is_none")]
        template: Option<String>,
    },
    /// The rendered prompt changed.
    PromptChanged {
        diff: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        template: Option<String>,
    },
    /// Input files changed.
    InputsChanged { files: FileChanges },
    /// Its outputs changed since it passed (someone edited them).
    OutputsChanged { files: FileChanges },
    /// Phases it depends on run in this run.
    UpstreamRuns { phases: Vec<String> },
    /// Phases it depends on passed again since it did.
    UpstreamChanged { phases: Vec<String> },
    /// Phases it depends on have no record of a pass now (they failed, or were interrupted, since
    /// it passed) and do not run in this run.
    UpstreamNotPassed { phases: Vec<String> },
    /// A `for-each` phase: its items are read once it is ready, and each is up to date or runs
    /// on its own.
    ForEach,
    /// A `for-each` phase whose items cannot be read now (its dependencies may write them).
    ItemsUnknown { why: String },
    /// Items of a `for-each` phase that passed before and are no longer in its list: their
    /// records go.
    Dropped { phases: Vec<String> },
    /// A run that is live has not finished it (it is running, or has not started yet): a new
    /// run waits for that one to end (or stops at once), and then continues it.
    Running { run_id: String, pid: u32 },
    /// The run this one continues did not finish it: it failed, was cancelled, or was running
    /// when that run stopped. It starts again with a fresh budget of attempts.
    Resumed {
        run_id: String,
        /// `failed`, `cancelled` or `running`.
        was: String,
        /// The attempts it has now.
        attempts: u32,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NeverPassed => f.write_str("never passed"),
            Reason::AlwaysRun => f.write_str("`always-run #true`"),
            Reason::Forced => f.write_str("forced"),
            Reason::From { phase } => write!(f, "`--from {phase}`"),
            Reason::DefinitionChanged { changes, template } => {
                let parts: Vec<String> = changes
                    .iter()
                    .map(|c| match (&c.old, &c.new) {
                        (Some(old), Some(new)) => {
                            format!(
                                "{} changed: `{}` → `{}`",
                                part_name(&c.part),
                                short(old),
                                short(new)
                            )
                        }
                        (None, Some(new)) => {
                            format!("{} added: `{}`", part_name(&c.part), short(new))
                        }
                        (Some(old), None) => {
                            format!("{} removed (was `{}`)", part_name(&c.part), short(old))
                        }
                        (None, None) => part_name(&c.part),
                    })
                    .collect();
                write!(f, "definition changed: {}", parts.join("; "))?;
                if let Some(template) = template {
                    write!(f, " (the phase is made from template `{template}`)")?;
                }
                Ok(())
            }
            Reason::ImportMoved(moved) => moved.fmt(f),
            Reason::PromptChanged { template, .. } => {
                f.write_str("prompt changed")?;
                if let Some(template) = template {
                    write!(f, " (the phase is made from template `{template}`)")?;
                }
                Ok(())
            }
            Reason::InputsChanged { files } => write!(f, "input changed: {files}"),
            Reason::OutputsChanged { files } => {
                write!(f, "output changed since it passed: {files}")
            }
            Reason::UpstreamRuns { phases } => write!(f, "upstream re-runs: {}", list(phases)),
            Reason::UpstreamChanged { phases } => {
                write!(f, "upstream passed again since: {}", list(phases))
            }
            Reason::UpstreamNotPassed { phases } => {
                write!(f, "upstream has no record of a pass: {}", list(phases))
            }
            Reason::ForEach => f.write_str(
                "its items are read once it is ready; each is up to date or runs on its own",
            ),
            Reason::ItemsUnknown { why } => write!(f, "its items cannot be read now: {why}"),
            Reason::Dropped { phases } => f.write_str(&dropped(phases)),
            Reason::Running { run_id, pid } => {
                write!(
                    f,
                    "not finished yet in run {run_id}, which is running (pid {pid})"
                )
            }
            Reason::Resumed {
                run_id,
                was,
                attempts,
            } => {
                let how = match was.as_str() {
                    "running" => format!("was running when run {run_id} stopped"),
                    other => format!("{other} in run {run_id}"),
                };
                let budget = if *attempts == 1 {
                    "1 attempt".to_owned()
                } else {
                    format!("{attempts} attempts")
                };
                write!(f, "{how}; starts again with a fresh budget of {budget}")
            }
        }
    }
}

/// `dropped: 2 items (`migrate[a]`, `migrate[b]`)`.
fn dropped(phases: &[String]) -> String {
    let noun = if phases.len() == 1 { "item" } else { "items" };
    format!("dropped: {} {noun} ({})", phases.len(), list(phases))
}

/// A part's name as a person reads it.
fn part_name(part: &str) -> String {
    match part {
        "worker.run" => "`run` command".to_owned(),
        "worker.agent" => "agent".to_owned(),
        other if other.starts_with("gate `") || other.starts_with("attempt `") => other.to_owned(),
        other => format!("`{other}`"),
    }
}

fn list(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut shown: Vec<String> = items.iter().take(SHOWN).map(|i| format!("`{i}`")).collect();
    if items.len() > SHOWN {
        shown.push(format!("and {} more", items.len() - SHOWN));
    }
    shown.join(", ")
}

/// A value shortened to one line for a reason.
fn short(text: &str) -> String {
    const LIMIT: usize = 120;
    let line = text.replace('\n', "⏎");
    if line.chars().count() > LIMIT {
        let cut: String = line.chars().take(LIMIT).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// One selected phase's place in the plan.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PhasePlan {
    /// The phase.
    pub phase: String,
    /// The phase's id.
    #[serde(skip)]
    pub id: PhaseId,
    /// The run in which it passed, when it is up to date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up_to_date: Option<String>,
    /// Why it will run (empty when up to date).
    pub reasons: Vec<Reason>,
    /// An up-to-date phase's record with the new modification times of files whose content did
    /// not change: `run` writes it back.
    #[serde(skip)]
    pub restamped: Option<PhaseRecord>,
    /// Up to date as far as is known before the run, but downstream of work made while it runs
    /// (a `for-each` phase, a planner): decided once its dependencies are, and up to date only
    /// if none of them ran.
    #[serde(skip)]
    pub deferred: bool,
}

impl PhasePlan {
    /// Whether the phase is skipped as up to date.
    pub(crate) fn is_up_to_date(&self) -> bool {
        self.up_to_date.is_some()
    }

    /// The reasons on one line.
    pub(crate) fn why(&self) -> String {
        self.reasons
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The plan of the `selected` phases, in topological order.
pub(crate) fn plan(
    pipeline: &Pipeline,
    selected: &[PhaseId],
    force: &Force,
    records: &Records,
    redactor: &Redactor,
    exclude: &[PathBuf],
    previous: Option<&RunSummary>,
) -> Vec<PhasePlan> {
    let graph = PhaseGraph::new(pipeline);
    let ids: Vec<PhaseId> = pipeline.phase_ids().collect();
    let mut is_selected = vec![false; pipeline.phases.len()];
    for &id in selected {
        is_selected[id.index()] = true;
    }
    // Every phase in a topological order; `--from` looks at all of them, the plan at the selected.
    let everything: Vec<usize> = graph
        .levels()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    let mut planner = Planner {
        from: from_onwards(pipeline, &everything, force),
        ..Planner::new(pipeline, force, records, redactor, exclude, previous)
    };
    // Phases downstream of work made while the run goes on are decided once their
    // dependencies are.
    let mut made_upstream = vec![false; pipeline.phases.len()];
    for &i in &everything {
        made_upstream[i] = graph.dependencies(i).any(|d| {
            let dependency = &pipeline.phases[d];
            made_upstream[d] || dependency.for_each.is_some() || dependency.generates.is_some()
        });
    }
    let order: Vec<usize> = everything.into_iter().filter(|&i| is_selected[i]).collect();
    // A forced plan is never remembered, nor answered from memory.
    let forced = force.all || !force.phases.is_empty() || force.from.is_some();
    let memo = (!forced)
        .then(|| PlanMemo::of(pipeline, records.state_dir(), exclude))
        .flatten();
    let names: Vec<&str> = pipeline
        .phases
        .iter()
        .map(|p| p.name.value.as_str())
        .collect();
    if let Some(memo) = &memo
        && let Some(runs) = memo.recall(&order.iter().map(|&i| names[i]).collect::<Vec<_>>())
    {
        return order
            .into_iter()
            .map(|i| PhasePlan {
                phase: names[i].to_owned(),
                id: ids[i],
                up_to_date: runs.get(names[i]).cloned(),
                reasons: Vec::new(),
                restamped: None,
                deferred: false,
            })
            .collect();
    }
    let recollection = memo.map(|memo| Recollection::begin(memo, &names, records.writes()));
    planner.look_ahead(order.iter().map(|&i| &pipeline.phases[i]));
    let everything_selected = order.len() == pipeline.phases.len();
    let plans: Vec<PhasePlan> = order
        .into_iter()
        .map(|i| {
            let mut plan = planner.phase_plan(&pipeline.phases[i], ids[i]);
            plan.deferred = plan.is_up_to_date() && made_upstream[i];
            plan
        })
        .collect();
    if let Some(recollection) = recollection {
        recollection.end(&names, &plans, &planner.stats, everything_selected);
    }
    plans
}

/// What a plan that may be remembered rests on, taken as it begins.
struct Recollection {
    memo: PlanMemo,
    /// Whether the plan's new file stamps are written to the records (a run's plan), which
    /// changes them.
    restamps: bool,
    /// When the plan began, on the clock files are stamped from.
    began_ns: i128,
    /// Each phase's record's identity, before the plan reads it.
    records: Vec<Option<Seen>>,
}

impl Recollection {
    fn begin(memo: PlanMemo, names: &[&str], restamps: bool) -> Self {
        let began_ns = crate::workspace::file_clock_now();
        let records = memo.records_now(names);
        Recollection {
            memo,
            restamps,
            began_ns,
            records,
        }
    }

    /// Remembers `plans` (of the phases `names`, all of them when `everything` is) when every
    /// phase is up to date, else drops the memo. A file read again because its stamp could not
    /// prove it unchanged (new times, or stamped within the racy margin) was looked up before it
    /// was read, so its identity stands for what was read; but a run writes those new stamps
    /// into the records, which then differ from the plan's: a run remembers a plan only with
    /// nothing to restamp.
    fn end(self, names: &[&str], plans: &[PhasePlan], stats: &Stats, everything: bool) {
        let unchanged = plans
            .iter()
            .all(|p| p.is_up_to_date() && (p.restamped.is_none() || !self.restamps));
        if !unchanged {
            self.memo.forget();
            return;
        }
        if !everything {
            return;
        }
        let runs: HashMap<&str, &String> = plans
            .iter()
            .filter_map(|p| Some((p.phase.as_str(), p.up_to_date.as_ref()?)))
            .collect();
        self.memo.remember(&Remembered {
            phases: names
                .iter()
                .zip(self.records)
                .map(|(name, seen)| {
                    let run = runs.get(name).map_or_else(String::new, |r| (*r).clone());
                    ((*name).to_owned(), run, seen)
                })
                .collect(),
            paths: stats
                .looked_up()
                .into_iter()
                .map(|(path, found)| (path, found.as_ref().map(Seen::of)))
                .collect(),
            began_ns: self.began_ns,
        });
    }
}

/// The plan of phases made while the run goes on (the items of a `for-each` phase, the phases a
/// planner wrote), in the order given, each after its dependencies. `ran` names the phases that
/// ran in this run so far: a phase that depends on one runs too.
#[allow(
    clippy::too_many_arguments,
    reason = "what plan() reads, and the phases run so far"
)]
pub(crate) fn plan_made(
    pipeline: &Pipeline,
    made: &[(PhaseId, &Phase)],
    force: &Force,
    records: &Records,
    redactor: &Redactor,
    exclude: &[PathBuf],
    previous: Option<&RunSummary>,
    ran: &BTreeSet<String>,
) -> Vec<PhasePlan> {
    let mut planner = Planner {
        from: force.from.iter().map(String::as_str).collect(),
        will_run: ran.iter().map(String::as_str).collect(),
        ..Planner::new(pipeline, force, records, redactor, exclude, previous)
    };
    planner.look_ahead(made.iter().map(|&(_, phase)| phase));
    made.iter()
        .map(|&(id, phase)| {
            // Downstream of `--from`: a phase made by one it selects.
            let made_by = match &phase.made_by {
                Some(crate::model::MadeBy::Item { of, .. }) => Some(of.as_str()),
                Some(crate::model::MadeBy::Generated { by }) => Some(by.as_str()),
                None => None,
            };
            if made_by.is_some_and(|by| planner.from.contains(by))
                || phase
                    .depends_on
                    .iter()
                    .any(|d| planner.from.contains(d.value.as_str()))
            {
                planner.from.insert(phase.name.value.as_str());
            }
            planner.phase_plan(phase, id)
        })
        .collect()
}

/// `--from`: that phase and everything downstream of it, by name; `everything` is every phase in
/// a topological order.
fn from_onwards<'a>(
    pipeline: &'a Pipeline,
    everything: &[usize],
    force: &'a Force,
) -> BTreeSet<&'a str> {
    let mut from: BTreeSet<&str> = BTreeSet::new();
    if let Some(start) = &force.from {
        from.insert(start.as_str());
        for &i in everything {
            let phase = &pipeline.phases[i];
            if phase
                .depends_on
                .iter()
                .any(|d| from.contains(d.value.as_str()))
            {
                from.insert(phase.name.value.as_str());
            }
        }
    }
    from
}

/// Records of passed phases, each read once (also of phases outside the selection).
struct RecordCache<'a> {
    records: &'a Records,
    read: HashMap<String, Option<Rc<PhaseRecord>>>,
}

impl RecordCache<'_> {
    fn read(&mut self, phase: &str) -> Option<Rc<PhaseRecord>> {
        if let Some(cached) = self.read.get(phase) {
            return cached.clone();
        }
        let record = self.records.read(phase).ok().flatten().map(Rc::new);
        self.read.insert(phase.to_owned(), record.clone());
        record
    }
}

/// The plan under way: what it reads, and the phases found to run so far.
struct Planner<'a> {
    pipeline: &'a Pipeline,
    force: &'a Force,
    redactor: &'a Redactor,
    exclude: &'a [PathBuf],
    previous: Option<&'a RunSummary>,
    /// The phases `--from` selects.
    from: BTreeSet<&'a str>,
    /// The phases planned so far that will run.
    will_run: BTreeSet<&'a str>,
    records: RecordCache<'a>,
    /// The metadata of the files the plan looks at, each looked up once.
    stats: Stats,
    /// What was worked out ahead, in parallel, for the phases with a record, by name.
    prepared: HashMap<String, Prepared>,
}

/// What the check of a phase against its record works out without the plan so far: its
/// definition now and the stamps of its files.
struct Prepared {
    definition: Definition,
    inputs: BTreeMap<String, FileStamp>,
    outputs: BTreeMap<String, FileStamp>,
}

/// What a plan reads that threads can share.
#[derive(Clone, Copy)]
struct Looking<'a> {
    pipeline: &'a Pipeline,
    redactor: &'a Redactor,
    exclude: &'a [PathBuf],
    stats: &'a Stats,
}

impl Looking<'_> {
    /// The definition of `phase` now and the stamps of its files, against `record`.
    fn prepare(self, phase: &Phase, record: &PhaseRecord) -> Prepared {
        let pipeline = self.pipeline;
        let definition = fingerprint::definition(pipeline, phase, self.redactor);
        let input_paths = fingerprint::input_paths(pipeline, phase, self.exclude, self.stats);
        let inputs = fingerprint::stamps(
            &pipeline.workspace,
            &input_paths,
            Some(&record.inputs),
            self.stats,
        );
        // The declared outputs as they resolve now, and every file the record stamped
        // (the files the phase made or changed): one gone or changed since counts.
        let mut output_paths = fingerprint::output_paths(pipeline, phase, self.exclude, self.stats);
        output_paths.extend(record.outputs.keys().cloned());
        output_paths.sort();
        output_paths.dedup();
        let outputs = fingerprint::stamps(
            &pipeline.workspace,
            &output_paths,
            Some(&record.outputs),
            self.stats,
        );
        Prepared {
            definition,
            inputs,
            outputs,
        }
    }
}

impl<'a> Planner<'a> {
    /// A planner that has planned nothing yet, with no phase selected by `--from`.
    fn new(
        pipeline: &'a Pipeline,
        force: &'a Force,
        records: &'a Records,
        redactor: &'a Redactor,
        exclude: &'a [PathBuf],
        previous: Option<&'a RunSummary>,
    ) -> Self {
        Planner {
            pipeline,
            force,
            redactor,
            exclude,
            previous,
            from: BTreeSet::new(),
            will_run: BTreeSet::new(),
            records: RecordCache {
                records,
                read: HashMap::new(),
            },
            stats: Stats::default(),
            prepared: HashMap::new(),
        }
    }

    /// Works out ahead, in parallel, what the plan of `order` compares: each phase's record,
    /// and for a phase with one its definition now and the stamps of its files.
    fn look_ahead(&mut self, order: impl Iterator<Item = &'a Phase>) {
        let order: Vec<&Phase> = order.collect();
        // On every core, in one pass: each phase's record, read and parsed, then its definition
        // and the stamps of its files (each file looked up once, whichever phase asks first).
        let records = self.records.records;
        let looked = self.looking();
        let read = in_parallel_on_cores(&order, |phase| {
            let record = records.read(&phase.name.value).ok().flatten();
            let prepared = record.as_ref().map(|r| looked.prepare(phase, r));
            (record, prepared)
        });
        for (phase, (record, prepared)) in order.into_iter().zip(read) {
            let name = &phase.name.value;
            self.records.read.insert(name.clone(), record.map(Rc::new));
            if let Some(prepared) = prepared {
                self.prepared.insert(name.clone(), prepared);
            }
        }
    }

    /// What the plan reads to check a phase against its record.
    fn looking(&self) -> Looking<'_> {
        Looking {
            pipeline: self.pipeline,
            redactor: self.redactor,
            exclude: self.exclude,
            stats: &self.stats,
        }
    }

    /// The plan of `phase`; its dependencies are planned already.
    fn phase_plan(&mut self, phase: &'a Phase, id: PhaseId) -> PhasePlan {
        let name = phase.name.value.as_str();
        let mut reasons = self.asked_for(phase);
        if phase.for_each.is_some() {
            // Its items are planned once they are known; the phase itself is not a reason for
            // its dependents to run.
            reasons.push(Reason::ForEach);
            return PhasePlan {
                phase: name.to_owned(),
                id,
                up_to_date: None,
                reasons,
                restamped: None,
                deferred: false,
            };
        }
        let upstream_runs: Vec<String> = phase
            .depends_on
            .iter()
            .filter(|d| self.will_run.contains(d.value.as_str()))
            .map(|d| d.value.clone())
            .collect();
        let record = self.records.read(name);
        let upstream = fingerprint::upstream(phase, |name| {
            self.records.read(name).map(|r| r.fingerprint.clone())
        });
        let mut restamped = match &record {
            None => {
                reasons.push(self.stopped(phase).unwrap_or(Reason::NeverPassed));
                None
            }
            Some(record) => self.against_record(phase, record, upstream, &mut reasons),
        };
        if !upstream_runs.is_empty() {
            reasons.push(Reason::UpstreamRuns {
                phases: upstream_runs,
            });
        }
        let up_to_date = if reasons.is_empty() {
            record.as_ref().map(|r| r.run_id.clone())
        } else {
            restamped = None;
            self.will_run.insert(name);
            None
        };
        PhasePlan {
            phase: name.to_owned(),
            id,
            up_to_date,
            reasons,
            restamped,
            deferred: false,
        }
    }

    /// The reasons the user gave on the command line or in the pipeline to run `phase`.
    fn asked_for(&self, phase: &Phase) -> Vec<Reason> {
        let name = phase.name.value.as_str();
        let mut reasons = Vec::new();
        // `--force migrate` forces every item of `migrate`.
        let of = phase.item_of();
        if self.force.all
            || self
                .force
                .phases
                .iter()
                .any(|p| p == name || Some(p.as_str()) == of)
        {
            reasons.push(Reason::Forced);
        }
        if self.from.contains(name) {
            reasons.push(Reason::From {
                phase: self.force.from.clone().unwrap_or_default(),
            });
        }
        if phase.always_run {
            reasons.push(Reason::AlwaysRun);
        }
        reasons
    }

    /// Why a phase without a record did not pass in the previous run: it is running there, or it
    /// failed or was cancelled (this run resumes it).
    fn stopped(&self, phase: &Phase) -> Option<Reason> {
        let run = self.previous?;
        let summary = run.phases.iter().find(|p| p.name == phase.name.value)?;
        // `run.json` may be a second behind the live run: a phase it shows as pending may
        // have started since.
        if let Some(pid) = run.running_pid()
            && matches!(summary.status.as_str(), "pending" | "running")
        {
            return Some(Reason::Running {
                run_id: run.run_id.clone(),
                pid,
            });
        }
        let was = match summary.status.as_str() {
            "failed" | "cancelled" => summary.status.clone(),
            "running" => "running".to_owned(),
            _ => return None,
        };
        Some(Reason::Resumed {
            run_id: run.run_id.clone(),
            was,
            attempts: phase.retries.saturating_add(1),
        })
    }

    /// What changed since `phase` passed, as `record` says; returns the record with new
    /// modification times when only those changed.
    fn against_record(
        &mut self,
        phase: &Phase,
        record: &PhaseRecord,
        upstream: BTreeMap<String, String>,
        reasons: &mut Vec<Reason>,
    ) -> Option<PhaseRecord> {
        let Prepared {
            definition,
            inputs,
            outputs,
        } = match self.prepared.remove(&phase.name.value) {
            Some(prepared) => prepared,
            None => self.looking().prepare(phase, record),
        };
        // A dependency without a record now did not pass again: when it runs now, that
        // is the reason below; else it is one of its own.
        let (unpassed, passed): (BTreeMap<_, _>, BTreeMap<_, _>) = upstream
            .into_iter()
            .partition(|(_, fingerprint)| fingerprint == fingerprint::NOT_PASSED);
        compare(record, &definition, &inputs, &passed, reasons);
        let not_passed: Vec<String> = unpassed
            .into_keys()
            .filter(|phase| {
                record.upstream.get(phase).map(String::as_str) != Some(fingerprint::NOT_PASSED)
                    && !self.will_run.contains(phase.as_str())
            })
            .collect();
        if !not_passed.is_empty() {
            reasons.push(Reason::UpstreamNotPassed { phases: not_passed });
        }
        let files = FileChanges::between(&record.outputs, &outputs);
        if !files.is_empty() {
            reasons.push(Reason::OutputsChanged { files });
        }
        // Same content under a new modification time (a `touch`, a checkout): the
        // record takes the new times, so the next check need not read the file again.
        (record.inputs != inputs || record.outputs != outputs).then(|| {
            let mut newer = record.clone();
            newer.inputs = inputs;
            newer.outputs = outputs;
            newer
        })
    }
}

/// What differs between a record and the phase now.
fn compare(
    record: &PhaseRecord,
    definition: &Definition,
    inputs: &BTreeMap<String, FileStamp>,
    upstream: &BTreeMap<String, String>,
    reasons: &mut Vec<Reason>,
) {
    let mut changes = Vec::new();
    let parts: BTreeSet<&String> = record
        .definition
        .keys()
        .chain(definition.parts.keys())
        .collect();
    for part in parts {
        let old = record.definition.get(part);
        let new = definition.parts.get(part);
        if old != new {
            changes.push(PartChange {
                part: part.clone(),
                old: old.cloned(),
                new: new.cloned(),
            });
        }
    }
    if record.template != definition.template {
        changes.push(PartChange {
            part: "template".to_owned(),
            old: record.template.clone(),
            new: definition.template.clone(),
        });
    }
    let prompt_changed = record.prompt_hash != definition.prompt_hash;
    reasons.extend(moved_imports(record, definition, &changes, prompt_changed));
    if !changes.is_empty() {
        reasons.push(Reason::DefinitionChanged {
            changes,
            template: definition.template.clone(),
        });
    }
    if prompt_changed {
        let diff = similar::TextDiff::from_lines(&record.prompt, &definition.prompt)
            .unified_diff()
            .context_radius(2)
            .header("prompt when it passed", "prompt now")
            .to_string();
        reasons.push(Reason::PromptChanged {
            diff,
            template: definition.template.clone(),
        });
    }
    let files = FileChanges::between(&record.inputs, inputs);
    if !files.is_empty() {
        reasons.push(Reason::InputsChanged { files });
    }
    let changed: Vec<String> = upstream
        .iter()
        .filter(|(phase, fingerprint)| record.upstream.get(*phase) != Some(*fingerprint))
        .map(|(phase, _)| phase.clone())
        .collect();
    if !changed.is_empty() {
        reasons.push(Reason::UpstreamChanged { phases: changed });
    }
}

/// The imports from git repositories that moved since the phase passed, for the agent or template
/// whose content changed with them: an agent by its parts (`agent.…`), a template by the rest of
/// the definition and the prompt.
fn moved_imports(
    record: &PhaseRecord,
    definition: &Definition,
    changes: &[PartChange],
    prompt_changed: bool,
) -> Vec<Reason> {
    let agent_changed = changes.iter().any(|c| c.part.starts_with("agent."));
    let rest_changed = prompt_changed || changes.iter().any(|c| !c.part.starts_with("agent."));
    definition
        .remote
        .iter()
        .filter_map(|(what, now)| {
            let then = record.remote.get(what)?;
            let changed = if what.starts_with("agent ") {
                agent_changed
            } else {
                rest_changed
            };
            (changed && (then.commit != now.commit || then.rev != now.rev)).then(|| {
                Reason::ImportMoved(ImportMove {
                    what: what.clone(),
                    import: now.import.clone(),
                    old_rev: then.rev.clone(),
                    new_rev: now.rev.clone(),
                    old_commit: then.commit.clone(),
                    new_commit: now.commit.clone(),
                })
            })
        })
        .collect()
}

/// The latest run in the state folder when it did not pass (failed, interrupted or crashed): the
/// run the next one continues. A run that is still live is returned too: the next run waits for
/// it (or stops at once), and continues it should it not pass.
pub(crate) fn unfinished_run(state_dir: &Path) -> Option<RunSummary> {
    list_runs(&state_dir.join("runs"))
        .ok()
        .and_then(|runs| runs.last().cloned())
        // A run that passed stays passed: its summary is not read whole.
        .filter(|last| !RunSummary::says_passed(last))
        .and_then(|last| RunSummary::read(&last).ok())
        .filter(|summary| summary.current_status() != "passed")
}

/// The plan of a run of `pipeline` with these options, as `run` would make it now.
pub(crate) fn for_run(
    pipeline: &Pipeline,
    only: &[String],
    force: &Force,
    reports: &[PathBuf],
) -> (Vec<PhasePlan>, Option<RunSummary>) {
    let selected = pipeline.select(only);
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let excluded: Vec<PathBuf> = std::iter::once(pipeline.state_dir.clone())
        .chain(reports.iter().cloned())
        .collect();
    let previous = unfinished_run(&state_dir);
    let records = Records::to_read(&state_dir);
    let redactor = pipeline.redactor();
    let plans = plan(
        pipeline,
        &selected,
        force,
        &records,
        &redactor,
        &excluded,
        previous.as_ref(),
    );
    let looked = Looked {
        pipeline,
        force,
        records: &records,
        redactor: &redactor,
        excluded: &excluded,
        previous: previous.as_ref(),
    };
    (with_items(&looked, plans), previous)
}

/// What `status` and `run --dry-run` read to plan the items of `for-each` phases now.
struct Looked<'a> {
    pipeline: &'a Pipeline,
    force: &'a Force,
    records: &'a Records,
    redactor: &'a Redactor,
    excluded: &'a [PathBuf],
    previous: Option<&'a RunSummary>,
}

impl Looked<'_> {
    /// The plans of `made`, phases the run would make now, numbered after the pipeline's own;
    /// `runs` names the phases that run so far.
    fn plan_made(&self, made: &[Phase], runs: &BTreeSet<String>) -> Vec<PhasePlan> {
        let with_ids: Vec<(PhaseId, &Phase)> = made
            .iter()
            .enumerate()
            .map(|(k, p)| (PhaseId::from_table(self.pipeline.phases.len() + k), p))
            .collect();
        plan_made(
            self.pipeline,
            &with_ids,
            self.force,
            self.records,
            self.redactor,
            self.excluded,
            self.previous,
            runs,
        )
    }
}

/// The plans with the items of each `for-each` phase planned under it, as far as they can be
/// read now; a phase downstream of an item that runs runs too.
fn with_items(looked: &Looked<'_>, plans: Vec<PhasePlan>) -> Vec<PhasePlan> {
    let mut runs: BTreeSet<String> = plans
        .iter()
        .filter(|p| !p.is_up_to_date() && p.reasons != [Reason::ForEach])
        .map(|p| p.phase.clone())
        .collect();
    let mut out = Vec::with_capacity(plans.len());
    for mut plan in plans {
        let phase = &looked.pipeline[plan.id];
        if plan.deferred {
            let ran: Vec<String> = phase
                .depends_on
                .iter()
                .filter(|d| runs.contains(&d.value))
                .map(|d| d.value.clone())
                .collect();
            if !ran.is_empty() {
                plan.up_to_date = None;
                plan.restamped = None;
                plan.reasons = vec![Reason::UpstreamRuns { phases: ran }];
                runs.insert(plan.phase.clone());
            }
        }
        if phase.generates.is_some() {
            let made = generated_now(looked, phase, &runs);
            runs.extend(
                made.iter()
                    .filter(|p| !p.is_up_to_date())
                    .map(|p| p.phase.clone()),
            );
            out.push(plan);
            out.extend(made);
            continue;
        }
        if phase.for_each.is_none() {
            out.push(plan);
            continue;
        }
        let items = items_now(looked, phase, &runs, &mut plan);
        if items.iter().any(|p| !p.is_up_to_date())
            || plan
                .reasons
                .iter()
                .any(|r| matches!(r, Reason::Dropped { .. }))
        {
            runs.insert(plan.phase.clone());
        }
        out.push(plan);
        out.extend(items);
    }
    out
}

/// The plans of the phases a planner's file declares now, when it exists and lints.
fn generated_now(looked: &Looked<'_>, planner: &Phase, runs: &BTreeSet<String>) -> Vec<PhasePlan> {
    let workspace = &looked.pipeline.workspace;
    let Ok(made) = super::generated::phases(looked.pipeline, planner, workspace) else {
        return Vec::new();
    };
    looked.plan_made(&made, runs)
}

/// The plans of a `for-each` phase's items as they can be read now; when they cannot, why is
/// added to the phase's reasons, as are the items no longer in the list.
fn items_now(
    looked: &Looked<'_>,
    phase: &Phase,
    runs: &BTreeSet<String>,
    plan: &mut PhasePlan,
) -> Vec<PhasePlan> {
    let Some(for_each) = &phase.for_each else {
        return Vec::new();
    };
    let made = super::expand::items(&looked.pipeline.workspace, looked.excluded, for_each)
        .and_then(|items| {
            if items.len() > for_each.max_items as usize {
                return Err(format!(
                    "{} items, more than its `max-items` of {}",
                    items.len(),
                    for_each.max_items
                ));
            }
            items
                .into_iter()
                .map(|item| super::expand::item_phase(phase, item))
                .collect::<Result<Vec<_>, _>>()
        });
    let made = match made {
        Ok(made) => made,
        Err(why) => {
            plan.reasons.push(Reason::ItemsUnknown { why });
            return Vec::new();
        }
    };
    let names: BTreeSet<&str> = made.iter().map(|p| p.name.value.as_str()).collect();
    let dropped: Vec<String> = looked
        .records
        .items_of(&phase.name.value)
        .into_iter()
        .filter(|name| !names.contains(name.as_str()))
        .collect();
    if !dropped.is_empty() {
        plan.reasons.push(Reason::Dropped { phases: dropped });
    }
    looked.plan_made(&made, runs)
}

/// The pipeline with the phases its planners wrote that lint now, and the number of items of each
/// `for-each` phase whose items can be read now: what `graph` shows of the work made at run time.
pub(crate) fn known_now(mut pipeline: Pipeline) -> (Pipeline, BTreeMap<String, usize>) {
    // No longer the pipeline its cache entry holds.
    pipeline.compiled_from = None;
    let excluded = [pipeline.state_dir.clone()];
    let mut made = Vec::new();
    for planner in pipeline.phases.iter().filter(|p| p.generates.is_some()) {
        let phases = super::generated::phases(&pipeline, planner, &pipeline.workspace);
        made.push((planner.name.value.clone(), phases.unwrap_or_default()));
    }
    for (planner, phases) in made {
        // The phases that depend on the planner wait for its phases too.
        for phase in std::sync::Arc::make_mut(&mut pipeline.phases).iter_mut() {
            if phase.depends_on.iter().any(|d| d.value == planner) {
                let span = phase.name.span;
                phase.depends_on.extend(
                    phases
                        .iter()
                        .map(|p| crate::model::Spanned::new(p.name.value.clone(), span)),
                );
            }
        }
        std::sync::Arc::make_mut(&mut pipeline.phases).extend(phases);
    }
    let items = pipeline
        .phases
        .iter()
        .filter_map(|phase| {
            let for_each = phase.for_each.as_ref()?;
            let items = super::expand::items(&pipeline.workspace, &excluded, for_each).ok()?;
            Some((phase.name.value.clone(), items.len()))
        })
        .collect();
    (pipeline, items)
}

/// The pipeline as a run would make it now, for `check`: the phases its planners wrote that lint
/// now, and each `for-each` phase whose items can be read now replaced by its items' phases
/// (which depend on what it depends on; its dependents on all of them).
pub(crate) fn made_now(pipeline: Pipeline) -> Pipeline {
    let (mut pipeline, _) = known_now(pipeline);
    let excluded = [pipeline.state_dir.clone()];
    let mut phases = Vec::with_capacity(pipeline.phases.len());
    let mut items_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for phase in std::mem::take(std::sync::Arc::make_mut(&mut pipeline.phases)) {
        let made = phase.for_each.as_ref().and_then(|for_each| {
            let items = super::expand::items(&pipeline.workspace, &excluded, for_each).ok()?;
            items
                .into_iter()
                .map(|item| super::expand::item_phase(&phase, item))
                .collect::<Result<Vec<_>, _>>()
                .ok()
        });
        match made {
            Some(made) => {
                items_of.insert(
                    phase.name.value.clone(),
                    made.iter().map(|p| p.name.value.clone()).collect(),
                );
                phases.extend(made);
            }
            None => phases.push(phase),
        }
    }
    for phase in &mut phases {
        let span = phase.name.span;
        let depends_on = std::mem::take(&mut phase.depends_on);
        for dependency in depends_on {
            match items_of.get(&dependency.value) {
                Some(items) => phase.depends_on.extend(
                    items
                        .iter()
                        .map(|i| crate::model::Spanned::new(i.clone(), span)),
                ),
                None => phase.depends_on.push(dependency),
            }
        }
    }
    pipeline.phases = phases.into();
    pipeline
}
