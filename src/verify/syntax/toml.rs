//! TOML: duplicate keys and tables defined twice are errors, as the TOML specification says, and
//! so are two statements on one line (`a = 1 b = 2`), which tree-sitter-toml reads on. An
//! unterminated string is reported at its opening quote.

use std::collections::HashMap;

use tree_sitter::{Node, Tree};

use super::position::position;
use super::{Finding, LanguageRules, MAX_ERRORS, snippet};

/// TOML's rules on top of tree-sitter-toml.
pub(super) struct Toml;

impl LanguageRules for Toml {
    /// An unterminated string rather than a bracket: tree-sitter-toml wraps its line in an ERROR.
    fn precise_problem(&self, _tree: &Tree, text: &[u8]) -> Option<Finding> {
        toml_unterminated_string(text)
    }

    fn after_walk(
        &self,
        tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        let (mut findings, ends) = toml_statements_sharing_a_line(tree.root_node(), text);
        if tree.root_node().has_error() {
            // tree-sitter-toml reports the same problem as a missing line ending where the
            // statement before ends.
            findings.extend(tree_errors.into_iter().filter(|f| !ends.contains(&f.byte)));
        } else {
            findings.extend(toml_duplicates(tree.root_node(), text));
        }
        findings
    }
}

/// How a table came to exist; it decides what may define or extend it later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TableOrigin {
    /// Created as the parent of a header (`[a.b]` creates `a`): a header may still define it.
    Implicit,
    /// Defined by its own `[header]`.
    Header,
    /// Created by a dotted key (`a.b = 1` creates `a`).
    Dotted,
    /// One `[[element]]` of an array of tables.
    ArrayElement,
}

#[derive(Debug)]
enum TomlEntry {
    /// Any value, inline tables and arrays included: nothing may be added to it afterwards.
    Value,
    Table(TomlTable),
    ArrayOfTables(Vec<TomlTable>),
}

#[derive(Debug)]
struct TomlTable {
    origin: TableOrigin,
    /// Key → entry and the byte where it was first defined.
    entries: HashMap<String, (TomlEntry, usize)>,
}

impl TomlTable {
    fn new(origin: TableOrigin) -> Self {
        Self {
            origin,
            entries: HashMap::new(),
        }
    }
}

/// One key segment: its decoded text and where it is written.
struct KeyPart {
    name: String,
    byte: usize,
}

/// Two statements on one line (`a = 1 b = 2`, `x = { a = 1 } y = 2`, `[a] [b]`): TOML ends every
/// key/value pair and table header with a line break; tree-sitter-toml reads on, at most marking
/// a missing line ending. Returns the findings, and where each statement before one of them ends.
fn toml_statements_sharing_a_line(root: Node, text: &[u8]) -> (Vec<Finding>, Vec<usize>) {
    let end_of = |node: Node| (node.end_position().row, node.end_byte());
    let mut out = Vec::new();
    let mut ends = Vec::new();
    // Where the statement before ends: its last row and its end.
    let mut previous_end: Option<(usize, usize)> = None;
    let mut check = |start: Node, end: (usize, usize), out: &mut Vec<Finding>| {
        if let Some((row, byte)) = previous_end
            && row == start.start_position().row
            && out.len() < MAX_ERRORS
        {
            ends.push(byte);
            let shown = snippet(&text[start.byte_range()]).unwrap_or_default();
            out.push(Finding::new(
                start.start_byte(),
                format!(
                    "expected a line break before `{shown}`: TOML puts each key/value pair and table header on a line of its own"
                ),
            ));
        }
        previous_end = Some(end);
    };
    let mut cursor = root.walk();
    for node in root.named_children(&mut cursor) {
        match node.kind() {
            "pair" => check(node, end_of(node), &mut out),
            "table" | "table_array_element" => {
                let mut parts = node.walk();
                let header = node
                    .children(&mut parts)
                    .find(|c| matches!(c.kind(), "]" | "]]"))
                    .unwrap_or(node);
                check(node, end_of(header), &mut out);
                let mut pairs = node.walk();
                for pair in node
                    .named_children(&mut pairs)
                    .filter(|c| c.kind() == "pair")
                {
                    check(pair, end_of(pair), &mut out);
                }
            }
            _ => {}
        }
    }
    (out, ends)
}

