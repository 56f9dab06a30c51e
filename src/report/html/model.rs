//! What the report shows, read from a run's journal alone: its events (`events.jsonl`), its
//! summary (`run.json`), the compiled pipeline it ran (`pipeline.json`) and each attempt's folder
//! (`changes.json`, `verdict.json`, `invocation.json`, the names of its logs). Every one of them is
//! written redacted.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;

use crate::event::record::Standing;
use crate::event::usage::{FailureClass, Spend, Usage};
use crate::event::{
    AttemptOutcome, ChildExit, Event, GateReport, PhaseStatus, RunStatus, Stamped, Step,
};
use crate::redact::Redactor;
use crate::store::run::{RunDir, folder_name};
use crate::store::run_json::RunSummary;

/// A whole run, as the report shows it.
#[derive(Debug, Default)]
pub(crate) struct RunView {
    pub run_id: String,
    pub pipeline: String,
    /// The pipeline file, as `run.json` names it.
    pub file: Option<String>,
    /// RFC 3339, from `run.json`, else the first event's time.
    pub started: Option<String>,
    /// `running`, `passed`, `failed`, `cancelled`, `timed-out`, `crashed`.
    pub status: String,
    pub exit_code: Option<i32>,
    pub resumes: Option<String>,
    /// Whether the run is still going: the page refreshes itself.
    pub live: bool,
    pub max_parallel: Option<u32>,
    /// The run's `retry-budget`, when it has one.
    pub retry_budget: Option<u32>,
    /// From `RunFinished`, else up to the latest event.
    pub duration_ms: u64,
    pub phases: Vec<PhaseView>,
    /// (dependency, dependent), as indices into `phases`.
    pub edges: Vec<(usize, usize)>,
    pub warnings: Vec<String>,
    /// Every attempt's usage, summed.
    pub spend: Spend,
}

/// One phase.
#[derive(Debug)]
pub(crate) struct PhaseView {
    pub name: String,
    /// Its folder in the run (`phases/<folder>`).
    pub folder: String,
    pub status: Option<PhaseStatus>,
    /// Why it was skipped, failed, cancelled or is up to date.
    pub reason: Option<String>,
    /// Why it ran (it was not up to date).
    pub reasons: Vec<String>,
    /// Its agent, or `None` for a `run` step.
    pub agent: Option<String>,
    /// The sub-agent verifier, when one reviews it.
    pub verifier: Option<String>,
    /// `run` step's command.
    pub command: Option<String>,
    /// `retries + 1`.
    pub max_attempts: Option<u32>,
    /// Transient failures retried without spending retries (`transient-retries`).
    pub transient_retries: u32,
    pub attempts: Vec<AttemptView>,
    /// Waits before a retry: (start, end) in the run's milliseconds.
    pub backoffs: Vec<(u64, u64)>,
    /// Wall time from `PhaseFinished`.
    pub duration_ms: Option<u64>,
    pub spend: Spend,
    /// Whether its `escalate` command ran.
    pub escalated: bool,
    /// The exit code of its `escalate` command, when it had one.
    pub escalate_code: Option<i32>,
    /// The name it shares with the other items of a fan-out (`migrate` of `migrate[a]`) and its
    /// item's key.
    pub fan_out: Option<(String, String)>,
}

/// One attempt.
#[derive(Debug, Default)]
pub(crate) struct AttemptView {
    pub number: u32,
    pub started_ms: u64,
    /// When it finished; `None` while it runs (or when the run ended before it did).
    pub ended_ms: Option<u64>,
    /// What it did when: the worker, verification, review, approval.
    pub segments: Vec<Segment>,
    pub outcome: Option<AttemptOutcome>,
    pub duration_ms: Option<u64>,
    pub exit: Option<ChildExit>,
    /// Whether the worker was a `run` step's command.
    pub run_step: bool,
    pub gates: Vec<GateReport>,
    pub failed_gates: Vec<String>,
    pub feedback: Option<String>,
    pub error: Option<String>,
    pub usage: Option<Usage>,
    pub class: Option<FailureClass>,
    /// What its folder holds.
    pub files: AttemptFiles,
}

/// What an attempt's folder holds, read once the attempt ended (it does not change after).
#[derive(Debug, Default, Clone)]
pub(crate) struct AttemptFiles {
    /// The folder, relative to the run's.
    pub dir: String,
    /// Its files (logs, prompt, feedback…) and their sizes, by name; review folders' files as
    /// `review-2/<name>`.
    pub listing: BTreeMap<String, u64>,
    /// `changes.json`.
    pub changes: Option<Changes>,
    /// Each review's `verdict.json` (the sub-agent verifier's answer, or why it is void), by
    /// round: the first in the attempt folder, a later one in `review-<round>/`.
    pub verdicts: Vec<(u32, serde_json::Value)>,
    /// From `invocation.json`: the agent (and its tier) that ran, when it names them, and
    /// whether it continued a session.
    pub agent: Option<String>,
    pub tier: Option<String>,
    pub resume: bool,
    /// `gates.json`, when the events did not carry the reports.
    pub gates: Vec<GateReport>,
    /// `feedback.md`, when the event did not carry it.
    pub feedback: Option<String>,
}

