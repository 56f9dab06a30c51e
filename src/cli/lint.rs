//! `helixflow lint`: check pipeline files.

use std::io::Write;
use std::path::PathBuf;

use super::failure::{Failure, Outcome};
use super::input;
use crate::diagnostics::{self, Diagnostic, Format, Sources};

/// Arguments of `helixflow lint`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Pipeline files, or libraries for `import` (agents and templates); `-` reads standard
    /// input.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// How to print the findings.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// The name shown for standard input; relative imports resolve from its folder.
    #[arg(long, value_name = "NAME")]
    stdin_filename: Option<PathBuf>,
    #[command(flatten)]
    imports: super::imports::ImportArgs,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let files = if args.files.is_empty() {
        vec![super::pipeline_path(None)?]
    } else {
        args.files.clone()
    };
    let mut sources = Sources::new();
    let mut found: Vec<Diagnostic> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut origins = Vec::new();
    let mut unreadable = false;
    for file in &files {
        let read = match input::read(file, args.stdin_filename.as_deref()) {
            Ok(read) => read,
            Err(e) => {
                // The other files are linted all the same.
                Failure::usage(e).report();
                unreadable = true;
                continue;
            }
        };
        let compilation = input::compile_for_lint(&read, &args.imports);
        origins.extend(remote_lines(&read.path, &compilation.remote));
        // The files of phases its planners wrote, where they exist, are checked with it.
        let generated = input::generated_for_lint(&read, &compilation);
        for compilation in std::iter::once(compilation).chain(generated) {
            let remap = sources.append(&compilation.sources);
            for diagnostic in compilation.diagnostics {
                let diagnostic = remap.diagnostic(diagnostic);
                // A library imported by several linted files is reported once.
                let key = (
                    diagnostic.rule.code,
                    diagnostic.message.clone(),
                    diagnostic.span.offset,
                    diagnostic.span.len,
                    sources.get(diagnostic.span.file).path.clone(),
                );
                if seen.insert(key) {
                    found.push(diagnostic);
                }
            }
        }
    }
    let stdout = std::io::stdout();
    let color = input::color(&stdout);
    let mut out = stdout.lock();
    if let Err(e) = diagnostics::render(args.format, &found, &sources, color, &mut out)
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(Failure::internal(format!("cannot write the report: {e}")));
    }
    if args.format == Format::Human {
        for line in &origins {
            let _ = writeln!(out, "{line}");
        }
    }
    if args.format == Format::Human && found.is_empty() && !unreadable {
        let plural = if files.len() == 1 { "" } else { "s" };
        let _ = writeln!(
            out,
            "{} file{plural} checked: no problems found",
            files.len()
        );
    }
    let _ = out.flush();
    Ok(if unreadable {
        crate::exit::INVALID
    } else if found.iter().any(Diagnostic::is_error) {
        crate::exit::FAILURE
    } else {
        crate::exit::SUCCESS
    })
}

/// The diagnostics of one pipeline file (or library), as `lint --format json` prints them.
pub(crate) fn as_json(path: &std::path::Path) -> Result<String, String> {
    let read = input::read(path, None)?;
    let compilation = input::compile_for_lint(&read, &super::imports::ImportArgs::READ_ONLY);
    let mut out = Vec::new();
    diagnostics::render(
        Format::Json,
        &compilation.diagnostics,
        &compilation.sources,
        false,
        &mut out,
    )
    .map_err(|e| format!("cannot write the report: {e}"))?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Where each agent and template of `file` read from a git repository came from, one line each.
fn remote_lines(file: &std::path::Path, remote: &crate::model::RemoteDefinitions) -> Vec<String> {
    let kinds = [("agent", &remote.agents), ("template", &remote.templates)];
    kinds
        .into_iter()
        .flat_map(|(kind, found)| {
            found.iter().map(move |(name, origin)| {
                crate::text::one_line(&format!(
                    "{}: {kind} \"{name}\" from {origin}",
                    file.display()
                ))
            })
        })
        .collect()
}
