//! Prompts: `prompt "…"` and `prompt file="…"` (also `verifier-prompt`), and their template
//! syntax.

use std::path::{Path, PathBuf};

use kdl::KdlNode;

use super::{Decoder, Origin, string_text_span, text_span};
use crate::diagnostics::{Diagnostic, Span, rules};
use crate::language::loader::normalize;
use crate::language::template;
use crate::language::validate::positional;
use crate::model::{Prompt, Spanned};

/// A prompt as written.
#[derive(Debug, Clone)]
pub(crate) struct PromptDecl {
    /// The prompt, at its string or its `file=` value.
    pub prompt: Spanned<Prompt>,
    /// Where the template text itself lies, byte for byte, in a source file: the prompt file, or
    /// the inside of a quoted string without escapes. Places inside the template map onto it.
    pub text: Option<Span>,
}

impl Decoder<'_> {
    /// Checks a prompt template's syntax; `at` maps error offsets back into a source file.
    pub(crate) fn template_syntax(&mut self, text: &str, span: Span, at: Option<Span>) -> bool {
        let Err(e) = template::environment().template_from_str(text) else {
            return true;
        };
        let precise = e
            .range()
            .and_then(|range| text_span(text, at, range))
            .unwrap_or(span);
        let message = e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_owned);
        self.report(
            Diagnostic::new(
                &rules::PROMPT_TEMPLATE_SYNTAX,
                precise,
                format!("invalid prompt template: {message}"),
            )
            .label("template error"),
        );
        false
    }

    /// The template syntax of a whole source file (a prompt file, an included template), checked
    /// and reported the first time only.
    pub(crate) fn syntax_once(&mut self, text: &str, whole: Span) -> bool {
        if let Some(&valid) = self.syntax.get(&whole.file) {
            return valid;
        }
        let valid = self.template_syntax(text, whole, Some(whole));
        self.syntax.insert(whole.file, valid);
        valid
    }

    /// Reads a file a prompt names (through the loader, so an editor's unsaved text counts) and
    /// registers it among the sources, once: its text, shared by every phase that names it, and a
    /// span over the whole of it.
    pub(crate) fn read_source(
        &mut self,
        absolute: &Path,
    ) -> std::io::Result<(std::sync::Arc<str>, Span)> {
        let file = if let Some(file) = self.sources.find(absolute) {
            file
        } else {
            let text = self.loader.read(absolute)?;
            self.sources.add(absolute.to_path_buf(), text)
        };
        let text = std::sync::Arc::clone(&self.sources.get(file).text);
        let whole = Span::new(file, 0, text.len());
        Ok((text, whole))
    }

    /// `prompt "…"` or `prompt file="…"` (also `verifier-prompt`).
    pub(super) fn prompt(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<PromptDecl> {
        if let Some(path) = origin.prop(node, "file") {
            self.workspace_path(&path);
            let absolute = normalize(&self.workspace, Path::new(&path.value));
            return match self.read_source(&absolute) {
                Ok((text, whole)) => {
                    self.syntax_once(&text, whole);
                    Some(PromptDecl {
                        prompt: Spanned::new(
                            Prompt::File {
                                path: PathBuf::from(&path.value),
                                text,
                            },
                            path.span,
                        ),
                        text: Some(whole),
                    })
                }
                Err(e) if crate::language::kdl::limits::is_too_large(&e) => {
                    self.report(crate::language::kdl::limits::refused_file(
                        "the prompt file",
                        &path.value,
                        path.span,
                    ));
                    None
                }
                Err(e) => {
                    let what = if e.kind() == std::io::ErrorKind::NotFound {
                        "does not exist".to_owned()
                    } else if crate::regular::not_regular(&e).is_some() {
                        format!("is {e}")
                    } else {
                        format!("cannot be read: {e}")
                    };
                    self.report(
                        Diagnostic::new(
                            &rules::PROMPT_FILE_MISSING,
                            path.span,
                            format!("prompt file \"{}\" {what}", path.value),
                        )
                        .label(format!("looked for {}", absolute.display())),
                    );
                    None
                }
            };
        }
        let entry = positional(node).next()?;
        let text = origin.string(entry)?;
        let span = origin.span(entry);
        // Error offsets map into the file only where the text is the literal source between quotes.
        let at = string_text_span(entry, &text, span);
        self.template_syntax(&text, span, at);
        Some(PromptDecl {
            prompt: Spanned::new(Prompt::Inline(text), span),
            text: at,
        })
    }
}