/// What an attempt created, modified and deleted (`changes.json`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Changes {
    #[serde(default)]
    pub created: Vec<String>,
    #[serde(default)]
    pub modified: Vec<String>,
    #[serde(default)]
    pub deleted: Vec<String>,
}

impl Changes {
    pub(crate) fn len(&self) -> usize {
        self.created.len() + self.modified.len() + self.deleted.len()
    }
}

/// A stretch of an attempt, or the wait before one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub kind: SegmentKind,
    pub start: u64,
    pub end: u64,
}

/// What an attempt was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegmentKind {
    /// The agent or `run` step (and the snapshot before it).
    Worker,
    /// The snapshot after, the gates, applying a worktree.
    Verification,
    /// The sub-agent verifier's review.
    Review,
    /// Waiting for a person to approve.
    Approval,
    /// The wait before a retry.
    Backoff,
}

impl SegmentKind {
    /// Its words, as the legend and the bars' labels say them.
    pub(crate) fn label(self) -> &'static str {
        match self {
            SegmentKind::Worker => "worker",
            SegmentKind::Verification => "verification",
            SegmentKind::Review => "sub-agent review",
            SegmentKind::Approval => "waiting for approval",
            SegmentKind::Backoff => "backoff",
        }
    }

    /// Its CSS class.
    pub(crate) fn class(self) -> &'static str {
        match self {
            SegmentKind::Worker => "k-worker",
            SegmentKind::Verification => "k-verify",
            SegmentKind::Review => "k-review",
            SegmentKind::Approval => "k-approval",
            SegmentKind::Backoff => "k-backoff",
        }
    }

    fn of(step: &Step) -> SegmentKind {
        match step {
            Step::Snapshot | Step::Agent | Step::Run => SegmentKind::Worker,
            Step::Verify | Step::Apply | Step::Other(_) => SegmentKind::Verification,
            Step::SubAgentVerification { .. } => SegmentKind::Review,
            Step::AwaitingApproval { .. } => SegmentKind::Approval,
        }
    }
}

impl PhaseView {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            folder: folder_name(name),
            status: None,
            reason: None,
            reasons: Vec::new(),
            agent: None,
            verifier: None,
            command: None,
            max_attempts: None,
            transient_retries: 0,
            attempts: Vec::new(),
            backoffs: Vec::new(),
            duration_ms: None,
            spend: Spend::default(),
            escalated: false,
            escalate_code: None,
            fan_out: fan_out_of(name),
        }
    }

    /// Where it stands, including what a run that ended abnormally leaves.
    pub(crate) fn standing(&self) -> Standing {
        match (self.status, self.attempts.is_empty()) {
            (Some(status), _) => Standing::Ended(status),
            (None, false) => Standing::Unfinished,
            (None, true) => Standing::NotStarted,
        }
    }

    /// The retries it spent of the run's `retry-budget`: every retry but those after a transient
    /// failure that `transient-retries` allowed.
    pub(crate) fn retries_spent(&self) -> u32 {
        let mut transient = 0;
        let mut spent = 0;
        let retried = self.attempts.len().saturating_sub(1);
        for attempt in self.attempts.iter().take(retried) {
            if attempt.class == Some(FailureClass::Transient) && transient < self.transient_retries
            {
                transient += 1;
            } else {
                spent += 1;
            }
        }
        spent
    }

    /// When its first attempt started, and when its last one ended (or the run's latest time).
    pub(crate) fn span(&self, now: u64) -> Option<(u64, u64)> {
        let first = self.attempts.first()?.started_ms;
        let last = self.attempts.last()?.ended_ms.unwrap_or(now);
        Some((first, last.max(first)))
    }
}

/// `migrate[a]` is item `a` of the fan-out `migrate`.
fn fan_out_of(name: &str) -> Option<(String, String)> {
    let open = name.find('[')?;
    let key = name[open + 1..].strip_suffix(']')?;
    (open > 0 && !key.is_empty()).then(|| (name[..open].to_owned(), key.to_owned()))
}

/// Reads attempt folders; a cache that keeps them remembers those that cannot change any more
/// (the attempt ended), for the next page of a live report.
#[derive(Debug, Default)]
pub(crate) struct FolderCache {
    keep: bool,
    ended: HashMap<(String, u32), AttemptFiles>,
    /// The run's `pipeline.json`, which is written before its first event, once read.
    pipeline: Option<PipelineFile>,
    /// The head of the run's `run.json` (written before its first event too), once read.
    head: Option<RunHead>,
}

