//! File metadata looked up once per path (following symlinks, as the up-to-date check reads
//! files), for the checks of one plan: a phase's inputs are often other phases' outputs, which
//! would otherwise be looked up once for each phase that reads them. Threads share it: the plan
//! checks its phases on every core ([`in_parallel_on_cores`]).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::Metadata;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Metadata by path, each looked up once.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// By the path's bytes: hashing a `Path` walks its components, which costs more here than
    /// the lookups themselves.
    known: Mutex<HashMap<OsString, Option<Metadata>>>,
}

impl Stats {
    /// The metadata of `path`, following symlinks; `None` when there is nothing there.
    pub(crate) fn metadata(&self, path: &Path) -> Option<Metadata> {
        if let Some(known) = self.lock().get(path.as_os_str()) {
            return known.clone();
        }
        let found = std::fs::metadata(path).ok();
        self.lock()
            .insert(path.as_os_str().to_owned(), found.clone());
        found
    }

    /// Whether `path` is a regular file (or a symlink to one).
    pub(crate) fn is_file(&self, path: &Path) -> bool {
        self.metadata(path).is_some_and(|meta| meta.is_file())
    }

    /// Every path looked up so far, with what was found there.
    pub(crate) fn looked_up(&self) -> Vec<(OsString, Option<Metadata>)> {
        self.lock()
            .iter()
            .map(|(path, found)| (path.clone(), found.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<OsString, Option<Metadata>>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `each` of every item, in order, worked out on a thread per core (at most 8).
pub(crate) fn in_parallel_on_cores<T: Sync, R: Send>(
    items: &[T],
    each: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    in_parallel(items, cores.min(8), each)
}

/// `each` of every item, in order, worked out on `threads` threads.
fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    each: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let chunk = items.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let each = &each;
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(each).collect::<Vec<R>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e))
            })
            .collect()
    })
}
