//! `import`: the files a pipeline loads agents and templates from. A local file is resolved
//! relative to the importing file, then on `HELIXFLOW_PATH`; a file of a git repository
//! (`git+https://…//agents.kdl` with `rev=`) is asked of the loader, which reads it at the commit
//! the lock pins; a relative import inside such a file is read from the same repository at the
//! same commit.

use std::path::{Path, PathBuf};

use kdl::{KdlDocument, KdlNode};

use super::compile::{Compiler, RemoteFile, nodes_named};
use super::loader::normalize;
use super::schema::Context;
use super::validate::{Validator, name_span, positional, property, value_span};
use crate::diagnostics::{Diagnostic, FileId, Span, rules};
use crate::model::{RemoteDefinitions, RemoteOrigin};
use crate::remote::{Problem, Source, check_rev, is_remote};

impl Compiler<'_> {
    /// Loads the `import`s of `document`, the file `importer`, depth first.
    pub(super) fn load_imports(&mut self, document: &KdlDocument, importer: &Path, file: FileId) {
        let from_repository = self.remote_files.get(importer).cloned();
        for node in nodes_named(document, "import") {
            let Some(entry) = positional(node).next() else {
                continue;
            };
            let Some(text) = entry.value().as_string() else {
                continue;
            };
            let span = value_span(file, entry);
            let rev = property(node, "rev")
                .and_then(|e| Some((e.value().as_string()?.to_owned(), value_span(file, e))));
            if is_remote(text) {
                self.remote_import(text, rev, node, file, span);
            } else if let Some(importer) = &from_repository {
                self.sibling_import(importer, text, rev.as_ref().map(|r| r.1), span);
            } else {
                if let Some((_, rev_span)) = rev {
                    self.diagnostics.push(local_with_rev(text, rev_span));
                }
                let folder = match importer.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
                    _ => PathBuf::from("."),
                };
                self.local_import(&folder, text, span);
            }
        }
    }

    fn local_import(&mut self, folder: &Path, relative: &str, span: Span) {
        let Some(resolved) = self.resolve_import(folder, relative) else {
            let searched: Vec<String> = std::iter::once(folder.display().to_string())
                .chain(
                    self.loader
                        .search_path()
                        .iter()
                        .map(|p| p.display().to_string()),
                )
                .collect();
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::IMPORT_NOT_FOUND,
                    span,
                    format!("cannot find import \"{relative}\""),
                )
                .label("not found")
                .help(format!(
                    "searched: {} (set HELIXFLOW_PATH to add folders)",
                    searched.join(", ")
                )),
            );
            return;
        };
        if self.in_cycle(&resolved, span) || self.imports.contains(&resolved) {
            return;
        }
        let text = match self.loader.read(&resolved) {
            Ok(text) => text,
            Err(e) if super::kdl::limits::is_too_large(&e) => {
                let name = resolved.display().to_string();
                self.diagnostics
                    .push(super::kdl::limits::refused_file("the import", &name, span));
                return;
            }
            Err(e) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::IMPORT_NOT_FOUND,
                        span,
                        format!("cannot read import {}: {e}", resolved.display()),
                    )
                    .label("unreadable"),
                );
                return;
            }
        };
        self.import_text(&resolved, &text, span);
    }

    fn resolve_import(&self, folder: &Path, relative: &str) -> Option<PathBuf> {
        std::iter::once(folder.to_owned())
            .chain(self.loader.search_path())
            .map(|dir| normalize(&dir, Path::new(relative)))
            .find(|candidate| self.loader.is_file(candidate))
    }

    /// `import "git+…//PATH" rev="…"`.
    fn remote_import(
        &mut self,
        text: &str,
        rev: Option<(String, Span)>,
        node: &KdlNode,
        file: FileId,
        span: Span,
    ) {
        let source = match Source::parse(text) {
            Ok(source) => source,
            Err(message) => {
                self.diagnostics.push(
                    Diagnostic::new(&rules::INVALID_REMOTE_IMPORT, span, message)
                        .label("not a file of a repository"),
                );
                return;
            }
        };
        let Some((rev, rev_span)) = rev else {
            // A `rev` that is not a string is reported as a wrong type already.
            if property(node, "rev").is_none() {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::UNPINNED_IMPORT,
                        name_span(file, node),
                        format!("{source} is not pinned: a remote import needs `rev`"),
                    )
                    .label("no `rev=`")
                    .note(span, "imported from a repository")
                    .fix(
                        "pin it to a tag",
                        Span::new(file, span.end(), 0),
                        " rev=\"TAG\"",
                    ),
                );
            }
            return;
        };
        if let Err(message) = check_rev(&rev) {
            self.diagnostics.push(
                Diagnostic::new(&rules::INVALID_REMOTE_IMPORT, rev_span, message)
                    .label("not a tag, branch or commit"),
            );
            return;
        }
        self.fetch(source, &rev, span, rev_span);
    }

    /// A relative import inside a file of a repository: the same repository, the same commit.
    fn sibling_import(&mut self, importer: &RemoteFile, text: &str, rev: Option<Span>, span: Span) {
        if let Some(rev_span) = rev {
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::INVALID_REMOTE_IMPORT,
                    rev_span,
                    format!(
                        "`rev` on \"{text}\", which is read from {} at the commit of its importer",
                        importer.source.repository
                    ),
                )
                .label("not for a relative import"),
            );
            return;
        }
        match importer.source.sibling(text) {
            Ok(source) => {
                let rev = importer.rev.clone();
                self.fetch(source, &rev, span, span);
            }
            Err(message) => self.diagnostics.push(
                Diagnostic::new(&rules::INVALID_REMOTE_IMPORT, span, message)
                    .label("outside the repository"),
            ),
        }
    }

    /// Reads `source` at the commit `rev` is pinned to, and imports it.
    fn fetch(&mut self, source: Source, rev: &str, span: Span, rev_span: Span) {
        let fetched = match self.loader.remote(&self.root, &source, rev) {
            Ok(fetched) => fetched,
            Err(problem) => {
                let at = if matches!(problem, Problem::UnknownRev { .. }) {
                    rev_span
                } else {
                    span
                };
                self.diagnostics.push(remote_problem(&problem, at));
                return;
            }
        };
        let path = fetched.path;
        if self.in_cycle(&path, span) || self.imports.contains(&path) {
            return;
        }
        self.remote_files.insert(
            path.clone(),
            RemoteFile {
                source,
                rev: rev.to_owned(),
                commit: fetched.commit,
            },
        );
        self.import_text(&path, &fetched.text, span);
    }

    /// Reports an import of a file being imported already, up the chain; whether it is one.
    fn in_cycle(&mut self, resolved: &Path, span: Span) -> bool {
        let Some(start) = self.stack.iter().position(|p| *p == resolved) else {
            return false;
        };
        let chain: Vec<String> = self.stack[start..]
            .iter()
            .map(PathBuf::as_path)
            .chain(std::iter::once(resolved))
            .map(|p| match self.remote_files.get(p) {
                Some(remote) => remote.source.to_string(),
                None => p.display().to_string(),
            })
            .collect();
        self.diagnostics.push(
            Diagnostic::new(
                &rules::IMPORT_CYCLE,
                span,
                format!("import cycle: {}", chain.join(" → ")),
            )
            .label("imports a file that imports this one"),
        );
        true
    }

    /// Imports the file at `path`, whose text is `text`: its imports first, then its agents and
    /// templates.
    fn import_text(&mut self, path: &Path, text: &str, span: Span) {
        self.imports.push(path.to_owned());
        let file = self.sources.add(path, text);
        if let Some(remote) = self.remote_files.get(path) {
            self.origins.insert(
                file,
                RemoteOrigin {
                    import: remote.source.to_string(),
                    rev: remote.rev.clone(),
                    commit: remote.commit.clone(),
                },
            );
        }
        let Some(document) = self.parse(file, text) else {
            return;
        };
        Validator {
            diagnostics: self.diagnostics,
            file,
        }
        .document(&document, Context::TopLevel);
        for node in document.nodes() {
            let name = node.name().value();
            if matches!(name, "pipeline" | "phase" | "defaults") {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::NOT_ALLOWED_IN_IMPORT,
                        name_span(file, node),
                        format!("`{name}` is not allowed in an imported file"),
                    )
                    .label("in an imported file")
                    .note(span, "imported here"),
                );
            }
        }
        self.stack.push(path.to_owned());
        self.load_imports(&document, path, file);
        self.stack.pop();
        self.collect_definitions(&document, file, path, true);
    }

    /// The agents and templates defined in files read from repositories, and where each came
    /// from.
    pub(super) fn provenance(&self) -> RemoteDefinitions {
        let mut found = RemoteDefinitions::default();
        for (name, agent) in &self.agents {
            if let Some(origin) = self.origins.get(&agent.name.span.file) {
                found.agents.insert(name.clone(), origin.clone());
            }
        }
        for (name, template) in &self.templates {
            if let Some(origin) = self.origins.get(&template.file) {
                found.templates.insert(name.clone(), origin.clone());
            }
        }
        found
    }
}

