//! The `front-matter` gate: a document's front matter has every key.

use std::path::Path;

use yaml_rust2::Yaml;

use super::document::{load_document, lookup, scalar_text};
use super::{Finding, GateInfo, name_list};

/// What helixflow says about the `front-matter` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "The document's YAML front matter is incomplete:",
    how_to_fix: "add the missing keys to the document's front matter",
    outside_a_run: None,
};

/// What the gate checks, for the agent.
pub(super) fn describe(path: &str, keys: &[String]) -> String {
    format!("{path} has front matter with {}", keys.join(", "))
}

/// Names each key the document's front matter lacks, and the keys it has.
pub(super) fn front_matter_gate(workspace: &Path, path: &str, keys: &[String]) -> Finding {
    let document = match load_document(workspace, path) {
        Ok(document) => document,
        Err(problem) => return Finding::failed(problem),
    };
    let mut problems: Vec<String> = keys
        .iter()
        .filter(|key| lookup(&document, key).is_none())
        .map(|key| format!("the front matter of `{path}` has no key `{key}`"))
        .collect();
    if !problems.is_empty() {
        let present: Vec<String> = match &document {
            Yaml::Hash(map) => map.keys().filter_map(scalar_text).collect(),
            _ => Vec::new(),
        };
        problems.push(if present.is_empty() {
            format!("the front matter of `{path}` has no keys at all")
        } else {
            let present: Vec<&str> = present.iter().map(String::as_str).collect();
            format!("keys present: {}", name_list(&present, 20))
        });
    }
    Finding::from_problems(problems)
}