/// Duplicate keys and tables defined twice: tree-sitter-toml parses each line on its own and
/// cannot see them, but the TOML specification makes them errors.
fn toml_duplicates(root: Node, text: &[u8]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut document = TomlTable::new(TableOrigin::Header);
    // The table that `key = value` lines go into, as a path from the root.
    let mut current: Vec<String> = Vec::new();
    let mut cursor = root.walk();
    for node in root.named_children(&mut cursor) {
        match node.kind() {
            "pair" => {
                if let Some(table) = resolve(&mut document, &current)
                    && let Some(value) = toml_pair(table, node, text, &mut out)
                {
                    toml_values(value, text, &mut out);
                }
            }
            "table" | "table_array_element" => {
                let Some(key) = node.named_child(0) else {
                    continue;
                };
                let parts = key_parts(key, text);
                let array = node.kind() == "table_array_element";
                match define_table(&mut document, &parts, array, text) {
                    Ok(()) => current = parts.into_iter().map(|p| p.name).collect(),
                    Err(finding) => {
                        out.push(finding);
                        // The section's pairs cannot be placed; skip them rather than guess.
                        current = vec!["\u{0}unplaceable".to_owned()];
                    }
                }
                let mut pairs = node.walk();
                for pair in node
                    .named_children(&mut pairs)
                    .filter(|c| c.kind() == "pair")
                {
                    if let Some(table) = resolve(&mut document, &current)
                        && let Some(value) = toml_pair(table, pair, text, &mut out)
                    {
                        toml_values(value, text, &mut out);
                    }
                }
            }
            _ => {}
        }
        if out.len() >= MAX_ERRORS {
            break;
        }
    }
    out
}

/// The table at `path`, through the last element of each array of tables.
fn resolve<'t>(table: &'t mut TomlTable, path: &[String]) -> Option<&'t mut TomlTable> {
    let mut table = table;
    for name in path {
        table = match &mut table.entries.get_mut(name)?.0 {
            TomlEntry::Table(next) => next,
            TomlEntry::ArrayOfTables(elements) => elements.last_mut()?,
            TomlEntry::Value => return None,
        };
    }
    Some(table)
}

fn dotted(parts: &[KeyPart]) -> String {
    parts
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(".")
}

fn first_on(text: &[u8], byte: usize) -> String {
    format!("first on line {}", position(text, byte).0)
}

