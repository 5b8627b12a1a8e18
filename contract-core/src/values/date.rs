use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::context::DocContext;
use crate::read::{read_date, DateError};
use crate::validate::{Violation, ViolationKind};
use crate::Contract;

/// A date as the document writes it; code reads the calendar date.
///
/// The model copies [`DateValue::original`], one whole date of the document (`05 MAR 2018`,
/// `19/10/2018`, `April 18, 2001`, `the 18th day of April, 2001`); grounded, it cannot copy
/// `2018` out of `05 MAR 2018`. The library computes [`DateValue::iso`] when it reads the value
/// (normalisation), with the document's conventions: day first or month first from the
/// document's own unambiguous dates, two-digit years near the document's date, month names in
/// English, Spanish and other languages. A date it cannot read for certain (`04/05/2018` in a
/// document that never tells its order) or that does not exist (`31/02/2018`) is a violation,
/// never a guess.
#[derive(Contract, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[contract(normalize = DateValue::read)]
pub struct DateValue {
    /// The date exactly as the document writes it.
    #[contract(grounded(with_container), form = date)]
    pub original: String,
    /// ISO 8601, computed by the library: `YYYY-MM-DD`, or `YYYY-MM` / `YYYY` when the
    /// document writes no more.
    #[contract(skip)]
    #[serde(default)]
    pub iso: String,
}

impl DateValue {
    /// A date as written, not yet read (`iso` is computed by [`DateValue::read`]).
    pub fn new(original: impl Into<String>) -> DateValue {
        DateValue {
            original: original.into(),
            iso: String::new(),
        }
    }

    /// Computes [`DateValue::iso`] from `original` with the document's conventions: what the
    /// extractor and `from_json` run after decoding (`#[contract(normalize = ..)]`).
    pub fn read(&mut self, cx: &DocContext<'_>) -> Result<(), Violation> {
        match read_date(&self.original, cx.conventions()) {
            Ok(d) => {
                self.iso = d.iso();
                Ok(())
            }
            Err(e) => Err(Violation::new(
                "/original",
                ViolationKind::FormatMismatch,
                date_message(&e),
            )),
        }
    }

    /// The calendar date, when [`DateValue::iso`] names a day.
    pub fn date(&self) -> Option<NaiveDate> {
        NaiveDate::parse_from_str(&self.iso, "%Y-%m-%d").ok()
    }
}

fn date_message(e: &DateError) -> String {
    match e {
        DateError::Ambiguous { .. } => format!("{e}: the document does not tell day from month"),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A contract with one grounded field of the value type, as users write them.
    #[derive(crate::Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[contract(grounded)]
        v: DateValue,
    }
    use crate::Source;

    fn read(original: &str, document: &str) -> Result<DateValue, crate::Violations> {
        let json = serde_json::json!({ "original": original }).to_string();
        DateValue::from_json_in(&json, &Source::from_text(document))
    }

    #[test]
    fn the_library_computes_the_iso_date() {
        // Day first, from the document's own unambiguous date.
        let doc = "INVOICE 19/10/2018\nPaid 05/03/2018";
        assert_eq!(read("05/03/2018", doc).unwrap().iso, "2018-03-05");
        // Month names, any case; two-digit years.
        let doc = "DATE: 05 MAR 2018 10:21";
        assert_eq!(read("05 MAR 2018", doc).unwrap().iso, "2018-03-05");
        let doc = "29-01-18 13:05";
        assert_eq!(read("29-01-18", doc).unwrap().iso, "2018-01-29");
        assert_eq!(
            read("April 18, 2001", "dated as of April 18, 2001")
                .unwrap()
                .date(),
            NaiveDate::from_ymd_opt(2001, 4, 18)
        );
    }

    #[test]
    fn fragments_ambiguity_and_impossible_dates_are_violations() {
        // Not a whole date of the document: a fragment cut out of one.
        let source = Source::from_text("DATE: 05 MAR 2018");
        let err = Holder::from_json_in(r#"{"v": {"original": "2018"}}"#, &source).unwrap_err();
        assert_eq!(err.0[0].kind, ViolationKind::NotInSource, "{err:?}");
        assert_eq!(err.0[0].path, "/v/original");
        assert!(err.0[0].message.contains("05 MAR 2018"), "{err:?}");
        let held = Holder::from_json_in(r#"{"v": {"original": "05 MAR 2018"}}"#, &source).unwrap();
        assert_eq!(held.v.iso, "2018-03-05");
        // The document never tells day from month.
        let err = read("04/05/2018", "Date 04/05/2018").unwrap_err();
        assert_eq!(err.0[0].path, "/original");
        assert_eq!(err.0[0].kind, ViolationKind::FormatMismatch);
        let err = read("31/02/2018", "19/10/2018 and 31/02/2018").unwrap_err();
        assert_eq!(err.0[0].kind, ViolationKind::FormatMismatch);
        // The model cannot write the ISO date.
        let err = DateValue::from_json(r#"{"original": "5 March 2018", "iso": "2018-05-03"}"#)
            .unwrap_err();
        assert_eq!(err.0[0].path, "/iso");
    }
}
