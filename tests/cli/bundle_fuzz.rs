//! The bundle reader under random input. A valid bundle (files created, modified, deleted and a
//! symlink, the journal and a phase folder) is mutated entry by entry — sizes claimed up to
//! 2^40, entry types, names that climb out or reach `.git`, entries duplicated or dropped, the
//! manifest edited — and byte by byte, and given to the real binary: `bundle show`, `bundle apply
//! --check` and `bundle apply` must each answer (exit 0 to 3, no panic) within a minute and in
//! under 100 MB, agree on whether the bundle can be read at all, and a refused `apply` must leave
//! the workspace as it was.
//!
//! `cargo test` runs a fixed number of cases; `PROPTEST_CASES=N` runs more (`.ci/run` does with
//! `HELIXFLOW_FUZZ_CASES` set).

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Value, json};

use crate::common::run_measured;

/// The most memory any command may take on a crafted bundle.
const MEMORY_KIB: u64 = 100 * 1024;
/// Only a hang takes this long.
const HANG: Duration = Duration::from_mins(1);
/// Cases per `cargo test`: three runs of the binary each, about half a second in a debug build.
const CASES: u32 = 24;

fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// One archive entry as it will be written: its header's fields and the bytes after it.
#[derive(Debug, Clone)]
struct Entry {
    name: Vec<u8>,
    kind: u8,
    link: Vec<u8>,
    data: Vec<u8>,
    /// A size for the header other than the data's.
    claimed: Option<u64>,
}

impl Entry {
    fn file(name: &str, data: &[u8]) -> Self {
        Entry {
            name: name.as_bytes().to_vec(),
            kind: b'0',
            link: Vec::new(),
            data: data.to_vec(),
            claimed: None,
        }
    }
}

/// The workspace the bundle is applied to: `a.txt` and `gone.txt`.
const WORKSPACE: &[(&str, &[u8])] = &[("a.txt", b"old\n"), ("gone.txt", b"bye\n")];

fn manifest() -> Value {
    let after = |kind: &str, bytes: &[u8]| json!({"kind": kind, "mode": 0o644, "hash": hash(bytes), "size": bytes.len()});
    json!({
        "format": "helixflow-bundle", "version": 1, "pipeline": "p", "phase": "code",
        "run-id": "r1", "attempt": 1,
        "files": [
            {"path": "a.txt", "change": "modified", "before": hash(b"old\n"),
             "after": after("file", b"new\n")},
            {"path": "dir/b.bin", "change": "created", "after": after("file", &[0, 159, 146, 150, 255])},
            {"path": "gone.txt", "change": "deleted", "before": hash(b"bye\n")},
            {"path": "link", "change": "created", "after": after("symlink", b"a.txt")},
        ]
    })
}

/// A valid bundle of that workspace's change.
fn seed(manifest: &Value) -> Vec<Entry> {
    vec![
        Entry::file("manifest.json", &serde_json::to_vec(manifest).unwrap()),
        Entry::file("files/a.txt", b"new\n"),
        Entry::file("files/dir/b.bin", &[0, 159, 146, 150, 255]),
        Entry {
            name: b"files/link".to_vec(),
            kind: b'2',
            link: b"a.txt".to_vec(),
            data: Vec::new(),
            claimed: None,
        },
        Entry::file(
            "journal/events.jsonl",
            b"{\"event\":\"a\"}\n{\"event\":\"b\"}\n",
        ),
        Entry::file("journal/phase/attempt-1/stdout.log", b"done\n"),
    ]
}

/// A 512-byte GNU header for `name` (cut to 100 bytes; the caller adds a long-name entry).
fn header(name: &[u8], kind: u8, link: &[u8], size: u64) -> [u8; 512] {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_mode(if kind == b'2' { 0o777 } else { 0o644 });
    header.set_size(size);
    let old = header.as_old_mut();
    let n = name.len().min(100);
    old.name[..n].copy_from_slice(&name[..n]);
    let n = link.len().min(100);
    old.linkname[..n].copy_from_slice(&link[..n]);
    header.set_cksum();
    *header.as_bytes()
}

