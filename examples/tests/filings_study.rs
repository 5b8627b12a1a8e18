//! The filings study's pipeline with a scripted model: what each mode sends, and how replies are
//! scored (perfect copies are correct; the classic small-model mistakes are not).

use contract_backends::ScriptedBackend;
use contract_core::ground::Numerals;
use contract_core::Contract;
use examples::filings::study::{self, Mode, ModeBackend, StudyDoc};
use examples::filings::{generate, DEFAULT_DOCS, DEFAULT_SEED};
use serde_json::{json, Value};

fn docs() -> Vec<(StudyDoc, String)> {
    generate(DEFAULT_DOCS, DEFAULT_SEED)
        .into_iter()
        .map(|f| {
            let reply = f
                .answer
                .to_model_json()
                .expect("serialise the answer")
                .to_string();
            (
                StudyDoc {
                    id: f.id,
                    text: f.text,
                    truth: Some(f.truth),
                },
                reply,
            )
        })
        .collect()
}

/// `grounded` mode (its own contract) over `docs` with scripted replies.
fn run_grounded(replies: Vec<String>, docs: &[StudyDoc]) -> (Vec<Value>, ScriptedBackend) {
    let scripted = ScriptedBackend::new(replies);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let rows = {
        let extractor = study::grounded_extractor(
            ModeBackend::new(&scripted, Mode::Grounded),
            Mode::Grounded,
            160,
        );
        docs.iter()
            .map(|d| study::row(d, Mode::Grounded, &rt.block_on(extractor.extract(&d.text))))
            .collect()
    };
    (rows, scripted)
}

fn run(mode: Mode, replies: Vec<String>, docs: &[StudyDoc]) -> (Vec<Value>, ScriptedBackend) {
    let scripted = ScriptedBackend::new(replies);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let rows = {
        let extractor = study::extractor(ModeBackend::new(&scripted, mode), mode, 160);
        docs.iter()
            .map(|d| study::row(d, mode, &rt.block_on(extractor.extract(&d.text))))
            .collect()
    };
    (rows, scripted)
}

#[test]
fn perfect_copies_are_valid_and_correct_in_every_mode() {
    let (docs, replies): (Vec<_>, Vec<_>) = docs().into_iter().unzip();
    for mode in Mode::ALL.into_iter().filter(|m| !m.grounded()) {
        let (rows, scripted) = run(mode, replies.clone(), &docs);
        let s = study::summarize(mode.as_str(), &rows);
        assert_eq!(
            (s.docs, s.valid, s.correct, s.scored),
            (40, 40, 40, 40),
            "{mode:?}"
        );
        assert_eq!(s.levels, [40, 0, 0, 0]);
        assert_eq!((s.period_right, s.amounts_right), (40, 40), "{mode:?}");
        // What the backend received: the grammar only in the masked modes, without its rules
        // in `constrained`.
        for req in scripted.requests() {
            match mode {
                Mode::Free | Mode::Retry | Mode::Repair => {
                    assert!(req.constraint.decoding.is_none())
                }
                Mode::Grounded | Mode::Routed => {
                    unreachable!("the grounded modes run their own contract")
                }
                Mode::Constrained | Mode::Rules => {
                    let g = req.constraint.grammar().expect("a contract grammar");
                    let rules: usize = g.objects.iter().map(|o| o.rules.len()).sum();
                    assert_eq!(rules > 0, mode == Mode::Rules, "{mode:?}");
                }
            }
        }
    }
}

