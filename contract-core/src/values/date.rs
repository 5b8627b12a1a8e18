use serde::{Deserialize, Serialize};

use crate::validate::{Violation, ViolationKind};
use crate::Contract;

/// A date as the document writes it, plus its ISO form.
///
/// `iso` is a real calendar date (`2024-03-15`); `YYYY-MM` and `YYYY` are allowed when the
/// document is that coarse. `original` is the text as written (`15 March 2024`).
#[derive(Contract, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[contract(check = DateValue::check_calendar)]
pub struct DateValue {
    /// ISO 8601: `YYYY-MM-DD`, or `YYYY-MM` / `YYYY` when the document gives no more.
    #[contract(pattern = r"^\d{4}(-\d{2}(-\d{2})?)?$")]
    pub iso: String,
    /// The date exactly as written in the document.
    #[contract(grounded(with_container))]
    pub original: String,
}

impl DateValue {
    /// Checks that `iso` names a real month and day (no `2024-02-30`).
    pub fn check_calendar(&self) -> Result<(), Violation> {
        let bad = |why: &str| {
            Err(Violation::new(
                "/iso",
                ViolationKind::FormatMismatch,
                format!("`iso` `{}` {why}", self.iso),
            ))
        };
        let parts: Vec<&str> = self.iso.split('-').collect();
        let nums: Vec<u32> = parts.iter().filter_map(|p| p.parse().ok()).collect();
        if nums.len() != parts.len() {
            return bad("is not YYYY-MM-DD, YYYY-MM or YYYY");
        }
        match nums.as_slice() {
            [_year] => Ok(()),
            [_, month] if (1..=12).contains(month) => Ok(()),
            [_, _] => bad("has no such month"),
            [year, month, day] => {
                match chrono::NaiveDate::from_ymd_opt(*year as i32, *month, *day) {
                    Some(_) => Ok(()),
                    None => bad("is not a calendar date"),
                }
            }
            _ => bad("is not YYYY-MM-DD, YYYY-MM or YYYY"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_dates_only() {
        let ok = |iso: &str| {
            DateValue::from_json(&format!(r#"{{"iso": "{iso}", "original": "x"}}"#)).is_ok()
        };
        assert!(ok("2024-03-15"));
        assert!(ok("2024-02-29"));
        assert!(ok("2024-03"));
        assert!(ok("2024"));
        assert!(!ok("2023-02-29"));
        assert!(!ok("2024-13"));
        assert!(!ok("15 March 2024"));
        let err =
            DateValue::from_json(r#"{"iso": "2024-02-30", "original": "30 Feb"}"#).unwrap_err();
        assert_eq!(err.0[0].kind, ViolationKind::FormatMismatch);
        assert_eq!(err.0[0].path, "/iso");
    }
}
