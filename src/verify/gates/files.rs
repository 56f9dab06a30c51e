//! Finding and reading the workspace's files, as every gate does it.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use globset::{GlobSet, GlobSetBuilder};

use super::GateContext;
use crate::glob::compile_glob;

/// Largest part of a file `matches` and the front-matter gates read.
pub(super) const READ_CAP: u64 = 16 * 1024 * 1024;
/// Bytes looked at to tell a binary file (one with a NUL byte) from text.
pub(super) const BINARY_SNIFF: usize = 8192;

/// A file's text (lossy UTF-8, at most `cap` bytes), or None for a binary file. Only a regular
/// file is read (see `crate::regular`): a FIFO would block for ever.
pub(super) fn read_text(full: &Path, cap: u64) -> io::Result<Option<String>> {
    let bytes = crate::regular::read_capped(full, cap)?;
    if bytes.iter().take(BINARY_SNIFF).any(|b| *b == 0) {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Every file on disk in the workspace, ignored or not (`.git` and the state folder aside): where
/// near misses of a missing output are looked for.
pub(super) fn all_files(ctx: &GateContext<'_>) -> Vec<String> {
    glob_files(ctx.workspace, ctx.exclude, &["**".to_owned()]).unwrap_or_default()
}

/// The files on disk that match `patterns`, sorted. Unlike snapshots, this listing ignores
/// `.gitignore`: an expected output is expected wherever it is (build folders are often ignored).
/// Only the folders the globs can match under are walked; `.git` and `exclude` (the state folder)
/// never are.
pub(crate) fn glob_files(
    workspace: &Path,
    exclude: &[PathBuf],
    patterns: &[String],
) -> Result<Vec<String>, String> {
    let set = glob_set(patterns)?;
    let mut roots: Vec<String> = patterns
        .iter()
        .map(|p| crate::glob::literal_folders(&clean(p)).to_owned())
        .collect();
    roots.sort();
    // A root inside another root is walked with it.
    roots.dedup_by(|inner, outer| {
        outer.is_empty() || *inner == *outer || inner.starts_with(&format!("{outer}/"))
    });
    let excluded: Vec<PathBuf> = exclude.iter().map(|e| workspace.join(e)).collect();
    let mut found = BTreeSet::new();
    for root in roots {
        let start = workspace.join(&root);
        if !start.is_dir() {
            continue;
        }
        let excluded = excluded.clone();
        let walker = ignore::WalkBuilder::new(&start)
            .standard_filters(false)
            .follow_links(false)
            .filter_entry(move |entry| {
                entry.file_name() != ".git" && !excluded.iter().any(|e| entry.path() == e)
            })
            .build();
        for entry in walker.flatten() {
            // A file, or a link to one (a dangling link or a link to a folder is not a file).
            if !entry
                .file_type()
                .is_some_and(|t| t.is_file() || (t.is_symlink() && entry.path().is_file()))
            {
                continue;
            }
            let Ok(relative) = entry.path().strip_prefix(workspace) else {
                continue;
            };
            let relative = relative.to_string_lossy().replace('\\', "/");
            if set.is_match(&relative) {
                found.insert(relative);
            }
        }
    }
    Ok(found.into_iter().collect())
}

/// Compiles globs the way the language does; a detail when one is invalid.
pub(super) fn glob_set(patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = compile_glob(&clean(pattern))
            .map_err(|error| format!("invalid glob `{pattern}`: {error}"))?;
        builder.add(glob);
    }
    builder
        .build()
        .map_err(|error| format!("invalid globs: {error}"))
}

/// Where the workspace file `rel` really leads when that is outside the workspace: a symlink
/// (the file itself, or a folder on the way) whose target is not in it. `None` when it stays
/// inside, or does not exist. Outputs and the files gates read must stay inside: a link to
/// `/etc/passwd` is not the agent's work, and reading through it shows the agent what it points
/// to.
pub(crate) fn leads_outside(workspace: &Path, rel: &str) -> Option<PathBuf> {
    // Only a symlink on the way can lead out: without one (the common case, one `lstat` per
    // folder of the path), nothing is resolved.
    let mut at = workspace.to_path_buf();
    let mut linked = false;
    for part in Path::new(rel).components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                linked = true;
                break;
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    if !linked {
        return None;
    }
    let real = std::fs::canonicalize(workspace.join(rel)).ok()?;
    let root = std::fs::canonicalize(workspace).ok()?;
    (!real.starts_with(&root)).then_some(real)
}

/// "`out.txt` leads outside the workspace, to `/etc/passwd`: {why}", when it does.
pub(super) fn outside_detail(workspace: &Path, rel: &str, why: &str) -> Option<String> {
    leads_outside(workspace, rel).map(|target| {
        format!(
            "`{rel}` leads outside the workspace, to `{}`: {why}",
            target.display()
        )
    })
}

/// Why a gate does not read a file that leads outside the workspace.
pub(super) const GATES_READ_INSIDE: &str = "a gate reads only files in the workspace";

/// A relative path without `.` components or doubled separators, as snapshots write paths.
pub(crate) fn clean(path: &str) -> String {
    path.split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>()
        .join("/")
}
