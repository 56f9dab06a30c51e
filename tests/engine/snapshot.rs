//! Workspace snapshots on real temporary folders: change detection, ignore rules, the state dir,
//! the size+mtime shortcut, symlinks and byte-exact restore.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use helixflow::{Changes, Snapshot, SnapshotOptions};

fn write(root: &Path, rel: &str, bytes: impl AsRef<[u8]>) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("a parent")).expect("create folders");
    fs::write(path, bytes).expect("write file");
}

fn options() -> SnapshotOptions {
    SnapshotOptions {
        exclude: vec![PathBuf::from(".helixflow")],
        ..SnapshotOptions::default()
    }
}

fn keeping() -> SnapshotOptions {
    SnapshotOptions {
        keep_contents_under: Some(1 << 20),
        ..options()
    }
}

fn take(root: &Path) -> Snapshot {
    Snapshot::take(root, &options(), None).expect("snapshot")
}

fn paths(snapshot: &Snapshot) -> Vec<&str> {
    snapshot.files().map(|(path, _)| path).collect()
}

fn set_mtime(path: &Path, time: SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .expect("open")
        .set_modified(time)
        .expect("set mtime");
}

fn mtime(path: &Path) -> SystemTime {
    fs::metadata(path)
        .expect("metadata")
        .modified()
        .expect("mtime")
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o7777
}

/// Waits until files written so far are older than the racy margin of the next snapshot, so that
/// the shortcut may reuse their hashes.
fn settle() {
    std::thread::sleep(Duration::from_millis(2_100));
}

#[test]
fn detects_created_modified_and_deleted_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/keep.rs", "fn keep() {}\n");
    write(root, "src/change.rs", "fn a() {}\n");
    write(root, "docs/gone.md", "# gone\n");
    let before = take(root);
    assert_eq!(
        paths(&before),
        ["docs/gone.md", "src/change.rs", "src/keep.rs"]
    );

    write(root, "src/change.rs", "fn b() {}\n");
    fs::remove_file(root.join("docs/gone.md")).unwrap();
    write(root, "src/new/mod.rs", "pub mod x;\n");
    let after = take(root);

    let changes = before.diff(&after);
    assert_eq!(changes.created, ["src/new/mod.rs"]);
    assert_eq!(changes.modified, ["src/change.rs"]);
    assert_eq!(changes.deleted, ["docs/gone.md"]);
    assert_eq!(changes.len(), 3);
    assert!(!changes.is_empty());
    assert_eq!(
        changes.all().collect::<Vec<_>>(),
        ["src/new/mod.rs", "src/change.rs", "docs/gone.md"]
    );
    assert!(after.diff(&take(root)).is_empty());
    assert_eq!(after.len(), 3);
    let state = after.get("src/change.rs").unwrap();
    assert_eq!(state.size, 10);
    assert_eq!(state.hash, *blake3::hash(b"fn b() {}\n").as_bytes());
}

#[test]
fn touching_a_file_without_changing_its_contents_is_not_a_modification() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "same");
    let before = take(root);
    set_mtime(
        &root.join("a.txt"),
        SystemTime::now() + Duration::from_mins(1),
    );
    let after = Snapshot::take(root, &options(), Some(&before)).unwrap();
    assert_ne!(
        before.get("a.txt").unwrap().mtime_ns,
        after.get("a.txt").unwrap().mtime_ns
    );
    assert!(before.diff(&after).is_empty());
}

#[test]
fn gitignore_and_helixflowignore_are_honoured_without_a_git_repository() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "target/\n*.log\n!keep.log\n");
    write(root, ".helixflowignore", "scratch/\n");
    write(root, "src/lib.rs", "");
    write(root, "target/debug/app", "binary");
    write(root, "run.log", "log");
    write(root, "keep.log", "kept");
    write(root, "scratch/notes.txt", "notes");
    write(root, "nested/.gitignore", "*.tmp\n");
    write(root, "nested/a.tmp", "");
    write(root, "nested/b.txt", "");
    write(root, "other/c.tmp", "");
    assert!(!root.join(".git").exists());

    let before = take(root);
    assert_eq!(
        paths(&before),
        [
            ".gitignore",
            ".helixflowignore",
            "keep.log",
            "nested/.gitignore",
            "nested/b.txt",
            "other/c.tmp",
            "src/lib.rs"
        ]
    );

    write(root, "target/debug/app", "rebuilt");
    write(root, "run.log", "more log");
    write(root, "scratch/notes.txt", "changed");
    write(root, "nested/a.tmp", "changed");
    assert!(before.diff(&take(root)).is_empty());
}

