//! Differential property test between the two validators of one contract: a derived contract's
//! checks (`check_value` against its spec, which is what `from_value` runs before the custom
//! checks) and the runtime contract read from its own JSON Schema,
//! `DynContract::from_schema(C::json_schema()).validate`. Unlike `differential.rs` (field-level
//! kinds against the `jsonschema` crate), the whole verdict takes part here, cross-field rules
//! included: the two share one rule checker, so they must accept and reject the same values
//! and report the same rule violations at the same paths.
//!
//! Values are generated from each contract's schema: the right keys (sometimes one missing or
//! one extra) with values of the declared type near its bounds, nulls, wrong types, and pairs
//! of numbers that only an exact comparison tells apart (an integer against a float near 2^53).

use std::collections::BTreeSet;
use std::fmt::Debug;

use contract_core::dynamic::DynContract;
use contract_core::values::{Amount, DateValue, Evidenced, Span};
use contract_core::{Contract, ViolationKind, Violations};
use examples::filings::{GroundedGuidance, ReleaseGuidance};
use examples::policy::PolicyTerms;
use examples::{Address, Exclusions, FilingTable, Guidance, Policy};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Map, Value};

/// The cross-field violations, as (pointer, message).
fn rule_violations(v: &Violations) -> BTreeSet<(String, String)> {
    v.iter()
        .filter(|v| v.kind == ViolationKind::CrossField)
        .map(|v| (v.path.clone(), v.message.clone()))
        .collect()
}

/// Asserts that both validators of `C` give the same verdict on `value`, and the same rule
/// violations. The derived side is `check_value` against `C::contract_spec()`: the field
/// constraints and rules `from_value` checks, without the custom checks (`check = ..`: a
/// table's row width, a `DateValue`'s calendar), which are code that a schema cannot carry.
fn agree<C: Contract + Debug>(dynamic: &DynContract, value: &Value) -> bool {
    let mut found = Violations::new();
    contract_core::validate::check_value(C::contract_spec(), value, "", &mut found);
    let ours = found.into_result();
    let theirs = dynamic.validate(value);
    let context = || {
        format!(
            "{}: value {value}\nfrom_value: {ours:?}\ndynamic: {theirs:?}",
            C::contract_spec().name
        )
    };
    assert_eq!(ours.is_ok(), theirs.is_ok(), "{}", context());
    // What the custom checks add can only reject more.
    if C::from_value(value).is_ok() {
        assert!(ours.is_ok(), "{}", context());
    }
    if let (Err(a), Err(b)) = (&ours, &theirs) {
        // A failed `anyOf` (an `Option` of a contract) is one `schema_mismatch` on the runtime
        // side, which hides what went wrong inside its branches; elsewhere the rule violations
        // are the same, at the same paths.
        let hidden: Vec<&str> = b
            .iter()
            .filter(|v| v.kind == ViolationKind::SchemaMismatch)
            .map(|v| v.path.as_str())
            .collect();
        let visible = |set: BTreeSet<(String, String)>| -> BTreeSet<(String, String)> {
            set.into_iter()
                .filter(|(p, _)| !hidden.iter().any(|h| p.starts_with(&format!("{h}/"))))
                .collect()
        };
        assert_eq!(
            visible(rule_violations(a)),
            visible(rule_violations(b)),
            "{}",
            context()
        );
    }
    ours.is_ok()
}

fn dynamic_of<C: Contract>() -> DynContract {
    match DynContract::from_schema(C::json_schema()) {
        Ok(d) => d,
        Err(e) => panic!("{}: {e}", C::contract_spec().name),
    }
}

/// Numbers near the bounds that matter, as integers and floats.
fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        8 => (1i64..20).prop_map(Value::from),
        1 => (-10i64..40).prop_map(Value::from),
        1 => (2000i64..2040).prop_map(Value::from),
        1 => (-3.0f64..6.0).prop_map(Value::from),
        1 => (1e-3f64..1e4).prop_map(Value::from),
        2 => prop::sample::select(vec![
            json!(0),
            json!(0.0),
            json!(1),
            json!(1.0),
            json!(4.5),
            json!(255),
            json!(256),
            json!(65536),
            json!(1e9),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(9_007_199_254_740_992u64),
            json!(9_007_199_254_740_993u64),
            json!(9_007_199_254_740_992.0),
            json!(1e30),
        ]),
    ]
    .boxed()
}

/// A value of the wrong type, or null.
fn stray() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        "[a-z0-9]{0,4}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
    ]
    .boxed()
}

