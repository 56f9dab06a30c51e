//! `helixflow lint`: check pipeline files.

use std::io::Write;
use std::path::PathBuf;

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
}

pub(crate) fn run(args: &Args) -> i32 {
    let files = if args.files.is_empty() {
        match super::pipeline_path(None) {
            Ok(path) => vec![path],
            Err(e) => return input::fail(&e),
        }
    } else {
        args.files.clone()
    };
    let mut sources = Sources::new();
    let mut found: Vec<Diagnostic> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut unreadable = false;
    for file in &files {
        let read = match input::read(file, args.stdin_filename.as_deref()) {
            Ok(read) => read,
            Err(e) => {
                say!("error: {e}");
                unreadable = true;
                continue;
            }
        };
        let compilation = input::compile_for_lint(&read);
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
        say!("error: cannot write the report: {e}");
        return crate::exit::INTERNAL;
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
    if unreadable {
        crate::exit::INVALID
    } else if found.iter().any(Diagnostic::is_error) {
        crate::exit::FAILURE
    } else {
        crate::exit::SUCCESS
    }
}
