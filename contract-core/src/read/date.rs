//! Dates: [`find_dates`] and [`read_date`] (which lists the forms read).

use std::fmt;
use std::ops::Range;

use chrono::{Datelike, NaiveDate, Weekday};

use super::conventions::{Conventions, DateOrder};
use super::token::{scan, Toks};
use super::words::{day_at, month_at, weekday_at};

/// A date as a document states it: a year, and the month and day when it gives them.
///
/// Always a real calendar date: a day is only present with its month, and the three name a
/// day that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DateRead {
    year: i32,
    month: Option<u32>,
    day: Option<u32>,
}

impl DateRead {
    /// The date with these parts; `None` when they name no calendar date (a day without a
    /// month, month 13, `2018-02-31`, a year outside chrono's range).
    pub fn new(year: i32, month: Option<u32>, day: Option<u32>) -> Option<DateRead> {
        match (month, day) {
            (None, None) => NaiveDate::from_ymd_opt(year, 1, 1).map(|_| ()),
            (Some(m), None) => NaiveDate::from_ymd_opt(year, m, 1).map(|_| ()),
            (Some(m), Some(d)) => NaiveDate::from_ymd_opt(year, m, d).map(|_| ()),
            (None, Some(_)) => None,
        }?;
        Some(DateRead { year, month, day })
    }

    /// The year.
    pub fn year(&self) -> i32 {
        self.year
    }

    /// The month (1-12), when stated.
    pub fn month(&self) -> Option<u32> {
        self.month
    }

    /// The day of the month, when stated.
    pub fn day(&self) -> Option<u32> {
        self.day
    }

    /// The calendar date, when the day is stated.
    pub fn date(&self) -> Option<NaiveDate> {
        NaiveDate::from_ymd_opt(self.year, self.month?, self.day?)
    }

    /// ISO 8601 at the date's precision: `2018-03-05`, `2018-03` or `2018`.
    pub fn iso(&self) -> String {
        match (self.month, self.day) {
            (Some(m), Some(d)) => format!("{:04}-{m:02}-{d:02}", self.year),
            (Some(m), None) => format!("{:04}-{m:02}", self.year),
            _ => format!("{:04}", self.year),
        }
    }
}

impl From<NaiveDate> for DateRead {
    fn from(d: NaiveDate) -> DateRead {
        DateRead {
            year: d.year(),
            month: Some(d.month()),
            day: Some(d.day()),
        }
    }
}

impl fmt::Display for DateRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.iso())
    }
}

/// Why a text could not be read as one date.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DateError {
    /// The text is not a date in any form the reader knows.
    #[error("`{0}` is not a date (day, month and year in numbers or with a month name, or a month and year)")]
    NotADate(String),
    /// The day and the month could be either way round and the document's date order is
    /// unknown.
    #[error("`{text}` is ambiguous: it reads as {} depending on whether the day or the month comes first", readings_list(.readings))]
    Ambiguous {
        /// The text.
        text: String,
        /// Every reading, day first before month first.
        readings: Vec<DateRead>,
    },
    /// The text has the shape of a date but names none (`31/02/2018`, month 13), or its
    /// weekday is not the date's.
    #[error("`{text}` is not a calendar date: {why}")]
    Impossible {
        /// The text.
        text: String,
        /// What is wrong with it.
        why: String,
    },
}

fn readings_list(readings: &[DateRead]) -> String {
    let all: Vec<String> = readings.iter().map(DateRead::iso).collect();
    all.join(" or ")
}

/// A number field as written: its value and how many digits it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    pub value: u32,
    pub digits: usize,
}

/// A date's shape, before the document's conventions read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `a sep b sep c`: day and month in some order (one or two digits each), then a year of
    /// two or four digits.
    Numeric {
        a: Field,
        b: Field,
        c: Field,
        sep: char,
    },
    /// Year, month, day: `2018-03-04`, `20180304`.
    Ymd { y: Field, m: u32, d: u32 },
    /// Month and year in numbers: `03/2018`, `2018-03`.
    Ym { y: Field, m: u32 },
    /// A month by name, with a day or not.
    Named {
        day: Option<u32>,
        month: u32,
        year: Field,
    },
    /// A bare four-digit year.
    Year(Field),
}