fn string_for(schema: &Map<String, Value>) -> BoxedStrategy<Value> {
    // A pattern: mostly strings that match it (proptest generates from the regex, its anchors
    // dropped), sometimes others.
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        // `\d` as ASCII digits: what a JSON Schema pattern means (ECMA-262), while proptest's
        // generator would draw any Unicode digit.
        let bare = pattern
            .trim_start_matches('^')
            .trim_end_matches('$')
            .replace("\\d", "[0-9]");
        if let Ok(matching) = proptest::string::string_regex(&bare) {
            return prop_oneof![
                6 => matching.prop_map(Value::from),
                1 => "[a-zA-Z0-9 -]{0,8}".prop_map(Value::from),
            ]
            .boxed();
        }
    }
    match schema.get("format").and_then(Value::as_str) {
        Some("date") => prop_oneof![
            8 => (1990u32..2040, 1u32..13, 1u32..29)
                .prop_map(|(y, m, d)| Value::from(format!("{y:04}-{m:02}-{d:02}"))),
            1 => Just(json!("2023-02-29")),
            1 => "[0-9-]{8,11}".prop_map(Value::from),
        ]
        .boxed(),
        _ => prop_oneof![
            4 => "[a-zA-Z ]{1,12}".prop_map(Value::from),
            1 => Just(json!("")),
            4 => "[A-Z]{3}".prop_map(Value::from),
            1 => "[0-9]{1,4}".prop_map(Value::from),
        ]
        .boxed(),
    }
}

/// Values for `schema` (resolving `$ref` in `defs`): mostly of its type, sometimes not.
fn from_schema(schema: &Value, defs: &Map<String, Value>, depth: usize) -> BoxedStrategy<Value> {
    let typed = typed(schema, defs, depth);
    prop_oneof![40 => typed, 1 => stray()].boxed()
}

fn typed(schema: &Value, defs: &Map<String, Value>, depth: usize) -> BoxedStrategy<Value> {
    let Some(map) = schema.as_object() else {
        return stray();
    };
    if depth > 12 {
        return Just(Value::Null).boxed();
    }
    if let Some(r) = map.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        return match defs.get(name) {
            Some(def) => typed(def, defs, depth + 1),
            None => stray(),
        };
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return prop_oneof![
            12 => prop::sample::select(values.clone()),
            1 => Just(json!("not-an-option")),
        ]
        .boxed();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = map.get(key) {
            let strategies: Vec<BoxedStrategy<Value>> =
                alts.iter().map(|a| typed(a, defs, depth + 1)).collect();
            return prop::strategy::Union::new(strategies).boxed();
        }
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let strategies: Vec<BoxedStrategy<Value>> = types
        .iter()
        .map(|t| match *t {
            "null" => Just(Value::Null).boxed(),
            "boolean" => any::<bool>().prop_map(Value::from).boxed(),
            "integer" | "number" => number(),
            "string" => string_for(map),
            "array" => {
                let item = map
                    .get("items")
                    .map_or_else(stray, |i| from_schema(i, defs, depth + 1));
                prop::collection::vec(item, 0..3usize)
                    .prop_map(Value::from)
                    .boxed()
            }
            "object" => object(map, defs, depth),
            _ => stray(),
        })
        .collect();
    if strategies.is_empty() {
        return stray();
    }
    prop::strategy::Union::new(strategies).boxed()
}

/// An object with its properties (each kept with probability 0.99) and sometimes an extra key.
fn object(
    map: &Map<String, Value>,
    defs: &Map<String, Value>,
    depth: usize,
) -> BoxedStrategy<Value> {
    let props: Vec<(String, BoxedStrategy<Value>)> = map
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .map(|(k, s)| (k.clone(), from_schema(s, defs, depth + 1)))
                .collect()
        })
        .unwrap_or_default();
    let n = props.len();
    let (names, values): (Vec<String>, Vec<BoxedStrategy<Value>>) = props.into_iter().unzip();
    (
        values,
        prop::collection::vec(prop::bool::weighted(0.99), n),
        prop::option::weighted(0.03, ("[a-z_]{1,6}", stray())),
    )
        .prop_map(move |(values, keep, extra)| {
            let mut out = Map::new();
            for ((name, value), keep) in names.iter().zip(values).zip(keep) {
                if keep {
                    out.insert(name.clone(), value);
                }
            }
            if let Some((k, v)) = extra {
                out.insert(k, v);
            }
            Value::Object(out)
        })
        .boxed()
}

/// Runs `cases` generated values of `C` through both validators; returns how many were valid.
fn run<C: Contract + Debug>(cases: u32) -> u32 {
    let schema = C::json_schema();
    let dynamic = dynamic_of::<C>();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let strategy = typed(&schema, &defs, 0);
    // A fixed seed: the same values on every run, so that the share of valid ones asserted
    // below does not depend on luck.
    let mut runner = TestRunner::deterministic();
    let mut valid = 0;
    for _ in 0..cases {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        valid += u32::from(agree::<C>(&dynamic, &tree.current()));
    }
    valid
}

