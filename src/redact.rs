//! Redaction of `secret` values from everything helixflow writes: each occurrence of a secret's
//! value becomes `[REDACTED:NAME]`.
//!
//! Where occurrences of secrets overlap (one secret's value ends with the start of another's, or
//! contains another), the whole overlapping stretch is replaced by one marker, named after the
//! longest secret at the stretch's first byte: no part of any secret is ever left in the clear.
//! Occurrences that merely touch (`SECRETSECRET`) get one marker each.

use std::sync::Arc;

use serde::Serialize;

/// Replaces every occurrence of secret values with `[REDACTED:NAME]`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Arc<Secrets>,
}

/// The secrets of one redactor, prepared for scanning.
#[derive(Debug)]
struct Secrets {
    /// (name, value), longest value first; no empty and no duplicate values.
    list: Vec<(String, Vec<u8>)>,
    /// Whether some secret starts with this byte: lets the scan pass over most bytes with one
    /// lookup instead of comparing every secret at every position.
    starts: [bool; 256],
    /// The length of the longest value (0 when there are no secrets).
    longest: usize,
}

impl Default for Secrets {
    fn default() -> Self {
        Self {
            list: Vec::new(),
            starts: [false; 256],
            longest: 0,
        }
    }
}

impl Secrets {
    /// The secret that starts `haystack`, longest first, as (name, length).
    fn longest_match(&self, haystack: &[u8]) -> Option<(&str, usize)> {
        self.list
            .iter()
            .find(|(_, value)| haystack.starts_with(value))
            .map(|(name, value)| (name.as_str(), value.len()))
    }
}

impl Redactor {
    /// A redactor for these `(NAME, value)` pairs; empty values are ignored.
    pub fn new(secrets: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut list: Vec<(String, Vec<u8>)> = secrets
            .into_iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(name, value)| (name, value.into_bytes()))
            .collect();
        // Longest first, so the first secret found at a position is the longest one there; equal
        // values end up next to each other (then by name, so the name kept is deterministic).
        list.sort_by(|(name_a, a), (name_b, b)| {
            b.len()
                .cmp(&a.len())
                .then_with(|| a.cmp(b))
                .then_with(|| name_a.cmp(name_b))
        });
        list.dedup_by(|later, earlier| later.1 == earlier.1);
        let mut starts = [false; 256];
        for (_, value) in &list {
            starts[usize::from(value[0])] = true;
        }
        let longest = list.first().map_or(0, |(_, value)| value.len());
        Self {
            secrets: Arc::new(Secrets {
                list,
                starts,
                longest,
            }),
        }
    }

    /// `value` serialized as pretty JSON, with secrets redacted inside its strings (not its keys,
    /// numbers or punctuation), so that the result is always valid JSON and a secret that JSON
    /// escapes (a quote, a backslash, a newline) is caught too.
    pub(crate) fn to_json_pretty<T: Serialize + ?Sized>(
        &self,
        value: &T,
    ) -> serde_json::Result<String> {
        if self.is_empty() {
            return serde_json::to_string_pretty(value);
        }
        let mut tree = serde_json::to_value(value)?;
        self.redact_json(&mut tree);
        serde_json::to_string_pretty(&tree)
    }

    /// Redacts every string value inside `value`, in place.
    pub(crate) fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(text) => {
                let redacted = self.redact(text);
                *text = redacted;
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_json(item)),
            Value::Object(fields) => fields.values_mut().for_each(|item| self.redact_json(item)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Whether there is nothing to redact.
    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.list.is_empty()
    }

    /// `text` with every secret replaced by its marker.
    pub(crate) fn redact(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        // A secret is valid UTF-8 and so is the text, so every occurrence starts and ends on a
        // character boundary and the result is valid UTF-8; the lossy path is never taken.
        match String::from_utf8(self.redact_bytes(text.as_bytes())) {
            Ok(redacted) => redacted,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        }
    }

    /// `bytes` with every secret replaced by its marker; other bytes (valid UTF-8 or not) are kept
    /// as they are.
    pub(crate) fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        if self.is_empty() {
            return bytes.to_vec();
        }
        let mut stream = self.stream();
        let mut out = stream.push(bytes);
        out.extend(stream.finish());
        out
    }

    /// A streaming redactor for one output stream: chunks in, redacted bytes out; secrets split
    /// across chunk boundaries are still caught.
    pub(crate) fn stream(&self) -> RedactStream {
        RedactStream {
            secrets: Arc::clone(&self.secrets),
            pending: Vec::new(),
            mask_end: 0,
        }
    }
}

/// Redacts one stream of bytes given in chunks; see [`Redactor::stream`].
#[derive(Debug)]
pub(crate) struct RedactStream {
    secrets: Arc<Secrets>,
    /// Bytes received but not yet decided on: the tail that could still be the start of a secret.
    pending: Vec<u8>,
    /// Offset in `pending` up to which bytes belong to a marker already written, so they are
    /// dropped; a secret starting before it extends it.
    mask_end: usize,
}

