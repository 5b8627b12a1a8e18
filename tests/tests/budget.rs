//! Budget fitting never truncates silently: only the document loses text (head kept, tail
//! dropped, line numbers kept), the final question always survives, short inputs are unchanged.
//!
//! The tokenizer here is a deterministic greedy longest-match over common English chunks plus
//! single bytes: like a BPE, a token can span a word boundary or the boundary between two parts,
//! so the text at a cut re-tokenises differently and the fitter must measure, not assume.

use std::collections::HashMap;

use contract_core::prompt::{
    fit, number_lines, Budget, BudgetError, Part, PromptParts, Role, Tokenizer, DOCUMENT_CLOSE,
    DOCUMENT_OPEN,
};
use contract_tests::lossy::{word_document, Lossy};

const BUDGET: usize = 2048;
const LENGTHS: [usize; 5] = [500, 2_000, 2_100, 4_000, 8_000];

struct Greedy {
    vocab: HashMap<Vec<u8>, u32>,
    pieces: Vec<Vec<u8>>,
    longest: usize,
}

impl Greedy {
    fn new() -> Self {
        let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let chunks = [
            " the",
            " and",
            " of",
            " to",
            " in",
            " is",
            " for",
            " that",
            " with",
            " we",
            " our",
            " a",
            " be",
            " on",
            " at",
            " by",
            "ing",
            "tion",
            "ation",
            "ment",
            "er",
            "re",
            "th",
            "he",
            "an",
            "on",
            "en",
            "es",
            "ed",
            "ly",
            "al",
            "or",
            "ar",
            " re",
            " th",
            " revenue",
            " million",
            " billion",
            " guidance",
            " quarter",
            " fiscal",
            " year",
            " expect",
            " between",
            " USD",
            " low",
            " high",
            " end",
            " range",
            "   ",
            "  ",
            "| ",
            "\n",
            "\n\n",
            "00",
            "000",
            ".0",
            ", ",
            ". ",
            "? ",
            "</",
            "document",
            ">\n",
            " What",
            " is",
            " Fill",
            " from",
            " above",
            " Reply",
            " JSON",
            " object",
            " only",
            ".",
            "\n   ",
        ];
        for c in chunks {
            pieces.push(c.as_bytes().to_vec());
        }
        let vocab = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), i as u32))
            .collect();
        let longest = pieces.iter().map(Vec::len).max().unwrap_or(1);
        Greedy {
            vocab,
            pieces,
            longest,
        }
    }
}

impl Tokenizer for Greedy {
    fn encode(&self, text: &str) -> Vec<u32> {
        let b = text.as_bytes();
        let mut ids = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let max = self.longest.min(b.len() - i);
            for len in (1..=max).rev() {
                if let Some(&id) = self.vocab.get(&b[i..i + len]) {
                    ids.push(id);
                    i += len;
                    break;
                }
            }
        }
        ids
    }

    fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.pieces[id as usize].iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A document of about `tokens` tokens: numbered sentences with numbers and words, some lines
/// longer than others, a few non-ASCII characters.
fn document(tok: &Greedy, tokens: usize) -> String {
    let words = [
        "the",
        "revenue",
        "guidance",
        "for",
        "fiscal",
        "quarter",
        "we",
        "expect",
        "between",
        "million",
        "and",
        "USD",
        "reporting",
        "segment",
        "growth",
        "margin",
        "€",
        "operating",
        "cash",
        "flow",
        "of",
        "in",
        "high",
        "low",
        "end",
        "range",
        "naïve",
        "to",
        "our",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15 ^ tokens as u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut doc = String::new();
    let mut line = 0;
    // Per-line counts (cheap) until about long enough, then the exact count of the whole.
    let mut approx = 0;
    while approx < tokens + 16 || tok.encode(&doc).len() < tokens + 16 {
        line += 1;
        let n = 3 + (next() % 18) as usize;
        let mut sentence = Vec::with_capacity(n);
        for _ in 0..n {
            sentence.push(words[(next() % words.len() as u64) as usize].to_owned());
        }
        if line % 3 == 0 {
            sentence.push(format!("{}.{}", next() % 10_000, next() % 100));
        }
        let text = format!("{}.\n", sentence.join(" "));
        approx += tok.encode(&text).len();
        doc.push_str(&text);
    }
    let ids = tok.encode(&doc);
    let mut cut = tok.decode(&ids[..tokens]);
    // A cut may split a multi-byte character; keep the valid prefix.
    while cut.ends_with('\u{FFFD}') {
        cut.pop();
    }
    cut
}

const SYSTEM: &str = "You fill a contract: you read a document and copy the values a contract \
asks for into one JSON object.\n\nTask: fill `Guidance`: next-quarter revenue guidance.\n\n\
{\"quarter\": integer 1-4 | null, \"year\": integer 2018-2030 | null, \"low\": number > 0 USD \
millions | null, \"high\": number > 0 USD millions | null}\n\nReply with the JSON object only.";
const Q_LOW: &str = "What is the low end of the guidance range? Reply with the JSON object only.";
const Q_HIGH: &str = "What is the high end of the guidance range? Reply with the JSON object only.";

fn parts<'a>(doc: &'a str, question: &'a str) -> [Part<'a>; 5] {
    [
        Part::Fixed(SYSTEM),
        Part::Fixed(DOCUMENT_OPEN),
        Part::Trimmable(doc),
        Part::Fixed(DOCUMENT_CLOSE),
        Part::Fixed(question),
    ]
}

