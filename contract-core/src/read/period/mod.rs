//! Periods: [`find_periods`] and [`read_period`] (which lists the forms read), in English and
//! Spanish. The written forms are read token by token in `forms`; the types ([`PeriodKind`],
//! [`PeriodRead`]) are in `types`; this module holds the finder and reader, and places what
//! `forms` read against the [`Conventions`].

mod forms;
mod types;

use std::ops::Range;

use super::conventions::Conventions;
use super::date::{self, Field};
use super::token::{scan, Toks};
use forms::{alternatives, period_at, Ending, Shape, YearSpec};
use types::Unit;

pub use types::{PeriodKind, PeriodRead};

/// Why a text could not be read as a period.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    /// The text is not a period in any form the reader knows.
    #[error("`{0}` is not a period (a quarter, half, month or year, with its year, or a relative one like `next quarter`)")]
    NotAPeriod(String),
    /// The period is relative or has no year, and there is no reference to place it against.
    #[error("`{0}` names no year: it needs a reference period or date to be placed")]
    NoReference(String),
    /// The period cannot be placed against the reference given, or names no calendar period.
    #[error("`{text}` cannot be placed: {why}")]
    Unresolvable {
        /// The text.
        text: String,
        /// Why.
        why: String,
    },
    /// The date the period is named by (`the quarter ending ...`) does not read.
    #[error("the date in `{text}` does not read: {source}")]
    Date {
        /// The text.
        text: String,
        /// The date's error.
        source: date::DateError,
    },
}

/// Every period `text` names, as byte ranges: each the longest at its place (`the third
/// quarter of 2024` whole, `Q3 FY2024` whole), in order, not overlapping. Bare years and bare
/// month names are not offered (`2024` alone is any number; `May` a verb), nor a month and
/// year inside a full date (`MAR 2018` of `30 MAR 2018`). See [`read_period`] for the forms.
pub fn find_periods(text: &str) -> Vec<Range<usize>> {
    let t = Toks::new(text);
    // A month and year inside a full date (`MAR 2018` of `30 MAR 2018`) is that date's, not a
    // period to copy.
    let days: Vec<Range<usize>> = date::dates_in(&t)
        .into_iter()
        .filter(|(_, w)| w.has_day())
        .map(|(r, _)| r)
        .collect();
    scan(&t, period_at)
        .into_iter()
        .map(|(r, _)| r)
        .filter(|r| {
            !days
                .iter()
                .any(|d| d.start <= r.start && r.end <= d.end && d.len() > r.len())
        })
        .collect()
}

/// Where `text` writes a date ([`find_dates`](super::find_dates)) or a period
/// ([`find_periods`]), read from one pass over its tokens: what covers the parts of a date or
/// a period (a month and year inside a full date is covered by that date, so it is not left
/// out here as [`find_periods`] leaves it out).
pub fn find_dates_and_periods(text: &str) -> Vec<Range<usize>> {
    let t = Toks::new(text);
    date::dates_in(&t)
        .into_iter()
        .map(|(r, _)| r)
        .chain(scan(&t, period_at).into_iter().map(|(r, _)| r))
        .collect()
}

