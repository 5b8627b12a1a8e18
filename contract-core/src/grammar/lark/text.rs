//! Lark text: literals, alternations, the document cut into windows and chunks, and substring
//! terminals over them. Apart from the renderer, which decides which text a value is drawn from.

use super::limits::{EXACT_LENGTH_BUDGET, MAX_OFFERED_CHARS, MAX_WINDOW_ALTERNATIVES};
use crate::ground::{GroundText, Grounds, MAX_VALUE_LINES};

/// The text a value is drawn from.
#[derive(Clone, Copy)]
pub(super) enum Text<'t> {
    /// The whole document, one substring alternative per line.
    Document,
    /// The whole document, a string being one of its whole lines.
    Lines,
    /// A decoded value's text (or a line range).
    Of(&'t GroundText),
    /// Nothing: only null fits.
    Empty,
}

pub(super) fn place(text: Option<Text<'_>>, grounds: &Grounds<'_>) -> String {
    match text {
        Some(Text::Of(t)) => t.place.clone(),
        Some(Text::Empty) => "an empty or null field".into(),
        Some(Text::Document | Text::Lines) | None => grounds.document().place.clone(),
    }
}

pub(super) fn alternation(alts: Vec<String>) -> Option<String> {
    match alts.len() {
        0 => None,
        1 => alts.into_iter().next(),
        _ => Some(format!("({})", alts.join(" | "))),
    }
}

/// A Lark string literal.
pub(super) fn lit(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// `text` as it appears inside a JSON string, without the quotes.
pub(super) fn json_str(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn escaped(text: &str) -> String {
    let s = json_str(text);
    s[1..s.len() - 1].to_owned()
}

/// The texts a string grounded in the document is a substring of: one per window of up to
/// [`MAX_VALUE_LINES`] consecutive lines, none blank (each trimmed), the lines joined by one
/// space (a value may cross a line break, written as a space, and cannot run on through the
/// document nor across a blank line), without repeats; and whether a value must stay within one
/// line. A document with more than [`MAX_WINDOW_ALTERNATIVES`] windows, or windows of more than
/// [`MAX_OFFERED_CHARS`] characters in all, gives its lines instead, to be offered as one text
/// with a line break between them that a value may not cross (one substring terminal compiles
/// in time linear in its text; windows repeat each line up to [`MAX_VALUE_LINES`] times).
pub(super) fn document_windows(raw: &str) -> (Vec<String>, bool) {
    // Runs of consecutive non-blank lines, trimmed.
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    for line in raw.lines().map(str::trim) {
        if line.is_empty() {
            if !block.is_empty() {
                blocks.push(std::mem::take(&mut block));
            }
        } else {
            block.push(line);
        }
    }
    if !block.is_empty() {
        blocks.push(block);
    }
    let k = MAX_VALUE_LINES.max(1);
    let starts = |b: &Vec<&str>| b.len().saturating_sub(k) + 1;
    let count: usize = blocks.iter().map(starts).sum();
    let total: usize = blocks
        .iter()
        .flatten()
        .map(|l| l.len() + 1)
        .sum::<usize>()
        .saturating_mul(k);
    if count > MAX_WINDOW_ALTERNATIVES || total > MAX_OFFERED_CHARS {
        return (
            blocks.into_iter().flatten().map(str::to_owned).collect(),
            true,
        );
    }
    let mut seen = std::collections::HashSet::new();
    let windows = blocks
        .iter()
        .flat_map(|b| (0..starts(b)).map(move |i| b[i..(i + k).min(b.len())].join(" ")))
        .filter(|w| seen.insert(w.clone()))
        .collect();
    (windows, false)
}

/// The chunk lists (escaped) of the substring alternatives that offer the substrings of
/// `texts` a string of at most `max_len` characters may be, and whether the bound must still be
/// intersected with them (`& /.{1,max}/`). Texts no longer than the bound need no bound. While
/// the texts longer than it hold at most [`EXACT_LENGTH_BUDGET`] / `max_len` characters, they
/// are kept whole and the bound is intersected (exact); beyond, each is cut into pieces of at
/// most `max_len` characters that overlap by at least half of it ([`pieces`]): every substring of
/// up to `max_len / 2` characters lies in one of them, longer ones where they fit one, none is
/// longer than the bound, and compiling stays linear in the text.
pub(super) fn substring_alternatives(
    texts: &[String],
    max_len: Option<u64>,
) -> (Vec<Vec<String>>, bool) {
    let raw: Vec<Vec<&str>> = texts
        .iter()
        .map(|t| raw_chunks(t))
        .filter(|c| !c.is_empty())
        .collect();
    let escape = |lists: Vec<Vec<&str>>| -> Vec<Vec<String>> {
        lists
            .into_iter()
            .map(|c| c.into_iter().map(escaped).collect())
            .collect()
    };
    let Some(max) = max_len.map(|m| usize::try_from(m).unwrap_or(usize::MAX)) else {
        return (escape(raw), false);
    };
    let chars = |c: &[&str]| c.iter().map(|x| x.chars().count()).sum::<usize>();
    let long: usize = raw.iter().map(|c| chars(c)).filter(|&n| n > max).sum();
    if long == 0 {
        return (escape(raw), false);
    }
    if long.saturating_mul(max) <= EXACT_LENGTH_BUDGET {
        return (escape(raw), true);
    }
    let mut out = Vec::new();
    for c in raw {
        if chars(&c) <= max {
            out.push(c);
        } else {
            out.extend(pieces(&c, max));
        }
    }
    (escape(out), false)
}

/// `chunks` cut into runs of at most `max` characters, consecutive runs overlapping by at least
/// `max / 2` characters (so every run of chunks of up to that many characters lies in one);
/// a chunk longer than `max` belongs to none (no value of the bound can hold it).
fn pieces<'c>(chunks: &[&'c str], max: usize) -> Vec<Vec<&'c str>> {
    let half = (max / 2).max(1);
    let lens: Vec<usize> = chunks.iter().map(|c| c.chars().count()).collect();
    let mut out = Vec::new();
    let mut p = 0;
    while p < chunks.len() {
        if lens[p] > max {
            p += 1;
            continue;
        }
        let q = (p..chunks.len())
            .find(|&i| lens[i] > max)
            .unwrap_or(chunks.len());
        // Prefix sums over the segment `p..q`.
        let mut pre = Vec::with_capacity(q - p + 1);
        pre.push(0usize);
        for l in &lens[p..q] {
            pre.push(pre[pre.len() - 1] + l);
        }
        let (mut s, mut e, mut pushed) = (0, 0, 0);
        loop {
            while e < q - p && pre[e + 1] - pre[s] <= max {
                e += 1;
            }
            // A run that ends where the one before did lies inside it.
            if e > pushed {
                out.push(chunks[p + s..p + e].to_vec());
                pushed = e;
            }
            if e == q - p {
                break;
            }
            // The next run starts where at least `half` characters of this one remain.
            let target = pre[e].saturating_sub(half);
            let next = pre.partition_point(|&x| x <= target).saturating_sub(1);
            s = next.max(s + 1);
            e = e.max(s);
        }
        p = q;
    }
    out
}