/// Lines of `doc` not kept in full when only its first `kept` bytes remain.
fn lines_lost(doc: &str, kept: &str) -> usize {
    let mut at = 0;
    let mut lost = 0;
    for line in doc.split_inclusive('\n') {
        let content = line.trim_end_matches('\n');
        let whole = at + content.len() <= kept.len()
            && (!content.is_empty() || at < kept.len() || kept.len() == doc.len());
        if !whole {
            lost += 1;
        }
        at += line.len();
    }
    lost
}

/// The numbered lines kept in `body` (what the user message holds between the document's
/// opening and closing lines): a prefix of the numbered document, plus one line end after a cut
/// inside a line (a refit may then end at a line end), so `</document>` always starts a line.
fn kept_lines<'a>(doc: &str, body: &'a str) -> &'a str {
    assert!(
        body.is_empty() || body.ends_with('\n'),
        "`</document>` does not start a line"
    );
    let numbered = number_lines(doc);
    if numbered.starts_with(body) {
        body
    } else {
        let cut = &body[..body.len() - 1];
        assert!(
            numbered.starts_with(cut),
            "not the numbered document and a line end"
        );
        cut
    }
}

#[test]
fn documents_have_the_lengths_asked() {
    let tok = Greedy::new();
    for n in LENGTHS {
        let len = tok.encode(&document(&tok, n)).len();
        assert!(len.abs_diff(n) <= 2, "{n}: {len}");
    }
}

#[test]
fn the_final_question_survives_and_only_the_tail_is_dropped() {
    let tok = Greedy::new();
    for n in LENGTHS {
        let doc = document(&tok, n);
        let fitted = fit(&parts(&doc, Q_LOW), BUDGET, &tok).expect("fits");
        let total = tok.encode(&fitted.text).len();
        assert!(total <= BUDGET, "{n}: {total} tokens");
        assert!(fitted.text.starts_with(SYSTEM), "{n}: instructions cut");
        let tail = format!("{DOCUMENT_CLOSE}{Q_LOW}");
        assert!(fitted.text.ends_with(&tail), "{n}: question lost");

        let head_len = SYSTEM.len() + DOCUMENT_OPEN.len();
        let kept = &fitted.text[head_len..fitted.text.len() - tail.len()];
        assert!(
            doc.starts_with(kept),
            "{n}: the kept document is not a prefix"
        );

        let whole = [SYSTEM, DOCUMENT_OPEN, doc.as_str(), DOCUMENT_CLOSE, Q_LOW].concat();
        if tok.encode(&whole).len() <= BUDGET {
            assert!(!fitted.trimmed, "{n}");
            assert_eq!(fitted.text, whole, "{n}: short input changed");
            assert_eq!((fitted.dropped_tokens, fitted.dropped_lines), (0, 0));
        } else {
            assert!(fitted.trimmed, "{n}");
            assert_eq!(
                fitted.dropped_tokens,
                tok.encode(&doc).len() - tok.encode(kept).len(),
                "{n}: dropped tokens"
            );
            assert_eq!(
                fitted.dropped_lines,
                lines_lost(&doc, kept),
                "{n}: dropped lines"
            );
            assert!(fitted.dropped_lines >= 1);
            // As much of the head as fits, give or take the tokens merged at the cut.
            assert!(
                total + 4 >= BUDGET,
                "{n}: only {total} of {BUDGET} tokens used"
            );
        }
        println!(
            "{n:>5} doc tokens: prompt {total:>4} tokens, trimmed {}, dropped {} tokens / {} lines",
            fitted.trimmed, fitted.dropped_tokens, fitted.dropped_lines
        );
    }
}

