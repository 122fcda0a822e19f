//! Byte-offset spans into the source text and the `LineIndex` that turns a
//! byte offset into a 1-based line and 1-based column (counted in chars).

/// A half-open range `start..end` of byte offsets into the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// Byte offset of the first byte covered by the span.
    pub start: usize,
    /// Byte offset one past the last byte covered by the span.
    pub end: usize,
}

impl Span {
    /// Builds a span from its start and end byte offsets.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn join(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The same span moved `offset` bytes to the right.
    pub fn shifted(self, offset: usize) -> Span {
        Span {
            start: self.start.saturating_add(offset),
            end: self.end.saturating_add(offset),
        }
    }

    /// The same span moved `offset` bytes to the left (stopping at zero).
    pub fn shifted_back(self, offset: usize) -> Span {
        Span {
            start: self.start.saturating_sub(offset),
            end: self.end.saturating_sub(offset),
        }
    }

    /// The number of bytes covered by the span.
    pub fn len(self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// Whether the span covers no bytes at all.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The text of `src` covered by the span, or `""` when the span does not
    /// lie on char boundaries of `src`.
    pub fn text(self, src: &str) -> &str {
        src.get(self.start..self.end).unwrap_or("")
    }
}

/// A 1-based line and 1-based column, the column counted in chars.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LineColumn {
    /// The 1-based line number.
    pub line: usize,
    /// The 1-based column number, counted in chars from the start of the line.
    pub column: usize,
}

impl std::fmt::Display for LineColumn {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}:{}", self.line, self.column)
    }
}

/// Maps byte offsets of one source text to lines and columns; build it once
/// per source with [`LineIndex::new`]. A byte order mark at the start of the
/// source is not part of the first line: columns count from after it, as
/// editors count them.
#[derive(Clone, Debug)]
pub struct LineIndex<'source> {
    source: &'source str,
    line_starts: Vec<usize>,
}

impl<'source> LineIndex<'source> {
    /// Indexes the line starts of `source` (lines end at `\n`).
    pub fn new(source: &'source str) -> LineIndex<'source> {
        let first_line_start = if source.starts_with(crate::tokens::BYTE_ORDER_MARK) {
            crate::tokens::BYTE_ORDER_MARK.len_utf8()
        } else {
            0
        };
        let mut line_starts = vec![first_line_start];
        line_starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|(_, byte)| *byte == b'\n')
                .map(|(offset, _)| offset + 1),
        );
        LineIndex {
            source,
            line_starts,
        }
    }

    /// The number of lines of the source (an empty source has one line).
    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The 1-based line and column of the byte `offset`. An offset past the
    /// end is clamped to the end; an offset inside a multi-byte char counts
    /// as that char.
    pub fn line_column(&self, offset: usize) -> LineColumn {
        let first_line_start = self.line_starts.first().copied().unwrap_or(0);
        let offset = offset.min(self.source.len()).max(first_line_start);
        let line_index = self
            .line_starts
            .partition_point(|line_start| *line_start <= offset)
            .saturating_sub(1);
        let line_start = self.line_starts.get(line_index).copied().unwrap_or(0);
        let column = self
            .source
            .get(line_start..)
            .unwrap_or("")
            .char_indices()
            .take_while(|(relative_offset, character)| {
                line_start + relative_offset + character.len_utf8() <= offset
            })
            .count();
        LineColumn {
            line: line_index + 1,
            column: column + 1,
        }
    }

    /// The text of the 1-based `line`, without its line ending (`\n` or
    /// `\r\n`); `""` for a line that does not exist.
    pub fn line_text(&self, line: usize) -> &'source str {
        let Some(start) = line
            .checked_sub(1)
            .and_then(|index| self.line_starts.get(index))
            .copied()
        else {
            return "";
        };
        let end = self
            .line_starts
            .get(line)
            .map(|next_start| next_start.saturating_sub(1))
            .unwrap_or(self.source.len());
        let text = self.source.get(start..end).unwrap_or("");
        text.strip_suffix('\r').unwrap_or(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_lines_and_chars_from_one() {
        let source = "ab\nçd\n\nx";
        let index = LineIndex::new(source);
        assert_eq!(index.line_column(0).to_string(), "1:1");
        assert_eq!(index.line_column(2).to_string(), "1:3");
        assert_eq!(index.line_column(3).to_string(), "2:1");
        // `ç` is two bytes: `d` is the second char of line 2.
        assert_eq!(index.line_column(5).to_string(), "2:2");
        // An offset inside `ç` counts as `ç`.
        assert_eq!(index.line_column(4).to_string(), "2:1");
        assert_eq!(index.line_column(7).to_string(), "3:1");
        assert_eq!(index.line_column(8).to_string(), "4:1");
        assert_eq!(index.line_column(1000).to_string(), "4:2");
        assert_eq!(index.line_count(), 4);
    }

    #[test]
    fn line_text_strips_line_endings() {
        let index = LineIndex::new("a = 1\r\nb = 2\n");
        assert_eq!(index.line_text(1), "a = 1");
        assert_eq!(index.line_text(2), "b = 2");
        assert_eq!(index.line_text(3), "");
        assert_eq!(index.line_text(0), "");
        assert_eq!(index.line_text(9), "");
    }

    #[test]
    fn span_text_is_empty_off_char_boundaries() {
        assert_eq!(Span::new(0, 1).text("çd"), "");
        assert_eq!(Span::new(0, 2).text("çd"), "ç");
        assert_eq!(Span::new(5, 9).text("çd"), "");
    }
}
