//! Soundness of the contract mask with the real SmolLM2 tokenizer: random walks that choose
//! uniformly among the allowed tokens always end in output the validator accepts, cross-field
//! rules included; the mask is never empty before the grammar accepts; outputs are bounded.
//!
//! Walk counts: `MASK_WALKS` (default 10,000 for `Guidance`, a tenth of it for the bigger
//! contracts). Figures are printed (`--nocapture`).

#![cfg(feature = "local")]

use std::sync::Arc;

use contract_backends::local::fetch::default_model_path;
use contract_backends::local::mask::rules::{RulePlan, Scanner};
use contract_backends::local::mask::{percentile_us, MaskEngine};
use contract_backends::local::sample::{allowed_ids, SplitMix64};
use contract_core::grammar::{Grammar, GrammarOptions, Whitespace};
use contract_core::values::{Amount, Span, TableValue};
use contract_core::{Contract, DynContract, ViolationKind, Violations};
use examples::{Address, Exclusions, FilingTable, Guidance, Policy};

fn engine() -> Arc<MaskEngine> {
    let path = default_model_path().expect("the default model (SmolLM2) is needed for this test");
    MaskEngine::for_gguf(&path).expect("mask engine from the GGUF's tokenizer")
}

/// Most tokens one walk may take; a walk that reaches it counts as unbounded.
const MAX_TOKENS: usize = 3000;

#[derive(Default)]
struct Tally {
    walks: usize,
    valid: usize,
    ir_invalid: usize,
    custom_only: usize,
    empty_masks: usize,
    filter_emptied: usize,
    capped: usize,
    max_len: usize,
    tokens: usize,
    examples: Vec<String>,
    errors: Vec<String>,
    /// Steps whose mask was also computed the slow way ([`MaskEngine`]'s reference filter).
    compared: usize,
    /// Steps where the two differed (what differed, and the output so far).
    mismatches: Vec<String>,
}

fn options() -> GrammarOptions {
    GrammarOptions {
        whitespace: Whitespace::Bounded { max: 4 },
        max_string_len: Some(12),
        max_items: Some(3),
    }
}

/// `n` random walks; with `compare`, every step's mask is also computed without the filter's
/// shortcuts ([`ContractMask::reference_mask`]) and the two must allow the same tokens.
///
/// [`ContractMask::reference_mask`]: contract_backends::local::mask::ContractMask::reference_mask
fn walks<C: Contract>(engine: &Arc<MaskEngine>, n: usize, seed: u64, compare: bool) -> Tally {
    let grammar = Grammar::with_options(C::contract_spec(), options());
    walks_of(engine, &grammar, n, seed, compare, |text| {
        C::from_json(text).map(drop)
    })
}

