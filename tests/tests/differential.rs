//! Differential property test: for random JSON values, `from_value` finds no field-level
//! violation exactly when the `jsonschema` crate (draft 2020-12, formats validated) accepts the
//! value against `json_schema()`; and `from_json` on the value's text says what `from_value`
//! says.
//!
//! Cross-field rules and custom checks are not expressible in JSON Schema, so only field-level
//! kinds (`ViolationKind::is_field_level`) take part. The values mix near-valid objects (the
//! right keys with random typed values, edge numbers, nulls, wrong types, extra and missing
//! keys) with arbitrary JSON.

use std::fmt::Debug;
use std::sync::LazyLock;

use contract_core::{Contract, Violations};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Next-quarter revenue guidance stated in an earnings release.
#[derive(Contract, Serialize, Deserialize, Debug)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Guidance {
    #[contract(range = 1..=4)]
    quarter: Option<u8>,
    #[contract(range = 2018..=2030)]
    year: Option<u16>,
    /// Low end of the range.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    low: Option<f64>,
    #[contract(exclusive_min = 0, unit = "USD millions")]
    high: Option<f64>,
}

/// A reporting currency.
#[derive(Contract, Serialize, Deserialize, Debug, PartialEq)]
#[serde(rename_all = "UPPERCASE")]
enum Currency {
    Usd,
    Eur,
    Jpy,
}

/// One line of a filing.
#[derive(Contract, Serialize, Deserialize, Debug)]
struct Line {
    #[contract(min = 0, max = 1e9)]
    amount: f64,
    #[contract(len = 1..=6)]
    label: Option<String>,
    rank: u8,
    currency: Currency,
}

/// A filing with strings of every kind, a list of nested contracts and wide integers.
#[derive(Contract, Serialize, Deserialize, Debug)]
#[contract(rule = "filed <= due")]
struct Filing {
    #[contract(pattern = "^[A-Z]{2,4}$")]
    ticker: String,
    #[contract(len = 1..=8)]
    name: String,
    #[contract(one_of = ["10-K", "10-Q", "8-K"])]
    form: String,
    #[contract(format = "date")]
    filed: Option<String>,
    #[contract(format = "date")]
    due: Option<String>,
    currency: Currency,
    #[contract(len = ..=3)]
    lines: Vec<Line>,
    shares: i64,
    #[contract(range = -5..=5)]
    delta: Option<i64>,
    #[contract(len = ..=2, pattern = "^[a-z]+$")]
    tags: Vec<String>,
    flagged: bool,
}

fn validator<C: Contract>() -> jsonschema::Validator {
    let schema = <C as Contract>::json_schema();
    match jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
    {
        Ok(v) => v,
        Err(e) => panic!(
            "json_schema() of {} does not compile: {e}\n{schema:#}",
            C::contract_spec().name
        ),
    }
}

static GUIDANCE: LazyLock<jsonschema::Validator> = LazyLock::new(validator::<Guidance>);
static FILING: LazyLock<jsonschema::Validator> = LazyLock::new(validator::<Filing>);
static LINE: LazyLock<jsonschema::Validator> = LazyLock::new(validator::<Line>);
static CURRENCY: LazyLock<jsonschema::Validator> = LazyLock::new(validator::<Currency>);

/// Asserts that the two validators agree on `value`.
fn agree<C: Contract + Debug>(schema: &jsonschema::Validator, value: &Value) {
    let ours: Result<C, Violations> = C::from_value(value);
    let field_ok = match &ours {
        Ok(_) => true,
        Err(violations) => !violations.iter().any(|v| v.kind.is_field_level()),
    };
    let schema_ok = schema.is_valid(value);
    if field_ok != schema_ok {
        let theirs: Vec<String> = schema.iter_errors(value).map(|e| e.to_string()).collect();
        panic!(
            "{}: from_value field-level ok = {field_ok}, jsonschema ok = {schema_ok}\n\
             value: {value}\nours: {ours:?}\ntheirs: {theirs:?}\nschema: {:#}",
            C::contract_spec().name,
            <C as Contract>::json_schema()
        );
    }
}