#[test]
fn hidden_files_are_seen_but_git_folders_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".env", "TOKEN=1");
    write(root, ".github/workflows/ci.yml", "on: push");
    write(root, ".git/HEAD", "ref: refs/heads/main");
    write(root, "vendor/lib/.git/config", "[core]");
    write(root, "vendor/lib/src.c", "int x;");
    let before = take(root);
    assert_eq!(
        paths(&before),
        [".env", ".github/workflows/ci.yml", "vendor/lib/src.c"]
    );

    write(root, ".git/HEAD", "ref: refs/heads/other");
    write(root, ".git/objects/ab/cdef", "object");
    assert!(before.diff(&take(root)).is_empty());
}

#[test]
fn excluded_folders_are_never_entered_even_when_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".helixflow/runs/1/journal.ndjson", "{}");
    write(
        root,
        ".helixflow-notes.md",
        "a sibling with the same prefix",
    );
    write(root, "build/cache/blob", "1");
    write(root, "build/out.txt", "out");
    let options = SnapshotOptions {
        exclude: vec![
            PathBuf::from("./.helixflow/"),
            root.join("build/cache"),
            PathBuf::from("../elsewhere"),
        ],
        ..SnapshotOptions::default()
    };
    let before = Snapshot::take(root, &options, None).unwrap();
    assert_eq!(paths(&before), [".helixflow-notes.md", "build/out.txt"]);

    write(
        root,
        ".helixflow/runs/1/journal.ndjson",
        "{\"event\":\"run-started\"}",
    );
    write(root, ".helixflow/state.json", "{}");
    fs::remove_file(root.join("build/cache/blob")).unwrap();
    let after = Snapshot::take(root, &options, Some(&before)).unwrap();
    assert!(before.diff(&after).is_empty());
}

#[test]
fn shortcut_reuses_hashes_of_unchanged_files_and_reads_changed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..20 {
        write(root, &format!("src/f{i:02}.txt"), format!("file {i:02}"));
    }
    // Names that sort around each other and around their folders.
    for extra in [
        "a",
        "a.txt",
        "a-b/c",
        "a/b",
        "a/b/c",
        "a/b.c",
        "src/f00.txt.orig",
        "src0/x",
    ] {
        write(root, &format!("nest/{extra}x"), extra);
        write(root, &format!("{extra}y"), extra);
    }
    settle();
    let cold = take(root);
    assert_eq!(cold.files_hashed(), 36);

    let warm = Snapshot::take(root, &options(), Some(&cold)).unwrap();
    assert_eq!(
        warm.files_hashed(),
        0,
        "unchanged files reuse the previous hash"
    );
    assert!(cold.diff(&warm).is_empty());

    // Same size, new contents, new modification time: read again and seen.
    write(root, "src/f03.txt", "FILE 03");
    let after = Snapshot::take(root, &options(), Some(&warm)).unwrap();
    assert_eq!(after.files_hashed(), 1);
    assert_eq!(warm.diff(&after).modified, ["src/f03.txt"]);

    // Same size with the modification time put back: the change time still betrays it.
    let path = root.join("src/f07.txt");
    let old = mtime(&path);
    write(root, "src/f07.txt", "FILE 07");
    set_mtime(&path, old);
    let sneaky = Snapshot::take(root, &options(), Some(&warm)).unwrap();
    assert_eq!(
        sneaky.get("src/f07.txt").unwrap().mtime_ns,
        warm.get("src/f07.txt").unwrap().mtime_ns
    );
    assert_eq!(warm.diff(&sneaky).modified, ["src/f03.txt", "src/f07.txt"]);
}

#[test]
fn shortcut_finds_files_next_to_large_folders() {
    // The workspace's own folder holds more than a thousand files below it, so its files are
    // found by binary search rather than by name.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..1_100 {
        write(root, &format!("big/f{i:04}"), "x");
    }
    for name in ["a.txt", "big.txt", "c/d.txt", "z.txt"] {
        write(root, name, name);
    }
    settle();
    let cold = take(root);
    write(root, "z.txt", "Z.TXT");
    let warm = Snapshot::take(root, &options(), Some(&cold)).unwrap();
    assert_eq!(warm.files_hashed(), 1);
    assert_eq!(cold.diff(&warm).modified, ["z.txt"]);
}

