//! A `for-each` phase made into its items' phases, once it is ready: the items read from their
//! source (a JSON file, a glob, a list), their keys checked, and one phase made per item with the
//! item's values in its outputs, scope, protect, gates, `env`, `run` and `escalate`. Each item's
//! phase is a phase like any other: its own id, attempts, gates, journal folder and record.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::language::escape_problem;
use crate::language::item::{self, Reader, substitute};
use crate::model::{
    ForEach, Gate, GateKind, Input, Item, ItemSource, MadeBy, Output, Phase, Spanned, Worker,
    item_phase_name,
};

/// The most bytes of a JSON file of items that are read.
const MAX_ITEMS_FILE: u64 = 64 << 20;

/// The longest key, in bytes.
const MAX_KEY: usize = 200;

/// The items of a `for-each` phase, read now from its source. `Err` says why there are none to
/// run: the source cannot be read, an item has no usable key, or two share one. More than
/// `max-items` is the caller's to refuse, with the count.
pub(crate) fn items(
    workspace: &Path,
    exclude: &[PathBuf],
    for_each: &ForEach,
) -> Result<Vec<Item>, String> {
    let items = match &for_each.source {
        ItemSource::List { items } => items
            .iter()
            .enumerate()
            .map(|(index, value)| Item {
                key: value.clone(),
                index,
                value: Value::String(value.clone()),
            })
            .collect(),
        ItemSource::Glob { pattern } => {
            let files =
                crate::verify::gates::glob_files(workspace, exclude, std::slice::from_ref(pattern))
                    .map_err(|e| format!("the glob `{pattern}` cannot be read: {e}"))?;
            files
                .into_iter()
                .enumerate()
                .map(|(index, path)| file_item(index, path))
                .collect()
        }
        ItemSource::Json { path, key } => json_items(workspace, path, key.as_deref())?,
    };
    check_keys(&items)?;
    Ok(items)
}

/// The item of one file a glob matched.
fn file_item(index: usize, path: String) -> Item {
    let p = Path::new(&path);
    let text = |s: Option<&std::ffi::OsStr>| s.map(|s| s.to_string_lossy().into_owned());
    let value = serde_json::json!({
        "path": path,
        "stem": text(p.file_stem()).unwrap_or_default(),
        "name": text(p.file_name()).unwrap_or_default(),
        "dir": p.parent().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default(),
    });
    Item {
        key: path,
        index,
        value,
    }
}

/// The items of a JSON file: an array of strings (each its own key) or objects (keyed by `key`).
fn json_items(workspace: &Path, path: &str, key: Option<&str>) -> Result<Vec<Item>, String> {
    let bytes = crate::regular::read_capped(&workspace.join(path), MAX_ITEMS_FILE + 1)
        .map_err(|e| format!("cannot read the items in `{path}`: {e}"))?;
    if bytes.len() as u64 > MAX_ITEMS_FILE {
        return Err(format!(
            "`{path}` is larger than {} MiB: too many items to read",
            MAX_ITEMS_FILE >> 20
        ));
    }
    let document: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("`{path}` is not JSON: {e}"))?;
    let Value::Array(values) = document else {
        return Err(format!(
            "`{path}` holds {}, not a JSON array of items",
            kind(&document)
        ));
    };
    values
        .into_iter()
        .enumerate()
        .map(|(index, value)| {
            let key = match (&value, key) {
                (Value::String(s), _) => s.clone(),
                (Value::Object(fields), Some(field)) => match fields.get(field) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    Some(other) => {
                        return Err(format!(
                            "item {index} of `{path}`: its key field `{field}` is {}, not a string or a number",
                            kind(other)
                        ));
                    }
                    None => {
                        return Err(format!(
                            "item {index} of `{path}` has no key field `{field}`"
                        ));
                    }
                },
                (Value::Object(_), None) => {
                    return Err(format!(
                        "item {index} of `{path}` is an object: say which field is its key with `for-each json=\"{path}\" key=\"FIELD\"`"
                    ));
                }
                (other, _) => {
                    return Err(format!(
                        "item {index} of `{path}` is {}: items are strings or objects",
                        kind(other)
                    ));
                }
            };
            Ok(Item { key, index, value })
        })
        .collect()
}

