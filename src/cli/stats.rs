//! `helixflow runs --stats`: did the escalation tiers pay? Over the runs in the state folder, per
//! phase and per tier (the attempt of the work and its agent): how many attempts ran, how many
//! passed, their cost and duration, the cost per pass, and the cost per passed phase had the
//! phase stopped after that attempt. An unknown cost stays unknown: sums read `$0.42+?`, and
//! what is derived from one is `?`, never a number that takes it as zero.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;

use crate::event::usage::{Dollars, Spend};
use crate::event::{AttemptOutcome, Event, Tier};
use crate::store::journal;
use crate::store::run::RunDir;
use crate::text::{human_duration, one_line};

/// What the attempts of one tier of one phase came to.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Attempts that ended (a try after a transient failure counts: it was paid for).
    ran: u32,
    /// Attempts that passed: each is a phase that passed.
    passed: u32,
    /// Their cost, unknown ones counted apart.
    spend: Spend,
    /// Their wall time, summed.
    duration_ms: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.ran += other.ran;
        self.passed += other.passed;
        self.spend.merge(&other.spend);
        self.duration_ms += other.duration_ms;
    }

    /// The cost divided by `by`, when every cost is known and `by` is not zero.
    fn cost_per(&self, by: u32) -> Option<Dollars> {
        if by == 0 || self.spend.unknown > 0 {
            return None;
        }
        // To the millionth of a dollar, as `JUnit`'s `cost-usd`: no float noise in `--json`.
        let each = self.spend.known_usd.amount() / f64::from(by);
        Dollars::new((each * 1e6).round() / 1e6)
    }

    fn mean_ms(&self) -> Option<u64> {
        (self.ran > 0).then(|| self.duration_ms / u64::from(self.ran))
    }
}

/// A tier: the attempt of the work, and its agent (`None` for a `run` step).
type TierKey = (u32, Option<String>);

/// The tiers of every phase, phases in the order they first appear.
#[derive(Debug, Default)]
struct Stats {
    runs: usize,
    phases: Vec<(String, BTreeMap<TierKey, Tally>)>,
}

impl Stats {
    fn phase_mut(&mut self, name: &str) -> &mut BTreeMap<TierKey, Tally> {
        let at = self.phases.iter().position(|(n, _)| n == name);
        let at = at.unwrap_or_else(|| {
            self.phases.push((name.to_owned(), BTreeMap::new()));
            self.phases.len() - 1
        });
        &mut self.phases[at].1
    }

    /// Folds in one run's journal: each attempt that ended, in the tier its start named. An
    /// attempt whose start named none (a journal older than tiers) counts as its own attempt of
    /// the work, with an unknown agent.
    fn add_run(&mut self, events: &[crate::event::Stamped]) {
        self.runs += 1;
        let mut tiers: HashMap<(&str, u32), &Tier> = HashMap::new();
        for stamped in events {
            match &stamped.event {
                Event::AttemptStarted {
                    phase,
                    attempt,
                    tier: Some(tier),
                    ..
                } => {
                    tiers.insert((phase.as_str(), *attempt), tier);
                }
                Event::AttemptFinished {
                    phase,
                    attempt,
                    outcome,
                    duration_ms,
                    usage,
                    ..
                } => {
                    let key = match tiers.get(&(phase.as_str(), *attempt)) {
                        Some(tier) => (tier.work_attempt, tier.agent.clone()),
                        None => (*attempt, Some("?".to_owned())),
                    };
                    let tally = self.phase_mut(phase).entry(key).or_default();
                    tally.ran += 1;
                    tally.passed += u32::from(*outcome == AttemptOutcome::Passed);
                    tally.duration_ms += duration_ms;
                    if let Some(usage) = usage {
                        tally.spend.add(usage);
                    }
                }
                _ => {}
            }
        }
    }
}

/// One row of the table, or one object of `--json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
struct Row {
    phase: String,
    /// The attempt of the work; `None` for the phase's total.
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    attempts: u32,
    passed: u32,
    cost: Spend,
    mean_cost_usd: Option<Dollars>,
    duration_ms: u64,
    mean_duration_ms: Option<u64>,
    /// This tier's cost over the phases it passed.
    cost_per_pass_usd: Option<Dollars>,
    /// The cost of every attempt up to this one over the phases they passed: the cost per
    /// passed phase without the later tiers (with all of them, on the total row).
    cost_per_passed_phase_usd: Option<Dollars>,
    /// The tier's attempts, and every attempt up to it, for the table.
    #[serde(skip)]
    tally: Tally,
    #[serde(skip)]
    so_far: Tally,
}

