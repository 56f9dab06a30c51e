//! The checked, compiled pipeline, kept in the state folder (`cache/pipeline-<key>.json`), so
//! that a command finding the pipeline unchanged does not check and compile it again.
//!
//! A compilation is a function of the pipeline file's path and text, helixflow's own code, and
//! the answers to the questions it asked the file system through its loader (every import and
//! prompt file it read, by content hash; every file and folder it looked for; the import search
//! path; whether the workspace is in git; each remote import's cached file, commit and content
//! hash): [`crate::language::loader::Answer`]. An entry holds all of them, and is used only when
//! every question is answered the same way again (a remote import by the lock and the import
//! cache alone: a hit never fetches) and the pipeline file's text, its lock file
//! (`helixflow.lock`: `helixflow lock --update`, a hand edit or a deleted lock all compile again,
//! so that `--locked` and the lock's rewriting behave as without the cache) and the helixflow
//! binary (its version, size and modification time) are the same. Only compilations without an
//! error are kept, with their warnings: a hit reports them again, from the files they point into
//! as read now (each must still have the content it had, by hash, or the entry is not used). An
//! entry that cannot be read or parsed is no entry: the pipeline is compiled, and the entry
//! written again (through a temporary file and a rename; it is a cache, not a record, and is not
//! synced).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::diagnostics::rules::find_rule;
use crate::diagnostics::{Diagnostic, FileId, Note, Sources, Span};
use crate::language::loader::{Answer, Loader as _, normalize};
use crate::language::{FsLoader, state_location};
use crate::model::{CompiledFrom, Pipeline};
use crate::workspace::FileStat;

/// The folder of the state folder that holds the entries.
const FOLDER: &str = "cache";

/// The largest entry written or read: far above what the front end's input limits compile to,
/// and a bound on what a command reads of a file planted there.
const MAX_BYTES: u64 = 64 << 20;

/// The format of an entry.
const FORMAT: u32 = 3;

/// One cached compilation.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Entry {
    format: u32,
    /// The helixflow that compiled it.
    helixflow: String,
    /// The pipeline file, as the command named it.
    path: PathBuf,
    /// BLAKE3 of the pipeline file's text, in hex.
    text: String,
    /// BLAKE3 of the pipeline's lock file once the compilation wrote it, in hex; `None` when
    /// there is none.
    lock: Option<String>,
    /// Every question the compilation asked, with its answer.
    answers: Vec<Answer>,
    /// The files its warnings point into, with the BLAKE3 of each one's text, in hex.
    files: Vec<(PathBuf, String)>,
    /// Its warnings.
    warnings: Vec<Warning>,
    /// What it compiled to.
    pipeline: Pipeline,
}

/// A warning of a cached compilation, its places given as indexes into the entry's `files`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Warning {
    /// The rule's code.
    rule: String,
    message: String,
    label: String,
    help: String,
    at: Place,
    notes: Vec<(Place, String)>,
}

/// A byte range of one of the entry's files.
#[derive(Clone, Copy, Serialize, Deserialize)]
struct Place {
    file: usize,
    offset: usize,
    len: usize,
}

/// Where the `pipeline.json` a run writes of the pipeline `compiled` in `workspace` is kept, for
/// the next run of the same pipeline to copy rather than serialize again (a pipeline of 1,000
/// phases is a megabyte of JSON): beside its entry, named after it and a key of the two.
pub(crate) fn rendition(compiled: &CompiledFrom, workspace: &Path) -> Option<PathBuf> {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&compiled.digest);
    hasher.update(workspace.as_os_str().as_encoded_bytes());
    let key = hasher.finalize().to_hex();
    let (folder, prefix) = renditions_of(compiled)?;
    Some(folder.join(format!("{prefix}{}.json", &key[..16])))
}

/// Keeps `json` as `rendition` ([`rendition`]) of `compiled`, and removes the renditions of
/// earlier versions of the same pipeline file. A failure is only a copy missed next time.
pub(crate) fn keep_rendition(compiled: &CompiledFrom, rendition: &Path, json: &[u8]) {
    let Some((folder, prefix)) = renditions_of(compiled) else {
        return;
    };
    if let Ok(files) = fs::read_dir(folder) {
        for file in files.filter_map(Result::ok) {
            let name = file.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(&prefix) && name.ends_with(".json") && file.path() != rendition {
                let _ = fs::remove_file(file.path());
            }
        }
    }
    let _ = super::replace_unsynced(rendition, json);
}

/// The folder of the renditions of the pipeline file whose entry `compiled` is, and the start of
/// their names (`run-<entry>-`).
fn renditions_of(compiled: &CompiledFrom) -> Option<(&Path, String)> {
    let entry = compiled.entry.file_stem()?.to_str()?;
    Some((compiled.entry.parent()?, format!("run-{entry}-")))
}

