//! The policy example: an insurance policy over four pages, its terms and exclusions extracted
//! with evidence, spans checked and resolved to the source, the exclusions' completeness decided
//! in code (the list crosses a page break, so it is re-retrieved), and a premium threshold
//! decided in code with a visible exchange rate.
//!
//! The scripted replies ([`SCRIPT`]) stand in for a model; `cargo run -p examples --bin policy`
//! prints the record, and the tests run the same pipeline end to end.

use contract_core::audit::{extract_pages, PageExtraction};
use contract_core::compute::{ComputeError, Decision, Rates, Threshold};
use contract_core::{Amount, Backend, Contract, DateValue, Evidenced, Extractor, Feedback, Source};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Exclusions;

/// The policy's pages, in order.
pub const PAGES: [&str; 4] = [
    "MERIDIAN MARINE & PROPERTY INSURANCE CO.
Commercial Property Policy
Policy number: MP-2026-00417
Insured: Kobayashi Logistics K.K., Osaka

1. Period of insurance
The policy is effective from 1 April 2026 and expires on 31 March 2027,
both days inclusive, Japan Standard Time.

2. Premium
The annual premium is JPY 2.5 billion, payable in four instalments.",
    "3. Limits
The limit of liability is JPY 800 million per claim.

4. Exclusions
The insurer does not pay for loss or damage caused by:
- war, invasion or civil war;
- nuclear reaction or radioactive contamination;
- wear and tear, gradual deterioration or",
    "corrosion;
- pollution, unless caused by a sudden accident;
- cyber attack on the insured's computer systems.

5. CLAIMS
The insured must notify the insurer within 30 days of a loss.",
    "6. SCHEDULE
Premium confirmed: JPY 2.5 billion for the period of insurance.
Signed in Osaka on 15 March 2026.",
];

/// The page where the exclusions start.
pub const EXCLUSIONS_PAGE: usize = 2;

/// The threshold decided in code.
pub const THRESHOLD: &str = "premium > 1,000,000 USD";

/// The key terms of a policy, each with the lines it came from.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyTerms {
    /// The policy number as written.
    #[contract(len = 1..=40)]
    pub policy_number: Option<String>,
    /// The annual premium (every place it is stated).
    pub premium: Option<Evidenced<Amount>>,
    /// The limit of liability per claim.
    pub limit_per_claim: Option<Evidenced<Amount>>,
    /// First day of cover.
    pub effective_date: Option<Evidenced<DateValue>>,
    /// Last day of cover.
    pub expiry_date: Option<Evidenced<DateValue>>,
    /// Whether the document answers, completely and without contradiction.
    pub feedback: Feedback,
}

/// The scripted model replies, in the order the pipeline asks: the terms (all pages), then the
/// exclusions from page 2 alone, then from pages 2 and 3. Line numbers are those of the text
/// the model was shown (numbered from 1).
pub const SCRIPT: [&str; 3] = [
    r#"{"policy_number": "MP-2026-00417",
  "premium": {"value": {"value": 2.5, "currency": "JPY", "unit": "billion"},
              "evidence": [{"start_line": 11, "end_line": 11, "quote": "JPY 2.5 billion"},
                           {"start_line": 27, "end_line": 27, "quote": "JPY 2.5 billion"}]},
  "limit_per_claim": {"value": {"value": 800, "currency": "JPY", "unit": "million"},
              "evidence": [{"start_line": 13, "end_line": 13, "quote": "JPY 800 million per claim"}]},
  "effective_date": {"value": {"original": "1 April 2026"},
              "evidence": [{"start_line": 7, "end_line": 7, "quote": "effective from 1 April 2026"}]},
  "expiry_date": {"value": {"original": "31 March 2027"},
              "evidence": [{"start_line": 7, "end_line": 7, "quote": "expires on 31 March 2027"}]},
  "feedback": {"answer_found": true, "complete_answer_found": true,
               "conflicting_evidence": false, "suggested_clarification": null}}"#,
    r#"{"items": [
  {"value": "war, invasion or civil war", "evidence": [{"start_line": 6, "end_line": 6, "quote": "war, invasion"}]},
  {"value": "nuclear reaction or radioactive contamination", "evidence": [{"start_line": 7, "end_line": 7, "quote": "nuclear reaction"}]},
  {"value": "wear and tear, gradual deterioration", "evidence": [{"start_line": 8, "end_line": 8, "quote": "wear and tear"}]}]}"#,
    r#"{"items": [
  {"value": "war, invasion or civil war", "evidence": [{"start_line": 6, "end_line": 6, "quote": "war, invasion"}]},
  {"value": "nuclear reaction or radioactive contamination", "evidence": [{"start_line": 7, "end_line": 7, "quote": "nuclear reaction"}]},
  {"value": "wear and tear, gradual deterioration or corrosion", "evidence": [{"start_line": 8, "end_line": 9, "quote": "gradual deterioration or corrosion"}]},
  {"value": "pollution, unless caused by a sudden accident", "evidence": [{"start_line": 10, "end_line": 10, "quote": "pollution"}]},
  {"value": "cyber attack on the insured's computer systems", "evidence": [{"start_line": 11, "end_line": 11, "quote": "cyber attack"}]}]}"#,
];

