//! Reporters: consumers of the event stream. The engine emits [`Stamped`] events and never prints;
//! everything a user sees of a run (progress bars, log lines, NDJSON, JUnit XML, the final table) is
//! written here, from those events alone.
//!
//! Events are expected to be redacted already (the engine applies `secret` redaction before it
//! emits), so reporters write what they receive.

mod junit;
mod ndjson;
mod plain;
mod progress;
mod summary;
mod text;

use std::io::Write;

use crate::event::Stamped;

pub use crate::text::human_duration;
pub use junit::Junit;
pub use ndjson::Ndjson;
pub use plain::Plain;
pub use progress::Progress;
pub use summary::Summary;
pub(crate) use text::one_line;

/// A consumer of run events.
pub trait Reporter: Send {
    /// Called for every event, in order.
    fn event(&mut self, event: &Stamped) -> std::io::Result<()>;

    /// Called once after `RunFinished` (or when the run ends abnormally); flush and write files here.
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// What to call this reporter when it fails, e.g. `JUnit report target/junit.xml`.
    fn name(&self) -> String {
        "reporter".to_owned()
    }

    /// Whether the run must not end with exit code 0 when this reporter fails: a report file the
    /// user asked for, which CI reads after the run, as opposed to what the terminal shows.
    fn required(&self) -> bool {
        false
    }
}

/// Fans one event out to many reporters; a failing reporter is reported once on stderr and then
/// skipped (it must never stop the run).
pub struct Reporters {
    list: Vec<Slot>,
    finished: bool,
}

/// One reporter and whether it is still listening.
struct Slot {
    reporter: Box<dyn Reporter>,
    failed: bool,
}

impl Reporters {
    /// Fans out to `list`, in order.
    pub fn new(list: Vec<Box<dyn Reporter>>) -> Self {
        let list = list
            .into_iter()
            .map(|reporter| Slot {
                reporter,
                failed: false,
            })
            .collect();
        Self {
            list,
            finished: false,
        }
    }

    /// Passes `event` to every reporter that has not failed.
    pub fn event(&mut self, event: &Stamped) {
        for slot in &mut self.list {
            if !slot.failed
                && let Err(error) = slot.reporter.event(event)
            {
                slot.fail(&error, "it is off for the rest of this run");
            }
        }
    }

    /// Finishes every reporter that has not failed; later calls do nothing, so an abnormal end may
    /// call it again safely.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        for slot in &mut self.list {
            if !slot.failed
                && let Err(error) = slot.reporter.finish()
            {
                slot.fail(&error, "it was not written completely");
            }
        }
    }

    /// How many reporters have failed and been switched off.
    pub fn failed(&self) -> usize {
        self.list.iter().filter(|slot| slot.failed).count()
    }

    /// How many of the failed reporters are [required](Reporter::required).
    pub fn failed_required(&self) -> usize {
        self.list
            .iter()
            .filter(|slot| slot.failed && slot.reporter.required())
            .count()
    }
}

impl Slot {
    fn fail(&mut self, error: &std::io::Error, consequence: &str) {
        self.failed = true;
        // A closed or broken stderr must not turn a reporting problem into a panic, so the message
        // is written without `eprintln!`.
        let _ = writeln!(
            std::io::stderr().lock(),
            "helixflow: {} failed: {error}; {consequence}",
            self.reporter.name()
        );
    }
}