/// The archive's bytes; names over 100 bytes get a GNU long-name entry first.
fn serialize(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    let block = |out: &mut Vec<u8>, name: &[u8], kind: u8, link: &[u8], data: &[u8], size| {
        out.extend_from_slice(&header(name, kind, link, size));
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    };
    for entry in entries {
        if entry.name.len() > 100 {
            let mut long = entry.name.clone();
            long.push(0);
            block(
                &mut out,
                b"././@LongLink",
                b'L',
                b"",
                &long,
                long.len() as u64,
            );
        }
        let size = entry.claimed.unwrap_or(entry.data.len() as u64);
        block(
            &mut out,
            &entry.name,
            entry.kind,
            &entry.link,
            &entry.data,
            size,
        );
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

/// A change to the manifest's JSON.
#[derive(Debug, Clone)]
enum ManifestEdit {
    Size(Index, u64),
    Kind(Index),
    Path(Index, &'static str),
    Change(Index, &'static str),
    Mode(Index, u64),
    Hash(Index),
    Version(u64),
    DuplicateFile(Index),
    DropFile(Index),
}

/// A change to the archive's entries.
#[derive(Debug, Clone)]
enum EntryEdit {
    Claim(Index, u64),
    Kind(Index, u8),
    Rename(Index, &'static str),
    LongName(Index, usize),
    Duplicate(Index),
    Drop(Index),
    Swap(Index, Index),
}

/// A change to the archive's bytes.
#[derive(Debug, Clone)]
enum ByteEdit {
    Flip(Index, u8),
    Truncate(Index),
    Insert(Index, Vec<u8>),
    DuplicateBlock(Index),
}

const SIZES: &[u64] = &[0, 1, 4, 511, 513, 1 << 20, 1 << 30, 1 << 40, 8_589_934_591];
const KINDS: &[u8] = b"0123567KLSgx\0";
const PATHS: &[&str] = &[
    "../x",
    "a/../../x",
    ".GIT/config",
    ".g\u{200c}it/HEAD",
    ".Helixflow/lock",
    "/etc/passwd",
    "a.txt/",
    "zz/.",
    "",
    "dir",
    "a.txt",
    "dir/b.bin/c",
    "x\0y",
];
const NAMES: &[&str] = &[
    "files/../../x",
    "files/.GIT/config",
    "files/a.txt",
    "files/link",
    "files/",
    "manifest.json",
    "journal/events.jsonl",
    "journal/phase/../../x",
    "journal/phase/.git/x",
    "/etc/passwd",
    "other",
];

fn manifest_edit() -> impl Strategy<Value = ManifestEdit> {
    prop_oneof![
        (any::<Index>(), select(SIZES)).prop_map(|(i, n)| ManifestEdit::Size(i, n)),
        any::<Index>().prop_map(ManifestEdit::Kind),
        (any::<Index>(), select(PATHS)).prop_map(|(i, p)| ManifestEdit::Path(i, p)),
        (
            any::<Index>(),
            select(&["created", "modified", "deleted", "renamed"][..])
        )
            .prop_map(|(i, c)| ManifestEdit::Change(i, c)),
        (
            any::<Index>(),
            select(&[0o777, 0o4755, 0o170_777, u64::MAX][..])
        )
            .prop_map(|(i, m)| ManifestEdit::Mode(i, m)),
        any::<Index>().prop_map(ManifestEdit::Hash),
        select(&[0, 2, u64::MAX][..]).prop_map(ManifestEdit::Version),
        any::<Index>().prop_map(ManifestEdit::DuplicateFile),
        any::<Index>().prop_map(ManifestEdit::DropFile),
    ]
}

fn entry_edit() -> impl Strategy<Value = EntryEdit> {
    prop_oneof![
        (any::<Index>(), select(SIZES)).prop_map(|(i, n)| EntryEdit::Claim(i, n)),
        (any::<Index>(), select(KINDS)).prop_map(|(i, k)| EntryEdit::Kind(i, k)),
        (any::<Index>(), select(NAMES)).prop_map(|(i, n)| EntryEdit::Rename(i, n)),
        (any::<Index>(), select(&[101, 4_097, 70_000][..]))
            .prop_map(|(i, n)| EntryEdit::LongName(i, n)),
        any::<Index>().prop_map(EntryEdit::Duplicate),
        any::<Index>().prop_map(EntryEdit::Drop),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| EntryEdit::Swap(a, b)),
    ]
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| ByteEdit::Flip(i, b)),
        1 => any::<Index>().prop_map(ByteEdit::Truncate),
        1 => (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..600))
            .prop_map(|(i, b)| ByteEdit::Insert(i, b)),
        1 => any::<Index>().prop_map(ByteEdit::DuplicateBlock),
    ]
}

fn edit_manifest(manifest: &mut Value, edit: &ManifestEdit) {
    let files = manifest["files"].as_array_mut().unwrap();
    let len = files.len();
    let file = |files: &mut Vec<Value>, i: &Index| -> Option<usize> {
        (!files.is_empty()).then(|| i.index(files.len()))
    };
    match edit {
        ManifestEdit::Size(i, n) => {
            if let Some(i) = file(files, i) {
                files[i]["after"]["size"] = json!(n);
            }
        }
        ManifestEdit::Kind(i) => {
            if let Some(i) = file(files, i) {
                let swapped = if files[i]["after"]["kind"] == "file" {
                    "symlink"
                } else {
                    "file"
                };
                files[i]["after"]["kind"] = json!(swapped);
            }
        }
        ManifestEdit::Path(i, p) => {
            if let Some(i) = file(files, i) {
                files[i]["path"] = json!(p);
            }
        }
        ManifestEdit::Change(i, c) => {
            if let Some(i) = file(files, i) {
                files[i]["change"] = json!(c);
            }
        }
        ManifestEdit::Mode(i, m) => {
            if let Some(i) = file(files, i) {
                files[i]["after"]["mode"] = json!(m);
            }
        }
        ManifestEdit::Hash(i) => {
            if let Some(i) = file(files, i) {
                files[i]["after"]["hash"] = json!(hash(b"something else"));
            }
        }
        ManifestEdit::Version(v) => manifest["version"] = json!(v),
        ManifestEdit::DuplicateFile(i) => {
            if len > 0 {
                let copy = files[i.index(len)].clone();
                files.push(copy);
            }
        }
        ManifestEdit::DropFile(i) => {
            if len > 0 {
                files.remove(i.index(len));
            }
        }
    }
}

fn edit_entries(entries: &mut Vec<Entry>, edit: &EntryEdit) {
    if entries.is_empty() {
        return;
    }
    let len = entries.len();
    match edit {
        EntryEdit::Claim(i, n) => entries[i.index(len)].claimed = Some(*n),
        EntryEdit::Kind(i, k) => entries[i.index(len)].kind = *k,
        EntryEdit::Rename(i, n) => entries[i.index(len)].name = n.as_bytes().to_vec(),
        EntryEdit::LongName(i, n) => {
            entries[i.index(len)].name = format!("files/{}", "n".repeat(*n)).into_bytes();
        }
        EntryEdit::Duplicate(i) => {
            let copy = entries[i.index(len)].clone();
            entries.insert(i.index(len), copy);
        }
        EntryEdit::Drop(i) => {
            entries.remove(i.index(len));
        }
        EntryEdit::Swap(a, b) => entries.swap(a.index(len), b.index(len)),
    }
}

fn edit_bytes(bytes: &mut Vec<u8>, edit: &ByteEdit) {
    if bytes.is_empty() {
        return;
    }
    match edit {
        ByteEdit::Flip(i, b) => {
            let at = i.index(bytes.len());
            bytes[at] ^= b.max(&1);
        }
        ByteEdit::Truncate(i) => bytes.truncate(i.index(bytes.len())),
        ByteEdit::Insert(i, inserted) => {
            let at = i.index(bytes.len() + 1);
            bytes.splice(at..at, inserted.iter().copied());
        }
        ByteEdit::DuplicateBlock(i) => {
            let blocks = bytes.len() / 512;
            if blocks > 0 {
                let at = i.index(blocks) * 512;
                let block = bytes[at..at + 512].to_vec();
                bytes.splice(at..at, block);
            }
        }
    }
}

/// Every path of the workspace with its contents or symlink target, in name order.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push((rel, target.as_os_str().as_encoded_bytes().to_vec()));
            } else if meta.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                folders.push(path);
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Runs one command on the bundle: its exit code, after checking the bounds every answer keeps.
fn answer(dir: &Path, args: &[&str]) -> Result<i32, TestCaseError> {
    let (output, peak) = run_measured(dir, args, b"", HANG);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let code = output.status.code().unwrap_or(-1);
    prop_assert!(!said.contains("panicked"), "{args:?}: {said}");
    prop_assert!((0..=3).contains(&code), "{args:?}: exit {code}: {said}");
    prop_assert!(peak < MEMORY_KIB, "{args:?}: {peak} KiB");
    prop_assert!(said.len() < 1 << 20, "{args:?}: {} bytes", said.len());
    Ok(code)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_bundles_get_a_bounded_answer_and_change_nothing_when_refused(
        manifest_edits in proptest::collection::vec(manifest_edit(), 0..3),
        entry_edits in proptest::collection::vec(entry_edit(), 0..3),
        byte_edits in proptest::collection::vec(byte_edit(), 0..3),
    ) {
        let mut manifest = manifest();
        for edit in &manifest_edits {
            edit_manifest(&mut manifest, edit);
        }
        let mut entries = seed(&manifest);
        for edit in &entry_edits {
            edit_entries(&mut entries, edit);
        }
        let mut bytes = serialize(&entries);
        for edit in &byte_edits {
            edit_bytes(&mut bytes, edit);
        }
        let dir = tempfile::tempdir().unwrap();
        for (path, contents) in WORKSPACE {
            let full = dir.path().join("ws").join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, contents).unwrap();
        }
        std::fs::write(dir.path().join("b.hxb"), &bytes).unwrap();
        let before = tree(&dir.path().join("ws"));

        let show = answer(dir.path(), &["bundle", "show", "b.hxb"])?;
        let check = answer(dir.path(), &["bundle", "apply", "--check", "-C", "ws", "b.hxb"])?;
        prop_assert_eq!(tree(&dir.path().join("ws")), before.clone(), "--check changed the workspace");
        let apply = answer(dir.path(), &["bundle", "apply", "-C", "ws", "b.hxb"])?;
        // One reading of the bundle for all three: unreadable (2) for one is unreadable for all.
        prop_assert_eq!(show == 2, check == 2, "show {} but --check {}", show, check);
        prop_assert_eq!(check == 2, apply == 2, "--check {} but apply {}", check, apply);
        if check == 1 {
            prop_assert_eq!(apply, 1);
        }
        if apply != 0 {
            prop_assert_eq!(tree(&dir.path().join("ws")), before, "a refused apply changed the workspace");
        }
    }
}

/// The seed itself is a valid bundle that applies, so the mutations start from the accepted path.
#[test]
fn the_unmutated_bundle_applies() {
    let dir = tempfile::tempdir().unwrap();
    for (path, contents) in WORKSPACE {
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("ws").join(path), contents).unwrap();
    }
    std::fs::write(dir.path().join("b.hxb"), serialize(&seed(&manifest()))).unwrap();
    let code = answer(dir.path(), &["bundle", "apply", "-C", "ws", "b.hxb"]).unwrap();
    assert_eq!(code, 0);
    let ws = dir.path().join("ws");
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"new\n");
    assert!(!ws.join("gone.txt").exists());
    assert_eq!(
        std::fs::read_link(ws.join("link")).unwrap(),
        Path::new("a.txt")
    );
}
