//! Durations (an agreement's term, a notice period, a warranty): [`find_durations`] and
//! [`read_duration`] (which lists the forms read), in English and Spanish.

use std::fmt;
use std::ops::Range;

use super::token::{scan, Toks};
use super::words::{is_number_word, number_words_at};
use crate::ground::Decimal;

/// The unit of a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurationUnit {
    /// Calendar days (`days`, `calendar days`, `días naturales`).
    Days,
    /// Business days (`business days`, `working days`, `días hábiles`).
    BusinessDays,
    /// Weeks.
    Weeks,
    /// Months.
    Months,
    /// Years.
    Years,
}

impl DurationUnit {
    fn name(self, one: bool) -> &'static str {
        match (self, one) {
            (DurationUnit::Days, true) => "day",
            (DurationUnit::Days, false) => "days",
            (DurationUnit::BusinessDays, true) => "business day",
            (DurationUnit::BusinessDays, false) => "business days",
            (DurationUnit::Weeks, true) => "week",
            (DurationUnit::Weeks, false) => "weeks",
            (DurationUnit::Months, true) => "month",
            (DurationUnit::Months, false) => "months",
            (DurationUnit::Years, true) => "year",
            (DurationUnit::Years, false) => "years",
        }
    }
}

/// A duration a document states: a count of a unit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DurationRead {
    count: Decimal,
    unit: DurationUnit,
}

impl DurationRead {
    /// `count` `unit`s.
    pub fn new(count: Decimal, unit: DurationUnit) -> DurationRead {
        DurationRead { count, unit }
    }

    /// The count, exactly as written (`1.5` of `1.5 years`).
    pub fn count(&self) -> &Decimal {
        &self.count
    }

    /// The count, when it is a whole number that fits a `u32`.
    pub fn whole(&self) -> Option<u32> {
        self.count.to_i128().and_then(|n| u32::try_from(n).ok())
    }

    /// The unit.
    pub fn unit(&self) -> DurationUnit {
        self.unit
    }
}

impl fmt::Display for DurationRead {
    /// As Kleister-NDA writes terms: `3 years`, `1 year`, `12 months`, `10 business days`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = self.whole() == Some(1);
        write!(f, "{} {}", self.count, self.unit.name(one))
    }
}

/// Why a text could not be read as a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is not a duration in any form the reader knows.
    #[error(
        "`{0}` is not a duration (a count and a unit: `3 years`, `thirty (30) days`, `tres años`)"
    )]
    NotADuration(String),
    /// The count is written in words and in digits, and they differ.
    #[error("`{text}` writes {words} in words and {digits} in digits")]
    Mismatch {
        /// The text.
        text: String,
        /// The count in words.
        words: u32,
        /// The count in digits.
        digits: Decimal,
    },
}

/// A count: in words, in digits, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Count {
    words: Option<u32>,
    digits: Option<Decimal>,
}

/// Digits, with a decimal fraction of one or two digits or groups of three: `(end, value)`.
fn digits_at(t: &Toks<'_>, i: usize) -> Option<(usize, Decimal)> {
    let int = t.num(i)?;
    let mut j = i + 1;
    let mut whole = int.to_owned();
    if matches!(t.other(j), Some('.' | ',')) {
        if let Some(next) = t.num(j + 1) {
            if (1..=2).contains(&next.len()) {
                let d = Decimal::from_digits(&whole, next);
                return Some((j + 2, d));
            }
            if int.len() <= 3 {
                let sep = t.other(j);
                while t.other(j) == sep && t.num(j + 1).is_some_and(|g| g.len() == 3) {
                    whole.push_str(t.num(j + 1).unwrap_or_default());
                    j += 2;
                }
            }
        }
    }
    Some((j, Decimal::from_digits(&whole, "")))
}

/// `(3)`, `(three)` after a count: `(end, words, digits)`.
fn parenthesised(t: &Toks<'_>, i: usize) -> Option<(usize, Option<u32>, Option<Decimal>)> {
    let j = t.sp(i);
    if !t.is_other(j, '(') {
        return None;
    }
    let k = t.sp(j + 1);
    let (e, words, digits) = match number_words_at(t, k) {
        Some((e, v)) => (e, Some(v), None),
        None => {
            let (e, d) = digits_at(t, k)?;
            (e, None, Some(d))
        }
    };
    let e = t.sp(e);
    t.is_other(e, ')').then_some((e + 1, words, digits))
}