#[test]
fn prompts_that_differ_in_the_question_never_encode_alike() {
    let tok = Greedy::new();
    for n in LENGTHS {
        let doc = document(&tok, n);
        let low = fit(&parts(&doc, Q_LOW), BUDGET, &tok).expect("fits");
        let high = fit(&parts(&doc, Q_HIGH), BUDGET, &tok).expect("fits");
        assert_ne!(tok.encode(&low.text), tok.encode(&high.text), "{n}");
        assert!(
            low.text.ends_with(Q_LOW) && high.text.ends_with(Q_HIGH),
            "{n}"
        );
    }
}

#[test]
fn short_inputs_are_unchanged_byte_for_byte() {
    let tok = Greedy::new();
    for doc in [
        "",
        "one line",
        "two\nlines\n",
        "tabs\tand  spaces \r\nand CRLF\r\n",
        "naïve €",
    ] {
        let p = parts(doc, Q_LOW);
        let fitted = fit(&p, BUDGET, &tok).expect("fits");
        assert!(!fitted.trimmed);
        assert_eq!(
            fitted.text,
            [SYSTEM, DOCUMENT_OPEN, doc, DOCUMENT_CLOSE, Q_LOW].concat()
        );
    }
}

#[test]
fn fixed_parts_too_long_fail_loudly() {
    let tok = Greedy::new();
    let long_system = document(&tok, 3_000);
    let doc = document(&tok, 100);
    let p = [
        Part::Fixed(&long_system),
        Part::Trimmable(&doc),
        Part::Fixed(Q_LOW),
    ];
    match fit(&p, BUDGET, &tok) {
        Err(BudgetError::FixedPartsTooLong { needed, available }) => {
            assert_eq!(available, BUDGET);
            assert!(needed > BUDGET, "needed {needed}");
        }
        other => panic!("expected FixedPartsTooLong, got {other:?}"),
    }
    // Fixed parts that fill the budget exactly leave no room for a document token either.
    let fixed = tok.encode(&[long_system.as_str(), Q_LOW].concat()).len();
    assert!(matches!(
        fit(&p, fixed, &tok),
        Err(BudgetError::FixedPartsTooLong { .. })
    ));
}

#[test]
fn contract_prompt_keeps_line_numbers_under_a_template_overhead() {
    let tok = Greedy::new();
    let prompt = PromptParts {
        system: SYSTEM.to_owned(),
        question: Q_LOW.to_owned(),
    };
    let budget = Budget::new(BUDGET).with_template(4, 3);
    for n in LENGTHS {
        let doc = document(&tok, n);
        let fitted = prompt.fit_messages(&doc, &[], budget, &tok).expect("fits");
        assert!(
            fitted.prompt_tokens <= BUDGET,
            "{n}: {}",
            fitted.prompt_tokens
        );
        let msgs = &fitted.messages.0;
        assert_eq!(msgs.len(), 2);
        assert_eq!((msgs[0].role, msgs[1].role), (Role::System, Role::User));
        assert_eq!(
            msgs[0].content, SYSTEM,
            "{n}: the document never goes into the system message"
        );
        let user = &msgs[1].content;
        assert!(
            user.starts_with(DOCUMENT_OPEN) && user.ends_with(Q_LOW),
            "{n}"
        );
        let body = &user[DOCUMENT_OPEN.len()..user.len() - DOCUMENT_CLOSE.len() - Q_LOW.len()];
        let numbered = kept_lines(&doc, body);
        assert!(
            number_lines(&doc).starts_with(numbered),
            "{n}: not a prefix of the numbered document"
        );
        let originals: Vec<&str> = doc.lines().collect();
        for (i, line) in numbered.lines().enumerate() {
            let (num, text) = line.split_once("| ").expect("a numbered line");
            assert_eq!(
                num.trim().parse::<usize>().ok(),
                Some(i + 1),
                "{n}: line {i}"
            );
            assert!(
                originals[i].starts_with(text),
                "{n}: line {} altered",
                i + 1
            );
        }
        if fitted.trimmed {
            assert!(fitted.dropped_tokens > 0 && fitted.dropped_lines > 0, "{n}");
        } else {
            assert_eq!(numbered, number_lines(&doc), "{n}");
        }
    }
    // The template overhead counts: a budget that only the overhead fills fails loudly.
    let err = prompt
        .fit_messages(
            "doc",
            &[],
            Budget::new(BUDGET).with_template(BUDGET, 0),
            &tok,
        )
        .unwrap_err();
    assert!(matches!(
        err,
        BudgetError::FixedPartsTooLong {
            available: BUDGET,
            ..
        }
    ));
}

