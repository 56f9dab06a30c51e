//! The files a document is read together with, and the names defined and referred to in them:
//! phases, agents, templates and template parameters. Definition, references, hover and completion
//! of names all read this.
//!
//! Imports are followed in the tolerant view of each file, so navigation works while a file is
//! broken. The files of a document are its own imports, followed transitively, and the imports of
//! every open document that imports it, so that from a shared library the references in every open
//! pipeline are found.

use std::collections::HashSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use super::documents::{Documents, Overlay};
use super::locate;
use crate::language::Loader;
use crate::language::kdl::tolerant::{self, Node, Tree, Word};
use crate::language::loader::normalize;
use crate::language::schema::Context;
use crate::remote::{Source, is_remote};

/// What a name stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Symbol {
    /// A phase.
    Phase(String),
    /// An agent.
    Agent(String),
    /// A template.
    Template(String),
    /// A parameter of a template.
    Param {
        /// The template.
        template: String,
        /// The parameter.
        name: String,
    },
}

impl Symbol {
    /// The kind, as written in the language.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Symbol::Phase(_) => "phase",
            Symbol::Agent(_) => "agent",
            Symbol::Template(_) => "template",
            Symbol::Param { .. } => "param",
        }
    }

    /// The name.
    pub(crate) fn name(&self) -> &str {
        match self {
            Symbol::Phase(name) | Symbol::Agent(name) | Symbol::Template(name) => name,
            Symbol::Param { name, .. } => name,
        }
    }
}

/// One place a name is written.
#[derive(Debug, Clone)]
pub(crate) struct Occurrence {
    /// What it names.
    pub(crate) symbol: Symbol,
    /// The name's token (quotes included).
    pub(crate) span: Range<usize>,
    /// Whether this is where it is defined.
    pub(crate) definition: bool,
}

/// Every name written in one file.
pub(crate) fn occurrences(tree: &Tree) -> Vec<Occurrence> {
    let mut found = Vec::new();
    let mut add = |symbol: Symbol, word: &Word, definition: bool| {
        found.push(Occurrence {
            symbol,
            span: word.span.clone(),
            definition,
        });
    };
    for node in &tree.nodes {
        let name = node
            .first_arg()
            .and_then(|w| Some((w, w.text()?.to_owned())));
        match (node.name(), name) {
            ("phase", name) => {
                if let Some((word, name)) = name {
                    add(Symbol::Phase(name), word, true);
                }
                let template = node.prop("use").and_then(|e| {
                    let word = e.value.as_ref()?;
                    Some((word, word.text()?.to_owned()))
                });
                if let Some((word, template)) = template {
                    add(Symbol::Template(template.clone()), word, false);
                    for entry in &node.entries {
                        if let (Some(key), Some(text)) = (&entry.key, entry.key_text())
                            && text != "use"
                        {
                            let symbol = Symbol::Param {
                                template: template.clone(),
                                name: text.to_owned(),
                            };
                            add(symbol, key, false);
                        }
                    }
                }
            }
            ("agent", Some((word, name))) => add(Symbol::Agent(name), word, true),
            ("template", Some((word, name))) => {
                add(Symbol::Template(name.clone()), word, true);
                for param in node.child_nodes().iter().filter(|n| n.name() == "param") {
                    if let Some(word) = param.first_arg()
                        && let Some(text) = word.text()
                    {
                        let symbol = Symbol::Param {
                            template: name.clone(),
                            name: text.to_owned(),
                        };
                        add(symbol, word, true);
                    }
                }
            }
            _ => {}
        }
        let context = locate::child_context(Some(Context::TopLevel), node);
        references(node.child_nodes(), context, &mut add);
    }
    found
}

/// The references to phases and agents inside phase-like blocks.
fn references(nodes: &[Node], context: Option<Context>, add: &mut impl FnMut(Symbol, &Word, bool)) {
    for node in nodes {
        let phase_like = matches!(
            context,
            Some(Context::Phase | Context::Template | Context::Defaults | Context::Attempt)
        );
        match node.name() {
            "depends-on" if matches!(context, Some(Context::Phase | Context::Template)) => {
                for word in node.args() {
                    if let Some(text) = word.text() {
                        add(Symbol::Phase(text.to_owned()), word, false);
                    }
                }
            }
            "agent" | "verifier" if phase_like => {
                if let Some(word) = node.first_arg()
                    && let Some(text) = word.text()
                {
                    add(Symbol::Agent(text.to_owned()), word, false);
                }
            }
            _ => {}
        }
        references(
            node.child_nodes(),
            locate::child_context(context, node),
            add,
        );
    }
}

