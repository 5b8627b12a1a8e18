//! Grounded grammars on long documents: every piece of a grounded decode's setup timed apart
//! (reading the numbers, building the grammar, llguidance compiling it with the SmolLM2
//! tokenizer, the first masks, tokenising the prompt) on a document that is one line of 20,000,
//! 50,000 and 200,000 characters and on documents of 300 and 3,000 lines, so that growth shows
//! and no step can hide minutes. Figures are printed (`--nocapture`); nothing asserts a time.
//!
//! `GROUNDED_SCALE` picks the documents (`line:200000,lines:3000`, comma-separated). A
//! document whose grounded grammar would offer more than
//! [`MAX_OFFERED_CHARS`] characters is refused at once with an error that names passages
//! (before: one line of 200,000 characters compiled for over 20 minutes).

#![cfg(feature = "local")]

use std::io::Write as _;
use std::sync::Arc;
use std::time::Instant;

use contract_backends::local::fetch::default_model_path;
use contract_backends::local::gguf_tokenizer::{read_content, GgufTokenizer};
use contract_backends::local::mask::MaskEngine;
use contract_backends::local::sample::{allowed_ids, SplitMix64};
use contract_core::grammar::lark::MAX_OFFERED_CHARS;
use contract_core::ground::{numbers_in, Grounds, Numerals};
use contract_core::{Contract, Source};
use serde::{Deserialize, Serialize};

/// A name and an amount copied from anywhere in the document, and a whole line.
#[derive(Contract, Debug, Serialize, Deserialize)]
struct Scan {
    #[contract(grounded)]
    name: Option<String>,
    #[contract(grounded)]
    amount: Option<f64>,
    #[contract(grounded(line))]
    line: Option<String>,
}

/// A quote from the document, then values copied from inside it (two segments).
#[derive(Contract, Debug, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Quoted {
    #[contract(grounded)]
    quote: Option<String>,
    #[contract(grounded(in = quote))]
    low: Option<f64>,
    #[contract(grounded(in = quote))]
    high: Option<f64>,
}

/// Prose with names, numbers and punctuation, deterministic.
fn prose(words: usize, seed: u64) -> Vec<String> {
    const W: &[&str] = &[
        "Acme",
        "Holdings",
        "revenue",
        "of",
        "$2,757",
        "million",
        "for",
        "the",
        "quarter,",
        "up",
        "7.5%",
        "year",
        "over",
        "year.",
        "The",
        "company",
        "expects",
        "between",
        "$4,065",
        "and",
        "$4,140",
        "Northern",
        "Star",
        "Shipping",
        "Limited",
        "(the",
        "\"Insured\")",
        "shall",
        "notify",
        "within",
        "30",
        "days;",
        "2018",
        "2024:",
        "net",
        "income",
        "was",
        "94.8",
        "per",
        "cent",
        "in",
        "Q3",
        "guidance",
        "reaffirmed.",
    ];
    let mut rng = SplitMix64(seed);
    (0..words)
        .map(|_| W[rng.below(W.len())].to_owned())
        .collect()
}

fn one_line(chars: usize) -> String {
    let mut s = prose(chars / 4, 1).join(" ");
    s.truncate(chars); // ASCII
    s
}

