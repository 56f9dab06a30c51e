//! Where events go: the [`EventSink`] trait every consumer of a run implements, and the fan-out the
//! engine feeds. The engine knows sinks only through this trait.

use std::io::Write;

use super::Stamped;

/// A consumer of run events: a reporter, the journal, `run.json`.
pub trait EventSink: Send {
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

/// Fans one event out to many sinks; a failing sink is reported once on stderr and then skipped
/// (it must never stop the run).
pub struct Sinks {
    list: Vec<Slot>,
    finished: bool,
}

/// One reporter and whether it is still listening.
struct Slot {
    reporter: Box<dyn EventSink>,
    failed: bool,
}

impl Sinks {
    /// Fans out to `list`, in order.
    pub fn new(list: Vec<Box<dyn EventSink>>) -> Self {
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

    /// How many of the failed reporters are [required](EventSink::required).
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