#[test]
fn files_written_just_before_a_snapshot_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "fresh.txt", "written a moment ago");
    let first = take(root);
    // Timestamps are coarse: a same-size write right after `first` read the file could carry the
    // same times, so the shortcut must not trust them yet.
    let second = Snapshot::take(root, &options(), Some(&first)).unwrap();
    assert_eq!(second.files_hashed(), 1);
}

#[cfg(unix)]
#[test]
fn executable_bit_change_is_a_modification() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "run.sh", "#!/bin/sh\n");
    set_mode(&root.join("run.sh"), 0o644);
    let before = take(root);
    assert!(!before.get("run.sh").unwrap().executable);
    set_mode(&root.join("run.sh"), 0o755);
    let after = Snapshot::take(root, &options(), Some(&before)).unwrap();
    assert!(after.get("run.sh").unwrap().executable);
    assert_eq!(before.diff(&after).modified, ["run.sh"]);
}

#[cfg(unix)]
#[test]
fn symlinks_are_recorded_by_target_and_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(outside.path(), "big/secret.txt", "outside the workspace");
    write(root, "real/a.txt", "a");
    std::os::unix::fs::symlink(outside.path().join("big"), root.join("linked")).unwrap();
    std::os::unix::fs::symlink("real/a.txt", root.join("alias")).unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();

    let before = Snapshot::take(root, &keeping(), None).unwrap();
    assert_eq!(
        paths(&before),
        ["alias", "dangling", "linked", "real/a.txt"]
    );
    let alias = before.get("alias").unwrap();
    assert_eq!(alias.hash, *blake3::hash(b"real/a.txt").as_bytes());
    assert_eq!(alias.size, 10);
    assert!(!alias.executable);

    // Changing what a link points at changes the link; changing the target's contents does not.
    write(outside.path(), "big/secret.txt", "changed outside");
    fs::remove_file(root.join("alias")).unwrap();
    std::os::unix::fs::symlink("real/b.txt", root.join("alias")).unwrap();
    fs::remove_file(root.join("dangling")).unwrap();
    let after = take(root);
    let changes = before.diff(&after);
    assert_eq!(changes.modified, ["alias"]);
    assert_eq!(changes.deleted, ["dangling"]);

    assert!(before.restore(root, &changes).unwrap().is_empty());
    assert_eq!(
        fs::read_link(root.join("alias")).unwrap(),
        Path::new("real/a.txt")
    );
    assert_eq!(
        fs::read_link(root.join("dangling")).unwrap(),
        Path::new("nowhere")
    );
    assert!(before.diff(&take(root)).is_empty());
}

#[cfg(unix)]
#[test]
fn a_file_replaced_by_a_symlink_to_the_same_text_is_a_modification() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "x", "target");
    let before = take(root);
    fs::remove_file(root.join("x")).unwrap();
    std::os::unix::fs::symlink("target", root.join("x")).unwrap();
    let after = take(root);
    assert_eq!(before.get("x").unwrap().hash, after.get("x").unwrap().hash);
    assert_eq!(before.diff(&after).modified, ["x"]);
}

#[cfg(unix)]
#[test]
fn fifos_are_skipped_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "a");
    let fifo =
        std::ffi::CString::new(root.join("pipe").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path and a plain mode.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    assert_eq!(paths(&take(root)), ["a.txt"]);
}

#[cfg(unix)]
#[test]
fn a_symlinked_workspace_is_walked() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "real/src/main.rs", "fn main() {}");
    let link = dir.path().join("workspace");
    std::os::unix::fs::symlink(dir.path().join("real"), &link).unwrap();
    assert_eq!(paths(&take(&link)), ["src/main.rs"]);
}

#[cfg(unix)]
#[test]
fn an_unreadable_file_is_recorded_and_compared_by_size_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "locked.bin", "12345");
    let before = take(root);
    set_mode(&root.join("locked.bin"), 0o000);
    let after = Snapshot::take(root, &options(), Some(&before)).unwrap();
    let state = after
        .get("locked.bin")
        .expect("recorded although unreadable");
    assert_eq!(state.size, 5);
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    let expected = if root_user {
        blake3::hash(b"12345")
    } else {
        blake3::hash(b"")
    };
    assert_eq!(state.hash, *expected.as_bytes());
    // Its permission bits changed, which is a change of the file.
    assert_eq!(before.diff(&after).modified, ["locked.bin"]);
    // Unreadable on both sides, it is compared by size and modification time.
    let again = Snapshot::take(root, &options(), Some(&after)).unwrap();
    assert!(after.diff(&again).is_empty());
    set_mode(&root.join("locked.bin"), 0o644);
}

