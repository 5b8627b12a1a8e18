//! Documents longer than the model's budget, read in overlapping chunks and merged.
//!
//! With a budget ([`Extractor::budget`](crate::Extractor::budget)), a document whose prompt does
//! not fit is no longer cut (unless [`Overflow::Cut`] asks for it): [`plan_chunks`] cuts it into
//! chunks of whole lines whose prompts fit, each overlapping the one before, so a record that
//! straddles a chunk's end is read whole by the next one; a single line longer than the budget
//! is cut into pieces of that line. Every chunk is asked for the whole contract under a mask
//! grounded in that chunk alone (the model is never offered text it was not shown), and
//! [`merge_chunks`] puts the replies together: a list's items in document order without
//! repeats (the same item read by two chunks in their overlap is one item, its evidence spans
//! joined), any other field from the first chunk that gives it, the values other chunks gave
//! kept as [`Conflict`]s. A list's completeness is decided by the overlap, in code: it is
//! [`Completeness::Truncated`] when a chunk gave no valid reply or when an item that ends at a
//! chunk's last line is not read again by the next chunk (it may be cut there). A chunk the
//! backend did not answer makes the extraction an error instead (the extractor's rule, as for a
//! group under evidence selection): its fields would otherwise read as unstated.
//!
//! Why the chunk search is written here and not taken from a text splitter: chunks must fit a
//! prompt measured with the model's own tokenizer, template and instructions included
//! (`text-splitter`-style crates count tokens of the chunk alone and cut inside lines, which
//! would break the document's line numbers that evidence spans cite).

use std::ops::Range;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::ir::ContractSpec;
use crate::prompt::{
    push_numbered_line, user_message, Budget, BudgetError, PromptParts, Tokenizer,
};
use crate::source::{Completeness, Source};

/// What the extractor does with a document whose prompt is longer than its budget
/// ([`Extractor::overflow`](crate::Extractor::overflow)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Overflow {
    /// Reads the document in chunks whose prompts fit the budget (three quarters of it when
    /// the extractor retries, the rest left for a retry's reply and feedback), each starting
    /// up to `overlap_lines` lines before the end of the one before (never more than half of
    /// it), and merges the replies ([`merge_chunks`]). The default, with 4 lines.
    Chunks {
        /// Lines each chunk shares with the one before.
        overlap_lines: usize,
    },
    /// Keeps the head of the document that fits and drops the rest, counted in the record's
    /// `dropped_tokens` and `dropped_lines`; grounded values are held to the text kept.
    Cut,
}

impl Default for Overflow {
    fn default() -> Self {
        Overflow::Chunks { overlap_lines: 4 }
    }
}

/// One chunk of a document: a range of its lines, or a piece of one line too long for the
/// budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chunk {
    /// The lines, 1-based and half-open (`3..5` is lines 3 and 4).
    pub lines: Range<usize>,
    /// For a piece of one long line: its byte range within the line.
    pub chars: Option<Range<usize>>,
}

impl Chunk {
    /// The chunk as [`Source::excerpt`] takes it.
    pub fn keep(&self) -> (Range<usize>, Option<Range<usize>>) {
        (self.lines.clone(), self.chars.clone())
    }

    /// Its first and last line (inclusive).
    pub fn first_last(&self) -> [usize; 2] {
        [
            self.lines.start,
            self.lines.end.saturating_sub(1).max(self.lines.start),
        ]
    }
}

/// The tokens of the prompt that shows `numbered` (a numbered document) with `parts`, measured
/// as [`PromptParts::fit_messages`] measures it: system message, a separator, the user message,
/// plus the template's overhead for two messages.
fn prompt_tokens(
    parts: &PromptParts,
    numbered: &str,
    budget: Budget,
    tok: &dyn Tokenizer,
) -> usize {
    budget.tokens(
        &[&parts.system, &user_message(numbered, &parts.question)],
        tok,
    )
}

/// Lines `lines` of `source`, the blank ones left out, numbered as the prompt numbers them.
fn numbered_lines(source: &Source, lines: Range<usize>) -> String {
    let mut out = String::new();
    for n in lines {
        if let Some(line) = source.line(n).filter(|l| !l.trim().is_empty()) {
            push_numbered_line(&mut out, n, line);
        }
    }
    out
}

