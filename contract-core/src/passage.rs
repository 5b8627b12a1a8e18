//! Passages: a [`Source`] cut into short pieces a model can judge one at a time ("does this
//! passage say X?"), each one knowing the lines, the page and, for a piece of one line, the
//! bytes of that line it covers.
//!
//! A [`Cutter`] cuts four ways: [`Cutter::lines`] (every non-empty line), [`Cutter::sentences`]
//! (a sentence or entry that wraps over several lines is one passage, a paragraph is cut into its
//! sentences), [`Cutter::windows`] (runs of `n` non-empty lines that overlap) and
//! [`Cutter::pages`] (one passage a page). Every passage is bounded: one longer than
//! [`Cutter::max_chars`] characters is cut again (a window or a page into shorter runs of lines,
//! a sentence or a line at word boundaries, into [`PassageKind::Piece`]s), so a document that is
//! one line of 200,000 characters is cut in a single pass, in time linear in its length.
//!
//! A passage's [`Passage::text`] keeps its line breaks (line `k` of the text is line
//! `lines.start + k` of the source, each line trimmed), so a prompt can number it as the
//! document numbers it; [`Passage::flat_text`] writes every line break as one space, which is
//! how a grounded value that spans a line break is written
//! ([`grammar`](crate::grammar) offers such values with a space for the break).
//!
//! The sentence rules are hand-written: the segmentation crates on crates.io (Unicode sentence
//! boundaries, `unicode-segmentation`) split at every `. ` and know neither abbreviations such as
//! `Inc.` nor text wrapped at a fixed width, which is what the cutter has to undo.

use std::collections::HashSet;
use std::ops::Range;

mod text;

use text::{cut_words, tighten, Doc, Flat};

use crate::source::{
    is_capitals, is_keyword_heading, is_list_item, is_markdown_heading, is_numbered_section, Source,
};

/// How a passage was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassageKind {
    /// One whole non-empty line ([`Cutter::lines`]).
    Line,
    /// A sentence or an entry, possibly wrapped over several lines ([`Cutter::sentences`]).
    Sentence,
    /// A run of whole lines ([`Cutter::windows`], or a page too long to be one passage).
    Window,
    /// One whole page ([`Cutter::pages`]).
    Page,
    /// A piece of a longer line or sentence, cut at word boundaries (or at
    /// [`Cutter::max_chars`] characters inside a word with no space to cut at).
    Piece,
}

/// One passage of a [`Source`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Passage {
    /// The source lines it covers: 1-based, half-open (`3..5` is lines 3 and 4). Its first and
    /// last lines are never blank; blank lines inside are kept.
    pub lines: Range<usize>,
    /// When the passage lies inside one line and is not all of it (a [`PassageKind::Piece`] of a
    /// long line, a sentence that shares its line with another): its byte range within that
    /// line, `text == line[chars]`.
    pub chars: Option<Range<usize>>,
    /// The 1-based page of its first line.
    pub page: usize,
    /// What the model is shown: the lines as written (not reflowed), each trimmed, joined with
    /// `\n`; for a passage that starts or ends inside a line, only its part of that line.
    pub text: String,
    /// How it was cut.
    pub kind: PassageKind,
}

impl Passage {
    /// The text with every line break (and the whitespace around it) written as one space:
    /// what a grounded value that spans a line break is compared against.
    pub fn flat_text(&self) -> String {
        let mut out = String::with_capacity(self.text.len());
        for (i, line) in self.text.split('\n').map(str::trim).enumerate() {
            if line.is_empty() {
                continue;
            }
            if i > 0 && !out.is_empty() {
                out.push(' ');
            }
            out.push_str(line);
        }
        out
    }

    /// Whether the passage covers source line `line` (1-based), wholly or in part.
    pub fn contains_line(&self, line: usize) -> bool {
        self.lines.contains(&line)
    }

    /// Its length in characters (what [`Cutter::max_chars`] bounds).
    pub fn char_count(&self) -> usize {
        self.text.chars().count()
    }
}

