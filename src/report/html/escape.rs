//! HTML escaping: every text the report takes from a run (agent output, feedback, gate details,
//! file and phase names) goes through [`esc`] on its way into the page, in text and in attribute
//! values alike.

use std::fmt;

/// `text` for HTML: control characters shown as symbols (as on a terminal, see
/// [`crate::text::sanitize`]) and `& < > " '` as character references, so that nothing in it can
/// open or close an element or an attribute.
pub(crate) fn esc(text: &str) -> Escaped<'_> {
    Escaped(text)
}

/// A text that writes itself escaped.
pub(crate) struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clean = crate::text::sanitize(self.0);
        let mut rest: &str = &clean;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// A text cut to at most `limit` bytes (at a character boundary), and how many bytes were left out.
pub(crate) fn cut(text: &str, limit: usize) -> (&str, usize) {
    if text.len() <= limit {
        return (text, 0);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_stays_text() {
        assert_eq!(
            esc("<script>alert('x')</script></div>&\"").to_string(),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&lt;/div&gt;&amp;&quot;"
        );
        assert_eq!(esc("a\u{1b}[31mred\u{7}").to_string(), "ared\u{2407}");
        assert_eq!(cut("héllo", 2), ("h", 5));
        assert_eq!(cut("abc", 5), ("abc", 0));
    }
}