/// `[a.b.c]` (or `[[a.b.c]]` when `array`).
fn define_table(
    document: &mut TomlTable,
    parts: &[KeyPart],
    array: bool,
    text: &[u8],
) -> Result<(), Finding> {
    let Some((last, parents)) = parts.split_last() else {
        return Ok(());
    };
    let header = if array {
        format!("[[{}]]", dotted(parts))
    } else {
        format!("[{}]", dotted(parts))
    };
    let mut table = document;
    for (i, part) in parents.iter().enumerate() {
        let (entry, first) = table.entries.entry(part.name.clone()).or_insert_with(|| {
            (
                TomlEntry::Table(TomlTable::new(TableOrigin::Implicit)),
                part.byte,
            )
        });
        table = match entry {
            TomlEntry::Table(next) => next,
            TomlEntry::ArrayOfTables(elements) => match elements.last_mut() {
                Some(element) => element,
                None => return Ok(()),
            },
            TomlEntry::Value => {
                return Err(Finding::new(
                    part.byte,
                    format!(
                        "`{}` is already a value ({}); `{header}` cannot make it a table",
                        dotted(&parts[..=i]),
                        first_on(text, *first)
                    ),
                ));
            }
        };
    }
    let origin = if array {
        TableOrigin::ArrayElement
    } else {
        TableOrigin::Header
    };
    match table.entries.get_mut(&last.name) {
        None => {
            let entry = if array {
                TomlEntry::ArrayOfTables(vec![TomlTable::new(origin)])
            } else {
                TomlEntry::Table(TomlTable::new(origin))
            };
            table.entries.insert(last.name.clone(), (entry, last.byte));
            Ok(())
        }
        Some((TomlEntry::ArrayOfTables(elements), _)) if array => {
            elements.push(TomlTable::new(origin));
            Ok(())
        }
        Some((TomlEntry::Table(existing), first))
            if !array && existing.origin == TableOrigin::Implicit =>
        {
            existing.origin = TableOrigin::Header;
            *first = last.byte;
            Ok(())
        }
        Some((entry, first)) => {
            let what = match entry {
                TomlEntry::Value => "a value",
                TomlEntry::ArrayOfTables(_) => "an array of tables",
                TomlEntry::Table(t) if t.origin == TableOrigin::Dotted => {
                    "a table (made by dotted keys)"
                }
                TomlEntry::Table(_) => "a table",
            };
            Err(Finding::new(
                last.byte,
                format!(
                    "`{header}` defines `{}` again: it is already {what} ({})",
                    dotted(parts),
                    first_on(text, *first)
                ),
            ))
        }
    }
}

/// `a.b.c = value` inside `table`; returns the value, whose own checks are the caller's.
fn toml_pair<'t>(
    table: &mut TomlTable,
    pair: Node<'t>,
    text: &[u8],
    out: &mut Vec<Finding>,
) -> Option<Node<'t>> {
    let key = pair.named_child(0)?;
    let parts = key_parts(key, text);
    let (last, parents) = parts.split_last()?;
    let mut table = table;
    for (i, part) in parents.iter().enumerate() {
        let (entry, first) = table.entries.entry(part.name.clone()).or_insert_with(|| {
            (
                TomlEntry::Table(TomlTable::new(TableOrigin::Dotted)),
                part.byte,
            )
        });
        let first = *first;
        let problem = match entry {
            TomlEntry::Table(next)
                if matches!(next.origin, TableOrigin::Dotted | TableOrigin::Implicit) =>
            {
                table = next;
                continue;
            }
            TomlEntry::Table(_) => "a table defined by a header",
            TomlEntry::ArrayOfTables(_) => "an array of tables",
            TomlEntry::Value => "a value",
        };
        out.push(Finding::new(
            part.byte,
            format!(
                "`{}` is already {problem} ({}); dotted keys cannot add `{}` to it",
                dotted(&parts[..=i]),
                first_on(text, first),
                dotted(&parts)
            ),
        ));
        return None;
    }
    if let Some((_, first)) = table.entries.get(&last.name) {
        out.push(Finding::new(
            last.byte,
            format!(
                "duplicate key `{}` ({})",
                dotted(&parts),
                first_on(text, *first)
            ),
        ));
        return None;
    }
    table
        .entries
        .insert(last.name.clone(), (TomlEntry::Value, last.byte));
    pair.named_child(1)
}

/// The checks inside a value: inline tables have their own keys, and may nest in arrays and in
/// each other; escapes must name Unicode scalar values; dates and times must exist. Iterative, as
/// arrays nest as deep as the file likes.
fn toml_values(value: Node, text: &[u8], out: &mut Vec<Finding>) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value.kind() {
            "inline_table" => {
                let mut table = TomlTable::new(TableOrigin::Header);
                let mut cursor = value.walk();
                for pair in value
                    .named_children(&mut cursor)
                    .filter(|c| c.kind() == "pair")
                {
                    pending.extend(toml_pair(&mut table, pair, text, out));
                }
            }
            "array" => {
                let mut cursor = value.walk();
                pending.extend(value.named_children(&mut cursor));
            }
            "string" => out.extend(toml_escape_problem(value, text)),
            "offset_date_time" | "local_date_time" | "local_date" | "local_time"
                if !toml_datetime_exists(&text[value.byte_range()]) =>
            {
                out.push(Finding::new(
                    value.start_byte(),
                    format!(
                        "`{}` is not a valid date or time",
                        String::from_utf8_lossy(&text[value.byte_range()])
                    ),
                ));
            }
            _ => {}
        }
    }
}

