//! Readers: find and read dates, currencies, scale words, periods and durations in text.
//!
//! A model copies what a document writes; code computes the rest. For each kind there is a
//! *finder* and a *reader*:
//! - the finder (`find_dates`, `find_currencies`, `find_scales`, `find_periods`,
//!   `find_durations`) returns every expression of its kind in a text as byte ranges, each the
//!   longest at its place (`05 MAR 2018` whole, never `2018` out of it; `three (3) years`
//!   whole, never `3`), in order, not overlapping, at word boundaries: what a model may be
//!   offered to copy;
//! - the reader (`read_date`, `read_currency`, `read_scale`, `read_period`, `read_duration`)
//!   reads one such expression into a typed value, or says why it cannot, as a typed error:
//!   ambiguous, impossible, unresolvable, or not of its kind.
//!
//! A reader accepts what its finder finds (a property test holds them to it), and a little
//! more: a bare year is a date and a period when it is the whole text, though no finder offers
//! one. No finder or reader panics on any input.
//!
//! How a document writes (its decimal separator, the order of day and month, the currencies it
//! names, its own date) is one value, [`Conventions`] (in `conventions`; its detection is here),
//! detected from the whole document and overridable part by part.
//!
//! The tokenising and the grammars are hand-written: chrono's parsers read one known format
//! per call (`parse_from_str(s, "%d/%m/%Y")`), know month names in English only, and cannot
//! find a date in running text, report an ambiguous one or follow a document's date order.
//! chrono does the calendar: which days exist, weekdays, the two-digit-year pivot's default.

mod conventions;
mod currency;
mod date;
mod duration;
mod names;
mod period;
mod scale;
mod token;
mod words;

pub use conventions::{Conventions, DateOrder};
pub use currency::{find_currencies, read_currency, CurrencyError};
pub use date::{find_dates, read_date, DateError, DateRead};
pub use duration::{find_durations, read_duration, DurationError, DurationRead, DurationUnit};
pub use names::{defined_terms, full_name, full_name_among, name_part, whole_name, DefinedTerm};
pub use period::{
    find_dates_and_periods, find_periods, read_period, PeriodError, PeriodKind, PeriodRead,
};
pub use scale::{find_scales, read_scale, Scale, ScaleError};

use crate::attrs::Form;
use crate::ground::Numerals;
use token::Toks;

/// Every expression of `form` in `text` (the finder of that kind: [`find_dates`],
/// [`find_currencies`], [`find_scales`], [`find_periods`], [`find_durations`]).
pub fn find(form: Form, text: &str) -> Vec<std::ops::Range<usize>> {
    match form {
        Form::Date => find_dates(text),
        Form::Currency => find_currencies(text),
        Form::Scale => find_scales(text),
        Form::Period => find_periods(text),
        Form::Duration => find_durations(text),
    }
}

/// The texts of the expressions of `form` in `text`, each once, in order.
pub fn expressions(form: Form, text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in find(form, text) {
        if let Some(e) = text.get(r) {
            let e = e.trim();
            if !e.is_empty() && !out.iter().any(|x| x == e) {
                out.push(e.to_owned());
            }
        }
    }
    out
}

/// Whether `value` is one whole expression of `form` (its finder finds all of it, whitespace
/// around it aside).
pub fn is_whole(form: Form, value: &str) -> bool {
    let v = value.trim();
    !v.is_empty()
        && find(form, v)
            .iter()
            .any(|r| r.start == 0 && r.end == v.len())
}

// Detecting the conventions reads with the date and currency finders, which read by the
// conventions: so it is here, and `conventions` imports no reader.
impl Conventions {
    /// The conventions `text` follows:
    /// - numerals by [`Numerals::detect`];
    /// - the date order from its numeric dates that tell (`19/10/2018`: a first field above 12
    ///   is a day, so day first; `04/18/2001`: month first; `98/12/31`: year first), and
    ///   [`DateOrder::Unknown`] when none tells or they disagree;
    /// - the currencies it names unambiguously (ISO codes, `RM`, `€`, `US$`, `euros`, ...: not
    ///   `$` or `dollars`, which they serve to resolve), most named first;
    /// - the reference date: the *first* full date (with its day) that reads by the detected
    ///   order, unambiguous and real: a receipt's or a letter's own date comes first, and an
    ///   agreement's effective date is usually its first. Two-digit years in it read by the
    ///   1969-2068 rule;
    /// - no reference period (a document's reporting period is a caller's matter: set one with
    ///   [`Conventions::with_reference_period`]).
    pub fn detect(text: &str) -> Conventions {
        let t = Toks::new(text);
        let found = date::dates_in(&t);
        let date_order = detect_order(found.iter().map(|(_, w)| w));
        let mut c = Conventions {
            numerals: Numerals::detect(text),
            date_order,
            currencies: currency::named_currencies(&t),
            reference_date: None,
            reference_period: None,
        };
        c.reference_date = found.iter().find_map(|(r, w)| {
            let read = date::resolve(w, &c, text.get(r.clone())?).ok()?;
            read.date()
        });
        c
    }