/// `--json`: the runs read, the ones left out, and the rows.
#[derive(Serialize)]
struct Report<'r> {
    runs: usize,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    unreadable: &'r [String],
    tiers: &'r [Row],
}

/// The rows of one phase: one per tier, in order, then its total.
fn rows(phase: &str, tiers: &BTreeMap<TierKey, Tally>) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut total = Tally::default();
    for ((attempt, agent), tally) in tiers {
        let mut so_far = Tally::default();
        for ((earlier, _), t) in tiers {
            if earlier <= attempt {
                so_far.add(t);
            }
        }
        total.add(tally);
        rows.push(Row {
            phase: phase.to_owned(),
            attempt: Some(*attempt),
            agent: agent.clone(),
            attempts: tally.ran,
            passed: tally.passed,
            cost: tally.spend,
            mean_cost_usd: tally.cost_per(tally.spend.attempts),
            duration_ms: tally.duration_ms,
            mean_duration_ms: tally.mean_ms(),
            cost_per_pass_usd: tally.cost_per(tally.passed),
            cost_per_passed_phase_usd: so_far.cost_per(so_far.passed),
            tally: *tally,
            so_far,
        });
    }
    rows.push(Row {
        phase: phase.to_owned(),
        attempt: None,
        agent: None,
        attempts: total.ran,
        passed: total.passed,
        cost: total.spend,
        mean_cost_usd: total.cost_per(total.spend.attempts),
        duration_ms: total.duration_ms,
        mean_duration_ms: total.mean_ms(),
        cost_per_pass_usd: total.cost_per(total.passed),
        cost_per_passed_phase_usd: total.cost_per(total.passed),
        tally: total,
        so_far: total,
    });
    rows
}

/// The statistics of the runs in `runs`, as a table or as JSON.
pub(super) fn stats(runs: &[RunDir], as_json: bool) -> String {
    let mut stats = Stats::default();
    let mut unreadable = Vec::new();
    for run in runs {
        match journal::read(run) {
            Ok(events) => stats.add_run(&events),
            Err(_) => unreadable.push(run.run_id.clone()),
        }
    }
    let rows: Vec<Row> = stats
        .phases
        .iter()
        .flat_map(|(phase, tiers)| rows(phase, tiers))
        .collect();
    if as_json {
        let report = Report {
            runs: stats.runs,
            unreadable: &unreadable,
            tiers: &rows,
        };
        let mut text = serde_json::to_string_pretty(&report).unwrap_or_default();
        text.push('\n');
        return text;
    }
    table(stats.runs, &rows, &unreadable)
}

/// The cost of `tally` divided by `by`: `-` when `by` is zero (nothing passed, no cost
/// recorded), `?` when a cost in it is unknown.
fn per(tally: &Tally, by: u32) -> String {
    match tally.cost_per(by) {
        Some(dollars) => dollars.to_string(),
        None if by == 0 => "-".to_owned(),
        None => "?".to_owned(),
    }
}

const HEADINGS: [&str; 11] = [
    "phase",
    "attempt",
    "agent",
    "ran",
    "passed",
    "cost",
    "mean",
    "time",
    "mean time",
    "per pass",
    "per passed phase",
];

fn table(runs: usize, rows: &[Row], unreadable: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} run{}, attempts per phase and tier (the attempt of the work and its agent)",
        runs,
        if runs == 1 { "" } else { "s" }
    );
    let cells: Vec<[String; 11]> = rows
        .iter()
        .map(|row| {
            let (tally, so_far) = (&row.tally, &row.so_far);
            [
                one_line(&row.phase),
                row.attempt
                    .map_or_else(|| "all".to_owned(), |a| a.to_string()),
                match (&row.attempt, &row.agent) {
                    (None, _) => String::new(),
                    (Some(_), Some(agent)) => one_line(agent),
                    (Some(_), None) => "(run)".to_owned(),
                },
                row.attempts.to_string(),
                row.passed.to_string(),
                row.cost.short(),
                per(tally, tally.spend.attempts),
                human_duration(row.duration_ms),
                row.mean_duration_ms
                    .map_or_else(|| "-".to_owned(), human_duration),
                per(tally, tally.passed),
                per(so_far, so_far.passed),
            ]
        })
        .collect();
    let mut widths = HEADINGS.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let write = |out: &mut String, row: &[String]| {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    };
    if !cells.is_empty() {
        write(&mut out, &HEADINGS.map(str::to_owned));
        for row in &cells {
            write(&mut out, row);
        }
    }
    if !unreadable.is_empty() {
        let _ = writeln!(
            out,
            "left out, their journals cannot be read: {}",
            unreadable.join(", ")
        );
    }
    out
}
