//! The written forms of a period: the token-level readers that find `Q3 FY2024`, `the third
//! quarter of 2024`, `the quarter ending September 30` and the rest, each as a [`Shape`] still
//! to be placed. Apart from the period types (`types`) and the placing in the parent
//! ([`super::read_period`]), which never look at the tokens.

use super::types::{PeriodKind, Unit};
use crate::read::date::{self, Field, Written};
use crate::read::token::Toks;
use crate::read::words::{day_at, month_at, ordinal_at};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum YearSpec {
    Given(Field),
    Relative(i32),
    Missing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// A full date: its month and year name the period.
    Date(Written),
    /// A month (and a day, or none) with the year given apart or not at all: `the quarter
    /// ending September 30`, `the December quarter of 2025`.
    Month(u32, YearSpec),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Fixed {
        kind: PeriodKind,
        year: YearSpec,
        fiscal: bool,
    },
    Relative {
        unit: Unit,
        offset: i32,
        fiscal: bool,
    },
    Ending {
        unit: Unit,
        date: Ending,
        fiscal: bool,
        /// The ordinal written before the unit (`the second quarter ended June 30, 2025`): it
        /// must be the one the date ends.
        ordinal: Option<u8>,
    },
}

/// An alternative: its end, its shape, and whether the finder offers it.
pub(super) type Alt = (usize, Shape, bool);

fn article(t: &Toks<'_>, i: usize) -> usize {
    t.word_in(i, &["the", "el", "la"])
        .and_then(|j| t.sp_req(j))
        .unwrap_or(i)
}

fn num_field(t: &Toks<'_>, i: usize, digits: &[usize]) -> Option<Field> {
    let (value, n) = t.num_upto(i, 4)?;
    digits.contains(&n).then_some(Field { value, digits: n })
}

/// `FY24`, `FY2024`, `FY 2024`, `FY'24`, `FY-24`.
fn fy(t: &Toks<'_>, i: usize) -> Option<(usize, Field)> {
    if !t.is_word(i, "fy") {
        return None;
    }
    let j = i + 1;
    if let Some(f) = num_field(t, j, &[2, 4]) {
        return Some((j + 1, f));
    }
    let k = match t.other(j) {
        Some('\'' | '’' | '-') => j + 1,
        _ => t.sp_req(j)?,
    };
    num_field(t, k, &[2, 4]).map(|f| (k + 1, f))
}

/// Words naming a year before its number: `(end, fiscal)`.
fn year_word(t: &Toks<'_>, i: usize) -> Option<(usize, bool)> {
    for (ws, fiscal) in [
        (&["fiscal", "year"][..], true),
        (&["financial", "year"], true),
        (&["calendar", "year"], false),
        (&["full", "year"], false),
        (&["ejercicio", "fiscal"], true),
        (&["año", "fiscal"], true),
        (&["fiscal"], true),
        (&["calendar"], false),
        (&["year"], false),
        (&["ejercicio"], true),
        (&["año"], false),
    ] {
        if let Some(e) = t.words(i, ws) {
            return Some((e, fiscal));
        }
    }
    // `full-year`
    if t.is_word(i, "full") && t.is_other(i + 1, '-') && t.is_word(i + 2, "year") {
        return Some((i + 3, false));
    }
    None
}

/// A year by number: `2024`, `fiscal 2024`, `FY24`, `fiscal year 2024`, `the year 2024`,
/// `ejercicio 2025`: `(end, year, fiscal, bare)`.
fn year_given(t: &Toks<'_>, i: usize) -> Option<(usize, Field, bool, bool)> {
    if let Some(f) = num_field(t, i, &[4]) {
        return Some((i + 1, f, false, true));
    }
    let j = article(t, i);
    if let Some((e, f)) = fy(t, j) {
        return Some((e, f, true, false));
    }
    let (k, fiscal) = year_word(t, j)?;
    let k = t.sp_req(k)?;
    if let Some((e, f)) = fy(t, k) {
        return Some((e, f, true, false));
    }
    num_field(t, k, &[4]).map(|f| (k + 1, f, fiscal, false))
}