/// The largest `x` in `lo..=hi` with `ok(x)`, given `ok(lo)` and `ok` monotone (true, then
/// false).
fn largest(lo: usize, hi: usize, ok: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Cuts `source` into chunks whose prompts (the `parts`' instructions and question around the
/// chunk's numbered lines, blank lines left out as in an excerpt) fit `budget` in `tok`'s
/// tokens. Chunks are whole lines, in order, covering every non-blank line; each starts up to
/// `overlap_lines` lines before the end of the one before, never more than half of it back, so
/// the document is read in about `total / (budget - instructions)` chunks however large the
/// overlap asked. A line too long for the budget on its own is cut into pieces (at a space
/// where one is near), each overlapping the one before by an eighth of it.
///
/// Cost: a binary search per chunk, each probe one `encode` of a prompt about the budget's
/// size. Errors when the instructions and question leave no room for a single character of the
/// document.
pub fn plan_chunks(
    parts: &PromptParts,
    source: &Source,
    budget: Budget,
    tok: &dyn Tokenizer,
    overlap_lines: usize,
) -> Result<Vec<Chunk>, BudgetError> {
    let n = source.line_count();
    let fits = |numbered: &str| prompt_tokens(parts, numbered, budget, tok) <= budget.max_tokens;
    let lines_fit = |a: usize, b: usize| fits(&numbered_lines(source, a..b));
    let mut chunks = Vec::new();
    // Lines before `covered` are in a chunk.
    let (mut start, mut covered) = (1usize, 1usize);
    while covered <= n {
        if !lines_fit(start, start + 1) {
            if start < covered {
                start = covered;
                continue;
            }
            chunks.extend(line_pieces(
                source,
                start,
                &fits,
                || prompt_tokens(parts, "", budget, tok) + 1,
                budget,
            )?);
            covered = start + 1;
            start = covered;
            continue;
        }
        let end = largest(start + 1, n + 1, |e| lines_fit(start, e));
        if end <= covered {
            start = covered;
            continue;
        }
        if (start..end).any(|l| source.line(l).is_some_and(|t| !t.trim().is_empty())) {
            chunks.push(Chunk {
                lines: start..end,
                chars: None,
            });
        }
        covered = end;
        if end > n {
            break;
        }
        start = end
            .saturating_sub(overlap_lines)
            .max(start + (end - start).div_ceil(2));
    }
    Ok(chunks)
}

/// Line `l` of `source` cut into pieces whose prompts fit.
fn line_pieces(
    source: &Source,
    l: usize,
    fits: &dyn Fn(&str) -> bool,
    needed: impl Fn() -> usize,
    budget: Budget,
) -> Result<Vec<Chunk>, BudgetError> {
    let text = source.line(l).unwrap_or("");
    let boundary = |mut at: usize| {
        at = at.min(text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let piece_fits = |a: usize, b: usize| {
        let mut out = String::new();
        push_numbered_line(&mut out, l, text.get(a..b).unwrap_or(""));
        fits(&out)
    };
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let first = boundary(at + text[at..].chars().next().map_or(1, char::len_utf8));
        if !piece_fits(at, first) {
            return Err(BudgetError::FixedPartsTooLong {
                needed: needed(),
                available: budget.max_tokens,
            });
        }
        let mut end = largest(first, text.len(), |b| piece_fits(at, boundary(b)));
        end = boundary(end);
        if end < text.len() {
            // End at a space when one is in the piece's last fifth.
            let floor = at + (end - at) * 4 / 5;
            if let Some(space) = text[..end].rfind(' ').filter(|&s| s > floor) {
                end = space + 1;
            }
        }
        pieces.push(Chunk {
            lines: l..l + 1,
            chars: Some(at..end),
        });
        if end >= text.len() {
            break;
        }
        let back = boundary(end - (end - at) / 8);
        at = if back > at { back } else { end };
    }
    Ok(pieces)
}

/// How one chunk went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkPart {
    /// Its first and last line.
    pub lines: [usize; 2],
    /// For a piece of one long line: its byte range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chars: Option<[usize; 2]>,
    /// Whether its reply filled the contract.
    pub filled: bool,
    /// Requests made for it.
    pub attempts: usize,
}

/// How one list field was merged across chunks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListMerge {
    /// The field's JSON name.
    pub field: String,
    /// Items in the merged list.
    pub items: usize,
    /// Items left out as repeats of one already in (read by two chunks in their overlap).
    pub repeats: usize,
    /// Whether the list is complete, decided from the chunks' overlaps.
    pub completeness: Completeness,
}

/// A field that chunks gave different values for: the merged record keeps the first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conflict {
    /// The field's JSON name.
    pub field: String,
    /// The chunk (0-based) whose value was kept.
    pub kept: usize,
    /// The other chunks' values: chunk (0-based) and value.
    pub others: Vec<(usize, Value)>,
}

/// How a document was read in chunks: part of the [`Extraction`](crate::Extraction).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkRecord {
    /// Lines each chunk was asked to share with the one before.
    pub overlap_lines: usize,
    /// Every chunk, in order.
    pub chunks: Vec<ChunkPart>,
    /// Every list field's merge.
    pub lists: Vec<ListMerge>,
    /// Fields chunks disagreed on.
    pub conflicts: Vec<Conflict>,
}

