//! `helixflow show`: a run's journal replayed through the reporters, so that a past run reads as
//! the run itself reported it (nextest's recorder and replay), not through a second rendering.

use std::io;

use super::summary::Summary;
use crate::event::Stamped;
use crate::event::sink::EventSink;
use crate::store::journal;
use crate::store::run::RunDir;

/// The table at the end of a run, from its journal: as the run wrote it, or, for a run that is
/// still going (`running`), as it stands (see [`Summary::still_running`]). A run that ended
/// without writing it (killed) gets it as it was left.
pub(crate) fn summary_table(run: &RunDir, running: bool) -> io::Result<String> {
    let events = journal::read(run)?;
    let summary = Summary::new(Vec::new());
    let mut summary = if running {
        summary.still_running()
    } else {
        summary
    };
    replay(&events, &mut summary)?;
    Ok(String::from_utf8_lossy(&summary.into_inner()).into_owned())
}

/// Feeds recorded events to a reporter as the run fed them, then finishes it.
pub(crate) fn replay(events: &[Stamped], reporter: &mut dyn EventSink) -> io::Result<()> {
    reporter.batch(events)?;
    reporter.finish()
}