/// A date as written: its shape and the weekday written before it, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    pub shape: Shape,
    pub weekday: Option<Weekday>,
}

impl Written {
    pub(crate) fn has_day(&self) -> bool {
        !matches!(
            self.shape,
            Shape::Ym { .. } | Shape::Year(_) | Shape::Named { day: None, .. }
        )
    }

    /// Whether the finder offers it: every field within range in some reading.
    fn plausible(&self) -> bool {
        let day = |v: u32| (1..=31).contains(&v);
        let month = |v: u32| (1..=12).contains(&v);
        match self.shape {
            Shape::Numeric { a, b, c, sep } => {
                if sep == '.' && c.digits == 2 && (a.digits != 2 || b.digits != 2) {
                    // `1.2.34` is more often a section or a version number than a date.
                    return false;
                }
                (day(a.value) && month(b.value))
                    || (month(a.value) && day(b.value))
                    || (a.digits == 2 && c.digits == 2 && month(b.value) && day(c.value))
            }
            Shape::Ymd { y, m, d } if y.digits == 8 => {
                (1900..=2099).contains(&y.value)
                    && NaiveDate::from_ymd_opt(y.value as i32, m, d).is_some()
            }
            Shape::Ymd { m, d, .. } => month(m) && day(d),
            Shape::Ym { y, m } => month(m) && (1000..=2999).contains(&y.value),
            Shape::Named { day: d, .. } => d.is_none_or(day),
            Shape::Year(_) => false,
        }
    }
}

fn num_field(t: &Toks<'_>, i: usize, digits: &[usize]) -> Option<Field> {
    let (value, n) = t.num_upto(i, 8)?;
    digits.contains(&n).then_some(Field { value, digits: n })
}

/// Numeric dates, and `14/MAY/2017`: every alternative starting at `i`.
fn numeric(t: &Toks<'_>, i: usize, out: &mut Vec<(usize, Written)>) {
    let Some(first) = t.num(i) else {
        return;
    };
    let plain = |shape| Written {
        shape,
        weekday: None,
    };
    if first.len() == 8 {
        let digits = |r: Range<usize>| first.get(r).and_then(|s| s.parse::<u32>().ok());
        if let (Some(y), Some(m), Some(d)) = (digits(0..4), digits(4..6), digits(6..8)) {
            let y = Field {
                value: y,
                digits: 8,
            };
            out.push((i + 1, plain(Shape::Ymd { y, m, d })));
        }
        return;
    }
    let Some(sep) = t.other(i + 1).filter(|c| matches!(c, '/' | '-' | '.')) else {
        return;
    };
    if let Some(a) = num_field(t, i, &[1, 2]) {
        if let Some(b) = num_field(t, i + 2, &[1, 2]) {
            if t.other(i + 3) == Some(sep) {
                if let Some(c) = num_field(t, i + 4, &[2, 4]) {
                    out.push((i + 5, plain(Shape::Numeric { a, b, c, sep })));
                }
            }
        }
        if let Some((j, month)) = month_at(t, i + 2) {
            if t.other(j) == Some(sep) {
                if let Some(year) = num_field(t, j + 1, &[2, 4]) {
                    let shape = Shape::Named {
                        day: Some(a.value),
                        month,
                        year,
                    };
                    out.push((j + 2, plain(shape)));
                }
            }
        }
        if sep != '.' {
            if let Some(y) = num_field(t, i + 2, &[4]) {
                out.push((i + 3, plain(Shape::Ym { y, m: a.value })));
            }
        }
    }
    if let Some(y) = num_field(t, i, &[4]) {
        if let Some(m) = num_field(t, i + 2, &[1, 2]) {
            if t.other(i + 3) == Some(sep) {
                if let Some(d) = num_field(t, i + 4, &[1, 2]) {
                    let shape = Shape::Ymd {
                        y,
                        m: m.value,
                        d: d.value,
                    };
                    out.push((i + 5, plain(shape)));
                }
            }
            if sep != '.' {
                out.push((i + 3, plain(Shape::Ym { y, m: m.value })));
            }
        }
    }
}