fn local_with_rev(text: &str, rev: Span) -> Diagnostic {
    Diagnostic::new(
        &rules::INVALID_REMOTE_IMPORT,
        rev,
        format!(
            "`rev` pins a file of a git repository; \"{text}\" is a local file (a remote import starts with `git+`)"
        ),
    )
    .label("not for a local file")
}

/// The diagnostic of a remote import that cannot be read.
fn remote_problem(problem: &Problem, span: Span) -> Diagnostic {
    let (rule, label) = match problem {
        Problem::Unreachable { .. } => (&rules::REPOSITORY_UNREACHABLE, "cannot fetch"),
        Problem::UnknownRev { .. } => (&rules::UNKNOWN_REV, "no such tag or branch"),
        Problem::Missing { .. } => (&rules::FILE_MISSING_AT_COMMIT, "not at this commit"),
        Problem::Lock { .. } => (&rules::LOCK_MISMATCH, "checked against the lock"),
        Problem::Tampered { .. } => (&rules::IMPORT_HASH_MISMATCH, "changed in the cache"),
        Problem::Cache { .. } => (&rules::IMPORT_CACHE_UNWRITABLE, "cannot be cached"),
        Problem::NotCached { .. } => (&rules::IMPORT_NOT_CACHED, "not in the cache"),
    };
    let diagnostic = Diagnostic::new(rule, span, problem.message()).label(label);
    match problem.help() {
        Some(help) => diagnostic.help(help),
        None => diagnostic,
    }
}
