//! Grounded values: what every rendering says of them, and validation against the source on
//! every backend path (`from_json_in`, the extractor with a scripted model).

use contract_backends::ScriptedBackend;
use contract_core::extract::Extractor;
use contract_core::prompt::Role;
use contract_core::values::{Amount, Evidenced, Span};
use contract_core::{Contract, Source, ViolationKind};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Guidance quoted from a release.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Quoted {
    /// The sentence that states the guidance.
    #[contract(grounded)]
    quote: Option<String>,
    #[contract(grounded(in = quote), len = 1..=60)]
    period: Option<String>,
    #[contract(grounded(in = quote))]
    low: Option<f64>,
    #[contract(grounded(in = quote))]
    high: Option<f64>,
}

/// A recursive contract: the root's rule also binds every nested copy of it, which the
/// composed grammar does not hold.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "low <= high")]
struct Node {
    #[contract(grounded)]
    low: Option<f64>,
    #[contract(grounded)]
    high: Option<f64>,
    children: Vec<Node>,
}

/// A nested object with a rule of its own (not a span's line order).
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Nested {
    #[contract(grounded)]
    quote: Option<String>,
    range: Apart,
}

/// Amounts copied anywhere from the document.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Figures {
    #[contract(grounded)]
    revenue: Option<Amount>,
    #[contract(grounded)]
    counts: Vec<u32>,
    /// Not grounded: a code the model writes.
    label: Option<String>,
}

const EN: &str = "Acme Reports Third Quarter 2024 Results\n\
Revenue was $2,757 million, up 7.5% year over year.\n\
For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140 million.\n\
Acme had 12,400 employees.";

const ES: &str = "Acme comunica los resultados del tercer trimestre de 2024.\n\
Los ingresos alcanzaron 1.730 millones de euros.\n\
Para el cuarto trimestre de 2024 prevé unos ingresos de entre 7,23 y 7,5 miles de millones de euros.";

fn not_in_source(err: &contract_core::Violations) -> Vec<String> {
    err.iter()
        .filter(|v| v.kind == ViolationKind::NotInSource)
        .map(|v| v.path.clone())
        .collect()
}

#[test]
fn renderings_say_a_value_is_copied() {
    let sig = Quoted::signature();
    assert!(
        sig.contains(r#""quote": string copied from the document | null"#),
        "{sig}"
    );
    assert!(
        sig.contains(r#""low": number copied from "quote" | null"#),
        "{sig}"
    );
    let schema = <Quoted as Contract>::json_schema();
    assert_eq!(schema["properties"]["quote"]["x-grounded"], json!("source"));
    assert_eq!(
        schema["properties"]["period"]["x-grounded"],
        json!({"in": "quote"})
    );
    let strict = contract_core::schema::strict_schema(&schema).expect("strict subset");
    let desc = strict.schema["properties"]["low"]["description"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        desc.contains("Copied verbatim from the value of `quote`"),
        "{desc}"
    );
    assert!(
        strict.moved.iter().any(|m| m.keyword == "x-grounded"),
        "x-grounded is listed as moved: {:?}",
        strict.moved
    );
    assert!(strict.schema.to_string().find("x-grounded").is_none());
    let docs = Quoted::docs_markdown();
    assert!(docs.contains("copied from `quote`"), "{docs}");
    // The built-in types carry it: a span's quote lies in its lines, an evidenced value in its
    // evidence, an amount's number where the amount is.
    let span = <Span as Contract>::json_schema();
    assert_eq!(
        span["properties"]["quote"]["x-grounded"],
        json!({"lines": ["start_line", "end_line"]})
    );
    let ev = <Evidenced<Amount> as Contract>::json_schema();
    assert_eq!(
        ev["properties"]["value"]["x-grounded"],
        json!({"in": "evidence"})
    );
    let keys: Vec<&String> = ev["properties"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["evidence", "value"], "evidence first");
    let amount = <Amount as Contract>::json_schema();
    assert_eq!(
        amount["properties"]["value"]["x-grounded"],
        json!("with_container")
    );
    // The runtime contract reads the same schema into the same signature.
    let dynamic = contract_core::DynContract::from_schema(<Quoted as Contract>::json_schema())
        .expect("runtime contract");
    assert_eq!(dynamic.signature(), Quoted::signature());
}

#[test]
fn grounded_strings_are_verbatim_substrings() {
    let source = Source::from_text(EN);
    let ok = r#"{"quote": "For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140 million.",
                 "period": "fourth quarter of 2024", "low": 4065, "high": 4140}"#;
    Quoted::from_json_in(ok, &source).expect("copied values");
    // Whitespace runs compare equal; case does not.
    let spaced = ok.replace("fourth quarter of 2024\"", "fourth  quarter\\nof 2024\"");
    Quoted::from_json_in(&spaced, &source).expect("whitespace collapsed");
    let cased = ok.replace("\"fourth quarter of 2024\"", "\"Fourth Quarter of 2024\"");
    let err = Quoted::from_json_in(&cased, &source).expect_err("case matters");
    assert_eq!(not_in_source(&err), ["/period"]);
    // A quote not in the document, and a period that is in the document but not in the quote.
    let bad = r#"{"quote": "Acme expects revenue to double.", "period": "Third Quarter 2024",
                  "low": 4065, "high": 4140}"#;
    let err = Quoted::from_json_in(bad, &source).expect_err("invented quote");
    assert_eq!(not_in_source(&err), ["/quote", "/period", "/low", "/high"]);
    assert!(
        err.iter().any(|v| v.message.contains("the document")),
        "{err}"
    );
    // Values next to a null quote have nothing to be copied from.
    let orphan = r#"{"quote": null, "period": "fourth quarter", "low": 4065, "high": 4140}"#;
    let err = Quoted::from_json_in(orphan, &source).expect_err("no quote");
    assert_eq!(not_in_source(&err), ["/period", "/low", "/high"]);
    // Null is always grounded.
    Quoted::from_json_in(
        r#"{"quote": null, "period": null, "low": null, "high": null}"#,
        &source,
    )
    .expect("nulls");
}

