//! The policy example end to end with the scripted backend: evidence resolved, the exclusions
//! re-retrieved across the page break, the threshold decided in code, and recomputed from the
//! stored record with new rates without a model call.

use contract_backends::ScriptedBackend;
use contract_core::compute::Rates;
use examples::policy::{example_rates, recompute, run, source, SCRIPT};

#[tokio::test(flavor = "current_thread")]
async fn the_policy_end_to_end() {
    let backend = ScriptedBackend::new(SCRIPT);
    let record = run(&backend, example_rates()).await;
    assert_eq!(
        backend.requests().len(),
        3,
        "terms, exclusions, exclusions again"
    );
    assert_eq!((record.pages, record.lines), (4, 28));

    // Terms: every span checks; the premium is one item with two spans on pages 1 and 4.
    let terms = &record.terms;
    assert!(terms.audit.accepted, "{:?}", terms.audit);
    assert!(terms.complete);
    let premium = terms
        .audit
        .spans
        .iter()
        .filter(|s| s.path.starts_with("/premium/"))
        .collect::<Vec<_>>();
    assert_eq!(premium.len(), 2);
    assert_eq!(premium[0].pages, [1]);
    assert_eq!(premium[1].pages, [4]);
    assert_eq!(
        premium[1].snippet,
        "Premium confirmed: JPY 2.5 billion for the period of insurance."
    );
    let value = terms.value.as_ref().expect("accepted");
    assert_eq!(
        value
            .limit_per_claim
            .as_ref()
            .unwrap()
            .value
            .unit
            .as_deref(),
        Some("million"),
        "the unit is the scale word as written (`per claim` is not a scale)"
    );
    assert_eq!(
        value.effective_date.as_ref().unwrap().value.iso,
        "2026-04-01"
    );

    // Exclusions: page 2 alone was truncated (page 3 opens mid-sentence), so page 3 was added.
    let ex = &record.exclusions;
    assert_eq!(ex.rounds.len(), 2);
    assert!(ex.rounds[0].completeness.is_truncated());
    assert_eq!(
        ex.rounds[0].next_page_head.lines().next(),
        Some("corrosion;")
    );
    assert_eq!(ex.rounds[0].decision, "re-retrieve with page 3");
    assert!(!ex.rounds[1].completeness.is_truncated());
    assert!(ex.complete && ex.audit.accepted, "{:?}", ex.audit);
    assert_eq!(ex.line_offset, 11, "the model saw page 2 numbered from 1");
    let items = &ex.value.as_ref().unwrap().items;
    assert_eq!(items.len(), 5);
    // The item that crosses the page break: one span over lines 19-20, pages 2 and 3.
    assert_eq!(
        (
            items[2].evidence[0].start_line,
            items[2].evidence[0].end_line
        ),
        (19, 20)
    );
    let crossing = &ex.audit.spans[2];
    assert_eq!(crossing.pages, [2, 3]);
    assert_eq!(
        crossing.snippet,
        "- wear and tear, gradual deterioration or\ncorrosion;"
    );
    let first_round = &backend.requests()[1];
    let seen: String = first_round
        .messages
        .0
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        !seen.contains("corrosion"),
        "the model never sees the next page's head"
    );

    // The threshold, in code, with a visible rate.
    let decision = record.threshold.decision.as_ref().expect("decided");
    assert!(decision.outcome);
    let rate = decision.rate_used.as_ref().unwrap();
    assert_eq!(
        (rate.from.as_str(), rate.to.as_str(), rate.rate),
        ("JPY", "USD", 0.0067)
    );
    assert!((decision.inputs.converted - 16_750_000.0).abs() < 1e-3);
    assert!(
        decision.formula.contains("2500000000 JPY × 0.0067 USD/JPY"),
        "{}",
        decision.formula
    );

    // The record is JSON; a source snippet is in it, and the threshold recomputes from it.
    let stored: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
    assert_eq!(
        stored["exclusions"]["rounds"][0]["completeness"]["outcome"],
        "truncated"
    );
    let again = recompute(&stored, &example_rates());
    assert_eq!(again.decision.as_ref(), Some(decision));

    let cheaper_yen = Rates {
        date: "2026-12-01".into(),
        rates: [("JPY".to_owned(), 0.0003)].into(),
        ..example_rates()
    };
    let new = recompute(&stored, &cheaper_yen);
    let new = new.decision.expect("decided");
    assert!(!new.outcome, "750,000 USD is not above 1,000,000 USD");
    assert_eq!(new.rate_used.unwrap().date, "2026-12-01");
    assert_eq!(backend.requests().len(), 3, "recomputing calls no model");
    assert_eq!(backend.remaining(), 0);
}

#[test]
fn the_source_has_the_pages() {
    let src = source();
    assert_eq!(src.page_count(), 4);
    assert_eq!(src.page_of(20), Some(3));
    assert_eq!(src.line(20), Some("corrosion;"));
}
