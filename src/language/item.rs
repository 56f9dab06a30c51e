//! The item placeholders of `for-each` phases (`{{ item }}`, `{{ item.FIELD }}`, `{{ item.key }}`,
//! `{{ item.index }}`): where a text has them, and the text with an item's values in them. The
//! prompt gets the item as a `MiniJinja` variable instead (see `agent::prompt`); every other text
//! is substituted here, in the way its reader needs: as it is (paths, argv, `env`), escaped for a
//! glob or a regex, or, in a shell command, as a quoted reference to an environment variable that
//! holds the value, so that no item ever becomes shell text.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::Value;

use super::placeholders::placeholders;
use crate::model::Item;

/// What an item placeholder stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ItemRef<'a> {
    /// `{{ item }}`: the value (a string as it is, anything else as JSON).
    Value,
    /// `{{ item.key }}`.
    Key,
    /// `{{ item.index }}`, from 0.
    Index,
    /// `{{ item.FIELD }}`.
    Field(&'a str),
}

/// One item placeholder in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ItemPlaceholder<'a> {
    /// Where it is, braces included.
    pub range: Range<usize>,
    /// What it stands for; `None` when it names the item but is not one of the plain forms
    /// (`{{ item.path | upper }}`, `{{ item["a b"] }}`): nothing but a prompt can render it.
    pub reference: Option<ItemRef<'a>>,
    /// What is between the braces, trimmed.
    pub inner: &'a str,
}

/// The item placeholders of `text`, left to right.
pub(crate) fn item_placeholders(text: &str) -> Vec<ItemPlaceholder<'_>> {
    if !text.contains("item") {
        return Vec::new();
    }
    placeholders(text)
        .into_iter()
        .filter(|p| names_item(p.inner))
        .map(|p| ItemPlaceholder {
            reference: reference(p.inner),
            range: p.range,
            inner: p.inner,
        })
        .collect()
}

/// Whether a text has an item placeholder.
pub(crate) fn uses_item(text: &str) -> bool {
    !item_placeholders(text).is_empty()
}

/// Whether the expression between braces starts with the variable `item`.
fn names_item(inner: &str) -> bool {
    inner
        .strip_prefix("item")
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
}

fn reference(inner: &str) -> Option<ItemRef<'_>> {
    let rest = inner.strip_prefix("item")?;
    if rest.is_empty() {
        return Some(ItemRef::Value);
    }
    let field = rest.strip_prefix('.')?;
    let mut chars = field.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !identifier {
        return None;
    }
    Some(match field {
        "key" => ItemRef::Key,
        "index" => ItemRef::Index,
        field => ItemRef::Field(field),
    })
}

/// `text` with every item placeholder replaced by `item`, for the checks of a template phase's
/// globs and paths: a placeholder stands for one plain name there.
pub(crate) fn neutral(text: &str) -> Cow<'_, str> {
    let found = item_placeholders(text);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for placeholder in found {
        out.push_str(&text[copied..placeholder.range.start]);
        out.push_str("item");
        copied = placeholder.range.end;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// The text of a JSON value as a placeholder gives it: a string as it is, a number or a boolean
/// as written, `null` as nothing, an array or an object as compact JSON.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => value.to_string(),
    }
}

/// The value a placeholder stands for in `item`; `Err` names what the item lacks.
pub(crate) fn value_of(item: &Item, reference: ItemRef<'_>) -> Result<String, String> {
    match reference {
        ItemRef::Value => Ok(value_text(&item.value)),
        ItemRef::Key => Ok(item.key.clone()),
        ItemRef::Index => Ok(item.index.to_string()),
        ItemRef::Field(field) => match &item.value {
            Value::Object(fields) => fields
                .get(field)
                .map(value_text)
                .ok_or_else(|| format!("has no field `{field}` for `{{{{ item.{field} }}}}`")),
            _ => Err(format!(
                "is not an object, so it has no field `{field}` for `{{{{ item.{field} }}}}`"
            )),
        },
    }
}

/// The environment variable that holds what `reference` stands for, in an item phase's shell
/// commands.
pub(crate) fn variable(reference: ItemRef<'_>) -> String {
    match reference {
        ItemRef::Value => "HELIXFLOW_ITEM".to_owned(),
        ItemRef::Key => "HELIXFLOW_ITEM_KEY".to_owned(),
        ItemRef::Index => "HELIXFLOW_ITEM_INDEX".to_owned(),
        ItemRef::Field(field) => format!("HELIXFLOW_ITEM_FIELD_{field}"),
    }
}

/// How a text is read, and so how an item's value goes into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    /// Taken as it is: a path, an argument, an environment value, a message.
    Plain,
    /// A glob: the value's wildcards are escaped, so it matches itself.
    Glob,
    /// A regular expression: the value is escaped, so it matches itself.
    Regex,
    /// A shell command: a quoted reference to the variable that holds the value.
    Shell,
}