#[test]
fn small_model_mistakes_are_valid_but_not_correct() {
    let (docs, _) = docs().into_iter().unzip::<_, _, Vec<_>, Vec<String>>();
    let doc = docs
        .iter()
        .find(|d| matches!(&d.truth, Some(Some(_))))
        .expect("a document with guidance");
    let truth = doc.truth.clone().flatten().expect("truth");
    // The quarter after the right one (the classic "quarter just closed" confusion), and the
    // scale word applied to a number that is already in millions.
    let wrong_quarter = json!({
        "period": format!("Q{} {}", truth.quarter % 4 + 1, truth.year),
        "low": {"value": truth.low, "currency": truth.currency, "unit": "million"},
        "high": {"value": truth.high, "currency": truth.currency, "unit": "million"},
        "line": 7
    });
    let right = json!({
        "period": format!("Q{} {}", truth.quarter, truth.year),
        "low": {"value": truth.low, "currency": truth.currency, "unit": "million"},
        "high": {"value": truth.high, "currency": truth.currency, "unit": "million"},
        "line": 7
    });
    let scaled_twice = json!({
        "period": format!("Q{} {}", truth.quarter, truth.year),
        "low": {"value": truth.low, "currency": truth.currency, "unit": "billion"},
        "high": {"value": truth.high, "currency": truth.currency, "unit": "billion"},
        "line": 7
    });
    let one = std::slice::from_ref(doc);
    // Each reply with whether it is correct, its period right, its amounts right.
    for (reply, correct, period, amounts) in [
        (right, true, true, true),
        (wrong_quarter, false, false, true),
        (scaled_twice, false, true, false),
    ] {
        let (rows, _) = run(Mode::Free, vec![reply.to_string()], one);
        assert_eq!(rows[0]["valid"], true);
        assert_eq!(rows[0]["correct"], correct, "{reply}");
        assert_eq!(
            rows[0]["parts"],
            json!({"period": period, "amounts": amounts}),
            "{reply}"
        );
    }
    // A null answer where there is guidance: valid, not correct.
    let (rows, _) = run(
        Mode::Free,
        vec![r#"{"period": null, "low": null, "high": null, "line": null}"#.into()],
        one,
    );
    assert_eq!(
        (rows[0]["valid"].clone(), rows[0]["correct"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(rows[0]["parts"], json!({"period": false, "amounts": false}));
}

#[test]
fn free_refuses_repairs_retry_feeds_back_repair_accepts() {
    let (docs, replies): (Vec<_>, Vec<_>) = docs().into_iter().unzip();
    let doc = &docs[..1];
    let good = replies[0].clone();
    // Trailing commas: the ladder repairs them.
    let broken = good.replace('}', ",}");
    let (rows, _) = run(Mode::Free, vec![broken.clone()], doc);
    assert_eq!(rows[0]["valid"], false);
    assert_eq!(rows[0]["level"], "repaired");
    let (rows, _) = run(Mode::Repair, vec![broken.clone()], doc);
    assert_eq!(rows[0]["valid"], true);
    let (rows, scripted) = run(Mode::Retry, vec![broken, good], doc);
    assert_eq!(rows[0]["valid"], true);
    assert_eq!(rows[0]["attempts"], 2);
    assert_eq!(scripted.requests().len(), 2);
}

#[test]
fn a_violated_rule_is_invalid() {
    let (docs, _) = docs().into_iter().unzip::<_, _, Vec<_>, Vec<String>>();
    let partial = r#"{"period": "Q3 2024", "low": null, "high": null, "line": 7}"#;
    let (rows, _) = run(Mode::Free, vec![partial.into()], &docs[..1]);
    assert_eq!(rows[0]["valid"], false);
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("(cross_field)"),
        "{}",
        rows[0]
    );
}

#[test]
fn external_replies_are_scored_the_same_way() {
    let (docs, replies): (Vec<_>, Vec<_>) = docs().into_iter().unzip();
    let row = study::score_reply(&docs[0], "llama.cpp", &replies[0], 0.5);
    assert_eq!(
        (row["valid"].clone(), row["correct"].clone()),
        (json!(true), json!(true))
    );
    let row = study::score_reply(&docs[0], "llama.cpp", "I cannot answer.", 0.5);
    assert_eq!(row["valid"], false);
    assert_eq!(row["level"], "invalid");
}

#[test]
fn grounded_perfect_copies_are_valid_correct_and_in_the_release() {
    let filings = generate(DEFAULT_DOCS, DEFAULT_SEED);
    let docs: Vec<StudyDoc> = filings
        .iter()
        .map(|f| StudyDoc {
            id: f.id.clone(),
            text: f.text.clone(),
            truth: Some(f.truth.clone()),
        })
        .collect();
    let replies: Vec<String> = filings
        .iter()
        .map(|f| {
            f.grounded_answer()
                .to_model_json()
                .expect("serialise")
                .to_string()
        })
        .collect();
    let (rows, scripted) = run_grounded(replies, &docs);
    let s = study::summarize("grounded", &rows);
    assert_eq!((s.docs, s.valid, s.correct, s.scored), (40, 40, 40, 40));
    assert_eq!(s.not_in_source, 0);
    assert!(s.values > 0);
    // The grammar keeps its groundings and the request carries the release.
    for req in scripted.requests() {
        let g = req.constraint.grammar().expect("a contract grammar");
        assert!(g.is_grounded());
        assert!(req.source.is_some());
    }
    // Each row keeps the contract as filled and the sentence it quoted.
    let with_guidance = rows
        .iter()
        .find(|r| !r["value"].is_null())
        .expect("a row with guidance");
    assert!(with_guidance["evidence"]
        .as_str()
        .is_some_and(|e| !e.is_empty()));
    assert!(with_guidance["copied"]["quote"].is_string());
}

#[test]
fn grounded_mode_rejects_an_invented_value_and_retries() {
    let filings = generate(DEFAULT_DOCS, DEFAULT_SEED);
    let f = filings
        .iter()
        .find(|f| f.truth.is_some())
        .expect("a release with guidance");
    let doc = StudyDoc {
        id: f.id.clone(),
        text: f.text.clone(),
        truth: Some(f.truth.clone()),
    };
    let good = f.grounded_answer();
    let mut invented = good.clone();
    if let Some(low) = &mut invented.low {
        low.value = 1234567.5;
    }
    let replies = vec![
        invented.to_model_json().expect("json").to_string(),
        good.to_model_json().expect("json").to_string(),
    ];
    let (rows, scripted) = run_grounded(replies, std::slice::from_ref(&doc));
    assert_eq!(scripted.requests().len(), 2, "one retry");
    assert_eq!(rows[0]["valid"], true);
    assert_eq!(rows[0]["correct"], true);
    assert_eq!(rows[0]["attempts"], 2);
    // With the invented value only, the row is invalid and says why.
    let (rows, _) = run_grounded(
        vec![
            invented.to_model_json().expect("json").to_string(),
            invented.to_model_json().expect("json").to_string(),
        ],
        std::slice::from_ref(&doc),
    );
    assert_eq!(rows[0]["valid"], false);
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not_in_source"),
        "{}",
        rows[0]
    );
}

#[test]
fn a_contract_the_code_cannot_normalise_is_not_valid() {
    let (docs, _) = docs().into_iter().unzip::<_, _, Vec<_>, Vec<String>>();
    // A period with no quarter: the reply fills the contract, but it names no guidance the code
    // can read, so the row must not look like "no guidance".
    let vague = r#"{"period": "soon", "low": {"value": 1, "currency": "USD", "unit": "billion"},
                    "high": {"value": 2, "currency": "USD", "unit": "billion"}, "line": 3}"#;
    let (rows, _) = run(Mode::Free, vec![vague.into()], &docs[..1]);
    assert_eq!(rows[0]["valid"], false);
    assert!(rows[0]["value"].is_null());
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("soon"),
        "{}",
        rows[0]
    );
    // The values it invented are counted.
    assert!(
        rows[0]["not_in_source"].as_u64().unwrap_or(0) >= 1,
        "{}",
        rows[0]
    );
}