/// A compilation taken from the cache: the pipeline, and its warnings with the files they point
/// into.
pub(crate) struct Hit {
    pub pipeline: Pipeline,
    pub diagnostics: Vec<Diagnostic>,
    pub sources: Sources,
}

/// Where the entry of one pipeline file is.
pub(crate) struct PipelineCache {
    /// The entry's file.
    file: PathBuf,
    /// The state folder it is in: entries are written only where one exists.
    state_dir: PathBuf,
    /// This helixflow: version, and the size and modification time of its binary.
    helixflow: String,
}

impl PipelineCache {
    /// The cache of the pipeline file at `path` (as the command names it), whose text is
    /// `text`: in its state folder, as its `workspace` and `state-dir` say. `None` when this
    /// helixflow's binary cannot be found to tell its build apart.
    pub(crate) fn of(path: &Path, text: &str) -> Option<PipelineCache> {
        let folder = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        };
        let settings = state_location(text);
        let workspace = settings
            .workspace
            .map_or_else(|| folder.clone(), |w| normalize(&folder, Path::new(&w)));
        let state_dir = workspace.join(settings.state_dir.as_deref().unwrap_or(".helixflow"));
        let key = blake3::hash(path.as_os_str().as_encoded_bytes()).to_hex();
        Some(PipelineCache {
            file: state_dir
                .join(FOLDER)
                .join(format!("pipeline-{}.json", &key[..16])),
            state_dir,
            helixflow: build()?,
        })
    }

    /// The pipeline compiled from `path` and `text`, and its warnings, when the entry holds for
    /// it.
    pub(crate) fn load(&self, path: &Path, text: &str) -> Option<Hit> {
        // A regular file only (a FIFO planted there would block), and no larger than an entry
        // is written.
        let bytes = crate::regular::read_within(&self.file, MAX_BYTES).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        let holds = entry.format == FORMAT
            && entry.helixflow == self.helixflow
            && entry.path == path
            && entry.text == hash(text)
            && entry.lock == lock_hash(path)
            && entry.answers.iter().all(|answer| answer.holds(&FsLoader));
        if !holds {
            return None;
        }
        let (diagnostics, sources) = warnings(&entry, path, text)?;
        let mut pipeline = entry.pipeline;
        pipeline.compiled_from = Some(CompiledFrom {
            digest: *blake3::hash(&bytes).as_bytes(),
            entry: self.file.clone(),
        });
        Some(Hit {
            pipeline,
            diagnostics,
            sources,
        })
    }

    /// Keeps a compilation without errors of `path` and `text`, which asked `answers` and found
    /// `diagnostics` (warnings) in `sources`, when the state folder exists, and returns the entry
    /// it wrote. A failure to write is only a cache missed.
    pub(crate) fn save(
        &self,
        path: &Path,
        text: &str,
        answers: Vec<Answer>,
        (diagnostics, sources): (&[Diagnostic], &Sources),
        pipeline: &Pipeline,
    ) -> Option<CompiledFrom> {
        if !self.state_dir.is_dir() || diagnostics.iter().any(Diagnostic::is_error) {
            return None;
        }
        let (files, warnings) = kept_warnings(diagnostics, sources);
        let entry = Entry {
            format: FORMAT,
            helixflow: self.helixflow.clone(),
            path: path.to_owned(),
            text: hash(text),
            lock: lock_hash(path),
            answers,
            files,
            warnings,
            pipeline: pipeline.clone(),
        };
        let json = serde_json::to_vec(&entry).ok()?;
        if json.len() as u64 > MAX_BYTES {
            return None;
        }
        let folder = self.file.parent()?;
        fs::create_dir_all(folder)
            .and_then(|()| super::replace_unsynced(&self.file, &json))
            .ok()?;
        Some(CompiledFrom {
            digest: *blake3::hash(&json).as_bytes(),
            entry: self.file.clone(),
        })
    }
}

/// The entries as a run found them, to remove any that something else wrote while it ran: the
/// run's agents can write the state folder, and an entry made to hold a pipeline with a gate
/// left out would be used by the next run. An entry written or changed between runs (by a
/// person, another tool, or a process that outlived its run) is not noticed, as with the records
/// of passed phases.
#[derive(Debug, Clone)]
pub(crate) struct CacheWatch {
    folder: PathBuf,
    known: Arc<Mutex<Identities>>,
}

impl CacheWatch {
    /// The entries of the state folder `state_dir` as they are now.
    pub(crate) fn new(state_dir: &Path) -> CacheWatch {
        let folder = state_dir.join(FOLDER);
        CacheWatch {
            known: Arc::new(Mutex::new(identities(&folder))),
            folder,
        }
    }