#[test]
fn grounded_numbers_follow_the_document_conventions() {
    let en = Source::from_text(EN);
    // Thousands separators, a range with a shared unit, a percentage.
    let ok = json!({"revenue": {"value": 2757, "currency": "$", "unit": "million"},
                    "counts": [12400, 4065], "label": "anything"});
    Figures::from_json_in(&ok.to_string(), &en).expect("numbers written in the document");
    Figures::from_json_in(
        r#"{"revenue": {"value": 7.5, "currency": "$", "unit": "million"}, "counts": [], "label": null}"#,
        &en,
    )
    .expect("7.5 is written");
    // Decimal text, not f64: 2757.0000000001 is not 2757; 2757.00 is.
    let near = r#"{"revenue": {"value": 2757.0000000001, "currency": "$", "unit": "million"}, "counts": [], "label": null}"#;
    let err = Figures::from_json_in(near, &en).expect_err("not the number written");
    assert_eq!(not_in_source(&err), ["/revenue/value"]);
    let zeros = r#"{"revenue": {"value": 2757.00, "currency": "$", "unit": "million"}, "counts": [], "label": null}"#;
    Figures::from_json_in(zeros, &en).expect("the same decimal");
    // The unit and the currency are copied as written with their amount: a code the release
    // does not write is not in it (the library computes the code from what is written).
    let unit = r#"{"revenue": {"value": 2757, "currency": "USD", "unit": "billion"}, "counts": [], "label": null}"#;
    let err = Figures::from_json_in(unit, &en).expect_err("billion is not written");
    assert_eq!(not_in_source(&err), ["/revenue/currency", "/revenue/unit"]);
    // Every item of a list is grounded.
    let list = r#"{"revenue": null, "counts": [12400, 12401], "label": null}"#;
    let err = Figures::from_json_in(list, &en).expect_err("12401");
    assert_eq!(not_in_source(&err), ["/counts/1"]);

    // Spanish: `1.730` is 1730, `7,23` is 7.23.
    let es = Source::from_text(ES);
    let quoted = r#"{"quote": "Para el cuarto trimestre de 2024 prevé unos ingresos de entre 7,23 y 7,5 miles de millones de euros.",
                     "period": "cuarto trimestre de 2024", "low": 7.23, "high": 7.5}"#;
    Quoted::from_json_in(quoted, &es).expect("decimal commas");
    let misread = quoted.replace("\"low\": 7.23", "\"low\": 723");
    let err = Quoted::from_json_in(&misread, &es).expect_err("723 is not written");
    assert_eq!(not_in_source(&err), ["/low"]);
    Figures::from_json_in(
        r#"{"revenue": {"value": 1730, "currency": "euros", "unit": "millones"}, "counts": [], "label": null}"#,
        &es,
    )
    .expect("1.730 is 1730 in Spanish");
    let wrong = r#"{"revenue": {"value": 1.73, "currency": "euros", "unit": null}, "counts": [], "label": null}"#;
    let err = Figures::from_json_in(wrong, &es).expect_err("1.73 is an English reading");
    assert_eq!(not_in_source(&err), ["/revenue/value"]);
}

