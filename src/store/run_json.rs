//! `run.json`, the summary of a run: what `helixflow runs` and `helixflow show` read, kept current
//! by a sink of the run's events.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::lock::LiveRun;
use super::run::RunDir;
use crate::event::record::{AttemptRecord, RunRecord};
use crate::event::sink::EventSink;
use crate::event::usage::{FailureClass, Spend};
use crate::event::{AttemptOutcome, Event, Stamped};

/// The file's name in a run's folder.
pub(crate) const FILE_NAME: &str = "run.json";

/// How often `run.json` is rewritten while a run goes on.
const SUMMARY_INTERVAL: Duration = Duration::from_secs(1);

/// The summary of a run, `run.json`: written when the run starts and rewritten when it ends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct RunSummary {
    /// The run's id.
    pub run_id: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// The pipeline file.
    pub file: PathBuf,
    /// RFC 3339 start time.
    pub started: String,
    /// RFC 3339 end time, once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// `running`, `passed`, `failed`, `cancelled` or `timed-out`.
    pub status: String,
    /// The process exit code, once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The helixflow process running it (to tell a crashed run from a running one).
    pub pid: u32,
    /// The earlier run this one continues, when that one failed, was interrupted or crashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumes: Option<String>,
    /// Per phase, in file order.
    pub phases: Vec<PhaseSummary>,
    /// What every attempt's agent used, summed; an unknown cost is counted apart, never as zero.
    #[serde(default, skip_serializing_if = "Spend::is_empty")]
    pub cost: Spend,
    /// When `run.json` says `running`: the state folder's run lock, when this run holds it (read
    /// with the file, not part of it).
    #[serde(skip)]
    pub live: Option<LiveRun>,
}

impl RunSummary {
    /// Reads the `run.json` of a run, and for one that says it is running, whether it holds the
    /// run lock of its state folder (the folder two levels up).
    pub(crate) fn read(run: &RunDir) -> io::Result<Self> {
        let text = fs::read_to_string(run.path.join(FILE_NAME))?;
        let mut summary: Self = serde_json::from_str(&text).map_err(io::Error::other)?;
        if summary.status == "running" {
            summary.live = run
                .path
                .parent()
                .and_then(Path::parent)
                .and_then(super::lock::live_run)
                .filter(|live| live.run_id.as_deref() == Some(summary.run_id.as_str()));
        }
        Ok(summary)
    }

    /// Whether the `run.json` of a run says it passed, read without the rest of the summary
    /// (a run of a thousand phases has one of a few hundred kilobytes, and the next run looks at
    /// the last one's). `false` when it cannot be read.
    pub(crate) fn says_passed(run: &RunDir) -> bool {
        /// The one field read.
        #[derive(Deserialize)]
        struct Status<'a> {
            #[serde(borrow)]
            status: std::borrow::Cow<'a, str>,
        }
        fs::read(run.path.join(FILE_NAME)).is_ok_and(|bytes| {
            serde_json::from_slice::<Status>(&bytes).is_ok_and(|s| s.status == "passed")
        })
    }

    /// The run's status as it stands: `crashed` when `run.json` says `running` but the run does
    /// not hold the run lock of its state folder (its helixflow was killed outright, or the
    /// machine stopped), or holds it only until its watchdog has stopped the agents of a killed
    /// helixflow; else as recorded. `status`, `runs` and `show` all tell a run's status by this.
    pub(crate) fn current_status(&self) -> &str {
        if self.status == "running" && self.running_pid().is_none() {
            "crashed"
        } else {
            &self.status
        }
    }

    /// The status in words: `running (pid 4242)` for a live run, else [`Self::current_status`].
    pub(crate) fn status_words(&self) -> String {
        match self.running_pid() {
            Some(pid) => format!("running (pid {pid})"),
            None => self.current_status().to_owned(),
        }
    }

    /// The process of a run that is live: it says it is running and holds the run lock, and its
    /// helixflow was not killed.
    pub(crate) fn running_pid(&self) -> Option<u32> {
        self.live
            .as_ref()
            .filter(|live| self.status == "running" && !live.killed)
            .map(|live| live.pid.unwrap_or(self.pid))
    }
}