/// What a report reads of a run's `run.json` when it knows whether the run goes on: the head of
/// the file, not its phases (a few hundred kilobytes for a thousand of them).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RunHead {
    pipeline: String,
    file: std::path::PathBuf,
    started: String,
    #[serde(default)]
    exit_code: Option<i32>,
}

impl RunHead {
    fn read(run: &Path) -> Option<RunHead> {
        let bytes = std::fs::read(run.join(crate::store::run_json::FILE_NAME)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

impl From<RunSummary> for RunHead {
    fn from(summary: RunSummary) -> Self {
        RunHead {
            pipeline: summary.pipeline,
            file: summary.file,
            started: summary.started,
            exit_code: summary.exit_code,
        }
    }
}

/// One attempt folder to read: (phase, attempt) indices, the phase's folder, the attempt's number,
/// whether it ended, whether its `gates.json` and `feedback.md` are needed (the events did not
/// carry them).
type FolderJob = ((usize, usize), String, u32, bool, bool);

/// Attempt folders at or above this many are read on two threads.
const PARALLEL_FOLDERS: usize = 64;

impl FolderCache {
    /// A cache that keeps the folders of attempts that ended, and `pipeline` as the run's
    /// `pipeline.json` when it is given.
    pub(crate) fn keeping(pipeline: Option<PipelineFile>) -> Self {
        Self {
            keep: true,
            pipeline,
            ..Self::default()
        }
    }

    /// The run's `pipeline.json` in `run` (empty when it cannot be read); kept by a cache that
    /// keeps.
    pub(crate) fn pipeline(&mut self, run: &Path) -> &PipelineFile {
        if self.pipeline.is_none() || !self.keep {
            let file = std::fs::read_to_string(run.join("pipeline.json"))
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default();
            self.pipeline = Some(file);
        }
        self.pipeline.get_or_insert_default()
    }

    /// Reads the head of the run's `run.json` in `run` ahead of the first page.
    pub(crate) fn read_ahead(&mut self, run: &Path) {
        self.head(run, false);
    }

    /// The head of the run's `run.json` in `run` (`None` when it cannot be read); kept by a
    /// cache that keeps, and read again when `fresh` is asked for.
    fn head(&mut self, run: &Path, fresh: bool) -> Option<&RunHead> {
        if fresh || self.head.is_none() || !self.keep {
            self.head = RunHead::read(run);
        }
        self.head.as_ref()
    }

    /// Reads the folders of `attempts` (a phase's folder, an attempt's number) that ended, ahead
    /// of the page that shows them: a live report's last page then reads only those that ended
    /// since. Each is read as a page that needs the most of it would (its `gates.json` and
    /// `feedback.md` too), which a page that needs less leaves unused.
    pub(crate) fn read_ended(&mut self, run: &Path, attempts: Vec<(String, u32)>) {
        if !self.keep {
            return;
        }
        let jobs: Vec<FolderJob> = attempts
            .into_iter()
            .filter(|(folder, n)| !self.ended.contains_key(&(folder.clone(), *n)))
            .map(|(folder, n)| ((0, 0), folder, n, true, true))
            .collect();
        self.read(run, jobs);
    }

    /// The folders of `jobs`, in their order.
    fn read(&mut self, run: &Path, jobs: Vec<FolderJob>) -> Vec<((usize, usize), AttemptFiles)> {
        let (known, unknown): (Vec<_>, Vec<_>) = jobs
            .into_iter()
            .partition(|(_, folder, n, ..)| self.ended.contains_key(&(folder.clone(), *n)));
        let mut out: Vec<((usize, usize), AttemptFiles)> = known
            .into_iter()
            .map(|(at, folder, n, ..)| (at, self.ended[&(folder, n)].clone()))
            .collect();
        let read = |jobs: &[FolderJob]| -> Vec<AttemptFiles> {
            jobs.iter()
                .map(|(_, folder, n, _, need)| read_attempt(run, folder, *n, *need))
                .collect()
        };
        let read_all = if unknown.len() >= PARALLEL_FOLDERS {
            let (a, b) = unknown.split_at(unknown.len() / 2);
            std::thread::scope(|scope| {
                let first = scope.spawn(|| read(a));
                let mut second = read(b);
                let mut all = first.join().unwrap_or_else(|_| read(a));
                all.append(&mut second);
                all
            })
        } else {
            read(&unknown)
        };
        for ((at, folder, n, ended, _), files) in unknown.into_iter().zip(read_all) {
            if self.keep && ended {
                self.ended.insert((folder, n), files.clone());
            }
            out.push((at, files));
        }
        out
    }
}

/// The attempt folder `phases/<folder>/attempt-<n>`; its `gates.json` and `feedback.md` only
/// when `need_more`.
fn read_attempt(run: &Path, folder: &str, attempt: u32, need_more: bool) -> AttemptFiles {
    let dir = format!("phases/{folder}/attempt-{attempt}");
    let path = run.join(&dir);
    let mut files = AttemptFiles {
        listing: listing(&path),
        ..AttemptFiles::default()
    };
    let read = |name: &str| {
        files
            .listing
            .contains_key(name)
            .then(|| std::fs::read_to_string(path.join(name)).ok())
            .flatten()
    };
    let changes = read("changes.json").and_then(|text| serde_json::from_str(&text).ok());
    let verdicts: Vec<(u32, serde_json::Value)> = (1..=9)
        .filter_map(|round| {
            let name = if round == 1 {
                "verdict.json".to_owned()
            } else {
                format!("review-{round}/verdict.json")
            };
            let text = read(&name)?;
            Some((round, serde_json::from_str(&text).ok()?))
        })
        .collect();
    let gates = need_more
        .then(|| read("gates.json"))
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let feedback = need_more.then(|| read("feedback.md")).flatten();
    let invocation: Option<serde_json::Value> =
        read("invocation.json").and_then(|text| serde_json::from_str(&text).ok());
    files.changes = changes;
    files.verdicts = verdicts;
    files.gates = gates;
    files.feedback = feedback;
    if let Some(invocation) = invocation {
        let text = |key: &str| {
            invocation
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        // The tier (escalation): its agent, and the `attempt` blocks that set it.
        let tier = invocation
            .get("tier")
            .and_then(serde_json::Value::as_object);
        files.agent = text("agent").or_else(|| {
            tier.and_then(|t| t.get("agent"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        });
        files.tier = text("tier").or_else(|| {
            let blocks: Vec<&str> = tier
                .and_then(|t| t.get("blocks"))
                .and_then(serde_json::Value::as_array)
                .map(|b| b.iter().filter_map(serde_json::Value::as_str).collect())
                .unwrap_or_default();
            (!blocks.is_empty()).then(|| format!("attempt {}", blocks.join(", ")))
        });
        files.resume = invocation.get("resume") == Some(&serde_json::Value::Bool(true));
    }
    files.dir = dir;
    files
}

/// The regular files of an attempt folder and of its `review-N` folders, with their sizes.
fn listing(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        if kind.is_file() {
            let size = entry.metadata().map_or(0, |m| m.len());
            out.insert(name, size);
        } else if kind.is_dir() && name.starts_with("review-") {
            for (inner, size) in listing(&entry.path()) {
                out.insert(format!("{name}/{inner}"), size);
            }
        }
    }
    out
}

/// The compiled pipeline a run kept (`pipeline.json`), as far as the report reads it.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct PipelineFile {
    #[serde(default)]
    max_parallel: Option<u32>,
    #[serde(default)]
    retry_budget: Option<u32>,
    #[serde(default)]
    phases: Vec<PipelinePhase>,
}

#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PipelinePhase {
    name: String,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    worker: PipelineWorker,
    #[serde(default)]
    verifier: Option<String>,
    #[serde(default)]
    retries: Option<u32>,
    #[serde(default)]
    transient_retries: Option<u32>,
}

/// Who does a phase's work, as far as the report shows it: an agent's name or a `run` step's
/// command (a value of another type is left out, not an error).
#[derive(Debug, Default, PartialEq, Deserialize)]
struct PipelineWorker {
    #[serde(default, deserialize_with = "text_or_none")]
    agent: Option<String>,
    #[serde(default, deserialize_with = "text_or_none")]
    run: Option<String>,
}

impl PipelineFile {
    /// What the report reads of the `pipeline.json` a run writes of `pipeline` with `redactor`
    /// (every string redacted), taken from the pipeline itself: the run's own report need not
    /// read back the megabyte of JSON a large pipeline is.
    pub(crate) fn of(pipeline: &crate::model::Pipeline, redactor: &Redactor) -> Self {
        let text = |value: &str| redactor.redact(value);
        PipelineFile {
            max_parallel: Some(pipeline.max_parallel),
            retry_budget: pipeline.retry_budget,
            phases: pipeline
                .phases
                .iter()
                .map(|phase| PipelinePhase {
                    name: text(&phase.name.value),
                    depends_on: phase.depends_on.iter().map(|d| text(&d.value)).collect(),
                    worker: match &phase.worker {
                        crate::model::Worker::Agent(agent) => PipelineWorker {
                            agent: Some(text(&agent.value)),
                            run: None,
                        },
                        crate::model::Worker::Run(command) => PipelineWorker {
                            agent: None,
                            run: Some(text(command)),
                        },
                    },
                    verifier: phase.verifier.as_ref().map(|v| text(&v.value)),
                    retries: Some(phase.retries),
                    transient_retries: Some(phase.transient_retries),
                })
                .collect(),
        }
    }
}

/// A string, or `None` for any other value.
fn text_or_none<'de, D: serde::Deserializer<'de>>(value: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(value)? {
        serde_json::Value::String(text) => Some(text),
        _ => None,
    })
}

/// Folds a run's events, then reads what its folder adds.
pub(crate) struct Builder<'a> {
    view: RunView,
    index: HashMap<String, usize>,
    run: &'a RunDir,
    /// Attempts by (phase index, number): index into that phase's `attempts`.
    open: HashMap<(usize, u32), usize>,
    /// The segment under way, by (phase index, attempt index).
    current: HashMap<(usize, usize), (SegmentKind, u64)>,
    /// Every phase's latest backoff that has not ended.
    waiting: HashMap<usize, u64>,
}

impl<'a> Builder<'a> {
    pub(crate) fn new(run: &'a RunDir) -> Self {
        Self {
            view: RunView {
                run_id: run.run_id.clone(),
                status: "running".to_owned(),
                ..RunView::default()
            },
            index: HashMap::new(),
            run,
            open: HashMap::new(),
            current: HashMap::new(),
            waiting: HashMap::new(),
        }
    }

