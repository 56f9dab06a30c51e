//! Fuzzes the whole language layer: arbitrary text → `compile`, against an empty in-memory file
//! system. Any panic is a bug, and so is a span that does not point into its file: every renderer
//! slices the source text with them.

#![no_main]

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use helixflow::language::{self, Loader, Options};
use libfuzzer_sys::fuzz_target;

/// No file exists: imports and prompt files are reported as missing, and the fuzzer never touches
/// the disk.
struct NoFiles;

impl Loader for NoFiles {
    fn read(&self, _path: &Path) -> io::Result<String> {
        Err(io::Error::from(io::ErrorKind::NotFound))
    }

    fn is_file(&self, _path: &Path) -> bool {
        false
    }

    fn search_path(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Short, so an input that makes the KDL parser slow is reported (HF003) instead of stalling
    // the fuzzer; libFuzzer's own -timeout catches anything slow outside the parse.
    let options = Options {
        parse_budget: Duration::from_millis(500),
        // As `helixflow lint` reads files.
        accept_library: true,
    };
    let compilation = language::compile(Path::new("fuzz.kdl"), text, &NoFiles, options);
    for diagnostic in &compilation.diagnostics {
        let spans = std::iter::once(diagnostic.span)
            .chain(diagnostic.notes.iter().map(|n| n.span))
            .chain(
                diagnostic
                    .fix
                    .iter()
                    .flat_map(|f| f.edits.iter().map(|(s, _)| *s)),
            );
        for span in spans {
            let source = &compilation.sources.get(span.file).text;
            assert!(
                span.end() <= source.len()
                    && source.is_char_boundary(span.offset)
                    && source.is_char_boundary(span.end()),
                "{} has span {span:?} outside its {}-byte file or inside a character",
                diagnostic.code(),
                source.len()
            );
        }
    }
    assert!(
        compilation.pipeline.is_some() || compilation.has_errors(),
        "no pipeline and no error saying why"
    );
});
