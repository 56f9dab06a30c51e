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