/// Reads `text` (one period, as [`find_periods`] finds them, surrounding whitespace aside),
/// placing a relative or year-less one against the `conventions`' reference (see below);
/// two-digit years (`FY25`, `3Q24`) and the date a period ends on read as
/// [`read_date`](super::read_date) reads them.
///
/// Forms read (any case):
/// - quarters: `Q3 2024`, `Q3'24`, `3Q24`, `Q3 FY2024`, `FY24 Q3`, `2024 Q3`, `third quarter of
///   2024`, `fiscal third quarter 2024`, `third fiscal quarter of fiscal 2024`,
///   `fourth-quarter 2025`, `the December quarter`, `the quarter ending September 30, 2024`,
///   `three months ended March 31, 2025`, `tercer trimestre de 2024`, `3T 2024`, `1T26`,
///   `el trimestre que termina el 31 de diciembre de 2025`;
/// - halves: `H1 2025`, `1H25`, `H2 FY2024`, `first half of 2025`, `the second half of fiscal
///   2024`, `first half of next year`, `el segundo semestre de 2025`, `1S 2025`;
/// - years: `fiscal 2025`, `FY25`, `FY 2025`, `fiscal year 2025`, `full year 2025`, `the fiscal
///   year ended September 30, 2024`, `ejercicio 2025`, `el ejercicio fiscal 2025`, `año 2025`;
///   a bare `2025` by [`read_period`] only;
/// - months: `March 2025`, `marzo de 2025`, `the month of March`, `el mes de marzo`; a bare
///   `March` by [`read_period`] only;
/// - relative: `next quarter`, `the upcoming quarter`, `the current quarter`, `last quarter`,
///   `next year`, `the coming fiscal year`, `this half`, `el próximo trimestre`, `el trimestre
///   actual`, `el ejercicio anterior`, `este año`.
///
/// A period with no year (`the third quarter`, `Q3`, `the second half of the year`) and a
/// relative one are placed against a reference ([`Conventions::reference_period`], else the
/// calendar period around [`Conventions::reference_date`]):
/// - a relative period is the period of its kind containing the reference, moved by one
///   (`next`, `upcoming`, `coming`, `following`, `próximo`, `siguiente`), none (`this`,
///   `current`, `actual`, `en curso`) or minus one (`last`, `previous`, `prior`, `anterior`,
///   `pasado`): `next quarter` after Q2 2024 is Q3 2024, `next year` after Q4 2024 is 2025;
/// - a period without a year is the first such period that does not end before the reference
///   begins: `the third quarter` against Q2 2024 is Q3 2024, `the first quarter` is Q1 2025,
///   `the second quarter` Q2 2024 itself (the period a release reports on, named without its
///   year, is that period).
///
/// A fiscal period is numbered as the reference is: placed against a reference period, it
/// takes its year's numbering; against a calendar date alone it cannot be placed
/// ([`PeriodError::Unresolvable`]), since the fiscal calendar is unknown. A quarter or half
/// named by the month it ends in (`the quarter ending September 30, 2024`, `the December
/// quarter`) is a calendar one, and one that ends in another month (`the quarter ended
/// November 30`) is [`PeriodError::Unresolvable`]: it is a fiscal quarter of an unknown fiscal
/// calendar. A year named by the date it ends on is that date's year, fiscal unless it ends on
/// December 31.
pub fn read_period(text: &str, conventions: &Conventions) -> Result<PeriodRead, PeriodError> {
    let t = Toks::new(text);
    let (a, b) = t.trimmed();
    let trimmed = text.trim();
    let not = || PeriodError::NotAPeriod(trimmed.to_owned());
    if a == b {
        return Err(not());
    }
    let mut all = Vec::new();
    alternatives(&t, a, &mut all);
    let (_, shape, _) = all
        .into_iter()
        .find(|(end, _, _)| *end == b)
        .ok_or_else(not)?;
    resolve(shape, conventions, trimmed)
}

/// The reference to place a period against.
fn reference(
    conventions: &Conventions,
    fiscal: bool,
    text: &str,
) -> Result<PeriodRead, PeriodError> {
    if let Some(p) = conventions.reference_period() {
        return Ok(p);
    }
    match conventions.reference_date() {
        Some(_) if fiscal => Err(PeriodError::Unresolvable {
            text: text.to_owned(),
            why: "a fiscal period cannot be placed from a calendar date alone; give a reference period"
                .into(),
        }),
        Some(d) => Ok(PeriodRead::month_of(d)),
        None => Err(PeriodError::NoReference(text.to_owned())),
    }
}