pub(super) fn substrings(alternatives: &[Vec<String>]) -> String {
    alternatives
        .iter()
        .map(|c| substring(c))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// `text` cut where a copied value may start or end: words (runs of alphanumeric characters),
/// whitespace runs, and every other character alone. A value made of whole chunks starts and
/// ends at word boundaries as [`is_word_boundary`](crate::ground::is_word_boundary) defines them.
fn raw_chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut kind = 0u8; // 1 word, 2 space, 3 other
    for (i, c) in text.char_indices() {
        let k = if c.is_alphanumeric() {
            1
        } else if c.is_whitespace() {
            2
        } else {
            3
        };
        if (k != kind || k == 3) && i > start {
            out.push(&text[start..i]);
            start = i;
        }
        kind = k;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// [`raw_chunks`], each chunk as JSON string content (escaped).
#[cfg(test)]
fn chunks(text: &str) -> Vec<String> {
    raw_chunks(text).into_iter().map(escaped).collect()
}

fn substring(chunks: &[String]) -> String {
    let value = serde_json::json!({ "substring_chunks": chunks });
    format!("%regex {value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the document's terminal offers by its chunk model, whitespace collapsed: every run
    /// of whole chunks of a window with no whitespace at its ends.
    fn offered(doc: &str) -> std::collections::HashSet<String> {
        // In the one-line fallback the texts are the lines: the same model.
        let (windows, _) = document_windows(doc);
        let mut out = std::collections::HashSet::new();
        for w in &windows {
            let c = raw_chunks(w);
            for i in 0..c.len() {
                if c[i].trim().is_empty() {
                    continue;
                }
                let mut run = String::new();
                for chunk in &c[i..] {
                    run.push_str(chunk);
                    if !chunk.trim().is_empty() {
                        out.insert(crate::ground::collapse(&run));
                    }
                }
            }
        }
        out
    }

    /// A document of a few short lines: words, digits, punctuation, a letter outside ASCII,
    /// spacing runs, blank lines.
    fn document() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex(
            "([ab1é$,.()] {0,2}){0,8}(\n {0,2}([ab1é$,.()] {0,2}){0,8}){0,5}",
        )
        .unwrap_or_else(|e| panic!("strategy: {e}"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// The validator accepts a string grounded in the document exactly when the grounded
        /// grammar's chunks can write it (up to whitespace): every run of whole chunks of a
        /// window is accepted, and any other cut of the text (inside a word, over more lines
        /// than a window) is refused.
        #[test]
        fn the_validator_accepts_what_the_windows_offer(
            doc in document(),
            cuts in proptest::collection::vec((0usize..200, 0usize..200), 1..12),
        ) {
            let source = crate::Source::from_text(&doc);
            let grounds = Grounds::new(&source);
            let offered = offered(&doc);
            for v in &offered {
                proptest::prop_assert!(grounds.document().contains_str(v), "{v:?} in {doc:?}");
            }
            // Arbitrary cuts of the text as written and of its lines joined by spaces.
            let joined = doc.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
            for text in [doc.as_str(), joined.as_str()] {
                let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
                for &(a, b) in &cuts {
                    let (a, b) = (bounds[a % bounds.len()], bounds[b % bounds.len()]);
                    let v = &text[a.min(b)..a.max(b)];
                    let want = offered.contains(&crate::ground::collapse(v));
                    proptest::prop_assert_eq!(
                        grounds.document().contains_str(v), want, "{:?} in {:?}", v, doc
                    );
                }
            }
        }

        /// Pieces are never longer than the bound, and every run of chunks of up to half of it
        /// lies in one of them.
        #[test]
        fn pieces_cover_every_short_run(
            text in proptest::string::string_regex("([a-z]{1,9}[ ,.]){1,60}").unwrap_or_else(|e| panic!("{e}")),
            max in 4usize..40,
        ) {
            let chunks = raw_chunks(&text);
            let runs = pieces(&chunks, max);
            let len = |c: &[&str]| c.iter().map(|x| x.chars().count()).sum::<usize>();
            for r in &runs {
                proptest::prop_assert!(len(r) <= max && !r.is_empty());
            }
            let joined: Vec<String> = runs.iter().map(|r| r.concat()).collect();
            for i in 0..chunks.len() {
                for j in i + 1..=chunks.len() {
                    let run = &chunks[i..j];
                    if len(run) <= max / 2 && run.iter().all(|c| c.chars().count() <= max) {
                        let s = run.concat();
                        proptest::prop_assert!(joined.iter().any(|p| p.contains(&s)), "{s:?} / {max}");
                    }
                }
            }
        }
    }

    #[test]
    fn long_texts_are_cut_for_a_length_bound_or_bounded_exactly() {
        let short = vec!["Revenue of $4,065 million.".to_owned()];
        // No bound, or a bound longer than every text: no intersection needed.
        assert!(!substring_alternatives(&short, None).1);
        assert!(!substring_alternatives(&short, Some(100)).1);
        // A text longer than the bound, small: kept whole, the bound intersected.
        let (alts, bounded) = substring_alternatives(&short, Some(10));
        assert!(bounded);
        assert_eq!(alts.len(), 1);
        // A long one: pieces of at most the bound, no intersection.
        let long = vec!["word ".repeat(40_000)];
        let (alts, bounded) = substring_alternatives(&long, Some(1000));
        assert!(!bounded);
        assert!(alts.len() > 200 && alts.len() < 500, "{}", alts.len());
        assert!(alts
            .iter()
            .all(|a| a.iter().map(|c| c.chars().count()).sum::<usize>() <= 1000));
    }

    #[test]
    fn documents_are_windows_of_three_lines() {
        // A blank line ends a window; a repeated window is offered once.
        let (w, one_line) = document_windows("a\n\n  b  \nc\nd\nb\nc\nd");
        assert!(!one_line);
        assert_eq!(w, ["a", "b c d", "c d b", "d b c"]);
        assert_eq!(document_windows("only").0, ["only"]);
        assert!(document_windows(" \n\t").0.is_empty());
        let many = (0..MAX_WINDOW_ALTERNATIVES + 5)
            .map(|i| format!("l{i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let (w, one_line) = document_windows(&many);
        assert!(one_line, "too many windows: the lines, one text");
        assert_eq!(w.len(), MAX_WINDOW_ALTERNATIVES + 5);
        assert_eq!(w[1], "l1");
    }

    #[test]
    fn chunks_escape_and_split() {
        assert_eq!(
            chunks("Q3 \"rev\" $2,757"),
            ["Q3", " ", "\\\"", "rev", "\\\"", " ", "$", "2", ",", "757"]
        );
        assert_eq!(chunks("a\tb"), ["a", "\\t", "b"]);
        assert!(chunks("").is_empty());
    }
}
