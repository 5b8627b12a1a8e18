//! Evidence spans: checked against the source (bounds, order, quote checksum), resolved to the
//! source's own text, in both shapes (a list of `Evidenced` items; one item with two spans on
//! different pages), and feedback routing through the pipeline.

use contract_backends::ScriptedBackend;
use contract_core::audit::{check_spans, extract_pages, resolve_spans};
use contract_core::{
    Amount, Contract, Evidenced, Extractor, Feedback, Source, Span, ViolationKind,
};
use examples::Exclusions;
use serde::{Deserialize, Serialize};
use serde_json::json;

fn span(start: u32, end: u32, quote: Option<&str>) -> Span {
    Span {
        start_line: start,
        end_line: end,
        quote: quote.map(str::to_owned),
    }
}

fn policy_text() -> &'static str {
    "Exclusions\n- war and invasion;\n- nuclear reaction or\n  radioactive contamination;\n- mould."
}

#[test]
fn a_span_is_checked_against_the_source() {
    let src = Source::from_text(policy_text());
    assert!(src
        .check_span(&span(2, 2, Some("WAR  and invasion")))
        .is_ok());
    assert!(src.check_span(&span(2, 5, None)).is_ok());
    // A quote across a line break matches the lines joined.
    assert!(src
        .check_span(&span(3, 4, Some("nuclear reaction or radioactive")))
        .is_ok());
    // A wrong line number: the quote is a checksum.
    let e = src
        .check_span(&span(3, 3, Some("war and invasion")))
        .unwrap_err();
    assert_eq!(e.kind, ViolationKind::EvidenceMismatch);
    assert_eq!(e.kind.as_str(), "evidence_mismatch");
    assert!(!e.kind.is_field_level());
    let e = src.check_span(&span(5, 6, None)).unwrap_err();
    assert_eq!(e.kind, ViolationKind::EvidenceOutOfBounds);
    assert_eq!(e.kind.as_str(), "evidence_out_of_bounds");
    assert_eq!(e.path, "/end_line");
    assert!(src.check_span(&span(0, 1, None)).is_err());
    assert!(
        src.check_span(&span(4, 3, None)).is_err(),
        "start after end"
    );
    // The snippet is the source's text, whatever the quote says.
    assert_eq!(
        src.snippet(&span(3, 4, Some("nuclear"))),
        "- nuclear reaction or\n  radioactive contamination;"
    );
}

#[test]
fn one_item_with_two_spans_on_different_pages() {
    let mut pages: Vec<String> = (1..=23)
        .map(|p| format!("Page {p} text.\nMore text."))
        .collect();
    pages[4] = "Premium summary\nThe premium is USD 7.23 billion.".into();
    pages[22] = "Schedule\nPremium: USD 7.23 bn, see page 5.".into();
    let src = Source::from_pages(&pages);
    assert_eq!(src.page_of(10), Some(5));
    assert_eq!(src.page_of(46), Some(23));
    let item = Evidenced {
        value: Amount::new(7.23, Some("USD"), Some("billion")),
        evidence: vec![
            span(10, 10, Some("7.23 billion")),
            span(46, 46, Some("USD 7.23 bn")),
        ],
    };
    let value = serde_json::to_value(&item).unwrap();
    assert!(check_spans(&src, &value).is_empty());
    let resolved = resolve_spans(&src, &value);
    assert_eq!(resolved.len(), 2);
    assert_eq!(
        (resolved[0].path.as_str(), resolved[0].pages.as_slice()),
        ("/evidence/0", &[5][..])
    );
    assert_eq!(
        (resolved[1].path.as_str(), resolved[1].pages.as_slice()),
        ("/evidence/1", &[23][..])
    );
    assert_eq!(resolved[1].snippet, "Premium: USD 7.23 bn, see page 5.");

    // The same item citing the wrong page's line.
    let mut wrong = item.clone();
    wrong.evidence[1].start_line = 45;
    wrong.evidence[1].end_line = 45;
    let v = check_spans(&src, &serde_json::to_value(&wrong).unwrap());
    assert_eq!(v.len(), 1);
    assert_eq!(v.0[0].path, "/evidence/1/quote");
    assert_eq!(v.0[0].kind, ViolationKind::EvidenceMismatch);
}

