//! `--events FILE|-`: the event stream itself, for machines.

use std::io::Write;

use crate::event::Stamped;

use crate::event::sink::EventSink;

/// Writes one JSON object per line (the [`Stamped`] event as serialized), flushed after each line
/// so a reader following the file sees every event as it happens.
pub struct Ndjson<W: Write + Send> {
    out: W,
    /// Whether `out` is a file the user named (see [`EventSink::required`]).
    file: bool,
}

impl<W: Write + Send> Ndjson<W> {
    /// Writes to `out`.
    pub fn new(out: W) -> Self {
        Self { out, file: false }
    }

    /// Writes to a file the user named: should it fail, the run does not end with exit code 0.
    pub(crate) fn file(out: W) -> Self {
        Self { out, file: true }
    }
}

impl<W: Write + Send> EventSink for Ndjson<W> {
    fn event(&mut self, event: &Stamped) -> std::io::Result<()> {
        // Serialized whole before writing, so a failure never leaves half a line behind.
        let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.out.write_all(&line)?;
        self.out.flush()
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    fn name(&self) -> String {
        "the event stream (--events)".to_owned()
    }

    fn required(&self) -> bool {
        self.file
    }
}
