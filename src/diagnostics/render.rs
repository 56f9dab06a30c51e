//! Renderers: one diagnostic list, many formats. (Being written.)

use std::io::{self, Write};

use super::{Diagnostic, Sources};

/// Output format of `helixflow lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// miette's graphical report; plain text when not a terminal or when NO_COLOR is set.
    Human,
    /// One JSON object per diagnostic.
    Json,
    /// GitHub Actions workflow commands.
    Github,
    /// SARIF 2.1.0.
    Sarif,
}

/// Writes `diagnostics` in `format`. `color` selects the graphical, coloured human output.
pub fn render(
    format: Format,
    diagnostics: &[Diagnostic],
    sources: &Sources,
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let _ = (format, color);
    for d in diagnostics {
        let file = sources.get(d.span.file);
        let (line, col) = file.line_col(d.span.offset);
        writeln!(out, "{}:{line}:{col}: {} {}: {}", file.path.display(), d.severity.as_str(), d.code(), d.message)?;
    }
    Ok(())
}