/// The indices of the passages that cover source line `line` (1-based), in order.
pub fn containing(passages: &[Passage], line: usize) -> Vec<usize> {
    passages
        .iter()
        .enumerate()
        .filter(|(_, p)| p.contains_line(line))
        .map(|(i, _)| i)
        .collect()
}

/// The indices of the passages that start within the first `chars` characters of `source`
/// (lines counted with their line break), in order: the document's opening.
pub fn opening(passages: &[Passage], source: &Source, chars: usize) -> Vec<usize> {
    // The character offset at which each line starts, up to the first line past `chars`.
    let mut starts: Vec<usize> = Vec::new();
    let mut offset = 0usize;
    for n in 1..=source.line_count() {
        if offset >= chars {
            break;
        }
        starts.push(offset);
        offset += source.line(n).map_or(0, |l| l.chars().count()) + 1;
    }
    passages
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            let Some(&line_start) = p.lines.start.checked_sub(1).and_then(|i| starts.get(i)) else {
                return false;
            };
            let within = match (&p.chars, source.line(p.lines.start)) {
                (Some(range), Some(line)) => line
                    .get(..range.start)
                    .map_or(0, |before| before.chars().count()),
                _ => 0,
            };
            line_start + within < chars
        })
        .map(|(i, _)| i)
        .collect()
}

/// `passages` without repeats of the same place: a passage with the lines and character range
/// of an earlier one is dropped (the first is kept, order is kept). The same text at two places
/// stays two passages.
pub fn dedupe(passages: Vec<Passage>) -> Vec<Passage> {
    type Place = (usize, usize, Option<(usize, usize)>);
    let mut seen: HashSet<Place> = HashSet::new();
    passages
        .into_iter()
        .filter(|p| {
            seen.insert((
                p.lines.start,
                p.lines.end,
                p.chars.as_ref().map(|c| (c.start, c.end)),
            ))
        })
        .collect()
}

/// Why passages cannot be cut as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PassageError {
    /// A window of no lines.
    #[error("a window needs at least one line: `n` is 0")]
    EmptyWindow,
    /// Windows that overlap by as many lines as they hold would never advance.
    #[error("windows of {n} lines overlapping by {overlap} do not advance: `overlap` must be less than `n`")]
    NoStride {
        /// Lines a window.
        n: usize,
        /// Lines shared by consecutive windows.
        overlap: usize,
    },
}

/// Cuts a [`Source`] into [`Passage`]s; `Cutter::default()` is [`Cutter::new`].
///
/// ```
/// use contract_core::passage::{Cutter, PassageKind};
/// use contract_core::Source;
///
/// let source = Source::from_text(
///     "Insured: Northern Star Shipping\nCompany Limited\nPolicy No. 4471 starts today. It ends in May.",
/// );
/// let passages = Cutter::new().sentences(&source);
/// assert_eq!(passages[0].flat_text(), "Insured: Northern Star Shipping Company Limited");
/// assert_eq!(passages[1].text, "Policy No. 4471 starts today.");
/// assert_eq!(passages[1].kind, PassageKind::Sentence);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cutter {
    max_chars: usize,
    abbreviations: HashSet<String>,
}

impl Default for Cutter {
    fn default() -> Self {
        Cutter::new()
    }
}

/// Words written with a final `.` that does not end a sentence (compared in lowercase, without
/// the dot). Single letters (initials: `J. Smith`) and dotted acronyms (`U.S.`, `S.A.`) are
/// recognised without a list.
const ABBREVIATIONS: &[&str] = &[
    "inc", "co", "corp", "ltd", "llc", "plc", "bros", "no", "nos", "nr", "mr", "mrs", "ms", "dr",
    "prof", "st", "jr", "sr", "sra", "srta", "dña", "vs", "e.g", "i.e", "cf", "fig", "figs", "art",
    "arts", "sec", "secs", "para", "p", "pp", "vol", "ch", "approx", "dept", "est", "ref", "jan",
    "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "núm", "pág",
    "av", "avda", "cía", "ud", "uds",
];

