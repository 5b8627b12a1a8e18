//! Evidence selection by values ([`Judge::Values`]): what is enumerated for each field, which
//! group is filled by its best value without generating, which one is generated from the
//! passage its best value is written in, and the next value when the contract refuses one.
//! The scores come from a scripted scorer (the real model's figures are in
//! `docs/benchmarks.md`); `realdocs` measures the same pipeline with a real model.

use contract_backends::ScriptedBackend;
use contract_core::extract::Extractor;
use contract_core::select::{
    field_groups, value_candidates, Judge, Outcome, Selection, ValuePrompt,
};
use contract_core::{Amount, CheckResult, Contract, DateValue, Source, Violation, ViolationKind};
use serde::{Deserialize, Serialize};

const RECEIPT: &str = "TAN WOON YANN
INDAH GIFT & HOME DECO
27,JALAN DEDAP 13,
TEL:07-3507405
19/10/2018 20:49:59 #01
ST-PRIVILEGE CARD
1
10.00
TOTAL AMT................. RM
60.30
CASH.................... RM
70.30
THANK YOU ! PLEASE COME AGAIN !";

/// A receipt, as a user writes it.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(check = not_the_cashier)]
struct Receipt {
    /// The name of the shop that issued the receipt.
    #[contract(grounded)]
    company: Option<String>,
    /// The date of the purchase.
    #[contract(grounded)]
    date: Option<DateValue>,
    /// The total amount paid.
    #[contract(grounded)]
    total: Option<Amount>,
}

/// A check that reads the value: the first line is the cashier, not the shop.
fn not_the_cashier(r: &Receipt) -> CheckResult {
    if r.company.as_deref() == Some("TAN WOON YANN") {
        return Err(Violation::new(
            "/company",
            ViolationKind::Custom,
            "that is the cashier's name",
        ));
    }
    Ok(())
}

