//! Live progress on a terminal: one spinner line per running phase under an overall bar, and one
//! permanent line above them for each phase that finished.

use std::fmt::Write as _;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::event::{Event, PhaseStatus, Stamped};

use crate::event::record::{PhaseRecord, RunRecord, Standing};
use crate::event::sink::EventSink;
use crate::text::human_duration;
use crate::text::{one_line, sanitize};

/// Phase names are padded to the longest one, up to this many characters, so columns line up.
const NAME_WIDTH_LIMIT: usize = 24;

/// How often spinners turn and elapsed times update.
const TICK: Duration = Duration::from_millis(100);

/// Draws progress to stderr with `indicatif`: an overall bar (phases done / total, elapsed, how
/// many are running) above one line per running phase (spinner, phase, elapsed, attempt n/m,
/// current step). Each finished phase prints a line above the bars (`✓ parser  passed  attempt 2/3
/// 12.3s`, `✗ lexer  failed  attempt 3/3  1m 02s  gates syntax, tests`). Finishing (or dropping)
/// it clears every bar, so nothing is left behind on the terminal.
pub struct Progress {
    multi: MultiProgress,
    overall: ProgressBar,
    /// Running phases in the order they started, with their lines.
    bars: Vec<(String, ProgressBar)>,
    name_width: usize,
    run: RunRecord,
    finished: bool,
}

/// Takes the progress bars of a run off standard error while someone is asked a question there:
/// they would otherwise redraw over the question and the answer being typed. The bars keep their
/// state meanwhile, and are drawn again afterwards.
#[derive(Clone)]
pub(crate) struct ProgressPause {
    multi: MultiProgress,
}

impl ProgressPause {
    /// Runs `ask` with the bars cleared and not drawn.
    pub(crate) fn while_asking<R>(&self, ask: impl FnOnce() -> R) -> R {
        let _ = self.multi.clear();
        self.multi.set_draw_target(ProgressDrawTarget::hidden());
        let answer = ask();
        self.multi.set_draw_target(ProgressDrawTarget::stderr());
        answer
    }
}

impl Progress {
    /// Progress for a run of `total_phases`, drawn to stderr (and not at all when stderr is not a
    /// terminal).
    pub(crate) fn new(total_phases: usize) -> Self {
        Self::with_draw_target(total_phases, ProgressDrawTarget::stderr())
    }

    /// Progress drawn to `target`: a hidden target keeps the state without drawing.
    pub fn with_draw_target(total_phases: usize, target: ProgressDrawTarget) -> Self {
        let multi = MultiProgress::with_draw_target(target);
        // The overall bar comes first: when more phases run than the terminal has lines, indicatif
        // cuts the bottom, and the overall bar is the one line that must stay.
        let overall = multi.add(
            ProgressBar::new(total_phases as u64)
                .with_style(overall_style())
                .with_message("starting"),
        );
        if !multi.is_hidden() {
            overall.enable_steady_tick(TICK);
        }
        Self {
            multi,
            overall,
            bars: Vec::new(),
            name_width: 0,
            run: RunRecord::default(),
            finished: false,
        }
    }

    /// A handle that takes the bars off the terminal while a person is asked something, and puts
    /// them back after (see [`ProgressPause`]).
    pub(crate) fn pause_handle(&self) -> ProgressPause {
        ProgressPause {
            multi: self.multi.clone(),
        }
    }

    /// The phases that are running (have a line), in the order they started.
    pub fn running(&self) -> Vec<String> {
        self.bars.iter().map(|(name, _)| name.clone()).collect()
    }

    /// What a running phase's line says after its name and elapsed time: `attempt 2/3  gate tests`.
    pub fn status(&self, phase: &str) -> Option<String> {
        self.bar(phase).map(ProgressBar::message)
    }

    /// Phases finished so far.
    pub fn phases_done(&self) -> u64 {
        self.overall.position()
    }

    /// Phases in the run.
    pub fn phases_total(&self) -> u64 {
        self.overall.length().unwrap_or(0)
    }

