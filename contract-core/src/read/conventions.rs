//! How a document writes ([`Conventions`], [`DateOrder`]): the value every reader takes. Its
//! detection from a document ([`Conventions::detect`]) and [`Conventions::with_currencies`],
//! which read with the date and currency finders, are in the parent, so that the readers
//! (`date`, `currency`, `period`) import this module without importing themselves back.

use chrono::NaiveDate;

use super::period::PeriodRead;
use crate::ground::Numerals;

/// The order a document writes the day and the month of a numeric date in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DateOrder {
    /// Day, month, year: `19/10/2018` (most of the world).
    DayFirst,
    /// Month, day, year: `04/18/2001` (the United States).
    MonthFirst,
    /// Year, month, day with a two-digit year: `18/06/04` (East Asia). A four-digit year
    /// written first is read year first whatever the order.
    YearFirst,
    /// The document does not tell.
    Unknown,
}

/// How a document writes: numerals, date order, the currencies it names, its reference date
/// and period.
///
/// [`Conventions::detect`] reads them from a document; the `with_*` methods override any
/// part. [`Conventions::new`] is a document that tells nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conventions {
    pub(super) numerals: Numerals,
    pub(super) date_order: DateOrder,
    pub(super) currencies: Vec<&'static str>,
    pub(super) reference_date: Option<NaiveDate>,
    pub(super) reference_period: Option<PeriodRead>,
}

impl Default for Conventions {
    fn default() -> Conventions {
        Conventions::new()
    }
}

impl Conventions {
    /// Conventions that tell nothing: [`Numerals::Point`], [`DateOrder::Unknown`], no
    /// currencies, no reference date or period.
    pub fn new() -> Conventions {
        Conventions {
            numerals: Numerals::Point,
            date_order: DateOrder::Unknown,
            currencies: Vec::new(),
            reference_date: None,
            reference_period: None,
        }
    }

    /// With these numerals.
    pub fn with_numerals(mut self, numerals: Numerals) -> Conventions {
        self.numerals = numerals;
        self
    }

    /// With this date order.
    pub fn with_date_order(mut self, order: DateOrder) -> Conventions {
        self.date_order = order;
        self
    }

    /// With this date order when the document's own dates do not tell ([`DateOrder::Unknown`]):
    /// what a caller knows of its documents' country (`or_date_order(DateOrder::DayFirst)` for
    /// Malaysian receipts), without overriding a document that says otherwise.
    pub fn or_date_order(self, order: DateOrder) -> Conventions {
        if self.date_order == DateOrder::Unknown {
            self.with_date_order(order)
        } else {
            self
        }
    }

    /// With this reference date (the document's own date).
    pub fn with_reference_date(mut self, date: NaiveDate) -> Conventions {
        self.reference_date = Some(date);
        self
    }

    /// With this reference period (the period a release reports on), against which relative
    /// and year-less periods are placed ahead of the reference date.
    pub fn with_reference_period(mut self, period: PeriodRead) -> Conventions {
        self.reference_period = Some(period);
        self
    }

    /// How numbers are written.
    pub fn numerals(&self) -> Numerals {
        self.numerals
    }

    /// The order of day and month in numeric dates.
    pub fn date_order(&self) -> DateOrder {
        self.date_order
    }

    /// The currencies the document names unambiguously, as ISO 4217 codes, most named first.
    pub fn currencies(&self) -> &[&'static str] {
        &self.currencies
    }

    /// The document's reference date.
    pub fn reference_date(&self) -> Option<NaiveDate> {
        self.reference_date
    }

    /// The reference period, when one was given.
    pub fn reference_period(&self) -> Option<PeriodRead> {
        self.reference_period
    }

    /// The year a two-digit year `yy` stands for: within fifty years of the reference date's
    /// year (its year minus 50 to plus 49), else 1969-2068 (chrono's `%y`).
    pub fn full_year(&self, yy: u32) -> i32 {
        let yy = (yy % 100) as i32;
        match self.reference_date {
            Some(d) => {
                let low = chrono::Datelike::year(&d) - 50;
                low + (yy - low).rem_euclid(100)
            }
            None if yy < 69 => 2000 + yy,
            None => 1900 + yy,
        }
    }
}