    /// Removes every entry that is new or changed since the run began (silently: a `helixflow
    /// status` beside the run may have written it, and a removed entry only costs a compilation).
    pub(crate) fn sweep(&self) {
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, identity) in identities(&self.folder) {
            if known.get(&name) != Some(&identity) {
                let _ = fs::remove_file(self.folder.join(&name));
            }
        }
    }
}

/// Files by name, with their inode, size, and modification and change times.
type Identities = BTreeMap<std::ffi::OsString, FileStat>;

/// Each file of `folder` with its inode, size and modification and change times.
fn identities(folder: &Path) -> Identities {
    crate::workspace::identities_in(folder, |_| true)
}

/// `diagnostics` as an entry keeps them, with the files of `sources` they point into.
fn kept_warnings(
    diagnostics: &[Diagnostic],
    sources: &Sources,
) -> (Vec<(PathBuf, String)>, Vec<Warning>) {
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let mut index: BTreeMap<FileId, usize> = BTreeMap::new();
    let mut place = |span: Span| {
        let file = *index.entry(span.file).or_insert_with(|| {
            let source = sources.get(span.file);
            files.push((source.path.clone(), hash(&source.text)));
            files.len() - 1
        });
        Place {
            file,
            offset: span.offset,
            len: span.len,
        }
    };
    let warnings = diagnostics
        .iter()
        .map(|d| Warning {
            rule: d.rule.code.to_owned(),
            message: d.message.clone(),
            label: d.label.clone(),
            help: d.help.clone(),
            at: place(d.span),
            notes: d
                .notes
                .iter()
                .map(|note| (place(note.span), note.label.clone()))
                .collect(),
        })
        .collect();
    (files, warnings)
}

/// The warnings an entry keeps, with the files they point into as read now (the pipeline file
/// `path` is `text`); `None` when a file cannot be read or is not as it was, or a rule is no
/// longer known.
fn warnings(entry: &Entry, path: &Path, text: &str) -> Option<(Vec<Diagnostic>, Sources)> {
    let mut sources = Sources::new();
    let mut ids = Vec::with_capacity(entry.files.len());
    for (file, digest) in &entry.files {
        let now = if file == path {
            text.to_owned()
        } else {
            FsLoader.read(file).ok()?
        };
        if hash(&now) != *digest {
            return None;
        }
        ids.push(sources.add(file, now));
    }
    let span = |place: Place| -> Option<Span> {
        Some(Span::new(*ids.get(place.file)?, place.offset, place.len))
    };
    let mut diagnostics = Vec::with_capacity(entry.warnings.len());
    for warning in &entry.warnings {
        let rule = find_rule(&warning.rule)?;
        let mut diagnostic = Diagnostic::new(rule, span(warning.at)?, warning.message.clone());
        diagnostic.label.clone_from(&warning.label);
        diagnostic.help.clone_from(&warning.help);
        for (place, label) in &warning.notes {
            diagnostic.notes.push(Note {
                span: span(*place)?,
                label: label.clone(),
            });
        }
        diagnostics.push(diagnostic);
    }
    Some((diagnostics, sources))
}

/// BLAKE3 of the lock file of the pipeline file `path`, in hex; `None` when there is none (or
/// it cannot be read: then a compilation says why).
fn lock_hash(path: &Path) -> Option<String> {
    let bytes =
        crate::regular::read_capped(&crate::remote::lockfile::path_for(path), MAX_BYTES).ok()?;
    Some(blake3::hash(&bytes).to_hex().to_string())
}

fn hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// This helixflow's build: its version, and the size and modification time of its binary (a
/// rebuild of the same version compiles differently).
pub(super) fn build() -> Option<String> {
    let meta = fs::metadata(std::env::current_exe().ok()?).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some(format!(
        "{} {} {}",
        env!("CARGO_PKG_VERSION"),
        meta.len(),
        modified.as_nanos()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::{Options, compile};

    /// A compiled pipeline read back from its JSON is the same pipeline: it serializes the same,
    /// so its phases' definitions (and fingerprints) are the same too.
    #[test]
    fn every_example_reads_back_as_it_was_compiled() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut seen = 0;
        for entry in fs::read_dir(&examples).unwrap() {
            let path = entry.unwrap().path().join("pipeline.kdl");
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            let compiled = compile(&path, &text, &FsLoader, Options::default())
                .pipeline
                .unwrap();
            let json = serde_json::to_string(&compiled).unwrap();
            let back: Pipeline = serde_json::from_str(&json).unwrap();
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                json,
                "{}",
                path.display()
            );
            seen += 1;
        }
        assert!(seen >= 3, "{seen} examples");
    }
}