#[test]
fn evidence_grounds_its_value_and_spans_their_quotes() {
    let source = Source::from_text(EN);
    let ok = json!({"evidence": [{"start_line": 2, "end_line": 2, "quote": "$2,757 million"}],
                    "value": {"value": 2757, "currency": "$", "unit": "million"}});
    Evidenced::<Amount>::from_json_in(&ok.to_string(), &source).expect("in its evidence");
    // The number is in the document, but not in the cited line.
    let elsewhere = json!({"evidence": [{"start_line": 4, "end_line": 4, "quote": null}],
                           "value": {"value": 2757, "currency": "$", "unit": "million"}});
    let err = Evidenced::<Amount>::from_json_in(&elsewhere.to_string(), &source)
        .expect_err("not in line 4");
    assert_eq!(
        not_in_source(&err),
        ["/value/value", "/value/currency", "/value/unit"]
    );
    let err = Span::from_json_in(
        r#"{"start_line": 1, "end_line": 1, "quote": "expects revenue"}"#,
        &source,
    )
    .expect_err("the quote is on line 3");
    assert_eq!(not_in_source(&err), ["/quote"]);
    Span::from_json_in(
        r#"{"start_line": 2, "end_line": 3, "quote": "year over year. For the fourth"}"#,
        &source,
    )
    .expect("a quote across a line break");
}

/// A reply that quotes the guidance and copies its values.
const RIGHT: &str = r#"{"quote": "For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140 million.",
                       "period": "fourth quarter of 2024", "low": 4065, "high": 4140}"#;
/// The same reply with a `low` the release never writes.
const INVENTED: &str = r#"{"quote": "For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140 million.",
                          "period": "fourth quarter of 2024", "low": 1234567.5, "high": 4140}"#;

#[tokio::test(flavor = "current_thread")]
async fn an_invented_value_is_rejected_and_fed_back() {
    let invented = INVENTED;
    let right = RIGHT;
    let backend = ScriptedBackend::new([invented, right]);
    let x = Extractor::<Quoted, _>::new(&backend)
        .max_attempts(2)
        .extract(EN)
        .await;
    assert_eq!(x.attempts.len(), 2);
    assert!(x.attempts[0]
        .violations
        .has_kind(ViolationKind::NotInSource));
    assert_eq!(x.value.as_ref().and_then(|v| v.low), Some(4065.0));
    let requests = backend.requests();
    // Every request carries the document, whole.
    assert!(requests
        .iter()
        .all(|r| r.source.as_ref().map(Source::text) == Some(EN.to_owned())));
    // The retry tells the model what it invented.
    let last = requests[1].messages.0.last().expect("feedback");
    assert_eq!(last.role, Role::User);
    assert!(last.content.contains("/low"), "{}", last.content);
    assert!(last.content.contains("1234567.5"), "{}", last.content);

    // With one attempt, the invented value is the reported failure.
    let backend = ScriptedBackend::new([invented]);
    let x = Extractor::<Quoted, _>::new(&backend)
        .max_attempts(1)
        .extract(EN)
        .await;
    assert!(x.value.is_none());
    assert!(x.violations.has_kind(ViolationKind::NotInSource));
    let line: Value = serde_json::from_str(&x.to_json_line().expect("json line")).expect("json");
    let kinds: Vec<&str> = line["violations"]
        .as_array()
        .map(|v| v.iter().filter_map(|x| x["kind"].as_str()).collect())
        .unwrap_or_default();
    assert!(kinds.contains(&"not_in_source"), "{kinds:?}");
}

/// A name and a year, copied as strings.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Insured {
    #[contract(grounded)]
    name: Option<String>,
    #[contract(grounded)]
    year: Option<String>,
}