fn count_at(t: &Toks<'_>, i: usize) -> Option<(usize, Count)> {
    if let Some((e, v)) = number_words_at(t, i) {
        return Some(match parenthesised(t, e) {
            Some((p, None, Some(d))) => (
                p,
                Count {
                    words: Some(v),
                    digits: Some(d),
                },
            ),
            _ => (
                e,
                Count {
                    words: Some(v),
                    digits: None,
                },
            ),
        });
    }
    let (e, d) = digits_at(t, i)?;
    Some(match parenthesised(t, e) {
        Some((p, Some(w), None)) => (
            p,
            Count {
                words: Some(w),
                digits: Some(d),
            },
        ),
        _ => (
            e,
            Count {
                words: None,
                digits: Some(d),
            },
        ),
    })
}

fn unit_word(w: &str) -> Option<DurationUnit> {
    Some(match w {
        "day" | "days" | "día" | "días" | "dia" | "dias" => DurationUnit::Days,
        "week" | "weeks" | "semana" | "semanas" => DurationUnit::Weeks,
        "month" | "months" | "mes" | "meses" => DurationUnit::Months,
        "year" | "years" | "yr" | "yrs" | "año" | "años" => DurationUnit::Years,
        _ => return None,
    })
}

/// The unit after a count: `years`, `-year`, `business days`, `días hábiles`.
fn unit_at(t: &Toks<'_>, i: usize) -> Option<(usize, DurationUnit)> {
    let j = if t.is_other(i, '-') {
        t.sp(i + 1)
    } else {
        t.sp_req(i)?
    };
    let mut business = None;
    let mut k = j;
    if let Some(adj) = t.word(j) {
        let kind = match adj {
            "business" | "working" => Some(true),
            "calendar" | "consecutive" | "full" | "complete" => Some(false),
            _ => None,
        };
        if let Some(b) = kind {
            if let Some(x) = t
                .sp_req(j + 1)
                .filter(|&x| t.word(x).and_then(unit_word).is_some())
            {
                k = x;
                business = Some(b);
            }
        }
    }
    let mut unit = unit_word(t.word(k)?)?;
    let mut end = k + 1;
    if let Some(x) = t.sp_req(end) {
        match t.word(x) {
            Some("hábiles" | "habiles" | "laborables") if unit == DurationUnit::Days => {
                business = Some(true);
                end = x + 1;
            }
            Some(
                "naturales" | "calendario" | "corridos" | "completos" | "consecutivos"
                | "completas" | "consecutivas",
            ) => {
                end = x + 1;
            }
            _ => {}
        }
    }
    if business == Some(true) {
        if unit != DurationUnit::Days {
            return None;
        }
        unit = DurationUnit::BusinessDays;
    }
    Some((end, unit))
}

/// Ordinals for anniversaries: `(word, n)`.
const ANNIVERSARY_ORDINALS: &[(&str, u32)] = &[
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
    ("eleventh", 11),
    ("twelfth", 12),
    ("fifteenth", 15),
    ("twentieth", 20),
    ("primer", 1),
    ("segundo", 2),
    ("tercer", 3),
    ("cuarto", 4),
    ("quinto", 5),
    ("sexto", 6),
    ("séptimo", 7),
    ("septimo", 7),
    ("octavo", 8),
    ("noveno", 9),
    ("décimo", 10),
    ("decimo", 10),
];

/// `the third anniversary`, `the 5th anniversary`, `el tercer aniversario`: that many years.
fn anniversary(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    let j = t
        .word_in(i, &["the", "el"])
        .and_then(|x| t.sp_req(x))
        .unwrap_or(i);
    let (k, n) = match t.word(j) {
        Some(w) => {
            let n = ANNIVERSARY_ORDINALS
                .iter()
                .find(|(o, _)| *o == w)
                .map(|&(_, n)| n)?;
            (j + 1, n)
        }
        None => {
            let (n, _) = t.num_upto(j, 2)?;
            t.word_in(j + 1, &["st", "nd", "rd", "th", "º", "er", "o"])?;
            (j + 2, n)
        }
    };
    let k = t.sp_req(k)?;
    t.word_in(k, &["anniversary", "aniversario"])
        .map(|e| (e, n))
}

