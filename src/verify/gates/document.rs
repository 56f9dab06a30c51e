//! Reading the documents the `front-matter`, `sections` and `paths-exist` gates and `from` outputs
//! look at: a Markdown file's YAML front matter, or a whole YAML file.

use std::io;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use super::files::{GATES_READ_INSIDE, READ_CAP, clean, outside_detail, read_text};
use crate::language::escape_problem;

/// The front matter of a Markdown text.
pub(super) enum FrontMatter<'t> {
    /// No `---` line at the top.
    None,
    /// A `---` line at the top, but no closing one.
    Unclosed,
    /// The YAML between the fences, and the text after the closing fence.
    Block { yaml: &'t str, rest: &'t str },
}

pub(super) fn front_matter(text: &str) -> FrontMatter<'_> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some((first, after_first)) = text.split_once('\n') else {
        return FrontMatter::None;
    };
    if first.trim_end() != "---" {
        return FrontMatter::None;
    }
    let mut offset = 0;
    for line in after_first.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            return FrontMatter::Block {
                yaml: &after_first[..offset],
                rest: &after_first[offset + line.len()..],
            };
        }
        offset += line.len();
    }
    FrontMatter::Unclosed
}

/// A document's text, with a detail when it cannot be read.
pub(super) fn read_document(workspace: &Path, path: &str) -> Result<String, String> {
    if let Some(problem) = outside_detail(workspace, &clean(path), GATES_READ_INSIDE) {
        return Err(problem);
    }
    let full = workspace.join(clean(path));
    match read_text(&full, READ_CAP) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(format!("`{path}` is a binary file, not a text document")),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            Err(format!("`{path}` does not exist"))
        }
        Err(error) if crate::regular::not_regular(&error).is_some() => {
            Err(format!("`{path}` is {error}"))
        }
        Err(error) => Err(format!("`{path}` could not be read: {error}")),
    }
}

/// The front matter of a Markdown document, or the whole of a YAML document, parsed.
pub(super) fn load_document(workspace: &Path, path: &str) -> Result<Yaml, String> {
    let text = read_document(workspace, path)?;
    let is_yaml = Path::new(path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let (yaml, first_line) = if is_yaml {
        (text.as_str(), 1)
    } else {
        match front_matter(&text) {
            FrontMatter::Block { yaml, .. } => (yaml, 2),
            FrontMatter::None => {
                return Err(format!(
                    "`{path}` has no YAML front matter (a block between `---` lines at the top of \
                     the file)"
                ));
            }
            FrontMatter::Unclosed => {
                return Err(format!(
                    "the front matter of `{path}` is not closed: add a `---` line after it"
                ));
            }
        }
    };
    match YamlLoader::load_from_str(yaml) {
        Ok(documents) => Ok(documents.into_iter().next().unwrap_or(Yaml::Null)),
        Err(error) => {
            let marker = error.marker();
            Err(format!(
                "`{path}`:{}:{}: the front matter is not valid YAML: {}",
                marker.line() + first_line - 1,
                marker.col() + 1,
                error.info()
            ))
        }
    }
}

/// The paths listed under each `(document, key)`, or why they cannot be had: read before a gate
/// looks at them, off the runtime's thread.
pub(super) type Listed = std::collections::BTreeMap<(String, String), Result<Vec<String>, String>>;

/// The paths listed under `key` in `doc`, cleaned; a detail when they cannot be had.
pub(super) fn listed_paths(workspace: &Path, doc: &str, key: &str) -> Result<Vec<String>, String> {
    let document = load_document(workspace, doc)?;
    let value =
        lookup(&document, key).ok_or_else(|| format!("`{doc}` has no front-matter key `{key}`"))?;
    let entries: Vec<&Yaml> = match value {
        Yaml::Array(items) => items.iter().collect(),
        Yaml::String(_) => vec![value],
        _ => {
            return Err(format!("`{key}` in `{doc}` is not a list of paths"));
        }
    };
    let mut paths = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let Yaml::String(path) = entry else {
            return Err(format!(
                "entry {} of `{key}` in `{doc}` is not a path (a string)",
                index + 1
            ));
        };
        if let Some(problem) = escape_problem(path) {
            return Err(format!(
                "`{path}` (listed under `{key}` in `{doc}`) {problem}"
            ));
        }
        paths.push(clean(path));
    }
    Ok(paths)
}

/// The value at a dotted key (`files.create`) in nested maps. A key that itself contains dots
/// (`"files.create": …`) is found too.
pub(super) fn lookup<'y>(node: &'y Yaml, key: &str) -> Option<&'y Yaml> {
    let Yaml::Hash(map) = node else {
        return None;
    };
    let get = |wanted: &str| {
        map.iter()
            .find(|(k, _)| scalar_text(k).as_deref() == Some(wanted))
            .map(|(_, v)| v)
    };
    if let Some(value) = get(key) {
        return Some(value);
    }
    key.match_indices('.')
        .find_map(|(dot, _)| get(&key[..dot]).and_then(|child| lookup(child, &key[dot + 1..])))
}

/// A scalar map key as text (YAML keys may be numbers or booleans).
pub(super) fn scalar_text(key: &Yaml) -> Option<String> {
    match key {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_keys_walk_nested_maps_and_literal_dots() {
        let yaml = &YamlLoader::load_from_str(
            "files:\n  create: [a, b]\n\"x.y\": 1\nn:\n  \"p.q\":\n    r: 2\n7: seven\n",
        )
        .unwrap()[0];
        assert!(matches!(lookup(yaml, "files.create"), Some(Yaml::Array(a)) if a.len() == 2));
        assert_eq!(lookup(yaml, "x.y"), Some(&Yaml::Integer(1)));
        assert_eq!(lookup(yaml, "n.p.q.r"), Some(&Yaml::Integer(2)));
        assert_eq!(lookup(yaml, "7"), Some(&Yaml::String("seven".into())));
        assert_eq!(lookup(yaml, "files.delete"), None);
        assert_eq!(lookup(yaml, "files.create.x"), None);
    }

    #[test]
    fn front_matter_needs_both_fences_at_the_top() {
        assert!(matches!(
            front_matter("---\na: 1\n---\nbody"),
            FrontMatter::Block {
                yaml: "a: 1\n",
                rest: "body"
            }
        ));
        assert!(matches!(
            front_matter("\u{feff}---\r\na: 1\r\n...\r\n"),
            FrontMatter::Block { .. }
        ));
        assert!(matches!(front_matter("---\na: 1\n"), FrontMatter::Unclosed));
        assert!(matches!(
            front_matter("text\n---\na: 1\n---\n"),
            FrontMatter::None
        ));
    }
}