/// Words a wrapped line may end with when the sentence goes on (conjunctions, articles,
/// prepositions; English and Spanish), compared in lowercase.
const JOINING_WORDS: &[&str] = &[
    "and",
    "or",
    "but",
    "nor",
    "of",
    "the",
    "a",
    "an",
    "to",
    "in",
    "on",
    "at",
    "for",
    "with",
    "by",
    "from",
    "as",
    "than",
    "that",
    "which",
    "who",
    "whose",
    "under",
    "between",
    "into",
    "per",
    "including",
    "plus",
    "its",
    "their",
    "our",
    "his",
    "her",
    "y",
    "o",
    "e",
    "u",
    "ni",
    "de",
    "del",
    "la",
    "el",
    "los",
    "las",
    "en",
    "con",
    "para",
    "por",
    "que",
    "un",
    "una",
    "al",
    "sin",
    "entre",
    "sobre",
    "su",
    "sus",
];

/// A line at least this share of the page's width (its 90th-percentile line length) was broken
/// by the wrapping, not by the writer ([`Cutter::sentences`]' paragraph rule).
const FULL_LINE: f64 = 0.7;
/// Pages whose lines are shorter than this (90th percentile, in characters) are not read as
/// wrapped prose: their short lines are entries (a form, a list, a table).
const MIN_PROSE_WIDTH: usize = 40;
/// Longest heading, in words ([`Cutter::sentences`]).
const MAX_HEADING_WORDS: usize = 8;
/// Longest heading, in characters.
const MAX_HEADING_CHARS: usize = 80;
/// Most words of a line that continues a name ([`Cutter::sentences`]' name rule).
const MAX_NAME_WORDS: usize = 4;
/// Fewest words of a sentence a heading is joined to ([`Cutter::sentences`]): prose, not the
/// value after a label (`TOTAL` / `8.00`) or the next heading.
const MIN_HEADED_WORDS: usize = 6;
/// Most words of a heading joined to the sentence it heads.
const MAX_HEADED_HEADING_WORDS: usize = 6;

impl Cutter {
    /// The default bound on a passage's length, in characters.
    pub const DEFAULT_MAX_CHARS: usize = 600;