/// `"\uD800"`: the grammar accepts any hex digits, TOML only Unicode scalar values.
fn toml_escape_problem(string: Node, text: &[u8]) -> Option<Finding> {
    let mut cursor = string.walk();
    string
        .named_children(&mut cursor)
        .filter(|c| c.kind() == "escape_sequence")
        .find_map(|escape| {
            let written = String::from_utf8_lossy(&text[escape.byte_range()]);
            let hex = written
                .strip_prefix("\\u")
                .or_else(|| written.strip_prefix("\\U"))?;
            let valid = u32::from_str_radix(hex, 16)
                .ok()
                .and_then(char::from_u32)
                .is_some();
            (!valid).then(|| {
                Finding::new(
                    escape.start_byte(),
                    format!("escape `{written}` is not a Unicode scalar value"),
                )
            })
        })
}

/// Whether a date-time the grammar accepted names a real date and time: `1988-02-30` and `25:00`
/// have the right shape but do not exist. A leap second (`:60`) is accepted, as RFC 3339 does.
fn toml_datetime_exists(literal: &[u8]) -> bool {
    let text = String::from_utf8_lossy(literal);
    let number = |s: &str| s.parse::<u32>().ok();
    let (date, time) = if text.len() >= 10 && text.as_bytes().get(4) == Some(&b'-') {
        let (date, rest) = text.split_at(10);
        (Some(date), rest.get(1..).filter(|t| !t.is_empty()))
    } else {
        (None, Some(text.as_ref()))
    };
    if let Some(date) = date {
        let mut parts = date.split('-');
        let (Some(year), Some(month), Some(day)) = (
            parts.next().and_then(number),
            parts.next().and_then(number),
            parts.next().and_then(number),
        ) else {
            return false;
        };
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let days = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return false,
        };
        if day == 0 || day > days {
            return false;
        }
    }
    let Some(time) = time else {
        return true;
    };
    // HH:MM[:SS[.frac]] then an optional Z or ±HH:MM offset.
    let offset_at = time[1..]
        .find(['Z', 'z', '+', '-'])
        .map_or(time.len(), |i| i + 1);
    let (clock, offset) = time.split_at(offset_at);
    let mut fields = clock.split(':');
    let hour = fields.next().and_then(number);
    let minute = fields.next().and_then(number);
    let second = fields.next().map(|s| s.split('.').next().and_then(number));
    let clock_ok = matches!(hour, Some(h) if h <= 23)
        && matches!(minute, Some(m) if m <= 59)
        && second.is_none_or(|s| matches!(s, Some(s) if s <= 60));
    let offset_ok = match offset.get(1..) {
        None | Some("") => true,
        Some(hm) => {
            let mut parts = hm.split(':');
            matches!(parts.next().and_then(number), Some(h) if h <= 23)
                && matches!(parts.next().and_then(number), Some(m) if m <= 59)
        }
    };
    clock_ok && offset_ok
}

fn key_parts(key: Node, text: &[u8]) -> Vec<KeyPart> {
    match key.kind() {
        "dotted_key" => {
            let mut cursor = key.walk();
            key.named_children(&mut cursor)
                .flat_map(|part| key_parts(part, text))
                .collect()
        }
        "quoted_key" => vec![KeyPart {
            name: unquote_toml(&String::from_utf8_lossy(&text[key.byte_range()])),
            byte: key.start_byte(),
        }],
        _ => vec![KeyPart {
            name: String::from_utf8_lossy(&text[key.byte_range()]).into_owned(),
            byte: key.start_byte(),
        }],
    }
}