    /// Folds in the events, in order.
    pub(crate) fn events(mut self, events: &[Stamped]) -> Self {
        if let Some(first) = events.first() {
            self.view.started = Some(first.time.clone());
        }
        for stamped in events {
            self.apply(stamped);
        }
        self
    }

    /// The view, completed from the run's folder: `run.json`, `pipeline.json` and every
    /// attempt's folder. `live` says whether the run is still going (the caller knows best: the
    /// run itself, or `run.json` with its lock).
    pub(crate) fn finish(mut self, live: Option<bool>, cache: &mut FolderCache) -> RunView {
        let now = self.view.duration_ms;
        for ((phase, attempt), (kind, start)) in std::mem::take(&mut self.current) {
            self.view.phases[phase].attempts[attempt]
                .segments
                .push(Segment {
                    kind,
                    start,
                    end: now.max(start),
                });
        }
        for (phase, start) in std::mem::take(&mut self.waiting) {
            self.view.phases[phase]
                .backoffs
                .push((start, now.max(start)));
        }
        self.summary(live, cache);
        self.pipeline(cache.pipeline(&self.run.path));
        let mut jobs: Vec<FolderJob> = Vec::new();
        for (p, phase) in self.view.phases.iter().enumerate() {
            for (a, attempt) in phase.attempts.iter().enumerate() {
                let need_more = attempt.gates.is_empty()
                    || (attempt.feedback.is_none()
                        && attempt.outcome == Some(AttemptOutcome::Failed));
                let ended = attempt.ended_ms.is_some();
                jobs.push((
                    (p, a),
                    phase.folder.clone(),
                    attempt.number,
                    ended,
                    need_more,
                ));
            }
        }
        for ((p, a), files) in cache.read(&self.run.path, jobs) {
            let attempt = &mut self.view.phases[p].attempts[a];
            attempt.files = files;
            if attempt.gates.is_empty() {
                attempt.gates = std::mem::take(&mut attempt.files.gates);
            }
            if attempt.feedback.is_none() && attempt.outcome == Some(AttemptOutcome::Failed) {
                attempt.feedback = attempt.files.feedback.take();
            }
        }
        self.view
    }

