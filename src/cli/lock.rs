//! `helixflow lock`: pin the pipeline's remote imports in its lock, and say what changed.

use super::failure::{Failure, Outcome};
use super::imports::{ImportArgs, settled, write};
use super::input;
use crate::language::{self, Options};
use crate::remote::{self, Lockfile, Resolver, Update};

/// Arguments of `helixflow lock`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<std::path::PathBuf>,
    /// Move pins to the commit their `rev` names now: without a value every pin, with one the
    /// pins of that repository (its URL, or an import's). Write `--update=URL`, or put a bare
    /// `--update` after the pipeline file.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    update: Option<String>,
}

/// `helixflow lock`: resolves every remote import (fetching what the cache lacks), writes the
/// lock and says what changed.
pub(crate) fn run(args: &Args) -> Outcome {
    let path = super::pipeline_path(args.file.clone())?;
    let input = input::read(&path, None)?;
    let update = match args.update.as_deref() {
        None => Update::Nothing,
        Some("") => Update::All,
        Some(url) => Update::Matching(url.to_owned()),
    };
    let resolver = Resolver::new(&input.path, ImportArgs::default().policy(update.clone()));
    let options = Options {
        accept_library: true,
        ..Options::default()
    };
    let compilation = language::compile(&input.path, &input.text, &resolver, options);
    let outcome = resolver.outcome();
    let Some(changes) = settled(&outcome, &compilation) else {
        input::report(&compilation.diagnostics, &compilation.sources);
        return Err(Failure::usage(format!(
            "{} is not written: not every import of {} could be read",
            outcome.path.display(),
            path.display()
        )));
    };
    if let Update::Matching(url) = &update
        && !pins_of(&outcome.new, &update)
    {
        return Err(Failure::usage(format!(
            "--update {url}: no remote import of {} is from this repository",
            path.display()
        )));
    }
    let mut out = write(&outcome, &changes)?;
    if changes.is_empty() {
        let pins = outcome.new.pins.len();
        out.push(if pins == 0 {
            format!("{}: no remote import, no lock", path.display())
        } else {
            format!(
                "{}: up to date ({pins} {} pinned)",
                outcome.path.display(),
                if pins == 1 {
                    "repository"
                } else {
                    "repositories"
                }
            )
        });
    }
    super::emit(&(out.join("\n") + "\n"))
}

/// Whether `--update URL` names a repository the lock pins.
fn pins_of(lock: &Lockfile, update: &Update) -> bool {
    lock.pins.iter().any(|(key, pin)| {
        pin.files.keys().any(|path| {
            update.covers(&remote::Source {
                repository: key.repository.clone(),
                path: path.clone(),
            })
        })
    })
}
