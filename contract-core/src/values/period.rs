use serde::{Deserialize, Serialize};

use crate::context::DocContext;
use crate::read::{read_period, PeriodKind, PeriodRead};
use crate::validate::{Violation, ViolationKind};
use crate::Contract;

/// A reporting period as the document writes it; code reads which quarter, half, month or
/// year it is.
///
/// The model copies [`Period::original`], one whole period of the document (`third quarter of
/// 2024`, `Q3 FY2025`, `the upcoming quarter`, `el próximo trimestre`, `fiscal 2025`). The
/// library computes the rest when it reads the value (normalisation): a relative period or one
/// without its year is placed against the period the document reports on (the first period it
/// names with its year, [`DocContext::conventions`]) or its date. A period it cannot place is a
/// violation, never a guess.
#[derive(Contract, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[contract(normalize = Period::read)]
pub struct Period {
    /// The period exactly as the document writes it.
    #[contract(grounded(with_container), form = period)]
    pub original: String,
    /// The quarter, 1-4, when the period is one (computed).
    #[contract(skip)]
    #[serde(default)]
    pub quarter: Option<u8>,
    /// The half, 1-2, when the period is one (computed).
    #[contract(skip)]
    #[serde(default)]
    pub half: Option<u8>,
    /// The month, 1-12, when the period is one (computed).
    #[contract(skip)]
    #[serde(default)]
    pub month: Option<u8>,
    /// The year (a fiscal period's fiscal year as the document numbers it; computed).
    #[contract(skip)]
    #[serde(default)]
    pub year: Option<i32>,
    /// Whether the document calls it fiscal (computed).
    #[contract(skip)]
    #[serde(default)]
    pub fiscal: bool,
}

impl Period {
    /// A period as written, not yet read.
    pub fn new(original: impl Into<String>) -> Period {
        Period {
            original: original.into(),
            quarter: None,
            half: None,
            month: None,
            year: None,
            fiscal: false,
        }
    }

    /// Computes the period from `original` with the document's conventions: what the
    /// extractor and `from_json` run after decoding (`#[contract(normalize = ..)]`).
    pub fn read(&mut self, cx: &DocContext<'_>) -> Result<(), Violation> {
        let read = read_period(&self.original, cx.conventions()).map_err(|e| {
            Violation::new("/original", ViolationKind::FormatMismatch, e.to_string())
        })?;
        self.set(read);
        Ok(())
    }

    fn set(&mut self, read: PeriodRead) {
        self.quarter = None;
        self.half = None;
        self.month = None;
        match read.kind() {
            PeriodKind::Quarter(q) => self.quarter = Some(q),
            PeriodKind::Half(h) => self.half = Some(h),
            PeriodKind::Month(m) => self.month = Some(m),
            PeriodKind::Year => {}
        }
        self.year = Some(read.year());
        self.fiscal = read.fiscal();
    }

    /// The period as the library read it (`None` before it was read).
    pub fn resolved(&self) -> Option<PeriodRead> {
        let kind = match (self.quarter, self.half, self.month) {
            (Some(q), _, _) => PeriodKind::Quarter(q),
            (_, Some(h), _) => PeriodKind::Half(h),
            (_, _, Some(m)) => PeriodKind::Month(m),
            _ => PeriodKind::Year,
        };
        PeriodRead::new(kind, self.year?, self.fiscal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;

    fn read(original: &str, document: &str) -> Result<Period, crate::Violations> {
        let json = serde_json::json!({ "original": original }).to_string();
        Period::from_json_in(&json, &Source::from_text(document))
    }

    #[test]
    fn periods_are_read_and_placed() {
        let doc = "Acme Reports Third Quarter 2024 Results\nFor the fourth quarter of 2024, Acme expects revenue of $5 million.";
        let p = read("fourth quarter of 2024", doc).unwrap();
        assert_eq!((p.quarter, p.year), (Some(4), Some(2024)));
        let doc = "Acme Reports Third Quarter 2024 Results\nFor the upcoming quarter, Acme expects revenue of $5 million.";
        let p = read("the upcoming quarter", doc).unwrap();
        assert_eq!((p.quarter, p.year), (Some(4), Some(2024)));
        let doc = "Resultados del tercer trimestre de 2024\nPara el próximo trimestre, la compañía prevé ingresos.";
        let p = read("el próximo trimestre", doc).unwrap();
        assert_eq!((p.quarter, p.year), (Some(4), Some(2024)));
        assert_eq!(
            p.resolved().map(|r| r.to_string()).as_deref(),
            Some("Q4 2024")
        );
    }

    #[test]
    fn an_unplaceable_period_is_a_violation() {
        let err = read(
            "the upcoming quarter",
            "For the upcoming quarter, revenue of $5 million.",
        )
        .unwrap_err();
        assert_eq!(err.0[0].path, "/original");
    }
}