/// A judge that gives each passage the margin of the first of its texts the passage contains,
/// and -1 (no) to the others.
#[derive(Clone)]
struct KeywordJudge(Vec<(String, f64)>);

impl KeywordJudge {
    /// A judge sure of itself: 4 nats for a passage with `text`, -4 for one without any
    /// keyword (the library adds up to 1 nat for the words a passage shares with the question,
    /// `Selection::lexical_weight`: a judge this sure still decides).
    fn new(text: &str) -> Self {
        KeywordJudge(vec![(text.to_owned(), 4.0)])
    }
    fn then(mut self, text: &str, margin: f64) -> Self {
        self.0.push((text.to_owned(), margin));
        self
    }
    fn margin(&self, prompt: &str) -> f64 {
        // The judge's prompt is the passage, then the question: only the passage counts.
        let passage = prompt.split("\n\nQuestion:").next().unwrap_or(prompt);
        self.0
            .iter()
            .find(|(t, _)| passage.contains(t.as_str()))
            .map_or(-4.0, |(_, m)| *m)
    }
}

fn run_routed(judge: &KeywordJudge, replies: Vec<String>, doc: &StudyDoc) -> (Value, usize) {
    let (row, requests) = run_routed_requests(judge, replies, doc);
    (row, requests.len())
}

