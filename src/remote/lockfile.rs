//! `helixflow.lock`: for each repository and `rev` a pipeline imports from, the commit it was
//! resolved to and the SHA-256 of every file read from it. Written by helixflow, read by people in
//! a diff, so its format is stable: KDL, one `repository` per repository and `rev`, sorted, one
//! line per file, sorted.
//!
//! ```kdl
//! // helixflow.lock: …
//! version 1
//! pipeline "pipeline.kdl"
//!
//! repository "git+https://github.com/acme/lib.git" rev="v1.4.0" {
//!     commit "3f2c1a9…"
//!     file "agents.kdl" sha256="9b74c9897bac770ffc029102a200c5de…"
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::source::is_full_sha;

/// The format version written, and the only one read.
pub(crate) const VERSION: i128 = 1;

/// The lock file of the pipeline (or library) `file`: `helixflow.lock` in its folder for the
/// files helixflow finds by itself (`helixflow.kdl`, `pipeline.kdl`), `NAME.helixflow.lock` for
/// another `NAME.kdl`, so that two pipelines of one folder each have their own.
pub(crate) fn path_for(file: &Path) -> PathBuf {
    let folder = file.parent().map(Path::to_owned).unwrap_or_default();
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem.is_empty() || stem == "helixflow" || stem == "pipeline" {
        folder.join("helixflow.lock")
    } else {
        folder.join(format!("{stem}.helixflow.lock"))
    }
}

/// A repository and the `rev` written for it: what one pin is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    /// The repository, as written (`git+https://…/lib.git`).
    pub repository: String,
    /// The `rev` as written.
    pub rev: String,
}

/// One pin: the commit, and the files read from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Pin {
    /// The full commit id.
    pub commit: String,
    /// SHA-256 (hex) of each file read, by its path in the repository.
    pub files: BTreeMap<String, String>,
}

/// The whole lock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Lockfile {
    /// The file name of the pipeline it pins (two pipelines of a folder could otherwise take
    /// each other's lock).
    pub pipeline: String,
    /// The pins.
    pub pins: BTreeMap<Key, Pin>,
    /// Where each pin is written in the file it was read from (byte offset and length).
    pub spans: BTreeMap<Key, (usize, usize)>,
}

/// A lock file that cannot be read: what is wrong, and where (byte offset and length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockError {
    /// What is wrong.
    pub message: String,
    /// Where.
    pub span: (usize, usize),
}

impl Lockfile {
    /// Reads a lock file's text.
    pub(crate) fn parse(text: &str) -> Result<Lockfile, LockError> {
        let document = kdl::KdlDocument::parse_v2(text).map_err(|e| {
            let first = e.diagnostics.first();
            LockError {
                message: format!(
                    "it is not valid KDL: {}",
                    first
                        .and_then(|d| d.message.clone())
                        .unwrap_or_else(|| "a syntax error".to_owned())
                ),
                span: first.map_or((0, 0), |d| (d.span.offset(), d.span.len())),
            }
        })?;
        let mut lock = Lockfile::default();
        let mut version = None;
        for node in document.nodes() {
            let span = (node.span().offset(), node.span().len());
            let fail = |message: String| LockError { message, span };
            match node.name().value() {
                "version" => version = node.get(0).and_then(kdl::KdlValue::as_integer),
                "pipeline" => {
                    string(node.get(0))
                        .ok_or_else(|| {
                            fail("`pipeline` needs the pipeline's file name".to_owned())
                        })?
                        .clone_into(&mut lock.pipeline);
                }
                "repository" => {
                    let (key, pin) = repository(node).map_err(fail)?;
                    if lock.pins.contains_key(&key) {
                        return Err(fail(format!(
                            "{} rev \"{}\" is pinned twice",
                            key.repository, key.rev
                        )));
                    }
                    lock.spans.insert(key.clone(), span);
                    lock.pins.insert(key, pin);
                }
                other => return Err(fail(format!("`{other}` is not part of a lock file"))),
            }
        }
        match version {
            Some(VERSION) if lock.pipeline.is_empty() => Err(LockError {
                message: "it has no `pipeline` line".to_owned(),
                span: (0, 0),
            }),
            Some(VERSION) => Ok(lock),
            Some(other) => Err(LockError {
                message: format!(
                    "it is a lock of version {other}; this helixflow reads version {VERSION}"
                ),
                span: (0, 0),
            }),
            None => Err(LockError {
                message: "it has no `version 1` line".to_owned(),
                span: (0, 0),
            }),
        }
    }

