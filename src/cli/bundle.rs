//! `helixflow bundle apply` and `helixflow bundle show`: a phase's result, carried to another
//! copy of the workspace.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::failure::{Failure, Outcome};
use crate::store::bundle::{Bundle, ChangeKind, FileKind};
use crate::text::{count, one_line};

/// Arguments of `helixflow bundle`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Apply a bundle's changes to a workspace, when it applies cleanly.
    ///
    /// It applies cleanly when every file it modifies or deletes still has the contents the
    /// phase started from, no file it creates exists with other contents, and no folder on the
    /// way is a file or a symlink; a file already as the bundle leaves it is fine (applying
    /// twice changes nothing). Otherwise nothing is written and every conflicting file is named.
    /// Exits 0 when applied (or, with --check, when it would apply), 1 on conflicts, 2 when the
    /// bundle cannot be read.
    Apply(ApplyArgs),
    /// Show what a bundle holds: its phase and run, every changed file, its journal records.
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
struct ApplyArgs {
    /// The bundle file (`<run>/phases/<phase>/bundle.hxb`).
    file: PathBuf,
    /// Only check that it applies cleanly; write nothing.
    #[arg(long)]
    check: bool,
    /// The workspace to apply it to.
    #[arg(long, short = 'C', value_name = "DIR", default_value = ".")]
    workspace: PathBuf,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// The bundle file.
    file: PathBuf,
    /// Print the manifest as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &Args) -> Outcome {
    match &args.command {
        Command::Apply(args) => apply(args),
        Command::Show(args) => show(args),
    }
}

fn apply(args: &ApplyArgs) -> Outcome {
    let bundle = read(&args.file)?;
    if !args.workspace.is_dir() {
        return Err(Failure::usage(format!(
            "no folder {}",
            one_line(&args.workspace.display().to_string())
        )));
    }
    let phase = one_line(&bundle.manifest.phase);
    let workspace = one_line(&args.workspace.display().to_string());
    let result = if args.check {
        bundle.check(&args.workspace).map(|conflicts| {
            if conflicts.is_empty() {
                Ok(None)
            } else {
                Err(conflicts)
            }
        })
    } else {
        bundle.apply(&args.workspace).map(|r| r.map(Some))
    };
    match result {
        Err(e) => Err(Failure::internal(format!(
            "cannot apply the bundle of phase \"{phase}\" to {workspace}: {}; nothing was changed",
            one_line(&e.to_string())
        ))),
        Ok(Err(conflicts)) => {
            let mut text = format!(
                "the bundle of phase \"{phase}\" does not apply cleanly to {workspace}: {}",
                count(conflicts.len(), "conflict", "conflicts"),
            );
            for conflict in &conflicts {
                let _ = write!(text, "\n  {}", one_line(&conflict.to_string()));
            }
            Err(Failure::failed(text))
        }
        Ok(Ok(None)) => super::emit(&format!(
            "the bundle of phase \"{phase}\" applies cleanly to {workspace} ({})\n",
            count(bundle.manifest.files.len(), "file", "files"),
        )),
        Ok(Ok(Some(applied))) => {
            let mut line = format!(
                "applied the bundle of phase \"{phase}\" to {workspace}: {} changed",
                count(applied.changed, "file", "files"),
            );
            if applied.already > 0 {
                let _ = write!(line, ", {} already as it leaves them", applied.already);
            }
            super::emit(&(line + "\n"))
        }
    }
}

fn show(args: &ShowArgs) -> Outcome {
    let bundle = read(&args.file)?;
    let m = &bundle.manifest;
    if args.json {
        let json = serde_json::to_string_pretty(m)
            .map_err(|e| Failure::internal(format!("cannot serialize the manifest: {e}")))?;
        return super::emit(&(json + "\n"));
    }
    let mut out = format!(
        "bundle of phase \"{}\" (pipeline {}, run {}, attempt {}), format {} version {}\n",
        one_line(&m.phase),
        one_line(&m.pipeline),
        one_line(&m.run_id),
        m.attempt,
        one_line(&m.format),
        m.version
    );
    if m.files.is_empty() {
        out.push_str("no files changed\n");
    }
    for file in &m.files {
        let change = match file.change {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        };
        let what = match &file.after {
            Some(after) if after.kind == FileKind::Symlink => format!(
                "symlink to {}",
                one_line(&String::from_utf8_lossy(
                    bundle.link_target(&file.path).unwrap_or_default()
                ))
            ),
            Some(after) => format!(
                "{:o}, {}",
                after.mode,
                count(after.size as usize, "byte", "bytes")
            ),
            None => String::new(),
        };
        let _ = writeln!(out, "{change:<9} {}  {what}", one_line(&file.path));
    }
    let events = bundle.events;
    let _ = writeln!(
        out,
        "journal: {}, {} of the phase's folder",
        count(events, "event", "events"),
        count(bundle.phase_files.len(), "file", "files"),
    );
    super::emit(&out)
}

/// The bundle at `path`, or why it cannot be used.
fn read(path: &std::path::Path) -> Result<Bundle, Failure> {
    Bundle::read(path).map_err(|e| Failure::usage(one_line(&e.to_string())))
}