fn many_lines(lines: usize) -> String {
    let words = prose(lines * 10, 2);
    words
        .chunks(10)
        .map(|c| c.join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn say(s: String) {
    println!("{s}");
    let _ = std::io::stdout().flush();
}

/// Each document: its name, its text, and about how many characters its grounded strings are
/// offered (a line longer than the 1,000-character cap is cut into pieces that overlap by half:
/// twice its length; short lines once).
fn documents() -> Vec<(String, String, usize)> {
    let spec = std::env::var("GROUNDED_SCALE")
        .unwrap_or_else(|_| "line:20000,line:50000,line:200000,lines:300,lines:3000".into());
    spec.split(',')
        .filter_map(|s| {
            let (kind, n) = s.split_once(':')?;
            let n: usize = n.trim().parse().ok()?;
            Some(match kind.trim() {
                "line" => (format!("one line of {n} chars"), one_line(n), 2 * n),
                _ => {
                    let text = many_lines(n);
                    let len = text.len();
                    (format!("{n} lines"), text, len)
                }
            })
        })
        .collect()
}

/// What became of one document's grounded mask.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Built, and the first masks of a random walk computed.
    Built,
    /// Refused with the grammar's error for a document too long to copy from.
    TooLong,
}

/// Times each step of a grounded decode's setup for `C` on `text`, and the first `steps` masks
/// of a random walk.
fn time_steps<C: Contract>(
    engine: &Arc<MaskEngine>,
    tokenizer: &GgufTokenizer,
    name: &str,
    text: &str,
    steps: usize,
) -> Outcome {
    let label = format!("{name} / {}", C::contract_spec().name);
    let t = Instant::now();
    let source = Source::from_text(text);
    let t_source = ms(t);
    let t = Instant::now();
    let numerals = Numerals::detect(text);
    let t_detect = ms(t);
    let t = Instant::now();
    let numbers = numbers_in(text, numerals).len();
    let t_numbers = ms(t);
    let t = Instant::now();
    let grounds = Grounds::new(&source);
    let t_grounds = ms(t);
    say(format!(
        "{label}: Source {t_source:.1} ms, Numerals::detect {t_detect:.1} ms, numbers_in {t_numbers:.1} ms ({numbers} numbers), Grounds::new {t_grounds:.1} ms"
    ));
    let grammar = C::grammar();
    let t = Instant::now();
    let lark = grammar.grounded_lark(&grounds, 0, &serde_json::Map::new());
    let t_lark = ms(t);
    let t = Instant::now();
    let schema = grammar.static_grounded_schema(&grounds);
    let t_schema = ms(t);
    say(format!(
        "{label}: grounded_lark {t_lark:.1} ms ({}), static_grounded_schema {t_schema:.1} ms ({} bytes)",
        lark.as_ref().map_or_else(|e| e.to_string(), |l| format!("{} bytes", l.len())),
        schema.to_string().len(),
    ));
    let t = Instant::now();
    let tokens = tokenizer
        .encode_prompt(&source.numbered())
        .map_or(0, |t| t.len());
    say(format!(
        "{label}: prompt tokenisation {:.1} ms ({tokens} tokens)",
        ms(t)
    ));
    let t = Instant::now();
    let mut mask = match engine.grounded_mask(&grammar, &source) {
        Ok(m) => m,
        Err(e) => {
            say(format!(
                "{label}: grounded mask refused in {:.1} ms: {e}",
                ms(t)
            ));
            assert!(
                e.to_string().contains("cut it into passages"),
                "{label}: refused for another reason: {e}"
            );
            assert!(lark.is_err(), "{label}: the grammar itself says so");
            return Outcome::TooLong;
        }
    };
    say(format!(
        "{label}: grounded_mask (build + llguidance compile) {:.1} ms",
        ms(t)
    ));
    let mut rng = SplitMix64(5);
    let mut step_ms = Vec::new();
    for _ in 0..steps {
        if mask.is_stopped() || mask.is_accepting() {
            break;
        }
        let t = Instant::now();
        let forced = mask.forced_tokens().expect("forced tokens");
        if !forced.is_empty() {
            mask.consume(&forced).expect("forced tokens consumed");
            continue;
        }
        let allowed = allowed_ids(mask.allowed_tokens().expect("a mask"));
        step_ms.push(ms(t));
        assert!(!allowed.is_empty(), "{label}: an empty mask");
        let tok = allowed[rng.below(allowed.len())];
        if engine.stop_tokens().contains(&tok) {
            break;
        }
        mask.consume(&[tok]).expect("an allowed token");
    }
    step_ms.sort_by(f64::total_cmp);
    say(format!(
        "{label}: {} masks, max {:.1} ms, output {:?}",
        step_ms.len(),
        step_ms.last().copied().unwrap_or(0.0),
        String::from_utf8_lossy(mask.output())
            .chars()
            .take(100)
            .collect::<String>()
    ));
    Outcome::Built
}

#[test]
fn grounded_setup_on_long_documents_is_timed() {
    let path = default_model_path().expect("the default model (SmolLM2) is needed for this test");
    let engine = MaskEngine::for_gguf(&path).expect("mask engine");
    let content = read_content(&path).expect("gguf");
    let tokenizer = GgufTokenizer::from_content(&content).expect("tokenizer");
    for (name, text, offered) in documents() {
        for outcome in [
            time_steps::<Scan>(&engine, &tokenizer, &name, &text, 40),
            time_steps::<Quoted>(&engine, &tokenizer, &name, &text, 40),
        ] {
            // Well under the bound a document's mask is built; well over it, refused.
            if offered * 5 <= MAX_OFFERED_CHARS * 4 {
                assert_eq!(outcome, Outcome::Built, "{name}");
            } else if offered * 5 >= MAX_OFFERED_CHARS * 6 {
                assert_eq!(outcome, Outcome::TooLong, "{name}");
            }
        }
    }
}