/// The newest run in `runs_dir`, other than `except`, in which `phase` passed.
pub(crate) fn last_passed(runs_dir: &Path, phase: &str, except: &str) -> Option<String> {
    let runs = super::run::list_runs(runs_dir).ok()?;
    runs.iter()
        .rev()
        .filter(|run| run.run_id != except)
        .find(|run| {
            RunSummary::read(run).is_ok_and(|summary| {
                summary
                    .phases
                    .iter()
                    .any(|p| p.name == phase && p.status == "passed")
            })
        })
        .map(|run| run.run_id.clone())
}

/// One phase's line in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct PhaseSummary {
    /// The phase.
    pub name: String,
    /// `pending`, `running`, `passed`, `failed`, `skipped` or `cancelled`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// What failed in the last attempt: `agent` (or `run`, for a `run` step) when the child did,
    /// then the gates that failed.
    #[serde(default)]
    pub failed_gates: Vec<String>,
    /// Why the last attempt's agent or `run` step failed, when how it exited does not say: it
    /// could not start, its response could not be read, or its transcript lacks the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why it ran: what made it not up to date.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// What its attempts' agents used, summed.
    #[serde(default, skip_serializing_if = "Spend::is_empty")]
    pub cost: Spend,
    /// How its last attempt failed: `transient`, `fatal` or `work`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_class: Option<FailureClass>,
    /// Each attempt's tier, and how it ended, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<AttemptTier>,
    /// It passed with an attempt that changed nothing, as its agent declared: "passed, nothing
    /// to change".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nothing_to_change: bool,
}

impl PhaseSummary {
    /// Attempt `attempt` started, in `tier`.
    fn started(&mut self, attempt: u32, tier: Option<&crate::event::Tier>) {
        self.status = "running".into();
        self.attempts = attempt;
        if let Some(tier) = tier {
            self.tiers.push(AttemptTier {
                attempt,
                work_attempt: tier.work_attempt,
                agent: tier.agent.clone(),
                blocks: tier.blocks.clone(),
                outcome: None,
            });
        }
    }
}

impl PhaseSummary {
    /// Attempt `number` ended with `outcome`; `attempt` is it as the reporters see it.
    fn ended(&mut self, attempt: &AttemptRecord, number: u32, outcome: AttemptOutcome) {
        if let Some(tier) = self.tiers.iter_mut().rfind(|t| t.attempt == number) {
            tier.outcome = Some(outcome);
        }
        if outcome == AttemptOutcome::Cancelled {
            // Stopped, not failed: the phase's reason says why.
            self.failed_gates.clear();
            self.error = None;
        } else {
            // As the table at the end of a run shows it: the agent or run command first.
            self.failed_gates = attempt.failures();
            self.error = attempt.error().map(str::to_owned);
        }
    }
}

/// One attempt's tier in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct AttemptTier {
    /// The attempt, counting every try.
    pub attempt: u32,
    /// The attempt of the work it is: a try after a transient failure repeats it.
    pub work_attempt: u32,
    /// The agent that did the work; none for a `run` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The `attempt` blocks that set it; empty: the phase's own settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<String>,
    /// `passed`, `failed` or `cancelled`, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AttemptOutcome>,
}

impl PhaseSummary {
    /// A phase that has not started.
    fn pending(name: String) -> Self {
        PhaseSummary {
            name,
            status: "pending".into(),
            attempts: 0,
            duration_ms: 0,
            failed_gates: Vec::new(),
            error: None,
            reason: None,
            reasons: Vec::new(),
            cost: Spend::default(),
            failure_class: None,
            tiers: Vec::new(),
            nothing_to_change: false,
        }
    }
}

/// `run.json` as the events tell it, kept current on the disk: rewritten within a second of a
/// change, and at once when the run ends.
pub(crate) struct RunJson {
    path: PathBuf,
    summary: RunSummary,
    /// Phase name to its place in `summary.phases`.
    index: HashMap<String, usize>,
    /// The run as the reporters see it, for what failed in an attempt.
    record: RunRecord,
    /// When the file was last written.
    written: Instant,
    /// Whether the summary changed since.
    dirty: bool,
}

