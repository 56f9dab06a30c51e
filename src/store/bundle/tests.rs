//! Bundles written, read and applied for real, and crafted ones refused.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::write::append_bytes;
use super::*;
use crate::workspace::{Snapshot, SnapshotOptions};

fn snapshot(dir: &Path) -> Snapshot {
    Snapshot::take(dir, &SnapshotOptions::default(), None).unwrap()
}

fn make(dir: &Path, out: &Path, before: &Snapshot) -> Manifest {
    let after = snapshot(dir);
    let changes = before.diff(&after);
    let phase_dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(phase_dir.path().join("attempt-1")).unwrap();
    fs::write(phase_dir.path().join("attempt-1/gates.json"), "[]").unwrap();
    // The transcripts stay in the run folder.
    for log in ["stdout.log", "stderr.log", "response.txt", "prompt.md"] {
        fs::write(phase_dir.path().join("attempt-1").join(log), "said").unwrap();
    }
    let journal_dir = tempfile::tempdir().unwrap();
    let journal = journal_dir.path().join("events.jsonl");
    fs::write(&journal, "{\"phase\":\"code\"}\n{\"phase\":\"other\"}\n").unwrap();
    create(
        out,
        &Source {
            workspace: dir,
            before,
            changes: &changes,
            pipeline: "p",
            phase: "code",
            run_id: "r1",
            attempt: 1,
            phase_dir: phase_dir.path(),
            journal: &journal,
        },
    )
    .unwrap()
}