/// The chunks' replies (`values[i]` of `chunks[i]`, `None` when it gave no valid reply) merged
/// into one object of `spec`: each list field's items in chunk order with repeats left out
/// (compared as [`merge_lists`](crate::select::merge_lists) compares them; a repeat's evidence
/// spans joined to the item kept), each other field from the first chunk whose value is not
/// null. Returns the object, each list's merge and the conflicts.
pub fn merge_chunks(
    spec: &ContractSpec,
    source: &Source,
    chunks: &[Chunk],
    values: &[Option<Map<String, Value>>],
) -> (Value, Vec<ListMerge>, Vec<Conflict>) {
    let mut out = Map::new();
    let mut lists = Vec::new();
    let mut conflicts = Vec::new();
    let Some(object) = spec.object() else {
        return (Value::Object(out), lists, conflicts);
    };
    for f in &object.properties {
        let field_of = |i: usize| values.get(i)?.as_ref()?.get(&f.name);
        if f.node.non_null().array.is_some() {
            let (value, merge) = merge_list(&f.name, source, chunks, values, f.node.is_nullable());
            out.insert(f.name.clone(), value);
            lists.push(merge);
            continue;
        }
        let given: Vec<(usize, &Value)> = (0..chunks.len())
            .filter_map(|i| field_of(i).filter(|v| !v.is_null()).map(|v| (i, v)))
            .collect();
        match given.first() {
            Some(&(kept, value)) => {
                let key = crate::select::item_key(value);
                let others: Vec<(usize, Value)> = given[1..]
                    .iter()
                    .filter(|(_, v)| crate::select::item_key(v) != key)
                    .map(|(i, v)| (*i, (*v).clone()))
                    .collect();
                if !others.is_empty() {
                    conflicts.push(Conflict {
                        field: f.name.clone(),
                        kept,
                        others,
                    });
                }
                out.insert(f.name.clone(), value.clone());
            }
            None => {
                out.insert(f.name.clone(), Value::Null);
            }
        }
    }
    (Value::Object(out), lists, conflicts)
}

/// One list field merged across chunks, with its completeness.
fn merge_list(
    field: &str,
    source: &Source,
    chunks: &[Chunk],
    values: &[Option<Map<String, Value>>],
    nullable: bool,
) -> (Value, ListMerge) {
    let mut items: Vec<Value> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut repeats = 0;
    let mut any = false;
    // Per chunk: each item's key and last line.
    let mut read: Vec<Vec<(String, Option<usize>)>> = vec![Vec::new(); chunks.len()];
    let mut reasons: Vec<String> = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let Some(map) = values.get(i).and_then(Option::as_ref) else {
            let [a, b] = chunk.first_last();
            reasons.push(format!(
                "chunk {} (lines {a}-{b}) gave no valid reply: its items are missing",
                i + 1
            ));
            continue;
        };
        let Some(Value::Array(xs)) = map.get(field) else {
            continue;
        };
        any = true;
        for x in xs {
            let key = crate::select::item_key(x);
            read[i].push((key.clone(), item_last_line(x, source, chunk)));
            match keys.iter().position(|k| *k == key) {
                Some(j) => {
                    repeats += 1;
                    join_evidence(&mut items[j], x);
                }
                None => {
                    keys.push(key);
                    items.push(x.clone());
                }
            }
        }
    }
    for (i, pair) in chunks.windows(2).enumerate() {
        let (Some(_), Some(_)) = (
            values.get(i).and_then(Option::as_ref),
            values.get(i + 1).and_then(Option::as_ref),
        ) else {
            continue;
        };
        let last = pair[0].first_last()[1];
        for (key, line) in &read[i] {
            if *line == Some(last) && !read[i + 1].iter().any(|(k, _)| k == key) {
                let [a, b] = pair[1].first_last();
                reasons.push(format!(
                    "an item at line {last}, the end of chunk {}, was not read again by chunk {} \
                     (lines {a}-{b}): it may be cut there",
                    i + 1,
                    i + 2
                ));
            }
        }
    }
    let completeness = if reasons.is_empty() {
        Completeness::Complete {
            reason: if chunks.len() > 1 {
                format!(
                    "all {} chunks read; every item at a chunk's end read again by the next",
                    chunks.len()
                )
            } else {
                "one chunk".to_owned()
            },
        }
    } else {
        Completeness::Truncated {
            reason: reasons.join("; "),
        }
    };
    let value = if !any && nullable {
        Value::Null
    } else {
        Value::Array(items)
    };
    let merge = ListMerge {
        field: field.to_owned(),
        items: value.as_array().map_or(0, Vec::len),
        repeats,
        completeness,
    };
    (value, merge)
}