/// `05 MAR 2018`, `4th March 2018`, `18 de abril de 2001`, `the 18th day of April, 2001`.
fn day_first(t: &Toks<'_>, i: usize) -> Option<(usize, Written)> {
    let mut j = i;
    let the = t.is_word(j, "the");
    if the {
        j = t.sp_req(j + 1)?;
    }
    let (mut j, day) = day_at(t, j)?;
    // German `4. März`.
    if t.is_other(j, '.') && t.sp_req(j + 1).is_some() {
        j += 1;
    }
    j = t.sp(j);
    let mut linked = false;
    if let Some(k) = t.words(j, &["day", "of"]) {
        j = t.sp_req(k)?;
        linked = true;
    } else if let Some(k) = t.word_in(j, &["of", "de"]) {
        j = t.sp_req(k)?;
        linked = true;
    }
    if the && !linked {
        return None;
    }
    let (j, month) = month_at(t, j)?;
    let mut k = t.gap(j);
    let mut de = false;
    if let Some(x) = t.word_in(k, &["de", "del"]) {
        k = t.sp_req(x)?;
        de = true;
    }
    let year = num_field(t, k, &[2, 4])?;
    if year.digits == 2 && (linked || de) {
        return None;
    }
    let shape = Shape::Named {
        day: Some(day),
        month,
        year,
    };
    Some((
        k + 1,
        Written {
            shape,
            weekday: None,
        },
    ))
}

/// `March 4, 2018`, `Sept. 5, 2019`, `March 4th 2018`.
fn month_first(t: &Toks<'_>, i: usize) -> Option<(usize, Written)> {
    let (j, month) = month_at(t, i)?;
    let (j, day) = day_at(t, t.sp(j))?;
    let k = t.gap(j);
    let year = num_field(t, k, &[4])?;
    let shape = Shape::Named {
        day: Some(day),
        month,
        year,
    };
    Some((
        k + 1,
        Written {
            shape,
            weekday: None,
        },
    ))
}

/// `March 2018`, `March, 2018`, `marzo de 2024`, `Mar-2018`.
fn month_year(t: &Toks<'_>, i: usize) -> Option<(usize, Written)> {
    let (j, month) = month_at(t, i)?;
    let mut k = if matches!(t.other(j), Some('-' | '/')) {
        j + 1
    } else {
        t.gap(j)
    };
    if let Some(x) = t.word_in(k, &["de", "del"]) {
        k = t.sp_req(x)?;
    }
    let year = num_field(t, k, &[4])?;
    let shape = Shape::Named {
        day: None,
        month,
        year,
    };
    Some((
        k + 1,
        Written {
            shape,
            weekday: None,
        },
    ))
}

/// Every date shape starting at token `i` (with a weekday before it or not), with its end.
pub(crate) fn alternatives(
    t: &Toks<'_>,
    i: usize,
    bare_year: bool,
    out: &mut Vec<(usize, Written)>,
) {
    numeric(t, i, out);
    out.extend(day_first(t, i));
    out.extend(month_first(t, i));
    out.extend(month_year(t, i));
    if bare_year {
        if let Some(y) = num_field(t, i, &[4]) {
            out.push((
                i + 1,
                Written {
                    shape: Shape::Year(y),
                    weekday: None,
                },
            ));
        }
    }
    if let Some((j, weekday)) = weekday_at(t, i) {
        let k = t.gap(j);
        let mut inner = Vec::new();
        numeric(t, k, &mut inner);
        inner.extend(day_first(t, k));
        inner.extend(month_first(t, k));
        for (end, w) in inner {
            if w.has_day() {
                out.push((
                    end,
                    Written {
                        weekday: Some(weekday),
                        ..w
                    },
                ));
            }
        }
    }
}