fn duration_at(t: &Toks<'_>, i: usize) -> Option<(usize, (Count, DurationUnit))> {
    if let Some((e, n)) = anniversary(t, i) {
        let count = Count {
            words: None,
            digits: Some(Decimal::from_digits(&n.to_string(), "")),
        };
        return Some((e, (count, DurationUnit::Years)));
    }
    let mut j = i;
    for prefix in [
        &["a", "period", "of"][..],
        &["period", "of"],
        &["un", "período", "de"],
        &["un", "periodo", "de"],
        &["un", "plazo", "de"],
        &["plazo", "de"],
    ] {
        if let Some(e) = t.words(i, prefix).and_then(|e| t.sp_req(e)) {
            j = e;
            break;
        }
    }
    let (e, count) = count_at(t, j)?;
    let (end, unit) = unit_at(t, e)?;
    Some((end, (count, unit)))
}

fn offered(t: &Toks<'_>, i: usize) -> Option<(usize, (Count, DurationUnit))> {
    if !t.start_ok(i) {
        return None;
    }
    // Only numbers and the words a duration starts with are worth trying.
    let worth = t.num(i).is_some()
        || t.word(i).is_some_and(|w| {
            is_number_word(w) || matches!(w, "a" | "period" | "plazo" | "the" | "el")
        });
    if !worth {
        return None;
    }
    duration_at(t, i).filter(|(end, _)| t.end_ok(*end))
}

