//! The event journal, `events.jsonl`: every event of a run, one JSON object per line, as a sink of
//! the run's events; and its reader, for `helixflow show`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};

use super::run::RunDir;
use crate::event::Stamped;
use crate::event::sink::EventSink;

/// The journal's file name in a run's folder.
pub(crate) const FILE_NAME: &str = "events.jsonl";

/// The event journal, `events.jsonl`: one JSON object per line, whole lines written with a single
/// `write` call, so that killing helixflow at any moment leaves whole lines only.
pub(crate) struct Journal {
    file: File,
    /// The lines of one write, kept to reuse its allocation.
    buffer: String,
}

impl Journal {
    /// Opens (appending) the journal of a run. Events come to it redacted already (see
    /// [`crate::event::Event::redacted`]).
    pub(crate) fn open(run: &RunDir) -> io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(run.path.join(FILE_NAME))?;
        Ok(Self {
            file,
            buffer: String::new(),
        })
    }
}

impl EventSink for Journal {
    fn event(&mut self, event: &Stamped) -> io::Result<()> {
        self.batch(std::slice::from_ref(event))
    }

    /// Appends events that arrived together with a single `write`, so that an interruption leaves
    /// whole lines only.
    fn batch(&mut self, events: &[Stamped]) -> io::Result<()> {
        self.buffer.clear();
        let mut result = Ok(());
        for event in events {
            match serde_json::to_string(event) {
                Ok(json) => {
                    self.buffer.push_str(&json);
                    self.buffer.push('\n');
                }
                Err(e) => result = Err(e.into()),
            }
        }
        let written = self.file.write_all(self.buffer.as_bytes());
        result.and(written)
    }

    fn name(&self) -> String {
        format!("the journal ({FILE_NAME})")
    }

    fn records_the_run(&self) -> bool {
        true
    }
}

/// The events of a run's journal, in order. A line that is not an event is left out: the last
/// line of a journal still being written may be incomplete.
pub(crate) fn read(run: &RunDir) -> io::Result<Vec<Stamped>> {
    let text = std::fs::read_to_string(run.path.join(FILE_NAME))?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AttemptOutcome, Event};

    #[test]
    fn what_the_journal_writes_reads_back_and_an_incomplete_line_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        let stamped = |elapsed_ms, event| Stamped {
            time: "2026-01-01T00:00:00.000Z".to_owned(),
            elapsed_ms,
            event,
        };
        let events = vec![
            stamped(
                0,
                Event::AttemptStarted {
                    phase: "a".to_owned(),
                    attempt: 1,
                    max_attempts: 2,
                    tier: None,
                },
            ),
            stamped(
                5,
                Event::AttemptFinished {
                    phase: "a".to_owned(),
                    attempt: 1,
                    outcome: AttemptOutcome::Failed,
                    duration_ms: 5,
                    failed_gates: vec!["tests".to_owned()],
                    feedback: None,
                    error: Some("no evidence".to_owned()),
                    usage: None,
                    class: None,
                    nothing_to_change: false,
                },
            ),
        ];
        let mut journal = Journal::open(&run).unwrap();
        journal.batch(&events).unwrap();
        journal.event(&events[0]).unwrap();
        // As a reader may find the file while a write is under way.
        std::fs::OpenOptions::new()
            .append(true)
            .open(run.path.join(FILE_NAME))
            .unwrap()
            .write_all(b"{\"time\":\"2026")
            .unwrap();
        let text = std::fs::read_to_string(run.path.join(FILE_NAME)).unwrap();
        assert_eq!(text.lines().count(), 4);
        let read: Vec<Event> = read(&run).unwrap().into_iter().map(|s| s.event).collect();
        assert_eq!(
            read,
            [
                events[0].event.clone(),
                events[1].event.clone(),
                events[0].event.clone()
            ]
        );
    }
}