/// A JSON value's kind, in words.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why a key cannot name an item's phase and its folders, if it cannot: it must be 1 to 200
/// bytes of printable text without `[`, `]` or `\`, and as a path (a glob's keys are paths) have
/// no empty, `.` or `..` part and no leading `/`.
pub(crate) fn key_problem(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("its key is empty".to_owned());
    }
    if key.len() > MAX_KEY {
        return Some(format!("its key is longer than {MAX_KEY} bytes"));
    }
    if let Some(c) = key
        .chars()
        .find(|&c| c.is_control() || matches!(c, '[' | ']' | '\\'))
    {
        return Some(format!(
            "its key holds {}, which a key may not",
            crate::text::one_line(&format!("`{c}`"))
        ));
    }
    if key
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Some(
            "its key has an empty, `.` or `..` part: it would not name one folder".to_owned(),
        );
    }
    None
}

/// Every key usable, and no two the same.
fn check_keys(items: &[Item]) -> Result<(), String> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(items.len());
    for item in items {
        if let Some(problem) = key_problem(&item.key) {
            return Err(format!(
                "item {} ({}): {problem}",
                item.index,
                shown(&item.key)
            ));
        }
        if let Some(first) = seen.insert(&item.key, item.index) {
            return Err(format!(
                "items {first} and {} have the same key {}: keys must be unique",
                item.index,
                shown(&item.key)
            ));
        }
    }
    Ok(())
}

/// A key as a message shows it: on one line, as code.
fn shown(key: &str) -> String {
    let short: String = key.chars().take(80).collect();
    let more = if short.len() < key.len() { "…" } else { "" };
    crate::text::one_line(&format!("`{short}{more}`"))
}

/// The phase of `item`, made from the `for-each` phase `template`. `Err` says what in the
/// template the item cannot fill (a field it lacks, a path that would leave the workspace).
pub(crate) fn item_phase(template: &Phase, item: Item) -> Result<Phase, String> {
    let fill = Filler { item: &item };
    let mut env = BTreeMap::new();
    for (name, value) in &template.env {
        env.insert(name.clone(), fill.plain(value)?);
    }
    env.extend(item::environment(&item)?);
    let worker = match &template.worker {
        Worker::Run(command) => Worker::Run(fill.shell(command)?),
        agent @ Worker::Agent(_) => agent.clone(),
    };
    let phase = Phase {
        name: Spanned::new(
            item_phase_name(&template.name.value, &item.key),
            template.name.span,
        ),
        description: fill.option(template.description.as_deref(), Reader::Plain)?,
        worker,
        vars: template
            .vars
            .iter()
            .map(|(k, v)| Ok((k.clone(), fill.plain(v)?)))
            .collect::<Result<_, String>>()?,
        outputs: template
            .outputs
            .iter()
            .map(|o| fill.output(o))
            .collect::<Result<_, _>>()?,
        inputs: template
            .inputs
            .as_ref()
            .map(|inputs| inputs.iter().map(|i| fill.input(i)).collect())
            .transpose()?,
        scope: fill.globs(&template.scope)?,
        protect: fill.globs(&template.protect)?,
        gates: template
            .gates
            .iter()
            .map(|g| fill.gate(g))
            .collect::<Result<_, _>>()?,
        escalate: fill.option(template.escalate.as_deref(), Reader::Shell)?,
        env,
        // The `for-each` phase's budget is its items' together.
        max_cost: None,
        for_each: None,
        generates: None,
        made_by: Some(MadeBy::Item {
            of: template.name.value.clone(),
            item,
        }),
        ..template.clone()
    };
    Ok(phase)
}

/// Puts one item's values into a template's texts.
struct Filler<'i> {
    item: &'i Item,
}

