//! Grounded masks with the real SmolLM2 tokenizer: random walks that choose uniformly among the
//! allowed tokens always end in output that `C::from_json_in` accepts against the document
//! (every grounded value copied from its text, the cross-field rules held), the mask is never
//! empty before the grammar accepts, and fast-forward keeps working across segment boundaries.
//!
//! Walk counts: `GROUNDED_WALKS` (default 1,000 a contract and document set; the figures in
//! `docs/benchmarks.md` are from 10,000). Figures are printed (`--nocapture`).

#![cfg(feature = "local")]

use std::sync::Arc;

use contract_backends::local::fetch::default_model_path;
use contract_backends::local::mask::{percentile_us, ContractMask, MaskEngine};
use contract_backends::local::sample::{allowed_ids, SplitMix64};
use contract_core::grammar::{Grammar, GrammarOptions, Whitespace};
use contract_core::ground::{is_word_boundary, Grounds};
use contract_core::values::{Amount, Evidenced, Span};
use contract_core::{Contract, Source, ViolationKind};
use examples::filings::{generate, GroundedGuidance};
use serde::{Deserialize, Serialize};

/// A quote from the document, then values copied from inside it.
#[derive(Contract, Debug, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(period, low, high))]
struct Quoted {
    #[contract(grounded)]
    quote: Option<String>,
    #[contract(grounded(in = quote), len = 1..=60)]
    period: Option<String>,
    #[contract(grounded(in = quote))]
    low: Option<f64>,
    #[contract(grounded(in = quote))]
    high: Option<f64>,
}

/// Integers and a list, grounded in the document.
#[derive(Contract, Debug, Serialize, Deserialize)]
struct Years {
    #[contract(grounded, range = 2000..=2100)]
    year: Option<u16>,
    #[contract(grounded, len = ..=3)]
    names: Vec<String>,
}

fn engine() -> Arc<MaskEngine> {
    let path = default_model_path().expect("the default model (SmolLM2) is needed for this test");
    MaskEngine::for_gguf(&path).expect("mask engine from the GGUF's tokenizer")
}

const MAX_TOKENS: usize = 3000;

fn options() -> GrammarOptions {
    GrammarOptions {
        whitespace: Whitespace::Bounded { max: 4 },
        max_string_len: Some(40),
        max_items: Some(3),
    }
}

#[derive(Default)]
struct Tally {
    walks: usize,
    valid: usize,
    invalid: usize,
    not_in_source: usize,
    empty_masks: usize,
    capped: usize,
    tokens: usize,
    forced: usize,
    segments_crossed: usize,
    /// Steps where the value filter ran over the allowed tokens.
    filter_steps: usize,
    compile_ns: Vec<u64>,
    llg_ns: Vec<u64>,
    total_ns: Vec<u64>,
    examples: Vec<String>,
    errors: Vec<String>,
}

fn allowed_list(mask: &mut ContractMask) -> Vec<u32> {
    allowed_ids(mask.allowed_tokens().expect("mask"))
}

/// One random walk under a fresh grounded mask for `source`.
fn walk(
    engine: &Arc<MaskEngine>,
    grammar: &Grammar,
    source: &Source,
    rng: &mut SplitMix64,
    t: &mut Tally,
) -> String {
    let stops = engine.stop_tokens().to_vec();
    let mut mask = match engine.grounded_mask(grammar, source) {
        Ok(m) => m.with_timing(true),
        Err(e) => {
            t.errors.push(format!("grounded mask: {e}"));
            return String::new();
        }
    };
    let mut steps = 0;
    let mut ended = false;
    let mut segment = mask.segment().map_or(0, |s| s.0);
    while steps < MAX_TOKENS {
        if mask.is_stopped() {
            if let Some(e) = mask.error() {
                t.errors.push(e);
            }
            ended = true;
            break;
        }
        let forced = match mask.forced_tokens() {
            Ok(f) => f,
            Err(e) => {
                t.errors.push(format!("{e}"));
                break;
            }
        };
        if !forced.is_empty() {
            if let Err(e) = mask.consume(&forced) {
                t.errors.push(format!("forced: {e}"));
                break;
            }
            t.forced += forced.len();
            steps += forced.len();
            let now = mask.segment().map_or(0, |s| s.0);
            if now != segment {
                t.segments_crossed += 1;
                segment = now;
            }
            continue;
        }
        let allowed = allowed_list(&mut mask);
        if allowed.is_empty() {
            t.empty_masks += 1;
            break;
        }
        let tok = allowed[rng.below(allowed.len())];
        if stops.contains(&tok) {
            if !mask.is_accepting() {
                t.errors.push(format!(
                    "stop token allowed before the end: {:?}",
                    String::from_utf8_lossy(mask.output())
                ));
            }
            ended = true;
            break;
        }
        if let Err(e) = mask.consume(&[tok]) {
            t.errors.push(format!("consume: {e}"));
            break;
        }
        steps += 1;
        let now = mask.segment().map_or(0, |s| s.0);
        if now != segment {
            t.segments_crossed += 1;
            segment = now;
        }
    }
    if !ended {
        t.capped += 1;
    }
    t.tokens += steps;
    t.filter_steps += mask.stats().filter_steps;
    t.compile_ns.extend_from_slice(&mask.stats().compile_ns);
    t.llg_ns.extend_from_slice(&mask.stats().llg_ns);
    let stats = mask.stats();
    t.total_ns.extend(
        stats
            .llg_ns
            .iter()
            .zip(&stats.filter_ns)
            .map(|(a, b)| a + b),
    );
    String::from_utf8_lossy(mask.output()).into_owned()
}

