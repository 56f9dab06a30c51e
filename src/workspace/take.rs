//! Taking a snapshot: the walk of the workspace, and its findings put in path order.

use std::collections::HashMap;
use std::fs;
use std::io::{self, ErrorKind};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use super::rules::Outer;
use super::snapshot::{Entry, Snapshot, SnapshotOptions};
use super::walk::{self, Exclude, Shared};
use super::{FINE_MARGIN_NS, IgnoreRules, RACY_MARGIN_NS, os, with_path};

impl Snapshot {
    /// Walks `workspace`. `previous`: reuse a file's hash when size and mtime are unchanged (the
    /// shortcut; see [the module documentation](super) for the exact rule).
    ///
    /// # Errors
    /// When `workspace` is not a readable folder, or on an I/O error other than a file vanishing
    /// or being unreadable.
    pub fn take(
        workspace: &Path,
        options: &SnapshotOptions,
        previous: Option<&Snapshot>,
    ) -> io::Result<Snapshot> {
        Snapshot::take_with(workspace, options, previous, walk::walk)
    }

    /// [`Snapshot::take`] with the walker `walk`.
    pub(super) fn take_with(
        workspace: &Path,
        options: &SnapshotOptions,
        previous: Option<&Snapshot>,
        walk: fn(Arc<[Exclude]>, &Shared<'_>),
    ) -> io::Result<Snapshot> {
        let started_ns = os::file_clock_now();
        let meta = fs::metadata(workspace).map_err(|err| with_path(&err, workspace))?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                ErrorKind::NotADirectory,
                format!("{}: the workspace is not a folder", workspace.display()),
            ));
        }
        let excludes: Arc<[Exclude]> = options
            .exclude
            .iter()
            .filter_map(|exclude| walk::relative_exclude(workspace, exclude))
            .map(|path| Exclude {
                depth: path.components().count(),
                path,
            })
            .collect();

        let outer = match (&options.rules, options.only_protected) {
            (Some(rules), _) => Arc::clone(rules.outer()),
            (None, true) => Arc::new(Outer::none()),
            (None, false) => Arc::new(Outer::read(workspace)),
        };
        let shared = Shared {
            root: workspace,
            previous,
            keep_contents_under: options.keep_contents_under,
            outer: Arc::clone(&outer),
            recorded_rules: options.rules.as_ref(),
            protected: options.protected.as_ref(),
            only_protected: options.only_protected,
            parts: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
        };
        walk(excludes, &shared);

        if let Some(err) = shared
            .failure
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(err);
        }
        let parts = shared
            .parts
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut snapshot = Snapshot {
            started_ns,
            ..Snapshot::default()
        };
        let total = parts.iter().map(|part| part.files.len()).sum();
        let mut found = Vec::with_capacity(parts.len());
        let mut folder_rules = HashMap::new();
        for part in parts {
            found.push(part.files);
            snapshot.dirs.extend(part.dirs);
            snapshot.raw_names.extend(part.raw_names);
            snapshot.hashed += part.hashed;
            folder_rules.extend(part.rules);
        }
        snapshot.rules = match &options.rules {
            Some(rules) => Some(rules.clone()),
            // Its rules are not all the workspace's: only those on the way to protected files.
            None if options.only_protected => None,
            None => Some(IgnoreRules::new(outer, folder_rules)),
        };
        let previous_files = previous.map_or(&[][..], |previous| previous.files.as_slice());
        let mut files = in_path_order(found.into_iter().flatten(), total, previous_files);
        // Two names that are not UTF-8 can read the same; keep one rather than confuse the diff.
        files.dedup_by(|a, b| a.0 == b.0);
        let fine = options.fine_timestamps
            && files
                .iter()
                .any(|(_, entry)| entry.ctime_ns % 1_000_000_000 != 0);
        snapshot.settled_ns = started_ns - if fine { FINE_MARGIN_NS } else { RACY_MARGIN_NS };
        snapshot.files = files;
        Ok(snapshot)
    }
}

/// The walk's findings in path order. The previous snapshot is in path order already: a file it
/// had goes to its index there, and a new file right before the first path there that sorts after
/// it, so only new files are compared by path (with one binary search each).
fn in_path_order(
    found: impl Iterator<Item = (Arc<str>, Entry)>,
    total: usize,
    previous: &[(Arc<str>, Entry)],
) -> Vec<(Arc<str>, Entry)> {
    let mut known: Vec<Option<(Arc<str>, Entry)>> = (0..previous.len()).map(|_| None).collect();
    let mut new = Vec::new();
    for (path, entry) in found {
        if let Some(slot) = known.get_mut(entry.order) {
            *slot = Some((path, entry));
        } else {
            let before = previous.partition_point(|(old, _)| *old < path);
            new.push((before, path, entry));
        }
    }
    new.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut new = new.into_iter().peekable();
    let mut files = Vec::with_capacity(total);
    for (index, slot) in known.into_iter().enumerate() {
        while let Some((_, path, entry)) = new.next_if(|(before, ..)| *before <= index) {
            files.push((path, entry));
        }
        files.extend(slot);
    }
    files.extend(new.map(|(_, path, entry)| (path, entry)));
    files
}
