//! A source document as numbered lines and pages, span checking, and list completeness.
//!
//! Lines are numbered from 1 across the whole document, exactly as [`number_lines`] numbers them
//! in the prompt; pages are numbered from 1. A [`Span`](crate::Span) the model returns is checked
//! against the source ([`Source::check_span`]) and resolved to the source's own text
//! ([`Source::snippet`]): the model's quote is a checksum, never the evidence shown. Those
//! methods are written beside the span type (`values/evidence.rs`), so that the document does
//! not depend on the value types.

use std::fmt::Write as _;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ground::Numerals;
use crate::validate::join_pointer;

/// The page-break character in text with pages (form feed).
pub const PAGE_BREAK: char = '\x0c';

/// A document as numbered lines (1-based) grouped into pages (1-based).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    lines: Vec<String>,
    /// 0-based index of the first line of each page.
    page_starts: Vec<usize>,
    /// How the document writes numbers, when the caller knows better than detection (a passage
    /// cut from a longer document keeps the document's convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    numerals: Option<Numerals>,
}

impl Source {
    /// A document from text. Form feeds (`\x0c`) separate pages; without one it is one page.
    pub fn from_text(text: &str) -> Self {
        if text.contains(PAGE_BREAK) {
            let pages: Vec<&str> = text.split(PAGE_BREAK).collect();
            Source::from_pages(&pages)
        } else {
            Source::from_pages(&[text])
        }
    }

    /// A document from its pages, in order.
    pub fn from_pages<S: AsRef<str>>(pages: &[S]) -> Self {
        let mut source = Source::default();
        for page in pages {
            source.page_starts.push(source.lines.len());
            source
                .lines
                .extend(page.as_ref().lines().map(str::to_owned));
        }
        source
    }

    /// This source read with `numerals` instead of the convention its own text suggests: for
    /// a passage cut from a longer document, whose one line (`entre 4.745 y 4.780 millones`)
    /// may not show that `.` groups thousands.
    pub fn with_numerals(mut self, numerals: Numerals) -> Self {
        self.numerals = Some(numerals);
        self
    }

    /// How the document writes numbers: as set by [`Source::with_numerals`], else detected
    /// from its text ([`Numerals::detect`]).
    pub fn numerals(&self) -> Numerals {
        self.numerals
            .unwrap_or_else(|| Numerals::detect(&self.text()))
    }

    /// How many lines the document has.
    pub fn line_count(&self) -> usize {
        self.lines.len()
    }

    /// How many pages the document has.
    pub fn page_count(&self) -> usize {
        self.page_starts.len()
    }

    /// Line `n` (1-based), if there is one.
    pub fn line(&self, n: usize) -> Option<&str> {
        n.checked_sub(1)
            .and_then(|i| self.lines.get(i))
            .map(String::as_str)
    }

    /// The page (1-based) that holds line `line` (1-based), if the line exists.
    pub fn page_of(&self, line: usize) -> Option<usize> {
        if line == 0 || line > self.lines.len() {
            return None;
        }
        // The last page starting at or before the line; empty pages share a start with the next.
        let idx = line - 1;
        self.page_starts
            .iter()
            .rposition(|&start| start <= idx)
            .map(|p| p + 1)
    }

    /// The 1-based line numbers of page `page` as a half-open range (empty for an empty page),
    /// or `None` when there is no such page.
    pub fn page_lines(&self, page: usize) -> Option<Range<usize>> {
        let i = page.checked_sub(1)?;
        let start = *self.page_starts.get(i)?;
        let end = self
            .page_starts
            .get(i + 1)
            .copied()
            .unwrap_or(self.lines.len());
        Some(start + 1..end + 1)
    }

    /// The text of lines `lines` (1-based, half-open), joined with `\n`; out-of-range lines are
    /// left out.
    pub fn text_of_lines(&self, lines: Range<usize>) -> String {
        let start = lines.start.max(1) - 1;
        let end = lines.end.saturating_sub(1).min(self.lines.len());
        self.lines
            .get(start..end.max(start))
            .unwrap_or_default()
            .join("\n")
    }

    /// The text of cited lines `start..=end` (1-based, inclusive, as spans cite them); lines
    /// outside the document are left out.
    pub fn text_of_cited(&self, start: u64, end: u64) -> String {
        let at = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        self.text_of_lines(at(start)..at(end).saturating_add(1))
    }