#[test]
fn a_workspace_that_is_not_a_folder_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "file", "x");
    let err = Snapshot::take(&dir.path().join("file"), &options(), None).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotADirectory);
    let err = Snapshot::take(&dir.path().join("missing"), &options(), None).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn restore_brings_back_modified_and_deleted_files_byte_exact_and_removes_created_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let binary: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    write(root, "data/blob.bin", &binary);
    write(root, "src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    write(root, "scripts/run.sh", "#!/bin/sh\necho hi\n");
    write(root, "docs/readme.md", "# Docs\n");
    fs::create_dir_all(root.join("empty")).unwrap();
    #[cfg(unix)]
    set_mode(&root.join("scripts/run.sh"), 0o750);
    let lib_mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    set_mtime(&root.join("src/lib.rs"), lib_mtime);
    let before = Snapshot::take(root, &keeping(), None).unwrap();

    // What a misbehaving verifier might do.
    write(root, "data/blob.bin", b"\x00truncated");
    write(root, "src/lib.rs", "pub fn answer() -> u32 { 41 }\n");
    fs::remove_file(root.join("scripts/run.sh")).unwrap();
    fs::remove_dir(root.join("scripts")).unwrap();
    fs::remove_file(root.join("docs/readme.md")).unwrap();
    write(root, "docs/notes.md", "created next to a deleted file");
    write(root, "new/deep/er/file.txt", "created in new folders");
    write(
        root,
        "empty/inside.txt",
        "created in a folder that was empty",
    );
    let after = take(root);
    let changes = before.diff(&after);
    assert_eq!(
        changes.created,
        ["docs/notes.md", "empty/inside.txt", "new/deep/er/file.txt"]
    );
    assert_eq!(changes.modified, ["data/blob.bin", "src/lib.rs"]);
    assert_eq!(changes.deleted, ["docs/readme.md", "scripts/run.sh"]);

    let not_restored = before.restore(root, &changes).unwrap();
    assert!(not_restored.is_empty(), "{not_restored:?}");
    assert_eq!(fs::read(root.join("data/blob.bin")).unwrap(), binary);
    assert_eq!(
        fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        "pub fn answer() -> u32 { 42 }\n"
    );
    assert_eq!(mtime(&root.join("src/lib.rs")), lib_mtime);
    assert_eq!(
        fs::read_to_string(root.join("scripts/run.sh")).unwrap(),
        "#!/bin/sh\necho hi\n"
    );
    #[cfg(unix)]
    assert_eq!(mode(&root.join("scripts/run.sh")), 0o750);
    assert!(!root.join("docs/notes.md").exists());
    assert!(root.join("docs").is_dir());
    assert!(
        !root.join("new").exists(),
        "folders the verifier created are removed"
    );
    assert!(!root.join("empty/inside.txt").exists());
    assert!(
        root.join("empty").is_dir(),
        "a folder that existed, even empty, stays"
    );
    let leftovers: Vec<_> = fs::read_dir(root.join("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["lib.rs"], "no temporary files are left behind");
    assert!(
        before
            .diff(&Snapshot::take(root, &keeping(), None).unwrap())
            .is_empty()
    );
}

#[test]
fn restore_reports_files_whose_contents_were_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "small.txt", "0123456789");
    write(root, "large.txt", "0123456789A");
    let limited = SnapshotOptions {
        keep_contents_under: Some(10),
        ..options()
    };
    let before = Snapshot::take(root, &limited, None).unwrap();
    write(root, "small.txt", "changed");
    write(root, "large.txt", "changed");
    let changes = before.diff(&take(root));
    assert_eq!(before.restore(root, &changes).unwrap(), ["large.txt"]);
    assert_eq!(
        fs::read_to_string(root.join("small.txt")).unwrap(),
        "0123456789"
    );
    assert_eq!(
        fs::read_to_string(root.join("large.txt")).unwrap(),
        "changed"
    );

    let nothing_kept = take(root);
    write(root, "small.txt", "again");
    let changes = nothing_kept.diff(&take(root));
    assert_eq!(nothing_kept.restore(root, &changes).unwrap(), ["small.txt"]);
}

