//! The entries of `gates { … }`: one gate of each kind, with the checks of its values.

use kdl::KdlNode;

use super::{Decoder, Origin, int};
use crate::diagnostics::{Diagnostic, Span, rules};
use crate::language::validate::property;
use crate::model::{Gate, GateKind};

impl Decoder<'_> {
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per gate kind: the schema's table, read whole"
    )]
    pub(super) fn gate(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<Gate> {
        let kind_name = node.name().value();
        let args = origin.args(node);
        let kind = match kind_name {
            "syntax" => {
                for glob in &args {
                    self.glob(glob);
                }
                GateKind::Syntax {
                    globs: args.into_iter().map(|a| a.value).collect(),
                }
            }
            "command" => {
                let run = args.into_iter().next()?;
                self.empty(
                    &run,
                    "an empty command runs nothing and exits 0: this gate always passes",
                    "Write the shell command the gate runs, e.g. `command \"pytest -q\"`.",
                );
                let timeout = origin.prop(node, "timeout").and_then(|d| self.duration(&d));
                let cwd = origin.prop(node, "cwd");
                if let Some(cwd) = &cwd {
                    self.empty(
                        cwd,
                        "`cwd=\"\"` names no folder",
                        "Give the folder the command runs in, relative to the workspace, or remove `cwd=`.",
                    );
                    self.workspace_path(cwd);
                }
                let fix = origin.prop(node, "fix");
                if let Some(fix) = &fix {
                    self.empty(
                        fix,
                        "`fix=\"\"` runs nothing: the failing gate is only checked again",
                        "Give the shell command that repairs what the gate checks, or remove `fix=`.",
                    );
                }
                GateKind::Command {
                    run: run.value,
                    timeout,
                    cwd: cwd.map(|c| c.value),
                    fix: fix.map(|f| f.value),
                }
            }
            "matches" | "absent" => {
                let mut args = args.into_iter();
                let (target, pattern) = (args.next()?, args.next()?);
                if target.value != "response" {
                    self.glob(&target);
                }
                if pattern.value.is_empty() {
                    let outcome = if kind_name == "matches" {
                        "this `matches` gate always passes"
                    } else {
                        "this `absent` gate fails on every line"
                    };
                    self.report(
                        Diagnostic::new(
                            &rules::EMPTY_VALUE,
                            pattern.span,
                            format!("an empty pattern matches everywhere: {outcome}"),
                        )
                        .label("empty")
                        .help("Write the regular expression the gate looks for."),
                    );
                }
                self.regex(&pattern);
                let (target, pattern) = (target.value, pattern.value);
                if kind_name == "matches" {
                    GateKind::Matches { target, pattern }
                } else {
                    GateKind::Absent { target, pattern }
                }
            }
            "front-matter" | "sections" => {
                let mut args = args.into_iter();
                let path = args.next()?;
                self.empty(
                    &path,
                    "an empty path names no file",
                    "Give the path of the Markdown document, relative to the workspace.",
                );
                self.workspace_path(&path);
                let what = if kind_name == "front-matter" {
                    "an empty key is in no front matter: this gate always fails"
                } else {
                    "an empty heading is in no document: this gate always fails"
                };
                let rest = args
                    .inspect(|entry| {
                        self.empty(entry, what, "Write the text, or remove the empty entry.");
                    })
                    .map(|a| a.value)
                    .collect();
                if kind_name == "front-matter" {
                    GateKind::FrontMatter {
                        path: path.value,
                        keys: rest,
                    }
                } else {
                    GateKind::Sections {
                        path: path.value,
                        headings: rest,
                    }
                }
            }
            "paths-exist" => {
                let doc = args.into_iter().next()?;
                self.empty(
                    &doc,
                    "an empty path names no document",
                    "Give the path of the document that lists the paths, relative to the workspace.",
                );
                self.workspace_path(&doc);
                let key = origin.prop(node, "key")?;
                self.empty(
                    &key,
                    "`key=\"\"` names no front-matter key",
                    "Give the dotted key of the list in the front matter, e.g. `key=\"files.create\"`.",
                );
                GateKind::PathsExist {
                    doc: doc.value,
                    key: key.value,
                }
            }
            "changes" => GateKind::Changes {
                min: int(property(node, "min")).unwrap_or(1),
            },
            "approval" => GateKind::Approval {
                prompt: origin.prop(node, "prompt").map(|p| p.value),
            },
            _ => return None,
        };
        let name = origin.prop(node, "name");
        if let Some(name) = &name {
            self.empty(
                name,
                "`name=\"\"` leaves the gate without a name in reports and feedback",
                &format!("Name the gate, or remove `name=` to have it named `{kind_name}`."),
            );
        }
        let name = name.map_or_else(|| kind_name.to_owned(), |n| n.value);
        Some(Gate {
            name,
            kind,
            span: Span::from_miette(origin.file, node.span()),
        })
    }
}