fn walks<C: Contract>(engine: &Arc<MaskEngine>, docs: &[String], n: usize, seed: u64) -> Tally {
    let grammar = Grammar::with_options(C::contract_spec(), options());
    let sources: Vec<Source> = docs.iter().map(|d| Source::from_text(d)).collect();
    let mut rng = SplitMix64(seed);
    let mut t = Tally::default();
    for i in 0..n {
        t.walks += 1;
        let source = &sources[i % sources.len()];
        let text = walk(engine, &grammar, source, &mut rng, &mut t);
        match C::from_json_in(&text, source) {
            Ok(_) => t.valid += 1,
            Err(v) => {
                t.invalid += 1;
                if v.has_kind(ViolationKind::NotInSource) {
                    t.not_in_source += 1;
                }
                if t.examples.len() < 5 {
                    t.examples.push(format!("{text:?} -> {v}"));
                }
            }
        }
    }
    t
}

fn count(default: usize) -> usize {
    std::env::var("GROUNDED_WALKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn report<C: Contract>(engine: &Arc<MaskEngine>, docs: &[String], n: usize, seed: u64) -> Tally {
    let start = std::time::Instant::now();
    let t = walks::<C>(engine, docs, n, seed);
    let mut compile = t.compile_ns.clone();
    compile.sort_unstable();
    println!(
        "{:<22} walks {:>6}  valid {:>6}  invalid {}  not in source {}  empty masks {}  capped {}  \
         mean tokens {:.1} (forced {:.1})  segments crossed {}  filter steps {}  grammar build ms p50 {:.2} p99 {:.2}  \
         llguidance us p50 {:.1} p99 {:.1}  with the rule filter p50 {:.1} p99 {:.1}  ({:.1} s)",
        C::contract_spec().name,
        t.walks,
        t.valid,
        t.invalid,
        t.not_in_source,
        t.empty_masks,
        t.capped,
        t.tokens as f64 / t.walks as f64,
        t.forced as f64 / t.walks as f64,
        t.segments_crossed,
        t.filter_steps,
        percentile_us(&t.compile_ns, 50.0) / 1000.0,
        percentile_us(&t.compile_ns, 99.0) / 1000.0,
        percentile_us(&t.llg_ns, 50.0),
        percentile_us(&t.llg_ns, 99.0),
        percentile_us(&t.total_ns, 50.0),
        percentile_us(&t.total_ns, 99.0),
        start.elapsed().as_secs_f64()
    );
    for e in &t.examples {
        println!("  invalid: {e}");
    }
    for e in t.errors.iter().take(5) {
        println!("  error: {e}");
    }
    t
}

fn assert_sound(t: &Tally) {
    assert!(
        t.errors.is_empty(),
        "mask errors: {:?}",
        &t.errors[..t.errors.len().min(5)]
    );
    assert_eq!(t.empty_masks, 0, "empty masks");
    assert_eq!(t.capped, 0, "walks that never ended");
    assert_eq!(t.invalid, 0, "invalid outputs: {:?}", t.examples);
}

fn filings_docs() -> Vec<String> {
    generate(12, 7).into_iter().map(|f| f.text).collect()
}

#[test]
fn quoted_values_lie_in_the_quote() {
    let engine = engine();
    let docs = filings_docs();
    let t = report::<Quoted>(&engine, &docs, count(1000), 11);
    assert_sound(&t);
    // The walks crossed from the quote's segment into the values' segment.
    assert!(t.segments_crossed > 0, "no walk left the first segment");
    // `low <= high` and `both_or_neither` were held by the composed grammar alone.
    assert_eq!(t.filter_steps, 0, "the value filter ran");
}

#[test]
fn grounded_guidance_walks_are_sound() {
    let engine = engine();
    let docs = filings_docs();
    let t = report::<GroundedGuidance>(&engine, &docs, count(1000), 12);
    assert_sound(&t);
    assert!(t.segments_crossed > 0);
    assert_eq!(t.filter_steps, 0, "the value filter ran");
}

#[test]
fn evidenced_amounts_and_spans_are_sound() {
    let engine = engine();
    let docs = filings_docs();
    let t = report::<Evidenced<Amount>>(&engine, &docs, count(1000) / 4 + 1, 13);
    assert_sound(&t);
    // The span's `start_line <= end_line`: the grammar enumerates line ranges `a <= b`.
    assert_eq!(t.filter_steps, 0, "the value filter ran");
    let t = report::<Span>(&engine, &docs, count(1000) / 4 + 1, 14);
    assert_sound(&t);
    // At the root, the line order is written out over the document's line numbers.
    assert_eq!(t.filter_steps, 0, "the value filter ran");
    let t = report::<Years>(&engine, &docs, count(1000) / 4 + 1, 15);
    assert_sound(&t);
}

/// A rule the composed grammar cannot hold (`high` is a number the model writes freely): the
/// value filter holds it on top of the grounded grammar.
#[derive(Contract, Debug, Serialize, Deserialize)]
#[contract(rule = "low <= high")]
struct FreeHigh {
    #[contract(grounded)]
    quote: Option<String>,
    #[contract(grounded(in = quote))]
    low: Option<f64>,
    high: Option<f64>,
}

#[test]
fn a_rule_on_a_free_number_is_held_by_the_filter_on_top_of_grounding() {
    let engine = engine();
    let docs = filings_docs();
    let t = report::<FreeHigh>(&engine, &docs, count(1000) / 4 + 1, 16);
    assert_sound(&t);
    assert!(t.filter_steps > 0, "the value filter never ran");
}

#[test]
fn a_root_span_cites_only_lines_of_the_document_in_order() {
    let engine = engine();
    let grammar = Grammar::with_options(Span::contract_spec(), options());
    let text = "Revenue rose.\nGuidance: $4,065 million.\nThanks.";
    let source = Source::from_text(text);
    let n = text.lines().count();
    for a in 1..=n + 1 {
        for b in 1..=n + 1 {
            let mut mask = engine.grounded_mask(&grammar, &source).expect("mask");
            let out = format!("{{\"start_line\": {a}, \"end_line\": {b},");
            let tokens = engine.tok_env().tokenize_bytes(out.as_bytes());
            let ok = mask.validate_tokens(&tokens).expect("validate") == tokens.len();
            assert_eq!(ok, a <= b && b <= n, "{out}");
        }
    }
}

#[test]
fn a_required_value_with_nothing_to_copy_is_an_error() {
    #[derive(Contract, Debug, Serialize, Deserialize)]
    struct Needs {
        #[contract(grounded)]
        n: f64,
    }
    let engine = engine();
    let grammar = Needs::grammar();
    let source = Source::from_text("no digits in this document at all");
    let err = engine
        .grounded_mask(&grammar, &source)
        .expect_err("no number to copy");
    assert!(err.to_string().contains("no value of `n`"), "{err}");
    // With a number in the document, the only values the mask offers are that number.
    let source = Source::from_text("one number: 2,757.50 here");
    let mut rng = SplitMix64(3);
    let mut t = Tally::default();
    let text = walk(&engine, &grammar, &source, &mut rng, &mut t);
    assert_eq!(text, r#"{"n": 2757.5}"#);
}

#[test]
fn grounded_grammar_compiles_per_document_in_milliseconds() {
    let engine = engine();
    let grammar = GroundedGuidance::grammar();
    let mut times = Vec::new();
    for filing in generate(12, 7) {
        let doc = filing.text.clone();
        let source = Source::from_text(&doc);
        let t0 = std::time::Instant::now();
        let mask = engine.grounded_mask(&grammar, &source).expect("compiles");
        times.push(t0.elapsed().as_nanos() as u64);
        assert_eq!(mask.segment(), Some((0, 2)));
        let grounds = Grounds::new(&source);
        let lark = grammar
            .static_grounded_lark(&grounds)
            .expect("static grammar for servers");
        // The quote is grounded in a whole line: the server grammar offers the document's
        // lines as written (a Lark literal of the JSON string), the guidance line among them.
        if let Some(line) = filing.grounded_answer().quote {
            let json = serde_json::to_string(line.trim()).expect("a string serialises");
            let escaped = serde_json::to_string(&json).expect("a string serialises");
            assert!(
                lark.contains(&escaped),
                "the guidance line is not an alternative of the quote: {line}"
            );
        }
    }
    println!(
        "grounded grammar build+compile per document: p50 {:.2} ms, max {:.2} ms",
        percentile_us(&times, 50.0) / 1000.0,
        percentile_us(&times, 100.0) / 1000.0
    );
}

/// A grammar llguidance refuses is an error that keeps llguidance's own as its cause.
#[test]
fn a_grammar_llguidance_refuses_keeps_its_cause() {
    use contract_backends::local::LocalError;
    let engine = engine();
    let schema =
        serde_json::json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/nowhere"}}});
    let err = match engine.mask_for_json_schema(&schema) {
        Ok(_) => panic!("a schema with a dangling $ref compiled"),
        Err(e) => e,
    };
    assert!(
        matches!(
            err,
            LocalError::Library {
                what: "token mask",
                ..
            }
        ),
        "{err:?}"
    );
    let cause = std::error::Error::source(&err).expect("a cause");
    assert!(
        err.to_string().contains(&cause.to_string()),
        "{err} / {cause}"
    );
}

/// One string copied from anywhere in the document.
#[derive(Contract, Debug, Serialize, Deserialize)]
struct Copied {
    #[contract(grounded)]
    name: Option<String>,
}

/// The compiled mask and the validator agree on strings grounded in the document: for cuts of
/// the document's text (its lines joined by a space, as the mask writes a line break), the
/// mask takes `{"name": "<cut>"}` exactly when `from_json_in` accepts it. Cuts inside a word,
/// over four lines or across a blank line are refused by both; whole words within three lines
/// pass both.
#[test]
fn the_mask_and_the_validator_agree_on_document_strings() {
    let engine = engine();
    let grammar = Copied::grammar();
    let text = "Policy schedule 2018-B\n\
                Insured: Northern Star Shipping\n\
                Company Limited (the \"Insured\")\n\
                Port Louis, Mauritius\n\
                \n\
                Premium: USD 12,500.50 per annum\n\
                Señor Peñarol, file_name v2";
    let source = Source::from_text(text);
    let mask = engine.grounded_mask(&grammar, &source).expect("mask");
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let bounds: Vec<usize> = joined
        .char_indices()
        .map(|(i, _)| i)
        .chain([joined.len()])
        .collect();
    let mut rng = SplitMix64(21);
    let (mut agreed, mut accepted, mut cuts_word, mut too_long, mut blank) = (0, 0, 0, 0, 0);
    let mut seen = std::collections::HashSet::new();
    while agreed < 400 {
        let (a, b) = (
            bounds[rng.below(bounds.len())],
            bounds[rng.below(bounds.len())],
        );
        let (a, mut b) = (a.min(b), a.max(b));
        // Short cuts more often: most values are a few words.
        if rng.below(2) == 0 {
            b = bounds[bounds.partition_point(|&x| x <= b.min(a + 30)) - 1];
        }
        // Half of them widened to whole words (the rest mostly cut one).
        let (mut a, mut b) = (a, b);
        if rng.below(2) == 0 {
            while !is_word_boundary(&joined, a) {
                a -= 1;
            }
            while !is_word_boundary(&joined, b) {
                b += 1;
            }
        }
        let Some(v) = joined.get(a..b) else {
            continue;
        };
        if v.trim() != v || v.is_empty() || !seen.insert(v.to_owned()) {
            continue;
        }
        let out = format!("{{\"name\": {}}}", serde_json::Value::from(v));
        let tokens = engine.tok_env().tokenize_bytes(out.as_bytes());
        let by_mask = mask.clone().validate_tokens(&tokens).expect("validate") == tokens.len();
        let by_validator = Copied::from_json_in(&out, &source);
        if let Err(e) = &by_validator {
            let e = e.to_string();
            cuts_word += usize::from(e.contains("cuts the word"));
            too_long += usize::from(e.contains("more than 3 lines"));
            blank += usize::from(e.contains("blank line"));
        }
        assert_eq!(
            by_mask,
            by_validator.is_ok(),
            "{v:?}: mask {by_mask}, validator {by_validator:?}"
        );
        accepted += usize::from(by_mask);
        agreed += 1;
    }
    println!(
        "{agreed} cuts: {accepted} accepted by both; refused by both: {cuts_word} cutting a \
         word, {too_long} over more than 3 lines, {blank} across a blank line"
    );
    assert!(
        accepted > 20 && accepted < agreed - 20,
        "{accepted} of {agreed}"
    );
    assert!(cuts_word > 20 && too_long > 0 && blank > 0);
}