#[test]
fn warm_snapshots_keep_contents_for_restore() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "original");
    settle();
    let cold = Snapshot::take(root, &options(), None).unwrap();
    // The previous snapshot kept nothing, so the file is read although its hash could be reused.
    let keeping_snapshot = Snapshot::take(root, &keeping(), Some(&cold)).unwrap();
    assert_eq!(keeping_snapshot.files_hashed(), 1);
    let warm = Snapshot::take(root, &keeping(), Some(&keeping_snapshot)).unwrap();
    assert_eq!(warm.files_hashed(), 0);
    write(root, "a.txt", "overwritten");
    let changes = warm.diff(&take(root));
    assert!(warm.restore(root, &changes).unwrap().is_empty());
    assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "original");
}

#[cfg(unix)]
#[test]
fn restore_removes_a_symlinked_folder_instead_of_writing_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "conf/app.toml", "port = 1");
    let before = Snapshot::take(root, &keeping(), None).unwrap();
    fs::remove_dir_all(root.join("conf")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("conf")).unwrap();
    let changes = before.diff(&take(root));
    assert_eq!(changes.created, ["conf"]);
    assert_eq!(changes.deleted, ["conf/app.toml"]);

    assert!(before.restore(root, &changes).unwrap().is_empty());
    assert!(
        !fs::symlink_metadata(root.join("conf"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(root.join("conf/app.toml")).unwrap(),
        "port = 1"
    );
    assert_eq!(
        fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
}

#[cfg(unix)]
#[test]
fn restore_never_writes_through_a_symlinked_folder() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "conf/app.toml", "port = 1");
    let before = Snapshot::take(root, &keeping(), None).unwrap();
    // The link is hidden by an ignore rule, so it is not among the changes and stays in place.
    fs::remove_dir_all(root.join("conf")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("conf")).unwrap();
    write(root, ".helixflowignore", "conf\n");
    let changes = before.diff(&take(root));
    assert_eq!(changes.created, [".helixflowignore"]);
    assert_eq!(changes.deleted, ["conf/app.toml"]);

    assert_eq!(before.restore(root, &changes).unwrap(), ["conf/app.toml"]);
    assert_eq!(
        fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
    assert!(!root.join(".helixflowignore").exists());
}

#[test]
fn restore_keeps_a_file_that_existed_but_was_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "secret.env\n");
    write(root, "secret.env", "TOKEN=keep-me");
    // Inode change times come from a coarse clock: let it tick past the files' stamps.
    std::thread::sleep(Duration::from_millis(50));
    let before = Snapshot::take(root, &keeping(), None).unwrap();
    write(root, ".gitignore", "");
    write(root, "made.txt", "by the verifier");
    let changes = before.diff(&take(root));
    assert_eq!(changes.created, ["made.txt", "secret.env"]);
    assert_eq!(changes.modified, [".gitignore"]);

    assert!(before.restore(root, &changes).unwrap().is_empty());
    assert_eq!(
        fs::read_to_string(root.join("secret.env")).unwrap(),
        "TOKEN=keep-me"
    );
    assert!(!root.join("made.txt").exists());
    assert_eq!(
        fs::read_to_string(root.join(".gitignore")).unwrap(),
        "secret.env\n"
    );
}

#[test]
fn restore_refuses_paths_outside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    write(&root, "a.txt", "a");
    write(dir.path(), "outside.txt", "must survive");
    let before = Snapshot::take(&root, &keeping(), None).unwrap();
    let changes = Changes {
        created: vec![
            "../outside.txt".into(),
            "/etc/hostname".into(),
            String::new(),
        ],
        ..Changes::default()
    };
    let mut refused = before.restore(&root, &changes).unwrap();
    refused.sort();
    assert_eq!(refused, ["", "../outside.txt", "/etc/hostname"]);
    assert!(dir.path().join("outside.txt").exists());
}

#[cfg(target_os = "linux")]
#[test]
fn names_that_are_not_utf8_are_recorded_and_restored() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let old_name = OsStr::from_bytes(b"old-\xff.txt");
    let new_name = OsStr::from_bytes(b"new-\xfe.txt");
    fs::write(root.join(old_name), "old").unwrap();
    let before = Snapshot::take(root, &keeping(), None).unwrap();
    assert_eq!(paths(&before), ["old-\u{FFFD}.txt"]);

    fs::remove_file(root.join(old_name)).unwrap();
    fs::write(root.join(new_name), "new").unwrap();
    let changes = before.diff(&take(root));
    assert_eq!(changes.created, ["new-\u{FFFD}.txt"]);
    assert_eq!(changes.deleted, ["old-\u{FFFD}.txt"]);

    assert!(before.restore(root, &changes).unwrap().is_empty());
    assert_eq!(fs::read(root.join(old_name)).unwrap(), b"old");
    assert!(!root.join(new_name).exists());
}

