//! The one watcher of SIGINT and SIGTERM, for a run and for a check: the first signal stops the
//! running children gently (TERM to each group, the grace period, then KILL), the second kills
//! them at once.

use tokio::signal::unix::{SignalKind, signal};

use crate::process::Cancel;

/// Watches SIGINT and SIGTERM until aborted. The first calls `first` (to say why the work stops)
/// and then cancels softly; every later one cancels hard. Returns at once when the signals cannot
/// be watched.
pub(crate) async fn watch(cancel: Cancel, first: impl FnOnce()) {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    let mut first = Some(first);
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        if let Some(first) = first.take() {
            first();
            cancel.soft.cancel();
        } else {
            cancel.hard.cancel();
        }
    }
}