impl Filler<'_> {
    fn with(&self, text: &str, reader: Reader) -> Result<String, String> {
        substitute(text, self.item, reader)
    }

    fn plain(&self, text: &str) -> Result<String, String> {
        self.with(text, Reader::Plain)
    }

    fn shell(&self, text: &str) -> Result<String, String> {
        self.with(text, Reader::Shell)
    }

    fn option(&self, text: Option<&str>, reader: Reader) -> Result<Option<String>, String> {
        text.map(|t| self.with(t, reader)).transpose()
    }

    /// A path in the workspace: it must stay there whatever the item holds.
    fn path(&self, text: &str) -> Result<String, String> {
        let path = self.plain(text)?;
        inside(text, &path)?;
        Ok(path)
    }

    fn glob(&self, text: &str) -> Result<String, String> {
        let glob = self.with(text, Reader::Glob)?;
        inside(text, &glob)?;
        crate::glob::compile_glob(&glob)
            .map_err(|e| format!("`{text}` is not a glob for this item: {}", e.kind()))?;
        Ok(glob)
    }

    fn globs(&self, texts: &[String]) -> Result<Vec<String>, String> {
        texts.iter().map(|t| self.glob(t)).collect()
    }

    fn output(&self, output: &Output) -> Result<Output, String> {
        Ok(match output {
            Output::File { path } => Output::File {
                path: self.path(path)?,
            },
            Output::Glob { pattern, min } => Output::Glob {
                pattern: self.glob(pattern)?,
                min: *min,
            },
            Output::From { doc, key } => Output::From {
                doc: self.path(doc)?,
                key: self.plain(key)?,
            },
        })
    }

    fn input(&self, input: &Input) -> Result<Input, String> {
        Ok(match input {
            Input::File { path } => Input::File {
                path: self.path(path)?,
            },
            Input::Glob { pattern } => Input::Glob {
                pattern: self.glob(pattern)?,
            },
        })
    }

    /// A `matches`/`absent` target: the response, or a path or glob.
    fn target(&self, target: &str) -> Result<String, String> {
        if target == "response" {
            Ok(target.to_owned())
        } else {
            self.glob(target)
        }
    }

    fn gate(&self, gate: &Gate) -> Result<Gate, String> {
        let kind = match &gate.kind {
            GateKind::Syntax { globs } => GateKind::Syntax {
                globs: self.globs(globs)?,
            },
            GateKind::Command {
                run,
                timeout,
                cwd,
                fix,
            } => GateKind::Command {
                run: self.shell(run)?,
                timeout: *timeout,
                cwd: cwd.as_deref().map(|c| self.path(c)).transpose()?,
                fix: self.option(fix.as_deref(), Reader::Shell)?,
            },
            GateKind::Matches { target, pattern } => GateKind::Matches {
                target: self.target(target)?,
                pattern: self.with(pattern, Reader::Regex)?,
            },
            GateKind::Absent { target, pattern } => GateKind::Absent {
                target: self.target(target)?,
                pattern: self.with(pattern, Reader::Regex)?,
            },
            GateKind::FrontMatter { path, keys } => GateKind::FrontMatter {
                path: self.path(path)?,
                keys: keys
                    .iter()
                    .map(|k| self.plain(k))
                    .collect::<Result<_, _>>()?,
            },
            GateKind::Sections { path, headings } => GateKind::Sections {
                path: self.path(path)?,
                headings: headings
                    .iter()
                    .map(|h| self.plain(h))
                    .collect::<Result<_, _>>()?,
            },
            GateKind::PathsExist { doc, key } => GateKind::PathsExist {
                doc: self.path(doc)?,
                key: self.plain(key)?,
            },
            GateKind::Changes { min } => GateKind::Changes { min: *min },
            GateKind::Approval { prompt } => GateKind::Approval {
                prompt: self.option(prompt.as_deref(), Reader::Plain)?,
            },
        };
        Ok(Gate {
            name: self.plain(&gate.name)?,
            kind,
            span: gate.span,
        })
    }
}

