//! The audit of a filled value, evidence and routing in the pipeline: every span in a contract
//! value is checked against the [`Source`] and resolved to the source's own text, [`Feedback`]
//! fields route the result, and a list that may continue past a page is re-retrieved until its
//! completeness, decided in code, says it ended.
//!
//! Spans are found by walking the value's JSON: any object with integer `start_line` and
//! `end_line` (and at most a `quote` besides) is a [`Span`]; its path is a JSON pointer. So any
//! contract, with `Evidenced<T>` fields, lists of them or bare `Vec<Span>`, is covered.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::Contract;
use crate::extract::{Backend, Extraction, Extractor};
use crate::source::{as_citation, citations, completeness_after, Completeness, Source};
use crate::validate::{join_pointer, Violations};
use crate::values::{Feedback, Span};

/// A span found in a value, resolved to the source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedSpan {
    /// JSON pointer of the span in the value (`/items/2/evidence/0`).
    pub path: String,
    /// First cited line (1-based, in the whole document).
    pub start_line: u32,
    /// Last cited line.
    pub end_line: u32,
    /// The pages the lines fall on.
    pub pages: Vec<usize>,
    /// The cited lines, taken from the source (never the model's quote).
    pub snippet: String,
    /// Whether the span passed [`Source::check_span`].
    pub valid: bool,
}

/// Every span in `value` with its JSON pointer, in document order.
pub fn find_spans(value: &Value) -> Vec<(String, Span)> {
    citations(value)
        .into_iter()
        .map(|(path, start_line, end_line, quote)| {
            let span = Span {
                start_line,
                end_line,
                quote: quote.map(str::to_owned),
            };
            (path, span)
        })
        .collect()
}

/// Checks every span in `value` against `source`; violation paths are JSON pointers into
/// `value` (`/premium/evidence/0/quote`).
pub fn check_spans(source: &Source, value: &Value) -> Violations {
    let mut violations = Violations::new();
    for (path, span) in find_spans(value) {
        if let Err(v) = source.check_span(&span) {
            violations.push(v.prefixed(&path));
        }
    }
    violations
}

/// Every span in `value`, checked and resolved to the source's own text.
pub fn resolve_spans(source: &Source, value: &Value) -> Vec<ResolvedSpan> {
    checked_spans(source, value).0
}

/// Every span in `value`, resolved, and what they broke ([`resolve_spans`] and
/// [`check_spans`] in one walk, each span checked once).
fn checked_spans(source: &Source, value: &Value) -> (Vec<ResolvedSpan>, Violations) {
    let mut violations = Violations::new();
    let spans = find_spans(value)
        .into_iter()
        .map(|(path, span)| {
            let checked = source.check_span(&span);
            let valid = checked.is_ok();
            if let Err(v) = checked {
                violations.push(v.prefixed(&path));
            }
            ResolvedSpan {
                valid,
                pages: source.pages_of_span(&span),
                snippet: source.snippet(&span),
                start_line: span.start_line,
                end_line: span.end_line,
                path,
            }
        })
        .collect();
    (spans, violations)
}

/// Adds `offset` to every span's lines in `value` (model answers about an excerpt that starts
/// at line `offset + 1` of the document become answers about the document).
pub fn shift_spans(value: &mut Value, offset: u32) {
    if offset == 0 {
        return;
    }
    match value {
        Value::Object(map) => {
            if as_citation(map).is_some() {
                for key in ["start_line", "end_line"] {
                    if let Some(n) = map.get(key).and_then(Value::as_u64) {
                        map.insert(key.into(), Value::from(n.saturating_add(offset as u64)));
                    }
                }
                return;
            }
            map.values_mut().for_each(|v| shift_spans(v, offset));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| shift_spans(v, offset)),
        _ => {}
    }
}

/// What the `Feedback` fields of an answer say the pipeline should do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedbackRoute {
    /// JSON pointer of the feedback object.
    pub path: String,
    /// The feedback as given.
    pub feedback: Feedback,
    /// False when the model found no answer: no value is accepted.
    pub accept: bool,
    /// Whether the record is flagged for conflicting evidence.
    pub conflicting_evidence: bool,
    /// A question to pass on to the user.
    pub suggested_clarification: Option<String>,
}

