//! The value filter over hand-written token byte strings.

use contract_core::grammar::{FieldShape, Grammar, GrammarOptions, ObjectShape, Shape};
use contract_core::ir::NumberBounds;
use contract_core::{CmpOp, Format, Rule};

use super::probe::Probe;
use serde_json::json;

use super::*;

fn grammar(fields: Vec<(&str, Shape)>, rules: Vec<Rule>) -> Grammar {
    Grammar {
        name: "T".into(),
        options: GrammarOptions::default(),
        root: Shape::Object { index: 0 },
        objects: vec![ObjectShape {
            name: "T".into(),
            fields: fields
                .into_iter()
                .map(|(n, s)| FieldShape {
                    name: n.into(),
                    shape: s,
                    grounded: None,
                    form: None,
                })
                .collect(),
            rules,
            paths: vec![String::new()],
        }],
        mask_schema: None,
    }
}

fn nullable(s: Shape) -> Shape {
    Shape::Nullable { inner: Box::new(s) }
}

fn positive() -> Shape {
    Shape::Number {
        bounds: NumberBounds {
            exclusive_minimum: Some(0.into()),
            ..NumberBounds::default()
        },
    }
}

fn unbounded() -> Shape {
    Shape::Number {
        bounds: NumberBounds::default(),
    }
}

fn cmp(l: &str, op: &str, r: &str) -> Rule {
    Rule::Compare {
        left: l.into(),
        op: CmpOp::parse(op).expect("an operator"),
        right: r.into(),
    }
}

fn guidance() -> RulePlan {
    RulePlan::new(&grammar(
        vec![
            ("quarter", nullable(Shape::Integer { min: 1, max: 4 })),
            ("low", nullable(positive())),
            ("high", nullable(positive())),
        ],
        vec![
            cmp("low", "<=", "high"),
            Rule::BothOrNeither(vec!["low".into(), "high".into()]),
        ],
    ))
}

fn at(plan: &RulePlan, text: &str) -> Scanner {
    let mut s = Scanner::new();
    assert!(s.advance(plan, text.as_bytes()), "prefix {text:?} rejected");
    s
}

#[track_caller]
fn allowed(plan: &RulePlan, prefix: &str, token: &str) -> bool {
    at(plan, prefix).allows(plan, token.as_bytes())
}

#[test]
fn high_is_bounded_by_low() {
    let p = guidance();
    let pre = r#"{"quarter": 3, "low": 5, "high": "#;
    assert!(allowed(&p, pre, "5"));
    assert!(allowed(&p, pre, "4")); // 40 is still possible
    assert!(!allowed(&p, pre, "4}"));
    // 4.99999999999999999 parses to 5.0, so `4.` may still end inside the rule...
    assert!(allowed(&p, pre, "4."));
    assert!(!allowed(&p, pre, "4.8"));
    assert!(!allowed(&p, pre, "3."));
    assert!(allowed(&p, pre, "5.0}"));
    assert!(!allowed(&p, pre, "4.99999}"));
    assert!(allowed(&p, pre, "10}"));
    assert!(!allowed(&p, pre, "null"));
    assert!(!allowed(&p, pre, "-"));
    // Parses to 5.0, which is not below 5.
    assert!(allowed(&p, pre, "4.99999999999999999}"));
    assert!(at(&p, &format!("{pre}12}}")).can_end(&p));
    assert!(!at(&p, &format!("{pre}12")).can_end(&p));
}

