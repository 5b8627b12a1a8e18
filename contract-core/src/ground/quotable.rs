//! What a `grounded(line)` string may be: one whole line of its text, or a sentence the layout
//! wrapped over up to [`MAX_VALUE_LINES`] lines, its lines joined with
//! one space. The validator ([`GroundText::lines_only`](super::GroundText::lines_only)) and the
//! grounded grammar (its `LINE` terminals and the strict schema's `enum`) both read this list,
//! so a quote the mask offers is a quote the check accepts.
//!
//! Why the wrapped sentence: a quote of evidence is a whole line so that the model cannot stop
//! halfway (measured in `examples/src/filings`: with a free substring SmolLM2 quoted `"2025"`),
//! but a release that wraps its guidance sentence (`... net revenue in the range of` / `$790
//! million to $815 million, ...`) then had no line holding both ends of the range. Measured with
//! `qwen2.5-coder-0.5b` on hand-written releases (`docs/data/unseen-releases*.jsonl`,
//! `docs/benchmarks.md`, "Guidance over two lines"): offered each line beside the sentence, the
//! model quoted one line in 3 of 4 wrapped releases; offered the sentence only, 4 of 4 releases
//! written afterwards were right (1 of 4 before).

/// Most consecutive lines of the document a string grounded in it (`#[contract(grounded)]`) may
/// span, none of them blank: a value may cross `MAX_VALUE_LINES - 1` line breaks (a name or an
/// address the OCR wrapped), written with a space (any whitespace) where the document breaks the
/// line, and cannot run on through the document nor across a blank line (a paragraph's end, or
/// the lines an [excerpt](crate::Source::excerpt) leaves out). The grounded grammar offers the
/// document as windows of this many lines ([`Grammar::grounded_lark`](crate::grammar::Grammar::grounded_lark)),
/// and [`GroundText::find_str`](super::GroundText::find_str) accepts exactly what they offer.
pub const MAX_VALUE_LINES: usize = 3;

/// Whether the line after `line` continues its sentence: `line` does not end a sentence (a full
/// stop, `!`, `?`, `;` or `:`, a closing quote or bracket after one), and `next` starts with a
/// lower-case letter (`and GBP 1,290 million`, `to $560 million`) or, after a line that ends
/// in a lower-case word (`in the range of`, `entre 860 y`), with a digit or a currency sign
/// (`$790 million to ...`). Rows of a table (`2024 | 100` above `2025 | 200`) do not continue
/// each other.
fn continues(line: &str, next: &str) -> bool {
    let end = line.trim_end_matches(['"', '”', '’', '\'', ')', ']']);
    if end.ends_with(['.', '!', '?', ';', ':']) {
        return false;
    }
    let Some(first) = next.chars().next() else {
        return false;
    };
    let mid_sentence = line
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphabetic() && c.is_lowercase());
    first.is_lowercase()
        || mid_sentence && (first.is_ascii_digit() || matches!(first, '$' | '€' | '£' | '¥'))
}

/// The whole-line values of `raw`, distinct, in document order. The lines are grouped into
/// sentences (a line starts a new one unless the line before it runs on into it, as `continues`
/// decides; a blank line ends one). A sentence of one line, or of more lines than
/// [`MAX_VALUE_LINES`], gives its lines, each trimmed; a sentence wrapped over two to
/// [`MAX_VALUE_LINES`] lines gives only the whole sentence, its lines joined with one space, so
/// that a quote cannot stop at the layout's line break (measured on four releases written for the
/// check, `docs/benchmarks.md`: offered its lines beside the sentence, the 0.5B model quoted a
/// line, the range's high end left on the next). The validator compares them with their whitespace
/// collapsed ([`collapse`](super::collapse)).
pub fn quotable_lines(raw: &str) -> Vec<String> {
    let lines: Vec<&str> = raw.lines().map(str::trim).collect();
    let mut sentences: Vec<Vec<&str>> = Vec::new();
    for (k, line) in lines.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
        // The line before is the last sentence's last line unless it is blank.
        let prev = k.checked_sub(1).map_or("", |p| lines[p]);
        match sentences.last_mut() {
            Some(last) if !prev.is_empty() && continues(prev, line) => last.push(line),
            _ => sentences.push(vec![line]),
        }
    }
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<String> = Vec::new();
    for sentence in sentences {
        let values = if (2..=MAX_VALUE_LINES).contains(&sentence.len()) {
            vec![sentence.join(" ")]
        } else {
            sentence.into_iter().map(str::to_owned).collect()
        };
        out.extend(values.into_iter().filter(|v| seen.insert(v.clone())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_sentence_is_one_value_in_place_of_its_lines() {
        let raw = "Business outlook\nFor the first quarter the company anticipates revenue of\n\
                   $790 million to $815 million, and EPS of $0.41.\nThe board met.";
        assert_eq!(
            quotable_lines(raw),
            [
                "Business outlook",
                "For the first quarter the company anticipates revenue of $790 million to $815 \
                 million, and EPS of $0.41.",
                "The board met.",
            ]
        );
        // A lower-case start continues any line that does not end a sentence.
        assert_eq!(
            quotable_lines("between GBP 1,250 million\nand GBP 1,290 million."),
            ["between GBP 1,250 million and GBP 1,290 million."]
        );
    }

    #[test]
    fn lines_that_end_a_sentence_or_start_one_are_not_joined() {
        // A heading before a capitalised line, a full stop, a colon, a blank line, a closing
        // quote after a full stop, rows of a table, a number after a number.
        for raw in [
            "Outlook\nWe expect growth",
            "Revenue rose.\nmore text",
            "Guidance:\n$5 million",
            "We expect\n\n$5 million",
            "\"We expect growth.\"\nsaid the CFO",
            "2024 | 100\n2025 | 200",
            "Total 12.00\n$5.00",
        ] {
            let expected: Vec<&str> = raw.lines().filter(|l| !l.is_empty()).collect();
            assert_eq!(quotable_lines(raw), expected, "{raw:?}");
        }
        // A sentence longer than MAX_VALUE_LINES lines gives its lines.
        assert_eq!(quotable_lines("a\nb\nc"), ["a b c"]);
        assert_eq!(quotable_lines("a\nb\nc\nd"), ["a", "b", "c", "d"]);
        assert!(quotable_lines("").is_empty());
        // Each line once.
        assert_eq!(quotable_lines("Same.\nSame."), ["Same."]);
    }
}