    /// The text of pages `first..=last` (1-based) and the number of the first line of that
    /// text in the whole document. Pages past the end are left out.
    pub fn pages_text(&self, first: usize, last: usize) -> (String, usize) {
        let start = self
            .page_lines(first)
            .map_or(self.lines.len() + 1, |r| r.start);
        let end = self
            .page_lines(last.min(self.page_count()))
            .map_or(start, |r| r.end)
            .max(start);
        (self.text_of_lines(start..end), start)
    }

    /// The whole text, lines joined with `\n` (page breaks are not kept).
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// The characters of [`Source::text`], counted without building it.
    pub fn char_count(&self) -> usize {
        self.lines.iter().map(|l| l.chars().count()).sum::<usize>()
            + self.lines.len().saturating_sub(1)
    }

    /// The whole document numbered as the prompt numbers it (`   1| text`).
    pub fn numbered(&self) -> String {
        number_lines(&self.text())
    }

    /// The part of this document a model is shown: the same lines and pages, every line not in
    /// `keep` left empty, so line numbers stay the document's and a value grounded in the
    /// excerpt can only come from the text kept. Each kept part is a range of lines (1-based,
    /// half-open) and, for a piece of one long line, the byte range kept of that line (cut to
    /// character boundaries). The numeral convention is the whole document's.
    pub fn excerpt(&self, keep: &[(Range<usize>, Option<Range<usize>>)]) -> Source {
        let mut lines = vec![String::new(); self.lines.len()];
        for (range, chars) in keep {
            for n in range.clone() {
                let Some(line) = n.checked_sub(1).and_then(|i| self.lines.get(i)) else {
                    continue;
                };
                let text = match chars {
                    Some(c) => char_slice(line, c.clone()),
                    None => line.as_str(),
                };
                let slot = &mut lines[n - 1];
                if slot.is_empty() {
                    *slot = text.to_owned();
                } else if chars.is_some() && !slot.contains(text) {
                    // Two pieces of one long line: both kept, a space between.
                    slot.push(' ');
                    slot.push_str(text);
                }
            }
        }
        Source {
            lines,
            page_starts: self.page_starts.clone(),
            numerals: Some(self.numerals()),
        }
    }

    /// The non-empty lines, numbered as the prompt numbers them (`  41| text`), one per line:
    /// an [excerpt](Source::excerpt) as the model is shown it.
    pub fn numbered_nonempty(&self) -> String {
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            if !line.trim().is_empty() {
                push_numbered_line(&mut out, i + 1, line);
            }
        }
        out
    }

    /// The first `n` non-blank lines of page `page`, joined with `\n` (empty when there is no
    /// such page: the end of the document).
    pub fn page_head(&self, page: usize, n: usize) -> String {
        let Some(range) = self.page_lines(page) else {
            return String::new();
        };
        range
            .filter_map(|l| self.line(l))
            .filter(|l| !l.trim().is_empty())
            .take(n)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The last non-blank line of page `page`, or an empty string.
    pub fn page_tail(&self, page: usize) -> &str {
        let Some(range) = self.page_lines(page) else {
            return "";
        };
        range
            .rev()
            .filter_map(|l| self.line(l))
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
    }
}

/// The citation an object is, when its keys are integer `start_line` and `end_line` (1-based
/// lines that fit a `u32`) and at most a `quote` (a string or null): its lines and quote.
pub(crate) fn as_citation(
    map: &serde_json::Map<String, Value>,
) -> Option<(u32, u32, Option<&str>)> {
    let line = |k: &str| map.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
    let shaped = map
        .keys()
        .all(|k| matches!(k.as_str(), "start_line" | "end_line" | "quote"));
    let quote = match map.get("quote") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return None,
    };
    shaped.then_some(())?;
    Some((line("start_line")?, line("end_line")?, quote))
}