mod properties {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;

    /// Relative file paths whose folders and files cannot collide: files end in `.f`, folders do
    /// not. Names are chosen to sort around each other (`a`, `a-b`, `a.f`, `a0`, upper case).
    fn file_path() -> impl Strategy<Value = String> {
        let folder = prop::sample::select(vec!["a", "a-b", "b0", "B"]);
        let file = prop::sample::select(vec!["a.f", "a-b.f", "a0.f", "b.f", "Z.f"]);
        (prop::collection::vec(folder, 0..3), file).prop_map(|(folders, file)| {
            let mut path = folders.join("/");
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(file);
            path
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// A snapshot taken with a previous one lists the same files in the same order as one
        /// taken without, and the diff is exactly what changed.
        #[test]
        fn warm_snapshots_match_cold_ones_and_diff_exactly(
            before in prop::collection::btree_set(file_path(), 0..24),
            after in prop::collection::btree_set(file_path(), 0..24),
            rewrite in prop::collection::vec(any::<bool>(), 24),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            for path in &before {
                write(root, path, format!("before {path}"));
            }
            let first = take(root);
            for path in before.difference(&after) {
                fs::remove_file(root.join(path)).unwrap();
            }
            let mut modified = BTreeSet::new();
            for (path, rewrite) in after.iter().zip(rewrite.iter().cycle()) {
                if !before.contains(path) {
                    write(root, path, format!("after {path}"));
                } else if *rewrite {
                    write(root, path, format!("changed {path}"));
                    modified.insert(path.clone());
                }
            }
            let warm = Snapshot::take(root, &options(), Some(&first)).unwrap();
            let cold = take(root);
            let warm_files: BTreeMap<_, _> = warm.files().collect();
            prop_assert_eq!(paths(&warm), paths(&cold));
            prop_assert_eq!(warm_files, cold.files().collect::<BTreeMap<_, _>>());
            prop_assert_eq!(paths(&warm), after.iter().map(String::as_str).collect::<Vec<_>>());

            let changes = first.diff(&warm);
            prop_assert_eq!(changes.created, after.difference(&before).cloned().collect::<Vec<_>>());
            prop_assert_eq!(changes.deleted, before.difference(&after).cloned().collect::<Vec<_>>());
            prop_assert_eq!(changes.modified, modified.into_iter().collect::<Vec<_>>());
        }
    }
}

#[test]
fn nested_gitignores_negate_and_reinclude_nearest_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "*.gen\n*.txt\n!keep.txt\n");
    write(root, "a.txt", "");
    write(root, "keep.txt", "");
    write(root, "top.gen", "");
    write(root, "sub/.gitignore", "!*.gen\nkeep.txt\n");
    write(root, "sub/made.gen", "");
    write(root, "sub/keep.txt", "");
    write(root, "sub/deeper/also.gen", "");
    write(root, "sub/deeper/keep.txt", "");
    write(root, "sub/deeper/.gitignore", "!keep.txt\n");
    assert_eq!(
        paths(&take(root)),
        [
            ".gitignore",
            "keep.txt",
            "sub/.gitignore",
            "sub/deeper/.gitignore",
            "sub/deeper/also.gen",
            "sub/deeper/keep.txt",
            "sub/made.gen"
        ]
    );
}

#[test]
fn an_ignored_folder_is_not_entered_so_nothing_in_it_is_reincluded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "build/\nout\n");
    write(root, "build/.gitignore", "!*\n");
    write(root, "build/app", "binary");
    write(root, "src/out/x.txt", "a folder named like a rule");
    write(root, "src/build", "a file: `build/` only ignores folders");
    assert_eq!(paths(&take(root)), [".gitignore", "src/build"]);
}

#[test]
fn helixflowignore_rules_come_before_any_gitignore() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".helixflowignore", "*.tmp\n");
    write(root, "sub/.gitignore", "!keep.tmp\n");
    write(root, "sub/keep.tmp", "");
    write(root, "sub/.helixflowignore", "!again.tmp\n");
    write(root, "sub/again.tmp", "");
    assert_eq!(
        paths(&take(root)),
        [
            ".helixflowignore",
            "sub/.gitignore",
            "sub/.helixflowignore",
            "sub/again.tmp"
        ]
    );
}