/// A unit word: `(end, unit, fiscal)`.
fn unit_word(t: &Toks<'_>, i: usize) -> Option<(usize, Unit, bool)> {
    if let Some((e, fiscal)) = year_word(t, i) {
        if !t.is_word(i, "calendar") || e > i + 1 {
            return Some((e, Unit::Year, fiscal));
        }
    }
    if let Some(e) = t.words(i, &["half", "year"]) {
        return Some((e, Unit::Half, false));
    }
    if t.is_word(i, "half") && t.is_other(i + 1, '-') && t.is_word(i + 2, "year") {
        return Some((i + 3, Unit::Half, false));
    }
    let w = t.word(i)?;
    let unit = match w {
        "quarter" | "qtr" | "trimestre" => Unit::Quarter,
        "half" | "semestre" => Unit::Half,
        "month" | "mes" => Unit::Month,
        _ => return None,
    };
    Some((i + 1, unit, false))
}

fn pre_relative(w: &str) -> Option<i32> {
    Some(match w {
        "next" | "upcoming" | "coming" | "following" | "subsequent" | "próximo" | "próxima"
        | "proximo" | "proxima" | "siguiente" => 1,
        "this" | "current" | "present" | "este" | "esta" | "presente" => 0,
        "last" | "previous" | "prior" | "preceding" | "past" | "anterior" | "pasado" | "pasada" => {
            -1
        }
        _ => return None,
    })
}

/// After a Spanish unit: `próximo`, `actual`, `en curso`, `que viene`, `anterior`: `(end, offset)`.
fn post_relative(t: &Toks<'_>, i: usize) -> Option<(usize, i32)> {
    if let Some(e) = t.words(i, &["en", "curso"]) {
        return Some((e, 0));
    }
    if let Some(e) = t.words(i, &["que", "viene"]) {
        return Some((e, 1));
    }
    let off = match t.word(i)? {
        "próximo" | "próxima" | "proximo" | "proxima" | "siguiente" => 1,
        "actual" | "corriente" => 0,
        "anterior" | "pasado" | "pasada" => -1,
        _ => return None,
    };
    Some((i + 1, off))
}

/// `next quarter`, `the coming fiscal year`, `el próximo trimestre`, `el ejercicio actual`.
fn relative(t: &Toks<'_>, i: usize) -> Option<(usize, Unit, i32, bool)> {
    let j = article(t, i);
    if let Some(off) = t.word(j).and_then(pre_relative) {
        let mut k = t.sp_req(j + 1)?;
        let mut fiscal = false;
        if t.is_word(k, "fiscal") && t.sp_req(k + 1).is_some_and(|x| unit_word(t, x).is_some()) {
            k = t.sp_req(k + 1)?;
            fiscal = true;
        }
        let (e, unit, uf) = unit_word(t, k)?;
        return Some((e, unit, off, fiscal || uf));
    }
    let (mut e, unit, mut fiscal) = unit_word(t, j)?;
    if let Some(x) = t.sp_req(e).filter(|&x| t.is_word(x, "fiscal")) {
        e = x + 1;
        fiscal = true;
    }
    let k = t.sp_req(e)?;
    let (e, off) = post_relative(t, k)?;
    Some((e, unit, off, fiscal))
}

/// A year after a period's name: `of 2024`, `2024`, `fiscal 2024`, `de 2024`, `del ejercicio
/// 2025`, `of next year`, `del próximo año`, `of the year`: every reading, with its end.
fn year_after(t: &Toks<'_>, j: usize) -> Vec<(usize, YearSpec, bool)> {
    let mut out = Vec::new();
    let k = t.gap(j);
    let linked = t
        .word_in(k, &["of", "in", "for", "de", "del"])
        .and_then(|x| t.sp_req(x));
    for (at, link) in [(Some(k), false), (linked, true)] {
        let Some(at) = at else { continue };
        if let Some((e, f, fiscal, _)) = year_given(t, at) {
            out.push((e, YearSpec::Given(f), fiscal));
        }
        if let Some((e, unit, off, fiscal)) = relative(t, at) {
            if unit == Unit::Year {
                out.push((e, YearSpec::Relative(off), fiscal));
            }
        }
        if link {
            // `of the year`, `del año`, `of the fiscal year`, `del ejercicio`
            let a = article(t, at);
            if let Some((e, fiscal)) = year_word(t, a) {
                out.push((e, YearSpec::Missing, fiscal));
            }
        }
    }
    out
}