/// Every citation in `value`: each object whose keys are integer `start_line` and `end_line`
/// (1-based lines that fit a `u32`) and at most a `quote` (a string or null), with its JSON
/// pointer, in document order: the spans a reply holds, in the shape of
/// [`Span`](crate::Span), found without reading the value into a contract.
pub(crate) fn citations(value: &Value) -> Vec<(String, u32, u32, Option<&str>)> {
    fn walk<'v>(value: &'v Value, path: &str, out: &mut Vec<(String, u32, u32, Option<&'v str>)>) {
        match value {
            Value::Object(map) => {
                if let Some((start, end, quote)) = as_citation(map) {
                    out.push((path.to_owned(), start, end, quote));
                    return;
                }
                for (k, v) in map {
                    walk(v, &join_pointer(path, k), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &join_pointer(path, &i.to_string()), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, "", &mut out);
    out
}

/// Lowercase, whitespace runs collapsed to one space, trimmed.
pub fn normalize(text: &str) -> String {
    text.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a list that may continue past a page ended there, decided from the next page's head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Completeness {
    /// The list ended on the page: the next page starts something new (or there is none).
    Complete {
        /// Which rule decided, in words.
        reason: String,
    },
    /// The list continues on the next page: retrieve it and extract again.
    Truncated {
        /// Which rule decided, in words.
        reason: String,
    },
}

impl Completeness {
    /// Whether the list continues on the next page.
    pub fn is_truncated(&self) -> bool {
        matches!(self, Completeness::Truncated { .. })
    }

    /// The reason, in words.
    pub fn reason(&self) -> &str {
        match self {
            Completeness::Complete { reason } | Completeness::Truncated { reason } => reason,
        }
    }
}

/// Decides from the first lines of the next page (which the model never sees) whether a list
/// ended on the page before: a heading (markdown, `3.` / `3.2 Title`, `Section/Article/Chapter N`
/// or `Sección/Artículo/Capítulo N`, a line in capitals) means complete; a list item (`-`, `*`,
/// `•`, `a)`, `(iv)`, `1)`) or a sentence that continues (lowercase start) means truncated; an
/// empty head (end of document) means complete.
pub fn completeness(next_page_head: &str) -> Completeness {
    completeness_after("", next_page_head)
}

/// [`completeness`], also knowing the last line of the page before: a page that ended
/// mid-sentence (no closing `.`, `!`, `?`, `:` or `;`) continues unless the next page opens with
/// a heading.
pub fn completeness_after(previous_tail: &str, next_page_head: &str) -> Completeness {
    let complete = |r: &str| Completeness::Complete {
        reason: r.to_owned(),
    };
    let truncated = |r: &str| Completeness::Truncated {
        reason: r.to_owned(),
    };
    let Some(first) = next_page_head
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
    else {
        return complete("end of document: no next page");
    };
    if is_markdown_heading(first) {
        return complete(&format!(
            "next page opens with a markdown heading: `{first}`"
        ));
    }
    if is_keyword_heading(first) {
        return complete(&format!(
            "next page opens with a section heading: `{first}`"
        ));
    }
    if is_numbered_section(first) {
        return complete(&format!(
            "next page opens with a numbered section: `{first}`"
        ));
    }
    if is_list_item(first) {
        return truncated(&format!("next page continues the list: `{first}`"));
    }
    if is_capitals(first) {
        return complete(&format!(
            "next page opens with a heading in capitals: `{first}`"
        ));
    }
    if first.chars().next().is_some_and(char::is_lowercase) {
        return truncated(&format!("next page continues a sentence: `{first}`"));
    }
    let tail = previous_tail.trim_end();
    if !tail.is_empty() && !tail.ends_with(['.', '!', '?', ':', ';', '"', '\'', ')', '”']) {
        return truncated(&format!("the page ended mid-sentence: `{}`", tail.trim()));
    }
    complete(&format!("next page starts a new paragraph: `{first}`"))
}

pub(crate) fn is_markdown_heading(line: &str) -> bool {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with([' ', '\t'])
}

pub(crate) fn is_keyword_heading(line: &str) -> bool {
    let lower = line.to_lowercase();
    const WORDS: [&str; 9] = [
        "section",
        "article",
        "chapter",
        "sección",
        "seccion",
        "artículo",
        "articulo",
        "capítulo",
        "capitulo",
    ];
    WORDS.iter().any(|w| {
        lower.strip_prefix(w).is_some_and(|rest| {
            let rest = rest.trim_start();
            rest.len() < lower.len() - w.len() // at least one space
                && rest
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || "ivxlc".contains(c))
        })
    })
}

/// `3.`, `3. Title`, `3.2 Title`, `3.2. Title`: dotted numbers, then the end or a space.
pub(crate) fn is_numbered_section(line: &str) -> bool {
    let number_end = line
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(line.len());
    let number = &line[..number_end];
    let rest = &line[number_end..];
    let well_formed = number.starts_with(|c: char| c.is_ascii_digit())
        && !number.contains("..")
        && number.contains('.');
    // `3.` needs its dot; `3.2` may drop the last one.
    let dotted = number.ends_with('.') || number.trim_end_matches('.').contains('.');
    well_formed && dotted && (rest.is_empty() || rest.starts_with([' ', '\t']))
}

/// `- x`, `* x`, `• x`, `a) x`, `(iv) x`, `1) x`.
pub(crate) fn is_list_item(line: &str) -> bool {
    if line.starts_with(['-', '*', '•', '–', '·']) {
        return line.chars().nth(1).is_some_and(char::is_whitespace);
    }
    let (inner, rest) = if let Some(after) = line.strip_prefix('(') {
        match after.find(')') {
            Some(i) => (&after[..i], &after[i + 1..]),
            None => return false,
        }
    } else {
        match line.find(')') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => return false,
        }
    };
    let marker = !inner.is_empty()
        && (inner.chars().all(|c| c.is_ascii_digit())
            || (inner.chars().count() == 1 && inner.chars().all(|c| c.is_alphabetic()))
            || (inner.len() <= 6 && inner.chars().all(|c| "ivxlcIVXLC".contains(c))));
    marker && (rest.is_empty() || rest.starts_with([' ', '\t']))
}

/// At least two letters, all of them capitals.
pub(crate) fn is_capitals(line: &str) -> bool {
    let letters: Vec<char> = line.chars().filter(|c| c.is_alphabetic()).collect();
    letters.len() >= 2 && letters.iter().all(|c| !c.is_lowercase())
}

/// `text[range]`, the range moved inward to character boundaries (empty when out of range).
fn char_slice(text: &str, range: Range<usize>) -> &str {
    let mut start = range.start.min(text.len());
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut end = range.end.min(text.len()).max(start);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(start..end.max(start)).unwrap_or("")
}

/// `document` with every line numbered from 1 (`   1| text`), each line ending in `\n`.
///
/// Lines are those of [`str::lines`] (as in [`Source`]). A char inside a
/// line that a reader may take for a line end (a lone `\r`, vertical tab, form feed, NEL, U+2028,
/// U+2029) becomes a space, so every line a model sees in the document starts with its number
/// and no document text can start a line of the prompt (`</document>` included). Evidence quotes
/// are compared with whitespace normalised, so they still match the source.
pub fn number_lines(document: &str) -> String {
    let mut out = String::with_capacity(document.len() + document.len() / 8 + 8);
    for (i, line) in document.lines().enumerate() {
        push_numbered_line(&mut out, i + 1, line);
    }
    out
}

/// Appends line `line` numbered `n` as [`number_lines`] writes it (`  41| text\n`).
pub fn push_numbered_line(out: &mut String, n: usize, line: &str) {
    let _ = write!(out, "{n:>4}| ");
    let mut rest = line;
    while let Some(at) = rest.find(is_line_break) {
        out.push_str(&rest[..at]);
        out.push(' ');
        let width = rest[at..].chars().next().map_or(1, char::len_utf8);
        rest = &rest[at + width..];
    }
    out.push_str(rest);
    out.push('\n');
}

/// A char other than `\n` that a reader may take for a line end.
pub(crate) fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::ViolationKind;
    use crate::Span;

    #[test]
    fn char_count_is_the_texts() {
        for text in ["", "a", "é\nb", "x\n\ny\x0cz\n", "line one\r\nline two"] {
            let s = Source::from_text(text);
            assert_eq!(s.char_count(), s.text().chars().count(), "{text:?}");
        }
    }

    #[test]
    fn cited_lines_are_inclusive_and_clipped_to_the_document() {
        let s = Source::from_text("one\ntwo\nthree");
        assert_eq!(s.text_of_cited(2, 3), "two\nthree");
        assert_eq!(s.text_of_cited(2, 2), "two");
        assert_eq!(s.text_of_cited(0, 1), "one");
        assert_eq!(s.text_of_cited(2, u64::MAX), "two\nthree");
        assert_eq!(s.text_of_cited(3, 2), "");
        assert_eq!(s.text_of_cited(u64::MAX, u64::MAX), "");
    }

    fn span(start: u32, end: u32, quote: Option<&str>) -> Span {
        Span {
            start_line: start,
            end_line: end,
            quote: quote.map(str::to_owned),
        }
    }

    #[test]
    fn pages_and_lines() {
        let s = Source::from_text("a\nb\n\x0cc\nd\ne\x0c\x0cf");
        assert_eq!(s.line_count(), 6);
        assert_eq!(s.page_count(), 4);
        assert_eq!(s.page_of(1), Some(1));
        assert_eq!(s.page_of(3), Some(2));
        assert_eq!(s.page_of(6), Some(4));
        assert_eq!(s.page_of(7), None);
        assert_eq!(s.page_lines(3), Some(6..6));
        assert_eq!(s.pages_text(2, 2), ("c\nd\ne".to_owned(), 3));
        assert_eq!(s.pages_text(2, 9), ("c\nd\ne\nf".to_owned(), 3));
        assert_eq!(s.page_head(2, 2), "c\nd");
        assert_eq!(s.page_tail(2), "e");
        assert_eq!(s.page_head(9, 2), "");
        assert_eq!(s.numbered(), number_lines("a\nb\nc\nd\ne\nf"));
        let p = Source::from_pages(&["x\ny", "z"]);
        assert_eq!(p.page_of(3), Some(2));
    }

    #[test]
    fn spans_are_checked() {
        let s = Source::from_pages(&["Premium: JPY 2.5\n  billion per year", "Limit"]);
        assert!(s.check_span(&span(1, 2, Some("jpy 2.5 BILLION"))).is_ok());
        assert!(s.check_span(&span(3, 3, None)).is_ok());
        let e = s.check_span(&span(2, 4, None)).unwrap_err();
        assert_eq!(e.kind, ViolationKind::EvidenceOutOfBounds);
        assert_eq!(
            s.check_span(&span(0, 1, None)).unwrap_err().path,
            "/start_line"
        );
        assert_eq!(
            s.check_span(&span(2, 1, None)).unwrap_err().kind,
            ViolationKind::CrossField
        );
        let e = s.check_span(&span(3, 3, Some("2.5 billion"))).unwrap_err();
        assert_eq!(
            (e.kind, e.path.as_str()),
            (ViolationKind::EvidenceMismatch, "/quote")
        );
        assert_eq!(
            s.snippet(&span(1, 2, Some("anything"))),
            "Premium: JPY 2.5\n  billion per year"
        );
        assert_eq!(s.pages_of_span(&span(2, 3, None)), [1, 2]);
    }

    #[test]
    fn extreme_spans_do_not_panic() {
        let s = Source::from_text("only line");
        let far = span(u32::MAX, u32::MAX, Some(""));
        assert_eq!(
            s.check_span(&far).unwrap_err().kind,
            ViolationKind::EvidenceOutOfBounds
        );
        assert_eq!(s.snippet(&far), "");
        assert!(s.pages_of_span(&far).is_empty());
        assert_eq!(s.snippet(&span(0, u32::MAX, None)), "only line");
        assert_eq!(Source::from_text("").pages_text(3, 1), (String::new(), 1));
        assert!(completeness("(").reason().contains("paragraph"));
        assert!(!completeness("#").is_truncated());
    }

    #[test]
    fn completeness_rules() {
        let c = |h: &str| completeness(h).is_truncated();
        for head in [
            "# Conditions",
            "## 4 Claims",
            "3.",
            "3.2 Claims",
            "4. Claims",
            "Section 5",
            "ARTICLE 7 — Claims",
            "Chapter IV",
            "Sección 3",
            "Artículo 12",
            "Capítulo 2",
            "GENERAL CONDITIONS",
            "",
            "  \n ",
        ] {
            assert!(!c(head), "{head:?} should be complete");
        }
        for head in [
            "- war",
            "* nuclear",
            "• mould",
            "a) wear and tear",
            "(iv) terrorism",
            "1) flood",
            "and any consequential loss.",
        ] {
            assert!(c(head), "{head:?} should be truncated");
        }
        assert!(completeness_after("caused by", "Flood or storm surge.").is_truncated());
        assert!(!completeness_after("caused by", "SECTION 4").is_truncated());
        assert!(!completeness_after("End of list.", "The insurer pays.").is_truncated());
    }
}
