//! The text walks under the [`Cutter`](super::Cutter): the source's lines and pages as one
//! document ([`Doc`]), a run of lines joined into one text that maps its bytes back to lines
//! ([`Flat`]), and the cutting of a long text at word boundaries ([`cut_words`]). A leaf: it
//! knows the source, not passages (`flat_passage` in the parent makes one of a span).

use std::ops::Range;

use crate::source::Source;

/// `span` of `text` without whitespace at either end; `None` when nothing is left.
pub(super) fn tighten(text: &str, span: Range<usize>) -> Option<Range<usize>> {
    let s = text.get(span.clone())?;
    let lead = s.len() - s.trim_start().len();
    let trimmed = s.trim();
    (!trimmed.is_empty()).then(|| span.start + lead..span.start + lead + trimmed.len())
}

/// `text` (no whitespace at its ends) cut into byte ranges of at most `max` characters each,
/// at whitespace where there is some within the bound, else after `max` characters; each range
/// without whitespace at its ends, in order, covering every non-whitespace character. Linear:
/// a character is looked at again only when it lies in the word a cut stopped before.
pub(super) fn cut_words(text: &str, max: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = skip_space(text, 0);
    while start < text.len() {
        let mut cut = None; // the last whitespace after a word, within the bound
        let mut stop = text.len();
        let mut prev_space = false;
        for (count, (off, c)) in text[start..].char_indices().enumerate() {
            if count == max {
                stop = start + off;
                break;
            }
            let space = c.is_whitespace();
            if space && !prev_space {
                cut = Some(start + off);
            }
            prev_space = space;
        }
        let end = if stop == text.len() {
            text.len()
        } else {
            // A cut right at the bound is a word boundary too.
            let at_bound = text[stop..].starts_with(char::is_whitespace);
            match cut {
                _ if at_bound => stop,
                Some(c) => c,
                None => stop,
            }
        };
        let piece = text[start..end].trim_end();
        out.push(start..start + piece.len());
        start = skip_space(text, end);
    }
    out
}

fn skip_space(text: &str, from: usize) -> usize {
    text[from..]
        .find(|c: char| !c.is_whitespace())
        .map_or(text.len(), |i| from + i)
}

/// The source's lines and their pages, 0-based.
pub(super) struct Doc<'s> {
    pub(super) lines: Vec<&'s str>,
    /// 1-based page of each line.
    pub(super) pages: Vec<usize>,
    page_count: usize,
}

impl<'s> Doc<'s> {
    pub(super) fn new(source: &'s Source) -> Doc<'s> {
        let lines: Vec<&str> = (1..=source.line_count())
            .map(|n| source.line(n).unwrap_or(""))
            .collect();
        let mut pages = vec![1; lines.len()];
        for page in 1..=source.page_count() {
            if let Some(r) = source.page_lines(page) {
                for l in r {
                    if let Some(p) = pages.get_mut(l - 1) {
                        *p = page;
                    }
                }
            }
        }
        Doc {
            lines,
            pages,
            page_count: source.page_count(),
        }
    }

    pub(super) fn trimmed(&self, i: usize) -> &'s str {
        self.lines.get(i).map_or("", |l| l.trim())
    }

    pub(super) fn blank(&self, i: usize) -> bool {
        self.trimmed(i).is_empty()
    }

    pub(super) fn chars(&self, i: usize) -> usize {
        self.trimmed(i).chars().count()
    }

    /// Each page's width: the 90th-percentile length of its non-blank lines (index = page).
    pub(super) fn page_widths(&self) -> Vec<usize> {
        let mut lengths: Vec<Vec<usize>> = vec![Vec::new(); self.page_count + 1];
        for i in 0..self.lines.len() {
            if !self.blank(i) {
                if let Some(v) = lengths.get_mut(self.pages[i]) {
                    v.push(self.chars(i));
                }
            }
        }
        lengths
            .into_iter()
            .map(|mut v| {
                if v.is_empty() {
                    return 0;
                }
                v.sort_unstable();
                v[(v.len() - 1) * 9 / 10]
            })
            .collect()
    }
}

/// Lines of the source joined with `\n`, each trimmed, with where each line's part starts.
pub(super) struct Flat {
    pub(super) text: String,
    /// Per line: (offset in `text`, 0-based line, byte offset of the trimmed line in the line).
    segs: Vec<(usize, usize, usize)>,
    pub(super) chars: usize,
}

impl Flat {
    pub(super) fn of(doc: &Doc<'_>, range: Range<usize>) -> Flat {
        let mut text = String::new();
        let mut segs = Vec::with_capacity(range.len());
        for i in range {
            if !segs.is_empty() {
                text.push('\n');
            }
            let raw = doc.lines.get(i).copied().unwrap_or("");
            let lead = raw.len() - raw.trim_start().len();
            segs.push((text.len(), i, lead));
            text.push_str(raw.trim());
        }
        let chars = text.chars().count();
        Flat { text, segs, chars }
    }

    /// The segment holding text offset `at`: (its offset in `text`, its 0-based line, the byte
    /// offset of the trimmed line in the line).
    pub(super) fn seg(&self, at: usize) -> (usize, usize, usize) {
        let k = self.segs.partition_point(|s| s.0 <= at).saturating_sub(1);
        self.segs.get(k).copied().unwrap_or((0, 0, 0))
    }
}