#[test]
fn a_bundle_carries_created_modified_deleted_binary_modes_and_symlinks() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    fs::write(w.join("keep.txt"), "same").unwrap();
    fs::write(w.join("edit.txt"), "old").unwrap();
    fs::create_dir(w.join("gone")).unwrap();
    fs::write(w.join("gone/x.txt"), "bye").unwrap();
    let copy = tempfile::tempdir().unwrap();
    for f in ["keep.txt", "edit.txt"] {
        fs::copy(w.join(f), copy.path().join(f)).unwrap();
    }
    fs::create_dir(copy.path().join("gone")).unwrap();
    fs::write(copy.path().join("gone/x.txt"), "bye").unwrap();

    let before = snapshot(w);
    fs::write(w.join("edit.txt"), "new").unwrap();
    fs::remove_dir_all(w.join("gone")).unwrap();
    fs::create_dir_all(w.join("bin")).unwrap();
    fs::write(w.join("bin/tool"), [0u8, 159, 146, 150, 255]).unwrap();
    fs::set_permissions(w.join("bin/tool"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("../edit.txt", w.join("bin/link")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let out = out.path().join("b.hxb");
    let manifest = make(w, &out, &before);
    let bundle = Bundle::read(&out).unwrap();
    assert_eq!(bundle.manifest, manifest);
    let paths: Vec<(&str, ChangeKind)> = bundle
        .manifest
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.change))
        .collect();
    assert_eq!(
        paths,
        [
            ("bin/link", ChangeKind::Created),
            ("bin/tool", ChangeKind::Created),
            ("edit.txt", ChangeKind::Modified),
            ("gone/x.txt", ChangeKind::Deleted),
        ]
    );
    assert_eq!(
        bundle.phase_files.keys().collect::<Vec<_>>(),
        ["attempt-1/gates.json"]
    );

    let c = copy.path();
    assert_eq!(bundle.check(c).unwrap(), []);
    assert_eq!(
        bundle.apply(c).unwrap().unwrap(),
        Applied {
            changed: 4,
            already: 0
        }
    );
    assert_eq!(
        fs::read(c.join("bin/tool")).unwrap(),
        [0u8, 159, 146, 150, 255]
    );
    assert_eq!(
        fs::metadata(c.join("bin/tool"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    assert_eq!(
        fs::read_link(c.join("bin/link")).unwrap(),
        Path::new("../edit.txt")
    );
    assert_eq!(fs::read_to_string(c.join("edit.txt")).unwrap(), "new");
    assert!(!c.join("gone").exists());
    // Twice changes nothing.
    assert_eq!(
        bundle.apply(c).unwrap().unwrap(),
        Applied {
            changed: 0,
            already: 4
        }
    );
}

#[test]
fn conflicts_are_named_and_nothing_is_written() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    fs::write(w.join("a.txt"), "one").unwrap();
    let before = snapshot(w);
    fs::write(w.join("a.txt"), "two").unwrap();
    fs::write(w.join("new.txt"), "fresh").unwrap();
    let out = tempfile::tempdir().unwrap();
    let out = out.path().join("b.hxb");
    make(w, &out, &before);
    let bundle = Bundle::read(&out).unwrap();

    let other = tempfile::tempdir().unwrap();
    let o = other.path();
    fs::write(o.join("a.txt"), "someone else's").unwrap();
    fs::write(o.join("new.txt"), "not fresh").unwrap();
    let conflicts = bundle.apply(o).unwrap().unwrap_err();
    let named: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
    assert_eq!(
        named,
        [
            "a.txt: changed since the bundle's phase started from it",
            "new.txt: exists already, with other contents"
        ]
    );
    assert_eq!(
        fs::read_to_string(o.join("a.txt")).unwrap(),
        "someone else's"
    );
}

#[test]
fn a_path_that_leaves_the_workspace_or_enters_git_is_refused() {
    for bad in ["../x", "/etc/passwd", "a/../../x", ".git/config", ""] {
        assert!(safe_path(bad).is_err(), "{bad}");
    }
    assert!(safe_path("a/b.txt").is_ok());
}

#[test]
fn a_symlink_that_leads_out_of_the_workspace_is_neither_written_nor_read() {
    for (path, target, inside) in [
        ("a/link", "../b.txt", true),
        ("a/b/link", "../../c/./d", true),
        ("link", "b.txt", true),
        ("link", "/etc/passwd", false),
        ("link", "../outside", false),
        ("a/link", "../../outside", false),
        ("a/link", "../a/../../x", false),
    ] {
        assert_eq!(
            stays_inside(path, target.as_bytes()),
            inside,
            "{path} -> {target}"
        );
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let before = snapshot(w);
    std::os::unix::fs::symlink("/etc/passwd", w.join("out.txt")).unwrap();
    let after = snapshot(w);
    let phase_dir = tempfile::tempdir().unwrap();
    let out = phase_dir.path().join("b.hxb");
    let err = create(
        &out,
        &Source {
            workspace: w,
            before: &before,
            changes: &before.diff(&after),
            pipeline: "p",
            phase: "code",
            run_id: "r1",
            attempt: 1,
            phase_dir: phase_dir.path(),
            journal: &phase_dir.path().join("none.jsonl"),
        },
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "out.txt is a symlink to `/etc/passwd`, which leads outside the workspace: a bundle carries no such link"
    );

    // A bundle made elsewhere with such a link is refused as a whole.
    let mut builder = tar::Builder::new(fs::File::create(&out).unwrap());
    let target = b"../../home/someone/.ssh/authorized_keys";
    let manifest = Manifest {
        format: FORMAT.to_owned(),
        version: VERSION,
        pipeline: "p".to_owned(),
        phase: "code".to_owned(),
        run_id: "r1".to_owned(),
        attempt: 1,
        files: vec![FileChange {
            path: "keys".to_owned(),
            change: ChangeKind::Created,
            before: None,
            after: Some(FileAfter {
                kind: FileKind::Symlink,
                mode: 0,
                hash: hex(&blake3::hash(target)),
                size: target.len() as u64,
            }),
        }],
    };
    let json = serde_json::to_vec(&manifest).unwrap();
    append_bytes(&mut builder, MANIFEST, 0o644, &json).unwrap();
    let mut link = write::header(tar::EntryType::Symlink, 0o777, 0);
    builder
        .append_link(
            &mut link,
            "files/keys",
            Path::new(std::ffi::OsStr::from_bytes(target)),
        )
        .unwrap();
    builder.finish().unwrap();
    drop(builder);
    let err = Bundle::read(&out).unwrap_err().to_string();
    assert!(err.contains("keys is a symlink to `../../home"), "{err}");
}

#[test]
fn another_format_or_version_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.hxb");
    let mut builder = tar::Builder::new(fs::File::create(&path).unwrap());
    let text = br#"{"format":"helixflow-bundle","version":9}"#;
    append_bytes(&mut builder, MANIFEST, 0o644, text).unwrap();
    builder.finish().unwrap();
    drop(builder);
    let err = Bundle::read(&path).unwrap_err().to_string();
    assert!(err.contains("format version 9"), "{err}");
    fs::write(&path, "not a tar").unwrap();
    assert!(Bundle::read(&path).is_err());
}