    /// A cutter with passages of at most [`Cutter::DEFAULT_MAX_CHARS`] characters and the
    /// built-in abbreviations (English and Spanish: `Inc.`, `Co.`, `No.`, `Mr.`, `Sra.`, ..).
    pub fn new() -> Cutter {
        Cutter {
            max_chars: Self::DEFAULT_MAX_CHARS,
            abbreviations: ABBREVIATIONS.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// Passages of at most `n` characters (at least 1): a longer one is cut again.
    pub fn max_chars(mut self, n: usize) -> Cutter {
        self.max_chars = n.max(1);
        self
    }

    /// The bound on a passage's length, in characters.
    pub fn max_chars_limit(&self) -> usize {
        self.max_chars
    }

    /// Also reads `word.` (case ignored, with or without its final dot) as an abbreviation that
    /// does not end a sentence.
    pub fn abbreviation(mut self, word: &str) -> Cutter {
        let w = word.trim().trim_end_matches('.').to_lowercase();
        if !w.is_empty() {
            self.abbreviations.insert(w);
        }
        self
    }

    /// Every non-empty line, trimmed ([`PassageKind::Line`]); a line longer than
    /// [`Cutter::max_chars`] becomes [`PassageKind::Piece`]s.
    pub fn lines(&self, source: &Source) -> Vec<Passage> {
        let doc = Doc::new(source);
        let mut out = Vec::new();
        for i in 0..doc.lines.len() {
            if !doc.blank(i) {
                self.bounded(&doc, i..i + 1, PassageKind::Line, &mut out);
            }
        }
        out
    }

    /// Sentences and entries, wrapped lines joined.
    ///
    /// Lines are first grouped into blocks. A line starts a new block after a blank line or a
    /// page break, and when it is a list bullet (`-`, `*`, `•`), a numbered clause (`1.`, `3.2`,
    /// `(a)`, `iv)`, `1)`) or a heading (a markdown heading, `Section 3` / `Artículo 2`, a short
    /// line in capitals, a short title line whose longer words are capitalised). A heading is a
    /// block of its own (only a line that starts in lowercase joins it). Otherwise a line joins the line before it when that line does not end a
    /// sentence (no final `.`, `!`, `?`, `:` or `;`, a final abbreviation such as `Inc.` does
    /// not count) and
    /// - it starts with a lowercase letter; or
    /// - the line before ends with `,`, a hyphen, `&`, `/` or a joining word (`and`, `of`,
    ///   `the`, `y`, `de`, ..); or, unless it is a label line (`Policy number: ..`) or a line in
    ///   capitals after one that is not,
    /// - the line before fills the page's width (at least 70% of its 90th-percentile line
    ///   length, on pages whose lines reach 40 characters): prose wrapped at a fixed width; or
    /// - it is a short run of capitalised words (at most four) after a label line that ends in
    ///   a capitalised word: a name the OCR split (`Insured: Northern Star Shipping` /
    ///   `Company Limited`).
    ///
    /// Each block is then cut into sentences at `.`, `!` or `?` followed by whitespace and an
    /// uppercase letter (opening quotes or brackets allowed between), except after an
    /// abbreviation ([`Cutter::abbreviation`]), a single initial (`J.`), a dotted acronym
    /// (`U.S.`) or a clause number that opens the sentence (`1. Terrorism`). Every passage is a
    /// [`PassageKind::Sentence`]; one longer than [`Cutter::max_chars`] is cut at word
    /// boundaries into [`PassageKind::Piece`]s. Last, a run-in heading (`9. Governing Law.
    /// This Agreement ..`) is joined to the sentence of prose that follows it on its line, when
    /// the two fit the bound: a heading is read with what it heads.
    pub fn sentences(&self, source: &Source) -> Vec<Passage> {
        let doc = Doc::new(source);
        let mut out = Vec::new();
        let widths = doc.page_widths();
        for block in self.blocks(&doc, &widths) {
            let flat = Flat::of(&doc, block);
            for s in self.sentence_ranges(&flat.text) {
                self.emit(&doc, &flat, s, PassageKind::Sentence, &mut out);
            }
        }
        self.join_headings(&doc, &widths, out)
    }

    /// `passages` (sentences, in order) with each run-in heading joined to the sentence it
    /// heads: a heading sentence (`9. GOVERNING LAW.`, `(b) Term.`) on a page of prose (lines
    /// of at least [`MIN_PROSE_WIDTH`] characters: not a receipt or a form, whose lines in
    /// capitals are entries), that follows prose or another heading (or opens the document),
    /// followed on the line it ends on by a sentence of prose ([`is_prose_sentence`]), the two
    /// within [`Cutter::max_chars`]. Why: alone, a heading shares the words of a question about
    /// its section (`governing law`) and ranks with the clause, and a value copied from it is
    /// the heading itself; read with its clause, it names what the clause is about. A heading
    /// on a line of its own stays apart: joined, it is a line a whole-line quote can copy
    /// instead of the clause (on the filings releases, 25 of 40 right instead of 38: the model
    /// quoted `Outlook`).
    fn join_headings(
        &self,
        doc: &Doc<'_>,
        widths: &[usize],
        passages: Vec<Passage>,
    ) -> Vec<Passage> {
        let prose_page = |page: usize| widths.get(page).is_some_and(|&w| w >= MIN_PROSE_WIDTH);
        let mut out: Vec<Passage> = Vec::with_capacity(passages.len());
        let mut pending: Option<Passage> = None;
        // Whether the passage before is prose or a heading (or there is none): a short line
        // after a short entry is the next entry of a list (`War` / `Nuclear risks` / `Mould`).
        let mut after_prose = true;
        for p in passages {
            let heading = p.kind == PassageKind::Sentence
                && prose_page(p.page)
                && is_heading_sentence(&p.text);
            if let Some(head) = pending.take() {
                if head.lines.end - 1 == p.lines.start
                    && is_prose_sentence(&p)
                    && head.char_count() + 1 + p.char_count() <= self.max_chars
                {
                    out.push(joined(doc, &head, &p));
                    after_prose = true;
                    continue;
                }
                out.push(head);
            }
            if heading && after_prose {
                pending = Some(p);
                continue;
            }
            after_prose = heading || is_prose_sentence(&p);
            out.push(p);
        }
        out.extend(pending);
        out
    }

    /// Runs of `n` non-empty lines ([`PassageKind::Window`]), consecutive windows sharing
    /// `overlap` lines (each starts `n - overlap` non-empty lines after the one before; the last
    /// one ends at the last line). A window longer than [`Cutter::max_chars`] is cut into
    /// shorter runs of whole lines (a line too long alone into [`PassageKind::Piece`]s); the
    /// same place cut from two windows is kept once ([`dedupe`]).
    pub fn windows(
        &self,
        source: &Source,
        n: usize,
        overlap: usize,
    ) -> Result<Vec<Passage>, PassageError> {
        if n == 0 {
            return Err(PassageError::EmptyWindow);
        }
        if overlap >= n {
            return Err(PassageError::NoStride { n, overlap });
        }
        let doc = Doc::new(source);
        let filled: Vec<usize> = (0..doc.lines.len()).filter(|&i| !doc.blank(i)).collect();
        let mut out = Vec::new();
        let mut start = 0;
        while start < filled.len() {
            let end = (start + n).min(filled.len());
            self.bounded(
                &doc,
                filled[start]..filled[end - 1] + 1,
                PassageKind::Window,
                &mut out,
            );
            if end == filled.len() {
                break;
            }
            start += n - overlap;
        }
        Ok(dedupe(out))
    }

    /// One passage a page ([`PassageKind::Page`]), from its first to its last non-empty line;
    /// pages with no text give none. A page longer than [`Cutter::max_chars`] becomes
    /// consecutive runs of whole lines that fit ([`PassageKind::Window`], no overlap; a line
    /// too long alone becomes [`PassageKind::Piece`]s).
    pub fn pages(&self, source: &Source) -> Vec<Passage> {
        let doc = Doc::new(source);
        let mut out = Vec::new();
        for page in 1..=source.page_count() {
            let Some(range) = source.page_lines(page) else {
                continue;
            };
            let (a, b) = (range.start - 1, range.end - 1);
            let Some(first) = (a..b).find(|&i| !doc.blank(i)) else {
                continue;
            };
            let last = (a..b).rev().find(|&i| !doc.blank(i)).unwrap_or(first);
            self.bounded(&doc, first..last + 1, PassageKind::Page, &mut out);
        }
        out
    }

    /// Lines `range` (0-based) as one passage of `kind` when it fits, else as runs of lines that
    /// fit ([`PassageKind::Window`]), a line too long alone as pieces.
    fn bounded(
        &self,
        doc: &Doc<'_>,
        range: Range<usize>,
        kind: PassageKind,
        out: &mut Vec<Passage>,
    ) {
        let flat = Flat::of(doc, range.clone());
        if flat.chars <= self.max_chars {
            self.emit(doc, &flat, 0..flat.text.len(), kind, out);
            return;
        }
        if range.len() == 1 {
            self.emit(doc, &flat, 0..flat.text.len(), kind, out);
            return;
        }
        // Greedy runs of whole lines; a run's length counts one character per line break.
        let mut run: Option<(usize, usize)> = None; // (first line, chars so far)
        let flush = |run: &mut Option<(usize, usize)>, end: usize, out: &mut Vec<Passage>| {
            if let Some((first, _)) = run.take() {
                let f = Flat::of(doc, first..end);
                self.emit(doc, &f, 0..f.text.len(), PassageKind::Window, out);
            }
        };
        let mut last_filled = range.start;
        for i in range.clone() {
            if doc.blank(i) {
                continue;
            }
            let len = doc.chars(i);
            if len > self.max_chars {
                flush(&mut run, last_filled + 1, out);
                let f = Flat::of(doc, i..i + 1);
                self.emit(doc, &f, 0..f.text.len(), PassageKind::Piece, out);
            } else {
                // Blank lines between count one break each.
                match run {
                    Some((first, used)) if used + (i - last_filled) + len <= self.max_chars => {
                        run = Some((first, used + (i - last_filled) + len));
                    }
                    _ => {
                        flush(&mut run, last_filled + 1, out);
                        run = Some((i, len));
                    }
                }
            }
            last_filled = i;
        }
        flush(&mut run, last_filled + 1, out);
    }

    /// The passage for bytes `span` of `flat`'s text, tightened to its non-whitespace, cut at
    /// word boundaries when it is longer than the bound (those pieces are
    /// [`PassageKind::Piece`]s).
    fn emit(
        &self,
        doc: &Doc<'_>,
        flat: &Flat,
        span: Range<usize>,
        kind: PassageKind,
        out: &mut Vec<Passage>,
    ) {
        let Some(span) = tighten(&flat.text, span) else {
            return;
        };
        let text = &flat.text[span.clone()];
        if text.chars().count() <= self.max_chars {
            out.push(flat_passage(flat, doc, span, kind));
            return;
        }
        for piece in cut_words(text, self.max_chars) {
            let abs = span.start + piece.start..span.start + piece.end;
            out.push(flat_passage(flat, doc, abs, PassageKind::Piece));
        }
    }

    /// The blocks of [`Cutter::sentences`]: 0-based half-open line ranges.
    /// `widths`: [`Doc::page_widths`].
    fn blocks(&self, doc: &Doc<'_>, widths: &[usize]) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut current: Option<(usize, bool)> = None; // (first line, is a heading)
        let mut prev = 0usize;
        for i in 0..doc.lines.len() {
            if doc.blank(i) {
                if let Some((first, _)) = current.take() {
                    out.push(first..prev + 1);
                }
                continue;
            }
            let line = doc.trimmed(i);
            let joins = match current {
                Some((_, heading)) => {
                    (!heading || starts_lowercase(line))
                        && doc.pages[i] == doc.pages[prev]
                        && self.continues(
                            doc.trimmed(prev),
                            line,
                            widths.get(doc.pages[prev]).copied().unwrap_or(0),
                        )
                }
                None => false,
            };
            if !joins {
                if let Some((first, _)) = current.take() {
                    out.push(first..prev + 1);
                }
                current = Some((i, is_heading(line)));
            }
            prev = i;
        }
        if let Some((first, _)) = current {
            out.push(first..prev + 1);
        }
        out
    }

    /// Whether `next` continues the entry `prev` (the last line of the block so far) is part of.
    fn continues(&self, prev: &str, next: &str, width: usize) -> bool {
        if is_list_item(next)
            || is_numbered_section(next)
            || is_keyword_heading(next)
            || is_markdown_heading(next)
        {
            return false;
        }
        if self.ends_sentence(prev) {
            return false;
        }
        if starts_lowercase(next) {
            return true;
        }
        if ends_open(prev) {
            return true;
        }
        if is_label(next) {
            return false;
        }
        let last_word = prev.split_whitespace().next_back().unwrap_or("");
        if is_capitals(next) && next.chars().count() <= MAX_HEADING_CHARS && !is_capitals(last_word)
        {
            return false;
        }
        if width >= MIN_PROSE_WIDTH && prev.chars().count() as f64 >= FULL_LINE * width as f64 {
            return true;
        }
        // A name the OCR split after a label: `Insured: Northern Star Shipping` / `Company Limited`.
        let capitalised = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
        let words: Vec<&str> = next.split_whitespace().collect();
        is_label(prev)
            && capitalised(last_word)
            && words.len() <= MAX_NAME_WORDS
            && words
                .iter()
                .all(|w| capitalised(w) || w.chars().next().is_some_and(|c| c.is_ascii_digit()))
    }

    /// Whether a line ends a sentence: a final `.`, `!`, `?`, `:` or `;` (closing quotes and
    /// brackets looked through), not a `.` that closes an abbreviation.
    fn ends_sentence(&self, line: &str) -> bool {
        let body = line.trim_end_matches(['"', '\'', ')', ']', '”', '’', '»']);
        match body.chars().next_back() {
            Some('!' | '?' | ':' | ';') => true,
            Some('.') => !self.is_abbreviation(&body[..body.len() - 1]),
            _ => false,
        }
    }

    /// Whether the word that ends `before` (the text before a `.`) is an abbreviation.
    fn is_abbreviation(&self, before: &str) -> bool {
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace() || matches!(c, '(' | '"' | '“' | '\''))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let word = &before[start..];
        if word.is_empty() {
            return false;
        }
        let mut chars = word.chars();
        // A single initial: `J.`
        if let (Some(c), None) = (chars.next(), chars.next()) {
            return c.is_alphabetic();
        }
        // A dotted acronym: `U.S`, `S.A`, `e.g`.
        if word.contains('.')
            && word
                .split('.')
                .all(|p| p.chars().count() <= 2 && p.chars().all(char::is_alphabetic))
        {
            return true;
        }
        self.abbreviations.contains(&word.to_lowercase())
    }

    /// Byte ranges of the sentences of `text` (a block), covering it.
    fn sentence_ranges(&self, text: &str) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, c) in text.char_indices() {
            if !matches!(c, '.' | '!' | '?') || i < start {
                continue;
            }
            // Closing quotes or brackets, then whitespace, then (opening quotes) an uppercase letter.
            let mut j = i + 1;
            let rest = &text[j..];
            let closing = rest
                .find(|c: char| !matches!(c, '"' | '\'' | ')' | ']' | '”' | '’' | '»'))
                .unwrap_or(rest.len());
            j += closing;
            let end = j;
            let ws = text[j..]
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(text.len() - j);
            if ws == 0 {
                continue;
            }
            j += ws;
            let opening = text[j..]
                .find(|c: char| !matches!(c, '"' | '\'' | '(' | '[' | '“' | '‘' | '«' | '¿' | '¡'))
                .unwrap_or(text.len() - j);
            let next = text[j + opening..].chars().next();
            if !next.is_some_and(char::is_uppercase) {
                continue;
            }
            if c == '.' && (self.is_abbreviation(&text[start..i]) || is_marker(&text[start..i])) {
                continue;
            }
            out.push(start..end);
            start = j;
        }
        if start < text.len() {
            out.push(start..text.len());
        }
        out
    }
}