fn run_routed_requests(
    judge: &KeywordJudge,
    replies: Vec<String>,
    doc: &StudyDoc,
) -> (Value, Vec<contract_core::Request>) {
    let j = judge.clone();
    let scripted = ScriptedBackend::new(replies).with_judge(move |p| j.margin(p));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let extractor =
        study::grounded_extractor(ModeBackend::new(&scripted, Mode::Routed), Mode::Routed, 160);
    let row = study::row(
        doc,
        Mode::Routed,
        &rt.block_on(extractor.extract(&doc.text)),
    );
    (row, scripted.requests())
}

fn study_doc(f: &examples::filings::Filing) -> StudyDoc {
    StudyDoc {
        id: f.id.clone(),
        text: f.text.clone(),
        truth: Some(f.truth.clone()),
    }
}

/// The lines a request showed the model (the excerpt's non-empty lines).
fn shown(req: &contract_core::Request) -> Vec<String> {
    let source = req.source.as_ref().expect("a source");
    (1..=source.line_count())
        .filter_map(|n| source.line(n))
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn routed_mode_extracts_from_the_best_ranked_passage_and_falls_back_to_the_next() {
    let filings = generate(DEFAULT_DOCS, DEFAULT_SEED);
    let f = filings
        .iter()
        .find(|f| f.lang == "en" && f.truth.is_some())
        .expect("an English release with guidance");
    let doc = study_doc(f);
    let good = f.grounded_answer();
    let quote = good.quote.clone().expect("a guidance line");
    // The judge ranks the guidance line first: one extraction, from that line alone.
    let (row, requests) = run_routed_requests(
        &KeywordJudge::new("expects"),
        vec![good.to_model_json().expect("json").to_string()],
        &doc,
    );
    assert_eq!(requests.len(), 1);
    assert_eq!(shown(&requests[0]), std::slice::from_ref(&quote));
    assert_eq!(
        (&row["valid"], &row["correct"]),
        (&json!(true), &json!(true)),
        "{row}"
    );
    assert_eq!(row["evidence"], json!(quote));
    let group = &row["selection"]["groups"][0];
    assert_eq!(group["tries"].as_array().map(Vec::len), Some(1), "{row}");
    assert!(
        group["judged"].as_u64().is_some_and(|n| n > 3),
        "every candidate passage is judged: {row}"
    );

    // Ranked first: the line reporting the quarter's revenue. Its answer is partial (a period
    // without amounts): refused, fed back once, refused again; the next passage (the guidance)
    // is accepted.
    let results_line = f
        .text
        .lines()
        .find(|l| l.starts_with("Revenue for the"))
        .expect("a results line");
    let results = json!({"quote": results_line, "period": {"original": "the quarter"},
                         "low": null, "high": null});
    let judge = KeywordJudge::new("Revenue for the").then("expects", 2.0);
    let (row, requests) = run_routed_requests(
        &judge,
        vec![
            results.to_string(),
            results.to_string(),
            good.to_model_json().expect("json").to_string(),
        ],
        &doc,
    );
    assert_eq!(requests.len(), 3, "{row}");
    assert_eq!(shown(&requests[0]), [results_line.to_owned()]);
    assert_eq!(shown(&requests[2]), [quote]);
    assert_eq!(row["correct"], true, "{row}");
    let tries = &row["selection"]["groups"][0]["tries"];
    assert_eq!(tries.as_array().map(Vec::len), Some(2), "{row}");
}

#[test]
fn routed_mode_refuses_the_reported_quarter_and_answers_no_guidance() {
    let filings = generate(DEFAULT_DOCS, DEFAULT_SEED);
    let f = filings
        .iter()
        .find(|f| f.lang == "en" && f.truth.is_none() && f.text.contains("Revenue for the"))
        .expect("an English release without guidance");
    let doc = study_doc(f);
    let line = f
        .text
        .lines()
        .find(|l| l.starts_with("Revenue for the"))
        .expect("a results line");
    // "Revenue for the second quarter was $1.56 billion": the model copies it as guidance.
    let words: Vec<&str> = line.split_whitespace().collect();
    let period = format!("the {} quarter", words[3]);
    let amount = words
        .iter()
        .find(|w| w.starts_with('$'))
        .expect("an amount")
        .trim_start_matches('$');
    let unit = words
        .iter()
        .skip_while(|w| !w.starts_with('$'))
        .nth(1)
        .expect("a unit")
        .trim_end_matches([',', '.']);
    let value: f64 = amount.replace(',', "").parse().expect("a number");
    let reply = json!({"quote": line, "period": {"original": period},
                       "low": {"value": value, "currency": "$", "unit": unit},
                       "high": {"value": value, "currency": "$", "unit": unit}});
    let none = json!({"quote": null, "period": null, "low": null, "high": null});
    let (row, requests) = run_routed(
        &KeywordJudge::new("Revenue for the"),
        vec![reply.to_string(), none.to_string()],
        &doc,
    );
    // The contract's check refuses the reported quarter; the next passage is tried (no margin
    // floor by default) and the model finds nothing there, so the release has no guidance.
    assert_eq!(requests, 2, "{row}");
    assert_eq!(
        (&row["valid"], &row["correct"]),
        (&json!(true), &json!(true)),
        "{row}"
    );
    assert!(row["value"].is_null());
    let group = &row["selection"]["groups"][0];
    assert_eq!(group["outcome"], "filled", "{row}");
    assert_eq!(group["tries"].as_array().map(Vec::len), Some(2), "{row}");
    let copied = row["copied"].clone();
    assert!(copied["period"].is_null(), "{row}");
    assert_eq!(row["attempts"], 2, "{row}");
    assert!(row["seconds"].as_f64().is_some_and(|s| s >= 0.0));
}

/// A passage is checked with the numeral convention of its release, not of the passage alone
/// (which may not tell: `entre 550 y 600 millones`).
#[test]
fn routed_mode_reads_a_passage_with_the_release_numerals() {
    let filings = generate(DEFAULT_DOCS, DEFAULT_SEED);
    // A Spanish guidance line whose numbers group thousands with `.` only.
    let f = filings
        .iter()
        .find(|f| {
            f.lang == "es"
                && f.grounded_answer().quote.is_some_and(|q| {
                    !q.contains(',')
                        && q.as_bytes()
                            .windows(3)
                            .any(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit())
                })
        })
        .expect("a Spanish line with `.` thousands");
    let doc = study_doc(f);
    let good = f.grounded_answer();
    let quote = good.quote.clone().expect("quote");
    assert_eq!(Numerals::detect(&f.text), Numerals::Comma);
    let mut misread = good.clone();
    if let Some(low) = &mut misread.low {
        // `2.550` read as two and a half.
        low.value /= 1000.0;
    }
    let (row, requests) = run_routed_requests(
        &KeywordJudge::new(&quote),
        vec![
            misread.to_model_json().expect("json").to_string(),
            good.to_model_json().expect("json").to_string(),
        ],
        &doc,
    );
    // The misread number is not in the release: refused, fed back on the same passage.
    assert_eq!(requests.len(), 2, "{row}");
    // Each request shows the passage alone, read with the release's convention.
    for req in &requests {
        assert_eq!(shown(req), std::slice::from_ref(&quote));
        let source = req.source.as_ref().expect("a source");
        assert_eq!(source.numerals(), Numerals::Comma);
    }
    assert_eq!(row["correct"], true, "{row}");
    assert_eq!(row["attempts"], 2, "{row}");
}