/// [`walks`] under `grammar`, each output read by `read`.
fn walks_of(
    engine: &Arc<MaskEngine>,
    grammar: &Grammar,
    n: usize,
    seed: u64,
    compare: bool,
    read: impl Fn(&str) -> Result<(), Violations>,
) -> Tally {
    let mut rng = SplitMix64(seed);
    let mut t = Tally::default();
    let stops = engine.stop_tokens().to_vec();
    for _ in 0..n {
        t.walks += 1;
        let mut mask = engine.mask(grammar).expect("grammar compiles");
        let mut steps = 0;
        let mut ended = false;
        while steps < MAX_TOKENS {
            if mask.is_stopped() {
                if let Some(e) = mask.error() {
                    t.errors.push(e);
                } else if !mask.is_accepting() {
                    t.errors.push(format!(
                        "stopped ({}) after {:?}",
                        mask.stop_reason(),
                        String::from_utf8_lossy(mask.output())
                    ));
                }
                ended = true;
                break;
            }
            let forced = match mask.forced_tokens() {
                Ok(f) => f,
                Err(e) => {
                    t.errors.push(format!(
                        "{e} after {:?}",
                        String::from_utf8_lossy(mask.output())
                    ));
                    break;
                }
            };
            if !forced.is_empty() {
                mask.consume(&forced).expect("forced tokens");
                steps += forced.len();
                continue;
            }
            let reference = compare.then(|| mask.reference_mask().expect("reference mask"));
            let allowed = allowed_ids(mask.allowed_tokens().expect("mask"));
            if let Some(reference) = reference {
                t.compared += 1;
                let expected = allowed_ids(reference.as_slice());
                if allowed != expected {
                    let show = |ts: Vec<&u32>| -> Vec<String> {
                        ts.iter()
                            .take(6)
                            .map(|&&x| {
                                format!("{x} {:?}", String::from_utf8_lossy(engine.token_bytes(x)))
                            })
                            .collect()
                    };
                    let extra = show(allowed.iter().filter(|x| !expected.contains(x)).collect());
                    let missing = show(expected.iter().filter(|x| !allowed.contains(x)).collect());
                    t.mismatches.push(format!(
                        "after {:?}: allowed but not by the reference {extra:?}, refused but allowed by it {missing:?}",
                        String::from_utf8_lossy(mask.output())
                    ));
                    // The walk could take a token the reference refuses: stop it here.
                    break;
                }
            }
            if allowed.is_empty() {
                t.empty_masks += 1;
                break;
            }
            let tok = allowed[rng.below(allowed.len())];
            if stops.contains(&tok) {
                if !mask.is_accepting() {
                    t.errors.push(format!(
                        "stop token {tok} allowed among {:?} after {:?}",
                        &allowed[..allowed.len().min(8)],
                        String::from_utf8_lossy(mask.output())
                    ));
                }
                ended = true;
                break;
            }
            if let Err(e) = mask.consume(&[tok]) {
                panic!(
                    "an allowed token is not consumed ({e}) after {:?}",
                    String::from_utf8_lossy(mask.output())
                );
            }
            steps += 1;
        }
        if !ended && steps >= MAX_TOKENS {
            t.capped += 1;
        }
        t.filter_emptied += mask.stats().filter_emptied;
        t.tokens += steps;
        let text = String::from_utf8_lossy(mask.output()).into_owned();
        t.max_len = t.max_len.max(text.len());
        match read(&text) {
            Ok(()) => t.valid += 1,
            Err(v) => {
                let custom = v.iter().all(|x| {
                    matches!(x.kind, ViolationKind::TableShape | ViolationKind::Custom)
                        || is_calendar(x)
                        || is_reading(x)
                });
                if custom {
                    t.custom_only += 1;
                } else {
                    t.ir_invalid += 1;
                    if t.examples.len() < 5 {
                        t.examples.push(format!("{text:?} -> {v}"));
                    }
                }
            }
        }
    }
    t
}

/// `DateValue::check_calendar` (a custom check the IR cannot carry: `2023-02-30` matches its
/// pattern).
fn is_calendar(v: &contract_core::Violation) -> bool {
    v.kind == ViolationKind::FormatMismatch
        && v.path.ends_with("/iso")
        && v.message.contains("`iso`")
}

/// A value type's text that its reader refuses (`original` of a date, period or duration, an
/// amount's `currency` or `unit`): the form is read by code, after decoding; without a document
/// to copy from, the plain mask lets any string through there, as it does for a calendar date.
fn is_reading(v: &contract_core::Violation) -> bool {
    v.kind == ViolationKind::FormatMismatch
        && ["/original", "/currency", "/unit"]
            .iter()
            .any(|f| v.path.ends_with(f))
}

fn count(default: usize) -> usize {
    std::env::var("MASK_WALKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(default, |n: usize| {
            if default >= 10_000 {
                n
            } else {
                (n / 10).max(1)
            }
        })
}

fn report<C: Contract>(engine: &Arc<MaskEngine>, n: usize, seed: u64) {
    let start = std::time::Instant::now();
    let t = walks::<C>(engine, n, seed, false);
    check(&C::contract_spec().name, &t, start);
}

/// Prints a contract's walks and asserts them sound.
fn check(name: &str, t: &Tally, start: std::time::Instant) {
    println!(
        "{:<14} walks {:>6}  valid {:>6}  custom-check only {:>5}  invalid {}  empty masks {}  \
         filter emptied {}  capped {}  mean tokens {:.1}  longest {} B  ({:.1} s)",
        name,
        t.walks,
        t.valid,
        t.custom_only,
        t.ir_invalid,
        t.empty_masks,
        t.filter_emptied,
        t.capped,
        t.tokens as f64 / t.walks as f64,
        t.max_len,
        start.elapsed().as_secs_f64()
    );
    for e in &t.examples {
        println!("  invalid: {e}");
    }
    for e in t.errors.iter().take(5) {
        println!("  llguidance error: {e}");
    }
    assert_eq!(t.ir_invalid, 0, "{name} produced invalid outputs");
    assert_eq!(t.empty_masks, 0, "empty mask before the grammar accepted");
    assert_eq!(t.filter_emptied, 0, "the rule filter emptied a mask");
    assert_eq!(t.capped, 0, "walks reached {MAX_TOKENS} tokens");
}

