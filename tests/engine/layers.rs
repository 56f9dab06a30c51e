//! The house's layers, checked: data flows one way (text → model → DAG → engine → events →
//! reporters), so every module of `src/` may import only modules below it, and no two modules
//! import each other, directly or around a circle. Reads the sources; builds nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;

/// The layers, bottom first: a module may import the modules of lower layers only.
const LAYERS: &[&[&str]] = &[
    &["text", "glob", "redact", "regular", "exit"],
    &["diagnostics"],
    &["model"],
    &["graph"],
    &["event"],
    &["remote"],
    &["language"],
    &["agent"],
    &["process"],
    &["workspace"],
    &["store"],
    &["verify"],
    &["engine"],
    &["report"],
    &["lsp"],
    &["cli"],
];

/// Modules that may import less than everything below them: the language server works on the
/// language alone and never reaches the engine.
const NARROWER: &[(&str, &[&str])] = &[(
    "lsp",
    &[
        "language",
        "remote",
        "diagnostics",
        "model",
        "graph",
        "text",
        "glob",
        "redact",
        "regular",
        "exit",
    ],
)];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The product code of a source file: up to its `#[cfg(test)]` module. Tests of a file's internals
/// sit below it and may build what they need with any layer.
fn product_code(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or_default()
}

/// Every `crate::NAME…` path in the code of `text` (comments left out), as the segments after
/// `crate`, up to two deep. `use crate::{a::b, c}` gives `a::b` and `c`.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for line in product_code(text).lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or_default();
                for item in inner.split(',') {
                    found.push(segments(item.trim()));
                }
            } else {
                found.push(segments(rest));
            }
        }
    }
    found.retain(|s| !s.is_empty());
    found
}

/// The leading `name::name` of a path, as segments.
fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .take(2)
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .take_while(|s| !s.is_empty())
        .collect()
}

/// The module a source file belongs to, and its sub-module (`engine/run.rs` → engine, run).
fn module_of(src: &Path, file: &Path) -> Option<(String, Option<String>)> {
    let relative = file.strip_prefix(src).ok()?;
    let parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    match parts.as_slice() {
        [only] if only == "lib" || only == "main" => None,
        [only] => Some((only.clone(), None)),
        [top, sub, ..] if sub == "mod" => Some((top.clone(), None)),
        [top, sub, ..] => Some((top.clone(), Some(sub.clone()))),
        [] => None,
    }
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every import of `src` that points up the layers, as `file: crate::path`.
fn back_edges(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in files {
        let Some((module, _)) = module_of(src, &file) else {
            continue;
        };
        let own = layer_of(&module)
            .unwrap_or_else(|| panic!("{}: module `{module}` is in no layer", file.display()));
        let narrower = NARROWER.iter().find(|(m, _)| *m == module).map(|(_, a)| *a);
        let text = std::fs::read_to_string(&file).unwrap();
        for path in crate_paths(&text) {
            let target = &path[0];
            if *target == module {
                continue;
            }
            let allowed = match (layer_of(target), narrower) {
                (_, Some(allowed)) => allowed.contains(&target.as_str()),
                (Some(layer), None) => layer < own,
                // A name defined in lib.rs itself, such as a macro.
                (None, None) => true,
            };
            if !allowed {
                wrong.push(format!(
                    "{}: crate::{}",
                    file.strip_prefix(src).unwrap().display(),
                    path.join("::")
                ));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    wrong
}

/// The modules and sub-modules that import each other around a circle: every strongly
/// connected set of more than one, with `super::` resolved inside a module.
fn cycles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some((module, sub)) = module_of(src, &file) else {
            continue;
        };
        let name = match &sub {
            Some(sub) => format!("{module}::{sub}"),
            None => module.clone(),
        };
        let text = std::fs::read_to_string(&file).unwrap();
        let mut targets: Vec<Vec<String>> = crate_paths(&text);
        // `super::x` in `module/sub.rs` (or `module/sub/mod.rs`) is `crate::module::x`; deeper
        // down, `super` is still inside the sub-module.
        let depth = file.strip_prefix(src).unwrap().components().count();
        let is_mod = file.file_name().is_some_and(|n| n == "mod.rs");
        let super_is_module = depth == 2 || (depth == 3 && is_mod);
        if sub.is_some() && super_is_module {
            for line in product_code(&text).lines() {
                let code = line.split("//").next().unwrap_or_default();
                let mut rest = code;
                while let Some(at) = rest.find("super::") {
                    rest = &rest[at + "super::".len()..];
                    if rest.starts_with("super::") {
                        continue;
                    }
                    let mut path = vec![module.clone()];
                    path.extend(segments(rest).into_iter().take(1));
                    targets.push(path);
                }
            }
        }
        let entry = edges.entry(name.clone()).or_default();
        for path in targets {
            let target = if path.len() > 1 && path[0] == module {
                format!("{}::{}", path[0], path[1])
            } else {
                path[0].clone()
            };
            if target != name && target != module {
                entry.insert(target);
            }
        }
    }
    let mut graph = DiGraph::<String, ()>::new();
    let mut index = BTreeMap::new();
    for name in edges.keys() {
        index.insert(name.clone(), graph.add_node(name.clone()));
    }
    for (from, targets) in &edges {
        for to in targets {
            // A path that names an item, not a module file (`crate::engine::GRACE`), is an edge
            // to the module itself.
            let to = if index.contains_key(to) {
                to.clone()
            } else {
                to.split("::").next().unwrap().to_owned()
            };
            if let (Some(&a), Some(&b)) = (index.get(from), index.get(&to))
                && a != b
            {
                graph.add_edge(a, b, ());
            }
        }
    }
    let mut found: Vec<Vec<String>> = tarjan_scc(&graph)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let mut names: Vec<String> = scc.into_iter().map(|n| graph[n].clone()).collect();
            names.sort();
            names
        })
        .collect();
    found.sort();
    found
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_import_points_down_the_layers() {
    let wrong = back_edges(&src());
    assert!(
        wrong.is_empty(),
        "imports against the layers of ARCHITECTURE.md (a module may import only the layers below \
         it):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_modules_import_each_other() {
    let found = cycles(&src());
    assert!(
        found.is_empty(),
        "modules that import each other around a circle:\n{}",
        found
            .iter()
            .map(|c| c.join(" ↔ "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The checks themselves fail on what they exist to catch: a back-edge, and a circle.
#[test]
fn a_back_edge_and_a_circle_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod language;\npub mod engine;\n");
    write(
        "language/mod.rs",
        "// crate::engine in a comment is no import\nuse crate::{model, engine::run::Shared};\n",
    );
    write("engine/mod.rs", "mod run;\nmod attempt;\n");
    write("engine/run.rs", "use super::attempt::one;\n");
    write("engine/attempt.rs", "use crate::engine::run::Shared;\n");
    assert_eq!(
        back_edges(dir.path()),
        ["language/mod.rs: crate::engine::run"]
    );
    assert_eq!(
        cycles(dir.path()),
        [vec!["engine::attempt".to_owned(), "engine::run".to_owned()]]
    );
    // Deeper down, `super` stays inside the sub-module: `language/decode/agent.rs` naming
    // `super::prompt` means `language::decode::prompt`, not the sibling `language::prompt`.
    write("language/decode/mod.rs", "mod agent;\nmod prompt;\n");
    write("language/decode/agent.rs", "use super::prompt::read;\n");
    write("language/prompt.rs", "use super::decode::Body;\n");
    assert_eq!(cycles(dir.path()).len(), 1, "{:?}", cycles(dir.path()));
}
