//! The period types: [`PeriodKind`] (which period of its year), [`PeriodRead`] (a period of a
//! year, fiscal or not) and `Unit` (the kinds of period, finest first), with their arithmetic.
//! Read by the conventions (a reference period), the reader (`period`) and the forms (`forms`).

use std::fmt;

use chrono::{Datelike, NaiveDate};

/// Which period of its year a period is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeriodKind {
    /// A month, 1-12.
    Month(u8),
    /// A quarter, 1-4.
    Quarter(u8),
    /// A half, 1-2.
    Half(u8),
    /// The whole year.
    Year,
}

impl PeriodKind {
    pub(super) fn valid(self) -> bool {
        match self {
            PeriodKind::Month(m) => (1..=12).contains(&m),
            PeriodKind::Quarter(q) => (1..=4).contains(&q),
            PeriodKind::Half(h) => (1..=2).contains(&h),
            PeriodKind::Year => true,
        }
    }

    pub(super) fn unit(self) -> Unit {
        match self {
            PeriodKind::Month(_) => Unit::Month,
            PeriodKind::Quarter(_) => Unit::Quarter,
            PeriodKind::Half(_) => Unit::Half,
            PeriodKind::Year => Unit::Year,
        }
    }

    /// The first month of the period in its year's numbering.
    pub(super) fn first_month(self) -> u32 {
        match self {
            PeriodKind::Month(m) => m as u32,
            PeriodKind::Quarter(q) => 3 * q as u32 - 2,
            PeriodKind::Half(h) => 6 * h as u32 - 5,
            PeriodKind::Year => 1,
        }
    }

    pub(super) fn last_month(self) -> u32 {
        match self {
            PeriodKind::Month(m) => m as u32,
            PeriodKind::Quarter(q) => 3 * q as u32,
            PeriodKind::Half(h) => 6 * h as u32,
            PeriodKind::Year => 12,
        }
    }
}

/// The kinds of period, finest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Unit {
    Month,
    Quarter,
    Half,
    Year,
}

impl Unit {
    /// The period of this unit that holds month `m` (1-12).
    pub(super) fn holding(self, m: u32) -> PeriodKind {
        match self {
            Unit::Month => PeriodKind::Month(m as u8),
            Unit::Quarter => PeriodKind::Quarter(((m - 1) / 3 + 1) as u8),
            Unit::Half => PeriodKind::Half(((m - 1) / 6 + 1) as u8),
            Unit::Year => PeriodKind::Year,
        }
    }

    pub(super) fn per_year(self) -> i64 {
        match self {
            Unit::Month => 12,
            Unit::Quarter => 4,
            Unit::Half => 2,
            Unit::Year => 1,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Unit::Month => "month",
            Unit::Quarter => "quarter",
            Unit::Half => "half",
            Unit::Year => "year",
        }
    }
}

/// A period a document names: a month, quarter, half or whole year of a year, fiscal or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeriodRead {
    pub(super) kind: PeriodKind,
    pub(super) year: i32,
    pub(super) fiscal: bool,
}

impl PeriodRead {
    /// The period; `None` when `kind`'s number is out of range (`Quarter(5)`).
    pub fn new(kind: PeriodKind, year: i32, fiscal: bool) -> Option<PeriodRead> {
        kind.valid().then_some(PeriodRead { kind, year, fiscal })
    }

    /// Which period of the year it is.
    pub fn kind(&self) -> PeriodKind {
        self.kind
    }

    /// The year (of a fiscal period, the fiscal year's number as the document writes it).
    pub fn year(&self) -> i32 {
        self.year
    }

    /// Whether the document calls it fiscal (`fiscal`, `FY`, `ejercicio`).
    pub fn fiscal(&self) -> bool {
        self.fiscal
    }

    /// The quarter (1-4), when it is one.
    pub fn quarter_number(&self) -> Option<u8> {
        match self.kind {
            PeriodKind::Quarter(q) => Some(q),
            _ => None,
        }
    }

    /// The calendar month holding `date`, as a period (a reference for
    /// [`read_period`](super::read_period)).
    pub fn month_of(date: NaiveDate) -> PeriodRead {
        PeriodRead {
            kind: PeriodKind::Month(date.month() as u8),
            year: date.year(),
            fiscal: false,
        }
    }

    /// The period `n` periods of its kind later (earlier for a negative `n`): Q4 2024 plus one
    /// is Q1 2025. `None` when the year would overflow.
    pub fn offset(&self, n: i32) -> Option<PeriodRead> {
        let unit = self.kind.unit();
        let per = unit.per_year();
        let index = match self.kind {
            PeriodKind::Month(k) | PeriodKind::Quarter(k) | PeriodKind::Half(k) => k as i64 - 1,
            PeriodKind::Year => 0,
        };
        let at = (self.year as i64)
            .checked_mul(per)?
            .checked_add(index)?
            .checked_add(n as i64)?;
        let year = i32::try_from(at.div_euclid(per)).ok()?;
        let k = (at.rem_euclid(per) + 1) as u8;
        let kind = match unit {
            Unit::Month => PeriodKind::Month(k),
            Unit::Quarter => PeriodKind::Quarter(k),
            Unit::Half => PeriodKind::Half(k),
            Unit::Year => PeriodKind::Year,
        };
        Some(PeriodRead {
            kind,
            year,
            ..*self
        })
    }

    /// Whether this period starts after `other` ends (months compared in their years'
    /// numbering): Q4 2024 is after Q3 2024, the year 2024 is not after Q1 2024.
    pub fn is_after(&self, other: &PeriodRead) -> bool {
        self.span().0 > other.span().1
    }

    /// The period of `unit` that holds this one; `None` when this one is longer.
    pub(super) fn within(&self, unit: Unit) -> Option<PeriodRead> {
        (unit >= self.kind.unit()).then(|| PeriodRead {
            kind: unit.holding(self.kind.first_month()),
            ..*self
        })
    }

    /// Months since year 0 at the period's start and end, in its year's numbering.
    pub(super) fn span(&self) -> (i64, i64) {
        let base = self.year as i64 * 12;
        (
            base + self.kind.first_month() as i64 - 1,
            base + self.kind.last_month() as i64 - 1,
        )
    }
}

impl fmt::Display for PeriodRead {
    /// `Q3 2024`, `H1 FY2025`, `FY2025`, `2025`, `2025-03`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fy = if self.fiscal { "FY" } else { "" };
        match self.kind {
            PeriodKind::Quarter(q) => write!(f, "Q{q} {fy}{}", self.year),
            PeriodKind::Half(h) => write!(f, "H{h} {fy}{}", self.year),
            PeriodKind::Year => write!(f, "{fy}{}", self.year),
            PeriodKind::Month(m) => write!(f, "{fy}{}-{m:02}", self.year),
        }
    }
}
