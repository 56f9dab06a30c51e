//! The crate's walkers against the `ignore` crate's, which defines the rules: all must find
//! the same files, folders and names on disk. Judging by an earlier snapshot's rules, and
//! recording protected files that are ignored, are the crate's own: there the Linux walker and
//! the portable one must agree with each other.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::WalkBuilder;
use proptest::prelude::*;

use super::portable::{self, Collectors, entered};
use super::{Exclude, Shared};
use crate::workspace::{HELIXFLOW_IGNORE, ProtectedPaths, Snapshot, SnapshotOptions};

/// A snapshot taken with the `ignore` crate's walker.
fn take_with_ignore(workspace: &Path, options: &SnapshotOptions) -> Snapshot {
    Snapshot::take_with(workspace, options, None, walk_with_ignore).expect("snapshot")
}

/// A snapshot taken with the walker other systems use.
fn take_portable(workspace: &Path, options: &SnapshotOptions) -> Snapshot {
    Snapshot::take_with(workspace, options, None, portable::walk).expect("snapshot")
}

/// Walks with the `ignore` crate's parallel walker, configured for the rules in
/// [the module documentation](crate::workspace): the reference both walkers are compared with.
fn walk_with_ignore(excludes: Arc<[Exclude]>, shared: &Shared<'_>) {
    let workspace = shared.root;
    let mut builder = WalkBuilder::new(workspace);
    builder
        .hidden(false)
        .ignore(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .add_custom_ignore_filename(HELIXFLOW_IGNORE);
    let root = workspace.to_path_buf();
    builder.filter_entry(move |entry| entered(entry, &root, &excludes));
    builder.build_parallel().visit(&mut Collectors { shared });
}

/// Everything a walk decides: files (with all that is recorded of them), folders, real names.
type Summary<'s> = (
    Vec<(&'s str, String)>,
    &'s BTreeSet<String>,
    &'s BTreeMap<String, PathBuf>,
);

fn summary(snapshot: &Snapshot) -> Summary<'_> {
    (
        snapshot
            .files
            .iter()
            .map(|(path, entry)| (&**path, format!("{entry:?}")))
            .collect(),
        &snapshot.dirs,
        &snapshot.raw_names,
    )
}

/// Files (path and contents) in folders named to meet the rules, and ignore files with rules
/// that often contradict each other.
fn tree() -> impl Strategy<Value = Vec<(String, String)>> {
    let part = prop::sample::select(vec!["a", "b", "build", ".hidden", "keep", "x.log", "c"]);
    let file = prop::sample::select(vec!["f.txt", "keep.txt", "x.log", "keep.log", "c", ".env"]);
    let files = prop::collection::vec((prop::collection::vec(part, 0..3), file), 1..24);
    let folder = prop::sample::select(vec!["", "a/", "a/b/", "b/", "build/", "keep/", "c/"]);
    let name = prop::sample::select(vec![".gitignore", ".helixflowignore"]);
    let rules = prop::collection::vec((folder, name, prop::collection::vec(rule(), 1..4)), 0..6);
    (files, rules).prop_map(|(files, rules)| {
        let mut tree: Vec<(String, String)> = files
            .into_iter()
            .map(|(folders, file)| {
                let mut path = folders.join("/");
                if !path.is_empty() {
                    path.push('/');
                }
                path.push_str(file);
                (path, "contents".to_owned())
            })
            .collect();
        tree.extend(
            rules
                .into_iter()
                .map(|(folder, name, rules)| (format!("{folder}{name}"), rules.join("\n"))),
        );
        tree
    })
}

/// Ignore rules that often contradict each other.
fn rule() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "*.log",
        "!keep.log",
        "build/",
        "/a",
        "a/b",
        "*.txt",
        "!*.txt",
        "b",
        "**/c",
        ".hidden",
        "!keep",
        "keep/",
        "!build/",
        "#x",
        "",
        "[",
        "\\!x",
        "c/",
        "/b/",
        "x.log/",
        "!f.txt",
        "!c",
        "!x.log",
        "*",
    ])
}

/// Lays `entries` out in `dir/workspace`, under an ignore file that holds for it from above,
/// with rules in git's exclude files when `exclude_info`; returns the workspace.
fn lay_out(dir: &Path, entries: &[(String, String)], exclude_info: bool) -> PathBuf {
    let root = dir.join("workspace");
    fs::create_dir(&root).unwrap();
    fs::write(dir.join(".gitignore"), "workspace/a/x.log\n").unwrap();
    for (path, text) in entries {
        let path = root.join(path);
        // A path already taken by a file or folder stays what it is.
        if fs::create_dir_all(path.parent().unwrap()).is_ok() {
            let _ = fs::write(&path, text);
        }
    }
    if exclude_info {
        fs::create_dir_all(root.join(".git/info")).unwrap();
        fs::write(root.join(".git/info/exclude"), "*.txt\n!keep.txt\n").unwrap();
        fs::create_dir_all(root.join("b/.git/info")).unwrap();
        fs::write(root.join("b/.git/info/exclude"), "f.txt\nc\n").unwrap();
    }
    root
}