impl RunJson {
    /// Writes the `run.json` of a run that starts now, of `pipeline` in `file`, with `phases`
    /// (the selected ones, in file order) pending.
    pub(crate) fn start(
        run: &RunDir,
        pipeline: &str,
        file: &Path,
        resumes: Option<String>,
        phases: impl IntoIterator<Item = String>,
    ) -> io::Result<Self> {
        let summary = RunSummary {
            run_id: run.run_id.clone(),
            pipeline: pipeline.to_owned(),
            file: file.to_owned(),
            started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            finished: None,
            status: "running".into(),
            exit_code: None,
            pid: std::process::id(),
            resumes,
            phases: phases.into_iter().map(PhaseSummary::pending).collect(),
            cost: Spend::default(),
            live: None,
        };
        let index = summary
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), i))
            .collect();
        let mut run_json = Self {
            path: run.path.join(FILE_NAME),
            summary,
            index,
            record: RunRecord::default(),
            written: Instant::now(),
            dirty: false,
        };
        run_json.write()?;
        Ok(run_json)
    }

    /// Replaces `run.json` through a rename, so that helixflow killed at any moment leaves the old
    /// or the new one, never half of one. Not synced to the disk, like the journal: a sync costs
    /// milliseconds per write here, and what it guards against (the machine losing power) the
    /// journal is not guarded against either.
    fn write(&mut self) -> io::Result<()> {
        self.written = Instant::now();
        self.dirty = false;
        let tmp = self.path.with_extension("tmp");
        fs::write(
            &tmp,
            serde_json::to_string_pretty(&self.summary)?.as_bytes(),
        )?;
        fs::rename(&tmp, &self.path)
    }

    /// Applies an event; true when `run.json` should be rewritten.
    fn apply(&mut self, stamped: &Stamped) -> bool {
        self.record.apply(stamped);
        let Self {
            summary,
            index,
            record,
            ..
        } = self;
        let phases = &mut summary.phases;
        let at = |phase: &str| index.get(phase).copied();
        match &stamped.event {
            Event::AttemptStarted {
                phase,
                attempt,
                tier,
                ..
            } => {
                if let Some(i) = at(phase) {
                    phases[i].started(*attempt, tier.as_ref());
                }
                true
            }
            Event::AttemptFinished {
                phase,
                attempt: number,
                outcome,
                class,
                nothing_to_change,
                ..
            } => {
                summary.cost = record.spend();
                let spend = record.phase(phase).map(|record| record.spend);
                let attempt = record
                    .phase(phase)
                    .and_then(|record| record.attempt.as_ref());
                if let (Some(i), Some(attempt)) = (at(phase), attempt) {
                    let p = &mut phases[i];
                    p.cost = spend.unwrap_or_default();
                    p.failure_class = *class;
                    p.nothing_to_change = *nothing_to_change;
                    p.ended(attempt, *number, *outcome);
                }
                true
            }
            Event::PhaseFinished {
                phase,
                status,
                attempts,
                duration_ms,
                reason,
            } => {
                if let Some(i) = at(phase) {
                    let p = &mut phases[i];
                    p.status = label(status);
                    p.attempts = *attempts;
                    p.duration_ms = *duration_ms;
                    p.reason.clone_from(reason);
                }
                true
            }
            Event::PhaseQueued { phase, reasons } => {
                if let Some(i) = at(phase) {
                    phases[i].reasons.clone_from(reasons);
                }
                true
            }
            Event::PhasesMade { phase, made, .. } => made_phases(phases, index, phase, made),
            Event::RunFinished {
                status, exit_code, ..
            } => {
                summary.status = label(status);
                summary.exit_code = Some(*exit_code);
                summary.finished = Some(
                    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
                );
                true
            }
            _ => false,
        }
    }
}

/// Phases made while the run goes on, listed right after the phase that made them (a `for-each`
/// phase's items under it).
fn made_phases(
    phases: &mut Vec<PhaseSummary>,
    index: &mut HashMap<String, usize>,
    by: &str,
    made: &[String],
) -> bool {
    let at = index.get(by).map_or(phases.len(), |i| i + 1);
    let new: Vec<PhaseSummary> = made
        .iter()
        .filter(|name| !index.contains_key(*name))
        .map(|name| PhaseSummary::pending(name.clone()))
        .collect();
    phases.splice(at..at, new);
    index.clear();
    index.extend(phases.iter().enumerate().map(|(i, p)| (p.name.clone(), i)));
    true
}