#[test]
fn git_info_exclude_holds_for_its_repository_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".git/info/exclude", "# comment\nsecret.txt\n");
    write(root, "secret.txt", "");
    write(root, "src/secret.txt", "");
    write(root, "src/lib.rs", "");
    write(root, "vendor/lib/.git/info/exclude", "*.o\n");
    write(root, "vendor/lib/a.o", "");
    write(root, "vendor/lib/src/b.o", "");
    write(root, "c.o", "");
    write(root, ".gitignore", "!src/secret.txt\n");
    assert_eq!(
        paths(&take(root)),
        [".gitignore", "c.o", "src/lib.rs", "src/secret.txt"]
    );
}

#[test]
fn gitignores_above_the_workspace_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let above = dir.path();
    write(above, ".gitignore", "*.log\nworkspace/build/\n/top.txt\n");
    let root = above.join("workspace");
    write(&root, "run.log", "");
    write(&root, "build/out", "");
    write(&root, "src/lib.rs", "");
    write(
        &root,
        "top.txt",
        "anchored to the folder above: not this one",
    );
    assert_eq!(paths(&take(&root)), ["src/lib.rs", "top.txt"]);
}

#[cfg(unix)]
#[test]
fn a_symlink_to_a_folder_is_a_file_and_never_entered() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "real/a.txt", "a");
    write(root, ".gitignore", "linked/\n");
    std::os::unix::fs::symlink("real", root.join("linked")).unwrap();
    std::os::unix::fs::symlink("real", root.join("alias")).unwrap();
    let snapshot = take(root);
    // `linked/` only ignores folders, and the link is not one.
    assert_eq!(
        paths(&snapshot),
        [".gitignore", "alias", "linked", "real/a.txt"]
    );
    assert_eq!(
        snapshot.get("alias").unwrap().hash,
        *blake3::hash(b"real").as_bytes()
    );
}

#[cfg(unix)]
#[test]
fn an_unreadable_folder_is_skipped_and_the_rest_is_walked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "locked/inner.txt", "x");
    write(root, "open/a.txt", "a");
    set_mode(&root.join("locked"), 0o000);
    let snapshot = Snapshot::take(root, &options(), None);
    set_mode(&root.join("locked"), 0o755);
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    let expected: &[&str] = if root_user {
        &["locked/inner.txt", "open/a.txt"]
    } else {
        &["open/a.txt"]
    };
    assert_eq!(paths(&snapshot.unwrap()), expected);
}

#[test]
fn nested_excludes_and_files_named_like_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a/b/.helixflow/state.json", "{}");
    write(
        root,
        "a/.helixflow",
        "a file where the state dir would be one level up",
    );
    write(root, ".helixflow/state.json", "{}");
    write(
        root,
        "c/.helixflow/kept.json",
        "only the top one is excluded",
    );
    let options = SnapshotOptions {
        exclude: vec![PathBuf::from(".helixflow"), PathBuf::from("a/b/.helixflow")],
        ..SnapshotOptions::default()
    };
    let snapshot = Snapshot::take(root, &options, None).unwrap();
    assert_eq!(paths(&snapshot), ["a/.helixflow", "c/.helixflow/kept.json"]);
}

#[cfg(target_os = "linux")]
#[test]
fn files_in_folders_whose_names_are_not_utf8_are_recorded_and_restored() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let folder = root.join(OsStr::from_bytes(b"dir-\xff"));
    fs::create_dir(&folder).unwrap();
    fs::write(folder.join("a.txt"), "a").unwrap();
    write(root, ".gitignore", "*.tmp\n");
    fs::write(folder.join("b.tmp"), "ignored").unwrap();
    let before = Snapshot::take(root, &keeping(), None).unwrap();
    assert_eq!(paths(&before), [".gitignore", "dir-\u{FFFD}/a.txt"]);

    fs::remove_file(folder.join("a.txt")).unwrap();
    let changes = before.diff(&take(root));
    assert_eq!(changes.deleted, ["dir-\u{FFFD}/a.txt"]);
    assert!(before.restore(root, &changes).unwrap().is_empty());
    assert_eq!(fs::read(folder.join("a.txt")).unwrap(), b"a");
}