/// The last line an item was read from: its evidence spans' last line, else the last line of
/// the chunk that holds its longest string.
fn item_last_line(item: &Value, source: &Source, chunk: &Chunk) -> Option<usize> {
    if let Some(Value::Array(spans)) = item.get("evidence") {
        return spans
            .iter()
            .filter_map(|s| s.get("end_line")?.as_u64())
            .map(|l| l as usize)
            .max();
    }
    let mut strings = Vec::new();
    collect_strings(item, &mut strings, 0);
    let longest = strings
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .max_by_key(|s| s.len())?;
    let needle = crate::source::normalize(longest);
    chunk.lines.clone().rev().find(|&l| {
        source
            .line(l)
            .is_some_and(|t| crate::source::normalize(t).contains(&needle))
    })
}

fn collect_strings<'v>(v: &'v Value, out: &mut Vec<&'v str>, depth: usize) {
    if depth > 16 {
        return;
    }
    match v {
        Value::String(s) => out.push(s),
        Value::Array(xs) => xs.iter().for_each(|x| collect_strings(x, out, depth + 1)),
        Value::Object(m) => m.values().for_each(|x| collect_strings(x, out, depth + 1)),
        _ => {}
    }
}

/// Joins `repeat`'s evidence spans into `kept`'s (both evidenced items), each span once.
fn join_evidence(kept: &mut Value, repeat: &Value) {
    let Some(Value::Array(more)) = repeat.get("evidence") else {
        return;
    };
    let Some(Value::Array(spans)) = kept.get_mut("evidence") else {
        return;
    };
    let lines = |s: &Value| (s.get("start_line").cloned(), s.get("end_line").cloned());
    for span in more {
        if !spans.iter().any(|s| lines(s) == lines(span)) {
            spans.push(span.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per whitespace-separated word, plus one per line break.
    struct Words;

    impl Tokenizer for Words {
        fn encode(&self, text: &str) -> Vec<u32> {
            let words = text.split_whitespace().count();
            let breaks = text.matches('\n').count();
            vec![0; words + breaks]
        }
        fn decode(&self, _: &[u32]) -> String {
            String::new()
        }
    }

    fn parts() -> PromptParts {
        PromptParts {
            system: "Fill the contract.".into(),
            question: "Reply.".into(),
        }
    }

    #[test]
    fn chunks_fit_cover_every_line_and_overlap() {
        let text: String = (1..=200)
            .map(|i| format!("line {i} with some words in it\n"))
            .collect();
        let source = Source::from_text(&text);
        let budget = Budget::new(150);
        let chunks = plan_chunks(&parts(), &source, budget, &Words, 3).unwrap();
        assert!(chunks.len() > 5, "{}", chunks.len());
        let mut seen = vec![false; 201];
        for (i, c) in chunks.iter().enumerate() {
            let numbered = numbered_lines(&source, c.lines.clone());
            assert!(prompt_tokens(&parts(), &numbered, budget, &Words) <= 150);
            c.lines.clone().for_each(|l| seen[l] = true);
            if i > 0 {
                // Three lines shared with the chunk before.
                assert_eq!(chunks[i - 1].lines.end - c.lines.start, 3);
            }
        }
        assert!(seen[1..].iter().all(|&s| s));
    }

    #[test]
    fn a_long_line_is_cut_into_pieces_and_nothing_fits_is_an_error() {
        let long: String = (0..400).map(|i| format!("w{i} ")).collect();
        let text = format!("short\n{long}\nafter\n");
        let source = Source::from_text(&text);
        let chunks = plan_chunks(&parts(), &source, Budget::new(80), &Words, 2).unwrap();
        let pieces: Vec<&Chunk> = chunks.iter().filter(|c| c.chars.is_some()).collect();
        assert!(pieces.len() > 5);
        // The pieces cover the line, each overlapping the one before, cut at spaces.
        let line = source.line(2).unwrap();
        let mut end = 0;
        for p in &pieces {
            let r = p.chars.clone().unwrap();
            assert!(r.start <= end && r.end > end, "{r:?} after {end}");
            assert!(r.end == line.len() || line[..r.end].ends_with(' '));
            end = r.end;
        }
        assert_eq!(end, line.len());
        assert!(chunks.last().unwrap().lines.contains(&3));
        let err = plan_chunks(&parts(), &source, Budget::new(5), &Words, 2).unwrap_err();
        assert!(matches!(
            err,
            BudgetError::FixedPartsTooLong { available: 5, .. }
        ));
    }
}