/// Every file below `root` but in `.git` and the excluded folders, ignored or not.
fn every_file(root: &Path, rel: &str, excluded: &[&str], found: &mut Vec<String>) {
    for entry in fs::read_dir(root.join(rel)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if name == ".git" || excluded.contains(&path.as_str()) {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            every_file(root, &path, excluded, found);
        } else {
            found.push(path);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_walker_finds_the_same(entries in tree(), exclude_info in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let root = lay_out(dir.path(), &entries, exclude_info);
        let options = SnapshotOptions {
            exclude: vec![PathBuf::from("build/c"), PathBuf::from(".hidden")],
            ..SnapshotOptions::default()
        };
        let ours = Snapshot::take(&root, &options, None).unwrap();
        let reference = take_with_ignore(&root, &options);
        prop_assert_eq!(summary(&ours), summary(&reference));
        let portable = take_portable(&root, &options);
        prop_assert_eq!(summary(&ours), summary(&portable));
    }

    #[test]
    fn earlier_rules_hide_nothing_and_protected_files_are_always_seen(
        entries in tree(),
        exclude_info in any::<bool>(),
        protect in prop::collection::vec(
            prop::sample::select(vec![
                "*.log", "build/**", "**/c", "keep/*.txt", ".env", "a/**/x.log", "b/f.txt",
            ]),
            0..3,
        ),
        rewritten in prop::collection::vec(
            (
                prop::sample::select(vec!["", "a/", "a/b/", "b/", "build/", "keep/", "c/"]),
                prop::sample::select(vec![".gitignore", ".helixflowignore", ".git/info/exclude"]),
                prop::collection::vec(rule(), 1..4),
            ),
            1..4,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = lay_out(dir.path(), &entries, exclude_info);
        let protect: Vec<String> = protect.into_iter().map(str::to_owned).collect();
        let options = SnapshotOptions {
            exclude: vec![PathBuf::from("build/c"), PathBuf::from(".hidden")],
            protected: ProtectedPaths::new(&protect).unwrap(),
            ..SnapshotOptions::default()
        };
        let before = Snapshot::take(&root, &options, None).unwrap();
        let portable = take_portable(&root, &options);
        prop_assert_eq!(summary(&before), summary(&portable));
        let mut on_disk = Vec::new();
        every_file(&root, "", &["build/c", ".hidden"], &mut on_disk);
        let protected = |path: &str| {
            protect.iter().any(|glob| {
                let glob = crate::glob::compile_glob(glob).unwrap();
                glob.compile_matcher().is_match(path)
            })
        };
        for path in on_disk.iter().filter(|path| protected(path)) {
            prop_assert!(before.get(path).is_some(), "protected `{}` is not recorded", path);
        }
        let only = SnapshotOptions { only_protected: true, ..options.clone() };
        let only = Snapshot::take(&root, &only, None).unwrap();
        let expected: Vec<&str> =
            before.files().map(|(path, _)| path).filter(|path| protected(path)).collect();
        prop_assert_eq!(only.files().map(|(path, _)| path).collect::<Vec<_>>(), expected);

        let judged = SnapshotOptions { rules: before.ignore_rules(), ..options.clone() };
        let unchanged = Snapshot::take(&root, &judged, Some(&before)).unwrap();
        prop_assert_eq!(summary(&unchanged), summary(&before));

        // The rules change; the snapshot judged by the earlier ones loses no file.
        for (folder, name, rules) in &rewritten {
            let path = root.join(folder).join(name);
            if root.join(folder).is_dir() && fs::create_dir_all(path.parent().unwrap()).is_ok() {
                let _ = fs::write(&path, rules.join("\n"));
            }
        }
        let after = Snapshot::take(&root, &judged, Some(&before)).unwrap();
        let portable = take_portable(&root, &judged);
        prop_assert_eq!(summary(&after), summary(&portable));
        let changes = before.diff(&after);
        prop_assert!(changes.deleted.is_empty(), "{:?}", changes);
        for path in changes.created.iter().chain(&changes.modified) {
            prop_assert!(
                path.ends_with(".gitignore") || path.ends_with(".helixflowignore"),
                "`{}` changed", path
            );
        }
    }
}

#[test]
fn both_walkers_agree_on_names_that_are_not_utf8_and_symlinks() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let odd = root.join(std::ffi::OsStr::from_bytes(b"dir-\xff"));
    fs::create_dir_all(odd.join("sub")).unwrap();
    fs::write(
        odd.join("sub")
            .join(std::ffi::OsStr::from_bytes(b"a-\xfe.txt")),
        "a",
    )
    .unwrap();
    fs::write(odd.join(std::ffi::OsStr::from_bytes(b"b-\xfe.txt")), "b").unwrap();
    fs::write(odd.join(".gitignore"), "*.log\n").unwrap();
    fs::write(odd.join("c.log"), "c").unwrap();
    std::os::unix::fs::symlink("dir-\u{FFFD}", root.join("link")).unwrap();
    let options = SnapshotOptions::default();
    let ours = Snapshot::take(root, &options, None).unwrap();
    let reference = take_with_ignore(root, &options);
    assert_eq!(summary(&ours), summary(&reference));
    assert_eq!(summary(&ours), summary(&take_portable(root, &options)));
    assert_eq!(ours.len(), 4);
}