/// Finds the first [`Feedback`] in `value` (a field named `feedback`, else any object with the
/// four feedback keys) and routes on it.
pub fn route_feedback(value: &Value) -> Option<FeedbackRoute> {
    let (path, feedback) = value
        .get("feedback")
        .and_then(|f| serde_json::from_value::<Feedback>(f.clone()).ok())
        .map(|f| ("/feedback".to_owned(), f))
        .or_else(|| find_feedback(value, ""))?;
    Some(FeedbackRoute {
        path,
        accept: feedback.answer_found,
        conflicting_evidence: feedback.conflicting_evidence,
        suggested_clarification: feedback
            .suggested_clarification
            .clone()
            .filter(|s| !s.trim().is_empty()),
        feedback,
    })
}

fn find_feedback(value: &Value, path: &str) -> Option<(String, Feedback)> {
    match value {
        Value::Object(map) => {
            if map.contains_key("answer_found") && map.contains_key("conflicting_evidence") {
                if let Ok(f) = serde_json::from_value::<Feedback>(value.clone()) {
                    return Some((path.to_owned(), f));
                }
            }
            map.iter()
                .find_map(|(k, v)| find_feedback(v, &join_pointer(path, k)))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_feedback(v, &join_pointer(path, &i.to_string()))),
        _ => None,
    }
}

/// The evidence part of an extraction record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    /// Whether the value is accepted: it filled the contract, every span checks, and the
    /// feedback (if any) says an answer was found.
    pub accepted: bool,
    /// Why it was not accepted, in words.
    pub rejected_because: Vec<String>,
    /// Every span, resolved to the source.
    pub spans: Vec<ResolvedSpan>,
    /// What the spans broke.
    pub evidence_violations: Violations,
    /// The feedback route, when the contract has feedback fields.
    pub feedback: Option<FeedbackRoute>,
}

/// Audits a contract value (as JSON, spans in document lines) against `source`. `filled` says
/// whether the value filled the contract.
pub fn audit(source: &Source, value: Option<&Value>, filled: bool) -> Audit {
    let Some(value) = value else {
        return Audit {
            accepted: false,
            rejected_because: vec!["no answer could be read".into()],
            spans: Vec::new(),
            evidence_violations: Violations::new(),
            feedback: None,
        };
    };
    let (spans, evidence_violations) = checked_spans(source, value);
    let feedback = route_feedback(value);
    let mut rejected_because = Vec::new();
    if !filled {
        rejected_because.push("the answer did not fill the contract".to_owned());
    }
    if !evidence_violations.is_empty() {
        rejected_because.push(format!(
            "{} evidence span(s) do not check against the source",
            evidence_violations.len()
        ));
    }
    if feedback.as_ref().is_some_and(|f| !f.accept) {
        rejected_because.push("the model found no answer (`answer_found` is false)".to_owned());
    }
    Audit {
        accepted: rejected_because.is_empty(),
        rejected_because,
        spans,
        evidence_violations,
        feedback,
    }
}

/// One retrieval round of [`extract_pages`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    /// First page given to the model (1-based).
    pub first_page: usize,
    /// Last page given to the model.
    pub last_page: usize,
    /// The first lines of the next page, which the model did not see (empty at the end).
    pub next_page_head: String,
    /// The completeness decided from them.
    pub completeness: Completeness,
    /// What the pipeline did: `accept`, `re-retrieve with page N`, or `stop: ...`.
    pub decision: String,
}

/// The record of a page-range extraction with evidence and completeness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageExtraction<C> {
    /// The accepted value (spans in document lines), or `None`: see `audit.rejected_because`.
    pub value: Option<C>,
    /// The value as JSON, spans in document lines.
    pub json: Option<Value>,
    /// Every round: pages seen, completeness and decision.
    pub rounds: Vec<Round>,
    /// Whether the final answer is complete by the pipeline's rules.
    pub complete: bool,
    /// The line of the document where the model's text began, minus one (added to its spans).
    pub line_offset: u32,
    /// Spans, feedback and acceptance.
    pub audit: Audit,
    /// The last extraction, as the extractor recorded it (spans as the model wrote them).
    pub extraction: Extraction<C>,
}

