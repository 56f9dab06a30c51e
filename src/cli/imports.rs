//! The remote imports of the pipeline a command works on: `--locked` and `--offline`, and the
//! lock, written (or, with `--locked`, checked) once a compilation has followed every import.

use std::io::Write as _;
use std::path::Path;

use crate::diagnostics::{Diagnostic, Span, rules};
use crate::language::loader::{Answer, Recording};
use crate::language::{self, Compilation, Options};
use crate::remote::{self, Change, Network, Outcome, Policy, Resolver, Update};

/// How the remote imports of a pipeline are resolved.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ImportArgs {
    /// Fail when the lock of the pipeline's remote imports (helixflow.lock beside it) is missing
    /// or would change, instead of writing it: for CI.
    #[arg(long)]
    pub locked: bool,
    /// Resolve remote imports from the lock and the import cache only: git is never asked.
    #[arg(long)]
    pub offline: bool,
}

impl ImportArgs {
    /// For a reader that must change nothing (the MCP server): never fetch, never write the
    /// lock; an import the lock and the cache do not hold is an error saying so.
    pub(crate) const READ_ONLY: ImportArgs = ImportArgs {
        locked: true,
        offline: true,
    };

    /// The policy of these arguments, moving the pins `update` names.
    pub(crate) fn policy(&self, update: Update) -> Policy {
        Policy {
            network: if self.offline {
                Network::Offline
            } else {
                Network::Allowed
            },
            locked: self.locked,
            update,
        }
    }
}

/// Compiles `text`, the pipeline `path`, with its remote imports resolved as `args` allow; then
/// writes the lock when it changed (not for a file read from standard input, `from_stdin`), or,
/// with `--locked`, reports that it would change.
pub(crate) fn compile(
    path: &Path,
    text: &str,
    from_stdin: bool,
    options: Options,
    args: &ImportArgs,
) -> Compilation {
    compile_recorded(path, text, from_stdin, options, args).0
}

/// [`compile`], with every question the compilation asked the file system and the remote
/// imports, and its answer (what the compiled pipeline's cache is keyed by); `None` instead when
/// the lock should have been written and could not be (a compilation to do again next time).
pub(crate) fn compile_recorded(
    path: &Path,
    text: &str,
    from_stdin: bool,
    options: Options,
    args: &ImportArgs,
) -> (Compilation, Option<Vec<Answer>>) {
    let resolver = Resolver::new(path, args.policy(Update::Nothing));
    let recording = Recording::new(&resolver);
    let mut compilation = language::compile(path, text, &recording, options);
    let outcome = resolver.outcome();
    let mut locked = true;
    if let Some(changes) = settled(&outcome, &compilation) {
        if args.locked {
            stale_lock(&outcome, &changes, &mut compilation);
        } else if !from_stdin {
            match write(&outcome, &changes) {
                Ok(lines) => {
                    for line in lines {
                        say!("{line}");
                    }
                }
                Err(e) => {
                    locked = false;
                    say!("warning: {e}; the commands go on with what was resolved");
                }
            }
        }
    }
    (compilation, locked.then(|| recording.answers()))
}

/// What changes in the lock, when the compilation followed every import (nothing that could
/// hide one failed) and the lock it started from could be read; `None` otherwise, when the lock
/// must be left as it is.
pub(crate) fn settled(outcome: &Outcome, compilation: &Compilation) -> Option<Vec<Change>> {
    let unread_lock = outcome.text.is_some() && outcome.old.is_none();
    if unread_lock || !followed_every_import(compilation) {
        return None;
    }
    let old = outcome.old.clone().unwrap_or_default();
    Some(remote::changes(&old, &outcome.new))
}

/// Whether no file failed to parse and no import failed to load.
fn followed_every_import(compilation: &Compilation) -> bool {
    let hiding = [
        &rules::KDL_SYNTAX,
        &rules::UNBALANCED_BRACES,
        &rules::PARSE_BUDGET,
        &rules::IMPORT_NOT_FOUND,
        &rules::IMPORT_CYCLE,
        &rules::UNPINNED_IMPORT,
        &rules::INVALID_REMOTE_IMPORT,
        &rules::REPOSITORY_UNREACHABLE,
        &rules::UNKNOWN_REV,
        &rules::FILE_MISSING_AT_COMMIT,
        &rules::LOCK_MISMATCH,
        &rules::IMPORT_HASH_MISMATCH,
        &rules::IMPORT_CACHE_UNWRITABLE,
        &rules::IMPORT_NOT_CACHED,
    ];
    !compilation
        .diagnostics
        .iter()
        .any(|d| d.is_error() && hiding.contains(&d.rule))
}

/// `--locked` and a lock that would change: an error in the lock file, saying what would change.
fn stale_lock(outcome: &Outcome, changes: &[Change], compilation: &mut Compilation) {
    if changes.is_empty() {
        return;
    }
    let name = outcome.path.display().to_string();
    let text = outcome.text.clone().unwrap_or_default();
    let span = changes
        .iter()
        .find_map(|change| match change {
            Change::Removed { key, .. } | Change::Files { key, .. } => {
                outcome.old.as_ref()?.spans.get(key).copied()
            }
            _ => None,
        })
        .unwrap_or((0, 0));
    let file = compilation.sources.add(&outcome.path, text.as_str());
    let what: Vec<String> = changes
        .iter()
        .map(|c| crate::text::one_line(&c.to_string()))
        .collect();
    let message = if outcome.text.is_none() {
        format!("there is no {name}, and `--locked` forbids writing it")
    } else {
        format!(
            "{name} does not match the pipeline, and `--locked` forbids changing it: {}",
            what.join("; ")
        )
    };
    compilation.diagnostics.push(
        Diagnostic::new(
            &rules::LOCK_MISMATCH,
            Span::new(file, span.0, span.1),
            message,
        )
        .label("would change")
        .help(format!(
            "Run `helixflow lock` and commit {name}: the lock holds the pipeline's pins, and CI only checks them."
        )),
    );
}

/// Writes the lock (or removes it when no remote import is left), and says what changed, one
/// line per change.
pub(crate) fn write(outcome: &Outcome, changes: &[Change]) -> Result<Vec<String>, String> {
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    let name = outcome.path.display().to_string();
    let written = if outcome.new.pins.is_empty() {
        std::fs::remove_file(&outcome.path)
    } else {
        replace(&outcome.path, &outcome.new.render())
    };
    if let Err(e) = written {
        return Err(format!("cannot write {name}: {e}"));
    }
    if outcome.new.pins.is_empty() {
        return Ok(vec![format!("{name}: removed, no remote import is left")]);
    }
    // A pin's URL and files come from the lock file too: one clean line each.
    Ok(changes
        .iter()
        .map(|c| crate::text::one_line(&format!("{name}: {c}")))
        .collect())
}

/// Writes `text` to `path` through a synced temporary file beside it and a rename.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
    let folder = folder.unwrap_or(Path::new("."));
    let mut temporary = tempfile::Builder::new()
        .prefix(".helixflow-lock-")
        .suffix(".tmp")
        .tempfile_in(folder)?;
    temporary.write_all(text.as_bytes())?;
    temporary.as_file().sync_all()?;
    temporary.persist(path).map_err(|e| e.error)?;
    if let Ok(folder) = std::fs::File::open(folder) {
        let _ = folder.sync_all();
    }
    Ok(())
}