const LOSSY_WORDS: [usize; 5] = [500, 2_000, 2_100, 4_000, 8_000];
const LOSSY_BUDGETS: [usize; 2] = [2_048, 4_096];

/// The next char boundary after `at` in `s` (`s.len()` at the end).
fn next_boundary(s: &str, at: usize) -> usize {
    (at + 1..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len())
}

#[test]
fn a_lossy_tokenizer_keeps_as_much_as_fits() {
    let tok = Lossy::default();
    for irregular in [false, true] {
        for words in LOSSY_WORDS {
            let doc = word_document(words, irregular);
            assert_eq!(tok.encode(&doc).len(), words);
            for budget in LOSSY_BUDGETS {
                let p = parts(&doc, Q_LOW);
                let fitted = fit(&p, budget, &tok).expect("fits");
                let total = tok.encode(&fitted.text).len();
                assert!(total <= budget, "{words}/{budget}: {total} tokens");
                let tail = format!("{DOCUMENT_CLOSE}{Q_LOW}");
                assert!(fitted.text.starts_with(SYSTEM) && fitted.text.ends_with(&tail));
                let head_len = SYSTEM.len() + DOCUMENT_OPEN.len();
                let kept = &fitted.text[head_len..fitted.text.len() - tail.len()];
                assert!(doc.starts_with(kept), "{words}/{budget}: not a prefix");
                let kept_words = tok.encode(kept).len();
                let fixed = tok
                    .encode(&[SYSTEM, DOCUMENT_OPEN, DOCUMENT_CLOSE, Q_LOW].concat())
                    .len();
                println!(
                    "{words:>5} words{}, budget {budget}: kept {kept_words} words, prompt \
                     {total} tokens, dropped {} tokens / {} lines",
                    if irregular { " (irregular)" } else { "" },
                    fitted.dropped_tokens,
                    fitted.dropped_lines
                );
                if fixed + words <= budget {
                    assert!(!fitted.trimmed, "{words}/{budget}");
                    assert_eq!(kept, doc, "{words}/{budget}");
                    continue;
                }
                assert!(fitted.trimmed, "{words}/{budget}");
                // The most that fits: every word the budget leaves room for (a word cut at the
                // end merges with `</document>` into one), and not one char more.
                assert!(
                    kept_words >= budget - fixed,
                    "{words}/{budget}: {kept_words} words"
                );
                assert!(total + 1 >= budget, "{words}/{budget}: {total} tokens");
                let more = &doc[..next_boundary(&doc, kept.len())];
                let over = [SYSTEM, DOCUMENT_OPEN, more, DOCUMENT_CLOSE, Q_LOW].concat();
                assert!(
                    tok.encode(&over).len() > budget,
                    "{words}/{budget}: one more char would fit"
                );
                assert_eq!(
                    fitted.dropped_tokens,
                    words - kept_words,
                    "{words}/{budget}: dropped tokens"
                );
                assert_eq!(
                    fitted.dropped_lines,
                    lines_lost(&doc, kept),
                    "{words}/{budget}: dropped lines"
                );
            }
        }
    }
}