/// Extracts `C` from pages `first..=last` of `source`, then decides in code whether the answer
/// (a list that may continue) is complete from the first `head_lines` lines of the next page,
/// which the model does not see. When it is truncated, the next page is added and `C` is
/// extracted again, for at most `max_rounds` rounds in all. Every span is checked and resolved,
/// and the feedback fields route the result.
///
/// The model sees the pages numbered from 1; its spans are shifted to document lines.
pub async fn extract_pages<C: Contract, B: Backend>(
    extractor: &Extractor<C, B>,
    source: &Source,
    first: usize,
    last: usize,
    max_rounds: usize,
) -> PageExtraction<C> {
    const HEAD_LINES: usize = 3;
    let max_rounds = max_rounds.max(1);
    let mut last = last.max(first);
    let mut rounds = Vec::new();
    loop {
        let (text, first_line) = source.pages_text(first, last);
        let extraction = extractor.extract(&text).await;
        let next = last + 1;
        let head = source.page_head(next, HEAD_LINES);
        let completeness = completeness_after(source.page_tail(last), &head);
        let more_pages = next <= source.page_count();
        let truncated = completeness.is_truncated();
        let decision = if !truncated {
            "accept: complete".to_owned()
        } else if !more_pages {
            "stop: no further page".to_owned()
        } else if rounds.len() + 1 >= max_rounds {
            format!("stop: {max_rounds} round(s) done, the list may continue on page {next}")
        } else {
            format!("re-retrieve with page {next}")
        };
        let again = truncated && more_pages && rounds.len() + 1 < max_rounds;
        rounds.push(Round {
            first_page: first,
            last_page: last,
            next_page_head: head,
            completeness,
            decision,
        });
        if again {
            last = next;
            continue;
        }
        let offset = u32::try_from(first_line.saturating_sub(1)).unwrap_or(u32::MAX);
        let filled = extraction.value.is_some();
        let json = extraction.json.clone().map(|mut j| {
            shift_spans(&mut j, offset);
            j
        });
        let audit = audit(source, json.as_ref(), filled);
        let complete = !truncated;
        let value = if audit.accepted {
            json.as_ref().and_then(|j| C::from_value(j).ok())
        } else {
            None
        };
        return PageExtraction {
            value,
            json,
            rounds,
            complete,
            line_offset: offset,
            audit,
            extraction,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spans_found_shifted_and_checked() {
        let src = Source::from_pages(&["a\nwar", "flood\nb"]);
        let mut v = json!({"items": [
            {"value": "War", "evidence": [{"start_line": 1, "end_line": 1, "quote": "war"}]},
            {"value": "Flood", "evidence": [{"start_line": 2, "end_line": 2, "quote": null}]}]});
        assert_eq!(find_spans(&v).len(), 2);
        shift_spans(&mut v, 1);
        assert!(check_spans(&src, &v).is_empty());
        let r = resolve_spans(&src, &v);
        assert_eq!(r[1].path, "/items/1/evidence/0");
        assert_eq!(
            (r[1].snippet.as_str(), r[1].pages.as_slice()),
            ("flood", &[2][..])
        );
        shift_spans(&mut v, 2);
        let bad = check_spans(&src, &v);
        assert_eq!(bad.0[0].path, "/items/0/evidence/0/quote");
        assert_eq!(bad.0[1].path, "/items/1/evidence/0/start_line");
        // The audit's one walk gives the same spans and violations as the two functions.
        let a = audit(&src, Some(&v), true);
        assert_eq!(a.evidence_violations, bad);
        assert_eq!(a.spans, resolve_spans(&src, &v));
        assert!(a.spans.iter().all(|s| !s.valid));
        assert!(!a.accepted);
    }

    #[test]
    fn feedback_routes() {
        let v = json!({"x": null, "feedback": {"answer_found": false, "complete_answer_found": false,
            "conflicting_evidence": true, "suggested_clarification": "Which policy year?"}});
        let r = route_feedback(&v).unwrap();
        assert!(!r.accept && r.conflicting_evidence);
        assert_eq!(
            r.suggested_clarification.as_deref(),
            Some("Which policy year?")
        );
        let a = audit(&Source::from_text("x"), Some(&v), true);
        assert!(!a.accepted);
        let nested = json!({"meta": [{"answer_found": true, "complete_answer_found": true,
            "conflicting_evidence": false, "suggested_clarification": null}]});
        assert_eq!(route_feedback(&nested).unwrap().path, "/meta/0");
        assert!(route_feedback(&json!({"a": 1})).is_none());
    }
}