#[test]
fn guidance_walks_are_sound() {
    let e = engine();
    report::<Guidance>(&e, count(10_000), 1);
}

#[test]
fn value_types_walks_are_sound() {
    let e = engine();
    report::<Span>(&e, count(1_000), 2);
    report::<Amount>(&e, count(1_000), 3);
    report::<TableValue>(&e, count(1_000), 4);
}

#[test]
fn example_contracts_walks_are_sound() {
    let e = engine();
    report::<Address>(&e, count(1_000), 5);
    report::<Policy>(&e, count(1_000), 6);
    report::<FilingTable>(&e, count(1_000), 7);
    report::<Exclusions>(&e, count(1_000), 8);
}

/// A runtime contract whose schema keeps its own JSON Schema mask (an optional property of two
/// types, a list; three of the rules' fields optional, before and after the required one, which
/// the mask may leave out; rules that force each other in a chain: `flag` null makes `mid` null,
/// which needs `high`, which needs `low`), its rules held over that mask by the filter
/// (`Grammar::rules_over_schema`): every walk ends in a reply the schema's validator takes,
/// rules included, and the filter never empties the mask. (Its first run found one that did:
/// the filter let `-` through where only `-0` kept `low <= high`, and this mask takes no `-0`.)
/// The reference mask is not compared here: token by token over a free string it took minutes;
/// `filter_matches_its_reference` holds the filter's shortcuts to it.
#[test]
fn runtime_rules_over_their_schema_mask_walks_are_sound() {
    let e = engine();
    let contract = DynContract::from_schema(serde_json::json!({
        "type": "object",
        "x-rules": [
            "low <= high",
            "both_or_neither(low, high)",
            "at_least_one(mid, high)",
            "mid <= high",
            "both_or_neither(flag, mid)"
        ],
        "required": ["low"],
        "additionalProperties": false,
        "properties": {
            "flag": {"type": ["boolean", "null"]},
            "mid": {"type": ["integer", "null"], "minimum": 0, "maximum": 9},
            "low": {"type": ["number", "null"], "minimum": -5, "maximum": 50},
            "high": {"type": ["integer", "null"], "maximum": 20},
            "note": {"type": ["string", "integer"], "maxLength": 6, "minimum": -9, "maximum": 9},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}
        }
    }))
    .expect("schema");
    assert!(!contract.decodes_typed() && contract.rules_in_mask());
    runtime_walks(
        &e,
        &contract,
        count(1_000),
        9,
        "runtime, rules over its schema",
    );
    // A few walks with every step's mask also computed token by token.
    let grammar = contract
        .mask_grammar()
        .expect("a grammar holding the rules");
    let t = walks_of(&e, &grammar, 10, 10, true, |_| Ok(()));
    assert!(t.mismatches.is_empty(), "{:?}", t.mismatches);
    assert!(t.compared > 0);
    println!("compared with the reference: {} steps", t.compared);
    // A chain: `low` is bounded by `high` through `mid`, which comes between them; `x` or `y`
    // must be given, each below its own bound and above `low`. The filter read one partner
    // deep let `low` be 30, then left `mid` nothing to write.
    let contract = DynContract::from_schema(serde_json::json!({
        "type": "object",
        "x-rules": ["low <= mid", "mid < high", "low <= x", "low <= y", "at_least_one(x, y)"],
        "required": ["low", "mid", "high", "x", "y"],
        "additionalProperties": false,
        "properties": {
            "low": {"type": "number", "minimum": -100, "maximum": 100},
            "mid": {"type": "number"},
            "high": {"type": "integer", "maximum": 10},
            "x": {"type": ["integer", "null"], "maximum": 8},
            "y": {"type": ["number", "null"], "maximum": 9.5}
        }
    }))
    .expect("schema");
    assert!(contract.rules_in_mask());
    runtime_walks(&e, &contract, count(300), 17, "runtime, a chain of rules");
    // Rules on inline objects below the root, held over the schema's own mask: an optional
    // object of two types with a chain, inside it another object with a rule of its own.
    let contract = DynContract::from_schema(serde_json::json!({
        "type": "object",
        "required": ["range"],
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "range": {
                "type": ["object", "null"],
                "x-rules": ["low <= mid", "mid <= high", "both_or_neither(low, high)"],
                "required": ["low", "mid"],
                "additionalProperties": false,
                "properties": {
                    "low": {"type": ["number", "null"], "minimum": -50, "maximum": 50},
                    "mid": {"type": "integer"},
                    "high": {"type": ["integer", "null"], "maximum": 10},
                    "inner": {
                        "type": "object",
                        "x-rules": ["a < b"],
                        "required": ["a", "b"],
                        "additionalProperties": false,
                        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "maximum": 3}}
                    }
                }
            }
        }
    }))
    .expect("schema");
    assert!(contract.rules_in_mask());
    runtime_walks(
        &e,
        &contract,
        count(300),
        19,
        "runtime, rules on inline objects",
    );
    // Dates in a chain, the middle one last: `end` may not come before `start`. (Under
    // llguidance's built-in `"format": "date"` the walks wrote `9733-02-29`, which the
    // validator refuses; the engine compiles the format as its exact pattern.)
    let day = serde_json::json!({"type": "string", "format": "date"});
    let contract = DynContract::from_schema(serde_json::json!({
        "type": "object",
        "x-rules": ["start <= signed", "signed <= end"],
        "required": ["start", "end", "signed"],
        "additionalProperties": false,
        "properties": {
            "start": day,
            "end": day,
            "signed": day,
            "note": {"type": ["string", "null"], "maxLength": 4}
        }
    }))
    .expect("schema");
    assert!(contract.rules_in_mask());
    runtime_walks(&e, &contract, count(300), 23, "runtime, a chain of dates");
}

