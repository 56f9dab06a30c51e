//! The integration tests are two binaries, `tests/cli/` and `tests/engine/`: each test binary links
//! the whole library again (130–175 MB in a debug build), so a new `tests/*.rs` file would slow
//! every `cargo test`; and a module file that its `main.rs` does not declare would never be
//! compiled, its tests silently never run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn tests_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The names of the entries of `dir` that satisfy `keep`, sorted.
fn names(dir: &Path, keep: impl Fn(&Path) -> bool) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| keep(path))
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_integration_tests_are_two_binaries() {
    let tests = tests_folder();
    let files = names(&tests, |path| {
        path.extension().is_some_and(|extension| extension == "rs")
    });
    assert!(
        files.is_empty(),
        "tests/{files:?}: each would be a test binary of its own; make it a module of \
         tests/cli/ (it runs the binary) or tests/engine/ (it calls the library)"
    );
    let binaries = names(&tests, |path| path.join("main.rs").is_file());
    assert_eq!(
        binaries,
        BTreeSet::from(["cli".to_owned(), "engine".to_owned()])
    );
}

#[test]
fn every_module_file_of_a_test_binary_is_declared() {
    for binary in ["cli", "engine"] {
        let dir = tests_folder().join(binary);
        let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
        // A module with a `#[path]` (the shared support in tests/common/) lives elsewhere.
        let lines: Vec<&str> = main.lines().collect();
        let declared: BTreeSet<String> = lines
            .iter()
            .enumerate()
            .filter(|&(i, _)| i == 0 || !lines[i - 1].starts_with("#[path"))
            .filter_map(|(_, line)| line.strip_prefix("mod ")?.strip_suffix(';'))
            .map(|name| format!("{name}.rs"))
            .collect();
        let files = names(&dir, |path| {
            path.extension().is_some_and(|extension| extension == "rs")
                && !path.ends_with("main.rs")
        });
        assert_eq!(
            files, declared,
            "the module files of tests/{binary}/ and the modules its main.rs declares"
        );
    }
}