/// Every duration `text` states, as byte ranges: each the longest at its place (`three (3)
/// years` whole, never `3` or `3) years`; `twenty-four (24) months` whole), in order, not
/// overlapping. See [`read_duration`] for the forms.
pub fn find_durations(text: &str) -> Vec<Range<usize>> {
    scan(&Toks::new(text), offered)
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

/// Reads `text` (one duration, as [`find_durations`] finds them, surrounding whitespace
/// aside).
///
/// Forms read (any case, line breaks anywhere between words, after a hyphen too):
/// `3 years`, `three years`, `three (3) years`, `thirty (30) days`, `twenty-four (24) months`,
/// `twenty-\nfour (24) months`, `30 (thirty) days`, `1.5 years`, `five-year`, `24-month`,
/// `two (2)-year`, `ten business days`, `forty-five (45) calendar days`, `twelve (12)
/// consecutive months`, `a period of two years`, `un (1) año`, `tres años`, `doce (12) meses`,
/// `treinta (30) días hábiles`, `un plazo de dos años`, `una semana`; and an anniversary,
/// as a term's end (`until the third anniversary of the Effective Date`): `the third
/// anniversary`, `the 5th anniversary`, `el tercer aniversario` are that many years.
///
/// Number words: English up to 999 (`one`, `twenty-four`, `one hundred and twenty`) and
/// Spanish up to 199 (`uno`, `veinticuatro`, `treinta y seis`, `cien`, `ciento veinte`). A
/// count written twice that disagrees with itself (`three (4) years`) is
/// [`DurationError::Mismatch`]. `a year`, `half a year` and `a year and a half` are not read
/// (`a year` is as often a rate, `twice a year`, as a duration).
///
/// Decimal counts: one or two digits after a point or a comma are a fraction (`1.5 years`,
/// `1,5 años`), three are thousands (`1,000 days`, `1.000 días`).
pub fn read_duration(text: &str) -> Result<DurationRead, DurationError> {
    let t = Toks::new(text);
    let (a, b) = t.trimmed();
    let trimmed = text.trim();
    let (end, (count, unit)) =
        duration_at(&t, a).ok_or_else(|| DurationError::NotADuration(trimmed.to_owned()))?;
    if end != b {
        return Err(DurationError::NotADuration(trimmed.to_owned()));
    }
    let count = match (count.words, count.digits) {
        (Some(w), Some(d)) => {
            let as_decimal = Decimal::from_digits(&w.to_string(), "");
            if as_decimal != d {
                return Err(DurationError::Mismatch {
                    text: trimmed.to_owned(),
                    words: w,
                    digits: d,
                });
            }
            d
        }
        (Some(w), None) => Decimal::from_digits(&w.to_string(), ""),
        (None, Some(d)) => d,
        (None, None) => return Err(DurationError::NotADuration(trimmed.to_owned())),
    };
    Ok(DurationRead { count, unit })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kleister(text: &str) -> String {
        match read_duration(text) {
            Ok(d) => d.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn durations_in_both_languages() {
        for (text, want) in [
            ("three (3) years", "3 years"),
            ("3 years", "3 years"),
            ("twelve months", "12 months"),
            ("eighteen (18) months", "18 months"),
            ("one year", "1 year"),
            ("One (1) Year", "1 year"),
            ("a period of two years", "2 years"),
            ("24-month", "24 months"),
            ("thirty (30) days", "30 days"),
            ("five-year", "5 years"),
            ("two (2)-year", "2 years"),
            ("twenty-four (24) months", "24 months"),
            ("twenty-\nfour (24) months", "24 months"),
            ("TWENTY-ONE (21) DAYS", "21 days"),
            ("forty-five (45) calendar days", "45 days"),
            ("ten business days", "10 business days"),
            ("1 business day", "1 business day"),
            ("twelve (12) consecutive months", "12 months"),
            ("30 (thirty) days", "30 days"),
            ("1.5 years", "1.5 years"),
            ("1,5 años", "1.5 years"),
            ("1,000 days", "1000 days"),
            ("two weeks", "2 weeks"),
            ("one hundred and twenty days", "120 days"),
            ("un (1) año", "1 year"),
            ("tres años", "3 years"),
            ("doce (12) meses", "12 months"),
            ("treinta (30) días hábiles", "30 business days"),
            ("veinticuatro meses", "24 months"),
            ("treinta y seis (36) meses", "36 months"),
            ("un plazo de dos años", "2 years"),
            ("una semana", "1 week"),
            ("cien días naturales", "100 days"),
            ("the third anniversary", "3 years"),
            ("the 5th anniversary", "5 years"),
            ("el segundo aniversario", "2 years"),
        ] {
            assert_eq!(kleister(text), want, "{text}");
        }
    }

    #[test]
    fn disagreeing_counts_and_non_durations() {
        assert_eq!(
            read_duration("three (4) years"),
            Err(DurationError::Mismatch {
                text: "three (4) years".into(),
                words: 3,
                digits: Decimal::from_digits("4", ""),
            })
        );
        assert!(matches!(
            read_duration("four (24) months"),
            Err(DurationError::Mismatch { .. })
        ));
        for text in [
            "",
            "years",
            "3",
            "three (3)",
            "a year",
            "3 apples",
            "3 years ago",
            "(3) years",
        ] {
            assert!(
                matches!(read_duration(text), Err(DurationError::NotADuration(_))),
                "{text}: {:?}",
                read_duration(text)
            );
        }
    }

    #[test]
    fn finders_take_the_longest_duration() {
        let found = |text: &'static str| -> Vec<&'static str> {
            find_durations(text)
                .into_iter()
                .map(|r| text.get(r).unwrap_or("?"))
                .collect()
        };
        assert_eq!(
            found("for a term of three (3) years from the date"),
            ["three (3) years"]
        );
        assert_eq!(
            found("for a period of two years, within\nthirty (30)\ndays"),
            ["a period of two years", "thirty (30)\ndays"]
        );
        assert_eq!(found("the 12-\nmonth period"), ["12-\nmonth"]);
        assert_eq!(
            found("within twenty-\nfour (24) months"),
            ["twenty-\nfour (24) months"]
        );
        assert_eq!(found("por un (1) año"), ["un (1) año"]);
        assert_eq!(
            found("shall continue until the third anniversary of the Effective Date"),
            ["the third anniversary"]
        );
        // Half of a range, a number in another number, and no unit: nothing.
        assert!(found("1-2 years, 2018 and 3 apples, 1.2.3 years").is_empty());
    }
}