    /// The lock as written to its file.
    pub(crate) fn render(&self) -> String {
        let mut out = format!(
            "// The commit of every remote import of the pipeline and the SHA-256 of every file\n\
             // read from it. Written by helixflow (`helixflow lock --update` moves a pin); commit it.\n\
             version {VERSION}\npipeline {}\n",
            quote(&self.pipeline)
        );
        for (key, pin) in &self.pins {
            let _ = write!(
                out,
                "\nrepository {} rev={} {{\n    commit {}\n",
                quote(&key.repository),
                quote(&key.rev),
                quote(&pin.commit)
            );
            for (path, sha) in &pin.files {
                let _ = writeln!(out, "    file {} sha256={}", quote(path), quote(sha));
            }
            out.push_str("}\n");
        }
        out
    }
}

fn string(value: Option<&kdl::KdlValue>) -> Option<&str> {
    value.and_then(kdl::KdlValue::as_string)
}

fn repository(node: &kdl::KdlNode) -> Result<(Key, Pin), String> {
    let repository = string(node.get(0)).ok_or("a `repository` needs its URL")?;
    let rev = string(node.get("rev")).ok_or("a `repository` needs `rev=`")?;
    let mut pin = Pin::default();
    for child in node
        .children()
        .map(kdl::KdlDocument::nodes)
        .unwrap_or_default()
    {
        match child.name().value() {
            "commit" => {
                let commit = string(child.get(0)).unwrap_or_default();
                if !is_full_sha(commit) {
                    return Err(format!("`{commit}` is not a full commit id"));
                }
                commit.clone_into(&mut pin.commit);
            }
            "file" => {
                let path = string(child.get(0)).ok_or("a `file` needs its path")?;
                let sha = string(child.get("sha256")).unwrap_or_default();
                if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!("the `sha256` of `{path}` is not a SHA-256 in hex"));
                }
                pin.files.insert(path.to_owned(), sha.to_ascii_lowercase());
            }
            other => return Err(format!("`{other}` is not part of a `repository`")),
        }
    }
    if pin.commit.is_empty() {
        return Err(format!("{repository} rev \"{rev}\" has no `commit`"));
    }
    let key = Key {
        repository: repository.to_owned(),
        rev: rev.to_owned(),
    };
    Ok((key, pin))
}

/// A KDL v2 quoted string: `"`, `\` and every character KDL does not allow as it is escaped.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'
                    | '\u{85}' | '\u{2028}' | '\u{2029}') =>
            {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One difference between two locks, as `helixflow lock` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// A new pin.
    Added { key: Key, commit: String },
    /// A pin no import uses any more.
    Removed { key: Key, commit: String },
    /// A pin that moved to another commit, with the files whose content changed.
    Moved {
        key: Key,
        old: String,
        new: String,
        files: Vec<String>,
    },
    /// Files read from a pin that did not move, added or no longer read.
    Files {
        key: Key,
        added: Vec<String>,
        removed: Vec<String>,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |key: &Key| format!("{} rev \"{}\"", key.repository, key.rev);
        match self {
            Change::Added { key, commit } => write!(f, "added {} at {}", name(key), short(commit)),
            Change::Removed { key, commit } => {
                write!(f, "removed {} (was {})", name(key), short(commit))
            }
            Change::Moved {
                key,
                old,
                new,
                files,
            } => {
                write!(f, "moved {}: {} → {}", name(key), short(old), short(new))?;
                if files.is_empty() {
                    f.write_str(" (no file read from it changed)")
                } else {
                    write!(f, " (changed: {})", files.join(", "))
                }
            }
            Change::Files {
                key,
                added,
                removed,
            } => {
                write!(f, "{}: ", name(key))?;
                let mut parts = Vec::new();
                if !added.is_empty() {
                    parts.push(format!("now reads {}", added.join(", ")));
                }
                if !removed.is_empty() {
                    parts.push(format!("no longer reads {}", removed.join(", ")));
                }
                f.write_str(&parts.join("; "))
            }
        }
    }
}

