//! Budget fitting with the real SmolLM2 tokenizer (byte-level BPE from the GGUF): the longest
//! head that fits is kept, the fixed parts are never cut, the counts are the tokenizer's.

#![cfg(feature = "local")]

use contract_backends::local::fetch;
use contract_backends::local::gguf_tokenizer::{read_content, GgufTokenizer};
use contract_core::prompt::{
    fit, number_lines, Budget, Part, PromptParts, Tokenizer, DOCUMENT_CLOSE, DOCUMENT_OPEN,
};
use contract_tests::lossy::word_document;

const SYSTEM: &str = "You fill a contract: you read a document and copy the values a contract \
asks for into one JSON object.\n\nTask: fill `Guidance`.\n\nReply with the JSON object only.";
const QUESTION: &str = "Fill `Guidance` from the document above. Reply with the JSON object only.";

fn smollm2() -> GgufTokenizer {
    let path = fetch::default_model_path().expect("the default model (SmolLM2)");
    GgufTokenizer::from_content(&read_content(&path).expect("gguf")).expect("tokenizer")
}

fn count(tok: &GgufTokenizer, text: &str) -> usize {
    Tokenizer::encode(tok, text).len()
}

/// Lines of `doc` not kept in full when only `kept` (a prefix) remains.
fn lines_lost(doc: &str, kept: &str) -> usize {
    let mut at = 0;
    let mut lost = 0;
    for line in doc.split_inclusive('\n') {
        let content = line.trim_end_matches('\n').trim_end_matches('\r');
        let whole = at + content.len() <= kept.len()
            && (!content.is_empty() || at < kept.len() || kept.len() == doc.len());
        if !whole {
            lost += 1;
        }
        at += line.len();
    }
    lost
}

#[test]
fn the_gguf_tokenizer_keeps_the_longest_head_that_fits() {
    let tok = smollm2();
    for irregular in [false, true] {
        for words in [500, 2_000, 2_100, 4_000, 8_000] {
            let doc = word_document(words, irregular);
            for budget in [2_048, 4_096] {
                let parts = [
                    Part::Fixed(SYSTEM),
                    Part::Fixed(DOCUMENT_OPEN),
                    Part::Trimmable(&doc),
                    Part::Fixed(DOCUMENT_CLOSE),
                    Part::Fixed(QUESTION),
                ];
                let fitted = fit(&parts, budget, &tok).expect("fits");
                let total = count(&tok, &fitted.text);
                assert!(total <= budget, "{words}/{budget}: {total}");
                let head = SYSTEM.len() + DOCUMENT_OPEN.len();
                let tail = DOCUMENT_CLOSE.len() + QUESTION.len();
                assert!(fitted.text.starts_with(&[SYSTEM, DOCUMENT_OPEN].concat()));
                assert!(fitted.text.ends_with(&[DOCUMENT_CLOSE, QUESTION].concat()));
                let kept = &fitted.text[head..fitted.text.len() - tail];
                assert!(doc.starts_with(kept), "{words}/{budget}: not a prefix");
                let whole = count(
                    &tok,
                    &[SYSTEM, DOCUMENT_OPEN, &doc, DOCUMENT_CLOSE, QUESTION].concat(),
                );
                if whole <= budget {
                    assert!(!fitted.trimmed && kept == doc, "{words}/{budget}");
                } else {
                    assert!(fitted.trimmed, "{words}/{budget}");
                    // Not one char more fits.
                    let next = (kept.len() + 1..=doc.len())
                        .find(|&i| doc.is_char_boundary(i))
                        .unwrap_or(doc.len());
                    let more = [
                        SYSTEM,
                        DOCUMENT_OPEN,
                        &doc[..next],
                        DOCUMENT_CLOSE,
                        QUESTION,
                    ];
                    assert!(count(&tok, &more.concat()) > budget, "{words}/{budget}");
                    assert!(total + 4 >= budget, "{words}/{budget}: {total}");
                    assert_eq!(fitted.dropped_tokens, count(&tok, &doc) - count(&tok, kept));
                    assert_eq!(fitted.dropped_lines, lines_lost(&doc, kept));
                }
                println!(
                    "{words:>5} words{}, budget {budget}: prompt {total} tokens, kept {} of {} \
                     document tokens, dropped {} lines",
                    if irregular { " (irregular)" } else { "" },
                    count(&tok, kept),
                    count(&tok, &doc),
                    fitted.dropped_lines
                );
            }
        }
    }
}

#[test]
fn the_gguf_tokenizer_keeps_line_numbers_in_a_contract_prompt() {
    let tok = smollm2();
    let prompt = PromptParts {
        system: SYSTEM.to_owned(),
        question: QUESTION.to_owned(),
    };
    for irregular in [false, true] {
        for words in [2_000, 8_000] {
            let doc = word_document(words, irregular);
            let all = number_lines(&doc);
            for max in [512, 2_048] {
                let fitted = prompt
                    .fit_messages(&doc, &[], Budget::new(max).with_template(4, 3), &tok)
                    .unwrap_or_else(|e| panic!("{words}/{max}: {e}"));
                assert!(fitted.trimmed, "{words}/{max}");
                assert!(fitted.prompt_tokens <= max && fitted.prompt_tokens + 8 >= max);
                let user = &fitted.messages.0[1].content;
                let body =
                    &user[DOCUMENT_OPEN.len()..user.len() - DOCUMENT_CLOSE.len() - QUESTION.len()];
                // A line cut in its middle is closed by a line end: `</document>` starts a line.
                assert!(body.ends_with('\n'), "{words}/{max}");
                let numbered = if all.starts_with(body) {
                    body
                } else {
                    &body[..body.len() - 1]
                };
                assert!(all.starts_with(numbered), "{words}/{max}: not a prefix");
                let originals: Vec<&str> = doc.lines().collect();
                for (i, line) in numbered.lines().enumerate() {
                    let (num, text) = line.split_once("| ").expect("a numbered line");
                    assert_eq!(num.trim().parse::<usize>().ok(), Some(i + 1));
                    assert!(originals[i].starts_with(text), "{words}/{max}: line {i}");
                }
                assert_eq!(fitted.dropped_lines, lines_lost(&all, numbered));
            }
        }
    }
}
