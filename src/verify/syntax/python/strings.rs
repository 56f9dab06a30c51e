//! String and bytes literals as CPython's compiler reads them: escapes that cannot be decoded
//! (`'\x4'`, a truncated `\u`, `\N` without a name in braces), non-ASCII bytes, f-string
//! conversions other than `!s`, `!r` and `!a`. An unknown escape such as `'\d'` is only a warning
//! in CPython, and passes.

use super::kind_of;

use tree_sitter::Node;

use crate::verify::syntax::Finding;

/// Python 3 string prefixes, lowercased; `t` (template strings) is Python 3.14, accepted so that
/// valid new code passes.
const PREFIXES: [&str; 12] = [
    "", "r", "u", "f", "b", "t", "br", "rb", "fr", "rf", "tr", "rt",
];

/// A `string` node: its prefix, its bytes (ASCII only in a bytes literal) and its escapes.
pub(super) fn string(node: Node, text: &[u8]) -> Option<Finding> {
    let start = node.child(0)?;
    if kind_of(start) != "string_start" {
        return None;
    }
    let token = &text[start.byte_range()];
    let quote = token
        .iter()
        .position(|b| matches!(b, b'\'' | b'"' | b'`'))
        .unwrap_or(token.len());
    if token.get(quote) == Some(&b'`') {
        return Some(Finding::new(
            start.start_byte(),
            "Python 2 backticks; Python 3 needs `repr(…)`",
        ));
    }
    let prefix = &token[..quote];
    let has = |letter: u8| prefix.iter().any(|b| b.eq_ignore_ascii_case(&letter));
    if !PREFIXES
        .iter()
        .any(|p| p.as_bytes().eq_ignore_ascii_case(prefix))
    {
        return Some(Finding::new(
            start.start_byte(),
            format!(
                "string prefix `{}` is not valid in Python 3",
                String::from_utf8_lossy(prefix).to_ascii_lowercase()
            ),
        ));
    }
    let bytes = has(b'b');
    if bytes && let Some(offset) = text[node.byte_range()].iter().position(|b| !b.is_ascii()) {
        return Some(Finding::new(
            node.start_byte() + offset,
            "bytes literals can only contain ASCII characters",
        ));
    }
    if has(b'r') {
        return None;
    }
    // A string has few children: indexing them needs no cursor (and no allocation).
    (0..u32::try_from(node.child_count()).unwrap_or(u32::MAX))
        .filter_map(|i| node.child(i))
        .filter(|c| kind_of(c) == "string_content")
        .find_map(|content| bad_escape(&text[content.byte_range()], bytes, content.start_byte()))
}

/// The first escape in `content` (a literal's text between its quotes and interpolations) that
/// CPython cannot decode; `at` is the offset of `content` in the file.
fn bad_escape(content: &[u8], bytes: bool, at: usize) -> Option<Finding> {
    let mut i = 0;
    while let Some(found) = memchr_backslash(&content[i..]) {
        let backslash = i + found;
        let &letter = content.get(backslash + 1)?;
        let hex_digits = |wanted: usize| {
            content[backslash + 2..]
                .iter()
                .take(wanted)
                .take_while(|b| b.is_ascii_hexdigit())
                .count()
        };
        let problem = match letter {
            b'x' if hex_digits(2) < 2 => {
                Some("truncated `\\x` escape: `\\xXX` needs two hex digits")
            }
            b'u' if !bytes && hex_digits(4) < 4 => {
                Some("truncated `\\u` escape: `\\uXXXX` needs four hex digits")
            }
            b'U' if !bytes && hex_digits(8) < 8 => {
                Some("truncated `\\U` escape: `\\UXXXXXXXX` needs eight hex digits")
            }
            b'U' if !bytes => {
                let digits = std::str::from_utf8(&content[backslash + 2..backslash + 10]).ok()?;
                (u32::from_str_radix(digits, 16).ok()? > 0x10_FFFF)
                    .then_some("illegal Unicode character: `\\U` escapes go up to `\\U0010ffff`")
            }
            b'N' if !bytes => {
                let name_end = (content.get(backslash + 2) == Some(&b'{'))
                    .then(|| content[backslash + 3..].iter().position(|&b| b == b'}'))
                    .flatten()
                    .filter(|&end| end > 0);
                match name_end {
                    Some(end) => {
                        let name = &content[backslash + 3..backslash + 3 + end];
                        let known = std::str::from_utf8(name)
                            .ok()
                            .and_then(unicode_names2::character)
                            .is_some();
                        if !known {
                            return Some(Finding::new(
                                at + backslash,
                                format!(
                                    "unknown Unicode character name `{}` in a `\\N{{…}}` escape",
                                    String::from_utf8_lossy(name)
                                ),
                            ));
                        }
                        None
                    }
                    None => {
                        Some("malformed `\\N` escape: `\\N{NAME}` needs a character name in braces")
                    }
                }
            }
            _ => None,
        };
        if let Some(message) = problem {
            return Some(Finding::new(at + backslash, message));
        }
        i = backslash + 2;
    }
    None
}

fn memchr_backslash(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\\')
}

/// `f'{x!z}'`: the only conversions are `!s`, `!r` and `!a`.
pub(super) fn conversion(node: Node, text: &[u8]) -> Option<Finding> {
    if matches!(&text[node.byte_range()], b"!s" | b"!r" | b"!a") {
        return None;
    }
    Some(Finding::new(
        node.start_byte(),
        "f-string: invalid conversion character: expected 's', 'r', or 'a'",
    ))
}