/// Whether `head` (a sentence so far, before a `.`) is only a clause number: `1`, `3.2`, `iv`.
fn is_marker(head: &str) -> bool {
    let head = head.trim();
    !head.is_empty()
        && (head.chars().all(|c| c.is_ascii_digit() || c == '.')
            || (head.len() <= 6 && head.chars().all(|c| "ivxlcIVXLC".contains(c))))
}

/// Whether a line is a heading: a markdown heading, `Section 3` and the like without final
/// punctuation, or a short line in capitals, or a short title line (no final punctuation, every
/// word of four or more letters capitalised); never a label line.
fn is_heading(line: &str) -> bool {
    if is_markdown_heading(line) {
        return true;
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let short = words.len() <= MAX_HEADING_WORDS && line.chars().count() <= MAX_HEADING_CHARS;
    if !short || is_label(line) {
        return false;
    }
    let open_end = line.ends_with(['.', ',', ';', ':', '!', '?']);
    if is_keyword_heading(line) {
        return !open_end;
    }
    if is_capitals(line) {
        return true;
    }
    if open_end || is_list_item(line) || is_numbered_section(line) {
        return false;
    }
    let capitalised = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
    words.first().is_some_and(|w| capitalised(w))
        && words
            .iter()
            .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 4)
            .all(|w| capitalised(w))
}

