use serde::{Deserialize, Serialize};

use crate::context::DocContext;
use crate::read::{read_duration, DurationUnit};
use crate::validate::{Violation, ViolationKind};
use crate::Contract;

/// A length of time as the document writes it; code reads its count and unit.
///
/// The model copies [`DurationValue::original`], one whole duration of the document (`three (3)
/// years`, `twelve months`, `a period of two years`, `30 days`); grounded, it cannot copy `3`
/// out of `three (3) years`. The library computes [`DurationValue::count`],
/// [`DurationValue::unit`] and [`DurationValue::normalized`] (`3 years`) when it reads the value
/// (normalisation). A count written in words and digits that disagree (`two (3) years`) is a
/// violation, never a guess.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(normalize = DurationValue::read)]
pub struct DurationValue {
    /// The length of time exactly as the document writes it.
    #[contract(grounded(with_container), form = duration)]
    pub original: String,
    /// How many units (computed).
    #[contract(skip)]
    #[serde(default)]
    pub count: Option<f64>,
    /// The unit (computed).
    #[contract(skip)]
    #[serde(default)]
    pub unit: Option<DurationUnit>,
    /// The count and unit written plainly, `3 years` or `12 months` (computed).
    #[contract(skip)]
    #[serde(default)]
    pub normalized: Option<String>,
}

impl DurationValue {
    /// A duration as written, not yet read.
    pub fn new(original: impl Into<String>) -> DurationValue {
        DurationValue {
            original: original.into(),
            count: None,
            unit: None,
            normalized: None,
        }
    }

    /// Computes the count and unit from `original`: what the extractor and `from_json` run
    /// after decoding (`#[contract(normalize = ..)]`).
    pub fn read(&mut self, _: &DocContext<'_>) -> Result<(), Violation> {
        let read = read_duration(&self.original).map_err(|e| {
            Violation::new("/original", ViolationKind::FormatMismatch, e.to_string())
        })?;
        self.count = read.count().to_json_literal().parse().ok();
        self.unit = Some(read.unit());
        self.normalized = Some(read.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A contract with one grounded field of the value type, as users write them.
    #[derive(crate::Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[contract(grounded)]
        v: DurationValue,
    }

    #[test]
    fn durations_are_read() {
        let source =
            crate::Source::from_text("This Agreement remains in force for three (3) years.");
        let d = DurationValue::from_json_in(r#"{"original": "three (3) years"}"#, &source).unwrap();
        assert_eq!(d.count, Some(3.0));
        assert_eq!(d.unit, Some(DurationUnit::Years));
        assert_eq!(d.normalized.as_deref(), Some("3 years"));
        // A fragment of the duration is not one the document writes.
        let err = Holder::from_json_in(r#"{"v": {"original": "3"}}"#, &source).unwrap_err();
        assert!(
            err.iter()
                .any(|v| v.kind == ViolationKind::NotInSource
                    && v.message.contains("three (3) years")),
            "{err:?}"
        );
        let held =
            Holder::from_json_in(r#"{"v": {"original": "three (3) years"}}"#, &source).unwrap();
        assert_eq!(held.v.normalized.as_deref(), Some("3 years"));
        let err = DurationValue::from_json(r#"{"original": "two (3) years"}"#).unwrap_err();
        assert_eq!(err.0[0].path, "/original");
    }
}