/// Quarter and half designators: `Q3`, `3Q`, `T3`, `3T`, `H1`, `1H`, `S1`, `1S`:
/// `(end, kind, needs_year)`.
fn short(t: &Toks<'_>, i: usize) -> Option<(usize, PeriodKind, bool)> {
    let (letter, n) = if let Some(w) = t.word(i) {
        (w, t.num_upto(i + 1, 1)?.0)
    } else {
        let (n, _) = t.num_upto(i, 1)?;
        (t.word(i + 1)?, n)
    };
    let n = n as u8;
    let (kind, needs_year) = match letter {
        "q" => (PeriodKind::Quarter(n), false),
        "t" => (PeriodKind::Quarter(n), true),
        "h" => (PeriodKind::Half(n), false),
        "s" => (PeriodKind::Half(n), true),
        _ => return None,
    };
    kind.valid().then_some((i + 2, kind, needs_year))
}

/// The year right after a designator: `3Q24`, `Q3'24`, `Q3 2024`, `Q3-2024`, `Q3 FY24`.
fn short_year(t: &Toks<'_>, j: usize) -> Option<(usize, Field, bool)> {
    if let Some(f) = num_field(t, j, &[2]) {
        return Some((j + 1, f, false));
    }
    if matches!(t.other(j), Some('\'' | '’')) {
        return num_field(t, j + 1, &[2]).map(|f| (j + 2, f, false));
    }
    let k = if t.is_other(j, '-') {
        j + 1
    } else {
        t.sp_req(j)?
    };
    if matches!(t.other(k), Some('\'' | '’')) {
        return num_field(t, k + 1, &[2]).map(|f| (k + 2, f, false));
    }
    year_given(t, k).map(|(e, f, fiscal, _)| (e, f, fiscal))
}

fn designators(t: &Toks<'_>, i: usize, out: &mut Vec<Alt>) {
    let j = article(t, i);
    if let Some((e, kind, needs_year)) = short(t, j) {
        if let Some((end, f, fiscal)) = short_year(t, e) {
            out.push((end, fixed(kind, YearSpec::Given(f), fiscal), true));
        }
        for (end, year, fiscal) in year_after(t, e) {
            out.push((end, fixed(kind, year, fiscal), true));
        }
        out.push((e, fixed(kind, YearSpec::Missing, false), !needs_year));
    }
    // `2024 Q3`, `FY24 Q3`, `FY2024-Q3`
    let year = fy(t, j)
        .map(|(e, f)| (e, f, true))
        .or_else(|| num_field(t, j, &[4]).map(|f| (j + 1, f, false)));
    if let Some((e, f, fiscal)) = year {
        let k = if t.is_other(e, '-') { e + 1 } else { t.sp(e) };
        if let Some((end, kind, _)) = short(t, k) {
            out.push((end, fixed(kind, YearSpec::Given(f), fiscal), true));
        }
    }
}

fn fixed(kind: PeriodKind, year: YearSpec, fiscal: bool) -> Shape {
    Shape::Fixed { kind, year, fiscal }
}