/// Whether `text` (one sentence) is only a heading: on one line, a clause number (`9.`,
/// `(a)`) allowed before it and a final `.` or `:` after it, the rest a heading ([`is_heading`]).
fn is_heading_sentence(text: &str) -> bool {
    if text.contains('\n') {
        return false;
    }
    let mut body = text.trim();
    if let Some((first, rest)) = body.split_once(char::is_whitespace) {
        if is_numbered_section(first)
            || is_list_item(body)
            || is_marker(first.trim_end_matches('.'))
        {
            body = rest.trim_start();
        }
    }
    let body = body.trim_end_matches(['.', ':']).trim_end();
    !body.is_empty()
        && !body.contains(['.', ':', ';', ','])
        && body.split_whitespace().count() <= MAX_HEADED_HEADING_WORDS
        && is_heading(body)
}

/// Whether `p` is a sentence of prose: at least [`MIN_HEADED_WORDS`] words, not an entry after
/// a label (`Insured: Northern Star Shipping Company Limited`).
fn is_prose_sentence(p: &Passage) -> bool {
    p.kind == PassageKind::Sentence
        && p.text.split_whitespace().count() >= MIN_HEADED_WORDS
        && !p.text.split('\n').next().is_some_and(is_label)
}

/// `head` and `body` (the passage right after it, starting on the line `head` ends on) as one
/// passage: that line from the heading on, then the body's later lines.
fn joined(doc: &Doc<'_>, head: &Passage, body: &Passage) -> Passage {
    let line = head.lines.start - 1;
    let raw = doc.lines.get(line).copied().unwrap_or("");
    let lead = raw.len() - raw.trim_start().len();
    let line_end = lead + raw.trim().len();
    let head_start = head.chars.as_ref().map_or(lead, |c| c.start);
    let first_part = body.text.split('\n').next().unwrap_or("");
    let body_start = body
        .chars
        .as_ref()
        .map_or(line_end.saturating_sub(first_part.len()), |c| c.start);
    let before = raw.get(head_start..body_start).unwrap_or("");
    let chars = match &body.chars {
        Some(c) if body.lines.len() == 1 => {
            let whole = head_start == lead && c.end == line_end;
            (!whole).then_some(head_start..c.end)
        }
        _ => None,
    };
    Passage {
        lines: head.lines.start..body.lines.end,
        chars,
        page: head.page,
        text: format!("{before}{}", body.text),
        kind: PassageKind::Sentence,
    }
}

