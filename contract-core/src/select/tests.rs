//! The unit tests of evidence selection: field groups and their questions, a line's values,
//! the judge's margins and lexical tie-break, and merging.

use serde_json::{Map, Value};

use super::*;
use crate::extract::ScoreResponse;
use crate::Contract;

/// A receipt.
#[derive(crate::Contract, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[contract(rule = "low <= high")]
struct Receipt {
    /// The name of the shop that issued the receipt, as printed.
    #[contract(grounded)]
    company: Option<String>,
    /// The total amount paid.
    #[contract(grounded)]
    total: Option<f64>,
    #[contract(grounded)]
    low: Option<f64>,
    #[contract(grounded)]
    high: Option<f64>,
    /// Every item bought.
    #[contract(grounded, group = "items")]
    items: Vec<String>,
    #[contract(
        grounded,
        group = "items",
        question = "Does this text list what was bought?"
    )]
    counts: Vec<u32>,
}

#[test]
fn a_line_offers_its_value_after_a_label_and_before_a_code() {
    let values = |line: &str| -> Vec<String> {
        line_values(line)
            .into_iter()
            .map(|r| line[r].to_owned())
            .collect()
    };
    // A name and its code are two values, never one.
    assert_eq!(
        values("  SYL ROASTED DELIGHTS SDN. BHD. (1072218-K) "),
        ["SYL ROASTED DELIGHTS SDN. BHD.", "1072218-K"]
    );
    assert_eq!(
        values("Company: ACME TRADING (M) SDN BHD <484297-M>"),
        [
            "Company: ACME TRADING (M) SDN BHD",
            "484297-M",
            "ACME TRADING (M) SDN BHD"
        ]
    );
    assert_eq!(
        values("BR NO.: (124525-H)"),
        ["BR NO.: (124525-H)", "(124525-H)"]
    );
    // A name's own brackets, a time, a long label, a bare code: the line alone.
    assert_eq!(
        values("POPULAR BOOK CO. (M) SDN BHD"),
        ["POPULAR BOOK CO. (M) SDN BHD"]
    );
    assert_eq!(values("UNIQLO (MALAYSIA) 2"), ["UNIQLO (MALAYSIA) 2"]);
    assert_eq!(values("Time 20:49:59"), ["Time 20:49:59"]);
    assert_eq!(
        values("the parties agree as follows: nothing"),
        ["the parties agree as follows: nothing"]
    );
    assert_eq!(values("(1072218-K)"), ["(1072218-K)"]);
    assert_eq!(
        values("GST ID: 000115154944"),
        ["GST ID: 000115154944", "000115154944"]
    );
    assert!(values("   ").is_empty());
    assert!(values(" -- ").is_empty());
}

#[test]
fn fields_are_grouped_by_rules_and_group_names() {
    let groups = field_groups(Receipt::contract_spec(), &BTreeMap::new());
    let names: Vec<Vec<&str>> = groups
        .iter()
        .map(|g| g.fields.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(
        names,
        [
            vec!["company"],
            vec!["total"],
            vec!["low", "high"],
            vec!["items", "counts"]
        ]
    );
    assert_eq!(
        groups[0].question,
        "Does this text give the name of the shop that issued the receipt?"
    );
    assert_eq!(
        groups[1].question,
        "Does this text give the total amount paid?"
    );
    assert_eq!(
        groups[2].question,
        "Does this text give the low and the high?"
    );
    assert_eq!(groups[3].question, "Does this text list what was bought?");
    assert_eq!(groups[3].name, "items");
    assert!(groups[3].list && groups[3].optional);
    assert!(groups[1].needs.digit && !groups[1].needs.letter);
    assert!(!groups[0].needs.digit && groups[0].needs.letter);
    let mut overrides = BTreeMap::new();
    overrides.insert("high".to_owned(), "does this give a range?".to_owned());
    let groups = field_groups(Receipt::contract_spec(), &overrides);
    assert_eq!(groups[2].question, "Does this give a range?");
}

#[test]
fn first_clauses_make_questions() {
    assert_eq!(
        first_clause("The date of the purchase.").as_deref(),
        Some("the date of the purchase")
    );
    assert_eq!(
        first_clause("The period (`Q3 2024`); null when none.").as_deref(),
        Some("the period")
    );
    assert_eq!(
        first_clause("ISO 4217 currency code").as_deref(),
        Some("ISO 4217 currency code")
    );
    assert_eq!(first_clause(" . "), None);
}

#[test]
fn margins_and_merging() {
    let m = margin(&[-0.5, -5.0, -1.0, -6.0]);
    let want = (f64::exp(-0.5) + f64::exp(-5.0)).ln() - (f64::exp(-1.0) + f64::exp(-6.0)).ln();
    assert!((m - want).abs() < 1e-12);
    assert_eq!(
        margin(&[]),
        0.0,
        "no answers scored: no evidence either way"
    );
    let a: Map<String, Value> =
        serde_json::from_value(serde_json::json!({"items": ["Tea", "Milk"], "counts": [1]}))
            .unwrap();
    let b: Map<String, Value> =
        serde_json::from_value(serde_json::json!({"items": ["tea ", "Bread"], "counts": [1, 2]}))
            .unwrap();
    let m = merge_lists(&[a, b], &["items".into(), "counts".into()]);
    assert_eq!(m["items"], serde_json::json!(["Tea", "Milk", "Bread"]));
    assert_eq!(m["counts"], serde_json::json!([1, 2]));
}

/// An agreement, judged by question only.
#[derive(crate::Contract, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Agreement {
    /// The US state whose law governs the agreement.
    #[contract(grounded)]
    jurisdiction: Option<String>,
}

