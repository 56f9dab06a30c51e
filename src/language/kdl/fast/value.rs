//! The value a single token stands for, for the fast parser: numbers, keywords, and quoted, raw
//! and multi-line strings with their escapes and indentation resolved. Every function gives up
//! (`None`) on what it is not certain about, leaving it to the `kdl` crate.

use kdl::KdlValue;

fn is_newline(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0085}' | '\u{000B}' | '\u{000C}' | '\u{2028}' | '\u{2029}'
    )
}

fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{0009}' | '\u{0020}' | '\u{00A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// A bare word: a number, or an identifier string.
pub(super) fn bare(text: &str) -> Option<KdlValue> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let first = unsigned.chars().next();
    if first.is_some_and(|c| c.is_ascii_digit()) {
        return number(text);
    }
    if first == Some('.') && unsigned[1..].starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if matches!(
        text,
        "true" | "false" | "null" | "inf" | "-inf" | "+inf" | "nan"
    ) {
        return None;
    }
    Some(KdlValue::String(text.to_owned()))
}

/// `#true`, `#false`, `#null`, `#inf`, `#-inf`, `#nan`.
pub(super) fn keyword(text: &str) -> Option<KdlValue> {
    Some(match text {
        "#true" => KdlValue::Bool(true),
        "#false" => KdlValue::Bool(false),
        "#null" => KdlValue::Null,
        "#inf" => KdlValue::Float(f64::INFINITY),
        "#-inf" => KdlValue::Float(f64::NEG_INFINITY),
        "#nan" => KdlValue::Float(f64::NAN),
        _ => return None,
    })
}

/// Digits of `radix` with `_` between or after them, never first.
fn digits(text: &str, radix: u32) -> Option<String> {
    if !text.starts_with(|c: char| c.is_digit(radix)) {
        return None;
    }
    if !text.chars().all(|c| c == '_' || c.is_digit(radix)) {
        return None;
    }
    Some(text.replace('_', ""))
}

/// A number: decimal, hexadecimal, octal or binary integer, or a decimal with a fraction or an
/// exponent.
fn number(text: &str) -> Option<KdlValue> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    for (prefix, radix) in [("0x", 16), ("0X", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = unsigned.strip_prefix(prefix) {
            return integer(&digits(rest, radix)?, radix, negative);
        }
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let whole = digits(whole, 10)?;
    if fraction.is_none() && exponent.is_none() {
        return integer(&whole, 10, negative);
    }
    let mut float = String::with_capacity(text.len());
    if negative {
        float.push('-');
    }
    float.push_str(&whole);
    if let Some(fraction) = fraction {
        float.push('.');
        float.push_str(&digits(fraction, 10)?);
    }
    if let Some(exponent) = exponent {
        let (sign, magnitude) = match exponent.as_bytes().first() {
            Some(b'-') => ("-", &exponent[1..]),
            Some(b'+') => ("", &exponent[1..]),
            _ => ("", exponent),
        };
        float.push('e');
        float.push_str(sign);
        float.push_str(&digits(magnitude, 10)?);
    }
    float.parse::<f64>().ok().map(KdlValue::Float)
}

fn integer(digits: &str, radix: u32, negative: bool) -> Option<KdlValue> {
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    let value = if negative {
        magnitude.checked_neg()?
    } else {
        magnitude
    };
    Some(KdlValue::Integer(value))
}

/// The body of a single-line `"…"` string with its escapes applied. Gives up on `\` followed by
/// whitespace (which may span lines) and on invalid escapes.
pub(super) fn unescape(body: &str) -> Option<String> {
    if !body.contains('\\') {
        return (!body.contains(is_newline)).then(|| body.to_owned());
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if is_newline(c) {
            return None;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            '\\' => '\\',
            '"' => '"',
            'b' => '\u{0008}',
            'f' => '\u{000C}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            's' => ' ',
            'u' => {
                let rest = chars.as_str().strip_prefix('{')?;
                let close = rest.find('}')?;
                let hex = &rest[..close];
                if hex.is_empty() || hex.len() > 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                let c = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                chars = rest[close + 1..].chars();
                c
            }
            _ => return None,
        });
    }
    Some(out)
}

/// Splits text at KDL line breaks (`\r\n` counts as one).
fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if is_newline(c) {
            out.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r'
                && let Some(&(j, '\n')) = chars.peek()
            {
                chars.next();
                end = j + 1;
            }
            start = end;
        }
    }
    out.push(&text[start..]);
    out
}

/// The value of a multi-line string, given what lies between its opening and closing quotes
/// (the line break after the opening quotes included). The last line holds only the
/// indentation, which every other line either starts with or is blank; both go. Escapes are
/// applied unless `raw`; a quoted multi-line string with any `\` is left to the `kdl` crate.
pub(super) fn multi_line(inner: &str, raw: bool) -> Option<String> {
    if !raw && inner.contains('\\') {
        return None;
    }
    let mut first = inner.chars();
    if !first.next().is_some_and(is_newline) {
        return None;
    }
    let after_newline = inner.strip_prefix("\r\n").unwrap_or(first.as_str());
    let all = lines(after_newline);
    let (prefix, body) = all.split_last()?;
    if !prefix.chars().all(is_unicode_space) {
        return None;
    }
    let mut out = String::with_capacity(inner.len());
    for (i, line) in body.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.chars().all(is_unicode_space) {
            continue;
        }
        if raw && starts_with_escaped_space(line) {
            return None;
        }
        out.push_str(line.strip_prefix(prefix)?);
    }
    Some(out)
}

/// Whether a line's first non-space characters are `\` and a space or the end: the `kdl` crate
/// may read such a line as blank even in a raw string.
fn starts_with_escaped_space(line: &str) -> bool {
    line.trim_start_matches(is_unicode_space)
        .strip_prefix('\\')
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(is_unicode_space))
}

/// The value of a raw string `#"…"#` or `#"""…"""#`, with any number of `#`.
pub(super) fn raw(text: &str) -> Option<String> {
    let hashes = text.bytes().take_while(|&b| b == b'#').count();
    let inner = text.get(hashes..text.len().checked_sub(hashes)?)?;
    if let Some(multi) = inner
        .strip_prefix("\"\"\"")
        .and_then(|s| s.strip_suffix("\"\"\""))
        && multi.starts_with(is_newline)
    {
        return multi_line(multi, true);
    }
    let body = inner.strip_prefix('"')?.strip_suffix('"')?;
    if body == "\"" || body.contains(is_newline) {
        return None;
    }
    Some(body.to_owned())
}
