//! Exact decimal numbers: [`Decimal`], one value however it is written (`4065.50`, `4.0655e3`),
//! read from JSON literals, integers and doubles (a double's exact value, never rounded), and
//! ordered as numbers. The grounding check ([`ground`](crate::ground)) compares the numbers a
//! document writes with these; the local backend's value filter bounds number literals with them.
//!
//! A leaf: it imports nothing from the crate.

use std::cmp::Ordering;
use std::fmt;

/// An exact decimal number: `0.<digits> × 10^exponent`, with its sign; zero has no digits.
///
/// Two decimals are equal when they are the same number: `4065.50`, `4065.5` and `4.0655e3`
/// are one [`Decimal`]. They are ordered as numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Decimal {
    negative: bool,
    /// Significant ASCII digits, without leading or trailing zeros.
    digits: String,
    exponent: i64,
}

impl Decimal {
    /// Zero.
    pub const ZERO: Decimal = Decimal {
        negative: false,
        digits: String::new(),
        exponent: 0,
    };

    /// Reads a JSON number literal (`-12.50`, `4.0655e3`); `None` for anything else.
    pub fn from_json_literal(text: &str) -> Option<Decimal> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
            None => (rest, 0),
        };
        let (int, frac) = match mantissa.split_once('.') {
            Some((i, f)) => (i, f),
            None => (mantissa, ""),
        };
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if mantissa.contains('.') && frac.is_empty() {
            return None;
        }
        let digits = [int.as_bytes(), frac.as_bytes()].concat();
        Decimal::from_scaled(negative, &digits, exp.checked_sub(frac.len() as i64)?)
    }

    /// The non-negative number `int.frac` from ASCII digit strings (`"1"`, `"5"` is 1.5); zero
    /// when either holds another character.
    pub(crate) fn from_digits(int: &str, frac: &str) -> Decimal {
        let digits = [int.as_bytes(), frac.as_bytes()].concat();
        Decimal::from_scaled(false, &digits, -(frac.len() as i64)).unwrap_or_default()
    }

    /// `±digits × 10^pow10`, from ASCII digits (leading zeros allowed): `(false, b"0125", -2)`
    /// is 1.25. `None` when a byte is not a digit or the exponent leaves `i64`.
    pub fn from_scaled(negative: bool, digits: &[u8], pow10: i64) -> Option<Decimal> {
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let lead = digits.iter().take_while(|&&b| b == b'0').count();
        let significant = &digits[lead..];
        let end = significant
            .iter()
            .rposition(|&b| b != b'0')
            .map_or(0, |i| i + 1);
        if end == 0 {
            return Some(Decimal::ZERO);
        }
        // int(significant) × 10^pow10 is 0.significant × 10^(len + pow10).
        let exponent = i64::try_from(significant.len()).ok()?.checked_add(pow10)?;
        Some(Decimal {
            negative,
            digits: std::str::from_utf8(&significant[..end]).ok()?.to_owned(),
            exponent,
        })
    }

    /// The integer `v`.
    pub fn from_i128(v: i128) -> Decimal {
        let digits = v.unsigned_abs().to_string();
        Decimal::from_scaled(v < 0, digits.as_bytes(), 0).unwrap_or_default()
    }

    /// The exact value of a double (`0.1` is `0.1000000000000000055511151231257827…`); `None`
    /// for NaN and the infinities.
    pub fn from_f64(f: f64) -> Option<Decimal> {
        if !f.is_finite() {
            return None;
        }
        let (m, e) = decompose(f);
        Some(if f < 0.0 {
            binary(u128::from(m), e).negated()
        } else {
            binary(u128::from(m), e)
        })
    }

    /// The midpoints between a finite double and the doubles next to it, below and above: the
    /// numbers strictly between them parse to it (round to nearest). `None` for NaN and the
    /// infinities.
    pub fn midpoints(f: f64) -> Option<(Decimal, Decimal)> {
        if !f.is_finite() {
            return None;
        }
        if f == 0.0 {
            let h = binary(1, -1075);
            return Some((h.negated(), h));
        }
        let (m, e) = decompose(f);
        let m = u128::from(m);
        let hi = binary(2 * m + 1, e - 1);
        // Past a power of two the gap below is half the one above.
        let lo = if m == 1 << 52 && e > -1074 {
            binary(4 * m - 1, e - 2)
        } else {
            binary(2 * m - 1, e - 1)
        };
        Some(if f < 0.0 {
            (hi.negated(), lo.negated())
        } else {
            (lo, hi)
        })
    }

    /// Whether the number is zero.
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// Whether the number is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Whether the number has no fractional part.
    pub fn is_integer(&self) -> bool {
        self.digits.len() as i64 <= self.exponent || self.digits.is_empty()
    }

    /// The decimal exponent: the number is `0.d… × 10^exponent` (`0` for zero).
    pub fn exponent(&self) -> i64 {
        self.exponent
    }

    /// The number with the other sign.
    pub fn negated(&self) -> Decimal {
        Decimal {
            negative: !self.negative && !self.digits.is_empty(),
            ..self.clone()
        }
    }

    /// `self × 10^t`.
    pub fn shifted(&self, t: i64) -> Decimal {
        let mut d = self.clone();
        if !d.digits.is_empty() {
            d.exponent = d.exponent.saturating_add(t);
        }
        d
    }

    /// The integer part, rounded toward zero (`-2.5` gives `-2`).
    pub fn trunc(&self) -> Decimal {
        if self.is_integer() {
            return self.clone();
        }
        let keep = self.exponent.clamp(0, self.digits.len() as i64) as usize;
        let int = &self.digits.as_bytes()[..keep];
        Decimal::from_scaled(self.negative, int, 0).unwrap_or_default()
    }

    /// The number as a plain JSON literal (`4065.5`, `-0.25`, `2757`), or in exponent form
    /// when that is shorter than 40 characters of zeros would be.
    pub fn to_json_literal(&self) -> String {
        if self.digits.is_empty() {
            return "0".into();
        }
        let sign = if self.negative { "-" } else { "" };
        let n = self.digits.len() as i64;
        let e = self.exponent;
        if !(-40..=40).contains(&e) {
            return format!("{sign}0.{}e{e}", self.digits);
        }
        if e <= 0 {
            format!("{sign}0.{}{}", "0".repeat((-e) as usize), self.digits)
        } else if e >= n {
            format!("{sign}{}{}", self.digits, "0".repeat((e - n) as usize))
        } else {
            let (a, b) = self.digits.split_at(e as usize);
            format!("{sign}{a}.{b}")
        }
    }

    /// The JSON number a reply that writes this value parses to (serde_json's reading of
    /// [`to_json_literal`](Self::to_json_literal): an integer when it is one that fits `i64` or
    /// `u64`, else the nearest float), which is what the validator compares; `None` only for a
    /// value past the float range.
    pub fn to_json_number(&self) -> Option<serde_json::Number> {
        serde_json::from_str(&self.to_json_literal()).ok()
    }

    /// The value as an `i128`, when it is an integer that fits.
    pub fn to_i128(&self) -> Option<i128> {
        if !self.is_integer() {
            return None;
        }
        if self.digits.is_empty() {
            return Some(0);
        }
        // i128::MAX has 39 digits; the parse refuses what does not fit.
        if self.exponent > 39 {
            return None;
        }
        let zeros = (self.exponent - self.digits.len() as i64) as usize;
        let n: i128 = format!("{}{}", self.digits, "0".repeat(zeros))
            .parse()
            .ok()?;
        Some(if self.negative { -n } else { n })
    }

    /// The value as a double when it is exactly one.
    pub fn exact_f64(&self) -> Option<f64> {
        let f = self.nearest_f64();
        Decimal::from_f64(f)
            .is_some_and(|d| d == *self)
            .then_some(f)
    }

    /// The nearest double (Rust's correctly rounded parse); infinite past the finite ones.
    pub fn nearest_f64(&self) -> f64 {
        if self.digits.is_empty() {
            return 0.0;
        }
        let sign = if self.negative { -1.0 } else { 1.0 };
        if self.exponent > 400 {
            return sign * f64::INFINITY;
        }
        if self.exponent < -400 {
            return sign * 0.0;
        }
        format!("0.{}e{}", self.digits, self.exponent)
            .parse::<f64>()
            .map_or(f64::NAN, |f| sign * f)
    }

    /// Compares magnitudes: with the digits trimmed, a longer run of digits after a shared
    /// prefix is the larger.
    fn cmp_magnitude(&self, other: &Decimal) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => self
                .exponent
                .cmp(&other.exponent)
                .then_with(|| self.digits.cmp(&other.digits)),
        }
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.negative, other.negative) {
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_literal())
    }
}

