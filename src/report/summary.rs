//! The table at the end of a run.

use std::io::Write;

use crate::event::{Event, PhaseStatus, Stamped};

use super::text::one_line;
use crate::event::record::{PhaseRecord, RunRecord, Standing, failing_column};
use crate::event::sink::EventSink;
use crate::text::human_duration;

/// The column headings.
const HEADINGS: [&str; 5] = ["phase", "status", "attempts", "duration", "failing gates"];

/// Writes, when the run ends, a table with one row per phase in `RunStarted` order (phase, status,
/// attempts, duration, failing gates; a skipped or cancelled phase shows its reason in the last
/// column) and a totals line such as `3 passed, 1 failed, 1 skipped in 42.1s`.
pub struct Summary<W: Write + Send> {
    out: W,
    run: RunRecord,
    written: bool,
}

impl<W: Write + Send> Summary<W> {
    /// Writes to `out` once, on `RunFinished` or, if the run ends without one, on finish.
    pub fn new(out: W) -> Self {
        Self {
            out,
            run: RunRecord::default(),
            written: false,
        }
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write_table(&mut self) -> std::io::Result<()> {
        self.written = true;
        let rows: Vec<[String; 5]> = self.run.phases.iter().map(|p| row(p, &self.run)).collect();
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
        writeln!(self.out, "{}", totals(&self.run))?;
        self.out.flush()
    }
}

impl<W: Write + Send> EventSink for Summary<W> {
    fn event(&mut self, event: &Stamped) -> std::io::Result<()> {
        self.run.apply(event);
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

/// One phase's cells.
fn row(phase: &PhaseRecord, run: &RunRecord) -> [String; 5] {
    let attempts = match (phase.attempts(), phase.max_attempts) {
        (0, _) => "0".to_owned(),
        (made, Some(max)) => format!("{made}/{max}"),
        (made, None) => made.to_string(),
    };
    let duration = phase
        .duration_ms(run)
        .map_or_else(|| "-".to_owned(), human_duration);
    [
        one_line(&phase.name),
        phase.standing().label().to_owned(),
        attempts,
        duration,
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
    match phase.standing() {
        Standing::Ended(PhaseStatus::Passed) | Standing::NotStarted => String::new(),
        Standing::Ended(PhaseStatus::Skipped | PhaseStatus::Cancelled) => reason(),
        Standing::Ended(PhaseStatus::Failed) | Standing::Unfinished => {
            let Some(attempt) = &phase.attempt else {
                return reason();
            };
            failing_column(&attempt.failures(), attempt.error(), phase.reason())
        }
    }
}

/// `3 passed, 1 failed, 1 skipped in 42.1s`, with the rarer states added only when they occur.
fn totals(run: &RunRecord) -> String {
    let tally = |standing: Standing| {
        run.phases
            .iter()
            .filter(|p| p.standing() == standing)
            .count()
    };
    let mut parts = vec![
        format!("{} passed", tally(Standing::Ended(PhaseStatus::Passed))),
        format!("{} failed", tally(Standing::Ended(PhaseStatus::Failed))),
        format!("{} skipped", tally(Standing::Ended(PhaseStatus::Skipped))),
    ];
    for rare in [
        Standing::Ended(PhaseStatus::Cancelled),
        Standing::Unfinished,
        Standing::NotStarted,
    ] {
        let n = tally(rare);
        if n > 0 {
            parts.push(format!("{n} {}", rare.label()));
        }
    }
    format!(
        "{} in {}",
        parts.join(", "),
        human_duration(run.duration_ms())
    )
}

/// Writes cells padded to `widths`, two spaces apart, without trailing spaces.
fn write_row(
    out: &mut impl Write,
    cells: &[String; 5],
    widths: &[usize; 5],
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
