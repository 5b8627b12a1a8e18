//! JSON numbers compared exactly: [`Num`] (an integer with a float without rounding either)
//! and [`as_integer`], the integer a float with a zero fraction stands for. The validator
//! compares bounds and rules with it, and so does the grounded grammar, on the number a
//! document's literal parses to, so that it offers nothing the validator refuses. A leaf of
//! the crate.
//!
//! Why not the crate's exact [`Decimal`](crate::decimal::Decimal): this comparison is on the
//! validator's path for every bound and rule, and allocates nothing. Past 2^53, where an integer
//! meets a float, comparing through decimals took 280 ns (`2^60` against `1.5e18`) to 9.9 µs
//! (against `5e-324`) a comparison, and [`cmp_wide_int_float`] 2.6 to 6.1 ns (release build,
//! 2026-12-07; docs/benchmarks.md). The tests check this comparison against the decimals'.

use std::cmp::Ordering;

use serde_json::Number;

/// A JSON number, compared exactly with any other.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    // `#[inline]` on these: the checker is generic, so it is compiled in the caller's crate, where
    // small functions of this one are inlined only when marked.
    #[inline]
    pub(crate) fn of(n: &Number) -> Num {
        if let Some(i) = n.as_i64() {
            Num::Int(i128::from(i))
        } else if let Some(u) = n.as_u64() {
            Num::Int(i128::from(u))
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    /// Exact comparison; `None` only for NaN, which JSON cannot hold.
    #[inline]
    pub(crate) fn cmp(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
            (Num::Int(a), Num::Float(b)) => cmp_int_float(a, b),
            (Num::Float(a), Num::Int(b)) => cmp_int_float(b, a).map(Ordering::reverse),
        }
    }

    /// Whether the number has no fraction (`3`, `3.0`, `1e30`).
    #[inline]
    pub(crate) fn is_integral(self) -> bool {
        match self {
            Num::Int(_) => true,
            Num::Float(f) => f.fract() == 0.0,
        }
    }
}

/// Compares an integer with a float without rounding either.
#[inline]
fn cmp_int_float(i: i128, f: f64) -> Option<Ordering> {
    // 2^53: every integer up to it in magnitude is a float, so comparing as floats is exact.
    const EXACT: i64 = 1 << 53;
    match i64::try_from(i) {
        Ok(small) if (-EXACT..=EXACT).contains(&small) => (small as f64).partial_cmp(&f),
        _ => cmp_wide_int_float(i, f),
    }
}

/// [`cmp_int_float`] past 2^53. Kept out of line: inlined, its `floor` (a libm call on baseline
/// x86-64) and i128 conversion were computed on every comparison, then thrown away.
#[cold]
#[inline(never)]
fn cmp_wide_int_float(i: i128, f: f64) -> Option<Ordering> {
    // 2^127: every float below it (and at or above its negation) converts to i128 exactly
    // once its fraction is dropped.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f.is_nan() {
        return None;
    }
    if f >= LIMIT {
        return Some(Ordering::Less);
    }
    if f < -LIMIT {
        return Some(Ordering::Greater);
    }
    let floor = f.floor();
    Some(match i.cmp(&(floor as i128)) {
        Ordering::Equal if f > floor => Ordering::Less,
        other => other,
    })
}

/// The integer a float with a zero fraction stands for, when it fits `i64` or `u64`.
pub(crate) fn as_integer(n: &Number) -> Option<Number> {
    // 2^63 and 2^64: the first floats past i64 and u64.
    const I64_END: f64 = 9_223_372_036_854_775_808.0;
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    let f = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0)?;
    if (-I64_END..I64_END).contains(&f) {
        Some(Number::from(f as i64))
    } else if (0.0..U64_END).contains(&f) {
        Some(Number::from(f as u64))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use proptest::strategy::Strategy;

    /// The careful comparison, for every integer: the one `cmp_int_float` leaves to
    /// `cmp_wide_int_float` past 2^53.
    fn slow_cmp(i: i128, f: f64) -> Option<std::cmp::Ordering> {
        super::cmp_wide_int_float(i, f)
    }

    #[test]
    fn int_float_comparison_agrees_with_the_careful_one_at_the_edges() {
        let two53 = 1i128 << 53;
        let ints = [
            0,
            1,
            -1,
            255,
            two53 - 1,
            two53,
            -two53,
            two53 + 1,
            -two53 - 1,
            i128::from(i64::MAX),
            i128::from(i64::MIN),
            i128::from(u64::MAX),
        ];
        let floats = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            254.9,
            255.0,
            255.1,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            -9_007_199_254_740_992.0,
            9.223_372_036_854_776e18,
            1e30,
            -1e30,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::NAN,
        ];
        for i in ints {
            for f in floats {
                assert_eq!(super::cmp_int_float(i, f), slow_cmp(i, f), "{i} vs {f}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn int_float_comparison_agrees_with_the_careful_one(
            i in proptest::prop_oneof![
                -(1i128 << 54)..(1i128 << 54),
                proptest::num::i64::ANY.prop_map(i128::from),
                proptest::num::u64::ANY.prop_map(i128::from),
            ],
            f in proptest::prop_oneof![
                proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::SUBNORMAL,
                (-(1i64 << 54)..(1i64 << 54)).prop_map(|n| n as f64),
                (-(1i64 << 54)..(1i64 << 54)).prop_map(|n| n as f64 + 0.5),
            ],
        ) {
            proptest::prop_assert_eq!(super::cmp_int_float(i, f), slow_cmp(i, f));
        }

        /// The careful comparison agrees with the exact decimals'.
        #[test]
        fn int_float_comparison_agrees_with_exact_decimals(
            i in proptest::prop_oneof![
                proptest::num::i64::ANY.prop_map(i128::from),
                proptest::num::u64::ANY.prop_map(i128::from),
            ],
            f in proptest::prop_oneof![
                proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::SUBNORMAL,
                proptest::num::i64::ANY.prop_map(|n| n as f64),
                proptest::num::u64::ANY.prop_map(|n| n as f64 + 0.5),
            ],
        ) {
            use crate::decimal::Decimal;
            let exact = Decimal::from_f64(f).map(|d| Decimal::from_i128(i).cmp(&d));
            proptest::prop_assert_eq!(slow_cmp(i, f), exact);
        }
    }
}