const SCHEDULE: &str = "Policy schedule, founded 2018\n\
Insured: Northern Star Shipping\n\
Company Limited\n\
Port Louis\n\
\n\
Premium: USD 12,500";

#[tokio::test(flavor = "current_thread")]
async fn a_value_that_cuts_a_word_is_refused_and_the_retry_says_so() {
    // A server's reply of `20` for a document that writes only `2018`.
    let cut = r#"{"name": "Northern Star Shipping Company Limited", "year": "20"}"#;
    let right = r#"{"name": "Northern Star Shipping Company Limited", "year": "2018"}"#;
    let backend = ScriptedBackend::new([cut, right]);
    let x = Extractor::<Insured, _>::new(&backend)
        .max_attempts(2)
        .extract(SCHEDULE)
        .await;
    let first = &x.attempts[0].violations;
    assert_eq!(not_in_source(first), ["/year"], "{first}");
    assert!(
        first
            .iter()
            .any(|v| v.message.contains("cuts the word \"2018\"")),
        "{first}"
    );
    let last = backend.requests()[1]
        .messages
        .0
        .last()
        .cloned()
        .expect("feedback");
    assert!(last.content.contains("cuts the word"), "{}", last.content);
    // The name the OCR wrapped over two lines is copied whole, a space for the break.
    assert_eq!(
        x.value.and_then(|v| v.name).as_deref(),
        Some("Northern Star Shipping Company Limited")
    );
}