/// The longest date a finder offers at token `i`.
pub(crate) fn date_at(t: &Toks<'_>, i: usize) -> Option<(usize, Written)> {
    if !t.start_ok(i) {
        return None;
    }
    let mut all = Vec::new();
    alternatives(t, i, false, &mut all);
    // A weekday is read but not offered: the date is the value, and documents' own labels
    // leave it out (`FRIDAY,\n29-12-2017` is labelled `29-12-2017`).
    all.into_iter()
        .filter(|(end, w)| w.weekday.is_none() && w.plausible() && t.end_ok(*end))
        .max_by_key(|(end, _)| *end)
}

/// Every date in `t`, leftmost-longest, with its shape.
pub(crate) fn dates_in(t: &Toks<'_>) -> Vec<(Range<usize>, Written)> {
    scan(t, date_at)
}

/// Every date `text` writes, as byte ranges: each the longest expression at its place
/// (`05 MAR 2018` whole in `DATE: 05 MAR 2018 10:21`, never `2018` alone), in order, not
/// overlapping. Bare years and weekdays are not offered (`Wednesday, 29 November 2017` offers
/// `29 November 2017`; [`read_date`] reads both); numbers glued to other numbers
/// (`SP-18/06/04-101`) are not dates. See [`read_date`] for the forms.
pub fn find_dates(text: &str) -> Vec<Range<usize>> {
    dates_in(&Toks::new(text))
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

/// The shape of the whole of `t` (leading and trailing whitespace aside) as one date.
pub(crate) fn whole(t: &Toks<'_>) -> Option<Written> {
    let (a, b) = t.trimmed();
    if a == b {
        return None;
    }
    let mut all = Vec::new();
    alternatives(t, a, true, &mut all);
    all.into_iter().find(|(end, _)| *end == b).map(|(_, w)| w)
}

/// Reads `text` (one date, as [`find_dates`] finds them, surrounding whitespace aside) by the
/// document's `conventions`: its date order decides day against month, its reference date
/// the century of a two-digit year.
///
/// A numeric date whose day and month could be either way round (`04/05/2018`) is
/// [`DateError::Ambiguous`] when the order is [`DateOrder::Unknown`]; a field above 12 settles
/// it (`19/10/2018` is the 19th of October whatever the order is unknown). When the order is
/// known it decides, and a date it makes impossible (`12/13/2018` day first) is
/// [`DateError::Impossible`]. A four-digit year written first is always year, month, day.
///
/// Forms read (any case, whitespace runs and line breaks between words):
/// - numeric, day and month in the document's order ([`DateOrder`]): `19/10/2018`, `29-12-2017`,
///   `01-03-18`, `15.03.2018`, `04/18/2001`; year first: `2018-03-04`, `2018/3/4`, `20180304`;
///   month and year: `03/2018`, `2018-03`;
/// - a month by name (English, Spanish, French, German, Portuguese, Italian, full or
///   abbreviated with an optional dot): `05 MAR 2018`, `05 MAY 18`, `4th March 2018`,
///   `4. März 2018`, `18 de abril de 2001`, `1er mars 2018`, `14/MAY/2017`, `05-Mar-2018`,
///   `March 4, 2018`, `Sept. 5, 2019`, `the 18th day of April, 2001`, `5th of March 2018`,
///   `Wednesday, 29 November, 2017` (the weekday is checked), `March 2018`, `marzo de 2024`;
/// - a bare four-digit year, by [`read_date`] only (a finder offering every four-digit number
///   would offer amounts).
///
/// Two-digit years: within fifty years of the reference date's year
/// ([`Conventions::reference_date`]: from its year minus 50 to its year plus 49); without one,
/// 1969-2068, as chrono's `%y` reads them. They are read in numeric dates and after a day and
/// a month name (`05 MAY 18`), never after a month name alone (`May 18` is not a date).
pub fn read_date(text: &str, conventions: &Conventions) -> Result<DateRead, DateError> {
    let t = Toks::new(text);
    let w = whole(&t).ok_or_else(|| DateError::NotADate(text.trim().to_owned()))?;
    resolve(&w, conventions, text.trim())
}

/// Reads a written date by the conventions.
pub(crate) fn resolve(
    w: &Written,
    conventions: &Conventions,
    text: &str,
) -> Result<DateRead, DateError> {
    let impossible = |why: String| DateError::Impossible {
        text: text.to_owned(),
        why,
    };
    let full = |f: Field| match f.digits {
        2 => conventions.full_year(f.value),
        _ => f.value as i32,
    };
    let read = match w.shape {
        Shape::Year(y) => Ok(month_of(y.value as i32, None).map_err(impossible)?),
        Shape::Ym { y, m } => Ok(month_of(full(y), Some(m)).map_err(impossible)?),
        Shape::Named {
            day: None,
            month,
            year,
        } => Ok(month_of(full(year), Some(month)).map_err(impossible)?),
        Shape::Named {
            day: Some(d),
            month,
            year,
        } => day_of(full(year), month, d).map_err(impossible),
        Shape::Ymd { y, m, d } => day_of(y.value as i32, m, d).map_err(impossible),
        Shape::Numeric { a, b, c, .. } => {
            return numeric_date(a, b, c, w.weekday, conventions, text);
        }
    }?;
    check_weekday(read, w.weekday).map_err(impossible)
}

fn month_of(year: i32, month: Option<u32>) -> Result<DateRead, String> {
    if let Some(m) = month {
        if !(1..=12).contains(&m) {
            return Err(format!("there is no month {m}"));
        }
    }
    DateRead::new(year, month, None).ok_or_else(|| format!("year {year} is out of range"))
}

fn day_of(year: i32, month: u32, day: u32) -> Result<DateRead, String> {
    if !(1..=12).contains(&month) {
        return Err(format!("there is no month {month}"));
    }
    DateRead::new(year, Some(month), Some(day))
        .ok_or_else(|| format!("{year:04}-{month:02} has no day {day}"))
}

fn check_weekday(read: DateRead, weekday: Option<Weekday>) -> Result<DateRead, String> {
    match (read.date(), weekday) {
        (Some(d), Some(w)) if d.weekday() != w => Err(format!(
            "{} is a {}, not a {}",
            read.iso(),
            weekday_name(d.weekday()),
            weekday_name(w)
        )),
        _ => Ok(read),
    }
}

fn weekday_name(w: Weekday) -> &'static str {
    match w {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

fn numeric_date(
    a: Field,
    b: Field,
    c: Field,
    weekday: Option<Weekday>,
    conventions: &Conventions,
    text: &str,
) -> Result<DateRead, DateError> {
    let impossible = |why: String| DateError::Impossible {
        text: text.to_owned(),
        why,
    };
    let year = || match c.digits {
        2 => conventions.full_year(c.value),
        _ => c.value as i32,
    };
    let (a, b) = (a.value, b.value);
    let order_note = |o: &str| format!(" (the document writes dates {o} first)");
    let one = |m: u32, d: u32, y: i32, note: String| {
        day_of(y, m, d)
            .map_err(|e| impossible(format!("{e}{note}")))
            .and_then(|r| check_weekday(r, weekday).map_err(impossible))
    };
    match conventions.date_order() {
        DateOrder::YearFirst if c.digits == 2 => {
            let y = conventions.full_year(a);
            return one(b, c.value, y, order_note("year"));
        }
        DateOrder::DayFirst => return one(b, a, year(), order_note("day")),
        DateOrder::MonthFirst => return one(a, b, year(), order_note("month")),
        _ => {}
    }
    let y = year();
    if a == b {
        return one(b, a, y, String::new());
    }
    let day_first = (b <= 12).then_some((b, a));
    let month_first = (a <= 12).then_some((a, b));
    match (day_first, month_first) {
        (None, None) => Err(impossible(format!("neither {a} nor {b} is a month"))),
        (Some((m, d)), None) | (None, Some((m, d))) => one(m, d, y, String::new()),
        (Some((m1, d1)), Some((m2, d2))) => {
            let readings: Vec<DateRead> = [(m1, d1), (m2, d2)]
                .into_iter()
                .filter_map(|(m, d)| DateRead::new(y, Some(m), Some(d)))
                .collect();
            let fitting: Vec<DateRead> = readings
                .iter()
                .copied()
                .filter(|r| check_weekday(*r, weekday).is_ok())
                .collect();
            match fitting.as_slice() {
                [one] => Ok(*one),
                [] if weekday.is_some() => Err(impossible(format!(
                    "neither {} is a {}",
                    readings_list(&readings),
                    weekday.map_or("", weekday_name)
                ))),
                _ => Err(DateError::Ambiguous {
                    text: text.to_owned(),
                    readings,
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        find_dates(text)
            .into_iter()
            .map(|r| text.get(r).unwrap_or("?"))
            .collect()
    }

    fn iso(text: &str, c: &Conventions) -> String {
        match read_date(text, c) {
            Ok(d) => d.iso(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn day_first_receipts() {
        let c = Conventions::new().with_date_order(DateOrder::DayFirst);
        for (text, want) in [
            ("19/10/2018", "2018-10-19"),
            ("29-12-2017", "2017-12-29"),
            ("01-03-18", "2018-03-01"),
            ("15.03.2018", "2018-03-15"),
            ("04/05/2018", "2018-05-04"),
            ("05 MAR 2018", "2018-03-05"),
            ("05 MAY 18", "2018-05-05"),
            ("14/MAY/2017", "2017-05-14"),
            ("30 Mar 2018", "2018-03-30"),
            ("2018-03-04", "2018-03-04"),
            ("20180304", "2018-03-04"),
            ("  9/3/07 ", "2007-03-09"),
        ] {
            assert_eq!(iso(text, &c), want, "{text}");
        }
    }

    #[test]
    fn month_first_documents() {
        let c = Conventions::new().with_date_order(DateOrder::MonthFirst);
        for (text, want) in [
            ("04/18/2001", "2001-04-18"),
            ("04/05/2018", "2018-04-05"),
            ("9/3/07", "2007-09-03"),
            ("April 18, 2001", "2001-04-18"),
            ("the 18th day of April, 2001", "2001-04-18"),
            ("18 de abril de 2001", "2001-04-18"),
            ("Sept. 5, 2019", "2019-09-05"),
            ("March 2018", "2018-03"),
            ("marzo de 2024", "2024-03"),
            ("2018", "2018"),
            ("03/2018", "2018-03"),
        ] {
            assert_eq!(iso(text, &c), want, "{text}");
        }
    }

    #[test]
    fn month_names_in_other_languages() {
        let c = Conventions::new();
        for (text, want) in [
            ("1er mars 2018", "2018-03-01"),
            ("4. März 2018", "2018-03-04"),
            ("18 aprile 2001", "2001-04-18"),
            ("5 de março de 2020", "2020-03-05"),
            ("1º de enero de 2024", "2024-01-01"),
            ("18 de abril del 2001", "2001-04-18"),
            ("14 févr. 2019", "2019-02-14"),
            ("Miércoles, 3 de enero de 2024", "2024-01-03"),
            ("janvier 2020", "2020-01"),
            ("DEC 2019", "2019-12"),
        ] {
            assert_eq!(iso(text, &c), want, "{text}");
        }
    }

    #[test]
    fn unknown_order_is_ambiguous_only_when_it_must_be() {
        let c = Conventions::new();
        assert_eq!(iso("19/10/2018", &c), "2018-10-19");
        assert_eq!(iso("10/19/2018", &c), "2018-10-19");
        assert_eq!(iso("05/05/2018", &c), "2018-05-05");
        match read_date("04/05/2018", &c) {
            Err(DateError::Ambiguous { readings, .. }) => {
                let isos: Vec<String> = readings.iter().map(DateRead::iso).collect();
                assert_eq!(isos, ["2018-05-04", "2018-04-05"]);
            }
            other => panic!("{other:?}"),
        }
        // A weekday settles it.
        assert_eq!(iso("Friday 04/05/2018", &c), "2018-05-04");
        assert_eq!(iso("Thursday, 04/05/2018", &c), "2018-04-05");
    }

    #[test]
    fn impossible_dates_are_reported() {
        let c = Conventions::new().with_date_order(DateOrder::DayFirst);
        for text in [
            "31/02/2018",
            "12/13/2018",
            "2018-13-01",
            "29 Feb 2019",
            "13/13/2018",
        ] {
            assert!(
                matches!(read_date(text, &c), Err(DateError::Impossible { .. })),
                "{text}: {:?}",
                read_date(text, &c)
            );
        }
        assert!(matches!(
            read_date("13/14/2018", &Conventions::new()),
            Err(DateError::Impossible { .. })
        ));
        let err = read_date("Tuesday, 5 March 2018", &c).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`Tuesday, 5 March 2018` is not a calendar date: 2018-03-05 is a Monday, not a Tuesday"
        );
        assert_eq!(iso("29 Feb 2020", &c), "2020-02-29");
    }

    #[test]
    fn not_dates() {
        let c = Conventions::new();
        for text in [
            "",
            "hello",
            "May 18",
            "3 years",
            "05 MAR 2018 10:21",
            "12345",
            "1/2",
            "the 5 March 2018",
        ] {
            assert!(
                matches!(read_date(text, &c), Err(DateError::NotADate(_))),
                "{text}: {:?}",
                read_date(text, &c)
            );
        }
    }

    #[test]
    fn two_digit_years_follow_the_pivot() {
        let c = Conventions::new().with_date_order(DateOrder::DayFirst);
        assert_eq!(iso("01/01/68", &c), "2068-01-01");
        assert_eq!(iso("01/01/69", &c), "1969-01-01");
        let reference = NaiveDate::from_ymd_opt(2090, 6, 1).unwrap_or_default();
        let c = c.with_reference_date(reference);
        assert_eq!(iso("01/01/41", &c), "2041-01-01");
        assert_eq!(iso("01/01/40", &c), "2040-01-01");
        assert_eq!(iso("01/01/39", &c), "2139-01-01");
    }

    #[test]
    fn finders_take_the_longest_date() {
        assert_eq!(found("DATE: 05 MAR 2018 10:21"), ["05 MAR 2018"]);
        assert_eq!(found("made on April 18, 2001 by"), ["April 18, 2001"]);
        assert_eq!(
            found("made as of the 18th day of April, 2001, between"),
            ["the 18th day of April, 2001"]
        );
        assert_eq!(
            found("dated this 21st\nday of May, 2009."),
            ["21st\nday of May, 2009"]
        );
        assert_eq!(
            found(" WEDNESDAY, 29 NOVEMBER, 2017 4:18:55"),
            ["29 NOVEMBER, 2017"]
        );
        assert_eq!(
            read_date("WEDNESDAY, 29 NOVEMBER, 2017", &Conventions::new()).map(|d| d.iso()),
            Ok("2017-11-29".into())
        );
        assert_eq!(found("19/10/2018 20:49:59 #01"), ["19/10/2018"]);
        assert_eq!(found("05 MAY 18 18:06:40"), ["05 MAY 18"]);
        assert_eq!(found("el 18 de abril de 2001."), ["18 de abril de 2001"]);
        assert_eq!(found("Total 2018 items in March 2018"), ["March 2018"]);
        // Not dates: numbers glued to others, phone numbers, amounts, versions.
        assert!(found("SP-NULL-18/06/04-1016956").is_empty());
        assert!(found("TEL: 03-89410243 FAX:03- 55423213").is_empty());
        assert!(found("1300-13-1300 and 10.00 and v1.2.3 and 2018").is_empty());
        assert!(found("13/13/2018 or 00/00/0000").is_empty());
        assert!(found("02353830 and 50346155").is_empty());
    }
}
