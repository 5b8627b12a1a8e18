//! How a document writes decimal numbers ([`Numerals`]): a point or a comma, detected from the
//! numbers it writes. Read by the number reader (`numbers`) and by the readers' conventions
//! ([`Conventions`](crate::read::Conventions)), which `numbers` reads dates with: so it is a
//! module of its own.

use std::sync::OnceLock;

use regex::Regex;

/// How a text writes decimal numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Numerals {
    /// A decimal point, commas between thousands: `2,757.5` (English).
    Point,
    /// A decimal comma, dots between thousands: `2.757,5` (Spanish, most of Europe).
    Comma,
}

impl Numerals {
    /// The convention `text` uses, from the numbers it writes: decimal fractions of one or two
    /// digits (`7,23` against `7.23`), mixed separators (`1.730,5` against `1,730.5`) and a
    /// separator repeated inside one number (`1.234.567` against `1,234,567`, only thousands
    /// repeat). When none of those tells, a separator followed by exactly three digits decides
    /// (`3.590 millones` and `305.624` read as thousands, so as [`Numerals::Comma`]; `1,355` as
    /// [`Numerals::Point`]): a text of such numbers alone is ambiguous, and thousands are what
    /// releases write far more often than three decimals. A text with no telling number reads
    /// as [`Numerals::Point`].
    pub fn detect(text: &str) -> Numerals {
        static RES: OnceLock<[Regex; 8]> = OnceLock::new();
        let [comma_frac, comma_mixed, comma_repeat, point_frac, point_mixed, point_repeat, dot3, comma3] =
            RES.get_or_init(|| {
                let re = |s: &str| Regex::new(s).unwrap_or_else(|e| panic!("static regex: {e}"));
                [
                    re(r"\d,\d{1,2}(?:[^\d,.]|$)"),
                    re(r"\d\.\d{3},\d"),
                    re(r"\d\.\d{3}\.\d{3}"),
                    re(r"\d\.\d{1,2}(?:[^\d,.]|$)"),
                    re(r"\d,\d{3}\.\d"),
                    re(r"\d,\d{3},\d{3}"),
                    re(r"\d\.\d{3}(?:[^\d,.]|[.,](?:\D|$)|$)"),
                    re(r"\d,\d{3}(?:[^\d,.]|[.,](?:\D|$)|$)"),
                ]
            });
        let count = |r: &Regex| r.find_iter(text).count();
        let comma = count(comma_frac) + 2 * (count(comma_mixed) + count(comma_repeat));
        let point = count(point_frac) + 2 * (count(point_mixed) + count(point_repeat));
        let (comma, point) = if comma == point {
            (count(dot3), count(comma3))
        } else {
            (comma, point)
        };
        if comma > point {
            Numerals::Comma
        } else {
            Numerals::Point
        }
    }

    pub(super) fn separators(self) -> (char, char) {
        match self {
            Numerals::Point => ('.', ','),
            Numerals::Comma => (',', '.'),
        }
    }

    pub(super) fn other(self) -> Numerals {
        match self {
            Numerals::Point => Numerals::Comma,
            Numerals::Comma => Numerals::Point,
        }
    }
}
