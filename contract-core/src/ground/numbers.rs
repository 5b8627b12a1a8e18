//! Numbers as a document writes them: every number a text writes ([`numbers_in`],
//! [`numbers_at`]), read as an exact [`Decimal`] by its numeral conventions ([`Numerals`], in
//! `numerals`), with the literal a copied number keeps ([`written_literal`]). The grounding check
//! ([`ground`](super)) compares grounded numbers with these.

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;

use super::numerals::Numerals;
pub use crate::decimal::Decimal;

/// Reads one written numeral (`2,757`, `4,065.5`, `1.730`, `7,23`) by `numerals`: the decimal
/// separator at most once, the group separator only between groups of three digits.
fn read_numeral(text: &str, numerals: Numerals) -> Option<Decimal> {
    let (decimal, group) = numerals.separators();
    let (int, frac) = match text.split_once(decimal) {
        Some((i, f)) => (i, Some(f)),
        None => (text, None),
    };
    if let Some(f) = frac {
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
    }
    let groups: Vec<&str> = int.split(group).collect();
    let first = groups.first()?;
    if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if groups.len() > 1 {
        if first.len() > 3 {
            return None;
        }
        if !groups[1..]
            .iter()
            .all(|g| g.len() == 3 && g.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
    }
    let int: String = groups.concat();
    Some(Decimal::from_digits(&int, frac.unwrap_or("")))
}

/// Every number `text` writes, read by `numerals` (the other convention when a numeral does not
/// read by it, each digit run alone when it reads by neither), in order, without repeats. A
/// numeral directly after a minus sign is offered with both signs (the sign may be a hyphen).
pub fn numbers_in(text: &str, numerals: Numerals) -> Vec<Decimal> {
    distinct(numbers_at(text, numerals))
}

/// The readings of `found` in order, each once.
fn distinct(found: Vec<(Range<usize>, Decimal)>) -> Vec<Decimal> {
    let mut out: Vec<Decimal> = Vec::new();
    for (_, d) in found {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The numbers of `text` written at least once outside a date, a time of day or a period
/// expression ([`outside_dates`]), in order, without repeats: what a fractional number (an
/// amount, a measure) may be copied as. `31` and `2024` of `March 31, 2024`, `2025` of `the
/// second quarter of 2025` and `12` of `12:41PM` are parts of those expressions, not amounts:
/// on the filings releases a sentence withdrawing an outlook "for the second quarter of 2025"
/// gave `2025` as both ends of the guidance (seed 20261208: both misses; seed 20261207: one),
/// and on a receipt the hour of `05 JAN 2017 12:41PM` was taken for the total.
pub fn amounts_in(text: &str, numerals: Numerals) -> Vec<Decimal> {
    distinct(outside_dates(text, numbers_at(text, numerals)))
}

/// `numbers` (byte ranges in `text` and their readings, as [`numbers_at`] gives them) without
/// the whole numbers written inside a date or a period expression of `text`
/// ([`crate::read::find_dates_and_periods`]) or inside a time of day ([`times_in`]): the parts
/// of those are whole numbers, so a number with a fraction is always kept (and the grounding
/// check of one needs no date reading).
pub fn outside_dates(
    text: &str,
    numbers: Vec<(Range<usize>, Decimal)>,
) -> Vec<(Range<usize>, Decimal)> {
    let mut taken = crate::read::find_dates_and_periods(text);
    taken.extend(times_in(text));
    numbers
        .into_iter()
        .filter(|(r, d)| {
            !d.is_integer() || !taken.iter().any(|t| t.start <= r.start && r.end <= t.end)
        })
        .collect()
}

/// The byte ranges of the times of day `text` writes with colons: `12:41`, `20:49:59`, `9:05`,
/// `TIME:12:41` (an hour of one or two digits up to 24, then minutes and seconds of two digits
/// up to 59), not joined to another number (`1:2:3:4`, `3.12:30`, `12:345` and `5:30,25` are
/// not times; a label's colon before one, or a full stop or comma after one, is not a join). A
/// ratio written the same way (`1:50`) reads as a time too: its parts are left out of the
/// amounts all the same.
pub fn times_in(text: &str) -> Vec<Range<usize>> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\d+(?::\d+)+").unwrap_or_else(|e| panic!("static regex: {e}"))
    });
    // Joined to another number on one side (its characters outward from the time): a digit
    // next to it, or a separator with a digit beyond.
    fn joined(mut side: impl Iterator<Item = char>) -> bool {
        let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
        match side.next() {
            Some(c) if ":.,".contains(c) => digit(side.next()),
            c => digit(c),
        }
    }
    re.find_iter(text)
        .filter(|m| {
            let parts: Vec<&str> = m.as_str().split(':').collect();
            let hour_ok = parts[0].len() <= 2 && parts[0].parse::<u32>().is_ok_and(|h| h <= 24);
            let rest_ok = parts[1..]
                .iter()
                .all(|p| p.len() == 2 && p.parse::<u32>().is_ok_and(|v| v <= 59));
            parts.len() <= 3
                && hour_ok
                && rest_ok
                && !joined(text[..m.start()].chars().rev())
                && !joined(text[m.end()..].chars())
        })
        .map(|m| m.range())
        .collect()
}

/// `d`'s JSON literal with the fraction digits `written` shows (the numeral `d` was read from,
/// without its sign): `538.00` for "538.00", `60.30` for "60,30" read comma-decimal, `1234.50`
/// for "1,234.50"; [`Decimal::to_json_literal`] (`538`, `60.3`) where the numeral has no
/// decimal fraction ("1,000" read as a thousand) or does not end in `d`'s digits.
///
/// Why: a model asked to copy a number scores the form it sees far above the normalised one:
/// after `538` the next token it expects is `.`, not the `,` that ends the normalised literal,
/// so a judge scoring `538,` against `55100,` prefers the postcode.
pub fn written_literal(d: &Decimal, written: &str) -> String {
    let literal = d.to_json_literal();
    if literal.contains('e') {
        return literal;
    }
    let Some(sep) = written.rfind(['.', ',']) else {
        return literal;
    };
    let tail = &written[sep + 1..];
    let head: String = written[..sep]
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let (sign, unsigned) = match literal.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", literal.as_str()),
    };
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let same_int = head.trim_start_matches('0') == int.trim_start_matches('0');
    let zeros_after = tail
        .strip_prefix(frac)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b == b'0'));
    if same_int && zeros_after && tail.bytes().all(|b| b.is_ascii_digit()) {
        format!("{sign}{int}.{tail}")
    } else {
        literal
    }
}

/// Every reading of every number `text` writes, with the byte range of the digits it was read
/// from, in order: the readings [`numbers_in`] collects (which drops repeats), for callers that
/// need to know what follows a number (its scale word).
pub fn numbers_at(text: &str, numerals: Numerals) -> Vec<(Range<usize>, Decimal)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\d+(?:[.,]\d+)*").unwrap_or_else(|e| panic!("static regex: {e}"))
    });
    let mut out = Vec::new();
    for m in re.find_iter(text) {
        let minus = text[..m.start()].ends_with(['-', '\u{2212}']);
        let read = read_numeral(m.as_str(), numerals)
            .map(|d| vec![d])
            .or_else(|| read_numeral(m.as_str(), numerals.other()).map(|d| vec![d]))
            .unwrap_or_else(|| {
                m.as_str()
                    .split(['.', ','])
                    .filter_map(|run| Decimal::from_scaled(false, run.as_bytes(), 0))
                    .collect()
            });
        for d in read {
            if minus {
                out.push((m.range(), d.negated()));
            }
            out.push((m.range(), d));
        }
    }
    out
}