    /// With these currencies named (ISO 4217 codes, most named first) in place of the
    /// detected ones: `with_currencies(&["MYR"])` for a receipt known to be Malaysian. Fails
    /// on a code that is not ISO 4217.
    pub fn with_currencies(mut self, codes: &[&str]) -> Result<Conventions, CurrencyError> {
        let mut known = Vec::new();
        for code in codes {
            let c = currency::known_code(&code.trim().to_ascii_uppercase())
                .ok_or_else(|| CurrencyError::NotACurrency((*code).to_owned()))?;
            if !known.contains(&c) {
                known.push(c);
            }
        }
        self.currencies = known;
        Ok(self)
    }
}

/// The date order numeric dates tell: `Unknown` when none tells or they disagree.
fn detect_order<'a>(written: impl Iterator<Item = &'a date::Written>) -> DateOrder {
    let (mut day, mut month, mut year) = (false, false, false);
    for w in written {
        if let date::Shape::Numeric { a, b, c, .. } = w.shape {
            if a.value > 31 && a.digits == 2 && c.digits == 2 {
                year = true;
            } else if a.value > 12 && b.value <= 12 {
                day = true;
            } else if b.value > 12 && a.value <= 12 {
                month = true;
            }
        }
    }
    match (day, month, year) {
        (true, false, false) => DateOrder::DayFirst,
        (false, true, false) => DateOrder::MonthFirst,
        (false, false, true) => DateOrder::YearFirst,
        _ => DateOrder::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    #[test]
    fn conventions_are_detected() {
        let receipt = "RECEIPT\n19/10/2018 20:49:59\nTOTAL RM 60.30\n01/03/2018 printed";
        let c = Conventions::detect(receipt);
        assert_eq!(c.date_order(), DateOrder::DayFirst);
        assert_eq!(c.currencies(), ["MYR"]);
        assert_eq!(c.reference_date(), NaiveDate::from_ymd_opt(2018, 10, 19));
        assert_eq!(c.numerals(), Numerals::Point);
        assert_eq!(
            read_date("01/03/2018", &c).map(|d| d.iso()),
            Ok("2018-03-01".into())
        );

        let us = "DATE 04/18/01\nSigned 9/3/07 for USD 1,200.50";
        let c = Conventions::detect(us);
        assert_eq!(c.date_order(), DateOrder::MonthFirst);
        assert_eq!(c.reference_date(), NaiveDate::from_ymd_opt(2001, 4, 18));
        assert_eq!(
            read_date("9/3/07", &c).map(|d| d.iso()),
            Ok("2007-09-03".into())
        );

        let mixed = "19/10/2018 and 10/19/2018";
        assert_eq!(Conventions::detect(mixed).date_order(), DateOrder::Unknown);
        let none = Conventions::detect("no dates, 1.234,5 euros");
        assert_eq!(none.date_order(), DateOrder::Unknown);
        assert_eq!(none.reference_date(), None);
        assert_eq!(none.numerals(), Numerals::Comma);
        assert_eq!(none.currencies(), ["EUR"]);
        // An ambiguous first date is passed over for the first one that reads.
        let c = Conventions::detect("04/05/2018, then 5 March 2018");
        assert_eq!(c.reference_date(), NaiveDate::from_ymd_opt(2018, 3, 5));
    }

    #[test]
    fn overrides_replace_detected_parts() {
        let c = Conventions::detect("19/10/2018")
            .with_date_order(DateOrder::MonthFirst)
            .with_numerals(Numerals::Comma);
        assert_eq!(c.date_order(), DateOrder::MonthFirst);
        assert_eq!(c.numerals(), Numerals::Comma);
        assert!(Conventions::new()
            .with_currencies(&["usd", "EUR", "USD"])
            .is_ok_and(|c| c.currencies() == ["USD", "EUR"]));
        assert_eq!(
            Conventions::new().with_currencies(&["ZZZ"]),
            Err(CurrencyError::NotACurrency("ZZZ".into()))
        );
    }
}