    /// What `run.json` adds: the file, the start, and the status of a run that ended without
    /// saying so (killed: `crashed`). When the caller says whether the run goes on (the run's own
    /// report), only the head of the file is read, kept by a cache that keeps (and read again when
    /// the exit code, written as the run ends, is wanted from it); else the whole summary, whose
    /// run lock tells whether the run goes on.
    fn summary(&mut self, live: Option<bool>, cache: &mut FolderCache) {
        let (head, live) = if let Some(live) = live {
            let fresh = self.view.exit_code.is_none();
            (cache.head(&self.run.path, fresh).cloned(), live)
        } else {
            let summary = RunSummary::read(self.run).ok();
            let live = summary
                .as_ref()
                .is_some_and(|s| s.current_status() == "running");
            (summary.map(RunHead::from), live)
        };
        let view = &mut self.view;
        if let Some(head) = head {
            view.file = Some(head.file.display().to_string());
            view.started = Some(head.started);
            view.pipeline = head.pipeline;
            if view.exit_code.is_none() {
                view.exit_code = head.exit_code;
            }
        }
        let running = view.status == "running";
        view.live = running && live;
        if running && !view.live {
            "crashed".clone_into(&mut view.status);
        }
    }

    /// What `pipeline.json` adds: each phase's worker, verifier and attempts, the edges of the
    /// DAG, the run's budget.
    fn pipeline(&mut self, file: &PipelineFile) {
        self.view.retry_budget = file.retry_budget;
        if self.view.max_parallel.is_none() {
            self.view.max_parallel = file.max_parallel;
        }
        let defined: HashMap<&str, &PipelinePhase> =
            file.phases.iter().map(|p| (p.name.as_str(), p)).collect();
        let mut edges = Vec::new();
        for i in 0..self.view.phases.len() {
            let phase = &self.view.phases[i];
            let base = phase.fan_out.as_ref().map(|(base, _)| base.as_str());
            let Some(def) = defined
                .get(phase.name.as_str())
                .or_else(|| base.and_then(|b| defined.get(b)))
            else {
                continue;
            };
            for dependency in &def.depends_on {
                edges.extend(self.phases_named(dependency).into_iter().map(|d| (d, i)));
            }
            let phase = &mut self.view.phases[i];
            phase.agent.clone_from(&def.worker.agent);
            phase.command.clone_from(&def.worker.run);
            phase.verifier.clone_from(&def.verifier);
            phase.transient_retries = def.transient_retries.unwrap_or(0);
            if phase.max_attempts.is_none() {
                phase.max_attempts = def.retries.map(|r| r + 1);
            }
        }
        edges.sort_unstable();
        edges.dedup();
        self.view.edges = edges;
    }