/// One file of a document's workspace.
#[derive(Debug)]
pub(crate) struct File {
    /// Its path.
    pub(crate) path: PathBuf,
    /// Its text.
    pub(crate) text: Arc<str>,
    /// Its tolerant view.
    pub(crate) tree: Rc<Tree>,
}

/// A document and the files it is read together with.
#[derive(Debug, Default)]
pub(crate) struct Workspace {
    /// The files; the document itself first.
    pub(crate) files: Vec<File>,
}

/// An occurrence in a file of a [`Workspace`].
#[derive(Debug, Clone)]
pub(crate) struct Found<'w> {
    /// The file.
    pub(crate) file: &'w File,
    /// The occurrence.
    pub(crate) occurrence: Occurrence,
}

impl Workspace {
    /// The files of the open document `path`.
    pub(crate) fn of(path: &Path, documents: &Documents, overlay: &Overlay) -> Self {
        let mut workspace = Workspace::default();
        let mut seen = HashSet::new();
        workspace.add(path, path, documents, overlay, &mut seen);
        // Open documents that import this one bring their files along.
        for other in documents.iter().filter(|d| d.path != path) {
            let closure = Workspace::closure(&other.path, documents, overlay);
            if closure.files.iter().any(|f| f.path == path) {
                for file in closure.files {
                    if seen.insert(file.path.clone()) {
                        workspace.files.push(file);
                    }
                }
            }
        }
        workspace
    }

    fn closure(path: &Path, documents: &Documents, overlay: &Overlay) -> Self {
        let mut workspace = Workspace::default();
        workspace.add(path, path, documents, overlay, &mut HashSet::new());
        workspace
    }

    /// Adds `path` and, depth first, what it imports (for the remote imports, as the lock of
    /// `root` pins them, from the import cache).
    fn add(
        &mut self,
        path: &Path,
        root: &Path,
        documents: &Documents,
        overlay: &Overlay,
        seen: &mut HashSet<PathBuf>,
    ) {
        if !seen.insert(path.to_owned()) {
            return;
        }
        let (text, tree): (Arc<str>, Rc<Tree>) = match documents.by_path(path) {
            Some(document) => (Arc::clone(&document.text), document.tree()),
            None => match overlay.read(path) {
                Ok(text) => {
                    let tree = Rc::new(tolerant::parse(&text));
                    (Arc::from(text), tree)
                }
                Err(_) => return,
            },
        };
        let folder = path.parent().unwrap_or(Path::new("")).to_owned();
        let imports: Vec<PathBuf> = tree
            .nodes
            .iter()
            .filter(|n| n.name() == "import")
            .filter_map(|n| import_target(overlay, root, &folder, n))
            .collect();
        self.files.push(File {
            path: path.to_owned(),
            text,
            tree,
        });
        for import in imports {
            self.add(&import, root, documents, overlay, seen);
        }
    }

    /// Every occurrence in every file.
    pub(crate) fn occurrences(&self) -> impl Iterator<Item = Found<'_>> {
        self.files.iter().flat_map(|file| {
            occurrences(&file.tree)
                .into_iter()
                .map(move |occurrence| Found { file, occurrence })
        })
    }

    /// The definitions of `symbol`.
    pub(crate) fn definitions(&self, symbol: &Symbol) -> Vec<Found<'_>> {
        self.occurrences()
            .filter(|f| f.occurrence.definition && f.occurrence.symbol == *symbol)
            .collect()
    }

    /// The names of the phases, agents or templates (by `kind`, as [`Symbol::kind`] says it)
    /// defined in the workspace, each once, in file order.
    pub(crate) fn defined(&self, kind: &str) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for found in self.occurrences().filter(|f| f.occurrence.definition) {
            let symbol = &found.occurrence.symbol;
            if symbol.kind() == kind && !names.iter().any(|n| n == symbol.name()) {
                names.push(symbol.name().to_owned());
            }
        }
        names
    }

    /// The top-level node whose name (first argument) is the definition `found`.
    pub(crate) fn defining_node<'w>(found: &Found<'w>) -> Option<&'w Node> {
        found.file.tree.nodes.iter().find(|n| {
            n.first_arg()
                .is_some_and(|w| w.span == found.occurrence.span)
        })
    }
}