/// Every example contract, and the built-in value types: both validators agree, and the
/// generator reaches both verdicts (else agreement would prove little).
#[test]
fn derived_and_runtime_validators_agree_on_every_example_contract() {
    let cases = 1500;
    let figures = [
        ("Guidance", run::<Guidance>(cases)),
        ("Address", run::<Address>(cases)),
        ("Policy", run::<Policy>(cases)),
        ("FilingTable", run::<FilingTable>(cases)),
        ("Exclusions", run::<Exclusions>(cases)),
        ("ReleaseGuidance", run::<ReleaseGuidance>(cases)),
        ("GroundedGuidance", run::<GroundedGuidance>(cases)),
        ("PolicyTerms", run::<PolicyTerms>(cases)),
        ("Span", run::<Span>(cases)),
        ("Amount", run::<Amount>(cases)),
        ("DateValue", run::<DateValue>(cases)),
        ("Evidenced<Amount>", run::<Evidenced<Amount>>(cases)),
    ];
    for (name, valid) in figures {
        eprintln!("{name}: {valid}/{cases} valid");
        assert!(valid > 0 && valid < cases, "{name}: {valid}/{cases} valid");
    }
}

/// The case the two paths used to disagree on: `low <= high` with an integer `low` one above
/// 2^53 and a float `high` at 2^53. Through `f64` both are 2^53 and the rule holds; exactly, it
/// does not.
#[test]
fn an_integer_and_a_float_are_compared_exactly_by_both_validators() {
    let dynamic = dynamic_of::<Guidance>();
    let low = 9_007_199_254_740_993u64;
    let text =
        format!(r#"{{"quarter": 1, "year": 2025, "low": {low}, "high": 9007199254740992.0}}"#);
    let value: Value = serde_json::from_str(&text).expect("json");
    let typed = Guidance::from_json(&text).expect_err("low > high");
    let runtime = dynamic.validate(&value).expect_err("low > high");
    assert_eq!(rule_violations(&typed), rule_violations(&runtime));
    assert_eq!(rule_violations(&typed).len(), 1, "{typed:?}");
    // One below: both accept.
    let text = text.replace(&low.to_string(), "9007199254740991");
    let value: Value = serde_json::from_str(&text).expect("json");
    assert!(Guidance::from_json(&text).is_ok(), "{text}");
    assert!(dynamic.validate(&value).is_ok(), "{text}");
}

/// `docs` without what a JSON Schema cannot carry: the custom checks (Rust functions), and a
/// `Rules:` heading left with no rule under it.
fn without_custom_checks(docs: &str) -> String {
    let blocks: Vec<String> = docs
        .split("\n\n")
        .map(|b| {
            b.lines()
                .filter(|l| !l.starts_with("- custom check "))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let blocks: Vec<&str> = blocks
        .iter()
        .map(String::as_str)
        .filter(|b| !b.is_empty())
        // Fields the library computes (`#[contract(skip)]`, a date's `iso`) are not in the
        // JSON Schema the model is given, so a runtime contract cannot list them.
        .filter(|b| !b.starts_with("Not asked of the model:"))
        .collect();
    let kept: Vec<&str> = blocks
        .iter()
        .enumerate()
        .filter(|(i, b)| {
            **b != "Rules:" || blocks.get(i + 1).is_some_and(|next| next.starts_with("- "))
        })
        .map(|(_, b)| *b)
        .collect();
    kept.join("\n\n")
}

/// The two renderers of the signature and the docs (the derived contract's, over its IR, and
/// the runtime contract's, over its JSON Schema) give the same text for every example
/// contract, the docs less the custom checks and the computed fields a schema cannot carry. While both renderers exist,
/// this holds them to one output.
///
/// One known difference is left out: an enum's per-variant doc comments, which the derived docs
/// list under `Values:` and the JSON Schema carries only inside the enum's `description` (so the
/// runtime docs show them there); `Policy` (its `CoverageKind`) is compared on its signature only.
#[test]
fn derived_and_runtime_renderings_agree_on_every_example_contract() {
    fn check<C: Contract>(docs_too: bool) -> usize {
        let dynamic = dynamic_of::<C>();
        let name = &C::contract_spec().name;
        assert_eq!(C::signature(), dynamic.signature(), "{name}");
        let derived = C::docs_markdown();
        if docs_too {
            assert_eq!(
                without_custom_checks(&derived).trim_end(),
                without_custom_checks(&dynamic.docs_markdown()).trim_end(),
                "{name}"
            );
        }
        usize::from(derived.contains("- custom check "))
    }
    let with_checks = check::<Guidance>(true)
        + check::<Address>(true)
        + check::<Exclusions>(true)
        + check::<FilingTable>(true)
        + check::<Policy>(false)
        + check::<PolicyTerms>(true)
        + check::<GroundedGuidance>(true)
        + check::<ReleaseGuidance>(true)
        + check::<Evidenced<Amount>>(true)
        + check::<Span>(true)
        + check::<Amount>(true)
        + check::<DateValue>(true);
    // The filter removed something: some of these contracts have custom checks.
    assert!(with_checks > 0);
}
