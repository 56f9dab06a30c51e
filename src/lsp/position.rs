//! Byte offsets ↔ LSP positions.
//!
//! The language layer speaks byte offsets into UTF-8 text; the protocol speaks zero-based lines and
//! columns counted in UTF-16 code units (the encoding every client supports, and the one this
//! server announces). Lines end at `\n`, `\r\n` or `\r`, as the protocol defines them — not at
//! KDL's other newline characters, which clients do not treat as line breaks.

use lsp_types::{Position, Range};

/// Where each line of one text starts, for converting positions in both directions.
#[derive(Debug, Clone)]
pub(crate) struct LineIndex<'t> {
    text: &'t str,
    /// Byte offset of the first byte of each line; the first is 0.
    starts: Vec<usize>,
}

impl<'t> LineIndex<'t> {
    /// Indexes the lines of `text`.
    pub(crate) fn new(text: &'t str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'\n' => starts.push(i + 1),
                // `\r\n` is one line break, counted at its `\n`.
                b'\r' if bytes.get(i + 1) != Some(&b'\n') => starts.push(i + 1),
                _ => {}
            }
        }
        Self { text, starts }
    }

    /// The text this index was built from.
    pub(crate) fn text(&self) -> &'t str {
        self.text
    }

    /// The position of a byte offset. Offsets past the end clamp to the end; offsets inside a
    /// character or inside a line break move back to the character's or line's end.
    pub(crate) fn position(&self, offset: usize) -> Position {
        let offset = floor_char_boundary(self.text, offset.min(self.text.len()));
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let end = offset.min(self.content_end(line));
        let character = self.text[start..end].encode_utf16().count();
        Position::new(to_u32(line), to_u32(character))
    }

    /// The range of the bytes `start..end`.
    pub(crate) fn range(&self, start: usize, end: usize) -> Range {
        Range::new(self.position(start), self.position(end.max(start)))
    }

    /// The byte offset of a position. A line past the last one means the end of the text; a
    /// column past the line's end means the line's end (as the protocol asks); a column inside a
    /// surrogate pair means the start of that character.
    pub(crate) fn offset(&self, position: Position) -> usize {
        let line = position.line as usize;
        let Some(&start) = self.starts.get(line) else {
            return self.text.len();
        };
        let end = self.content_end(line);
        let wanted = position.character as usize;
        let mut units = 0;
        for (i, c) in self.text[start..end].char_indices() {
            let next = units + c.len_utf16();
            if next > wanted {
                return start + i;
            }
            units = next;
        }
        end
    }

    /// Byte offset where line `line`'s text ends, before its line break.
    fn content_end(&self, line: usize) -> usize {
        match self.starts.get(line + 1) {
            None => self.text.len(),
            Some(&next) => {
                let bytes = self.text.as_bytes();
                if next >= 2 && bytes[next - 1] == b'\n' && bytes[next - 2] == b'\r' {
                    next - 2
                } else {
                    next - 1
                }
            }
        }
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Lines and columns beyond `u32::MAX` cannot be expressed in the protocol; they saturate.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: u32, character: u32) -> Position {
        Position::new(line, character)
    }

    #[test]
    fn ascii_offsets_are_columns() {
        let index = LineIndex::new("ab\ncd");
        assert_eq!(index.position(0), pos(0, 0));
        assert_eq!(index.position(2), pos(0, 2));
        assert_eq!(index.position(3), pos(1, 0));
        assert_eq!(index.position(5), pos(1, 2));
        assert_eq!(index.offset(pos(1, 1)), 4);
    }

    #[test]
    fn columns_count_utf16_code_units() {
        // `é` is 2 bytes and 1 unit, `€` 3 bytes and 1 unit, `😀` 4 bytes and 2 units.
        let text = "é€😀x\n";
        let index = LineIndex::new(text);
        assert_eq!(index.position(2), pos(0, 1));
        assert_eq!(index.position(5), pos(0, 2));
        assert_eq!(index.position(9), pos(0, 4));
        assert_eq!(index.position(10), pos(0, 5));
        assert_eq!(index.offset(pos(0, 1)), 2);
        assert_eq!(index.offset(pos(0, 2)), 5);
        assert_eq!(index.offset(pos(0, 4)), 9);
        assert_eq!(&text[index.offset(pos(0, 4))..], "x\n");
    }

    #[test]
    fn astral_characters_round_trip_and_halves_move_to_the_start() {
        let text = "a𝄞b";
        let index = LineIndex::new(text);
        for offset in [0, 1, 5, 6] {
            assert_eq!(index.offset(index.position(offset)), offset);
        }
        // Column 2 is between the two halves of the surrogate pair of `𝄞`.
        assert_eq!(index.offset(pos(0, 2)), 1);
        // Byte offsets inside the character move back to its start.
        assert_eq!(index.position(3), pos(0, 1));
    }

    #[test]
    fn crlf_and_lone_cr_end_lines() {
        let text = "a\r\nbé\rc\n";
        let index = LineIndex::new(text);
        assert_eq!(index.position(3), pos(1, 0));
        assert_eq!(index.position(6), pos(1, 2));
        assert_eq!(index.position(7), pos(2, 0));
        assert_eq!(index.position(9), pos(3, 0));
        // Between `\r` and `\n`: the end of the line's text.
        assert_eq!(index.position(2), pos(0, 1));
        assert_eq!(index.offset(pos(0, 1)), 1);
        assert_eq!(index.offset(pos(1, 2)), 6);
        assert_eq!(index.offset(pos(2, 1)), 8);
    }

    #[test]
    fn out_of_range_positions_clamp() {
        let text = "ab\r\ncd";
        let index = LineIndex::new(text);
        assert_eq!(index.offset(pos(0, 99)), 2);
        assert_eq!(index.offset(pos(7, 0)), text.len());
        assert_eq!(index.position(99), pos(1, 2));
        assert_eq!(LineIndex::new("").position(0), pos(0, 0));
        assert_eq!(LineIndex::new("").offset(pos(3, 3)), 0);
    }

    #[test]
    fn ranges_cover_the_bytes() {
        let text = "x \"ü\" y";
        let index = LineIndex::new(text);
        assert_eq!(index.range(2, 6), Range::new(pos(0, 2), pos(0, 5)));
        assert_eq!(index.range(4, 2), Range::new(pos(0, 3), pos(0, 3)));
    }

    proptest::proptest! {
        #[test]
        fn every_character_boundary_round_trips(text in "(\\PC|[\r\n]|😀|𝄞)*") {
            let index = LineIndex::new(&text);
            for (offset, c) in text.char_indices() {
                // A `\n` after `\r` belongs to the same line break: it maps to the line's end.
                if c == '\n' && offset > 0 && text.as_bytes()[offset - 1] == b'\r' {
                    continue;
                }
                proptest::prop_assert_eq!(index.offset(index.position(offset)), offset);
            }
            proptest::prop_assert_eq!(index.offset(index.position(text.len())), text.len());
        }
    }
}
