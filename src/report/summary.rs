//! The table at the end of a run.

use std::io::Write;
use std::time::{Duration, SystemTime};

use crate::event::{Event, PhaseStatus, Stamped};

use crate::event::record::{PhaseRecord, RunRecord, Standing, failing_column};
use crate::event::sink::EventSink;
use crate::event::usage::short_tokens;
use crate::text::human_duration;
use crate::text::one_line;

/// The column headings.
const HEADINGS: [&str; COLUMNS] = [
    "phase",
    "status",
    "attempts",
    "duration",
    "cost",
    "tokens",
    "failing gates",
];

/// How many columns the table has.
const COLUMNS: usize = 7;

/// Writes, when the run ends, a table with one row per phase in `RunStarted` order (phase, status,
/// attempts, duration, cost, tokens, failing gates; a skipped or cancelled phase shows its reason
/// in the last column) and a totals line such as `3 passed, 1 failed, 1 skipped in 42.1s, cost
/// $0.42`. A cost helixflow cannot know is `?`, and a sum that includes one `$0.42+?`.
pub struct Summary<W: Write + Send> {
    out: W,
    run: RunRecord,
    written: bool,
    /// Whether the run is still going (see [`Summary::still_running`]).
    running: bool,
    /// For a run that is still going: the wall-clock time of its start, read from its events'
    /// time stamps, so that a phase that is running shows how long it has been.
    started_at: Option<SystemTime>,
}

impl<W: Write + Send> Summary<W> {
    /// Writes to `out` once, on `RunFinished` or, if the run ends without one, on finish.
    pub fn new(out: W) -> Self {
        Self {
            out,
            run: RunRecord::default(),
            written: false,
            running: false,
            started_at: None,
        }
    }