#[test]
fn each_field_enumerates_what_the_document_writes_of_its_kind() {
    let spec = Receipt::contract_spec();
    let source = Source::from_text(RECEIPT);
    let groups = field_groups(spec, &Default::default());
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["company", "date", "total"]);
    let of =
        |g: usize| value_candidates(spec, &groups[g], &source, 120, 400).expect("values to score");
    // A grounded string: the document's lines, each its JSON string, a value after a label
    // (`TEL:`), and each line joined to the next (a name the layout wrapped); the whole answer.
    let company = of(0);
    assert_eq!(company.prefix, r#"{"company": "#);
    for value in [
        "INDAH GIFT & HOME DECO",
        "07-3507405",
        "TAN WOON YANN INDAH GIFT & HOME DECO",
        "INDAH GIFT & HOME DECO 27,JALAN DEDAP 13,",
    ] {
        let json = serde_json::to_string(value).expect("a string");
        assert!(
            company.values.contains(&json),
            "{value}: {:?}",
            company.values
        );
    }
    // 13 lines, 1 value after a label, 12 lines joined to the next.
    assert_eq!(company.values.len(), 26, "{:?}", company.values);
    assert!(company.direct);
    assert_eq!(company.null.as_deref(), Some(r#"{"company": null"#));
    // A date: only whole date expressions, inside the value type's `original`.
    let date = of(1);
    assert_eq!(date.prefix, r#"{"date": {"original": "#);
    assert_eq!(date.values, [r#""19/10/2018""#]);
    assert_eq!(date.places[0][0].0, 5);
    assert!(date.direct, "a date's only copied part is `original`");
    // An amount: the numbers as written (`60.30`, `10.00`: the fraction digits the receipt
    // shows, the form the model copies), each ended as the model would go on
    // (`, "currency"`), generated with the rest of the amount (not direct).
    let total = of(2);
    assert_eq!(total.prefix, r#"{"total": {"value": "#);
    for written in ["60.30,", "10.00,", "70.30,", "1,"] {
        assert!(
            total.values.contains(&written.to_owned()),
            "{written}: {:?}",
            total.values
        );
    }
    assert!(
        !total.values.iter().any(|v| v == "60.3," || v == "70.3,"),
        "a normalised literal the receipt does not write: {:?}",
        total.values
    );
    assert!(
        !total.values.iter().any(|v| v.starts_with("07")),
        "{:?}",
        total.values
    );
    // Nor a time's parts (`20:49:59`): the hour of a receipt's time was taken for its total.
    for part in ["20,", "49,", "59,"] {
        assert!(
            !total.values.iter().any(|v| v == part),
            "{part}: {:?}",
            total.values
        );
    }
    assert!(!total.direct);
    // Prose lines longer than the bound are not candidate values.
    assert!(value_candidates(spec, &groups[0], &source, 10, 400).is_none());
    // Nor are more values than the cap.
    assert!(value_candidates(spec, &groups[0], &source, 120, 5).is_none());
}

/// A name and its registration code are two values, on one line or on two: the name alone is a
/// value, the code alone is one, the two together are not (offered together, the model scored
/// the name with its code above the name alone).
#[test]
fn a_name_is_offered_without_its_code() {
    let spec = Receipt::contract_spec();
    let groups = field_groups(spec, &Default::default());
    let source = Source::from_text(
        "GARDENIA BAKERIES (KL) SDN BHD (139386 X)\nLOT 3, JALAN PELABUR 23/1\n\
         SYARIKAT PERNIAGAAN GIN KEE\n(81109-A)\nTOTAL 8.00",
    );
    let company = value_candidates(spec, &groups[0], &source, 120, 400).expect("values");
    let has = |v: &str| {
        company
            .values
            .contains(&serde_json::to_string(v).expect("a string"))
    };
    for value in [
        "GARDENIA BAKERIES (KL) SDN BHD",
        "139386 X",
        "SYARIKAT PERNIAGAAN GIN KEE",
        "(81109-A)",
        // A line joined to the next: both run on at the break.
        "LOT 3, JALAN PELABUR 23/1 SYARIKAT PERNIAGAAN GIN KEE",
    ] {
        assert!(has(value), "{value}: {:?}", company.values);
    }
    for value in [
        "GARDENIA BAKERIES (KL) SDN BHD (139386 X)",
        "SYARIKAT PERNIAGAAN GIN KEE (81109-A)",
        // The name and the next line are not one run of the text: the code is between them.
        "GARDENIA BAKERIES (KL) SDN BHD LOT 3, JALAN PELABUR 23/1",
    ] {
        assert!(!has(value), "{value}: {:?}", company.values);
    }
}

/// An agreement wrapped at 72 columns: every line is within the bound, but a line of prose is a
/// piece of a sentence, so its string fields are judged by question (the state is written
/// inside a sentence, which no line holds alone); its dates are still enumerated.
const AGREEMENT: &str = "NON-DISCLOSURE AGREEMENT
This Non-Disclosure Agreement is entered into as of March 3, 2011 by and
between Acme Widgets Inc., a Delaware corporation, and Beta Tools LLC.
1. Confidential Information. Each party may disclose to the other party
certain information that the disclosing party considers confidential.
2. Governing Law. This Agreement shall be governed by the laws of the
State of Oregon, without regard to its conflict of laws principles.
3. Term. This Agreement remains in effect for three (3) years from the
date first written above unless terminated earlier by either party.";

/// What a user asks of an agreement.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Agreement {
    /// The US state whose law governs the agreement.
    #[contract(grounded)]
    jurisdiction: Option<String>,
    /// The date the agreement takes effect.
    #[contract(grounded)]
    effective: Option<DateValue>,
}

#[test]
fn prose_lines_are_not_values_however_narrow_it_is_wrapped() {
    let spec = Agreement::contract_spec();
    let groups = field_groups(spec, &Default::default());
    let prose = Source::from_text(AGREEMENT);
    assert!(prose.text().lines().all(|l| l.chars().count() <= 120));
    assert!(value_candidates(spec, &groups[0], &prose, 120, 400).is_none());
    let dates = value_candidates(spec, &groups[1], &prose, 120, 400).expect("dates");
    assert_eq!(dates.values, ["\"March 3, 2011\""]);
    // The same contract on a document written in short lines (a form) is offered its lines.
    let form = Source::from_text("CONFIDENTIALITY FORM\nGoverning law:\nOregon\nSigned:\n3/3/2011");
    let lines = value_candidates(spec, &groups[0], &form, 120, 400).expect("lines");
    assert!(
        lines.values.contains(&"\"Oregon\"".to_owned()),
        "{:?}",
        lines.values
    );
}

/// A scorer that likes the shop's name, any date, and the total's number; the cashier's name
/// is liked best of all (and refused by the contract's check). The same whichever way the values
/// are asked: as sentences ("The total amount paid is 60.30.\n", the default) or as the JSON reply
/// starts (`{"total": {"value": 60.30,`, [`ValuePrompt::Contract`]).
fn scorer(_prompt: &str, answer: &str) -> f64 {
    // A sentence ends in a line break after its full stop.
    let answer = answer.trim_end();
    let is = |value: &str| {
        answer.ends_with(&format!("\"{value}\"")) || answer.ends_with(&format!(" is {value}."))
    };
    if is("TAN WOON YANN") {
        -1.0
    } else if is("INDAH GIFT & HOME DECO") {
        -2.0
    } else if (answer.starts_with(r#"{"date": "#) || answer.starts_with("The date"))
        && answer.contains("19/10/2018")
    {
        -1.0
    } else if (answer.starts_with(r#"{"total": "#) || answer.starts_with("The total"))
        && (answer.ends_with(" 60.30,") || answer.ends_with(" is 60.30."))
    {
        -0.5
    } else if answer.ends_with("null") || answer.ends_with(" is not stated.") {
        -4.0
    } else {
        -9.0
    }
}

/// `ValuePrompt::Question`: the document, then "Question: what is the total amount paid?" from
/// the field's doc comment, each value scored as the sentence answering it, written as the
/// document writes it (a string without its JSON quotes); `ValuePrompt::Contract` scores the
/// same values as the extraction's JSON reply starts; the default (`Auto`) asks for numbers in
/// words and for the rest as the reply. All three choose the same values here.
#[tokio::test(flavor = "current_thread")]
async fn values_are_asked_for_in_words_or_as_the_contract_reply() {
    let replies = [r#"{"total": {"value": 60.3, "currency": null, "unit": null}}"#];
    let mut chosen = Vec::new();
    for prompt in [
        ValuePrompt::Auto,
        ValuePrompt::Question,
        ValuePrompt::Contract,
    ] {
        let backend = ScriptedBackend::new(replies).with_scorer(scorer);
        let selection = match prompt {
            ValuePrompt::Auto => Selection::default(),
            other => Selection::default().value_prompt(other),
        };
        let x = Extractor::<Receipt, _>::new(&backend)
            .selection(selection)
            .extract(RECEIPT)
            .await;
        chosen.push(x.json.clone().expect("a value"));
        let scored = backend.score_requests();
        let total = scored
            .iter()
            .find(|r| {
                r.answers
                    .iter()
                    .any(|a| a.starts_with("The total") || a.starts_with(r#"{"total""#))
            })
            .expect("the total's values were scored");
        let asked = &total.prompts[0].0.last().expect("a message").content;
        let record = x.selection.as_ref().expect("selection ran");
        let total_record = record
            .groups
            .iter()
            .find(|g| g.group == "total")
            .expect("a total group");
        match prompt {
            ValuePrompt::Question => {
                assert!(
                    asked.ends_with(
                        "Question: what is the total amount paid? Answer in one sentence."
                    ),
                    "{asked}"
                );
                assert!(total
                    .answers
                    .contains(&"The total amount paid is 60.30.\n".to_owned()));
                assert_eq!(
                    total.answers.last().map(String::as_str),
                    Some("The total amount paid is not stated.\n")
                );
                let company = &scored[0];
                assert!(
                    company.answers.contains(
                        &"The name of the shop that issued the receipt is INDAH GIFT & HOME DECO.\n"
                            .to_owned()
                    ),
                    "{:?}",
                    company.answers
                );
                assert_eq!(total_record.question, "what is the total amount paid?");
            }
            ValuePrompt::Auto => {
                assert!(total
                    .answers
                    .contains(&"The total amount paid is 60.30.\n".to_owned()));
                assert_eq!(total_record.question, "what is the total amount paid?");
                let company = &scored[0];
                assert!(
                    company
                        .answers
                        .contains(&r#"{"company": "INDAH GIFT & HOME DECO""#.to_owned()),
                    "{:?}",
                    company.answers
                );
            }
            _ => {
                assert!(total
                    .answers
                    .contains(&r#"{"total": {"value": 60.30,"#.to_owned()));
                assert!(asked.contains("THANK YOU"));
            }
        }
    }
    assert_eq!(chosen[0], chosen[1]);
    assert_eq!(chosen[0], chosen[2]);
}

#[tokio::test(flavor = "current_thread")]
async fn values_fill_their_groups_and_the_rest_is_copied_from_the_best_passage() {
    // The company takes its best value (the cashier's line), the check refuses it, and it takes
    // the next; the total is generated from its best number's line.
    let replies = [r#"{"total": {"value": 60.3, "currency": null, "unit": null}}"#];
    let backend = ScriptedBackend::new(replies).with_scorer(scorer);
    let x = Extractor::<Receipt, _>::new(&backend)
        .extract(RECEIPT)
        .await;
    let value = x.value.as_ref().expect("a value");
    assert_eq!(value.company.as_deref(), Some("INDAH GIFT & HOME DECO"));
    assert_eq!(
        value.date.as_ref().map(|d| d.iso.as_str()),
        Some("2018-10-19")
    );
    let total = value.total.as_ref().expect("a total");
    assert_eq!(total.value, 60.3);
    // The currency is not on the line shown; its code is the one the receipt writes (RM).
    assert_eq!(total.code.as_deref(), Some("MYR"));
    // No generation for the date nor the company; the amount is shown only the line its best
    // number is on.
    let requests = backend.requests();
    assert_eq!(requests.len(), 1);
    let shown_lines = |i: usize| -> Vec<usize> {
        let shown = requests[i].source.as_ref().expect("an excerpt");
        (1..=shown.line_count())
            .filter(|&n| shown.line(n).is_some_and(|l| !l.trim().is_empty()))
            .collect()
    };
    assert_eq!(shown_lines(0), [10]);
    // One scoring request per group, each over the whole document.
    let scored = backend.score_requests();
    assert_eq!(scored.len(), 3);
    assert!(scored.iter().all(|r| r.prompts[0]
        .0
        .last()
        .is_some_and(|m| m.content.contains("THANK YOU"))));
    let record = x.selection.as_ref().expect("selection ran");
    assert!(record.groups.iter().all(|g| g.judge == Judge::Values));
    assert!(record.groups.iter().all(|g| g.outcome == Outcome::Filled));
    let company = &record.groups[0];
    assert_eq!(company.tries.len(), 2, "the refused value, then the next");
}

#[tokio::test(flavor = "current_thread")]
async fn a_group_the_backend_did_not_answer_is_an_error_not_a_null() {
    // The total must be generated and the backend has no reply: the record says so, and no
    // value holds a null total the receipt does not leave out.
    let backend = ScriptedBackend::new(Vec::<String>::new()).with_scorer(scorer);
    let x = Extractor::<Receipt, _>::new(&backend)
        .extract(RECEIPT)
        .await;
    assert!(x.value.is_none(), "{:?}", x.value);
    assert!(
        matches!(
            &x.error,
            Some(contract_core::extract::AttemptError::Backend { .. })
        ),
        "{:?}",
        x.error
    );
    let record = x.selection.as_ref().expect("selection ran");
    let total = record
        .groups
        .iter()
        .find(|g| g.group == "total")
        .expect("a total group");
    assert_eq!(total.outcome, Outcome::Failed);
    // The groups that were answered are kept in the record.
    assert_eq!(
        x.json.as_ref().map(|j| j["company"].clone()),
        Some(serde_json::json!("INDAH GIFT & HOME DECO"))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_question_judge_is_asked_when_values_are_not_wanted_or_the_document_is_long() {
    // Judge::Question: every group asks its yes/no question of the passages, none of the
    // scoring answers is a value.
    let backend = ScriptedBackend::new(Vec::<String>::new()).with_scorer(scorer);
    let x = Extractor::<Receipt, _>::new(&backend)
        .selection(Selection::default().judge(Judge::Question))
        .max_attempts(1)
        .extract(RECEIPT)
        .await;
    let record = x.selection.as_ref().expect("selection ran");
    assert!(record.groups.iter().all(|g| g.judge == Judge::Question));
    assert!(backend.score_requests().iter().all(|r| r
        .answers
        .iter()
        .all(|a| ["yes", "Yes", "no", "No"].contains(&a.as_str()))));
    // A document longer than the values judge shows whole: the question judge.
    let backend = ScriptedBackend::new(Vec::<String>::new()).with_scorer(scorer);
    let x = Extractor::<Receipt, _>::new(&backend)
        .selection(Selection::default().max_shown_chars(100))
        .max_attempts(1)
        .extract(RECEIPT)
        .await;
    let record = x.selection.as_ref().expect("selection ran");
    assert!(record.groups.iter().all(|g| g.judge == Judge::Question));
}

/// The values judge never offers a value the document does not write: every scored answer's
/// value is in the receipt, on its line or on its line and the next (a space for the break).
#[test]
fn every_scored_value_is_written_in_the_document() {
    let spec = Receipt::contract_spec();
    let source = Source::from_text(RECEIPT);
    for g in field_groups(spec, &Default::default()) {
        let c = value_candidates(spec, &g, &source, 120, 400).expect("values");
        for (v, places) in c.values.iter().zip(&c.places) {
            let text = v.trim_end_matches([',', '}']).trim_matches('"');
            for (line, _) in places {
                let written = source.line(*line).expect("a line");
                let wrapped = format!(
                    "{} {}",
                    written.trim(),
                    source.line(line + 1).unwrap_or("").trim()
                );
                let digits = written.replace(',', "");
                let number = text.parse::<f64>().ok();
                assert!(
                    written.contains(text)
                        || (text.contains(' ') && wrapped.contains(text))
                        || number.is_some_and(|n| digits.contains(&format!("{n:.2}"))
                            || digits.contains(&format!("{n}"))),
                    "{text} is not on line {line}: {written}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn selected_groups_hand_on_their_fields_and_the_last_value_is_the_records() {
    // The company's first value (the cashier) is refused by the contract's check after it was
    // handed on: the group is handed on again with the next value. The last value handed on
    // for each field is the record's.
    let replies = [r#"{"total": {"value": 60.3, "currency": null, "unit": null}}"#];
    let backend = ScriptedBackend::new(replies).with_scorer(scorer);
    let seen = std::sync::Mutex::new(Vec::new());
    let on_field = |e: contract_core::extract::FieldEvent| {
        seen.lock().unwrap_or_else(|e| e.into_inner()).push(e);
    };
    let x = Extractor::<Receipt, _>::new(&backend)
        .extract_observed(RECEIPT, &on_field)
        .await;
    let seen = seen.into_inner().unwrap_or_else(|e| e.into_inner());
    let json = x.json.as_ref().expect("a value");
    for path in ["/company", "/date", "/total"] {
        let last = seen
            .iter()
            .rev()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("{path} never handed on: {seen:?}"));
        assert_eq!(&json[&path[1..]], &last.value, "{path}");
        assert_eq!(last.group.as_deref(), Some(&path[1..]));
    }
    let companies: Vec<&serde_json::Value> = seen
        .iter()
        .filter(|e| e.path == "/company")
        .map(|e| &e.value)
        .collect();
    assert_eq!(
        companies,
        [
            &serde_json::json!("TAN WOON YANN"),
            &serde_json::json!("INDAH GIFT & HOME DECO")
        ]
    );
}

/// A receipt with a postcode, a barcode and a slip number: digit runs no amount is written as.
const CODES: &str = "GERBANG ALAF RESTAURANTS SDN BHD
NO.3, JALAN SS21/39, 47400 PETALING JAYA
6194020100124
SLIP: 0020070154
TOTAL ROUNDED
28.50
CASH 50.00";

/// A count of things a receipt lists (a whole number).
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Counted {
    /// The number of items bought.
    #[contract(grounded)]
    items: Option<u32>,
    /// The total amount paid.
    #[contract(grounded)]
    total: Option<Amount>,
}

/// An amount's values leave out runs of five or more bare digits (postcodes, barcodes, slip
/// numbers) when the document writes amounts with minor units; a whole-number field keeps
/// them, and so does an amount in a document that writes no minor units (yen, say).
#[test]
fn an_amount_is_not_offered_the_codes_of_a_document_that_writes_minor_units() {
    let spec = Counted::contract_spec();
    let groups = field_groups(spec, &Default::default());
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["items", "total"]);
    let source = Source::from_text(CODES);
    let total = value_candidates(spec, &groups[1], &source, 120, 400).expect("values");
    for written in ["28.50,", "50.00,", "3,", "21,", "39,"] {
        assert!(
            total.values.contains(&written.to_owned()),
            "{written}: {:?}",
            total.values
        );
    }
    for code in ["47400,", "6194020100124,", "0020070154,", "20070154,"] {
        assert!(
            !total.values.iter().any(|v| v == code),
            "{code}: {:?}",
            total.values
        );
    }
    let items = value_candidates(spec, &groups[0], &source, 120, 400).expect("values");
    assert!(
        items.values.iter().any(|v| v.starts_with("47400")),
        "{:?}",
        items.values
    );
    let yen = Source::from_text("TOTAL\n12500\nCASH 20000");
    let total = value_candidates(spec, &groups[1], &yen, 120, 400).expect("values");
    assert!(
        total.values.contains(&"12500}".to_owned()) || total.values.contains(&"12500,".to_owned()),
        "{:?}",
        total.values
    );
}

/// An agreement, as a user writes it: its parties are a list.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Signed {
    /// The parties that sign the agreement, each name as written.
    #[contract(grounded, len = 0..=8)]
    parties: Vec<String>,
}

/// An agreement whose preamble names its parties, then 30 clauses of prose, then the line
/// the question judge likes best, which names no party.
fn agreement() -> String {
    let mut lines = vec![
        "This Agreement is made on 1 May 2020 between Acme Widgets Inc., a Delaware corporation \
         (the \"Company\"), and Jane Roe (the \"Employee\")."
            .to_string(),
    ];
    for n in 1..=30 {
        lines.push(format!(
            "{n}. The Employee keeps the Company's information secret under clause {n} of it."
        ));
    }
    lines.push("IN WITNESS WHEREOF, the parties have signed this Agreement.".to_string());
    lines.join("\n")
}

/// A list is filled from its best passages shown together, and its first try is shown the
/// document's opening too (`Selection::opening_chars`): the passage the question judge ranks
/// first names no party, the preamble does.
#[tokio::test(flavor = "current_thread")]
async fn a_list_is_shown_the_documents_opening_beside_its_best_passages() {
    let doc = agreement();
    let judge = |prompt: &str| {
        if prompt.contains("WITNESS") {
            2.0
        } else {
            -1.0
        }
    };
    let reply = r#"{"parties": ["Acme Widgets Inc.", "Jane Roe"]}"#;
    let shown = |backend: &ScriptedBackend| -> Vec<usize> {
        let requests = backend.requests();
        let shown = requests[0].source.as_ref().expect("an excerpt");
        (1..=shown.line_count())
            .filter(|&n| shown.line(n).is_some_and(|l| !l.trim().is_empty()))
            .collect()
    };

    let backend = ScriptedBackend::new([reply]).with_judge(judge);
    let x = Extractor::<Signed, _>::new(&backend)
        .selection(Selection::default().list_passages(1))
        .max_attempts(1)
        .extract(&doc)
        .await;
    let record = x.selection.as_ref().expect("selection ran");
    assert_eq!(record.groups[0].judge, Judge::Question);
    // The opening (the preamble and the clauses that start in the first 1,000 characters)
    // and the best passage, in document order.
    let lines = shown(&backend);
    assert_eq!(lines.first(), Some(&1));
    assert_eq!(lines.last(), Some(&32));
    assert!(lines.len() > 2 && lines.len() < 20, "{lines:?}");
    let value = x.value.as_ref().expect("a value");
    assert_eq!(value.parties, ["Acme Widgets Inc.", "Jane Roe"]);

    // Without the opening, the best passage alone: the parties are not in what is shown.
    let backend = ScriptedBackend::new([reply]).with_judge(judge);
    let x = Extractor::<Signed, _>::new(&backend)
        .selection(Selection::default().list_passages(1).opening_chars(0))
        .max_attempts(1)
        .extract(&doc)
        .await;
    assert_eq!(shown(&backend), [32]);
    assert!(x.value.is_none() || x.value.as_ref().is_some_and(|v| v.parties.is_empty()));
}