fn resolve(shape: Shape, conventions: &Conventions, text: &str) -> Result<PeriodRead, PeriodError> {
    let full = |f: Field| match f.digits {
        2 => conventions.full_year(f.value),
        _ => f.value as i32,
    };
    let unresolvable = |why: String| PeriodError::Unresolvable {
        text: text.to_owned(),
        why,
    };
    let out_of_range = || unresolvable("the year is out of range".into());
    match shape {
        Shape::Fixed {
            kind,
            year: YearSpec::Given(f),
            fiscal,
        } => Ok(PeriodRead {
            kind,
            year: full(f),
            fiscal,
        }),
        Shape::Fixed {
            kind,
            year: YearSpec::Relative(n),
            fiscal,
        } => {
            let r = reference(conventions, fiscal, text)?;
            Ok(PeriodRead {
                kind,
                year: r.year.checked_add(n).ok_or_else(out_of_range)?,
                fiscal: fiscal || r.fiscal,
            })
        }
        Shape::Fixed {
            kind,
            year: YearSpec::Missing,
            fiscal,
        } => {
            let r = reference(conventions, fiscal, text)?;
            let (start, _) = r.span();
            let this = PeriodRead {
                kind,
                year: r.year,
                fiscal: fiscal || r.fiscal,
            };
            Ok(if this.span().1 >= start {
                this
            } else {
                PeriodRead {
                    year: r.year.checked_add(1).ok_or_else(out_of_range)?,
                    ..this
                }
            })
        }
        Shape::Relative {
            unit,
            offset,
            fiscal,
        } => {
            let r = reference(conventions, fiscal, text)?;
            let holding = r.within(unit).ok_or_else(|| {
                unresolvable(format!(
                    "the reference, {r}, is longer than a {}",
                    unit.name()
                ))
            })?;
            let moved = holding.offset(offset).ok_or_else(out_of_range)?;
            Ok(PeriodRead {
                fiscal: fiscal || r.fiscal,
                ..moved
            })
        }
        Shape::Ending {
            unit,
            date,
            fiscal,
            ordinal,
        } => {
            let read = match date {
                Ending::Month(m, year) => {
                    let (kind, fiscal) = ending_kind(unit, m, None, fiscal, text)?;
                    resolve(Shape::Fixed { kind, year, fiscal }, conventions, text)?
                }
                Ending::Date(w) => {
                    let d = date::resolve(&w, conventions, text).map_err(|source| {
                        PeriodError::Date {
                            text: text.to_owned(),
                            source,
                        }
                    })?;
                    let (kind, fiscal) =
                        ending_kind(unit, d.month().unwrap_or(12), d.day(), fiscal, text)?;
                    PeriodRead {
                        kind,
                        year: d.year(),
                        fiscal,
                    }
                }
            };
            match (ordinal, read.kind) {
                (Some(n), PeriodKind::Quarter(q) | PeriodKind::Half(q)) if n != q => {
                    Err(unresolvable(format!(
                        "it says the {} number {n} and ends with number {q}",
                        unit.name()
                    )))
                }
                _ => Ok(read),
            }
        }
    }
}

