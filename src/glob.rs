//! Globs, compiled one way for every reader: `outputs`, `scope`, `protect`, `bookkeeping`, gates.

use globset::{GlobSet, GlobSetBuilder};

/// Compiles a glob the way gates match it: `*` stays within one folder.
pub(crate) fn compile_glob(pattern: &str) -> Result<globset::Glob, globset::Error> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
}

/// The globs that compile, as one set; one that does not is left out (lint reports it).
pub(crate) fn set<'a>(patterns: impl IntoIterator<Item = &'a String>) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for glob in patterns.into_iter().filter_map(|g| compile_glob(g).ok()) {
        builder.add(glob);
    }
    builder.build().unwrap_or_default()
}

/// What makes a glob, or one `/`-separated part of it, a pattern rather than a name: wildcards,
/// classes, alternatives, and `\` escaping one of them.
const SPECIAL: [char; 5] = ['*', '?', '[', '{', '\\'];

/// Whether `part` (a whole glob, or one of its `/`-separated parts) matches only itself.
pub(crate) fn is_literal(part: &str) -> bool {
    !part.contains(SPECIAL)
}

/// The folders of a glob before its first part that is not literal, its last part (a file's
/// name) left out: `src/lib/**/*.rs` → `src/lib`, `docs/a.md` → `docs`, `*.md` → the empty
/// string.
pub(crate) fn literal_folders(pattern: &str) -> &str {
    let mut end = 0;
    for (at, _) in pattern.match_indices('/') {
        if !is_literal(&pattern[end..at]) {
            break;
        }
        end = at;
    }
    &pattern[..end]
}
