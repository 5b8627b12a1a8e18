use serde::{Deserialize, Serialize};

use crate::source::{normalize, Source};
use crate::validate::{Violation, ViolationKind};
use crate::Contract;

/// Where a value was found: a range of 1-based source lines, plus an optional quote.
///
/// The quote is only a checksum: it must be a substring of the cited lines (which catches a
/// wrong line number); the text shown as evidence is always taken from the source itself.
#[derive(Contract, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[contract(rule = "start_line <= end_line")]
pub struct Span {
    /// First cited line (1-based).
    #[contract(min = 1)]
    pub start_line: u32,
    /// Last cited line (1-based, inclusive).
    #[contract(min = 1)]
    pub end_line: u32,
    /// A short quote from the cited lines, or null.
    #[contract(grounded(in = start_line..=end_line))]
    pub quote: Option<String>,
}

/// A value with the lines it came from. One answer whose evidence sits in two places is one
/// `Evidenced` with two spans; a list answer is a `Vec<Evidenced<T>>`.
///
/// The evidence comes first and the value is grounded in it: a string or number value (or the
/// grounded parts of a contract value, such as an [`Amount`](crate::Amount)'s number) must lie
/// in the cited lines.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidenced<T> {
    /// The source lines that support it.
    #[contract(len = 1..)]
    pub evidence: Vec<Span>,
    /// The value, copied from the cited lines.
    #[contract(grounded(in = evidence))]
    pub value: T,
}

/// Feedback fields that route the pipeline.
#[derive(Contract, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    /// Whether the document contains an answer at all.
    pub answer_found: bool,
    /// Whether the answer is complete in the text given.
    pub complete_answer_found: bool,
    /// Whether parts of the document disagree.
    pub conflicting_evidence: bool,
    /// A question for the user when the document is ambiguous, or null.
    pub suggested_clarification: Option<String>,
}

/// What a [`Span`] is in its document: kept beside the span, so that the document
/// ([`crate::source`]) does not depend on the value types.
impl Source {
    /// Checks a span against the document: its lines exist (`evidence_out_of_bounds`), start is
    /// not after end (`cross_field`), and its quote, after normalising whitespace and case, is a
    /// substring of the cited lines joined (`evidence_mismatch`, at `/quote`). A quote may
    /// span a line break.
    ///
    /// The violation's path is relative to the span; prefix it with the span's pointer.
    pub fn check_span(&self, span: &Span) -> Result<(), Violation> {
        let (start, end) = (span.start_line as usize, span.end_line as usize);
        let n = self.line_count();
        for (name, line) in [("start_line", start), ("end_line", end)] {
            if line == 0 || line > n {
                return Err(Violation::new(
                    format!("/{name}"),
                    ViolationKind::EvidenceOutOfBounds,
                    format!("`{name}` {line} is outside the document (lines 1 to {n})"),
                ));
            }
        }
        if start > end {
            return Err(Violation::cross_field(
                "",
                format!("`start_line` {start} is after `end_line` {end}"),
            ));
        }
        if let Some(quote) = &span.quote {
            let quote = normalize(quote);
            if !quote.is_empty() && !normalize(&self.text_of_lines(start..end + 1)).contains(&quote)
            {
                return Err(Violation::new(
                    "/quote",
                    ViolationKind::EvidenceMismatch,
                    format!("`quote` is not in lines {start} to {end}: check the line numbers"),
                ));
            }
        }
        Ok(())
    }

    /// The cited lines, from the source itself (lines outside the document are left out).
    pub fn snippet(&self, span: &Span) -> String {
        self.text_of_cited(span.start_line.into(), span.end_line.into())
    }

    /// The pages (1-based) a span's lines fall on, in order, without repeats.
    pub fn pages_of_span(&self, span: &Span) -> Vec<usize> {
        let mut pages = Vec::new();
        let start = (span.start_line as usize).max(1);
        let end = (span.end_line as usize).min(self.line_count());
        for line in start..=end {
            if let Some(p) = self.page_of(line) {
                if pages.last() != Some(&p) {
                    pages.push(p);
                }
            }
        }
        pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Amount;
    use crate::ViolationKind;

    #[test]
    fn span_order_is_a_rule() {
        let err =
            Span::from_json(r#"{"start_line": 9, "end_line": 3, "quote": null}"#).unwrap_err();
        assert_eq!(err.0[0].kind, ViolationKind::CrossField);
        let err =
            Span::from_json(r#"{"start_line": 0, "end_line": 3, "quote": null}"#).unwrap_err();
        assert_eq!(err.0[0].kind, ViolationKind::OutOfRange);
    }

    #[test]
    fn evidenced_amount_nests() {
        let text = r#"{"value": {"value": 7.23, "currency": "USD", "unit": "billion"},
                       "evidence": [{"start_line": 5, "end_line": 5, "quote": "7.23 billion"},
                                    {"start_line": 23, "end_line": 24, "quote": null}]}"#;
        let e = Evidenced::<Amount>::from_json(text).unwrap();
        assert_eq!(e.evidence.len(), 2);
        let bad = r#"{"value": {"value": 7.23, "currency": "usd", "unit": 5}, "evidence": []}"#;
        let err = Evidenced::<Amount>::from_json(bad).unwrap_err();
        let paths: Vec<&str> = err.iter().map(|v| v.path.as_str()).collect();
        assert_eq!(paths, ["/value/unit", "/evidence"]);
        // A nested value is read as well: an unknown currency at its path.
        let unknown = r#"{"value": {"value": 7.23, "currency": "usd?!", "unit": null},
                          "evidence": [{"start_line": 1, "end_line": 1, "quote": null}]}"#;
        let err = Evidenced::<Amount>::from_json(unknown).unwrap_err();
        assert_eq!(err.0[0].path, "/value/currency", "{err:?}");
    }
}