    /// The phases a `depends-on` name stands for: the phase of that name, else every item of
    /// the fan-out of that name.
    fn phases_named(&self, name: &str) -> Vec<usize> {
        if let Some(&i) = self.index.get(name) {
            return vec![i];
        }
        self.view
            .phases
            .iter()
            .enumerate()
            .filter(|(_, p)| p.fan_out.as_ref().is_some_and(|(base, _)| base == name))
            .map(|(i, _)| i)
            .collect()
    }

    fn phase(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.view.phases.push(PhaseView::new(name));
        self.index
            .insert(name.to_owned(), self.view.phases.len() - 1);
        self.view.phases.len() - 1
    }

    /// The attempt `number` of phase `p`, begun at `now` when no event began it.
    fn attempt(&mut self, p: usize, number: u32, now: u64) -> usize {
        if let Some(&a) = self.open.get(&(p, number)) {
            return a;
        }
        let attempts = &mut self.view.phases[p].attempts;
        attempts.push(AttemptView {
            number,
            started_ms: now,
            ..AttemptView::default()
        });
        let a = attempts.len() - 1;
        self.open.insert((p, number), a);
        self.current.insert((p, a), (SegmentKind::Worker, now));
        a
    }

    /// Ends the segment under way at `now`, and begins `next` when there is one.
    fn segment(&mut self, p: usize, a: usize, now: u64, next: Option<SegmentKind>) {
        let key = (p, a);
        if let (Some((kind, _)), Some(next)) = (self.current.get(&key), next)
            && *kind == next
        {
            return;
        }
        if let Some((kind, start)) = self.current.remove(&key) {
            self.view.phases[p].attempts[a].segments.push(Segment {
                kind,
                start,
                end: now.max(start),
            });
        }
        if let Some(next) = next {
            self.current.insert(key, (next, now));
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one arm per event: the per-event match reads best whole"
    )]
    fn apply(&mut self, stamped: &Stamped) {
        let now = stamped.elapsed_ms;
        self.view.duration_ms = self.view.duration_ms.max(now);
        match &stamped.event {
            Event::RunStarted {
                pipeline,
                phases,
                max_parallel,
                resumes,
                ..
            } => {
                self.view.pipeline.clone_from(pipeline);
                self.view.max_parallel = Some(*max_parallel);
                self.view.resumes.clone_from(resumes);
                for phase in phases {
                    self.phase(phase);
                }
            }
            Event::PhasesMade { made, .. } => {
                for phase in made {
                    self.phase(phase);
                }
            }
            Event::PhaseQueued { phase, reasons } => {
                let p = self.phase(phase);
                self.view.phases[p].reasons.clone_from(reasons);
            }
            Event::AttemptStarted {
                phase,
                attempt,
                max_attempts,
                ..
            } => {
                let p = self.phase(phase);
                self.view.phases[p].max_attempts = Some(*max_attempts);
                if let Some(start) = self.waiting.remove(&p) {
                    self.view.phases[p].backoffs.push((start, now.max(start)));
                }
                self.attempt(p, *attempt, now);
            }
            Event::Step {
                phase,
                attempt,
                step,
            } => {
                let p = self.phase(phase);
                let a = self.attempt(p, *attempt, now);
                self.segment(p, a, now, Some(SegmentKind::of(step)));
                if *step == Step::Run {
                    self.view.phases[p].attempts[a].run_step = true;
                }
            }
            Event::ChildExited {
                phase,
                attempt,
                exit,
            } => {
                let p = self.phase(phase);
                let a = self.attempt(p, *attempt, now);
                self.view.phases[p].attempts[a].exit = Some(exit.clone());
            }
            Event::GateFinished {
                phase,
                attempt,
                report,
            } => {
                let p = self.phase(phase);
                let a = self.attempt(p, *attempt, now);
                self.view.phases[p].attempts[a].gates.push(report.clone());
            }
            Event::AttemptFinished { phase, attempt, .. } => {
                let p = self.phase(phase);
                let a = self.attempt(p, *attempt, now);
                self.segment(p, a, now, None);
                self.attempt_finished(p, a, now, &stamped.event);
            }
            Event::RetryScheduled {
                phase, backoff_ms, ..
            } => {
                let p = self.phase(phase);
                if *backoff_ms > 0 {
                    self.waiting.insert(p, now);
                }
            }
            Event::PhaseFinished {
                phase,
                status,
                duration_ms,
                reason,
                ..
            } => {
                let p = self.phase(phase);
                if let Some(start) = self.waiting.remove(&p) {
                    self.view.phases[p].backoffs.push((start, now.max(start)));
                }
                let view = &mut self.view.phases[p];
                view.status = Some(*status);
                view.duration_ms = Some(*duration_ms);
                view.reason.clone_from(reason);
            }
            Event::Escalated { phase, code } => {
                let p = self.phase(phase);
                self.view.phases[p].escalated = true;
                self.view.phases[p].escalate_code = *code;
            }
            Event::Warning { message } => self.view.warnings.push(message.clone()),
            Event::RunFinished {
                status,
                duration_ms,
                exit_code,
            } => {
                run_status(*status).clone_into(&mut self.view.status);
                self.view.duration_ms = self.view.duration_ms.max(*duration_ms);
                self.view.exit_code = Some(*exit_code);
            }
        }
    }