/// `third quarter`, `fiscal third quarter`, `third fiscal quarter`, `fourth-quarter`,
/// `first half`, `primer semestre`, `tercer trimestre fiscal`: `(end, kind, fiscal)`.
fn ordinal_period(t: &Toks<'_>, i: usize) -> Option<(usize, PeriodKind, bool)> {
    let mut j = i;
    let mut fiscal = false;
    if t.is_word(j, "fiscal") {
        j = t.sp_req(j + 1)?;
        fiscal = true;
    }
    let (k, n) = ordinal_at(t, j)?;
    let mut k = if t.is_other(k, '-') {
        k + 1
    } else {
        t.sp_req(k)?
    };
    if t.is_word(k, "fiscal") {
        k = t.sp_req(k + 1)?;
        fiscal = true;
    }
    let (mut e, unit, _) = unit_word(t, k)?;
    let kind = match unit {
        Unit::Quarter => PeriodKind::Quarter(n),
        Unit::Half => PeriodKind::Half(n),
        _ => return None,
    };
    if !kind.valid() {
        return None;
    }
    if let Some(x) = t.sp_req(e).filter(|&x| t.is_word(x, "fiscal")) {
        if year_given(t, x).is_none() {
            e = x + 1;
            fiscal = true;
        }
    }
    Some((e, kind, fiscal))
}

fn named_periods(t: &Toks<'_>, i: usize, out: &mut Vec<Alt>) {
    let j = article(t, i);
    if let Some((e, kind, fiscal)) = ordinal_period(t, j) {
        out.push((e, fixed(kind, YearSpec::Missing, fiscal), true));
        for (end, year, f) in year_after(t, e) {
            out.push((end, fixed(kind, year, fiscal || f), true));
        }
    }
    // `the December quarter`
    if let Some((e, m)) = month_at(t, j) {
        if let Some(q) = t.sp_req(e).filter(|&x| t.is_word(x, "quarter")) {
            let e = q + 1;
            let shape = |year| Shape::Ending {
                unit: Unit::Quarter,
                date: Ending::Month(m, year),
                fiscal: false,
                ordinal: None,
            };
            out.push((e, shape(YearSpec::Missing), true));
            for (end, year, _) in year_after(t, e) {
                out.push((end, shape(year), true));
            }
        }
    }
    // Months: `March 2025`, `marzo de 2025`, `the month of March`, `el mes de marzo`.
    let (k, of) = match t
        .words(j, &["month", "of"])
        .or_else(|| t.words(j, &["mes", "de"]))
    {
        Some(x) => (t.sp_req(x), true),
        None => (Some(j), false),
    };
    if let Some((e, m)) = k.and_then(|k| month_at(t, k)) {
        let kind = PeriodKind::Month(m as u8);
        out.push((e, fixed(kind, YearSpec::Missing, false), of));
        for (end, year, fiscal) in year_after(t, e) {
            if matches!(year, YearSpec::Given(f) if f.digits == 4) || of {
                out.push((end, fixed(kind, year, fiscal), true));
            }
        }
    }
    // Years: `fiscal 2025`, `FY25`, `ejercicio 2025`; a bare `2025` only when read.
    if let Some((e, f, fiscal, bare)) = year_given(t, j) {
        out.push((
            e,
            fixed(PeriodKind::Year, YearSpec::Given(f), fiscal),
            !bare,
        ));
    }
    if let Some((e, unit, offset, fiscal)) = relative(t, i) {
        out.push((
            e,
            Shape::Relative {
                unit,
                offset,
                fiscal,
            },
            true,
        ));
    }
}

/// Words that say a period ends on a date.
fn ending_words(t: &Toks<'_>, i: usize) -> Option<usize> {
    for ws in [
        &["that", "ended"][..],
        &["that", "ends"],
        &["which", "ended"],
        &["which", "ends"],
        &["ending"],
        &["ended"],
        &["que", "termina"],
        &["que", "terminó"],
        &["que", "termino"],
        &["que", "terminará"],
        &["que", "finaliza"],
        &["que", "finalizó"],
        &["que", "cierra"],
        &["que", "cerró"],
        &["terminado"],
        &["terminada"],
        &["finalizado"],
        &["finalizada"],
        &["cerrado"],
        &["cerrada"],
        &["concluido"],
    ] {
        if let Some(e) = t.words(i, ws) {
            return Some(e);
        }
    }
    None
}