/// A path made from `template` must stay in the workspace.
fn inside(template: &str, made: &str) -> Result<(), String> {
    if template == made {
        return Ok(());
    }
    match escape_problem(made) {
        Some(problem) => Err(format!(
            "turns `{template}` into {}, which {problem}",
            crate::text::one_line(&format!("`{made}`"))
        )),
        None => Ok(()),
    }
}

/// What a `for-each` phase became once it was ready.
pub(crate) struct Made {
    /// One phase per item, in the items' order.
    pub phases: Vec<Phase>,
    /// The items of an earlier run that are no longer in the list; their records are removed.
    pub dropped: Vec<String>,
}

/// The phases of `template`'s items, read now, with the records of items no longer in the list
/// removed. `Err` is why the phase fails before any item starts: its items cannot be read, or
/// there are more than its `max-items`.
pub(crate) fn make_items(run: &super::context::Run, template: &Phase) -> Result<Made, String> {
    let Some(for_each) = &template.for_each else {
        return Ok(Made {
            phases: Vec::new(),
            dropped: Vec::new(),
        });
    };
    let ctx = &run.ctx;
    let items = items(&ctx.pipeline.workspace, &ctx.excluded, for_each)?;
    if items.len() > for_each.max_items as usize {
        return Err(format!(
            "{} items, more than its `max-items` of {}: no item started",
            items.len(),
            for_each.max_items
        ));
    }
    // `--only migrate[parser]`: only the items named; the others are left as they are.
    let name = &template.name.value;
    let only: Vec<&str> = ctx
        .options
        .only
        .iter()
        .filter_map(|o| crate::model::split_item_name(o).filter(|(of, _)| of == name))
        .map(|(_, key)| key)
        .collect();
    let picked = !only.is_empty() && !ctx.options.only.contains(name);
    let mut phases = Vec::with_capacity(items.len());
    for item in items {
        if picked && !only.contains(&item.key.as_str()) {
            continue;
        }
        let (index, key) = (item.index, item.key.clone());
        phases.push(
            item_phase(template, item)
                .map_err(|e| format!("item {index} ({}) {e}", shown(&key)))?,
        );
    }
    let dropped = if picked {
        Vec::new()
    } else {
        dropped(run, name, &phases)
    };
    Ok(Made { phases, dropped })
}

/// The items of `of` with a record that are not among `phases`: their records are removed (a
/// removal that fails is told).
fn dropped(run: &super::context::Run, of: &str, phases: &[Phase]) -> Vec<String> {
    let current: std::collections::HashSet<&str> =
        phases.iter().map(|p| p.name.value.as_str()).collect();
    let gone: Vec<String> = run
        .ctx
        .records
        .items_of(of)
        .into_iter()
        .filter(|name| !current.contains(name.as_str()))
        .collect();
    let names: Vec<&str> = gone.iter().map(String::as_str).collect();
    if !names.is_empty()
        && let Err(e) = run.ctx.records.remove_before_start(&names, &[])
    {
        run.emit(crate::event::Event::Warning {
            message: format!(
                "cannot remove the records of the dropped items {}: {e}",
                crate::text::name_list(&names, 5)
            ),
        });
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_must_name_one_folder_and_be_unique() {
        assert!(key_problem("parser").is_none());
        assert!(key_problem("src/a.py").is_none());
        assert!(key_problem("my module").is_none());
        for bad in ["", "..", "a/../b", "/etc", "a//b", "x[1]", "a\nb", "a\\b"] {
            assert!(key_problem(bad).is_some(), "{bad:?}");
        }
        let items: Vec<Item> = ["a", "b", "a"]
            .iter()
            .enumerate()
            .map(|(index, k)| Item {
                key: (*k).to_owned(),
                index,
                value: Value::String((*k).to_owned()),
            })
            .collect();
        assert_eq!(
            check_keys(&items).unwrap_err(),
            "items 0 and 2 have the same key `a`: keys must be unique"
        );
    }
}