/// `text` with the item's values in its placeholders, as `reader` reads it. `Err` says which
/// placeholder has no value in this item.
pub(crate) fn substitute(text: &str, item: &Item, reader: Reader) -> Result<String, String> {
    let found = item_placeholders(text);
    if found.is_empty() {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for placeholder in found {
        let Some(reference) = placeholder.reference else {
            return Err(format!(
                "cannot fill `{{{{ {} }}}}`: outside the prompt only `{{{{ item }}}}`, `{{{{ item.FIELD }}}}`, `{{{{ item.key }}}}` and `{{{{ item.index }}}}` are replaced",
                placeholder.inner
            ));
        };
        out.push_str(&text[copied..placeholder.range.start]);
        let value = value_of(item, reference)?;
        match reader {
            Reader::Plain => out.push_str(&value),
            Reader::Glob => out.push_str(&globset::escape(&value)),
            Reader::Regex => out.push_str(&regex::escape(&value)),
            Reader::Shell => {
                let name = variable(reference);
                match shell_quoting(&text[..placeholder.range.start]) {
                    Quoting::None => out.push_str(&format!("\"${{{name}}}\"")),
                    Quoting::Double => out.push_str(&format!("${{{name}}}")),
                    Quoting::Single => out.push_str(&format!("'\"${{{name}}}\"'")),
                }
            }
        }
        copied = placeholder.range.end;
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

/// The quotes open at the end of `before`, a prefix of a POSIX shell command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quoting {
    None,
    Single,
    Double,
}

fn shell_quoting(before: &str) -> Quoting {
    let mut state = Quoting::None;
    let mut chars = before.chars();
    while let Some(c) = chars.next() {
        match (state, c) {
            (Quoting::None | Quoting::Double, '\\') => {
                chars.next();
            }
            (Quoting::None, '\'') => state = Quoting::Single,
            (Quoting::None, '"') => state = Quoting::Double,
            (Quoting::Single, '\'') | (Quoting::Double, '"') => state = Quoting::None,
            _ => {}
        }
    }
    state
}

/// The environment an item phase's children get for its shell commands: the key, the index, the
/// value, and each field of an object whose name is a plain name. `Err` when a value holds a NUL
/// byte, which no environment variable can.
pub(crate) fn environment(item: &Item) -> Result<Vec<(String, String)>, String> {
    let mut env = vec![
        (variable(ItemRef::Key), item.key.clone()),
        (variable(ItemRef::Index), item.index.to_string()),
        (variable(ItemRef::Value), value_text(&item.value)),
    ];
    if let Value::Object(fields) = &item.value {
        for (name, value) in fields {
            if reference(&format!("item.{name}")).is_some_and(|r| matches!(r, ItemRef::Field(_))) {
                env.push((variable(ItemRef::Field(name)), value_text(value)));
            }
        }
    }
    if let Some((name, _)) = env.iter().find(|(_, value)| value.contains('\0')) {
        return Err(format!(
            "holds a NUL byte (in `{name}`), which no environment variable can hold"
        ));
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(value: Value) -> Item {
        Item {
            key: "k".into(),
            index: 2,
            value,
        }
    }

    #[test]
    fn placeholders_of_the_item_are_told_apart_from_others() {
        let found = item_placeholders(
            "{{ item }} {{items}} {{ item.path }} {{ item | upper }} {{ itemx }} {{ phase }}",
        );
        let refs: Vec<_> = found.iter().map(|p| p.reference).collect();
        assert_eq!(
            refs,
            [Some(ItemRef::Value), Some(ItemRef::Field("path")), None]
        );
        assert_eq!(neutral("src/{{ item.path }}/*.py"), "src/item/*.py");
    }

    #[test]
    fn values_are_inserted_byte_exact_for_each_reader() {
        let hostile = "a'b\"c $(rm -rf /) `x` *?[]\nz";
        let it = item(serde_json::json!({"path": hostile, "n": 3}));
        assert_eq!(
            substitute("{{ item.path }}", &it, Reader::Plain).unwrap(),
            hostile
        );
        let glob = substitute("src/{{ item.path }}", &it, Reader::Glob).unwrap();
        let matcher = crate::glob::compile_glob(&glob).unwrap().compile_matcher();
        assert!(matcher.is_match(format!("src/{hostile}")));
        assert!(!matcher.is_match("src/a'b\"c $(rm -rf /) `x` xx[]\nz"));
        let re = substitute("^{{ item.path }}$", &it, Reader::Regex).unwrap();
        assert!(regex::Regex::new(&re).unwrap().is_match(hostile));
        assert_eq!(
            substitute(
                "cat {{ item.path }} \"x{{ item.n }}\" 'y{{ item.key }}'",
                &it,
                Reader::Shell
            )
            .unwrap(),
            "cat \"${HELIXFLOW_ITEM_FIELD_path}\" \"x${HELIXFLOW_ITEM_FIELD_n}\" 'y'\"${HELIXFLOW_ITEM_KEY}\"''"
        );
        assert!(substitute("{{ item.missing }}", &it, Reader::Plain).is_err());
        assert!(substitute("{{ item.path | upper }}", &it, Reader::Plain).is_err());
    }

    #[test]
    fn the_shell_reads_the_value_from_the_environment_as_it_is() {
        let hostile = "a'b\"c $(echo pwned) `echo x` *\nz";
        let it = item(serde_json::json!({"path": hostile}));
        let command = substitute(
            "printf '%s|' {{ item.path }} \"{{ item.path }}\" 'q{{ item.path }}q'",
            &it,
            Reader::Shell,
        )
        .unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(tempfile::tempdir().unwrap().path())
            .envs(environment(&it).unwrap())
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("{hostile}|{hostile}|q{hostile}q|")
        );
    }
}