fn starts_lowercase(line: &str) -> bool {
    line.chars().next().is_some_and(char::is_lowercase)
}

/// `Policy number: 4471`, `Insured:`: one to four words, then `:` and a space or the end.
fn is_label(line: &str) -> bool {
    let Some(i) = line.find(':') else {
        return false;
    };
    let (head, rest) = (&line[..i], &line[i + 1..]);
    let words = head.split_whitespace().count();
    (1..=4).contains(&words)
        && head.chars().any(char::is_alphabetic)
        && head.chars().next().is_some_and(|c| !c.is_lowercase())
        && (rest.is_empty() || rest.starts_with(char::is_whitespace))
}

/// Whether a line ends open: a comma, a hyphen or dash, `&`, `/`, an opening bracket, or a
/// joining word.
fn ends_open(line: &str) -> bool {
    if line.ends_with([',', '-', '–', '—', '&', '/', '(', '[']) {
        return true;
    }
    let last = line.split_whitespace().next_back().unwrap_or("");
    JOINING_WORDS.contains(&last.to_lowercase().as_str())
}

/// The passage for bytes `span` (no whitespace at its ends) of `flat`'s text.
fn flat_passage(flat: &Flat, doc: &Doc<'_>, span: Range<usize>, kind: PassageKind) -> Passage {
    let (s_off, s_line, s_lead) = flat.seg(span.start);
    let (e_off, e_line, e_lead) = flat.seg(span.end.saturating_sub(1).max(span.start));
    let chars = (s_line == e_line).then(|| {
        let a = s_lead + (span.start - s_off);
        let b = e_lead + (span.end - e_off);
        a..b
    });
    let whole = chars
        .as_ref()
        .is_some_and(|c| c.len() == doc.trimmed(s_line).len());
    Passage {
        lines: s_line + 1..e_line + 2,
        chars: if whole { None } else { chars },
        page: doc.pages.get(s_line).copied().unwrap_or(1),
        text: flat.text[span].to_owned(),
        kind,
    }
}

#[cfg(test)]
mod tests;
