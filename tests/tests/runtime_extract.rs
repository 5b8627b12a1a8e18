//! A runtime contract (a JSON Schema read at run time) runs through the library's extractor as
//! a derived contract does: evidence selection by values, the grounded mask, the contract's
//! rules, checks that see the document, retries with the violations fed back.

use contract_backends::ScriptedBackend;
use contract_core::extract::{Decoding, Extractor};
use contract_core::select::{Judge, Outcome, Selection};
use contract_core::{DynContract, Violation, ViolationKind, Violations};
use serde_json::{json, Value};

const RECEIPT: &str = "TAN WOON YANN
INDAH GIFT & HOME DECO
27,JALAN DEDAP 13,
TEL:07-3507405
19/10/2018 20:49:59 #01
TOTAL AMT................. RM
60.30
CASH.................... RM
70.30
THANK YOU ! PLEASE COME AGAIN !";

fn receipt() -> DynContract {
    DynContract::from_schema(json!({
        "title": "Receipt",
        "type": "object",
        "properties": {
            "company": {"type": ["string", "null"], "x-grounded": "source",
                        "description": "The name of the shop that issued the receipt."},
            "total": {"type": ["number", "null"], "x-grounded": "source", "minimum": 0,
                      "description": "The total amount paid."},
            "cash": {"type": ["number", "null"], "x-grounded": "source",
                     "description": "The cash handed over."}
        },
        "required": ["company", "total", "cash"],
        "additionalProperties": false,
        "x-rules": ["total <= cash"]
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"))
}

/// A check that sees the value: the first line is the cashier, not the shop.
fn not_the_cashier(value: &Value, _cx: &contract_core::DocContext<'_>) -> Violations {
    if value["company"] == "TAN WOON YANN" {
        Violations::one(Violation::new(
            "/company",
            ViolationKind::Custom,
            "that is the cashier's name",
        ))
    } else {
        Violations::new()
    }
}

/// Likes the cashier's name best (refused by the check), then the shop; the total's and the
/// cash's numbers; null least.
/// The same preferences whichever way the values judge asks: a number in words by default
/// ("The total amount paid is 60.30."), a string as the JSON reply starts (`{"company": ..`).
fn scorer(_prompt: &str, answer: &str) -> f64 {
    // A sentence ends in a line break after its full stop.
    match answer.trim_end() {
        r#"{"company": "TAN WOON YANN""# => -1.0,
        r#"{"company": "INDAH GIFT & HOME DECO""# => -2.0,
        a if a.starts_with(r#"{"total": 60.3"#) => -0.5,
        a if a.starts_with(r#"{"cash": 70.3"#) => -0.5,
        a if a.starts_with("The total") && a.ends_with(" is 60.30.") => -0.5,
        a if a.starts_with("The cash") && a.ends_with(" is 70.30.") => -0.5,
        a if a.ends_with("null") || a.ends_with(" is not stated.") => -4.0,
        _ => -9.0,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_runtime_contract_selects_its_evidence_and_runs_the_added_checks() {
    let contract = DynContract::from_schema(json!({
        "title": "Receipt",
        "type": "object",
        "properties": {
            "company": {"type": ["string", "null"], "x-grounded": "source",
                        "description": "The name of the shop that issued the receipt."},
            "total": {"type": ["number", "null"], "x-grounded": "source",
                      "description": "The total amount paid."}
        },
        "required": ["company", "total"],
        "additionalProperties": false
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    // Each field is filled by its best value without generating: the company after the added
    // check refused the cashier's name.
    let backend = ScriptedBackend::new(Vec::<String>::new()).with_scorer(scorer);
    let x = Extractor::runtime(&backend, &contract)
        .check(not_the_cashier)
        .extract(RECEIPT)
        .await;
    assert_eq!(
        x.value,
        Some(json!({"company": "INDAH GIFT & HOME DECO", "total": 60.3})),
        "{:#?}",
        x.attempts
    );
    assert_eq!(x.contract, "Receipt");
    // Both one-value groups are filled by their values alone: nothing generated.
    assert!(backend.requests().is_empty());
    assert_eq!(
        backend.score_requests().len(),
        2,
        "one scoring request per field"
    );
    let record = x.selection.as_ref().expect("selection ran");
    assert!(record.groups.iter().all(|g| g.judge == Judge::Values));
    assert!(record.groups.iter().all(|g| g.outcome == Outcome::Filled));
    let company = record
        .groups
        .iter()
        .find(|g| g.group == "company")
        .expect("a company group");
    assert_eq!(company.tries.len(), 2, "the refused value, then the next");
}

#[tokio::test(flavor = "current_thread")]
async fn without_selection_a_runtime_contract_decodes_under_its_grounded_grammar_and_retries() {
    // The first reply breaks the contract's rule (total above cash) and grounding (a company
    // the receipt does not write); both are fed back; the second fills the contract.
    let backend = ScriptedBackend::new([
        r#"{"company": "Globex", "total": 70.3, "cash": 60.3}"#,
        r#"{"company": "INDAH GIFT & HOME DECO", "total": 60.3, "cash": 70.3}"#,
    ]);
    let x = Extractor::runtime(&backend, &receipt())
        .selection(Selection::off())
        .extract(RECEIPT)
        .await;
    assert_eq!(
        x.value,
        Some(json!({"company": "INDAH GIFT & HOME DECO", "total": 60.3, "cash": 70.3}))
    );
    assert_eq!(x.attempts.len(), 2);
    let first: Vec<(&str, ViolationKind)> = x.attempts[0]
        .violations
        .iter()
        .map(|v| (v.path.as_str(), v.kind))
        .collect();
    assert!(
        first.contains(&("/company", ViolationKind::NotInSource)),
        "{first:?}"
    );
    assert!(
        first.iter().any(|(_, k)| *k == ViolationKind::CrossField),
        "{first:?}"
    );
    let requests = backend.requests();
    let grammar = requests[0]
        .constraint
        .grammar()
        .expect("grounded fields decode under the grounded grammar");
    // The mask carries the contract's rule, as a derived contract's does.
    let rules = &grammar.objects[0].rules;
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0].to_string(), "total <= cash");
    assert!(requests[1]
        .messages
        .iter()
        .any(|m| m.content.contains("did not fill the contract")));
    // Grounding off: the schema's grammar without groundings, replies not held to the text.
    let backend = ScriptedBackend::new([r#"{"company": "Globex", "total": 1, "cash": 2}"#]);
    let x = Extractor::runtime(&backend, &receipt())
        .grounding(false)
        .extract(RECEIPT)
        .await;
    assert_eq!(
        x.value,
        Some(json!({"company": "Globex", "total": 1, "cash": 2}))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_schema_with_definitions_reads_the_whole_document_under_its_json_schema() {
    let contract = DynContract::from_schema(json!({
        "title": "Parties",
        "type": "object",
        "properties": {"who": {"type": "array", "items": {"$ref": "#/$defs/party"}}},
        "required": ["who"],
        "$defs": {"party": {"type": "string", "x-grounded": "source"}}
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    let backend =
        ScriptedBackend::new([r#"{"who": ["INDAH GIFT & HOME DECO"]}"#]).with_scorer(scorer);
    let x = Extractor::runtime(&backend, &contract)
        .extract(RECEIPT)
        .await;
    assert_eq!(x.value, Some(json!({"who": ["INDAH GIFT & HOME DECO"]})));
    assert!(x.selection.is_none(), "selection is off for definitions");
    assert!(backend.score_requests().is_empty());
    assert!(matches!(
        backend.requests()[0].constraint.decoding,
        Some(Decoding::JsonSchema(_))
    ));
}

/// A list of `NameValue` named by `$ref`: each short name the model copies is read as the name
/// the document defines it for.
#[tokio::test(flavor = "current_thread")]
async fn a_list_of_names_named_by_ref_reads_defined_short_names() {
    let contract = DynContract::from_schema(json!({
        "title": "Agreement",
        "type": "object",
        "properties": {
            "parties": {"type": "array", "items": {"$ref": "#/$defs/NameValue"},
                        "x-grounded": "source", "description": "The parties that sign it."}
        },
        "required": ["parties"],
        "additionalProperties": false,
        "$defs": {"NameValue": {}}
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    let doc = "This Agreement is made between Acme Widgets, Inc., a Delaware corporation \
               (the “Company”), and Jane Roe (“Employee”).\nThe Employee works for the Company.";
    let backend = ScriptedBackend::new([
        r#"{"parties": [{"original": "Company"}, {"original": "Employee"}]}"#,
    ]);
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract(doc)
        .await;
    let value = x
        .value
        .as_ref()
        .unwrap_or_else(|| panic!("{:#?}", x.attempts));
    assert_eq!(value["parties"][0]["name"], "Acme Widgets, Inc.", "{value}");
    assert_eq!(value["parties"][1]["name"], "Jane Roe", "{value}");
    assert_eq!(value["parties"][0]["original"], "Company");
}

#[tokio::test(flavor = "current_thread")]
async fn value_types_named_by_ref_are_decoded_and_normalised_as_a_derived_contracts() {
    let contract = DynContract::from_schema(json!({
        "title": "Receipt",
        "type": "object",
        "properties": {
            "date": {"anyOf": [{"$ref": "#/$defs/DateValue"}, {"type": "null"}],
                     "x-grounded": "source", "description": "The date of the purchase."},
            "total": {"anyOf": [{"$ref": "#/$defs/Amount"}, {"type": "null"}],
                      "x-grounded": "source", "description": "The total amount paid."}
        },
        "required": ["date", "total"],
        "additionalProperties": false,
        "$defs": {"DateValue": {}, "Amount": {}}
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    // The model copies; the library computes the ISO date and the currency's code.
    let backend = ScriptedBackend::new([
        r#"{"date": {"original": "19/10/2018"}, "total": {"value": 60.3, "currency": "RM", "unit": null}}"#,
    ]);
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract(RECEIPT)
        .await;
    let value = x
        .value
        .as_ref()
        .unwrap_or_else(|| panic!("{:#?}", x.attempts));
    assert_eq!(value["date"]["iso"], "2018-10-19", "{value}");
    assert_eq!(value["total"]["code"], "MYR", "{value}");
    assert_eq!(value["total"]["value"], 60.3);
    // Decoded under the value types' shapes and grounded like a derived contract's fields.
    let requests = backend.requests();
    let grammar = requests[0]
        .constraint
        .grammar()
        .expect("the grounded grammar");
    assert!(
        grammar.objects.iter().any(|o| o.name == "DateValue"),
        "{:?}",
        grammar.objects.iter().map(|o| &o.name).collect::<Vec<_>>()
    );
    assert!(requests[0].messages.0[0].content.contains("original"));
    // A date the calendar does not have is a violation at its pointer, fed back.
    let backend = ScriptedBackend::new([
        r#"{"date": {"original": "31/02/2018"}, "total": null}"#,
        r#"{"date": {"original": "19/10/2018"}, "total": null}"#,
    ]);
    let doc = format!("{RECEIPT}\n31/02/2018");
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract(&doc)
        .await;
    let first = &x.attempts[0].violations;
    assert!(
        first.iter().any(|v| v.path.starts_with("/date")),
        "{first:?}"
    );
    assert_eq!(
        x.value.as_ref().map(|v| v["date"]["iso"].clone()),
        Some(json!("2018-10-19"))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_coming_period_must_follow_the_one_the_document_reports_on() {
    let contract = DynContract::from_schema(json!({
        "title": "Outlook",
        "type": "object",
        "properties": {
            "period": {"anyOf": [{"$ref": "#/$defs/Period"}, {"type": "null"}],
                       "x-grounded": "source", "x-period": "coming",
                       "description": "The period the guidance is for."}
        },
        "required": ["period"],
        "additionalProperties": false,
        "$defs": {"Period": {}}
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    let release = "Acme reported results for the second quarter of 2024.\n\
                   For the third quarter of 2024, Acme expects revenue of $510 million to $530 million.";
    // The reported quarter is refused and fed back; the coming one is taken.
    let backend = ScriptedBackend::new([
        r#"{"period": {"original": "the second quarter of 2024"}}"#,
        r#"{"period": {"original": "the third quarter of 2024"}}"#,
    ]);
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract(release)
        .await;
    let first: Vec<(&str, ViolationKind)> = x.attempts[0]
        .violations
        .iter()
        .map(|v| (v.path.as_str(), v.kind))
        .collect();
    assert_eq!(first, [("/period", ViolationKind::CrossField)]);
    let value = x
        .value
        .as_ref()
        .unwrap_or_else(|| panic!("{:#?}", x.attempts));
    assert_eq!(value["period"]["quarter"], 3, "{value}");
    assert_eq!(value["period"]["year"], 2024, "{value}");
    // Without the keyword the reported quarter is a value like any other.
    let plain = DynContract::from_schema(json!({
        "title": "Outlook",
        "type": "object",
        "properties": {"period": {"anyOf": [{"$ref": "#/$defs/Period"}, {"type": "null"}],
                                  "x-grounded": "source"}},
        "required": ["period"],
        "$defs": {"Period": {}}
    }))
    .unwrap_or_else(|e| panic!("schema: {e}"));
    let backend =
        ScriptedBackend::new([r#"{"period": {"original": "the second quarter of 2024"}}"#]);
    let x = Extractor::runtime(&backend, &plain)
        .selection(Selection::off())
        .extract(release)
        .await;
    assert_eq!(
        x.value.as_ref().map(|v| v["period"]["quarter"].clone()),
        Some(json!(2))
    );
}

/// A flat schema with `x-rules` and nothing grounded decodes under the typed grammar, the rules
/// in its mask (issue 39), when that grammar enforces every keyword the schema's JSON Schema
/// mask would; a keyword it would lose keeps the JSON Schema, the rules the validator's.
#[tokio::test(flavor = "current_thread")]
async fn an_ungrounded_schema_with_rules_decodes_under_a_grammar_holding_them() {
    let schema = json!({
        "type": "object",
        "x-rules": ["low <= high"],
        "required": ["low", "high"],
        "properties": {"low": {"type": "number"}, "high": {"type": "number"}}
    });
    let contract = DynContract::from_schema(schema.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert!(contract.decodes_typed() && !contract.decodes_grounded());
    // The first reply breaks the rule (the validator still refuses it), the second keeps it.
    let backend = ScriptedBackend::new([r#"{"low": 5, "high": 3}"#, r#"{"low": 3, "high": 5}"#]);
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract("Between 3 and 5.")
        .await;
    assert_eq!(x.value, Some(json!({"low": 3, "high": 5})));
    assert!(x.attempts[0]
        .violations
        .iter()
        .any(|v| v.kind == ViolationKind::CrossField));
    let requests = backend.requests();
    let Some(Decoding::Grammar(grammar)) = &requests[0].constraint.decoding else {
        panic!("{:?}", requests[0].constraint.decoding);
    };
    let rules: Vec<(Vec<String>, Vec<String>)> = grammar
        .rules()
        .into_iter()
        .map(|(paths, rules)| {
            let rules = rules.iter().map(|r| r.to_string());
            (paths.to_vec(), rules.collect())
        })
        .collect();
    assert_eq!(
        rules,
        [(vec![String::new()], vec!["low <= high".to_owned()])]
    );
    // `multipleOf` is a keyword the typed grammar does not model: the JSON Schema mask.
    let mut lossy = schema;
    lossy["properties"]["low"]["multipleOf"] = json!(0.5);
    let contract = DynContract::from_schema(lossy).unwrap_or_else(|e| panic!("{e}"));
    assert!(!contract.decodes_typed());
    let backend = ScriptedBackend::new([r#"{"low": 3, "high": 5}"#]);
    let x = Extractor::runtime(&backend, &contract)
        .selection(Selection::off())
        .extract("Between 3 and 5.")
        .await;
    assert_eq!(x.value, Some(json!({"low": 3, "high": 5})));
    assert!(matches!(
        backend.requests()[0].constraint.decoding,
        Some(Decoding::JsonSchema(_))
    ));
}
