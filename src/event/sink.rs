//! Where events go: the [`EventSink`] trait every consumer of a run implements, and the fan-out the
//! engine feeds. The engine knows sinks only through this trait.

use std::io::Write;
use std::time::Instant;

use super::{Event, Stamped};

/// A consumer of run events: a reporter, the journal, `run.json`.
pub trait EventSink: Send {
    /// Called for every event, in order.
    fn event(&mut self, event: &Stamped) -> std::io::Result<()>;

    /// Called with events that arrived together, in order, instead of one [`EventSink::event`]
    /// each: the journal writes them with a single `write`. By default one `event` call each, up
    /// to the first that fails.
    fn batch(&mut self, events: &[Stamped]) -> std::io::Result<()> {
        events.iter().try_for_each(|event| self.event(event))
    }

    /// When this sink wants [`EventSink::tick`] called should no event come before: a sink that
    /// writes at most once a second, but never later than a second after a change.
    fn next_tick(&self) -> Option<Instant> {
        None
    }

    /// Called once [`EventSink::next_tick`] has come without an event.
    fn tick(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// Called once after `RunFinished` (or when the run ends abnormally); flush and write files here.
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// Called after every sink has finished, when the run ends with another exit code than its
    /// `RunFinished` carried: a [required](EventSink::required) report could not be written, so
    /// helixflow itself failed. `run.json` records it.
    fn exit_code_changed(&mut self, _exit_code: i32) -> std::io::Result<()> {
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

    /// Whether this sink is the run's own record (the journal, `run.json`): a failure is not
    /// announced on the spot and does not switch it off (the next write may succeed), and the
    /// first one fails the run as a whole ([`Sinks::take_error`]).
    fn records_the_run(&self) -> bool {
        false
    }
}

/// Fans one event out to many sinks; a failing sink is reported once on stderr and then skipped
/// (it must never stop the run), except a sink that [records the run](EventSink::records_the_run),
/// whose first error is kept for the end.
pub struct Sinks {
    list: Vec<Slot>,
    finished: bool,
    /// The first error of a sink that records the run.
    error: Option<std::io::Error>,
    /// The exit code the run ends with, once `RunFinished` came.
    exit_code: Option<i32>,
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
            error: None,
            exit_code: None,
        }
    }

    /// Puts `first` before the sinks there are: the journal and `run.json` hold every event
    /// before any reporter shows it, should helixflow be killed in between.
    #[must_use]
    pub(crate) fn with_first(mut self, first: Vec<Box<dyn EventSink>>) -> Self {
        let rest = std::mem::take(&mut self.list);
        self.list = Self::new(first).list;
        self.list.extend(rest);
        self
    }

    /// Passes `event` to every reporter that has not failed.
    pub fn event(&mut self, event: &Stamped) {
        self.batch(std::slice::from_ref(event));
    }

    /// Passes events that arrived together to every reporter that has not failed, one reporter
    /// after the other.
    pub(crate) fn batch(&mut self, events: &[Stamped]) {
        for stamped in events {
            if let Event::RunFinished { exit_code, .. } = stamped.event {
                self.exit_code = Some(exit_code);
            }
        }
        for slot in &mut self.list {
            if !slot.failed
                && let Err(error) = slot.reporter.batch(events)
            {
                slot.fail(error, &mut self.error, "it is off for the rest of this run");
            }
        }
    }

    /// The earliest time a sink wants [`Sinks::tick`] called, if any does.
    pub(crate) fn next_tick(&self) -> Option<Instant> {
        self.list
            .iter()
            .filter(|slot| !slot.failed)
            .filter_map(|slot| slot.reporter.next_tick())
            .min()
    }

    /// Ticks every sink whose [`EventSink::next_tick`] has come.
    pub(crate) fn tick(&mut self) {
        let now = Instant::now();
        for slot in &mut self.list {
            if !slot.failed
                && slot.reporter.next_tick().is_some_and(|at| at <= now)
                && let Err(error) = slot.reporter.tick()
            {
                slot.fail(error, &mut self.error, "it is off for the rest of this run");
            }
        }
    }

    /// Finishes every reporter that has not failed; later calls do nothing, so an abnormal end may
    /// call it again safely. When a [required](EventSink::required) reporter failed in a run that
    /// passed, the run's exit code becomes [`crate::exit::INTERNAL`], and the sinks are told.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        for slot in &mut self.list {
            if !slot.failed
                && let Err(error) = slot.reporter.finish()
            {
                slot.fail(error, &mut self.error, "it was not written completely");
            }
        }
        // The work is done, but a report CI reads is missing: helixflow itself failed.
        if self.failed_required() > 0 && self.exit_code == Some(crate::exit::SUCCESS) {
            self.exit_code = Some(crate::exit::INTERNAL);
            for slot in &mut self.list {
                if !slot.failed
                    && let Err(error) = slot.reporter.exit_code_changed(crate::exit::INTERNAL)
                {
                    slot.fail(error, &mut self.error, "it was not written completely");
                }
            }
        }
    }

    /// How many reporters have failed and been switched off.
    pub fn failed(&self) -> usize {
        self.list.iter().filter(|slot| slot.failed).count()
    }

    /// How many of the failed reporters are [required](EventSink::required).
    pub(crate) fn failed_required(&self) -> usize {
        self.list
            .iter()
            .filter(|slot| slot.failed && slot.reporter.required())
            .count()
    }

    /// The exit code the run ends with, once its `RunFinished` came: that event's, unless a
    /// [required](EventSink::required) reporter failed (see [`Sinks::finish`]).
    pub(crate) fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }

    /// The first error of a sink that [records the run](EventSink::records_the_run), taken.
    pub(crate) fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }
}

