//! The files a phase changed, with a diff where its bundle holds their contents. A bundle holds
//! each created or modified file as the phase left it, and the hash of what a modified file held
//! before: that earlier content is found when another phase of the run left the file so (its
//! bundle holds it). Contents are workspace files, not journal records: they are shown only
//! through the run's redactor, and withheld when no redactor that knows every secret is at hand.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use similar::{ChangeTag, TextDiff};

use crate::redact::Redactor;
use crate::store::bundle::{self, ChangeKind, FileKind, Manifest};

/// The most bytes of one file read from a bundle.
pub(crate) const KEEP: usize = 32 * 1024;
/// The most lines of one file's diff shown.
const MAX_LINES: usize = 300;
/// The lines of context around a change.
const CONTEXT: usize = 3;

/// One file a phase changed, as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FileView {
    pub path: String,
    /// `created`, `modified` or `deleted`.
    pub change: String,
    /// A symlink rather than a regular file.
    pub symlink: bool,
    /// Its diff, when there is one to show.
    pub lines: Vec<DiffLine>,
    /// What the diff leaves out, or why there is none.
    pub note: Option<String>,
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DiffLine {
    /// `+` added, `-` removed, ` ` context, `@` a hunk's header, `=` a line shown as it is.
    pub tag: char,
    pub text: String,
}

/// The file a run's own report writes beside a phase's bundle: the views of its files, made
/// through the run's redactor, for reports written later outside the run (which may not know the
/// secrets' values).
pub(crate) const SAVED: &str = "report-files.json";

/// The most bytes of contents kept in memory for finding what a modified file held before.
const HASHED_LIMIT: usize = 16 << 20;

/// The contents a bundle holds, by path, each cut to [`KEEP`] bytes.
type Kept = BTreeMap<String, Vec<u8>>;

/// The views made so far, by phase folder, and the contents bundles hold, by hash.
#[derive(Debug, Default)]
pub(crate) struct FilesCache {
    views: HashMap<String, Vec<FileView>>,
    /// The phases found without a bundle.
    absent: std::collections::HashSet<String>,
    by_hash: HashMap<String, Vec<u8>>,
    hashed: usize,
    /// Whether views made from bundles are saved beside them ([`SAVED`]): by the run's own
    /// report, whose redactor knows every secret.
    save: bool,
}

/// The files each phase's bundle holds, by phase folder, with their diffs; `folders` name phases
/// that passed (a phase's bundle is written before it ends). Contents are shown
/// only through `redactor`; without one, a view saved by the run's own report is used, or the
/// bundle's files are named without their contents (see the module's documentation).
pub(crate) fn bundled_files(
    run: &Path,
    folders: &[&str],
    redactor: Option<&Redactor>,
    cache: &mut FilesCache,
) -> HashMap<String, Vec<FileView>> {
    let mut pending: Vec<(&str, Manifest, Kept)> = Vec::new();
    for &folder in folders {
        if cache.views.contains_key(folder) || cache.absent.contains(folder) {
            continue;
        }
        let phase_dir = run.join("phases").join(folder);
        if let Some(saved) = std::fs::read_to_string(phase_dir.join(SAVED))
            .ok()
            .and_then(|text| serde_json::from_str::<Vec<FileView>>(&text).ok())
        {
            cache.views.insert(folder.to_owned(), saved);
            continue;
        }
        let path = phase_dir.join(bundle::FILE_NAME);
        // `folders` name phases that ended: one without a readable bundle has none.
        let Ok((manifest, kept)) = bundle::contents(&path, KEEP) else {
            cache.absent.insert(folder.to_owned());
            continue;
        };
        cache.remember(&manifest, &kept);
        pending.push((folder, manifest, kept));
    }
    for (folder, manifest, kept) in pending {
        let views: Vec<FileView> = manifest
            .files
            .iter()
            .map(|file| {
                let after = file.after.as_ref().map(|after| {
                    (
                        kept.get(&file.path).map_or(&[][..], Vec::as_slice),
                        after.size,
                    )
                });
                let before = file
                    .before
                    .as_deref()
                    .and_then(|h| cache.by_hash.get(h))
                    .map(Vec::as_slice);
                let symlink = file
                    .after
                    .as_ref()
                    .is_some_and(|a| a.kind == FileKind::Symlink);
                view(&file.path, file.change, symlink, before, after, redactor)
            })
            .collect();
        if cache.save && redactor.is_some() {
            let _ = serde_json::to_vec(&views).map(|json| {
                crate::store::replace_unsynced(&run.join("phases").join(folder).join(SAVED), &json)
            });
        }
        cache.views.insert(folder.to_owned(), views);
    }
    folders
        .iter()
        .filter_map(|&f| cache.views.get(f).map(|v| (f.to_owned(), v.clone())))
        .collect()
}

impl FilesCache {
    /// A cache that saves the views it makes from bundles beside them.
    pub(crate) fn saving() -> Self {
        Self {
            save: true,
            ..Self::default()
        }
    }

    /// Keeps the contents of a bundle's whole files by hash, within [`HASHED_LIMIT`].
    fn remember(&mut self, manifest: &Manifest, kept: &BTreeMap<String, Vec<u8>>) {
        for file in &manifest.files {
            if let (Some(after), Some(bytes)) = (&file.after, kept.get(&file.path))
                && after.kind == FileKind::File
                && bytes.len() as u64 == after.size
                && self.hashed + bytes.len() <= HASHED_LIMIT
                && !self.by_hash.contains_key(&after.hash)
            {
                self.hashed += bytes.len();
                self.by_hash.insert(after.hash.clone(), bytes.clone());
            }
        }
    }
}