/// Asserts that `from_json` on the value's text gives what `from_value` gives: the same typed
/// value or the same violations (messages included), compared through `Debug`.
fn same_from_json<C: Contract + Debug>(value: &Value) {
    let text = value.to_string();
    let (parsed, given) = (C::from_json(&text), C::from_value(value));
    assert_eq!(format!("{parsed:?}"), format!("{given:?}"), "{text}");
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        edge_number(),
        "[a-zA-Z0-9 .-]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Numbers near the bounds that matter: type limits, zero, integral floats, huge values.
fn edge_number() -> BoxedStrategy<Value> {
    prop_oneof![
        (-10i64..40).prop_map(Value::from),
        (2000i64..2040).prop_map(Value::from),
        (-3.0f64..6.0).prop_map(Value::from),
        prop::sample::select(vec![
            json!(0),
            json!(-0.0),
            json!(0.0),
            json!(1),
            json!(1.0),
            json!(3.0),
            json!(4.5),
            json!(5),
            json!(1e-300),
            json!(-1),
            json!(255),
            json!(256),
            json!(255.0),
            json!(65535),
            json!(65536),
            json!(1e9),
            json!(1000000000.5),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(9_223_372_036_854_775_808u64),
            json!(2f64.powi(63)),
            json!(-(2f64.powi(63))),
            json!(1e19),
            json!(1e30),
            json!(-1e300),
            json!(f64::MAX),
        ]),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
    ]
    .boxed()
}

/// A value of the wrong JSON type, or null.
fn stray() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        edge_number(),
        "[a-z0-9]{0,4}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        any_json(),
    ]
    .boxed()
}

/// Mostly `typed`, sometimes something else.
fn mostly(typed: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![30 => typed, 1 => stray()].boxed()
}

/// Mostly in `range` (as an integer or an integral float), sometimes an edge number.
fn int_in(range: std::ops::RangeInclusive<i64>) -> BoxedStrategy<Value> {
    prop_oneof![
        10 => range.clone().prop_map(Value::from),
        2 => range.prop_map(|i| Value::from(i as f64)),
        1 => edge_number(),
    ]
    .boxed()
}

/// Mostly a positive number, sometimes an edge number.
fn positive() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => (1e-3f64..1e4).prop_map(Value::from),
        3 => (1i64..10_000).prop_map(Value::from),
        1 => edge_number(),
    ]
    .boxed()
}

fn date_like() -> BoxedStrategy<Value> {
    prop_oneof![
        12 => (1900u32..2100, 1u32..13, 1u32..29)
            .prop_map(|(y, m, d)| Value::from(format!("{y:04}-{m:02}-{d:02}"))),
        2 => (1900u32..2100, 0u32..14, 0u32..33)
            .prop_map(|(y, m, d)| Value::from(format!("{y:04}-{m:02}-{d:02}"))),
        1 => Just(json!("2024-02-29")),
        1 => Just(json!("2023-02-29")),
        1 => Just(json!("2000-02-29")),
        1 => Just(json!("1900-02-29")),
        1 => Just(json!("2024-1-05")),
        1 => Just(json!("2024-01-05T00:00:00Z")),
        1 => Just(json!("")),
        1 => "[0-9-]{8,11}".prop_map(Value::from),
    ]
    .boxed()
}

/// Mostly one of `valid`, sometimes one of `invalid`.
fn either(valid: &[&'static str], invalid: &[&'static str]) -> BoxedStrategy<Value> {
    prop_oneof![
        6 => prop::sample::select(valid.to_vec()).prop_map(Value::from),
        1 => prop::sample::select(invalid.to_vec()).prop_map(Value::from),
    ]
    .boxed()
}