/// `|f| = m × 2^e` with `m` the 53-bit significand (fewer bits for subnormals); `f` finite.
fn decompose(f: f64) -> (u64, i64) {
    let bits = f.to_bits() & !(1u64 << 63);
    let exp = (bits >> 52) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp - 1075)
    }
}

/// The exact decimal of `m × 2^e`, for `e` in a double's range (about ±1100).
fn binary(m: u128, e: i64) -> Decimal {
    // Little-endian base 10^9 limbs.
    const BASE: u64 = 1_000_000_000;
    let mut limbs: Vec<u64> = Vec::new();
    let mut x = m;
    while x > 0 {
        limbs.push((x % u128::from(BASE)) as u64);
        x /= u128::from(BASE);
    }
    let mul = |limbs: &mut Vec<u64>, by: u64| {
        let mut carry = 0u64;
        for l in limbs.iter_mut() {
            let v = *l * by + carry;
            *l = v % BASE;
            carry = v / BASE;
        }
        while carry > 0 {
            limbs.push(carry % BASE);
            carry /= BASE;
        }
    };
    // m × 2^e, or m × 5^-e × 10^e: multiply by 2^29 or 5^13 at a time, then by 2 or 5.
    let (step, factor, single) = if e >= 0 {
        (29, 1u64 << 29, 2)
    } else {
        (13, 1_220_703_125u64, 5)
    };
    let mut left = e.abs();
    while left >= step {
        mul(&mut limbs, factor);
        left -= step;
    }
    for _ in 0..left {
        mul(&mut limbs, single);
    }
    let mut text = limbs.last().map(u64::to_string).unwrap_or_default();
    for l in limbs.iter().rev().skip(1) {
        text.push_str(&format!("{l:09}"));
    }
    Decimal::from_scaled(false, text.as_bytes(), e.min(0)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::Decimal;

    fn d(s: &str) -> Decimal {
        Decimal::from_json_literal(s).unwrap_or_else(|| panic!("not a literal: {s}"))
    }

    fn exact(f: f64) -> Decimal {
        Decimal::from_f64(f).unwrap_or_else(|| panic!("not finite: {f}"))
    }

    #[test]
    fn literals_compare_exactly() {
        assert_eq!(d("0.5e1"), d("5"));
        assert_eq!(d("-0"), Decimal::ZERO);
        assert_eq!(d("-0.0e7"), Decimal::ZERO);
        assert!(d("0.30000000000000001") > d("0.3"));
        assert!(d("-2") < d("-1.5"));
        assert!(d("1e2") > d("99.999"));
        assert_eq!(exact(0.5), d("0.5"));
        assert_eq!(
            exact(0.1),
            d("0.1000000000000000055511151231257827021181583404541015625")
        );
        assert_eq!(exact(1e300).nearest_f64(), 1e300);
        assert_eq!(exact(5e-324).nearest_f64(), 5e-324);
        assert_eq!(d("0.3").exact_f64(), None);
        assert_eq!(d("12").exact_f64(), Some(12.0));
    }

    #[test]
    fn parts_edges_and_midpoints() {
        assert_eq!(d("-2.5").trunc(), d("-2"));
        assert_eq!(d("0.5").trunc(), Decimal::ZERO);
        let max = "170141183460469231731687303715884105727";
        assert_eq!(d(max).to_i128(), Some(i128::MAX));
        assert_eq!(d(&format!("{max}0")).to_i128(), None);
        assert_eq!(d("170141183460469231731687303715884105728").to_i128(), None);
        assert_eq!(Decimal::from_json_literal("1e9223372036854775807"), None);
        assert_eq!(Decimal::from_scaled(false, b"1x", 0), None);
        assert_eq!(Decimal::from_scaled(true, b"00", 5), Some(Decimal::ZERO));
        for f in [1.0, -1.0, 0.3, 0.0, 5e-324, f64::MAX] {
            let (lo, hi) = Decimal::midpoints(f).unwrap_or_else(|| panic!("{f}"));
            assert!(exact(f.next_down()) < lo && lo < exact(f), "{f}");
            assert!(exact(f) < hi, "{f}");
            if f < f64::MAX {
                assert!(hi < exact(f.next_up()), "{f}");
            }
        }
        assert_eq!(Decimal::midpoints(f64::INFINITY), None);
        assert_eq!(Decimal::from_f64(f64::NAN), None);
    }
}