/// An illustrative rate table (not market data).
pub fn example_rates() -> Rates {
    Rates {
        base: "USD".into(),
        date: "2026-11-02".into(),
        source: "illustrative table (not market data)".into(),
        rates: [("JPY".to_owned(), 0.0067), ("EUR".to_owned(), 1.08)].into(),
    }
}

/// The threshold decision, or why it could not be made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// The rule, as written.
    pub rule: String,
    /// The decision.
    pub decision: Option<Decision>,
    /// Why there is no decision.
    pub error: Option<String>,
}

/// The whole record of the example.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyRecord {
    /// Pages in the document.
    pub pages: usize,
    /// Lines in the document.
    pub lines: usize,
    /// The terms, from every page.
    pub terms: PageExtraction<PolicyTerms>,
    /// The exclusions, from the page they start on, re-retrieved while truncated.
    pub exclusions: PageExtraction<Exclusions>,
    /// The rates the threshold used.
    pub rates: Rates,
    /// The threshold decided in code.
    pub threshold: ThresholdResult,
}

/// The policy as a [`Source`].
pub fn source() -> Source {
    Source::from_pages(&PAGES)
}

/// Runs the pipeline with `backend` (3 model calls with the scripted replies).
pub async fn run<B: Backend + Sync>(backend: B, rates: Rates) -> PolicyRecord {
    let src = source();
    let terms_x = Extractor::<PolicyTerms, _>::new(&backend).max_attempts(2);
    let terms = extract_pages(&terms_x, &src, 1, src.page_count(), 1).await;
    let excl_x = Extractor::<Exclusions, _>::new(&backend).max_attempts(2);
    let exclusions = extract_pages(&excl_x, &src, EXCLUSIONS_PAGE, EXCLUSIONS_PAGE, 3).await;
    let threshold = decide_terms(terms.json.as_ref(), terms.audit.accepted, &rates);
    PolicyRecord {
        pages: src.page_count(),
        lines: src.line_count(),
        terms,
        exclusions,
        rates,
        threshold,
    }
}

fn decide_terms(json: Option<&Value>, accepted: bool, rates: &Rates) -> ThresholdResult {
    let result: Result<Decision, String> = (|| {
        let threshold = Threshold::parse(THRESHOLD).map_err(|e| e.to_string())?;
        let json = json
            .filter(|_| accepted)
            .ok_or("the terms were not accepted")?;
        threshold
            .decide_json(json, rates)
            .map_err(|e: ComputeError| e.to_string())
    })();
    ThresholdResult {
        rule: THRESHOLD.to_owned(),
        error: result.as_ref().err().cloned(),
        decision: result.ok(),
    }
}

/// Recomputes the threshold from a stored record (the JSON [`run`] produced) with new rates.
/// No model is called.
pub fn recompute(stored: &Value, rates: &Rates) -> ThresholdResult {
    let accepted = stored
        .pointer("/terms/audit/accepted")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    decide_terms(stored.pointer("/terms/json"), accepted, rates)
}