#[test]
fn values_starting_mid_token() {
    let p = guidance();
    assert!(allowed(&p, r#"{"quarter": null, "low""#, ":null"));
    assert!(allowed(&p, r#"{"quarter": null, "low""#, ": 7"));
    assert!(!allowed(
        &p,
        r#"{"quarter": null, "low": null, "high""#,
        ":5"
    ));
    assert!(allowed(
        &p,
        r#"{"quarter": null, "low": null, "high""#,
        ":null}"
    ));
    assert!(!allowed(&p, r#"{"quarter":1,"low":3,"high""#, ":null"));
    assert!(!allowed(&p, r#"{"quarter":1,"low":3,"high""#, ":2}"));
    assert!(allowed(&p, r#"{"quarter":1,"low":3,"high""#, ":3}"));
    // A value and its terminator in one token after the key.
    assert!(!allowed(&p, r#"{"quarter":1,"low":3,"high"#, r#"":2}"#));
}

#[test]
fn terminators_inside_later_tokens() {
    let span = RulePlan::new(&grammar(
        vec![
            (
                "start_line",
                Shape::Integer {
                    min: 1,
                    max: 4294967295,
                },
            ),
            (
                "end_line",
                Shape::Integer {
                    min: 1,
                    max: 4294967295,
                },
            ),
            (
                "quote",
                nullable(Shape::String {
                    min_len: None,
                    max_len: Some(20),
                    patterns: vec![],
                    format: None,
                }),
            ),
        ],
        vec![cmp("start_line", "<=", "end_line")],
    ));
    let pre = r#"{"start_line": 5, "end_line": 4"#;
    assert!(!allowed(&span, pre, r#",""#));
    assert!(!allowed(&span, pre, ","));
    assert!(allowed(&span, pre, "5"));
    assert!(allowed(&span, pre, r#"5,""#));
    assert!(allowed(
        &span,
        r#"{"start_line": 5, "end_line": 5"#,
        r#",""#
    ));
    // start_line cannot exceed the largest end_line.
    assert!(!allowed(&span, r#"{"start_line": 4294967295"#, "0"));
    assert!(allowed(&span, r#"{"start_line": 429496729"#, "5,"));
    // Leading zeros are not JSON numbers, but `0` alone is below the minimum.
    assert!(!allowed(&span, r#"{"start_line": "#, "0"));
}

#[test]
fn exponents_negatives_and_minus_zero() {
    let p = RulePlan::new(&grammar(
        vec![("a", unbounded()), ("b", unbounded())],
        vec![cmp("a", "<", "b")],
    ));
    let pre = r#"{"a": 0.5e1, "b": "#;
    assert!(!allowed(&p, pre, "5}"));
    assert!(allowed(&p, pre, "5.1}"));
    assert!(allowed(&p, pre, "0.6e1}"));
    assert!(!allowed(&p, pre, "0.5e1}"));
    assert!(!allowed(&p, pre, "-"));
    assert!(allowed(&p, pre, "1e1}"));
    assert!(!allowed(&p, pre, "1e0}"));
    // Exponents past three digits, and numbers that overflow f64, are out.
    assert!(!allowed(&p, pre, "1e0001"));
    assert!(!allowed(&p, pre, "1e400"));
    let neg = r#"{"a": -3, "b": "#;
    assert!(allowed(&p, neg, "-0}"));
    assert!(allowed(&p, neg, "-2.9}"));
    assert!(!allowed(&p, neg, "-3}"));
    assert!(!allowed(&p, neg, "-30}"));
    // With exponents almost any prefix can still end anywhere: -30e-2 > -3.
    assert!(allowed(&p, neg, "-30"));
    let zero = r#"{"a": -0, "b": "#;
    assert!(!allowed(&p, zero, "0}"));
    assert!(!allowed(&p, zero, "-0.0}"));
    assert!(allowed(&p, zero, "1e-300}"));
    // 1e-400 parses to 0.
    assert!(!allowed(&p, zero, "1e-400}"));
}

#[test]
fn at_least_one_and_both_or_neither_groups() {
    let p = streets_plan();
    assert!(allowed(&p, r#"{"street""#, ":null"));
    assert!(!allowed(&p, r#"{"street":null,"city""#, ":null"));
    assert!(allowed(&p, r#"{"street":null,"city""#, r#":"Bern","#));
    assert!(allowed(&p, r#"{"street":"x","city""#, ":null"));
    // A string no rule compares: only tokens with `"` and `:` can matter.
    assert_eq!(
        at(&p, r#"{"street":null,"city":"Be"#).quiet(),
        Some(Reach::QuoteColon)
    );
    assert_eq!(at(&p, r#"{"street":null,"city":"#).quiet(), None);
    let three = RulePlan::new(&grammar(
        vec![
            ("a", nullable(unbounded())),
            ("b", unbounded()),
            ("c", nullable(unbounded())),
        ],
        vec![Rule::BothOrNeither(vec![
            "a".into(),
            "b".into(),
            "c".into(),
        ])],
    ));
    // `b` can never be null, so neither can `a`.
    assert!(!allowed(&three, r#"{"a""#, ":null"));
    assert!(allowed(&three, r#"{"a""#, ":1"));
    assert!(!allowed(&three, r#"{"a":1,"b":2,"c""#, ":null"));
}

#[test]
fn dates_compare_as_strings() {
    let p = dates_plan();
    let pre = r#"{"effective": "2024-03-15", "expiry": "2024-03-1"#;
    assert!(!allowed(&p, pre, r#"4""#));
    assert!(allowed(&p, pre, r#"5""#));
    assert!(allowed(&p, pre, r#"9""#));
    assert!(!allowed(
        &p,
        r#"{"effective": "2024-03-15", "expiry": ""#,
        "2023"
    ));
    assert!(allowed(
        &p,
        r#"{"effective": "2024-03-15", "expiry": ""#,
        "2025"
    ));
    assert!(allowed(
        &p,
        r#"{"effective": "2024-03-15", "expiry": ""#,
        "2024-0"
    ));
    assert!(!allowed(
        &p,
        r#"{"effective": "2024-03-15", "expiry": ""#,
        "2024-02"
    ));
}

#[test]
fn enums_and_escapes() {
    let p = RulePlan::new(&grammar(
        vec![
            (
                "a",
                Shape::Enum {
                    values: vec![json!(1), json!(5), json!(10)],
                },
            ),
            (
                "b",
                Shape::Enum {
                    values: vec![json!(2), json!(5), json!(7)],
                },
            ),
            (
                "s",
                Shape::Enum {
                    values: vec![json!("b\"x"), json!("a")],
                },
            ),
            (
                "t",
                Shape::Enum {
                    values: vec![json!("b\"x"), json!("a"), json!("c")],
                },
            ),
        ],
        vec![cmp("a", "<=", "b"), cmp("s", "<", "t")],
    ));
    // `a` cannot exceed the largest `b`.
    assert!(!allowed(&p, r#"{"a": "#, "10,"));
    assert!(allowed(&p, r#"{"a": "#, "5,"));
    assert!(allowed(&p, r#"{"a": 5, "b": "#, "5,"));
    assert!(!allowed(&p, r#"{"a": 5, "b": "#, "2"));
    let pre = r#"{"a": 1, "b": 2, "s": "b\"x", "t": ""#;
    assert!(!allowed(&p, pre, "a"));
    assert!(!allowed(&p, pre, r#"b\"x""#));
    assert!(allowed(&p, pre, r#"c""#));
}

/// Found by the random walks: literals with 18 significant digits next to a rule bound. The
/// filter assumes correctly rounded parsing, which serde_json gives with `float_roundtrip`.
#[test]
fn long_literals_parse_as_the_filter_assumes() {
    let p = guidance();
    let pre = r#"{"quarter": null, "low": 9, "high": "#;
    assert!(allowed(&p, pre, "8.99999999999999914 }"));
    assert!(!allowed(&p, pre, "8.9999999999999991 }"));
    let v: serde_json::Value = serde_json::from_str("8.99999999999999914").unwrap();
    assert_eq!(v.as_f64(), Some(9.0));
    let v: serde_json::Value = serde_json::from_str("0.699999999999999901").unwrap();
    assert_eq!(v.as_f64(), Some(0.7));
}

#[test]
fn numbers_are_bounded_in_length() {
    let p = guidance();
    let pre = r#"{"quarter": 3, "low": "#;
    let digits = "1".repeat(MAX_NUMBER_LEN);
    // Up to the cap, digits go on; one more is refused, and the number can still end.
    assert!(allowed(&p, pre, &digits));
    assert!(!allowed(&p, pre, &format!("{digits}1")));
    let full = at(&p, &format!("{pre}{digits}"));
    assert!(full.allows(&p, b","));
    // A point or an exponent only with room for a digit after it: never a dead end.
    let short = "1".repeat(MAX_NUMBER_LEN - 3);
    assert!(allowed(&p, pre, &format!("{short}.")));
    assert!(allowed(&p, pre, &format!("{short}.5")));
    assert!(allowed(&p, pre, &format!("{short}1.")));
    assert!(allowed(&p, pre, &format!("{short}1.5")));
    assert!(!allowed(&p, pre, &format!("{short}11.")));
    assert!(allowed(&p, pre, &format!("{short}1e5")));
    assert!(!allowed(&p, pre, &format!("{short}11e")));
    assert!(!allowed(&p, pre, &format!("{short}1e-")));
    // At the cap only a number the field accepts: `0.000…0` is not above 0, `0.000…1` is.
    let zeros = format!("0.{}", "0".repeat(MAX_NUMBER_LEN - 3));
    assert!(!allowed(&p, pre, &format!("{zeros}0")));
    assert!(allowed(&p, pre, &format!("{zeros}1")));
    // A prefix that reaches the set only past the cap is refused: above 9, `0.0999…9` ends
    // as `…e2` while two bytes are left, and nowhere with one.
    let p2 = RulePlan::new(&grammar(
        vec![("a", unbounded()), ("b", unbounded())],
        vec![cmp("a", "<", "b")],
    ));
    let long = format!("0.0{}", "9".repeat(MAX_NUMBER_LEN - 5));
    let pre2 = r#"{"a": 9, "b": "#;
    assert!(allowed(&p2, pre2, &format!("{long}e2")));
    assert!(!allowed(&p2, pre2, &format!("{long}9")));
    assert!(!allowed(&p2, pre2, &format!("{long}e1")));
    // The same cap for `high` after a long `low`.
    assert!(allowed(
        &p,
        &format!("{pre}{digits}, \"high\": "),
        &"2".repeat(MAX_NUMBER_LEN)
    ));
}

/// Rows of objects inside a list, their own rule, and a rule on the outer object.
fn rows() -> RulePlan {
    let field = |name: &str, shape: Shape| FieldShape {
        name: name.into(),
        shape,
        grounded: None,
        form: None,
    };
    let text = Shape::String {
        min_len: None,
        max_len: Some(8),
        patterns: vec![],
        format: None,
    };
    RulePlan::new(&Grammar {
        name: "Rows".into(),
        options: GrammarOptions::default(),
        root: Shape::Object { index: 0 },
        objects: vec![
            ObjectShape {
                name: "Rows".into(),
                fields: vec![
                    field(
                        "rows",
                        Shape::List {
                            items: Box::new(Shape::Object { index: 1 }),
                            min_items: None,
                            max_items: None,
                        },
                    ),
                    field(
                        "scores",
                        Shape::List {
                            items: Box::new(nullable(Shape::Integer { min: 0, max: 100 })),
                            min_items: None,
                            max_items: None,
                        },
                    ),
                    field("low", nullable(positive())),
                    field("high", nullable(positive())),
                ],
                rules: vec![cmp("low", "<=", "high")],
                paths: vec![String::new()],
            },
            ObjectShape {
                name: "Row".into(),
                fields: vec![
                    field("a", Shape::Integer { min: 0, max: 100 }),
                    field("b", Shape::Integer { min: 0, max: 100 }),
                    field("name", nullable(text)),
                ],
                rules: vec![cmp("a", "<=", "b")],
                paths: vec!["/rows/*".into()],
            },
        ],
        mask_schema: None,
    })
}

/// The filter's verdicts, step by step as it takes them ([`Scanner::quiet`]: only tokens of the
/// reach are checked; else one [`Probe`] for all the tokens, whitespace-only ones as
/// [`Probe::blanks`] says, one-byte number tokens from [`Probe::known_number_bytes`] where it
/// knows them), equal the scanner's own run over each token's bytes, at every prefix of
/// realistic outputs, for every substring of them up to 6 bytes as a token (and a few more).
/// Each output is walked twice: the second time the number sets remember what the first found.
#[test]
fn the_filters_shortcuts_agree_with_the_scanner() {
    let dates = dates_plan();
    let streets = streets_plan();
    let cases: Vec<(RulePlan, Vec<&str>)> = vec![
        (
            guidance(),
            vec![
                r#"{"quarter": 3, "low": 1250.5, "high": 1300}"#,
                r#"{"quarter":null,"low":null,"high":null}"#,
                "{\n  \"quarter\": 4,\n  \"low\": 0.75,\n  \"high\": 12\n}",
                r#"{"quarter": 1, "low": 99999, "high": 100000.25}"#,
            ],
        ),
        (
            dates,
            vec![r#"{"effective": "2024-03-15", "expiry": "2024-03-19"}"#],
        ),
        (
            streets,
            vec![r#"{"street":null,"city":"Be:rn,\"x\"","zip":"3000"}"#],
        ),
        (
            rows(),
            vec![
                r#"{"rows": [{"a": 1, "b": 2, "name": "x,y"}, {"a": 3, "b": 30, "name": "q:\"z"}], "scores": [null, 50, 100], "low": 2, "high": 10}"#,
                r#"{"rows":[],"scores":[7 , null ],"low":null,"high":7}"#,
            ],
        ),
    ];
    let extra = [
        "null", "true", "false", "n", "nu", " ", "  ", "\n", " \n", "-", "e", "E+", ".", "},{\"",
        "\"],", ":null}", "5}", "0", "00", "1e5", ",\"", "\":", "\"},", "]}", "}]", "12345678",
        ", 500", ",-1", "ll, 500", "{\n", " {", "{}", "{\"a\":", " {\"",
    ];
    let (mut checked, mut refused, mut quiet, mut probed, mut known_bytes) = (0, 0, 0, 0, 0);
    let mut wrong = Vec::new();
    for (plan, outputs) in &cases {
        let mut tokens: Vec<&[u8]> = extra.iter().map(|t| t.as_bytes()).collect();
        for out in outputs {
            let b = out.as_bytes();
            for len in 1..=6 {
                tokens.extend(b.windows(len));
            }
        }
        tokens.sort();
        tokens.dedup();
        for out in outputs.iter().chain(outputs) {
            for end in 0..=out.len() {
                let mut s = Scanner::new();
                assert!(
                    s.advance(plan, &out.as_bytes()[..end]),
                    "prefix {:?} rejected",
                    &out[..end]
                );
                let step = match s.quiet() {
                    Some(reach) => Err(reach),
                    None => Ok(Probe::new(&s, plan)),
                };
                let (known, ok) = match &step {
                    Ok(p) => p.known_number_bytes(),
                    Err(_) => (0, 0),
                };
                for &tok in &tokens {
                    let expected = s.clone().advance(plan, tok);
                    let one_byte = match tok {
                        [b] => number_byte(*b).filter(|i| known >> i & 1 == 1),
                        _ => None,
                    };
                    let got = match &step {
                        Err(reach) => !reach.reached_by(tok) || s.allows(plan, tok),
                        Ok(_) if one_byte.is_some() => {
                            known_bytes += 1;
                            one_byte.is_some_and(|i| ok >> i & 1 == 1)
                        }
                        Ok(p) if tok.iter().all(|&b| is_ws(b)) => match p.blanks() {
                            Blanks::Neutral => true,
                            Blanks::Alike => p.allows(b" "),
                            Blanks::Each => p.allows(tok),
                        },
                        Ok(p) => p.allows(tok),
                    };
                    checked += 1;
                    refused += usize::from(!expected);
                    if got != expected && wrong.len() < 10 {
                        wrong.push(format!(
                            "after {:?}, token {:?}: {got} (scanner: {expected})",
                            &out[..end],
                            String::from_utf8_lossy(tok)
                        ));
                    }
                }
                match step {
                    Ok(p) => {
                        p.finish();
                        probed += 1;
                    }
                    Err(_) => quiet += 1,
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(known_bytes > 100, "{known_bytes} verdicts known beforehand");
    // Both kinds of step, and refusals among the verdicts.
    assert!(
        quiet > 100 && probed > 100,
        "{quiet} quiet, {probed} probed"
    );
    assert!(
        refused > 1000 && checked > refused,
        "{refused} of {checked}"
    );
}

/// `effective <= expiry` over two ISO dates.
/// A string holding an ISO date, as the grammar lowers `format: date`.
fn date() -> Shape {
    Shape::String {
        min_len: None,
        max_len: None,
        patterns: vec![format!(
            "^(?:{})$",
            contract_core::grammar::format_regex(Format::Date).unwrap()
        )],
        format: None,
    }
}

fn dates_plan() -> RulePlan {
    RulePlan::new(&grammar(
        vec![("effective", date()), ("expiry", date())],
        vec![cmp("effective", "<=", "expiry")],
    ))
}

/// Three nullable strings, at least one of `street` and `city` present.
fn streets_plan() -> RulePlan {
    let text = || {
        nullable(Shape::String {
            min_len: None,
            max_len: None,
            patterns: vec![],
            format: None,
        })
    };
    RulePlan::new(&grammar(
        vec![("street", text()), ("city", text()), ("zip", text())],
        vec![Rule::AtLeastOne(vec!["street".into(), "city".into()])],
    ))
}

/// A runtime contract's rules hold in the mask (issue 39): the grammar `Extractor::runtime`
/// sends for a flat, ungrounded JSON Schema with `x-rules` makes the filter refuse a `high`
/// below `low` and keep one that is not.
#[tokio::test(flavor = "current_thread")]
async fn a_runtime_contracts_rules_hold_in_its_mask() {
    use contract_core::extract::Extractor;
    use contract_core::select::Selection;
    use contract_core::DynContract;

    let contract = DynContract::from_schema(json!({
        "type": "object",
        "x-rules": ["low <= high"],
        "required": ["low", "high"],
        "properties": {"low": {"type": "number"}, "high": {"type": "number"}}
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    let backend = crate::ScriptedBackend::new([r#"{"low": 5, "high": 7}"#]);
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract("From 5 to 7.")
        .await;
    assert_eq!(x.value, Some(json!({"low": 5, "high": 7})));
    let requests = backend.requests();
    let grammar = requests[0]
        .constraint
        .grammar()
        .expect("the typed grammar, which holds the rules");
    let p = RulePlan::new(grammar);
    let pre = r#"{"low": 5, "high": "#;
    assert!(!allowed(&p, pre, "3}"), "high below low");
    assert!(!allowed(&p, pre, "4}"));
    assert!(allowed(&p, pre, "5}"));
    assert!(allowed(&p, pre, "7}"));
    // Whole replies: the one that breaks the rule is refused, the one that keeps it ends.
    assert!(!Scanner::new().advance(&p, br#"{"low": 5, "high": 3}"#));
    assert!(at(&p, r#"{"low": 5, "high": 7}"#).can_end(&p));
    assert!(at(&p, r#"{"low": -2, "high": -2}"#).can_end(&p));
}

/// A runtime contract whose schema the typed grammar would lose (an optional property of two
/// types) keeps its own JSON Schema mask, and the filter holds its rules over it: the grammar
/// `Extractor::runtime` sends compiles the schema itself, and its plan refuses a `high` below
/// `low` and a lone null, while the other property takes any value.
#[tokio::test(flavor = "current_thread")]
async fn a_runtime_contracts_rules_hold_over_its_own_schema_mask() {
    use contract_core::extract::Extractor;
    use contract_core::select::Selection;
    use contract_core::DynContract;

    let contract = DynContract::from_schema(json!({
        "type": "object",
        "x-rules": ["low <= high", "both_or_neither(low, high)"],
        "required": ["low", "high"],
        "properties": {
            "low": {"type": ["number", "null"], "minimum": 0},
            "high": {"type": ["number", "null"]},
            "note": {"type": ["string", "integer"]}
        }
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    assert!(!contract.decodes_typed() && contract.rules_in_mask());
    let backend = crate::ScriptedBackend::new([r#"{"low": 5, "high": 7, "note": 3}"#]);
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract("From 5 to 7.")
        .await;
    assert_eq!(x.value, Some(json!({"low": 5, "high": 7, "note": 3})));
    let requests = backend.requests();
    let grammar = requests[0]
        .constraint
        .grammar()
        .expect("a grammar, for the rules");
    assert_eq!(
        grammar.schema(),
        contract.grammar(),
        "the mask is compiled from the schema's own JSON Schema"
    );
    let p = RulePlan::new(grammar);
    let pre = r#"{"low": 5, "high": "#;
    assert!(!allowed(&p, pre, "3}"), "high below low");
    assert!(!allowed(&p, pre, "null"), "one of the two null");
    assert!(allowed(&p, pre, "7}"));
    assert!(!allowed(&p, r#"{"low": "#, "-1"), "low's own minimum");
    assert!(!Scanner::new().advance(&p, br#"{"low": 5, "high": 3}"#));
    // The property the rules do not name is any value to the filter, of either type.
    for reply in [
        r#"{"low": 5, "high": 7, "note": "below 3"}"#,
        r#"{"low": null, "high": null, "note": -40}"#,
        r#"{"low": 0, "high": 0}"#,
    ] {
        assert!(at(&p, reply).can_end(&p), "{reply}");
    }
}

/// Zero is written `0`, never `-0`: where only `-0` would keep a rule (`low` is -0.6 and
/// `high` an integer), `-` is refused, and `0` taken. llguidance's number ranges do not take
/// `-0`, so a filter that let `-` through left a runtime contract's JSON Schema mask no digit
/// after it (found by the runtime walks in `mask_soundness`).
#[test]
fn a_minus_sign_starts_a_value_below_zero() {
    let p = RulePlan::new(&grammar(
        vec![
            ("low", nullable(unbounded())),
            (
                "high",
                nullable(Shape::Integer {
                    min: i128::from(i64::MIN),
                    max: 20,
                }),
            ),
        ],
        vec![cmp("low", "<=", "high")],
    ));
    let pre = r#"{"low": -0.6, "high": "#;
    assert!(!allowed(&p, pre, "-"), "only -0 is left below zero");
    assert!(allowed(&p, pre, "0}"));
    assert!(allowed(&p, pre, "16}"));
    let pre = r#"{"low": -3, "high": "#;
    assert!(allowed(&p, pre, "-2}"));
    assert!(!allowed(&p, pre, "-0"));
    assert!(!allowed(&p, pre, "-4"));
    // A fraction below zero is still written with its sign.
    assert!(allowed(&p, r#"{"low": "#, "-0.5, "));
}

/// One rule's partner forced by another: with `mid` null, `at_least_one(mid, high)` needs
/// `high`, so `low` may not be null (`both_or_neither(low, high)` would make `high` null too);
/// with `low` null, `high` may not be given, so neither may `other` under
/// `both_or_neither(other, high)`; chains of any length; and a comparison's partner that another
/// rule makes necessary. Before, the filter let `low` be null there and left `high` no value
/// (found by the runtime walks in `mask_soundness`).
#[test]
fn a_partner_forced_by_another_rule_is_seen() {
    let p = RulePlan::new(&grammar(
        vec![
            ("mid", nullable(Shape::Integer { min: 0, max: 9 })),
            ("low", nullable(unbounded())),
            ("high", nullable(Shape::Integer { min: 0, max: 20 })),
            ("other", nullable(Shape::Integer { min: 0, max: 20 })),
        ],
        vec![
            Rule::BothOrNeither(vec!["low".into(), "high".into()]),
            Rule::AtLeastOne(vec!["mid".into(), "high".into()]),
            Rule::BothOrNeither(vec!["other".into(), "high".into()]),
        ],
    ));
    assert!(!allowed(&p, r#"{"mid": null, "low": "#, "null"));
    assert!(allowed(&p, r#"{"mid": null, "low": "#, "1, "));
    assert!(allowed(&p, r#"{"mid": 3, "low": "#, "null"));
    // `low` null leaves `high` to be null: `other` may not be given (before `high`).
    let p = RulePlan::new(&grammar(
        vec![
            ("low", nullable(unbounded())),
            ("other", nullable(Shape::Integer { min: 0, max: 20 })),
            ("high", nullable(Shape::Integer { min: 0, max: 20 })),
        ],
        vec![
            Rule::BothOrNeither(vec!["low".into(), "high".into()]),
            Rule::BothOrNeither(vec!["other".into(), "high".into()]),
        ],
    ));
    assert!(!allowed(&p, r#"{"low": null, "other": "#, "4"));
    assert!(allowed(&p, r#"{"low": null, "other": "#, "null"));
    assert!(allowed(&p, r#"{"low": 2, "other": "#, "4"));
    // Longer chains: `x` null needs `c` (at_least_one), which `both_or_neither` ties to `b`
    // and `b` to `a`: `a` may not be null.
    let p = RulePlan::new(&grammar(
        vec![
            ("x", nullable(Shape::Integer { min: 0, max: 9 })),
            ("a", nullable(unbounded())),
            ("b", nullable(unbounded())),
            ("c", nullable(unbounded())),
        ],
        vec![
            Rule::BothOrNeither(vec!["a".into(), "b".into()]),
            Rule::BothOrNeither(vec!["b".into(), "c".into()]),
            Rule::AtLeastOne(vec!["x".into(), "c".into()]),
        ],
    ));
    assert!(!allowed(&p, r#"{"x": null, "a": "#, "null"));
    assert!(allowed(&p, r#"{"x": 1, "a": "#, "null"));
    assert!(at(&p, r#"{"x": 1, "a": null, "b": null, "c": null}"#).can_end(&p));
    // A comparison's partner made necessary by another rule: with `mid` null, `high` must be
    // given, so `low` may not be above every `high` (at most 20).
    let p = RulePlan::new(&grammar(
        vec![
            ("mid", nullable(Shape::Integer { min: 0, max: 9 })),
            ("low", nullable(unbounded())),
            ("high", nullable(Shape::Integer { min: 0, max: 20 })),
        ],
        vec![
            cmp("low", "<=", "high"),
            Rule::AtLeastOne(vec!["mid".into(), "high".into()]),
        ],
    ));
    assert!(!allowed(&p, r#"{"mid": null, "low": "#, "50,"));
    assert!(allowed(&p, r#"{"mid": null, "low": "#, "20,"));
    assert!(allowed(&p, r#"{"mid": 3, "low": "#, "50,"));
}

fn at_most(max: i64) -> Shape {
    Shape::Number {
        bounds: NumberBounds {
            maximum: Some(max.into()),
            ..NumberBounds::default()
        },
    }
}

#[test]
fn a_chain_of_comparisons_is_followed() {
    // `low <= mid <= high`, `high` at most 10: before `mid` is written, `low` may not pass 10.
    let chain = |order: [&str; 3]| {
        let shape = |name: &str| match name {
            "high" => Shape::Integer { min: 0, max: 10 },
            _ => unbounded(),
        };
        RulePlan::new(&grammar(
            order.iter().map(|&n| (n, shape(n))).collect(),
            vec![cmp("low", "<=", "mid"), cmp("mid", "<=", "high")],
        ))
    };
    let p = chain(["low", "mid", "high"]);
    assert!(!allowed(&p, r#"{"low": "#, "30,"));
    assert!(!allowed(&p, r#"{"low": "#, "10.5,"));
    assert!(allowed(&p, r#"{"low": "#, "10,"));
    assert!(allowed(&p, r#"{"low": "#, "-4,"));
    // The one partner it has seen before (`mid`) allows any number.
    assert!(allowed(&p, r#"{"low": 3, "mid": "#, "10,"));
    assert!(!allowed(&p, r#"{"low": 3, "mid": "#, "11,"));
    // A finished value bounds a field through a partner still to come: with `low` 5, `high`
    // below 5 leaves `mid` nothing.
    let p = chain(["low", "high", "mid"]);
    assert!(!allowed(&p, r#"{"low": 5, "high": "#, "3,"));
    assert!(allowed(&p, r#"{"low": 5, "high": "#, "5,"));
    let p = chain(["mid", "low", "high"]);
    assert!(!allowed(&p, r#"{"mid": "#, "11,"));

    // Strict comparisons between integers leave room for each: `a < b < c`, `c` at most 3.
    let p = RulePlan::new(&grammar(
        vec![
            ("a", Shape::Integer { min: 0, max: 100 }),
            ("b", Shape::Integer { min: 0, max: 100 }),
            ("c", Shape::Integer { min: 0, max: 3 }),
        ],
        vec![cmp("a", "<", "b"), cmp("b", "<", "c")],
    ));
    assert!(!allowed(&p, r#"{"a": "#, "2,"));
    assert!(allowed(&p, r#"{"a": "#, "1,"));
    assert!(!allowed(&p, r#"{"a": 1, "b": "#, "3,"));
    assert!(allowed(&p, r#"{"a": 1, "b": "#, "2,"));
    // ... and between doubles: no double lies between 0.30000000000000004 and the next one.
    let p = RulePlan::new(&grammar(
        vec![("a", unbounded()), ("b", unbounded()), ("c", at_most(1))],
        vec![cmp("a", "<", "b"), cmp("b", "<", "c")],
    ));
    assert!(allowed(&p, r#"{"a": "#, "0.9999,"));
    assert!(!allowed(&p, r#"{"a": "#, "1,"));
    assert!(!allowed(&p, r#"{"a": "#, "0.9999999999999999,"));

    // A null partner breaks the chain: `mid` may still be null, so `low` is free...
    let p = RulePlan::new(&grammar(
        vec![
            ("low", unbounded()),
            ("mid", nullable(unbounded())),
            ("high", Shape::Integer { min: 0, max: 10 }),
        ],
        vec![cmp("low", "<=", "mid"), cmp("mid", "<=", "high")],
    ));
    assert!(allowed(&p, r#"{"low": "#, "30,"));
    assert!(!allowed(&p, r#"{"low": 30, "mid": "#, "30,"));
    assert!(allowed(&p, r#"{"low": 30, "mid": "#, "null,"));
    // ... unless another rule needs it: one of `mid` and `x` is given, each at most 10 or 5.
    let p = RulePlan::new(&grammar(
        vec![
            ("low", unbounded()),
            ("mid", nullable(at_most(10))),
            ("x", nullable(at_most(5))),
        ],
        vec![
            cmp("low", "<=", "mid"),
            cmp("low", "<=", "x"),
            Rule::AtLeastOne(vec!["mid".into(), "x".into()]),
        ],
    ));
    assert!(!allowed(&p, r#"{"low": "#, "30,"));
    assert!(allowed(&p, r#"{"low": "#, "8,"));
    assert!(!allowed(&p, r#"{"low": 8, "mid": "#, "null"));
    assert!(allowed(&p, r#"{"low": 4, "mid": "#, "null"));
    assert!(allowed(&p, r#"{"low": 8, "mid": "#, "9,"));
    // A null that forces a compared number to be given: with `low` 30, `mid` null would
    // leave `high` (at most 10) to be given, and above 30.
    let p = RulePlan::new(&grammar(
        vec![
            ("low", unbounded()),
            ("mid", nullable(unbounded())),
            ("high", nullable(Shape::Integer { min: 0, max: 10 })),
        ],
        vec![
            cmp("low", "<=", "high"),
            Rule::AtLeastOne(vec!["mid".into(), "high".into()]),
        ],
    ));
    assert!(!allowed(&p, r#"{"low": 30, "mid": "#, "null"));
    assert!(allowed(&p, r#"{"low": 30, "mid": "#, "1,"));
    assert!(allowed(&p, r#"{"low": 3, "mid": "#, "null"));
}

/// A runtime contract's rules on an inline object below the root are held over its own JSON
/// Schema mask: the object is one of the filter's, its rules checked where it is written,
/// whatever the order of its keys; a sibling object without rules is any value.
#[test]
fn a_runtime_contracts_nested_rules_hold_over_its_own_schema_mask() {
    use contract_core::DynContract;

    let contract = DynContract::from_schema(json!({
        "type": "object",
        "required": ["range"],
        "properties": {
            "name": {"type": "string"},
            "range": {
                "type": ["object", "null"],
                "x-rules": ["low <= high"],
                "properties": {
                    "low": {"type": "integer", "maximum": 10},
                    "high": {"type": "integer"},
                    "inner": {"type": "object", "x-rules": ["a < b"],
                              "properties": {"a": {"type": "number"}, "b": {"type": "number", "maximum": 1}}}
                }
            },
            "free": {"type": "object", "properties": {"low": {"type": "integer"}}}
        }
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    assert!(!contract.decodes_typed() && contract.rules_in_mask());
    let grammar = contract
        .mask_grammar()
        .expect("a grammar holding the rules");
    let p = RulePlan::new(&grammar);
    let pre = r#"{"name": "x", "range": {"low": 5, "high": "#;
    assert!(!allowed(&p, pre, "4,"));
    assert!(allowed(&p, pre, "5,"));
    // Keys in another order: `high` first bounds `low`, through the key the model writes.
    let pre = r#"{"range": {"high": 5, "low": "#;
    assert!(!allowed(&p, pre, "6,"));
    assert!(allowed(&p, pre, "5}"));
    // An inline object inside the inline object, its own rule: `a` below `b`, at most 1.
    let pre = r#"{"range": {"inner": {"a": "#;
    assert!(!allowed(&p, pre, "1,"));
    assert!(allowed(&p, pre, "0.5,"));
    // The object without rules, and the root's other fields, are any value.
    assert!(allowed(&p, r#"{"free": {"low": "#, "-7}"));
    assert!(at(&p, r#"{"range": null, "name": "y"}"#).can_end(&p));
    assert!(at(
        &p,
        r#"{"range": {"low": 1, "high": 2, "extra": [1, {"a": 2}]}}"#
    )
    .can_end(&p));
}

/// Dates in a chain: with `start` written, `end` may not come before it while `signed`, which
/// must lie between them, is still to come; a `signed` that may be null breaks the chain.
#[test]
fn a_chain_of_dates_is_followed() {
    let rules = || vec![cmp("start", "<=", "signed"), cmp("signed", "<=", "end")];
    let plan = |signed: Shape| {
        RulePlan::new(&grammar(
            vec![("start", date()), ("end", date()), ("signed", signed)],
            rules(),
        ))
    };
    let p = plan(date());
    let pre = r#"{"start": "2024-05-01", "end": ""#;
    assert!(!allowed(&p, pre, "2024-04"));
    assert!(!allowed(&p, pre, r#"2024-04-30""#));
    assert!(allowed(&p, pre, r#"2024-05-01""#));
    assert!(allowed(&p, pre, "2025"));
    // The other way: `end` written first bounds `start` from above.
    let p = RulePlan::new(&grammar(
        vec![("end", date()), ("start", date()), ("signed", date())],
        rules(),
    ));
    let pre = r#"{"end": "2024-05-01", "start": ""#;
    assert!(!allowed(&p, pre, r#"2024-05-02""#));
    assert!(allowed(&p, pre, r#"2024-05-01""#));
    // `signed` may be null: the rules hold with it left out, so `end` is free.
    let p = plan(nullable(date()));
    assert!(allowed(
        &p,
        r#"{"start": "2024-05-01", "end": ""#,
        "2024-04"
    ));
}

/// A strict comparison between dates: a prefix that ties with the partner can still pass it
/// (`2024-03-1` to `2024-03-16`), where the date pattern allows; it was refused, and every
/// `expiry` before the year 3000 with it.
#[test]
fn a_strict_date_may_start_like_its_partner() {
    let p = RulePlan::new(&grammar(
        vec![("effective", date()), ("expiry", date())],
        vec![cmp("effective", "<", "expiry")],
    ));
    let pre = r#"{"effective": "2024-03-15", "expiry": ""#;
    assert!(allowed(&p, pre, "2024-03-1"));
    assert!(allowed(&p, pre, r#"2024-03-16""#));
    assert!(allowed(&p, pre, r#"2025-01-01""#));
    assert!(!allowed(&p, pre, r#"2024-03-15""#));
    assert!(!allowed(&p, pre, "2024-03-14"));
    // Nothing after the last day: a tie with it cannot pass it.
    let top = r#"{"effective": "9999-12-31", "expiry": ""#;
    assert!(!allowed(&p, top, "9999-12-3"));
    // Below: `effective` written second, under `expiry` 2024-03-15.
    let p = RulePlan::new(&grammar(
        vec![("expiry", date()), ("effective", date())],
        vec![cmp("effective", "<", "expiry")],
    ));
    let pre = r#"{"expiry": "2024-03-15", "effective": ""#;
    assert!(allowed(&p, pre, "2024-03-1"));
    assert!(allowed(&p, pre, r#"2024-03-14""#));
    assert!(!allowed(&p, pre, r#"2024-03-15""#));
    let bottom = r#"{"expiry": "0000-01-01", "effective": ""#;
    assert!(!allowed(&p, bottom, "0000-01-0"));
}