/// The period of `unit` that ends in `month` (on `day`), and whether it is fiscal.
fn ending_kind(
    unit: Unit,
    month: u32,
    day: Option<u32>,
    fiscal: bool,
    text: &str,
) -> Result<(PeriodKind, bool), PeriodError> {
    match unit {
        Unit::Year => Ok((
            PeriodKind::Year,
            fiscal || month != 12 || day.is_some_and(|d| d != 31),
        )),
        Unit::Month => Ok((PeriodKind::Month(month as u8), fiscal)),
        Unit::Quarter | Unit::Half => {
            let len = if unit == Unit::Quarter { 3 } else { 6 };
            if !month.is_multiple_of(len) {
                return Err(PeriodError::Unresolvable {
                    text: text.to_owned(),
                    why: format!(
                        "a {} ending in month {month} is not a calendar {}, and the fiscal calendar is unknown",
                        unit.name(),
                        unit.name()
                    ),
                });
            }
            Ok((unit.holding(month), fiscal))
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;
    use crate::read::DateOrder;

    fn q(n: u8, year: i32) -> PeriodRead {
        PeriodRead {
            kind: PeriodKind::Quarter(n),
            year,
            fiscal: false,
        }
    }

    fn shown(text: &str, c: &Conventions) -> String {
        match read_period(text, c) {
            Ok(p) => p.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    /// The filings example's table (`parse_period`), read with no reference.
    #[test]
    fn periods_as_releases_write_them() {
        let c = Conventions::new();
        for (text, want) in [
            ("the third quarter of 2024", "Q3 2024"),
            ("Q3 2024", "Q3 2024"),
            ("3Q24", "Q3 2024"),
            ("fiscal fourth quarter 2025", "Q4 FY2025"),
            ("the quarter ending September 30, 2024", "Q3 2024"),
            ("the quarter ending March 31, 2027", "Q1 2027"),
            ("el tercer trimestre de 2024", "Q3 2024"),
            ("el 1T 2026", "Q1 2026"),
            ("primer trimestre de 2026", "Q1 2026"),
            (
                "el trimestre que termina el 31 de diciembre de 2025",
                "Q4 2025",
            ),
            // Unlike the example's reader, a bare year is a year.
            ("2024", "2024"),
        ] {
            assert_eq!(shown(text, &c), want, "{text}");
        }
        for text in ["the third quarter", "next quarter", "Q3"] {
            assert_eq!(
                read_period(text, &c),
                Err(PeriodError::NoReference(text.into()))
            );
        }
        for text in [
            "Q3 or Q4 2024",
            "Q3 2024 and 2025",
            "September 30, 2024",
            "",
            "Q5 2024",
        ] {
            assert!(
                matches!(read_period(text, &c), Err(PeriodError::NotAPeriod(_))),
                "{text}: {:?}",
                read_period(text, &c)
            );
        }
    }

    #[test]
    fn quarters_halves_years_and_months() {
        let c = Conventions::new();
        for (text, want) in [
            ("Q3'24", "Q3 2024"),
            ("Q3 FY2024", "Q3 FY2024"),
            ("Q3 FY24", "Q3 FY2024"),
            ("FY24 Q3", "Q3 FY2024"),
            ("2024 Q3", "Q3 2024"),
            ("third fiscal quarter of fiscal 2024", "Q3 FY2024"),
            ("fourth-quarter 2025", "Q4 2025"),
            ("3er trimestre de 2024", "Q3 2024"),
            ("tercer trimestre fiscal de 2024", "Q3 FY2024"),
            ("three months ended March 31, 2025", "Q1 2025"),
            ("the second quarter ended June 30, 2025", "Q2 2025"),
            ("fourth quarter ending December 31, 2024", "Q4 2024"),
            ("the December quarter of 2025", "Q4 2025"),
            ("H1 2025", "H1 2025"),
            ("1H25", "H1 2025"),
            ("H2 FY2024", "H2 FY2024"),
            ("first half of 2025", "H1 2025"),
            ("the second half of fiscal 2024", "H2 FY2024"),
            ("second half 2024", "H2 2024"),
            ("el segundo semestre de 2025", "H2 2025"),
            ("1S 2025", "H1 2025"),
            ("fiscal 2025", "FY2025"),
            ("FY25", "FY2025"),
            ("FY 2025", "FY2025"),
            ("fiscal year 2025", "FY2025"),
            ("full year 2025", "2025"),
            ("full-year 2025", "2025"),
            ("ejercicio 2025", "FY2025"),
            ("el ejercicio fiscal 2025", "FY2025"),
            ("año fiscal 2025", "FY2025"),
            ("the fiscal year ended September 30, 2024", "FY2024"),
            ("the year ended December 31, 2024", "2024"),
            ("March 2025", "2025-03"),
            ("marzo de 2025", "2025-03"),
            ("the month of March 2025", "2025-03"),
        ] {
            assert_eq!(shown(text, &c), want, "{text}");
        }
    }

    #[test]
    fn relative_and_yearless_periods_follow_the_reference() {
        // The filings example's cases: the release reports on Q2 2024.
        let c = Conventions::new().with_reference_period(q(2, 2024));
        for (text, want) in [
            ("the upcoming quarter", "Q3 2024"),
            ("next quarter", "Q3 2024"),
            ("the current quarter", "Q2 2024"),
            ("this quarter", "Q2 2024"),
            ("last quarter", "Q1 2024"),
            ("the previous quarter", "Q1 2024"),
            ("third quarter", "Q3 2024"),
            ("first quarter", "Q1 2025"),
            ("the second quarter", "Q2 2024"),
            ("fourth quarter", "Q4 2024"),
            ("Q1", "Q1 2025"),
            ("next year", "2025"),
            ("this year", "2024"),
            ("the second half of the year", "H2 2024"),
            ("the first half of the year", "H1 2024"),
            ("the first half of next year", "H1 2025"),
            ("the coming half", "H2 2024"),
            ("the month of March", "2025-03"),
            ("el mes de julio", "2024-07"),
            ("the quarter ending September 30", "Q3 2024"),
        ] {
            assert_eq!(shown(text, &c), want, "{text}");
        }
        let es = Conventions::new().with_reference_period(q(4, 2025));
        for (text, want) in [
            ("el próximo trimestre", "Q1 2026"),
            ("el trimestre siguiente", "Q1 2026"),
            ("el trimestre actual", "Q4 2025"),
            ("el trimestre anterior", "Q3 2025"),
            ("el próximo año", "2026"),
            ("este año", "2025"),
            ("el próximo ejercicio", "FY2026"),
            ("el ejercicio anterior", "FY2024"),
            ("el segundo semestre del año", "H2 2025"),
            ("el primer semestre del próximo año", "H1 2026"),
        ] {
            assert_eq!(shown(text, &es), want, "{text}");
        }
        let fiscal = PeriodRead::new(PeriodKind::Year, 2024, true);
        let fy = Conventions::new().with_reference_period(fiscal.unwrap_or(q(1, 2024)));
        assert_eq!(shown("the coming fiscal year", &fy), "FY2025");
        assert_eq!(shown("next year", &fy), "FY2025");
        assert!(matches!(
            read_period("next quarter", &fy),
            Err(PeriodError::Unresolvable { .. })
        ));
        // The last year there is: an error, not an overflow.
        let last = PeriodRead::new(PeriodKind::Quarter(4), i32::MAX, false);
        let end = Conventions::new().with_reference_period(last.unwrap_or(q(1, 2024)));
        for text in [
            "next year",
            "next quarter",
            "first quarter",
            "the first half of next year",
        ] {
            assert!(
                matches!(
                    read_period(text, &end),
                    Err(PeriodError::Unresolvable { .. })
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn a_reference_date_places_calendar_periods_only() {
        let day = NaiveDate::from_ymd_opt(2025, 10, 30).unwrap_or_default();
        let c = Conventions::new().with_reference_date(day);
        assert_eq!(shown("next quarter", &c), "Q1 2026");
        assert_eq!(shown("the current quarter", &c), "Q4 2025");
        assert_eq!(shown("next month", &c), "2025-11");
        assert_eq!(shown("the third quarter", &c), "Q3 2026");
        assert_eq!(shown("the fourth quarter", &c), "Q4 2025");
        assert!(matches!(
            read_period("the coming fiscal year", &c),
            Err(PeriodError::Unresolvable { .. })
        ));
        // The reference period comes first.
        let c = c.with_reference_period(q(3, 2025));
        assert_eq!(shown("next quarter", &c), "Q4 2025");
    }

    #[test]
    fn an_ordinal_before_an_ending_date_must_agree_with_it() {
        let c = Conventions::new();
        assert!(matches!(
            read_period("the second quarter ended December 31, 2024", &c),
            Err(PeriodError::Unresolvable { .. })
        ));
        // Found whole in a sentence, so a document's own period is read from it.
        let text = "Acme announced results for the second quarter ended June 30, 2025.";
        let found: Vec<&str> = find_periods(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(found, ["the second quarter ended June 30, 2025"]);
    }

    #[test]
    fn misaligned_and_bad_ending_dates() {
        let c = Conventions::new().with_date_order(DateOrder::MonthFirst);
        assert!(matches!(
            read_period("the quarter ended November 30, 2024", &c),
            Err(PeriodError::Unresolvable { .. })
        ));
        assert_eq!(shown("the quarter ended 09/30/2024", &c), "Q3 2024");
        assert!(matches!(
            read_period("the quarter ended 09/31/2024", &c),
            Err(PeriodError::Date { .. })
        ));
        assert!(matches!(
            read_period("the quarter ended 09/06/2024", &Conventions::new()),
            Err(PeriodError::Date {
                source: date::DateError::Ambiguous { .. },
                ..
            })
        ));
    }

    #[test]
    fn finders_take_the_longest_period() {
        let found = |text: &'static str| -> Vec<&'static str> {
            find_periods(text)
                .into_iter()
                .map(|r| text.get(r).unwrap_or("?"))
                .collect()
        };
        assert_eq!(
            found("Acme expects revenue for the third quarter of 2024 of $1.2 billion."),
            ["the third quarter of 2024"]
        );
        assert_eq!(
            found("Q3 FY2024 revenue; 3Q24 margin"),
            ["Q3 FY2024", "3Q24"]
        );
        assert_eq!(
            found("For the quarter ending December 31, 2024, Acme expects"),
            ["the quarter ending December 31, 2024"]
        );
        assert_eq!(
            found("Para el próximo trimestre, prevé; en el tercer trimestre de 2024 ganó"),
            ["el próximo trimestre", "el tercer trimestre de 2024"]
        );
        assert_eq!(
            found("results for the fourth quarter and full year 2024"),
            ["the fourth quarter", "full year 2024"]
        );
        assert_eq!(found("on 30 MAR 2018 and in MAR 2018"), ["MAR 2018"]);
        // Bare years and month names, and letter-digit codes without a year, are not periods.
        assert!(
            found("In 2024 we may grow; see S1 and T2 of the list, the 2024 report").is_empty()
        );
    }
}