    fn attempt_finished(&mut self, p: usize, a: usize, now: u64, event: &Event) {
        let Event::AttemptFinished {
            outcome,
            duration_ms,
            failed_gates,
            feedback,
            error,
            usage,
            class,
            ..
        } = event
        else {
            return;
        };
        if let Some(usage) = usage {
            self.view.phases[p].spend.add(usage);
            self.view.spend.add(usage);
        }
        let attempt = &mut self.view.phases[p].attempts[a];
        attempt.ended_ms = Some(now);
        attempt.outcome = Some(*outcome);
        attempt.duration_ms = Some(*duration_ms);
        attempt.failed_gates.clone_from(failed_gates);
        attempt.feedback.clone_from(feedback);
        attempt.error.clone_from(error);
        attempt.usage.clone_from(usage);
        attempt.class = *class;
    }
}

/// A run's status as `run.json` writes it.
fn run_status(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Passed => "passed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
        RunStatus::TimedOut => "timed-out",
    }
}

/// The run folder a report of `run` links its files from, as seen from `out`: relative when
/// `out` is inside the run folder or above it, else (or without `out`) the absolute path.
pub(crate) fn link_base(run: &Path, out: Option<&Path>) -> String {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let run = absolute(run);
    let Some(folder) = out
        .map(absolute)
        .and_then(|o| o.parent().map(Path::to_owned))
    else {
        return format!("file://{}/", path_url(&run));
    };
    if folder == run {
        return String::new();
    }
    match run.strip_prefix(&folder) {
        Ok(rel) => format!("{}/", path_url(rel)),
        Err(_) => format!("file://{}/", path_url(&run)),
    }
}