/// `the quarter ending September 30, 2024`, `three months ended March 31, 2025`, `the fiscal
/// year ended September 30, 2024`, `el trimestre que termina el 31 de diciembre de 2025`.
fn ending(t: &Toks<'_>, i: usize, out: &mut Vec<Alt>) {
    let j = article(t, i);
    let mut k = j;
    let mut fiscal = false;
    if t.is_word(k, "fiscal") {
        if let Some(x) = t.sp_req(k + 1) {
            k = x;
            fiscal = true;
        }
    }
    // `the second quarter ended June 30, 2025`: the ordinal, checked against the date.
    let mut ordinal = None;
    if let Some((x, n)) = ordinal_at(t, k) {
        match t.sp_req(x) {
            Some(y) => {
                k = y;
                ordinal = Some(n);
            }
            None => return,
        }
    }
    let (e, unit) = if let Some(e) = t
        .words(k, &["three", "months"])
        .or_else(|| t.words(k, &["tres", "meses"]))
    {
        (e, Unit::Quarter)
    } else if let Some(e) = t
        .words(k, &["six", "months"])
        .or_else(|| t.words(k, &["seis", "meses"]))
    {
        (e, Unit::Half)
    } else if let Some(e) = t
        .words(k, &["twelve", "months"])
        .or_else(|| t.words(k, &["doce", "meses"]))
    {
        (e, Unit::Year)
    } else {
        match unit_word(t, k) {
            Some((e, unit, f)) if unit != Unit::Month => {
                fiscal |= f;
                (e, unit)
            }
            _ => return,
        }
    };
    let mut e = e;
    if let Some(x) = t.sp_req(e).filter(|&x| t.is_word(x, "fiscal")) {
        e = x + 1;
        fiscal = true;
    }
    let Some(w) = t.sp_req(e).and_then(|x| ending_words(t, x)) else {
        return;
    };
    let Some(mut d) = t.sp_req(w) else {
        return;
    };
    if let Some(x) = t.word_in(d, &["on", "el", "al"]).and_then(|x| t.sp_req(x)) {
        d = x;
    }
    let mut dates = Vec::new();
    date::alternatives(t, d, false, &mut dates);
    for (end, w) in dates {
        let has_day = !matches!(
            w.shape,
            date::Shape::Ym { .. } | date::Shape::Year(_) | date::Shape::Named { day: None, .. }
        );
        if has_day {
            out.push((
                end,
                Shape::Ending {
                    unit,
                    date: Ending::Date(w),
                    fiscal,
                    ordinal,
                },
                true,
            ));
        }
    }
    // `September 30`, `30 de septiembre`, without a year.
    let month_day = month_at(t, d)
        .and_then(|(x, m)| day_at(t, t.sp(x)).map(|(end, _)| (end, m)))
        .or_else(|| {
            let (x, _) = day_at(t, d)?;
            let mut y = t.sp(x);
            if let Some(z) = t.word_in(y, &["de", "of"]) {
                y = t.sp_req(z)?;
            }
            month_at(t, y)
        });
    if let Some((end, m)) = month_day {
        out.push((
            end,
            Shape::Ending {
                unit,
                date: Ending::Month(m, YearSpec::Missing),
                fiscal,
                ordinal,
            },
            true,
        ));
    }
}

pub(super) fn alternatives(t: &Toks<'_>, i: usize, out: &mut Vec<Alt>) {
    designators(t, i, out);
    named_periods(t, i, out);
    ending(t, i, out);
}

pub(super) fn period_at(t: &Toks<'_>, i: usize) -> Option<(usize, Shape)> {
    if !t.start_ok(i) {
        return None;
    }
    let mut all = Vec::new();
    alternatives(t, i, &mut all);
    all.into_iter()
        .filter(|(end, _, offered)| *offered && t.end_ok(*end))
        .max_by_key(|(end, _, _)| *end)
        .map(|(end, s, _)| (end, s))
}