    /// For the table of a run that is still going (`helixflow show` replays its journal): a
    /// phase that has not ended is `running` or `pending`, as `run.json` says, rather than
    /// `unfinished` or `not started`.
    #[must_use]
    pub(crate) fn still_running(mut self) -> Self {
        self.running = true;
        self
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write_table(&mut self) -> std::io::Result<()> {
        self.written = true;
        let rows: Vec<[String; COLUMNS]> = self
            .run
            .phases
            .iter()
            .map(|p| row(p, &self.run, self.running, self.started_at))
            .collect();
        if !rows.is_empty() {
            let mut widths = HEADINGS.map(|h| h.chars().count());
            for row in &rows {
                for (width, cell) in widths.iter_mut().zip(row) {
                    *width = (*width).max(cell.chars().count());
                }
            }
            write_row(&mut self.out, &HEADINGS.map(str::to_owned), &widths)?;
            for row in &rows {
                write_row(&mut self.out, row, &widths)?;
            }
        }
        writeln!(self.out, "{}", totals(&self.run, self.running))?;
        self.out.flush()
    }
}

impl<W: Write + Send> EventSink for Summary<W> {
    fn event(&mut self, event: &Stamped) -> std::io::Result<()> {
        self.run.apply(event);
        if self.running && self.started_at.is_none() {
            self.started_at = humantime::parse_rfc3339(&event.time)
                .ok()
                .and_then(|at| at.checked_sub(Duration::from_millis(event.elapsed_ms)));
        }
        if matches!(event.event, Event::RunFinished { .. }) && !self.written {
            self.write_table()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if !self.written {
            self.write_table()?;
        }
        self.out.flush()
    }

    fn name(&self) -> String {
        "the summary".to_owned()
    }
}

/// One phase's cells. A phase that has not ended shows how long it has been running, in a run
/// that still goes on and whose start is known, else `?`: the run's latest event says nothing
/// of when a killed run stopped.
fn row(
    phase: &PhaseRecord,
    run: &RunRecord,
    running: bool,
    started_at: Option<SystemTime>,
) -> [String; COLUMNS] {
    let attempts = match (phase.attempts(), phase.max_attempts) {
        (0, _) if phase.standing() == Standing::Ended(PhaseStatus::UpToDate) => "-".to_owned(),
        (0, _) => "0".to_owned(),
        (made, Some(max)) => format!("{made}/{max}"),
        (made, None) => made.to_string(),
    };
    let duration = if phase.standing() == Standing::Unfinished {
        let now = started_at.and_then(|at| at.elapsed().ok());
        match (running, now, phase.started_ms) {
            (true, Some(now), Some(started)) => {
                human_duration((now.as_millis() as u64).saturating_sub(started))
            }
            _ => "?".to_owned(),
        }
    } else {
        phase
            .duration_ms(run)
            .map_or_else(|| "-".to_owned(), human_duration)
    };
    // An up-to-date phase started nothing: it cost nothing, and says so.
    let cost = if phase.standing() == Standing::Ended(PhaseStatus::UpToDate) {
        crate::event::usage::Dollars::default().to_string()
    } else {
        phase.spend.short()
    };
    let status = if phase.nothing_to_change() {
        "passed, nothing to change"
    } else {
        label(phase.standing(), running)
    };
    [
        one_line(&phase.name),
        status.to_owned(),
        attempts,
        duration,
        cost,
        short_tokens(phase.spend.tokens),
        one_line(&failing(phase)),
    ]
}

/// The last column: what failed in the latest attempt, or why the phase did not run to the end.
fn failing(phase: &PhaseRecord) -> String {
    let reason = || {
        phase
            .reason()
            .map(|reason| format!("({reason})"))
            .unwrap_or_default()
    };
    if phase.has_items() {
        // Its items, counted: `37 passed, 2 failed, 161 up to date`.
        return phase.reason().unwrap_or_default().to_owned();
    }
    match phase.standing() {
        Standing::Ended(PhaseStatus::Passed) | Standing::NotStarted => String::new(),
        Standing::Ended(PhaseStatus::UpToDate) => reason(),
        Standing::Ended(PhaseStatus::Skipped | PhaseStatus::Cancelled) => reason(),
        Standing::Ended(PhaseStatus::Failed) | Standing::Unfinished => {
            let Some(attempt) = &phase.attempt else {
                return reason();
            };
            attempt.class_prefix()
                + &failing_column(&attempt.failures(), attempt.error(), phase.reason())
        }
    }
}

/// Where a phase stands, in a word: a phase that has not ended in a run that goes on is running
/// (an attempt started) or pending.
fn label(standing: Standing, running: bool) -> &'static str {
    match standing {
        Standing::Unfinished if running => "running",
        Standing::NotStarted if running => "pending",
        standing => standing.label(),
    }
}

/// `3 passed, 1 failed, 1 skipped in 42.1s`, with the rarer states added only when they occur
/// (`… so far` for a run that is still going).
fn totals(run: &RunRecord, running: bool) -> String {
    // A `for-each` phase is counted through its items.
    let tally = |standing: Standing| {
        run.phases
            .iter()
            .filter(|p| p.standing() == standing && !p.has_items())
            .count()
    };
    let mut parts = vec![
        format!("{} passed", tally(Standing::Ended(PhaseStatus::Passed))),
        format!("{} failed", tally(Standing::Ended(PhaseStatus::Failed))),
        format!("{} skipped", tally(Standing::Ended(PhaseStatus::Skipped))),
    ];
    for rare in [
        Standing::Ended(PhaseStatus::UpToDate),
        Standing::Ended(PhaseStatus::Cancelled),
        Standing::Unfinished,
        Standing::NotStarted,
    ] {
        let n = tally(rare);
        if n > 0 {
            parts.push(format!("{n} {}", label(rare, running)));
        }
    }
    if running {
        // Its length is not known yet: the latest event may be long ago.
        return format!("{} so far", parts.join(", "));
    }
    let spend = run.spend();
    let cost = if spend.is_empty() {
        String::new()
    } else {
        format!(", cost {}", spend.words())
    };
    match run.finished_ms {
        Some(ms) => format!("{} in {}{cost}", parts.join(", "), human_duration(ms)),
        // Killed: when it stopped is not recorded.
        None => format!(
            "{}{cost}; the run did not finish, its length is unknown",
            parts.join(", ")
        ),
    }
}

/// Writes cells padded to `widths`, two spaces apart, without trailing spaces.
fn write_row(
    out: &mut impl Write,
    cells: &[String; COLUMNS],
    widths: &[usize; COLUMNS],
) -> std::io::Result<()> {
    let mut line = String::new();
    for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            line.push_str("  ");
        }
        line.push_str(cell);
        let pad = width.saturating_sub(cell.chars().count());
        line.extend(std::iter::repeat_n(' ', pad));
    }
    writeln!(out, "{}", line.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(running: bool) -> String {
        let summary = Summary::new(Vec::new());
        let mut summary = if running {
            summary.still_running()
        } else {
            summary
        };
        let events = [
            Event::RunStarted {
                run_id: "r".to_owned(),
                pipeline: "p".to_owned(),
                phases: vec!["a".to_owned(), "b".to_owned()],
                max_parallel: 1,
                resumes: None,
            },
            Event::AttemptStarted {
                phase: "a".to_owned(),
                attempt: 1,
                max_attempts: 2,
                tier: None,
            },
        ];
        // The run started two hours ago.
        let start = SystemTime::now() - Duration::from_hours(2);
        for (elapsed_ms, event) in (0..).zip(events) {
            let stamped = Stamped {
                time: humantime::format_rfc3339_millis(start + Duration::from_millis(elapsed_ms))
                    .to_string(),
                elapsed_ms,
                event,
            };
            summary.event(&stamped).unwrap();
        }
        summary.finish().unwrap();
        String::from_utf8(summary.into_inner()).unwrap()
    }

    #[test]
    fn a_run_without_its_end_is_unfinished_or_still_running() {
        assert_eq!(
            table(false),
            "phase  status       attempts  duration  cost  tokens  failing gates\n\
             a      unfinished   1/2       ?         -     -\n\
             b      not started  0         -         -     -\n\
             0 passed, 0 failed, 0 skipped, 1 unfinished, 1 not started; the run did not finish, its length is unknown\n"
        );
        assert_eq!(
            table(true),
            "phase  status   attempts  duration  cost  tokens  failing gates\n\
             a      running  1/2       2h 00m    -     -\n\
             b      pending  0         -         -     -\n\
             0 passed, 0 failed, 0 skipped, 1 running, 1 pending so far\n"
        );
    }
}