impl RedactStream {
    /// Takes the next chunk and returns the redacted bytes that can be decided now. Up to (longest
    /// secret − 1) bytes are held back until more input or [`RedactStream::finish`] shows whether
    /// they begin a secret.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.secrets.list.is_empty() {
            return chunk.to_vec();
        }
        self.pending.extend_from_slice(chunk);
        // Only a tail that is the beginning of some secret waits for more input; every position
        // before it can be judged now (a secret starting there either lies wholly inside
        // `pending` or is ruled out by a byte already seen).
        let decided = self.undecided_tail();
        self.scan(decided)
    }

    /// Where the held-back tail starts: the first of the last (longest secret − 1) positions from
    /// which the rest of `pending` is a proper beginning of some secret; the end when there is none.
    fn undecided_tail(&self) -> usize {
        let secrets = &*self.secrets;
        let len = self.pending.len();
        (len.saturating_sub(secrets.longest - 1)..len)
            .find(|&at| {
                let tail = &self.pending[at..];
                secrets.starts[usize::from(tail[0])]
                    && secrets
                        .list
                        .iter()
                        .any(|(_, value)| value.len() > tail.len() && value.starts_with(tail))
            })
            .unwrap_or(len)
    }

    /// Ends the stream: returns the bytes still held back, redacted.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let out = self.scan(self.pending.len());
        self.mask_end = 0;
        out
    }

    /// Redacts `pending[..end]`, removes it from `pending` and returns the result.
    fn scan(&mut self, end: usize) -> Vec<u8> {
        let secrets = &*self.secrets;
        let pending = &self.pending;
        let mut out = Vec::with_capacity(end + 32);
        // `pending[..copied]` has been written out or dropped.
        let mut copied = 0;
        let mut i = 0;
        while i < end {
            if i >= self.mask_end {
                // Outside any marker: jump to the next byte that can start a secret.
                let skip = pending[i..end]
                    .iter()
                    .position(|&b| secrets.starts[usize::from(b)]);
                match skip {
                    Some(skip) => i += skip,
                    None => break,
                }
            }
            if let Some((name, len)) = secrets.longest_match(&pending[i..]) {
                if i >= self.mask_end {
                    out.extend_from_slice(&pending[copied..i]);
                    out.extend_from_slice(b"[REDACTED:");
                    out.extend_from_slice(name.as_bytes());
                    out.push(b']');
                }
                self.mask_end = self.mask_end.max(i + len);
            }
            i += 1;
            if i <= self.mask_end {
                copied = i;
            }
        }
        out.extend_from_slice(&pending[copied..end]);
        self.pending.drain(..end);
        self.mask_end = self.mask_end.saturating_sub(end);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor(secrets: &[(&str, &str)]) -> Redactor {
        Redactor::new(
            secrets
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
        )
    }

    fn streamed(redactor: &Redactor, chunks: &[&[u8]]) -> Vec<u8> {
        let mut stream = redactor.stream();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(stream.push(chunk));
        }
        out.extend(stream.finish());
        out
    }

    #[test]
    fn replaces_each_occurrence_with_its_name() {
        let r = redactor(&[("TOKEN", "hunter2"), ("KEY", "sk-123")]);
        assert_eq!(
            r.redact("token=hunter2 key=sk-123 again hunter2."),
            "token=[REDACTED:TOKEN] key=[REDACTED:KEY] again [REDACTED:TOKEN]."
        );
    }

    #[test]
    fn secret_split_at_every_boundary_is_caught() {
        let r = redactor(&[("TOKEN", "hunter2"), ("KEY", "sk-123")]);
        let text = b"a hunter2 b sk-123 chunter2hunter2 sk-12 end";
        let expected = r.redact_bytes(text);
        assert_eq!(
            expected,
            b"a [REDACTED:TOKEN] b [REDACTED:KEY] c[REDACTED:TOKEN][REDACTED:TOKEN] sk-12 end"
        );
        for cut in 0..=text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(streamed(&r, &[a, b]), expected, "split at {cut}");
            for cut2 in cut..=text.len() {
                let (b1, b2) = b.split_at(cut2 - cut);
                assert_eq!(
                    streamed(&r, &[a, b1, b2]),
                    expected,
                    "split at {cut}, {cut2}"
                );
            }
        }
        let bytewise: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(streamed(&r, &bytewise), expected);
    }

    #[test]
    fn overlapping_secrets_are_covered_completely() {
        let r = redactor(&[("A", "abcdef"), ("B", "defgh")]);
        assert_eq!(r.redact("xxabcdefghyy"), "xx[REDACTED:A]yy");
        assert_eq!(r.redact("xxdefghyy"), "xx[REDACTED:B]yy");
        let r = redactor(&[("OUTER", "abc"), ("INNER", "b")]);
        assert_eq!(
            r.redact("abc b ab"),
            "[REDACTED:OUTER] [REDACTED:INNER] a[REDACTED:INNER]"
        );
        let r = redactor(&[("PAIR", "aa")]);
        assert_eq!(r.redact("aaaaa b aa"), "[REDACTED:PAIR] b [REDACTED:PAIR]");
    }

    #[test]
    fn overlap_across_chunks_is_covered() {
        let r = redactor(&[("A", "abcdef"), ("B", "defgh")]);
        let text = b"xxabcdefghyy";
        for cut in 0..=text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(streamed(&r, &[a, b]), b"xx[REDACTED:A]yy", "split at {cut}");
        }
        let r = redactor(&[("PAIR", "aa")]);
        let long = vec![b'a'; 10_000];
        let chunks: Vec<&[u8]> = long.chunks(7).collect();
        assert_eq!(streamed(&r, &chunks), b"[REDACTED:PAIR]");
    }

    #[test]
    fn empty_secret_is_ignored() {
        let r = redactor(&[("EMPTY", "")]);
        assert!(r.is_empty());
        assert_eq!(r.redact("anything"), "anything");
        let r = redactor(&[("EMPTY", ""), ("SET", "x1")]);
        assert!(!r.is_empty());
        assert_eq!(r.redact("ax1b"), "a[REDACTED:SET]b");
    }

    #[test]
    fn same_value_under_two_names_gets_one_name() {
        let r = redactor(&[("ZED", "same"), ("ALPHA", "same")]);
        assert_eq!(r.redact("same"), "[REDACTED:ALPHA]");
    }

    #[test]
    fn non_utf8_bytes_pass_through() {
        let r = redactor(&[("TOKEN", "hunter2")]);
        let input = b"\xff\xfehunter2\x80\xc3(";
        assert_eq!(r.redact_bytes(input), b"\xff\xfe[REDACTED:TOKEN]\x80\xc3(");
        let split: Vec<&[u8]> = input.chunks(3).collect();
        assert_eq!(streamed(&r, &split), b"\xff\xfe[REDACTED:TOKEN]\x80\xc3(");
    }

    #[test]
    fn without_secrets_nothing_is_held_back() {
        let r = Redactor::default();
        assert!(r.is_empty());
        let mut stream = r.stream();
        assert_eq!(stream.push(b"abc"), b"abc");
        assert!(stream.finish().is_empty());
    }

    #[test]
    fn holds_back_only_what_may_begin_a_secret() {
        let r = redactor(&[("TOKEN", "hunter2")]);
        let mut stream = r.stream();
        assert_eq!(stream.push(b"0123456789"), b"0123456789");
        assert_eq!(stream.push(b"0123hun"), b"0123");
        assert_eq!(stream.finish(), b"hun");
    }

    #[test]
    fn a_tail_that_cannot_begin_a_secret_is_not_held_back() {
        let r = redactor(&[("TOKEN", "a-very-long-secret-value")]);
        let mut stream = r.stream();
        // Nothing here begins the secret: all of it can be written at once.
        assert_eq!(stream.push(b"line1\nerr1\n"), b"line1\nerr1\n");
        // "a-very" may be its beginning: held back until the next bytes decide.
        assert_eq!(stream.push(b"x a-very"), b"x ");
        assert_eq!(stream.push(b"-long-secret-value!"), b"[REDACTED:TOKEN]!");
        assert_eq!(stream.push(b"a-v"), b"");
        assert_eq!(stream.push(b"ague"), b"a-vague");
        assert!(stream.finish().is_empty());
    }

    #[test]
    fn json_is_redacted_inside_strings_and_stays_valid() {
        let r = redactor(&[("PW", "pa\"ss\\wo/rd"), ("K", "event"), ("PIN", "1")]);
        let value = serde_json::json!({
            "event": "run-started",
            "attempt": 1,
            "env": { "PW": "pa\"ss\\wo/rd", "note": "the event is 1 of 2" },
        });
        let text = r.to_json_pretty(&value).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back,
            serde_json::json!({
                "event": "run-started",
                "attempt": 1,
                "env": {
                    "PW": "[REDACTED:PW]",
                    "note": "the [REDACTED:K] is [REDACTED:PIN] of 2",
                },
            })
        );
        assert!(!text.contains("wo/rd"));
    }

    proptest::proptest! {
        #[test]
        fn streaming_matches_batch_and_leaks_nothing(
            text in proptest::collection::vec(proptest::sample::select(b"abc".to_vec()), 0..60),
            cuts in proptest::collection::vec(0usize..60, 0..6),
            secrets in proptest::collection::vec("[abc]{1,4}", 1..4),
        ) {
            let r = Redactor::new(
                secrets.iter().enumerate().map(|(i, s)| (format!("S{i}"), s.clone())),
            );
            let batch = r.redact_bytes(&text);
            for (_, value) in &r.secrets.list {
                proptest::prop_assert!(!batch.windows(value.len()).any(|w| w == value.as_slice()));
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in cuts {
                chunks.push(&text[from..cut]);
                from = cut;
            }
            chunks.push(&text[from..]);
            proptest::prop_assert_eq!(streamed(&r, &chunks), batch);
        }
    }
}
