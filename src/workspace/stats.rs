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
    chunks_in_parallel_on_cores(items, |part| part.iter().map(&each).collect())
}

/// `each` of the items in parts, one part per core (at most 8), the calling thread working one
/// of them: the results of every part, in order. For work that carries something from one item to
/// the next of its part (`each` must give one result per item).
pub(crate) fn chunks_in_parallel_on_cores<T: Sync, R: Send>(
    items: &[T],
    each: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    chunks_in_parallel(items, cores.min(8), each)
}

/// `each` of the items in `threads` parts, the calling thread working the last one.
fn chunks_in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    each: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let chunk = items.len().div_ceil(threads.max(1)).max(1);
    let mut parts = items.chunks(chunk);
    let Some(last) = parts.next_back() else {
        return Vec::new();
    };
    std::thread::scope(|scope| {
        let each = &each;
        let workers: Vec<_> = parts.map(|part| scope.spawn(move || each(part))).collect();
        let last = each(last);
        let mut all = Vec::with_capacity(items.len());
        for worker in workers {
            all.extend(
                worker
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
            );
        }
        all.extend(last);
        all
    })
}
