//! The github format: GitHub Actions workflow commands, one line per diagnostic.

use std::io::{self, Write};

use super::{Range, message_with_help};
use crate::diagnostics::{Diagnostic, Sources};

pub(super) fn render_github(
    diagnostics: &[Diagnostic],
    sources: &Sources,
    out: &mut dyn Write,
) -> io::Result<()> {
    for diagnostic in diagnostics {
        writeln!(out, "{}", github_command(diagnostic, sources))?;
    }
    Ok(())
}

/// `::error file=…,line=…::message`, escaped as GitHub's workflow commands require.
fn github_command(diagnostic: &Diagnostic, sources: &Sources) -> String {
    let file = sources.get(diagnostic.span.file);
    let range = Range::of(file, diagnostic.span);
    format!(
        "::{} file={},line={},col={},endLine={},endColumn={},title={}::{}",
        diagnostic.severity.as_str(),
        escape_property(&file.path.display().to_string()),
        range.line,
        range.column,
        range.end_line,
        range.end_column,
        escape_property(diagnostic.code()),
        escape_data(&message_with_help(diagnostic)),
    )
}

/// Escapes a command's message, where only `%` and line breaks are special.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property value, where `:` and `,` would also end the value.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::super::Format;
    use super::super::tests::render_to_string;
    use crate::diagnostics::rules::UNUSED_AGENT;
    use crate::diagnostics::{Diagnostic, Sources, Span};

    #[test]
    fn github_escapes_messages_and_properties() {
        let mut sources = Sources::new();
        let file = sources.add("a,b:c%.kdl", "phase \"é\" {\n");
        let diagnostic = Diagnostic::new(&UNUSED_AGENT, Span::new(file, 10, 1), "50%,\r\nb: c")
            .help("use it, or: remove it");
        assert_eq!(
            render_to_string(Format::Github, &[diagnostic], &sources),
            "::warning file=a%2Cb%3Ac%25.kdl,line=1,col=10,endLine=1,endColumn=11,title=HF604::\
             50%25,%0D%0Ab: c%0Ahelp: use it, or: remove it\n"
        );
    }
}