/// The filter's token classes and shortcuts change nothing: on walks over contracts with
/// numbers under rules (`Guidance`), strings, enums, nested objects and lists, every step's
/// mask equals the one computed token by token with a copy of the scanner.
#[test]
fn filter_matches_its_reference() {
    let e = engine();
    for (name, t) in [
        ("Guidance", walks::<Guidance>(&e, 300, 11, true)),
        ("Amount", walks::<Amount>(&e, 40, 12, true)),
        ("Address", walks::<Address>(&e, 40, 13, true)),
        ("Policy", walks::<Policy>(&e, 20, 14, true)),
        ("FilingTable", walks::<FilingTable>(&e, 20, 15, true)),
        ("Exclusions", walks::<Exclusions>(&e, 20, 16, true)),
    ] {
        println!(
            "{name:<12} walks {:>4}  steps compared {:>6}  mismatches {}",
            t.walks,
            t.compared,
            t.mismatches.len()
        );
        for m in t.mismatches.iter().take(5) {
            println!("  {m}");
        }
        assert!(t.compared > t.walks, "{name}: too few steps compared");
        assert!(
            t.mismatches.is_empty(),
            "{name}: the filter differs from its reference"
        );
    }
}

/// `n` walks over a runtime contract's mask grammar (its rules held by the value filter), each
/// output checked by `DynContract::validate`, asserted sound ([`check`]).
fn runtime_walks(e: &Arc<MaskEngine>, contract: &DynContract, n: usize, seed: u64, name: &str) {
    let grammar = contract
        .mask_grammar()
        .expect("a grammar holding the rules");
    let start = std::time::Instant::now();
    let t = walks_of(e, &grammar, n, seed, false, |text| {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|err| {
            Violations::one(contract_core::Violation::new(
                "",
                ViolationKind::JsonInvalid,
                err.to_string(),
            ))
        })?;
        contract.validate(&value)
    });
    check(name, &t, start);
}