/// A path as a URL path: each segment percent-encoded where it needs to be.
pub(crate) fn path_url(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(byte as char);
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the run's own report takes from the pipeline is what it would read of the run's
    /// `pipeline.json`: for every example, and for a pipeline with secrets in its commands,
    /// names, dependencies and verifier.
    #[test]
    fn the_pipeline_file_of_a_pipeline_is_what_its_json_reads_as() {
        use crate::language::{FsLoader, Options, compile};
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut pipelines = Vec::new();
        for entry in std::fs::read_dir(&examples).unwrap() {
            let path = entry.unwrap().path().join("pipeline.kdl");
            if let Ok(text) = std::fs::read_to_string(&path) {
                pipelines.push((path, text));
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("pipeline.kdl");
        let text = r#"pipeline "p" {
    secret "TOKEN"
    env "TOKEN" "s3cr3t"
    retry-budget 4
    max-parallel 3
}
agent "bot-s3cr3t" {
    command "sh" "-c" "true"
}
phase "a-s3cr3t" {
    run "echo s3cr3t"
    retries 2
}
phase "b" {
    depends-on "a-s3cr3t"
    agent "bot-s3cr3t"
    prompt "x"
    verify "sub-agent"
    verifier "bot-s3cr3t"
}
"#;
        pipelines.push((secret, text.to_owned()));
        assert!(pipelines.len() >= 4, "{}", pipelines.len());
        for (path, text) in &pipelines {
            let compilation = compile(path, text, &FsLoader, Options::default());
            let pipeline = compilation
                .pipeline
                .unwrap_or_else(|| panic!("{}: {:?}", path.display(), compilation.diagnostics));
            let redactor = pipeline.redactor();
            let json = redactor.to_json_pretty(&pipeline).unwrap();
            let read: PipelineFile = serde_json::from_str(&json).unwrap();
            assert_eq!(
                PipelineFile::of(&pipeline, &redactor),
                read,
                "{}",
                path.display()
            );
            assert!(!read.phases.is_empty());
        }
        let last = &pipelines.last().unwrap();
        let pipeline = compile(&last.0, &last.1, &FsLoader, Options::default())
            .pipeline
            .unwrap();
        let file = PipelineFile::of(&pipeline, &pipeline.redactor());
        assert!(!format!("{file:?}").contains("s3cr3t"), "{file:?}");
        assert_eq!(file.retry_budget, Some(4));
    }

    fn at(elapsed_ms: u64, event: Event) -> Stamped {
        Stamped {
            time: "2026-01-01T00:00:00.000Z".to_owned(),
            elapsed_ms,
            event,
        }
    }

    fn step(elapsed_ms: u64, attempt: u32, step: Step) -> Stamped {
        at(
            elapsed_ms,
            Event::Step {
                phase: "a".to_owned(),
                attempt,
                step,
            },
        )
    }

    fn finished(elapsed_ms: u64, attempt: u32, outcome: AttemptOutcome) -> Stamped {
        at(
            elapsed_ms,
            Event::AttemptFinished {
                phase: "a".to_owned(),
                attempt,
                outcome,
                duration_ms: 0,
                failed_gates: Vec::new(),
                feedback: None,
                error: None,
                usage: None,
                class: Some(FailureClass::Work),
                nothing_to_change: false,
            },
        )
    }

    #[test]
    fn an_attempt_is_cut_into_what_it_did_and_a_backoff_waits_between_two() {
        let started = |elapsed_ms, attempt| {
            at(
                elapsed_ms,
                Event::AttemptStarted {
                    phase: "a".to_owned(),
                    attempt,
                    max_attempts: 2,
                    tier: None,
                },
            )
        };
        let events = [
            started(0, 1),
            step(0, 1, Step::Snapshot),
            step(5, 1, Step::Agent),
            step(100, 1, Step::Verify),
            step(120, 1, Step::SubAgentVerification { round: 1, of: 2 }),
            step(
                300,
                1,
                Step::AwaitingApproval {
                    command: "helixflow approve".to_owned(),
                },
            ),
            finished(900, 1, AttemptOutcome::Failed),
            at(
                900,
                Event::RetryScheduled {
                    phase: "a".to_owned(),
                    next_attempt: 2,
                    backoff_ms: 1000,
                },
            ),
            started(1900, 2),
            step(1900, 2, Step::Agent),
        ];
        let run = RunDir {
            path: Path::new("/nonexistent/run").to_owned(),
            run_id: "1".to_owned(),
        };
        let view = Builder::new(&run)
            .events(&events)
            .finish(Some(true), &mut FolderCache::default());
        let phase = &view.phases[0];
        let kinds: Vec<(SegmentKind, u64, u64)> = phase.attempts[0]
            .segments
            .iter()
            .map(|s| (s.kind, s.start, s.end))
            .collect();
        assert_eq!(
            kinds,
            [
                (SegmentKind::Worker, 0, 100),
                (SegmentKind::Verification, 100, 120),
                (SegmentKind::Review, 120, 300),
                (SegmentKind::Approval, 300, 900),
            ]
        );
        assert_eq!(phase.backoffs, [(900, 1900)]);
        // The second attempt runs on: its segment reaches the latest event.
        assert_eq!(phase.attempts[1].ended_ms, None);
        assert_eq!(
            phase.attempts[1].segments,
            [Segment {
                kind: SegmentKind::Worker,
                start: 1900,
                end: 1900
            }]
        );
        assert!(view.live);
        assert_eq!(phase.retries_spent(), 1);
    }

    #[test]
    fn fan_out_items_are_named_base_and_key() {
        assert_eq!(
            fan_out_of("migrate[users.sql]"),
            Some(("migrate".to_owned(), "users.sql".to_owned()))
        );
        assert_eq!(fan_out_of("[a]"), None);
        assert_eq!(fan_out_of("a[]"), None);
        assert_eq!(fan_out_of("plain"), None);
    }

    #[test]
    fn links_are_relative_beside_the_run_and_encoded() {
        let run = Path::new("/w/.helixflow/runs/1");
        assert_eq!(link_base(run, Some(&run.join("report.html"))), "");
        assert_eq!(
            link_base(run, Some(Path::new("/w/.helixflow/runs/r.html"))),
            "1/"
        );
        assert_eq!(
            link_base(run, Some(Path::new("/tmp/r.html"))),
            "file:///w/.helixflow/runs/1/"
        );
        assert_eq!(path_url(Path::new("a b/#c")), "a%20b/%23c");
    }
}
