//! The entries of `outputs { … }`: `file`, `glob` and `from`.

use kdl::KdlNode;

use super::{Decoder, Origin, escape_problem, int};
use crate::diagnostics::{Diagnostic, Span, rules};
use crate::language::validate::property;
use crate::model::{Output, Spanned};

impl Decoder<'_> {
    pub(super) fn output(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<Spanned<Output>> {
        let first = origin.arg(node, 0)?;
        let output = match node.name().value() {
            "file" => {
                let blank = self.empty(
                    &first,
                    "`file \"\"` names no file",
                    "Give the path of the expected file, relative to the workspace.",
                );
                if !blank && first.value.ends_with('/') && escape_problem(&first.value).is_none() {
                    let folder = first.value.trim_end_matches('/');
                    self.report(
                        Diagnostic::new(
                            &rules::FOLDER_GLOB,
                            first.span,
                            format!(
                                "`file \"{}\"` names a folder; an output is a file",
                                first.value
                            ),
                        )
                        .label("names only the folder")
                        .help(format!(
                            "Name the file itself, or write `glob \"{folder}/**\"` for every file under `{folder}`."
                        )),
                    );
                }
                self.workspace_path(&first);
                Output::File { path: first.value }
            }
            "glob" => {
                self.glob(&first);
                let min_entry = property(node, "min");
                let min = int(min_entry).unwrap_or(1);
                if min == 0 {
                    let span =
                        min_entry.map_or(first.span, |e| Span::from_miette(origin.file, e.span()));
                    self.report(
                        Diagnostic::new(
                            &rules::EMPTY_GLOB_EXPECTATION,
                            span,
                            format!(
                                "`glob \"{}\" min=0` accepts no files at all and always passes",
                                first.value
                            ),
                        )
                        .label("always passes"),
                    );
                }
                Output::Glob {
                    pattern: first.value,
                    min,
                }
            }
            "from" => {
                self.empty(
                    &first,
                    "an empty path names no document",
                    "Give the path of the document that lists the files, e.g. `from \"adr/ADR-042.md\" key=\"files.create\"`.",
                );
                self.workspace_path(&first);
                let key = origin.prop(node, "key")?;
                self.empty(
                    &key,
                    "`key=\"\"` names no front-matter key",
                    "Give the dotted key of the list in the front matter, e.g. `key=\"files.create\"`.",
                );
                Output::From {
                    doc: first.value,
                    key: key.value,
                }
            }
            _ => return None,
        };
        Some(Spanned::new(
            output,
            Span::from_miette(origin.file, node.span()),
        ))
    }
}
