//! The run's own report, kept current while it goes on: a sink of the run's events that hands
//! them to a thread of its own, which writes `report.html` in the run folder at most every
//! [`INTERVAL`] (atomically), and once more when the run ends. Neither an attempt nor the other
//! sinks wait for a page to be written.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::model::PipelineFile;
use super::{FILE_NAME, Writer};
use crate::event::sink::EventSink;
use crate::event::{Event, Stamped};
use crate::model::Pipeline;
use crate::redact::Redactor;
use crate::store::run::RunDir;

/// The shortest time between two writes of a live report.
pub(crate) const INTERVAL: Duration = Duration::from_secs(2);

/// How soon after the run starts its first page is written.
const FIRST: Duration = Duration::from_millis(500);

/// How often, between pages, the thread reads ahead the folders of the attempts that ended.
const READ_AHEAD: Duration = Duration::from_millis(100);

/// What the sink hands the writing thread.
#[derive(Default)]
struct Inbox {
    /// Events not yet taken by the thread.
    events: Vec<Stamped>,
    /// The run ended: write the last page and stop.
    finished: bool,
}

type Shared = Arc<(Mutex<Inbox>, Condvar)>;

/// `report.html` in the run folder, written while the run goes on.
pub(crate) struct LiveReport {
    /// `<state-dir>/runs`: the run's folder is named when it starts.
    runs_dir: PathBuf,
    redactor: Redactor,
    /// What the page reads of the run's `pipeline.json`, taken from the pipeline (until the
    /// thread starts).
    pipeline: Option<PipelineFile>,
    shared: Shared,
    thread: Option<JoinHandle<std::io::Result<()>>>,
    /// The report's path, once the run started.
    path: Option<PathBuf>,
}

impl LiveReport {
    /// The report of the run of `pipeline` that is about to start in `runs_dir`; `redactor` is
    /// the run's.
    pub(crate) fn new(runs_dir: PathBuf, pipeline: &Pipeline, redactor: Redactor) -> Self {
        Self {
            runs_dir,
            pipeline: Some(PipelineFile::of(pipeline, &redactor)),
            redactor,
            shared: Arc::new((Mutex::new(Inbox::default()), Condvar::new())),
            thread: None,
            path: None,
        }
    }

    fn start(&mut self, run_id: &str) {
        let run = RunDir {
            path: self.runs_dir.join(run_id),
            run_id: run_id.to_owned(),
        };
        let path = run.path.join(FILE_NAME);
        self.path = Some(path.clone());
        let writer = Writer::for_run(run, self.redactor.clone(), self.pipeline.take());
        let shared = Arc::clone(&self.shared);
        self.thread = Some(std::thread::spawn(move || {
            keep_writing(writer, &path, &shared)
        }));
    }
}

/// The thread: takes the events that came, writes a page when some did and [`INTERVAL`] has
/// passed since the last, until the run ends; then writes the last page. Between pages, every
/// [`READ_AHEAD`] while events come, it reads the folders of the attempts that ended (and the
/// bundles of the phases that passed), so that the last page, which the run waits for, has
/// only the latest ones left to read.
fn keep_writing(mut writer: Writer, path: &Path, shared: &Shared) -> std::io::Result<()> {
    // While the run goes on: at its end the page is all that is left to do.
    writer.read_ahead();
    let (inbox, signal) = &**shared;
    let mut events: Vec<Stamped> = Vec::new();
    // The first page half a second in: a run that ends sooner writes only its last one.
    let mut written: Option<Instant> = Instant::now().checked_sub(INTERVAL.saturating_sub(FIRST));
    // How many of `events` the last page showed, and how many were read ahead.
    let (mut shown, mut read_ahead) = (0, 0);
    loop {
        let mut guard = inbox.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let due = written.map_or(Duration::ZERO, |at| INTERVAL.saturating_sub(at.elapsed()));
            let unshown = !guard.events.is_empty() || events.len() > shown;
            if guard.finished || (unshown && due.is_zero()) {
                break;
            }
            if !unshown {
                guard = signal.wait(guard).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let (woken, waited) = signal
                .wait_timeout(guard, due.min(READ_AHEAD))
                .unwrap_or_else(PoisonError::into_inner);
            guard = woken;
            if waited.timed_out() && !guard.finished {
                // Not yet a page's time: what ended meanwhile is read ahead of it.
                events.append(&mut guard.events);
                drop(guard);
                writer.read_ended(&events[read_ahead..]);
                read_ahead = events.len();
                guard = inbox.lock().unwrap_or_else(PoisonError::into_inner);
            }
        }
        events.append(&mut guard.events);
        let finished = guard.finished;
        drop(guard);
        if finished {
            return writer.write(&events, Some(false), path);
        }
        written = Some(Instant::now());
        shown = events.len();
        // A page that cannot be written now may be at the next change; the last one counts.
        let _ = writer.write(&events, Some(true), path);
    }
}

impl EventSink for LiveReport {
    fn event(&mut self, event: &Stamped) -> std::io::Result<()> {
        self.batch(std::slice::from_ref(event))
    }

    fn batch(&mut self, events: &[Stamped]) -> std::io::Result<()> {
        if self.thread.is_none()
            && let Some(run_id) = events.iter().find_map(|e| match &e.event {
                Event::RunStarted { run_id, .. } => Some(run_id.clone()),
                _ => None,
            })
        {
            self.start(&run_id);
        }
        let (inbox, signal) = &*self.shared;
        let mut guard = inbox.lock().unwrap_or_else(PoisonError::into_inner);
        // With events waiting already, the thread waits only for its next page's time, and
        // wakes by itself then: woken for every batch, it would only go back to sleep.
        let waits_for_events = guard.events.is_empty();
        guard.events.extend_from_slice(events);
        // `RunFinished` is the last event: the last page is begun while the reporters after
        // this one (the summary's table) still write.
        if events
            .iter()
            .any(|e| matches!(e.event, Event::RunFinished { .. }))
        {
            guard.finished = true;
        }
        let wake = guard.finished || (waits_for_events && !guard.events.is_empty());
        drop(guard);
        if wake {
            signal.notify_one();
        }
        Ok(())
    }

    /// Writes the last page (the run's end) and waits for it.
    fn finish(&mut self) -> std::io::Result<()> {
        let (inbox, signal) = &*self.shared;
        inbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .finished = true;
        signal.notify_one();
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| std::io::Error::other("the report's thread panicked"))?,
            None => Ok(()),
        }
    }

    fn name(&self) -> String {
        match &self.path {
            Some(path) => format!("the HTML report {}", path.display()),
            None => format!("the HTML report ({FILE_NAME})"),
        }
    }
}