#[test]
fn a_document_string_spans_at_most_three_lines_and_no_blank_line() {
    let source = Source::from_text(SCHEDULE);
    let ok =
        json!({"name": "Insured: Northern Star Shipping Company Limited Port Louis", "year": null});
    Insured::from_json_in(&ok.to_string(), &source).expect("three lines");
    let four =
        json!({"name": "2018 Insured: Northern Star Shipping Company Limited Port", "year": null});
    let err = Insured::from_json_in(&four.to_string(), &source).expect_err("four lines");
    assert!(err.to_string().contains("more than 3 lines"), "{err}");
    let blank = json!({"name": "Port Louis Premium", "year": null});
    let err = Insured::from_json_in(&blank.to_string(), &source).expect_err("a blank line");
    assert!(err.to_string().contains("blank line"), "{err}");
    // Inside a word, at either end.
    for cut in ["orthern Star", "Northern Sta", "2,50"] {
        let v = json!({"name": cut, "year": null});
        let err = Insured::from_json_in(&v.to_string(), &source).expect_err(cut);
        assert_eq!(not_in_source(&err), ["/name"], "{cut}");
    }
    // At any other character: `$`, `,`, `:`.
    for whole in ["USD 12,500", "12", "500", "Insured:", ": Northern"] {
        let v = json!({"name": whole, "year": null});
        Insured::from_json_in(&v.to_string(), &source).expect(whole);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_number_is_checked_by_the_text_the_model_wrote() {
    // After a reasoning trace, the object's literal text is found in the reply.
    let reply = "<think>the low end is 4065</think>\n{\"quote\": \"For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140 million.\", \"period\": \"fourth quarter of 2024\", \"low\": 4065.0000000000001, \"high\": 4140}";
    let backend = ScriptedBackend::new([reply]);
    let x = Extractor::<Quoted, _>::new(&backend)
        .max_attempts(1)
        .extract(EN)
        .await;
    assert!(
        x.value.is_none(),
        "4065.0000000000001 is read as 4065 by an f64"
    );
    assert!(x.violations.has_kind(ViolationKind::NotInSource));
}

/// A passage cut from a longer document is read with the numerals it is given, whatever its
/// own text suggests: the same line accepts `2550` under decimal commas and `2.55` under
/// decimal points, and nothing else.
#[tokio::test(flavor = "current_thread")]
async fn a_passage_is_read_with_the_numerals_it_is_given() {
    use contract_core::ground::Numerals;
    let line = "Para el próximo trimestre prevé unos ingresos de entre 2.550 y 2.590 millones.";
    let detected = Numerals::detect(line);
    assert_eq!(Source::from_text(line).numerals(), detected);
    let comma = Source::from_text(line).with_numerals(Numerals::Comma);
    let point = Source::from_text(line).with_numerals(Numerals::Point);
    assert_eq!(
        (comma.numerals(), point.numerals()),
        (Numerals::Comma, Numerals::Point)
    );

    let small = json!({"quote": line, "period": "próximo trimestre", "low": 2.55, "high": 2.59});
    let large = json!({"quote": line, "period": "próximo trimestre", "low": 2550, "high": 2590});
    let err = Quoted::from_json_in(&small.to_string(), &comma).expect_err("2.55 is not there");
    assert_eq!(not_in_source(&err), ["/low", "/high"], "{err}");
    assert!(Quoted::from_json_in(&large.to_string(), &comma).is_ok());
    let err = Quoted::from_json_in(&large.to_string(), &point).expect_err("2550 is not there");
    assert_eq!(not_in_source(&err), ["/low", "/high"], "{err}");
    assert!(Quoted::from_json_in(&small.to_string(), &point).is_ok());

    // The extractor checks against the source it is given, and sends it with the request.
    let backend = ScriptedBackend::new([small.to_string(), large.to_string()]);
    let x = Extractor::<Quoted, _>::new(&backend)
        .max_attempts(2)
        .extract_in(line, comma.clone())
        .await;
    assert_eq!(x.attempts.len(), 2);
    assert_eq!(x.value.as_ref().and_then(|v| v.low), Some(2550.0));
    assert!(backend
        .requests()
        .iter()
        .all(|r| r.source.as_ref().map(Source::numerals) == Some(Numerals::Comma)));
}

/// The one schema a server that compiles JSON Schema gets (llama.cpp, vLLM `guided_json`): the
/// document's numbers as an `enum` (its numeral conventions, each field's bounds), its lines
/// for a whole-line quote; what a schema cannot say stays plain and is checked after decoding.
/// A fractional number (an amount, a measure) is never a part of a date, a period or a time of
/// day: a release that withdraws its outlook "for the second quarter of 2025" writes no amount. Whole numbers
/// keep every number written.
#[test]
fn an_amount_is_not_a_part_of_a_date_or_a_period() {
    use contract_core::ground::Grounds;
    let sentence = "Given current market uncertainty, Acme is withdrawing the revenue outlook for \
                    the second quarter of 2025 it issued on March 31, 2025.";
    let withdrawn = Source::from_text(sentence);
    let quoted = json!({"quote": sentence, "period": "the second quarter of 2025", "low": 2025, "high": 2025});
    let err = Quoted::from_json_in(&quoted.to_string(), &withdrawn).expect_err("2025 is a year");
    assert_eq!(not_in_source(&err), ["/low", "/high"]);
    assert!(
        err.iter()
            .any(|v| v.message.contains("only inside a date, a period or a time")),
        "{err:?}"
    );
    let day = json!({"revenue": {"value": 31, "currency": null, "unit": null}, "counts": [], "label": null});
    let err = Figures::from_json_in(&day.to_string(), &withdrawn).expect_err("31 is a day");
    assert_eq!(not_in_source(&err), ["/revenue/value"]);
    let whole = json!({"revenue": null, "counts": [2025, 31], "label": null});
    Figures::from_json_in(&whole.to_string(), &withdrawn)
        .expect("whole numbers are any number written");
    // The schema a server is sent says the same. The sentence writes no amount: the revenue
    // can only be null (an amount with no value to copy is not left open to any number).
    let schema = Figures::grammar().static_grounded_schema(&Grounds::new(&withdrawn));
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    assert!(!validator.is_valid(&day), "{schema}");
    assert!(validator.is_valid(&whole), "{schema}");
    assert_eq!(
        schema["properties"]["revenue"],
        json!({"type": "null"}),
        "{schema}"
    );
    // Of a document that writes an amount too: that amount, not the day.
    let also = Source::from_text(&format!("{sentence} Revenue was $3,100 million."));
    let schema = Figures::grammar().static_grounded_schema(&Grounds::new(&also));
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    assert!(!validator.is_valid(&day), "{schema}");
    assert!(validator.is_valid(&whole), "{schema}");
    // In the release, 2024 is written only in periods: not an amount; 2757 is one.
    let en = Source::from_text(EN);
    let year = json!({"revenue": {"value": 2024, "currency": "$", "unit": "million"}, "counts": [], "label": null});
    let err = Figures::from_json_in(&year.to_string(), &en).expect_err("2024 is a year");
    assert_eq!(not_in_source(&err), ["/revenue/value"]);
    // A receipt's hour is not its total; the amount beside it is one.
    let receipt = Source::from_text("05 JAN 2017 12:41PM\nTOTAL\n12.60");
    let hour = json!({"revenue": {"value": 12, "currency": null, "unit": null}, "counts": [], "label": null});
    let err = Figures::from_json_in(&hour.to_string(), &receipt).expect_err("12 is an hour");
    assert_eq!(not_in_source(&err), ["/revenue/value"]);
    let total = json!({"revenue": {"value": 12.60, "currency": null, "unit": null}, "counts": [12], "label": null});
    Figures::from_json_in(&total.to_string(), &receipt).expect("12.60 is written");
}

#[test]
fn the_static_grounded_schema_admits_only_what_the_document_writes() {
    use contract_core::ground::Grounds;
    let valid = |schema: &Value, instance: &Value| {
        jsonschema::validator_for(schema)
            .expect("the schema compiles")
            .is_valid(instance)
    };
    let figures = |doc: &str| {
        Figures::grammar().static_grounded_schema(&Grounds::new(&Source::from_text(doc)))
    };
    let en = figures(EN);
    let written_in = |v: Value, currency: &str, unit: &str| json!({"revenue": {"value": v, "currency": currency, "unit": unit}, "counts": [], "label": null});
    let amount_in = |v: Value, unit: &str| written_in(v, "$", unit);
    let amount = |v: Value| amount_in(v, "million");
    for n in [
        json!(2757),
        json!(7.5),
        json!(4065),
        json!(4140),
        json!(12400),
    ] {
        assert!(
            valid(&en, &amount(n.clone())),
            "{n} is in the release: {en}"
        );
    }
    for n in [json!(1234567.5), json!(4100), json!(2.757)] {
        assert!(
            !valid(&en, &amount(n.clone())),
            "{n} is not in the release: {en}"
        );
    }
    // Integers: only the document's integers (7.5 is not one), inside u32's range.
    let counts = |c: Value| json!({"revenue": null, "counts": c, "label": "x"});
    assert!(valid(&en, &counts(json!([12400, 2757]))), "{en}");
    assert!(!valid(&en, &counts(json!([5]))), "{en}");
    // Spanish conventions: `1.730` is 1730 and `7,23` is 7.23.
    // A grounded substring is a run of the document's whole words (its end punctuation off).
    assert!(valid(&en, &amount_in(json!(4065), "million")), "{en}");
    assert!(!valid(&en, &amount_in(json!(4065), "billions")), "{en}");
    assert!(
        !valid(&en, &amount_in(json!(4065), "illion")),
        "inside a word: {en}"
    );
    // The currency is one the release writes, as written: `$`, not the code `USD`.
    assert!(
        !valid(&en, &written_in(json!(4065), "USD", "million")),
        "{en}"
    );
    assert!(valid(&en, &written_in(json!(4065), "$", "million")), "{en}");
    let es = figures(ES);
    let euros = |v: Value, unit: &str| written_in(v, "euros", unit);
    assert!(valid(&es, &euros(json!(1730), "millones")), "{es}");
    assert!(valid(&es, &euros(json!(7.23), "miles de millones")), "{es}");
    assert!(!valid(&es, &euros(json!(1.73), "millones")), "{es}");
    assert!(!valid(&es, &euros(json!(1730), "million")), "{es}");
    assert!(
        !valid(&es, &written_in(json!(1730), "$", "millones")),
        "{es}"
    );
    // A whole-line quote is one of the release's lines; values grounded in it are grounded in
    // the release (the quote is not known when the request is sent).
    let gg = examples::filings::GroundedGuidance::grammar()
        .static_grounded_schema(&Grounds::new(&Source::from_text(EN)));
    let line =
        "For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140 million.";
    let reply = |quote: &str, low: Value| {
        json!({"quote": quote, "period": {"original": "the fourth quarter of 2024"},
               "low": {"value": low, "currency": "$", "unit": "million"},
               "high": {"value": 4140, "currency": "$", "unit": "million"}})
    };
    assert!(valid(&gg, &reply(line, json!(4065))), "{gg}");
    assert!(
        !valid(&gg, &reply("Acme expects revenue between", json!(4065))),
        "a part of a line: {gg}"
    );
    assert!(!valid(&gg, &reply(line, json!(4000))), "{gg}");
    let mut q4 = reply(line, json!(4065));
    q4["period"] = json!({"original": "Q4 2024"});
    assert!(
        !valid(&gg, &q4),
        "a period the release does not write: {gg}"
    );
    assert!(valid(
        &gg,
        &json!({"quote": null, "period": null, "low": null, "high": null})
    ));
    // Without grounding the schema is the plain one.
    let plain = Figures::grammar().without_grounding();
    assert_eq!(
        plain.static_grounded_schema(&Grounds::new(&Source::from_text(EN))),
        plain.schema()
    );
}

/// A comparison of two numbers the model writes freely: no candidate list to compose.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "low <= high")]
struct Free {
    #[contract(grounded)]
    quote: Option<String>,
    low: Option<f64>,
    high: Option<f64>,
}

/// The two sides of a comparison in different segments: `low` from the document, `high` from
/// the quote decoded after it.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "low <= high")]
struct Apart {
    #[contract(grounded)]
    low: Option<f64>,
    #[contract(grounded)]
    quote: Option<String>,
    #[contract(grounded(in = quote))]
    high: Option<f64>,
}

#[test]
fn the_composed_grammar_says_when_it_holds_the_rules_alone() {
    use contract_core::grammar::Grammar;
    use contract_core::ground::Grounds;
    // Rules of the root, one segment, compared numbers grounded: the grammar holds them.
    assert!(Quoted::grammar().grounded_rules_composable());
    // A span's `start_line <= end_line`: nested, the grammar enumerates line ranges `a <= b`;
    // at the root, its line fields are the document's line numbers, the order written out.
    assert!(Evidenced::<Amount>::grammar().grounded_rules_composable());
    assert!(Span::grammar().grounded_rules_composable());
    // A free number, a rule across segments, a nested object's other rule: a filter is still
    // needed.
    assert!(!Free::grammar().grounded_rules_composable());
    assert!(!Apart::grammar().grounded_rules_composable());
    assert!(!Nested::grammar().grounded_rules_composable());
    // Segment 0 of `grammar` on `text`, and whether it holds the rules alone.
    let first_holds = |grammar: &Grammar, text: &str| {
        let source = Source::from_text(text);
        let seg = grammar
            .grounded_segment(&Grounds::new(&source), 0, &serde_json::Map::new())
            .expect("segment 0");
        (seg.rules_enforced, seg.lark)
    };
    // A recursive contract: the rules are the root's, so the contract counts as composable, but
    // its nested copies go through llguidance's JSON compiler with their rule, so no segment
    // says it holds them.
    let (held, lark) = first_holds(&Node::grammar(), EN);
    assert!(!held, "{lark}");

    let grammar: Grammar = Quoted::grammar();
    let source = Source::from_text(EN);
    let grounds = Grounds::new(&source);
    let decoded = |quote: &str| {
        let mut m = serde_json::Map::new();
        m.insert("quote".into(), json!(quote));
        m
    };
    let quote =
        "For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140 million.";
    let seg = grammar
        .grounded_segment(&grounds, 1, &decoded(quote))
        .expect("segment 1");
    assert!(seg.rules_enforced, "{}", seg.lark);
    assert_eq!(
        seg.lark,
        grammar
            .grounded_lark(&grounds, 1, &decoded(quote))
            .expect("segment 1")
    );
    // A quote with 600 numbers: with both ends null or one joint choice per value of `low`
    // (the values of `high` it allows), 602 choices, more than the grammar writes out (512),
    // so this segment leaves the rule to a filter.
    let many: Vec<String> = (1..=600).map(|n| n.to_string()).collect();
    let long = format!("Revenue of {} million.", many.join(", "));
    let source = Source::from_text(&long);
    let grounds = Grounds::new(&source);
    let seg = grammar
        .grounded_segment(&grounds, 1, &decoded(&long))
        .expect("segment 1");
    assert!(!seg.rules_enforced);

    // A span at the root: the line order is held on a short document, and on one of more
    // lines than the grammar enumerates (400 > 256) it is left to a filter.
    let lines: Vec<String> = (1..=400).map(|n| format!("Line {n}.")).collect();
    let long = lines.join("\n");
    let (held, lark) = first_holds(&Span::grammar(), EN);
    assert!(held, "{lark}");
    assert!(!first_holds(&Span::grammar(), &long).0);
    // Nested spans: enumerated on the short document, not on the long one (400 lines have
    // 1,594 ranges of at most four lines, more than the 1,200 the grammar writes out).
    assert!(!first_holds(&Evidenced::<Amount>::grammar(), &long).0);
    let (held, lark) = first_holds(&Evidenced::<Amount>::grammar(), EN);
    assert!(held, "{lark}");
}

/// A backend chosen at run time, behind `dyn`: the extractor runs the same contract on whichever
/// one the application picked, and the grounding check applies to it the same way.
#[tokio::test(flavor = "current_thread")]
async fn an_extractor_runs_on_a_backend_chosen_at_run_time() {
    use contract_core::extract::DynBackend;
    use std::sync::Arc;
    let right = RIGHT;
    let invented = INVENTED;
    let pick = |honest: bool| -> Arc<dyn DynBackend> {
        Arc::new(ScriptedBackend::new([if honest {
            right
        } else {
            invented
        }]))
    };
    for honest in [true, false] {
        let backend = pick(honest);
        let x = Extractor::<Quoted, _>::new(backend.clone())
            .max_attempts(1)
            .extract(EN)
            .await;
        assert_eq!(x.value.is_some(), honest, "{:?}", x.attempts);
        let boxed: Box<dyn DynBackend> = Box::new(ScriptedBackend::new([right]));
        let y = Extractor::<Quoted, _>::new(boxed).extract(EN).await;
        assert_eq!(y.value.as_ref().and_then(|v| v.low), Some(4065.0));
    }
}

/// Guidance quoted as a whole line of the release, its values from the quote.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct LineQuoted {
    /// The line that states the guidance, copied whole.
    #[contract(grounded(line))]
    quote: Option<String>,
    #[contract(grounded(in = quote))]
    low: Option<f64>,
    #[contract(grounded(in = quote))]
    high: Option<f64>,
}

/// A release that wraps its guidance sentence over two lines: the quote is the whole sentence,
/// its line break a space, and its values come from either line; neither line alone, nor a
/// heading and the sentence after it, is a quote. The mask offers the sentence and not its
/// first line alone.
#[test]
fn a_whole_line_quote_may_be_a_sentence_the_layout_wrapped() {
    let release = "Business outlook\n\
                   For the first quarter of 2025 the company anticipates net revenue in the range of\n\
                   $790 million to $815 million, and EPS of $0.41 to $0.45.";
    let source = Source::from_text(release);
    let sentence =
        "For the first quarter of 2025 the company anticipates net revenue in the range \
                    of $790 million to $815 million, and EPS of $0.41 to $0.45.";
    let ok = json!({"quote": sentence, "low": 790, "high": 815});
    let read = LineQuoted::from_json_in(&ok.to_string(), &source).expect("a wrapped sentence");
    assert_eq!((read.low, read.high), (Some(790.0), Some(815.0)));
    // A line of the wrapped sentence alone is no quote: the quote cannot stop at the break.
    let first = "For the first quarter of 2025 the company anticipates net revenue in the range of";
    let err = LineQuoted::from_json_in(
        &json!({"quote": first, "low": null, "high": null}).to_string(),
        &source,
    )
    .expect_err("half the sentence");
    assert_eq!(not_in_source(&err), ["/quote"], "{err}");
    // The heading is a line of its own.
    LineQuoted::from_json_in(
        &json!({"quote": "Business outlook", "low": null, "high": null}).to_string(),
        &source,
    )
    .expect("a line");
    // A heading joined to the sentence after it, or half a sentence across the break: no quote.
    for quote in [
        format!("Business outlook {first}"),
        "range of $790 million to $815 million".to_owned(),
    ] {
        let v = json!({"quote": quote, "low": null, "high": null});
        let err = LineQuoted::from_json_in(&v.to_string(), &source).expect_err(&quote);
        assert_eq!(not_in_source(&err), ["/quote"], "{quote}");
    }
    // The mask's line terminal offers the sentence, and not the heading joined to it.
    use contract_core::grammar::Grammar;
    use contract_core::ground::Grounds;
    let grammar: Grammar = LineQuoted::grammar();
    let grounds = Grounds::new(&source);
    let lark = grammar
        .grounded_lark(&grounds, 0, &serde_json::Map::new())
        .expect("segment 0");
    assert!(lark.contains(sentence), "{lark}");
    assert!(!lark.contains(&format!("{first}\\\"")), "{lark}");
    assert!(!lark.contains("Business outlook For"), "{lark}");
}