#[tokio::test(flavor = "current_thread")]
async fn a_list_of_evidenced_items_each_with_spans() {
    let src = Source::from_text(policy_text());
    let reply = r#"{"items": [
        {"value": "war and invasion", "evidence": [{"start_line": 2, "end_line": 2, "quote": "war"}]},
        {"value": "nuclear reaction or radioactive contamination",
         "evidence": [{"start_line": 3, "end_line": 4, "quote": "or radioactive"}]},
        {"value": "mould", "evidence": [{"start_line": 4, "end_line": 4, "quote": "mould"}]}]}"#;
    let backend = ScriptedBackend::new([reply]);
    let x = Extractor::<Exclusions, _>::new(&backend).max_attempts(1);
    let out = extract_pages(&x, &src, 1, 1, 3).await;
    assert_eq!(out.rounds.len(), 1, "one page, end of document: complete");
    assert!(out.complete);
    assert_eq!(out.audit.spans.len(), 3);
    assert_eq!(
        out.audit.spans[1].snippet,
        "- nuclear reaction or\n  radioactive contamination;"
    );
    // The third item cites the wrong line: the record says where, and the value is not accepted.
    assert!(!out.audit.accepted);
    assert_eq!(out.audit.evidence_violations.len(), 1);
    assert_eq!(
        out.audit.evidence_violations.0[0].path,
        "/items/2/evidence/0/quote"
    );
    assert!(!out.audit.spans[2].valid);
    assert!(out.value.is_none());
    assert!(out.json.is_some(), "the answer stays in the record");
    // The model's quote is never the evidence shown.
    let record = serde_json::to_value(&out.audit).unwrap();
    assert_eq!(record["spans"][0]["snippet"], "- war and invasion;");
}

/// A premium with feedback fields.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PremiumAnswer {
    /// The premium.
    premium: Option<Evidenced<Amount>>,
    /// Routing.
    feedback: Feedback,
}

#[tokio::test(flavor = "current_thread")]
async fn feedback_routes_the_result() {
    let src = Source::from_text("Premium: USD 1,200 per year.\nPremium: USD 1,500 per year.");
    let no_answer = json!({"premium": null, "feedback": {"answer_found": false,
        "complete_answer_found": false, "conflicting_evidence": false,
        "suggested_clarification": null}});
    let conflicting = json!({"premium": {"value": {"value": 1200, "currency": "USD", "unit": null},
        "evidence": [{"start_line": 1, "end_line": 1, "quote": "USD 1,200"}]},
        "feedback": {"answer_found": true, "complete_answer_found": true,
        "conflicting_evidence": true,
        "suggested_clarification": "Which premium applies, 1,200 or 1,500?"}});
    let backend = ScriptedBackend::new([no_answer.to_string(), conflicting.to_string()]);
    let x = Extractor::<PremiumAnswer, _>::new(&backend).max_attempts(1);

    let out = extract_pages(&x, &src, 1, 1, 1).await;
    assert!(
        out.extraction.value.is_some(),
        "the reply filled the contract"
    );
    assert!(out.value.is_none(), "but no value is accepted");
    assert!(!out.audit.accepted);
    assert!(out
        .audit
        .rejected_because
        .iter()
        .any(|r| r.contains("answer_found")));

    let out = extract_pages(&x, &src, 1, 1, 1).await;
    assert!(out.audit.accepted);
    let route = out.audit.feedback.as_ref().unwrap();
    assert!(route.conflicting_evidence);
    assert_eq!(
        route.suggested_clarification.as_deref(),
        Some("Which premium applies, 1,200 or 1,500?")
    );
    assert_eq!(route.path, "/feedback");
    assert_eq!(out.value.unwrap().premium.unwrap().value.value, 1200.0);
}