/// One random walk's output under the contract mask (uniform among the allowed tokens).
fn walk_output(engine: &Arc<MaskEngine>, grammar: &Grammar, rng: &mut SplitMix64) -> Vec<u8> {
    let mut mask = engine.mask(grammar).expect("grammar compiles");
    let stops = engine.stop_tokens().to_vec();
    for _ in 0..MAX_TOKENS {
        if mask.is_stopped() {
            break;
        }
        let allowed = allowed_ids(mask.allowed_tokens().expect("mask"));
        let Some(&tok) = allowed.get(rng.below(allowed.len())) else {
            break;
        };
        if stops.contains(&tok) {
            break;
        }
        mask.consume(&[tok]).expect("an allowed token is consumed");
    }
    mask.output().to_vec()
}

/// The reach classes the filter scans at its quiet steps ([`Reach`]: a `:` or `,` followed by a
/// byte other than whitespace, after a `"` inside a string) leave out only tokens the scanner
/// never refuses there: at every byte prefix of random walks' outputs where the scanner is quiet,
/// every token of the vocabulary outside the class is allowed by a full run of the scanner over
/// its bytes.
#[test]
fn reach_classes_hold_every_token_the_scanner_may_refuse() {
    let e = engine();
    let vocab: Vec<&[u8]> = (0..e.vocab_size() as u32)
        .map(|t| e.token_bytes(t))
        .collect();
    let mut rng = SplitMix64(21);
    let (mut steps, mut checked) = (0, 0);
    let mut reaches = std::collections::HashSet::new();
    for spec in [
        Guidance::contract_spec(),
        Address::contract_spec(),
        FilingTable::contract_spec(),
        Exclusions::contract_spec(),
    ] {
        let grammar = Grammar::with_options(spec, options());
        let plan = RulePlan::new(&grammar);
        for _ in 0..3 {
            let out = walk_output(&e, &grammar, &mut rng);
            for end in 0..=out.len() {
                let mut s = Scanner::new();
                assert!(s.advance(&plan, &out[..end]), "a walk's own prefix refused");
                let Some(reach) = s.quiet() else {
                    continue;
                };
                reaches.insert(format!("{reach:?}"));
                steps += 1;
                for tok in vocab.iter().filter(|t| !reach.reached_by(t)) {
                    checked += 1;
                    assert!(
                        s.clone().advance(&plan, tok),
                        "after {:?} ({reach:?}), token {:?} is refused outside its class",
                        String::from_utf8_lossy(&out[..end]),
                        String::from_utf8_lossy(tok)
                    );
                }
            }
        }
    }
    println!("quiet steps {steps}, tokens checked {checked}, reaches {reaches:?}");
    assert!(
        reaches.len() >= 4,
        "too few kinds of quiet step: {reaches:?}"
    );
}

/// Mask time per step, llguidance alone against llguidance plus the value filter.
#[test]
fn mask_timings() {
    let e = engine();
    for (name, grammar) in [
        ("Guidance", Guidance::grammar()),
        (
            "Policy",
            Grammar::with_options(Policy::contract_spec(), options()),
        ),
    ] {
        let mut llg = Vec::new();
        let mut total = Vec::new();
        let mut rng = SplitMix64(42);
        for _ in 0..50 {
            let mut mask = e.mask(&grammar).unwrap().with_timing(true);
            for _ in 0..400 {
                if mask.is_stopped() {
                    break;
                }
                let bits = mask.allowed_tokens().unwrap().to_vec();
                let allowed: Vec<u32> = (0..bits.len() * 32)
                    .filter(|&t| bits[t / 32] >> (t % 32) & 1 == 1)
                    .map(|t| t as u32)
                    .collect();
                let tok = allowed[rng.below(allowed.len())];
                if e.stop_tokens().contains(&tok) {
                    break;
                }
                mask.consume(&[tok]).unwrap();
            }
            let s = mask.stats();
            llg.extend_from_slice(&s.llg_ns);
            total.extend(s.llg_ns.iter().zip(&s.filter_ns).map(|(a, b)| a + b));
        }
        println!(
            "{name:<10} steps {:>6}  llguidance p50 {:>7.1} µs p99 {:>7.1} µs  | with rule filter p50 {:>7.1} µs p99 {:>7.1} µs",
            llg.len(),
            percentile_us(&llg, 50.0),
            percentile_us(&llg, 99.0),
            percentile_us(&total, 50.0),
            percentile_us(&total, 99.0),
        );
    }
}