    /// Whether the bars have been cleared for good.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn bar(&self, phase: &str) -> Option<&ProgressBar> {
        self.bars
            .iter()
            .find(|(name, _)| name == phase)
            .map(|(_, bar)| bar)
    }

    /// The phase's line, created (below the others) when it has none.
    fn bar_or_insert(&mut self, phase: &str) -> &ProgressBar {
        if let Some(i) = self.bars.iter().position(|(name, _)| name == phase) {
            return &self.bars[i].1;
        }
        let bar = self.multi.add(
            ProgressBar::new_spinner()
                .with_style(phase_style())
                .with_prefix(self.padded(phase)),
        );
        if !self.multi.is_hidden() {
            bar.enable_steady_tick(TICK);
        }
        self.bars.push((phase.to_owned(), bar));
        self.update_overall();
        &self.bars[self.bars.len() - 1].1
    }

    fn padded(&self, phase: &str) -> String {
        let name = one_line(phase);
        let pad = self.name_width.saturating_sub(name.chars().count());
        format!("{name}{}", " ".repeat(pad))
    }

    /// `2/3` for attempt 2 of a phase allowed 3; `3/4 (claude-opus)` when its agent is not the
    /// phase's first.
    fn attempt_label(&self, phase: &str, attempt: u32) -> String {
        let record = self.run.phase(phase);
        let agent = record.map(|p| p.other_agent(attempt)).unwrap_or_default();
        match record.and_then(|p| p.max_attempts) {
            Some(max) => format!("{attempt}/{max}{agent}"),
            None => format!("{attempt}{agent}"),
        }
    }

    /// What the phase's earlier attempts cost, for its bar: `  $0.42 spent`, or nothing.
    fn spent(&self, phase: &str) -> String {
        self.run
            .phase(phase)
            .map(|p| p.spend)
            .filter(|spend| !spend.is_empty())
            .map(|spend| format!("  {} spent", spend.short()))
            .unwrap_or_default()
    }

    fn update_overall(&self) {
        let running = self.bars.len();
        let failed = self
            .run
            .phases
            .iter()
            .filter(|p| {
                p.end
                    .as_ref()
                    .is_some_and(|e| e.status == PhaseStatus::Failed)
            })
            .count();
        let mut message = format!("{running} running");
        if failed > 0 {
            let _ = write!(message, ", {failed} failed");
        }
        let spend = self.run.spend();
        if !spend.is_empty() {
            let _ = write!(message, ", {}", spend.short());
        }
        self.overall.set_message(message);
    }

    fn println(&self, line: &str) -> std::io::Result<()> {
        self.multi.println(line)
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one arm per event: the reporter's per-event match reads best whole"
    )]
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        match event {
            Event::RunStarted { phases, .. } => {
                self.overall.set_length(phases.len() as u64);
                self.name_width = phases
                    .iter()
                    .map(|p| one_line(p).chars().count())
                    .max()
                    .unwrap_or(0)
                    .min(NAME_WIDTH_LIMIT);
                self.update_overall();
            }
            Event::AttemptStarted { phase, attempt, .. } => {
                let message = format!(
                    "attempt {}{}",
                    self.attempt_label(phase, *attempt),
                    self.spent(phase)
                );
                self.bar_or_insert(phase).set_message(message);
            }
            Event::Step {
                phase,
                attempt,
                step,
            } => {
                let message = format!(
                    "attempt {}{}  {}",
                    self.attempt_label(phase, *attempt),
                    self.spent(phase),
                    one_line(&step.to_string())
                );
                self.bar_or_insert(phase).set_message(message);
            }
            Event::RetryScheduled {
                phase,
                next_attempt,
                backoff_ms,
            } => {
                let next = self.attempt_label(phase, *next_attempt);
                let when = if *backoff_ms == 0 {
                    String::new()
                } else {
                    format!(" in {}", human_duration(*backoff_ms))
                };
                if let Some(line) = self.retry_line(phase, &next, &when) {
                    self.println(&line)?;
                }
                self.bar_or_insert(phase)
                    .set_message(format!("retrying as attempt {next}{when}"));
            }
            Event::PhaseFinished { phase, .. } => {
                if let Some(i) = self.bars.iter().position(|(name, _)| name == phase) {
                    let (_, bar) = self.bars.remove(i);
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
                if let Some(record) = self.run.phase(phase) {
                    let line = finished_line(record, &self.run, &self.padded(phase));
                    self.println(&line)?;
                }
                self.overall.inc(1);
                self.update_overall();
            }
            Event::PhasesMade {
                phase,
                made,
                dropped,
            } => {
                self.overall.inc_length(made.len() as u64);
                let line = super::plain::made_line(made, dropped);
                self.println(&format!("+ {}  {line}", self.padded(phase)))?;
                self.update_overall();
            }
            Event::Escalated { phase, code } => {
                let how = match code {
                    Some(code) => format!("exited with code {code}"),
                    None => "ended without an exit code".to_owned(),
                };
                self.println(&format!(
                    "! {}  escalated: the escalate command {how}",
                    self.padded(phase)
                ))?;
            }
            Event::Warning { message } => {
                for line in sanitize(message).lines() {
                    self.println(&format!("warning: {line}"))?;
                }
            }
            Event::RunFinished { .. } => self.clear(),
            // The run's cost so far is in the overall line.
            Event::AttemptFinished { .. } => self.update_overall(),
            Event::ChildExited { .. } | Event::GateFinished { .. } | Event::PhaseQueued { .. } => {}
        }
        Ok(())
    }

    /// `↻ parser  attempt 1/3 failed  8.0s  gates outputs, tests; retrying as attempt 2/3 in 2.0s`.
    fn retry_line(&self, phase: &str, next: &str, when: &str) -> Option<String> {
        let attempt = self.run.phase(phase)?.attempt.as_ref()?;
        let mut line = format!(
            "↻ {}  attempt {} failed",
            self.padded(phase),
            self.attempt_label(phase, attempt.number)
        );
        if let Some(end) = &attempt.end {
            let _ = write!(line, "  {}", human_duration(end.duration_ms));
        }
        if let Some(why) = attempt.failure_summary() {
            let _ = write!(line, "  {}", one_line(&why));
        }
        let _ = write!(line, "; retrying as attempt {next}{when}");
        Some(line)
    }

    /// Removes every line; later events draw nothing.
    fn clear(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        for (_, bar) in self.bars.drain(..) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        self.overall.finish_and_clear();
        // A terminal that went away cannot be cleared; there is nothing left to protect.
        let _ = self.multi.clear();
    }
}