/// One file's view: its diff (or its contents after, when those before are unknown), cut to
/// [`MAX_LINES`].
fn view(
    path: &str,
    change: ChangeKind,
    symlink: bool,
    before: Option<&[u8]>,
    after: Option<(&[u8], u64)>,
    redactor: Option<&Redactor>,
) -> FileView {
    let mut view = FileView {
        path: path.to_owned(),
        change: match change {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
        .to_owned(),
        symlink,
        lines: Vec::new(),
        note: None,
    };
    let Some(redactor) = redactor else {
        view.note = Some(
            "contents not shown: a secret's value is not known here to redact them".to_owned(),
        );
        return view;
    };
    if symlink {
        if let Some((target, _)) = after {
            view.note = Some(format!(
                "a symlink to {}",
                redactor.redact(&String::from_utf8_lossy(target))
            ));
        }
        return view;
    }
    let text = |bytes: &[u8]| -> Option<String> {
        let sniff = &bytes[..bytes.len().min(8192)];
        (!sniff.contains(&0)).then(|| redactor.redact(&String::from_utf8_lossy(bytes)))
    };
    let cut = after.is_some_and(|(bytes, size)| (bytes.len() as u64) < size)
        || before.is_some_and(|b| b.len() >= KEEP);
    match (change, before, after) {
        (ChangeKind::Deleted, None, _) => {
            view.note = Some("deleted; its contents before are not kept in this run".to_owned());
        }
        (_, before, after) => {
            let old = before.map(text);
            let new = after.map(|(bytes, _)| text(bytes));
            match (old, new) {
                (Some(None), _) | (_, Some(None)) => {
                    view.note = Some(format!(
                        "a binary file{}",
                        after
                            .map(|(_, size)| format!(" of {size} bytes"))
                            .unwrap_or_default()
                    ));
                }
                (old, new) => {
                    let known_before = old.is_some() || change == ChangeKind::Created;
                    let old = old.flatten().unwrap_or_default();
                    let new = new.flatten().unwrap_or_default();
                    if known_before {
                        view.lines = diff(&old, &new);
                    } else {
                        view.lines = new
                            .lines()
                            .map(|line| DiffLine {
                                tag: '=',
                                text: line.to_owned(),
                            })
                            .collect();
                        view.note = Some(
                            "its contents before are not kept in this run: the file as the phase left it"
                                .to_owned(),
                        );
                    }
                }
            }
        }
    }
    cut_lines(&mut view, cut);
    view
}

/// A unified diff of two texts, as lines.
fn diff(old: &str, new: &str) -> Vec<DiffLine> {
    let diff = TextDiff::configure()
        .timeout(std::time::Duration::from_millis(200))
        .diff_lines(old, new);
    let mut lines = Vec::new();
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (old_range, new_range) = (first.old_range().start, first.new_range().start);
        let old_len = last.old_range().end - old_range;
        let new_len = last.new_range().end - new_range;
        lines.push(DiffLine {
            tag: '@',
            text: format!(
                "@@ -{},{old_len} +{},{new_len} @@",
                old_range + 1,
                new_range + 1
            ),
        });
        for op in group {
            for change in diff.iter_changes(&op) {
                let tag = match change.tag() {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Insert => '+',
                    ChangeTag::Delete => '-',
                };
                let text = change.value();
                lines.push(DiffLine {
                    tag,
                    text: text.strip_suffix('\n').unwrap_or(text).to_owned(),
                });
            }
        }
    }
    lines
}

/// Keeps the first [`MAX_LINES`] lines, saying what was left out.
fn cut_lines(view: &mut FileView, cut_bytes: bool) {
    let total = view.lines.len();
    let mut notes: Vec<String> = view.note.take().into_iter().collect();
    if total > MAX_LINES {
        view.lines.truncate(MAX_LINES);
        notes.push(format!("{} more lines not shown", total - MAX_LINES));
    } else if cut_bytes {
        notes.push(format!("only its first {} KiB are shown", KEEP / 1024));
    }
    view.note = (!notes.is_empty()).then(|| notes.join("; "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_file_is_all_added_and_a_modified_one_diffed_against_what_it_held() {
        let redactor = Redactor::new([("KEY".to_owned(), "hunter2".to_owned())]);
        let created = view(
            "a.txt",
            ChangeKind::Created,
            false,
            None,
            Some((b"one\nkey=hunter2\n", 16)),
            Some(&redactor),
        );
        let tags: Vec<char> = created.lines.iter().map(|l| l.tag).collect();
        assert_eq!(tags, ['@', '+', '+']);
        assert_eq!(created.lines[2].text, "key=[REDACTED:KEY]");
        let modified = view(
            "a.txt",
            ChangeKind::Modified,
            false,
            Some(b"one\ntwo\n"),
            Some((b"one\nthree\n", 10)),
            Some(&redactor),
        );
        let shown: Vec<String> = modified
            .lines
            .iter()
            .map(|l| match l.tag {
                '@' => l.text.clone(),
                tag => format!("{tag}{}", l.text),
            })
            .collect();
        assert_eq!(shown, ["@@ -1,2 +1,2 @@", " one", "-two", "+three"]);
        let unknown = view(
            "a.txt",
            ChangeKind::Modified,
            false,
            None,
            Some((b"x\n", 2)),
            Some(&redactor),
        );
        assert_eq!(unknown.lines[0].tag, '=');
        assert!(unknown.note.unwrap().contains("not kept"));
        let withheld = view(
            "a.txt",
            ChangeKind::Created,
            false,
            None,
            Some((b"x", 1)),
            None,
        );
        assert!(withheld.lines.is_empty());
        let binary = view(
            "b.bin",
            ChangeKind::Created,
            false,
            None,
            Some((b"\0\x01", 2)),
            Some(&redactor),
        );
        assert_eq!(binary.note.as_deref(), Some("a binary file of 2 bytes"));
    }
}