/// Scored answers (`yes`, `Yes`, `no`, `No`) giving each prompt the margin in `margins`.
fn answered(margins: &[f64]) -> ScoreResponse {
    ScoreResponse {
        logprobs: margins
            .iter()
            .map(|m| vec![*m, f64::NEG_INFINITY, 0.0, f64::NEG_INFINITY])
            .collect(),
        exact: true,
        forward_calls: None,
    }
}

#[test]
fn shared_words_break_what_the_model_barely_separates() {
    let groups = field_groups(Agreement::contract_spec(), &BTreeMap::new());
    let source = Source::from_text(
        "CONFIDENTIALITY AGREEMENT.\n\
         The Recipient shall keep the Information secret.\n\
         This Agreement is governed by the law of the State of Delaware.",
    );
    let passages = Cutter::default().lines(&source);
    assert_eq!(passages.len(), 3);
    let plan = judge_plan(&groups, &passages, 96);
    assert_eq!(plan.request.prompts.len(), 3);
    let shares = &plan.lexical[0];
    assert_eq!(shares.get(&2), Some(&1.0), "{shares:?}");
    assert!(shares[&1] < shares[&2], "{shares:?}");
    // The model barely separates the passages (a tenth of a nat, the wrong way): the
    // governing-law line, which shares the question's words, ranks first.
    let flat = answered(&[-0.1, -0.2, -0.2]);
    let r = rank(&plan, &flat, 1.0).unwrap();
    assert_eq!(r[0].order[0], 2, "{:?}", r[0]);
    assert_eq!(
        r[0].margins[&2], -0.2,
        "the record keeps the model's margin"
    );
    // Without the words, the model's order.
    let r = rank(&plan, &flat, 0.0).unwrap();
    assert_eq!(r[0].order, [0, 1, 2]);
    // A model that separates the passages by nats decides.
    let sure = answered(&[3.0, -2.0, -2.0]);
    let r = rank(&plan, &sure, 1.0).unwrap();
    assert_eq!(r[0].order[0], 0);
}

#[test]
fn violations_go_to_their_group() {
    let groups = field_groups(Receipt::contract_spec(), &BTreeMap::new());
    assert_eq!(group_of_path(&groups, "/high"), Some(2));
    assert_eq!(group_of_path(&groups, "/items/3"), Some(3));
    assert_eq!(group_of_path(&groups, ""), None);
    let merged = merge(
        Receipt::contract_spec(),
        &[
            None,
            Some(serde_json::from_value(serde_json::json!({"total": 9.5})).unwrap()),
        ],
        &groups,
    );
    assert_eq!(
        merged,
        serde_json::json!({"company": null, "total": 9.5, "low": null, "high": null, "items": [], "counts": []})
    );
}