impl EventSink for RunJson {
    fn event(&mut self, stamped: &Stamped) -> io::Result<()> {
        // Rewriting run.json for every finished phase made large runs quadratic; it is rewritten
        // at most once a second while running, and always at the end.
        let finished = matches!(stamped.event, Event::RunFinished { .. });
        self.dirty |= self.apply(stamped);
        if self.dirty && (finished || self.written.elapsed() >= SUMMARY_INTERVAL) {
            self.write()?;
        }
        Ok(())
    }

    /// A change waits at most until a second has passed since the last write, even when no
    /// further event comes: `helixflow show` during a long attempt sees the run as it is.
    fn next_tick(&self) -> Option<Instant> {
        self.dirty.then(|| self.written + SUMMARY_INTERVAL)
    }

    fn tick(&mut self) -> io::Result<()> {
        self.write()
    }

    fn exit_code_changed(&mut self, exit_code: i32) -> io::Result<()> {
        self.summary.exit_code = Some(exit_code);
        self.write()
    }

    fn name(&self) -> String {
        FILE_NAME.to_owned()
    }

    fn records_the_run(&self) -> bool {
        true
    }
}

/// A status as its JSON string (`passed`, `timed-out`, …).
fn label(status: &impl serde::Serialize) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{PhaseStatus, RunStatus};

    fn stamped(event: Event) -> Stamped {
        Stamped {
            time: "2026-01-01T00:00:00.000Z".to_owned(),
            elapsed_ms: 0,
            event,
        }
    }

    #[test]
    fn a_change_is_written_within_a_second_and_the_end_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        let mut run_json =
            RunJson::start(&run, "p", Path::new("p.kdl"), None, ["a".to_owned()]).unwrap();
        let read = || RunSummary::read(&run).unwrap();
        assert_eq!(read().phases[0].status, "pending");
        assert_eq!(run_json.next_tick(), None);
        run_json
            .event(&stamped(Event::AttemptStarted {
                phase: "a".to_owned(),
                attempt: 1,
                max_attempts: 1,
                tier: None,
            }))
            .unwrap();
        // Just written at the start: the change waits for its tick, at most a second away.
        assert_eq!(read().phases[0].status, "pending");
        let tick = run_json.next_tick().expect("a change waits for a tick");
        assert!(tick <= Instant::now() + SUMMARY_INTERVAL);
        run_json.tick().unwrap();
        assert_eq!(read().phases[0].status, "running");
        assert_eq!(run_json.next_tick(), None);
        run_json
            .event(&stamped(Event::PhaseFinished {
                phase: "a".to_owned(),
                status: PhaseStatus::Passed,
                attempts: 1,
                duration_ms: 3,
                reason: None,
            }))
            .unwrap();
        run_json
            .event(&stamped(Event::RunFinished {
                status: RunStatus::Passed,
                duration_ms: 4,
                exit_code: 0,
            }))
            .unwrap();
        let ended = read();
        assert_eq!(
            (ended.status.as_str(), ended.exit_code),
            ("passed", Some(0))
        );
        assert_eq!(ended.phases[0].status, "passed");
        run_json.exit_code_changed(3).unwrap();
        assert_eq!(read().exit_code, Some(3));
    }

    #[test]
    fn only_a_summary_that_says_passed_is_read_as_passed() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        assert!(!RunSummary::says_passed(&run), "no run.json yet");
        let mut run_json =
            RunJson::start(&run, "p", Path::new("p.kdl"), None, ["a".to_owned()]).unwrap();
        assert!(!RunSummary::says_passed(&run), "running");
        for (status, passed) in [(RunStatus::Failed, false), (RunStatus::Passed, true)] {
            run_json
                .event(&stamped(Event::RunFinished {
                    status,
                    duration_ms: 4,
                    exit_code: 0,
                }))
                .unwrap();
            assert_eq!(RunSummary::says_passed(&run), passed, "{status:?}");
            assert_eq!(RunSummary::read(&run).unwrap().status == "passed", passed);
        }
        fs::write(run.path.join(FILE_NAME), "{\"status\": \"pass").unwrap();
        assert!(!RunSummary::says_passed(&run), "cut short");
        fs::write(run.path.join(FILE_NAME), "{\"status\": \"pass\\u0065d\"}").unwrap();
        assert!(RunSummary::says_passed(&run), "escaped, as JSON allows");
    }
}