fn currency() -> BoxedStrategy<Value> {
    either(&["USD", "EUR", "JPY"], &["usd", "GBP", "", "Usd"])
}

/// An object with (mostly) the given keys and values from their strategies, sometimes missing
/// a key or carrying an extra one.
fn object(fields: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
    let n = fields.len();
    let (names, values): (Vec<_>, Vec<_>) = fields.into_iter().unzip();
    (
        values,
        prop::collection::vec(prop::bool::weighted(0.98), n),
        prop::option::weighted(0.05, ("[a-z_]{1,6}", stray())),
    )
        .prop_map(move |(values, keep, extra)| {
            let mut map = Map::new();
            for ((name, value), keep) in names.iter().zip(values).zip(keep) {
                if keep {
                    map.insert((*name).to_owned(), value);
                }
            }
            if let Some((key, value)) = extra {
                map.insert(key, value);
            }
            Value::Object(map)
        })
        .boxed()
}

fn nullable(typed: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![3 => typed, 1 => Just(Value::Null)].boxed()
}

fn guidance_like() -> BoxedStrategy<Value> {
    object(vec![
        ("quarter", mostly(nullable(int_in(1..=4)))),
        ("year", mostly(nullable(int_in(2018..=2030)))),
        ("low", mostly(nullable(positive()))),
        ("high", mostly(nullable(positive()))),
    ])
}

fn line_like() -> BoxedStrategy<Value> {
    object(vec![
        ("amount", mostly(positive())),
        (
            "label",
            mostly(nullable(
                prop_oneof![
                    6 => "[a-zé ]{1,6}".prop_map(Value::from),
                    1 => "[a-zé ]{0,8}".prop_map(Value::from),
                ]
                .boxed(),
            )),
        ),
        ("rank", mostly(int_in(0..=255))),
        ("currency", mostly(currency())),
    ])
}