#[test]
fn a_lossy_tokenizer_keeps_line_numbers_in_a_contract_prompt() {
    let tok = Lossy::default();
    let prompt = PromptParts {
        system: SYSTEM.to_owned(),
        question: Q_LOW.to_owned(),
    };
    for irregular in [false, true] {
        for words in LOSSY_WORDS {
            let doc = word_document(words, irregular);
            for max in [512, 2_048, 4_096] {
                let budget = Budget::new(max).with_template(4, 3);
                let fitted = prompt
                    .fit_messages(&doc, &[], budget, &tok)
                    .unwrap_or_else(|e| panic!("{words}/{max}: {e}"));
                assert!(fitted.prompt_tokens <= max, "{words}/{max}");
                let user = &fitted.messages.0[1].content;
                let body =
                    &user[DOCUMENT_OPEN.len()..user.len() - DOCUMENT_CLOSE.len() - Q_LOW.len()];
                let numbered = kept_lines(&doc, body);
                let all = number_lines(&doc);
                assert!(all.starts_with(numbered), "{words}/{max}: not a prefix");
                let originals: Vec<&str> = doc.lines().collect();
                for (i, line) in numbered.lines().enumerate() {
                    let (num, text) = line.split_once("| ").expect("a numbered line");
                    assert_eq!(num.trim().parse::<usize>().ok(), Some(i + 1));
                    assert!(originals[i].starts_with(text), "{words}/{max}: line {i}");
                }
                // Every document token the budget leaves room for is used, give or take the
                // line number a cut never keeps half of (one `N|` token and one word).
                let room = max - 4 * 2 - 3;
                let whole = tok
                    .encode(&[SYSTEM, "\n", DOCUMENT_OPEN, &all, DOCUMENT_CLOSE, Q_LOW].concat())
                    .len();
                if whole <= room {
                    assert!(!fitted.trimmed, "{words}/{max}");
                    assert_eq!(numbered, all, "{words}/{max}");
                } else {
                    assert!(fitted.trimmed, "{words}/{max}");
                    assert!(
                        fitted.prompt_tokens + 2 >= max,
                        "{words}/{max}: only {} of {max} tokens used",
                        fitted.prompt_tokens
                    );
                    assert_eq!(
                        fitted.dropped_tokens,
                        tok.encode(&all).len() - tok.encode(numbered).len()
                    );
                    assert_eq!(fitted.dropped_lines, lines_lost(&all, numbered));
                }
                println!(
                    "{words:>5} words{}, budget {max}: prompt {} tokens, kept {} lines, dropped \
                     {} tokens / {} lines",
                    if irregular { " (irregular)" } else { "" },
                    fitted.prompt_tokens,
                    numbered.lines().count(),
                    fitted.dropped_tokens,
                    fitted.dropped_lines
                );
            }
        }
    }
}

#[test]
fn a_lossy_tokenizer_gets_true_numbers_when_nothing_fits() {
    let tok = Lossy::default();
    let prompt = PromptParts {
        system: SYSTEM.to_owned(),
        question: Q_LOW.to_owned(),
    };
    for irregular in [false, true] {
        let doc = word_document(2_000, irregular);
        let p = parts(&doc, Q_LOW);
        let fixed = tok
            .encode(&[SYSTEM, DOCUMENT_OPEN, DOCUMENT_CLOSE, Q_LOW].concat())
            .len();
        // `needed` is the budget that works: one token less fails, `needed` itself fits.
        let Err(BudgetError::FixedPartsTooLong { needed, available }) = fit(&p, fixed, &tok) else {
            panic!("fixed parts that fill the budget leave no room");
        };
        assert_eq!((needed, available), (fixed + 1, fixed));
        let fitted = fit(&p, needed, &tok).expect("the budget the error names");
        assert!(tok.encode(&fitted.text).len() <= needed);
        assert!(fitted.trimmed && fitted.text.len() > SYSTEM.len() + DOCUMENT_OPEN.len());

        let budget = |max| Budget::new(max).with_template(4, 3);
        let err = prompt
            .fit_messages(&doc, &[], budget(fixed), &tok)
            .expect_err("no room for the template");
        let BudgetError::FixedPartsTooLong { needed, available } = err else {
            panic!("{err:?}");
        };
        assert_eq!(available, fixed);
        let fitted = prompt
            .fit_messages(&doc, &[], budget(needed), &tok)
            .unwrap_or_else(|e| panic!("the budget the error names ({needed}): {e}"));
        assert!(fitted.prompt_tokens <= needed && fitted.trimmed);
        assert!(matches!(
            prompt.fit_messages(&doc, &[], budget(needed - 1), &tok),
            Err(BudgetError::FixedPartsTooLong { needed: n, .. }) if n == needed
        ));
    }
}