/// A quoted key's name: `'literal'` as written, `"basic"` with its escapes decoded, so that
/// `"a"`, `'a'` and `a` are the same key.
fn unquote_toml(quoted: &str) -> String {
    if let Some(literal) = quoted.strip_prefix('\'') {
        return literal.strip_suffix('\'').unwrap_or(literal).to_owned();
    }
    let inner = quoted.strip_prefix('"').unwrap_or(quoted);
    let inner = inner.strip_suffix('"').unwrap_or(inner);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('b') => out.push('\u{8}'),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('f') => out.push('\u{c}'),
            Some('r') => out.push('\r'),
            Some('e') => out.push('\u{1b}'),
            Some(u @ ('u' | 'U')) => {
                let digits: String = chars.by_ref().take(if u == 'u' { 4 } else { 8 }).collect();
                if let Some(decoded) = u32::from_str_radix(&digits, 16)
                    .ok()
                    .and_then(char::from_u32)
                {
                    out.push(decoded);
                } else {
                    out.push('\\');
                    out.push(u);
                    out.push_str(&digits);
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The first single-line string that is not closed on its line. tree-sitter-toml wraps the whole
/// line in an ERROR node; the opening quote is where to look. Comments and multi-line strings are
/// skipped as TOML reads them.
fn toml_unterminated_string(text: &[u8]) -> Option<Finding> {
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'#' => {
                i = text[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(text.len(), |n| i + n);
            }
            quote @ (b'"' | b'\'') => {
                let delimiter = [quote; 3];
                if text[i..].starts_with(&delimiter) {
                    let body = i + 3;
                    let mut j = body;
                    loop {
                        if j >= text.len() {
                            return Some(Finding::new(i, "unterminated multi-line string"));
                        }
                        if quote == b'"' && text[j] == b'\\' {
                            j += 2;
                        } else if text[j..].starts_with(&delimiter) {
                            // Up to two quotes may end the content right before the delimiter.
                            let mut end = j + 3;
                            while end < text.len() && end < j + 5 && text[end] == quote {
                                end += 1;
                            }
                            i = end;
                            break;
                        } else {
                            j += 1;
                        }
                    }
                    continue;
                }
                let mut j = i + 1;
                loop {
                    match text.get(j) {
                        None | Some(b'\n') => {
                            return Some(Finding::new(i, "unterminated string"));
                        }
                        Some(b'\\') if quote == b'"' => j += 2,
                        Some(&b) if b == quote => break,
                        Some(_) => j += 1,
                    }
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::syntax::Language;
    use crate::verify::syntax::tests::messages;

    #[test]
    fn toml_unterminated_string_is_placed_at_its_quote() {
        assert_eq!(
            messages(
                Language::Toml,
                "# \"quoted\" comment\na = \"\"\"x\n\"y\"\"\"\"\nb = 'it\nc = 1\n"
            ),
            vec![(4, 5, "unterminated string".to_owned())]
        );
        assert_eq!(
            toml_unterminated_string(b"a = '''\nno end"),
            Some(Finding::new(4, "unterminated multi-line string"))
        );
        assert_eq!(toml_unterminated_string(b"a = \"q\\\"\"\nb = ''\n"), None);
    }

    #[test]
    fn toml_values_must_exist() {
        assert_eq!(
            messages(
                Language::Toml,
                "a = \"\\uD800\"\nb = [1988-02-30]\nc = {d = 1979-04-31}\ne = 2024-02-29T23:59:60Z\n"
            ),
            vec![
                (
                    1,
                    6,
                    "escape `\\uD800` is not a Unicode scalar value".to_owned()
                ),
                (2, 6, "`1988-02-30` is not a valid date or time".to_owned()),
                (3, 10, "`1979-04-31` is not a valid date or time".to_owned()),
            ]
        );
        assert!(toml_datetime_exists(b"1979-05-27T07:32:00.999-07:00"));
        assert!(toml_datetime_exists(b"1979-05-27 07:32:00"));
        assert!(!toml_datetime_exists(b"1979-05-27T07:32:00+24:00"));
        assert!(!toml_datetime_exists(b"1900-02-29"));
        assert!(toml_datetime_exists(b"2000-02-29"));
    }

    #[test]
    fn toml_duplicates_follow_the_specification() {
        let invalid = [
            (
                "a = 1\na = 2\n",
                (2, 1),
                "duplicate key `a` (first on line 1)",
            ),
            (
                "\"a\" = 1\n'a' = 2\n",
                (2, 1),
                "duplicate key `a` (first on line 1)",
            ),
            (
                "[x]\n[x]\n",
                (2, 2),
                "`[x]` defines `x` again: it is already a table (first on line 1)",
            ),
            (
                "a.b = 1\n[a]\n",
                (2, 2),
                "`[a]` defines `a` again: it is already a table (made by dotted keys) (first on line 1)",
            ),
            (
                "[a.b]\nc = 1\n[a]\nb.d = 2\n",
                (4, 1),
                "`b` is already a table defined by a header (first on line 1); dotted keys cannot add `b.d` to it",
            ),
            (
                "a = {x = 1}\na.y = 2\n",
                (2, 1),
                "`a` is already a value (first on line 1); dotted keys cannot add `a.y` to it",
            ),
            (
                "t = {a = 1, a = 2}\n",
                (1, 13),
                "duplicate key `a` (first on line 1)",
            ),
            (
                "a = []\n[[a]]\n",
                (2, 3),
                "`[[a]]` defines `a` again: it is already a value (first on line 1)",
            ),
            (
                "[[a]]\n[a]\n",
                (2, 2),
                "`[a]` defines `a` again: it is already an array of tables (first on line 1)",
            ),
        ];
        for (source, (line, column), message) in invalid {
            assert_eq!(
                messages(Language::Toml, source),
                vec![(line, column, message.to_owned())],
                "{source:?}"
            );
        }
        let valid = "a.b = 1\na.c = 2\n[x.y.z]\n[x]\n[fruit]\napple.color = 'red'\n\
                     [fruit.apple.texture]\nsmooth = true\n[[p]]\nn = 1\n[p.q]\nm = 1\n[[p]]\nn = 2\n\
                     [p.q]\nm = 2\n";
        assert_eq!(messages(Language::Toml, valid), vec![]);
    }

    #[test]
    fn toml_statements_need_a_line_each() {
        let message = |s: &str| {
            format!(
                "expected a line break before `{s}`: TOML puts each key/value pair and table header on a line of its own"
            )
        };
        let cases = [
            ("a = 1 b = 2\n", (1, 7), "b = 2"),
            ("x = { a = 1 } y = 2\n", (1, 15), "y = 2"),
            ("[a] [b]\n", (1, 5), "[b]"),
            ("a = 1 [b]\n", (1, 7), "[b]"),
            ("[c]\nd = 1 e = 2\n", (2, 7), "e = 2"),
            ("a = \"\"\"\nx\"\"\" b = 1\n", (2, 6), "b = 1"),
        ];
        for (source, (line, column), shown) in cases {
            assert_eq!(
                messages(Language::Toml, source),
                vec![(line, column, message(shown))],
                "{source:?}"
            );
        }
        let valid = "a = 1 # one\nb = [\n  1,\n] # two\n[t] # table\nc = { d = 1 }\n\n[[u]]\ne = 2";
        assert_eq!(messages(Language::Toml, valid), vec![]);
    }

    #[test]
    fn toml_basic_keys_are_decoded() {
        assert_eq!(unquote_toml(r#""a\u0062\tc""#), "ab\tc");
        assert_eq!(unquote_toml(r"'a\b'"), r"a\b");
    }
}