fn filing_like() -> BoxedStrategy<Value> {
    object(vec![
        (
            "ticker",
            mostly(
                prop_oneof![
                    8 => "[A-Z]{2,4}".prop_map(Value::from),
                    1 => "[A-Z]{1,5}".prop_map(Value::from),
                    1 => "[A-Za-z0-9]{0,6}".prop_map(Value::from),
                    1 => "x[A-Z]{2,3}".prop_map(Value::from),
                ]
                .boxed(),
            ),
        ),
        (
            "name",
            mostly(
                prop_oneof![
                    6 => "[a-zA-Zé]{1,8}".prop_map(Value::from),
                    1 => "[a-zA-Zé]{0,10}".prop_map(Value::from),
                ]
                .boxed(),
            ),
        ),
        (
            "form",
            mostly(either(
                &["10-K", "10-Q", "8-K"],
                &["10-k", "S-1", "", "10-K "],
            )),
        ),
        ("filed", mostly(nullable(date_like()))),
        ("due", mostly(nullable(date_like()))),
        ("currency", mostly(currency())),
        (
            "lines",
            mostly(
                prop::collection::vec(prop_oneof![8 => line_like(), 1 => stray()], 0..3)
                    .prop_map(Value::from)
                    .boxed(),
            ),
        ),
        ("shares", mostly(int_in(-1_000_000..=1_000_000))),
        ("delta", mostly(nullable(int_in(-5..=5)))),
        (
            "tags",
            mostly(
                prop::collection::vec(
                    prop_oneof![
                        12 => "[a-z]{1,4}".prop_map(Value::from),
                        1 => "[a-zA-Z0-9]{0,4}".prop_map(Value::from),
                        1 => stray(),
                    ],
                    0..4,
                )
                .prop_map(Value::from)
                .boxed(),
            ),
        ),
        (
            "flagged",
            mostly(any::<bool>().prop_map(Value::from).boxed()),
        ),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn guidance_agrees(value in prop_oneof![4 => guidance_like(), 1 => any_json()]) {
        agree::<Guidance>(&GUIDANCE, &value);
        same_from_json::<Guidance>(&value);
    }

    #[test]
    fn filing_agrees(value in prop_oneof![4 => filing_like(), 1 => any_json()]) {
        agree::<Filing>(&FILING, &value);
        same_from_json::<Filing>(&value);
    }

    #[test]
    fn line_agrees(value in prop_oneof![4 => line_like(), 1 => any_json()]) {
        agree::<Line>(&LINE, &value);
        same_from_json::<Line>(&value);
    }

    #[test]
    fn currency_agrees(value in prop_oneof![3 => currency(), 1 => any_json()]) {
        agree::<Currency>(&CURRENCY, &value);
        same_from_json::<Currency>(&value);
    }
}

/// Fixed cases the strategies might take long to hit.
#[test]
fn known_edges_agree() {
    let valid_filing = json!({
        "ticker": "ABC", "name": "Acme", "form": "10-K", "filed": "2024-02-29",
        "due": null, "currency": "USD",
        "lines": [{"amount": 0, "label": null, "rank": 255, "currency": "EUR"}],
        "shares": i64::MAX, "delta": -5, "tags": ["a"], "flagged": false
    });
    agree::<Filing>(&FILING, &valid_filing);
    assert!(Filing::from_value(&valid_filing).is_ok());
    for patch in [
        json!({"filed": "2023-02-29"}),
        json!({"shares": 9_223_372_036_854_775_808u64}),
        json!({"shares": 3.0}),
        json!({"delta": 5.0}),
        json!({"delta": 6}),
        json!({"ticker": "xABC"}),
        json!({"ticker": "ABCDE"}),
        json!({"name": "éééééééé"}),
        json!({"name": "ééééééééé"}),
        json!({"tags": ["a", "b", "c"]}),
        json!({"lines": [{"amount": 1e9, "label": "ab", "rank": 256, "currency": "USD"}]}),
        json!({"lines": [{"amount": 1.5, "label": "", "rank": 1.0, "currency": "usd"}]}),
    ] {
        let mut value = valid_filing.clone();
        if let (Value::Object(map), Value::Object(patch)) = (&mut value, patch) {
            map.extend(patch);
        }
        agree::<Filing>(&FILING, &value);
        same_from_json::<Filing>(&value);
    }
    for value in [
        json!({"quarter": 3.0, "year": 2030, "low": 1e-300, "high": null}),
        json!({"quarter": 0, "year": null, "low": null, "high": null}),
        json!({"quarter": null, "year": 2018.0, "low": 0, "high": 1}),
        json!({"quarter": null, "year": null, "low": 9, "high": 7}),
        json!({"quarter": null, "year": null, "low": null}),
        json!(null),
        json!([]),
    ] {
        agree::<Guidance>(&GUIDANCE, &value);
        same_from_json::<Guidance>(&value);
    }
}

/// The near-valid strategies must produce both accepted and rejected values, or agreement
/// would prove little.
#[test]
fn strategies_cover_both_outcomes() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    fn share_valid(strategy: BoxedStrategy<Value>, schema: &jsonschema::Validator) -> f64 {
        let mut runner = TestRunner::deterministic();
        let n = 400;
        let valid = (0..n)
            .filter(|_| match strategy.new_tree(&mut runner) {
                Ok(tree) => schema.is_valid(&tree.current()),
                Err(_) => false,
            })
            .count();
        valid as f64 / n as f64
    }

    for (name, share) in [
        ("Guidance", share_valid(guidance_like(), &GUIDANCE)),
        ("Line", share_valid(line_like(), &LINE)),
        ("Filing", share_valid(filing_like(), &FILING)),
    ] {
        assert!(
            (0.03..0.97).contains(&share),
            "{name}: {:.0}% of near-valid values are valid",
            share * 100.0
        );
        eprintln!(
            "{name}: {:.0}% of near-valid values are valid",
            share * 100.0
        );
    }
}