impl Slot {
    /// Records a failure: kept in `first` for a sink that records the run, else announced once on
    /// stderr, after which the sink is skipped.
    fn fail(
        &mut self,
        error: std::io::Error,
        first: &mut Option<std::io::Error>,
        consequence: &str,
    ) {
        if self.reporter.records_the_run() {
            first.get_or_insert(error);
            return;
        }
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::event::RunStatus;

    /// What a sink was called with: batches (their lengths), ticks, finishes, new exit codes.
    #[derive(Default)]
    struct Calls {
        batches: Vec<usize>,
        finished: usize,
        exit_codes: Vec<i32>,
    }

    /// A sink that records its calls and fails its first `fail_events` batches, or its finish.
    struct Probe {
        calls: Arc<Mutex<Calls>>,
        fail_events: usize,
        fail_finish: bool,
        records: bool,
        required: bool,
    }

    impl Probe {
        fn new(calls: &Arc<Mutex<Calls>>) -> Self {
            Self {
                calls: Arc::clone(calls),
                fail_events: 0,
                fail_finish: false,
                records: false,
                required: false,
            }
        }
    }

    impl EventSink for Probe {
        fn event(&mut self, _: &Stamped) -> std::io::Result<()> {
            unreachable!("batches come whole")
        }

        fn batch(&mut self, events: &[Stamped]) -> std::io::Result<()> {
            self.calls.lock().unwrap().batches.push(events.len());
            if self.fail_events > 0 {
                self.fail_events -= 1;
                return Err(std::io::Error::other("disk full"));
            }
            Ok(())
        }

        fn finish(&mut self) -> std::io::Result<()> {
            self.calls.lock().unwrap().finished += 1;
            if self.fail_finish {
                return Err(std::io::Error::other("gone"));
            }
            Ok(())
        }

        fn exit_code_changed(&mut self, exit_code: i32) -> std::io::Result<()> {
            self.calls.lock().unwrap().exit_codes.push(exit_code);
            Ok(())
        }

        fn records_the_run(&self) -> bool {
            self.records
        }

        fn required(&self) -> bool {
            self.required
        }
    }

    fn stamped(event: Event) -> Stamped {
        Stamped {
            time: "2026-01-01T00:00:00.000Z".to_owned(),
            elapsed_ms: 0,
            event,
        }
    }

    fn finished(exit_code: i32) -> Stamped {
        stamped(Event::RunFinished {
            status: RunStatus::Passed,
            duration_ms: 1,
            exit_code,
        })
    }

    #[test]
    fn a_sink_that_records_the_run_keeps_its_first_error_and_goes_on() {
        let record = Arc::new(Mutex::new(Calls::default()));
        let reporter = Arc::new(Mutex::new(Calls::default()));
        let mut sinks =
            Sinks::new(vec![Box::new(Probe::new(&reporter))]).with_first(vec![Box::new(Probe {
                fail_events: 2,
                records: true,
                ..Probe::new(&record)
            })]);
        let warning = stamped(Event::Warning {
            message: "w".to_owned(),
        });
        sinks.batch(&[warning.clone(), warning.clone()]);
        sinks.event(&warning);
        sinks.batch(&[warning, finished(0)]);
        sinks.finish();
        assert_eq!(record.lock().unwrap().batches, [2, 1, 2]);
        assert_eq!(record.lock().unwrap().finished, 1);
        assert_eq!(reporter.lock().unwrap().batches, [2, 1, 2]);
        assert_eq!(sinks.failed(), 0);
        assert_eq!(sinks.exit_code(), Some(0));
        let error = sinks.take_error().expect("the first error is kept");
        assert_eq!(error.to_string(), "disk full");
        assert!(sinks.take_error().is_none());
    }

    #[test]
    fn a_failed_required_report_turns_a_passed_run_into_an_internal_error() {
        for (exit_code, expected) in [(0, crate::exit::INTERNAL), (1, 1)] {
            let record = Arc::new(Mutex::new(Calls::default()));
            let junit = Arc::new(Mutex::new(Calls::default()));
            let mut sinks = Sinks::new(vec![
                Box::new(Probe {
                    records: true,
                    ..Probe::new(&record)
                }),
                Box::new(Probe {
                    fail_finish: true,
                    required: true,
                    ..Probe::new(&junit)
                }),
            ]);
            sinks.event(&finished(exit_code));
            sinks.finish();
            sinks.finish();
            assert_eq!(sinks.failed_required(), 1);
            assert_eq!(sinks.exit_code(), Some(expected));
            let told: &[i32] = if expected == exit_code {
                &[]
            } else {
                &[crate::exit::INTERNAL]
            };
            assert_eq!(record.lock().unwrap().exit_codes, told);
            assert_eq!(record.lock().unwrap().finished, 1);
            // The failed report is not told.
            assert!(junit.lock().unwrap().exit_codes.is_empty());
            assert!(sinks.take_error().is_none());
        }
    }
}
