//! `helixflow bundle apply` and `show` on bundles crafted here, entry by entry: each way the
//! manifest and the archive can disagree is refused before anything is written, `--check` refuses
//! what `apply` would fail on, and a failure while applying leaves the workspace as it was.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_helixflow");

fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// A bundle written entry by entry, in whatever order and shape a test wants.
struct Crafted {
    builder: tar::Builder<Vec<u8>>,
}

impl Crafted {
    fn new() -> Self {
        Self {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    /// A manifest of phase "code" with these files.
    fn manifest(self, files: Value) -> Self {
        let manifest = json!({
            "format": "helixflow-bundle", "version": 1, "pipeline": "p", "phase": "code",
            "run-id": "r1", "attempt": 1, "files": files,
        });
        self.file(
            "manifest.json",
            0o644,
            &serde_json::to_vec(&manifest).unwrap(),
        )
    }

    fn file(mut self, name: &str, mode: u32, bytes: &[u8]) -> Self {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(mode);
        header.set_size(bytes.len() as u64);
        self.builder.append_data(&mut header, name, bytes).unwrap();
        self
    }

    fn symlink(mut self, name: &str, target: &str) -> Self {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_mode(0o777);
        header.set_size(0);
        self.builder.append_link(&mut header, name, target).unwrap();
        self
    }

    /// A regular entry named as given, `..` and all (the tar crate refuses to write such names).
    fn raw_file(mut self, name: &str, bytes: &[u8]) -> Self {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_size(bytes.len() as u64);
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_cksum();
        let inner = self.builder.get_mut();
        inner.extend_from_slice(header.as_bytes());
        inner.extend_from_slice(bytes);
        inner.resize(inner.len().div_ceil(512) * 512, 0);
        self
    }

    /// An entry whose header claims `size` bytes of which only `bytes` follow.
    fn claiming(mut self, name: &str, kind: tar::EntryType, size: u64, bytes: &[u8]) -> Self {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_mode(0o644);
        header.set_path(name).unwrap();
        header.set_size(size);
        header.set_cksum();
        let inner = self.builder.get_mut();
        inner.extend_from_slice(header.as_bytes());
        inner.extend_from_slice(bytes);
        self
    }

    fn write(self, path: &Path) {
        let bytes = self.builder.into_inner().unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

fn created(path: &str, contents: &[u8]) -> Value {
    json!({"path": path, "change": "created",
           "after": {"kind": "file", "mode": 0o644, "hash": hash(contents), "size": contents.len()}})
}

fn modified(path: &str, before: &[u8], after: &[u8]) -> Value {
    json!({"path": path, "change": "modified", "before": hash(before),
           "after": {"kind": "file", "mode": 0o644, "hash": hash(after), "size": after.len()}})
}

fn helixflow(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A workspace with `a.txt` ("old"), and every file of it with its contents, to compare after.
fn workspace() -> (tempfile::TempDir, Vec<(String, Vec<u8>)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("ws/a.txt"), "old").unwrap();
    let files = tree(&dir.path().join("ws"));
    (dir, files)
}

/// Every file below `dir` (following nothing), with its contents, in name order.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                walk(root, &path, out);
            } else if meta.file_type().is_symlink() {
                out.push((
                    rel,
                    std::fs::read_link(&path)
                        .unwrap()
                        .display()
                        .to_string()
                        .into(),
                ));
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

/// Both `apply --check` and `apply` refuse the bundle as unreadable (exit 2) with `why`, and the
/// workspace is unchanged.
fn refused(bundle: Crafted, why: &str) {
    let (dir, files) = workspace();
    let path = dir.path().join("b.hxb");
    bundle.write(&path);
    for args in [
        &["bundle", "apply", "--check", "-C", "ws", "b.hxb"][..],
        &["bundle", "apply", "-C", "ws", "b.hxb"],
        &["bundle", "show", "b.hxb"],
    ] {
        let (code, stdout, stderr) = helixflow(args, dir.path());
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains("is not a readable bundle"), "{stderr}");
        assert!(
            stderr.contains(why),
            "{args:?}: expected {why:?} in {stderr}"
        );
    }
    assert_eq!(tree(&dir.path().join("ws")), files);
}

#[test]
fn a_path_that_cannot_be_written_fails_check_and_apply_before_anything_changes() {
    // `zz/.` would be written as the folder `zz` itself, after `a.txt` had changed.
    refused(
        Crafted::new()
            .manifest(json!([
                modified("a.txt", b"old", b"new"),
                created("zz/.", b"x")
            ]))
            .file("files/a.txt", 0o644, b"new")
            .file("files/zz/.", 0o644, b"x"),
        "zz/.: not a plain relative path inside the workspace",
    );
    let long = "n".repeat(300);
    refused(
        Crafted::new()
            .manifest(json!([
                modified("a.txt", b"old", b"new"),
                created(&long, b"x")
            ]))
            .file("files/a.txt", 0o644, b"new")
            .file(&format!("files/{long}"), 0o644, b"x"),
        "a name of 300 bytes (the limit is 255)",
    );
}

/// On a case-insensitive file system (macOS's default) `.GIT/config` is `.git/config`, and
/// macOS's also ignores a few invisible code points in names: such paths are refused everywhere,
/// like `.git` itself, and so is the state folder's default name.
#[test]
fn paths_into_git_or_a_state_folder_are_refused_in_any_case() {
    for (path, why) in [
        (".git/config", "inside .git"),
        (".GIT/config", "inside .git"),
        ("sub/.Git/hooks/pre-commit", "inside .git"),
        (".g\u{200c}it/config", "inside .git"),
        ("\u{feff}.git/HEAD", "inside .git"),
        (".helixflow/runs/x/run.json", "inside a state folder"),
        (".Helixflow/runs/x/run.json", "inside a state folder"),
        ("sub/.HELIXFLOW/lock", "inside a state folder"),
    ] {
        refused(
            Crafted::new().manifest(json!([created(path, b"x")])).file(
                &format!("files/{path}"),
                0o644,
                b"x",
            ),
            &format!("{path}: {why}"),
        );
    }
    // Names that only look alike are files like any other.
    let (dir, _) = workspace();
    Crafted::new()
        .manifest(json!([
            created(".gitx", b"x"),
            created("git/.helixflows", b"y")
        ]))
        .file("files/.gitx", 0o644, b"x")
        .file("files/git/.helixflows", 0o644, b"y")
        .write(&dir.path().join("b.hxb"));
    let (code, stdout, stderr) = helixflow(&["bundle", "apply", "-C", "ws", "b.hxb"], dir.path());
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        std::fs::read(dir.path().join("ws/git/.helixflows")).unwrap(),
        b"y"
    );
}

#[test]
fn the_manifest_and_the_archive_must_agree_exactly() {
    let a = || modified("a.txt", b"old", b"new");
    // A second manifest does not win.
    refused(
        Crafted::new()
            .manifest(json!([a()]))
            .file("files/a.txt", 0o644, b"new")
            .manifest(json!([created("evil.txt", b"x")])),
        "two manifest.json entries",
    );
    // The manifest comes first.
    refused(
        Crafted::new()
            .file("files/a.txt", 0o644, b"new")
            .manifest(json!([a()])),
        "the first entry is files/a.txt, not manifest.json",
    );
    // A stray entry that climbs out.
    refused(
        Crafted::new()
            .manifest(json!([a()]))
            .file("files/a.txt", 0o644, b"new")
            .raw_file("files/../../x", b"x"),
        "files/../../x: not a plain relative path inside the workspace",
    );
    // An entry the manifest does not list.
    refused(
        Crafted::new()
            .manifest(json!([a()]))
            .file("files/a.txt", 0o644, b"new")
            .file("files/b.txt", 0o644, b"x"),
        "files/b.txt: not in the manifest",
    );
    // Contents missing.
    refused(
        Crafted::new().manifest(json!([a()])),
        "a.txt: its contents are missing",
    );
    // Two entries for one file.
    refused(
        Crafted::new()
            .manifest(json!([a()]))
            .file("files/a.txt", 0o644, b"new")
            .file("files/a.txt", 0o644, b"new"),
        "two files/a.txt entries",
    );
    // A regular entry where the manifest says symlink is not made a symlink.
    let target = b"sub/x";
    refused(
        Crafted::new()
            .manifest(json!([{"path": "link", "change": "created",
                "after": {"kind": "symlink", "mode": 0, "hash": hash(target), "size": 5}}]))
            .file("files/link", 0o644, target),
        "link: a regular file in the archive, a symlink in the manifest",
    );
    // And the other way round.
    refused(
        Crafted::new()
            .manifest(json!([created("link", b"sub/x")]))
            .symlink("files/link", "sub/x"),
        "link: a symlink in the archive, a regular file in the manifest",
    );
    // The size is checked, not only the hash.
    let mut wrong_size = created("b.txt", b"abc");
    wrong_size["after"]["size"] = json!(999);
    refused(
        Crafted::new()
            .manifest(json!([wrong_size]))
            .file("files/b.txt", 0o644, b"abc"),
        "b.txt: 3 bytes in the archive, 999 in the manifest",
    );
    // One path both modified and deleted.
    refused(
        Crafted::new()
            .manifest(json!([a(), {"path": "a.txt", "change": "deleted", "before": hash(b"old")}]))
            .file("files/a.txt", 0o644, b"new"),
        "a.txt: listed twice in the manifest",
    );
    // Contents for a file the manifest deletes.
    refused(
        Crafted::new()
            .manifest(json!([{"path": "a.txt", "change": "deleted", "before": hash(b"old")}]))
            .file("files/a.txt", 0o644, b"new"),
        "files/a.txt: the manifest deletes this file",
    );
    // A hard link, a folder, a FIFO: not what a bundle holds.
    refused(
        Crafted::new()
            .manifest(json!([a()]))
            .file("files/a.txt", 0o644, b"new")
            .claiming("journal/phase/x", tar::EntryType::Link, 0, b""),
        "journal/phase/x: an entry of type '1'",
    );
    refused(
        Crafted::new()
            .manifest(json!([a()]))
            .file("files/a.txt", 0o644, b"new")
            .file("journal/events.jsonl", 0o644, b"{}\n")
            .file("journal/events.jsonl", 0o644, b"{}\n"),
        "two journal/events.jsonl entries",
    );
}

/// Runs the binary in `dir` with `args`: its exit code, standard error and peak resident memory
/// in bytes (measured by a small parent, so the test process's own memory does not count).
fn peak_memory(dir: &Path, args: &[&str]) -> (i32, String, u64) {
    let (output, kib) =
        crate::common::run_measured(dir, args, b"", std::time::Duration::from_mins(2));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        kib * 1024,
    )
}

#[test]
fn an_entry_that_claims_a_gibibyte_costs_no_memory() {
    let (dir, files) = workspace();
    let gib = 1u64 << 30;
    for (name, kind, why) in [
        (
            "journal/events.jsonl",
            tar::EntryType::Regular,
            "journal/events.jsonl: the archive ends inside it",
        ),
        (
            "journal/phase/log",
            tar::EntryType::GNUSparse,
            "journal/phase/log: an entry of type 'S'",
        ),
        (
            "manifest.json",
            tar::EntryType::Regular,
            "manifest.json is 1073741824 bytes (the limit is 16777216)",
        ),
        (
            "././@LongLink",
            tar::EntryType::GNULongName,
            "an entry name of 1073741824 bytes (the limit is 4096)",
        ),
    ] {
        let bundle = if name == "manifest.json" {
            Crafted::new()
        } else {
            Crafted::new()
                .manifest(json!([modified("a.txt", b"old", b"new")]))
                .file("files/a.txt", 0o644, b"new")
        };
        bundle
            .claiming(name, kind, gib, &[b'{'; 8192])
            .write(&dir.path().join("b.hxb"));
        for args in [
            &["bundle", "show", "b.hxb"][..],
            &["bundle", "apply", "--check", "-C", "ws", "b.hxb"],
        ] {
            let (code, stderr, peak) = peak_memory(dir.path(), args);
            assert_eq!(code, 2, "{args:?}: {stderr}");
            assert!(
                stderr.contains(why),
                "{args:?}: expected {why:?} in {stderr}"
            );
            assert!(peak < 100 << 20, "{args:?} peaked at {peak} bytes");
        }
    }
    assert_eq!(tree(&dir.path().join("ws")), files);
}

/// A full disk while staging: the file limit of the process stands in for it (`ulimit -f`, with
/// SIGXFSZ ignored so that the write fails instead of killing helixflow).
#[test]
fn a_failure_while_applying_leaves_the_workspace_as_it_was() {
    let (dir, files) = workspace();
    let big = vec![b'x'; 1 << 20];
    std::fs::create_dir(dir.path().join("ws/old")).unwrap();
    std::fs::write(dir.path().join("ws/old/gone.txt"), "bye").unwrap();
    let files_before = tree(&dir.path().join("ws"));
    assert_ne!(files_before, files);
    Crafted::new()
        .manifest(json!([
            modified("a.txt", b"old", b"new"),
            created("new/deep/big.bin", &big),
            {"path": "old/gone.txt", "change": "deleted", "before": hash(b"bye")},
        ]))
        .file("files/a.txt", 0o644, b"new")
        .file("files/new/deep/big.bin", 0o644, &big)
        .write(&dir.path().join("b.hxb"));
    let (code, stdout, _) = helixflow(
        &["bundle", "apply", "--check", "-C", "ws", "b.hxb"],
        dir.path(),
    );
    assert_eq!(code, 0, "{stdout}");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 64 && exec '{BIN}' bundle apply -C ws b.hxb"
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert_eq!(tree(&dir.path().join("ws")), files_before);

    // Without the limit it applies, and leaves nothing of its own behind.
    let (code, stdout, stderr) = helixflow(&["bundle", "apply", "-C", "ws", "b.hxb"], dir.path());
    assert_eq!(code, 0, "{stdout}{stderr}");
    let after: Vec<String> = tree(&dir.path().join("ws"))
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    assert_eq!(
        after,
        ["a.txt", "new/", "new/deep/", "new/deep/big.bin"],
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/a.txt")).unwrap(),
        "new"
    );
}

#[test]
fn names_from_a_bundle_reach_the_terminal_without_escapes() {
    let (dir, _) = workspace();
    let nasty = "x\u{1b}]0;owned\u{7}\u{1b}[2J\nfake line";
    std::fs::write(dir.path().join("ws").join(nasty), "someone else's").unwrap();
    Crafted::new()
        .manifest(json!([created(nasty, b"mine")]))
        .file(&format!("files/{nasty}"), 0o644, b"mine")
        .write(&dir.path().join("b.hxb"));
    for args in [
        &["bundle", "show", "b.hxb"][..],
        &["bundle", "apply", "--check", "-C", "ws", "b.hxb"],
        &["bundle", "apply", "-C", "ws", "b.hxb"],
    ] {
        let (_, stdout, stderr) = helixflow(args, dir.path());
        let all = stdout + &stderr;
        assert!(all.contains("x fake line"), "{all}");
        assert!(!all.contains('\u{1b}'), "{args:?}: {all:?}");
        assert!(!all.contains("\nfake line"), "{args:?}: {all:?}");
    }
}

/// A phase whose agent prints 100 MB passes and leaves its bundle without helixflow's memory
/// growing with that output; the bundle holds the change and the journal's records, not the
/// transcript, which stays in the run folder.
#[test]
fn a_passing_phase_with_a_hundred_megabytes_of_output_stays_within_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.kdl"),
        r#"pipeline "p"
agent "loud" {
    command "sh" "-c" "yes 'a line of agent output' | head -c 100000000; yes err | head -c 10000000 >&2; echo done > out.txt"
}
phase "a" {
    agent "loud"
    prompt "talk"
}
"#,
    )
    .unwrap();
    let (code, stderr, peak) = peak_memory(dir.path(), &["run", "--no-progress"]);
    assert_eq!(code, 0, "{stderr}");
    let runs = dir.path().join(".helixflow/runs");
    let run = crate::common::run_folders(&runs).remove(0);
    let attempt = run.join("phases/a/attempt-1");
    assert_eq!(
        std::fs::metadata(attempt.join("stdout.log")).unwrap().len(),
        100_000_000,
        "the transcript stays in the run folder"
    );
    let bundle = run.join("phases/a/bundle.hxb");
    let size = std::fs::metadata(&bundle).unwrap().len();
    assert!(size < 1 << 20, "the bundle is {size} bytes");
    let names: Vec<String> = tar::Archive::new(std::fs::File::open(&bundle).unwrap())
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect();
    for record in [
        "manifest.json",
        "files/out.txt",
        "journal/events.jsonl",
        "journal/phase/attempt-1/invocation.json",
        "journal/phase/attempt-1/gates.json",
        "journal/phase/attempt-1/changes.json",
    ] {
        assert!(names.iter().any(|n| n == record), "{record}: {names:?}");
    }
    assert!(
        !names
            .iter()
            .any(|n| n.contains("stdout") || n.contains("stderr") || n.contains("response")),
        "{names:?}"
    );
    assert!(peak < 45 << 20, "helixflow peaked at {peak} bytes");
    let (code, show, _) = helixflow(&["bundle", "show", bundle.to_str().unwrap()], dir.path());
    assert_eq!(code, 0);
    assert!(show.contains("created   out.txt"), "{show}");
}

/// A phase whose changes hold a path no reader accepts (`.Git` is a folder of its own on Linux,
/// `.git` on a Mac) passes, gets no bundle, and the run says why.
#[test]
fn a_phase_that_writes_what_no_bundle_may_carry_gets_none_and_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.kdl"),
        "pipeline \"p\"\nphase \"a\" {\n    run \"mkdir .Git && echo x > .Git/config\"\n}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "run",
            "--no-progress",
            "--bundles",
            "--events",
            "events.jsonl",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    assert!(
        events.contains("its bundle could not be written: .Git/config: inside .git"),
        "{events}"
    );
    let runs = crate::common::run_folders(&dir.path().join(".helixflow/runs"));
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].join("phases/a/bundle.hxb").exists());
}