/// The symbol written at `offset` in `tree`, if a name is there.
pub(crate) fn symbol_at(tree: &Tree, offset: usize) -> Option<Occurrence> {
    occurrences(tree)
        .into_iter()
        .find(|o| o.span.start <= offset && offset <= o.span.end)
}

/// The file an `import` node of a file in `folder` points to: for a remote import, its copy in the
/// import cache at the commit the lock of `root` pins (the server never fetches); else as
/// [`resolve_import`] finds it. A relative import inside a cached file is found beside it, in
/// the same commit.
pub(crate) fn import_target(
    loader: &dyn Loader,
    root: &Path,
    folder: &Path,
    node: &Node,
) -> Option<PathBuf> {
    let text = node.first_arg()?.text()?;
    if !is_remote(text) {
        return resolve_import(loader, folder, text);
    }
    let source = Source::parse(text).ok()?;
    let rev = node.prop("rev")?.value_text()?;
    loader
        .remote(root, &source, rev)
        .ok()
        .map(|fetched| fetched.path)
}

/// Where an import points: relative to the importing file's folder, else on the search path (the
/// same order as the compiler's).
pub(crate) fn resolve_import(
    loader: &dyn Loader,
    folder: &Path,
    relative: &str,
) -> Option<PathBuf> {
    std::iter::once(folder.to_owned())
        .chain(loader.search_path())
        .map(|dir| normalize(&dir, Path::new(relative)))
        .find(|candidate| loader.is_file(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_definitions_and_references() {
        let src = r#"
agent "claude" { command "c" }
template "mod" { param "module"; depends-on "base" }
defaults { agent "claude" }
phase "base" { verifier "claude" }
phase "lexer" use="mod" module="x" { depends-on "base" "lexer" }
"#;
        let tree = tolerant::parse(src);
        let found: Vec<String> = occurrences(&tree)
            .iter()
            .map(|o| {
                format!(
                    "{}{} {} {}",
                    if o.definition { "def " } else { "" },
                    o.symbol.kind(),
                    o.symbol.name(),
                    &src[o.span.clone()]
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                "def agent claude \"claude\"",
                "def template mod \"mod\"",
                "def param module \"module\"",
                "phase base \"base\"",
                "agent claude \"claude\"",
                "def phase base \"base\"",
                "agent claude \"claude\"",
                "def phase lexer \"lexer\"",
                "template mod \"mod\"",
                "param module module",
                "phase base \"base\"",
                "phase lexer \"lexer\"",
            ]
        );
        let at = src.find("module=").unwrap();
        assert_eq!(
            symbol_at(&tree, at).map(|o| o.symbol),
            Some(Symbol::Param {
                template: "mod".into(),
                name: "module".into()
            })
        );
    }

    #[test]
    fn follows_imports_transitively_and_from_importers() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("lib")).unwrap();
        std::fs::write(root.join("lib/a.kdl"), "import \"b.kdl\"\nagent \"a\"").unwrap();
        std::fs::write(root.join("lib/b.kdl"), "agent \"b\"\nimport \"a.kdl\"").unwrap();
        std::fs::write(
            root.join("p.kdl"),
            "import \"lib/a.kdl\"\nphase \"x\" { agent \"b\" }",
        )
        .unwrap();
        let mut documents = Documents::default();
        for name in ["p.kdl", "lib/b.kdl"] {
            let path = root.join(name);
            let text = std::fs::read_to_string(&path).unwrap();
            let uri = super::super::uri::from_path(&path).unwrap();
            documents.open(super::super::documents::Document::new(uri, text, 1));
        }
        let overlay = documents.overlay(&[]);
        let from_pipeline = Workspace::of(&root.join("p.kdl"), &documents, &overlay);
        let paths: Vec<_> = from_pipeline.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(
            paths,
            [
                root.join("p.kdl"),
                root.join("lib/a.kdl"),
                root.join("lib/b.kdl")
            ]
        );
        let definitions = from_pipeline.definitions(&Symbol::Agent("b".into()));
        assert_eq!(definitions.len(), 1);
        assert_eq!(definitions[0].file.path, root.join("lib/b.kdl"));

        // From the library, the pipeline that imports it is part of the workspace.
        let from_library = Workspace::of(&root.join("lib/b.kdl"), &documents, &overlay);
        assert!(
            from_library
                .files
                .iter()
                .any(|f| f.path == root.join("p.kdl"))
        );
        let agents = from_library.defined("agent");
        assert_eq!(agents, ["b", "a"]);
    }
}