/// A commit id as people read it: its first 12 characters.
pub(crate) fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// What changed from `old` to `new`, pin by pin.
pub(crate) fn changes(old: &Lockfile, new: &Lockfile) -> Vec<Change> {
    let mut out = Vec::new();
    for (key, pin) in &new.pins {
        let Some(before) = old.pins.get(key) else {
            out.push(Change::Added {
                key: key.clone(),
                commit: pin.commit.clone(),
            });
            continue;
        };
        if before.commit != pin.commit {
            let files = pin
                .files
                .iter()
                .filter(|(path, sha)| before.files.get(*path) != Some(*sha))
                .map(|(path, _)| path.clone())
                .collect();
            out.push(Change::Moved {
                key: key.clone(),
                old: before.commit.clone(),
                new: pin.commit.clone(),
                files,
            });
            continue;
        }
        let added: Vec<String> = pin
            .files
            .keys()
            .filter(|p| !before.files.contains_key(*p))
            .cloned()
            .collect();
        let removed: Vec<String> = before
            .files
            .keys()
            .filter(|p| !pin.files.contains_key(*p))
            .cloned()
            .collect();
        if !added.is_empty() || !removed.is_empty() {
            out.push(Change::Files {
                key: key.clone(),
                added,
                removed,
            });
        }
    }
    for (key, pin) in &old.pins {
        if !new.pins.contains_key(key) {
            out.push(Change::Removed {
                key: key.clone(),
                commit: pin.commit.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Lockfile {
        let mut lock = Lockfile {
            pipeline: "pipeline.kdl".into(),
            ..Lockfile::default()
        };
        let mut pin = Pin {
            commit: "ab".repeat(20),
            ..Pin::default()
        };
        pin.files.insert("agents.kdl".into(), "0".repeat(64));
        pin.files
            .insert("weird \"name\"\n.kdl".into(), "1".repeat(64));
        lock.pins.insert(
            Key {
                repository: "git+file:///srv/lib.git".into(),
                rev: "v1".into(),
            },
            pin,
        );
        lock
    }

    #[test]
    fn reads_what_it_writes() {
        let lock = sample();
        let text = lock.render();
        let read = Lockfile::parse(&text).unwrap();
        assert_eq!(read.pins, lock.pins);
        assert_eq!(read.pipeline, "pipeline.kdl");
        assert_eq!(read.render(), text);
        assert!(text.contains("    file \"agents.kdl\" sha256=\"000"));
    }

    #[test]
    fn refuses_what_it_did_not_write() {
        for bad in [
            "version 2",
            "repository \"x\" rev=\"v1\" { commit \"ab\" }\nversion 1",
            "version 1\nrepository \"x\" rev=\"v1\" { }",
            "version 1\nfoo",
            "version 1\nrepository \"x\" rev=\"v1\" { commit \"abababababababababababababababababababab\" }",
            "version 1\nrepository \"x\" {",
        ] {
            assert!(Lockfile::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_its_file_after_the_pipeline() {
        assert_eq!(
            path_for(Path::new("ci/pipeline.kdl")),
            Path::new("ci/helixflow.lock")
        );
        assert_eq!(
            path_for(Path::new("helixflow.kdl")),
            Path::new("helixflow.lock")
        );
        assert_eq!(
            path_for(Path::new("/x/nightly.kdl")),
            Path::new("/x/nightly.helixflow.lock")
        );
    }

    #[test]
    fn says_what_moved() {
        let old = sample();
        let mut new = old.clone();
        let pin = new.pins.values_mut().next().unwrap();
        pin.commit = "cd".repeat(20);
        pin.files.insert("agents.kdl".into(), "2".repeat(64));
        let changes = changes(&old, &new);
        assert_eq!(
            changes[0].to_string(),
            "moved git+file:///srv/lib.git rev \"v1\": abababababab → cdcdcdcdcdcd (changed: agents.kdl)"
        );
    }
}