impl EventSink for Progress {
    fn event(&mut self, event: &Stamped) -> std::io::Result<()> {
        if self.finished {
            return Ok(());
        }
        self.run.apply(event);
        self.on_event(&event.event)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.clear();
        Ok(())
    }

    fn name(&self) -> String {
        "the progress display".to_owned()
    }
}

impl Drop for Progress {
    /// Bars that are dropped unfinished stay on screen; a run that ends without `finish` (a panic)
    /// must not leave them there.
    fn drop(&mut self) {
        self.clear();
    }
}

/// `✓ parser  passed     attempt 2/3  12.3s`, and the like for the other endings.
fn finished_line(phase: &PhaseRecord, run: &RunRecord, padded_name: &str) -> String {
    let standing = phase.standing();
    let (mark, label) = match phase.end.as_ref().map(|e| e.status) {
        Some(PhaseStatus::Passed) => ("✓", "passed"),
        Some(PhaseStatus::Failed) => ("✗", "failed"),
        Some(PhaseStatus::Cancelled) => ("■", "cancelled"),
        Some(PhaseStatus::UpToDate) => ("✓", "up to date"),
        Some(PhaseStatus::Skipped) | None => ("-", standing.label()),
    };
    let mut line = format!("{mark} {padded_name}  {label:<9}");
    if phase.attempts() > 0 {
        let agent = phase.other_agent(phase.attempts());
        let attempts = match phase.max_attempts {
            Some(max) => format!("{}/{max}{agent}", phase.attempts()),
            None => format!("{}{agent}", phase.attempts()),
        };
        let _ = write!(line, "  attempt {attempts}");
        if let Some(ms) = phase.duration_ms(run) {
            let _ = write!(line, "  {}", human_duration(ms));
        }
        if !phase.spend.is_empty() {
            let _ = write!(line, "  {}", phase.spend.short());
        }
    }
    let why = match standing {
        Standing::Ended(PhaseStatus::Passed) => phase
            .nothing_to_change()
            .then(|| "nothing to change".to_owned()),
        Standing::Ended(PhaseStatus::Failed) => phase
            .attempt
            .as_ref()
            .and_then(|a| a.failure_summary().map(|why| a.class_prefix() + &why))
            .or_else(|| phase.reason().map(str::to_owned)),
        _ => phase.reason().map(str::to_owned),
    };
    if let Some(why) = why {
        let _ = write!(line, "  {}", one_line(&why));
    }
    line.trim_end().to_owned()
}

/// `[██████░░░░] 3/5 phases  12.3s  2 running`.
fn overall_style() -> ProgressStyle {
    ProgressStyle::with_template("[{bar:30.cyan/blue}] {pos}/{len} phases  {elapsed_h}  {wide_msg}")
        .map_or_else(|_| ProgressStyle::default_bar(), with_elapsed)
        .progress_chars("█▓░")
}

/// `⠋ parser    12.3s  attempt 2/3  gate tests`.
fn phase_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner:.cyan} {prefix}  {elapsed_h:>6}  {wide_msg}")
        .map_or_else(|_| ProgressStyle::default_spinner(), with_elapsed)
}

/// Adds `{elapsed_h}`: elapsed time in the same words as every other duration helixflow shows.
fn with_elapsed(style: ProgressStyle) -> ProgressStyle {
    style.with_key(
        "elapsed_h",
        |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let ms = u64::try_from(state.elapsed().as_millis()).unwrap_or(u64::MAX);
            let _ = out.write_str(&human_duration(ms));
        },
    )
}
