//! A number's bounds, read in one place: [`NumberBounds`] holds the four JSON Schema keywords for
//! the IR ([`NumberKeywords`](crate::ir::NumberKeywords)) and the mask's shapes
//! ([`Shape::Number`](crate::grammar::Shape::Number)), and says what they mean: each bound as
//! the comparison a value must pass ([`NumberBounds::each`], what the validator, its fast path,
//! the grounded grammar and the local backend's value filter check), an integer's effective ends
//! ([`NumberBounds::integer_lower`], what the JSON Schema and the mask write) and the range in
//! words (the signature and the docs).
//!
//! It imports nothing else of the crate but the exact comparison of JSON numbers (`num.rs`, a
//! leaf).

use contract_rules::CmpOp;
use serde::{Deserialize, Serialize};
use serde_json::Number;

use crate::num::Num;

/// A number's bounds as JSON Schema writes them; any may be unset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumberBounds {
    /// `minimum`: `value >= minimum`.
    pub minimum: Option<Number>,
    /// `exclusiveMinimum`: `value > exclusive_minimum`.
    pub exclusive_minimum: Option<Number>,
    /// `maximum`: `value <= maximum`.
    pub maximum: Option<Number>,
    /// `exclusiveMaximum`: `value < exclusive_maximum`.
    pub exclusive_maximum: Option<Number>,
}

impl NumberBounds {
    /// Whether no bound is set.
    pub fn is_unbounded(&self) -> bool {
        self.minimum.is_none()
            && self.maximum.is_none()
            && self.exclusive_minimum.is_none()
            && self.exclusive_maximum.is_none()
    }

    /// Each bound, as the comparison a value must pass (`value op bound`) and the bound where
    /// it is set, in the order the validator reports a broken one: `minimum` (`>=`), `maximum`
    /// (`<=`), `exclusiveMinimum` (`>`), `exclusiveMaximum` (`<`).
    #[inline]
    pub fn keywords(&self) -> [(CmpOp, Option<&Number>); 4] {
        [
            (CmpOp::Ge, self.minimum.as_ref()),
            (CmpOp::Le, self.maximum.as_ref()),
            (CmpOp::Gt, self.exclusive_minimum.as_ref()),
            (CmpOp::Lt, self.exclusive_maximum.as_ref()),
        ]
    }

    /// The bounds set, as [`keywords`](Self::keywords) gives them.
    #[inline]
    pub fn each(&self) -> impl Iterator<Item = (CmpOp, &Number)> {
        self.keywords()
            .into_iter()
            .filter_map(|(op, bound)| Some((op, bound?)))
    }

    /// The first bound `value` breaks, in [`keywords`](Self::keywords)' order, compared
    /// exactly (an integer with a float without rounding either). The one comparison of a
    /// number with its bounds: the validator reports what this returns, and the grounded grammar
    /// offers a document's number only when [`admits`](Self::admits) does.
    #[inline]
    pub(crate) fn broken(&self, value: Num) -> Option<(CmpOp, &Number)> {
        // A loop over the array, not `each()`'s iterator: the validator runs this for every
        // number of a parsed value, and through the iterator `from_value` took 3 to 4% longer
        // (`cargo bench --bench from_json`, 16 alternated turns, twice: 182.2 against 175.4 ns a
        // document, 179.1 against 173.8; through the array, 169.2).
        for (op, bound) in self.keywords() {
            let Some(bound) = bound else { continue };
            if value.cmp(Num::of(bound)).is_some_and(|ord| !op.holds(ord)) {
                return Some((op, bound));
            }
        }
        None
    }

    /// Whether the JSON number `value` is within the bounds, as the validator decides it: the
    /// number a reply's literal parses to, not the literal's exact decimal (`0.1000000000000000001`
    /// parses to the float `0.1`, which `exclusiveMaximum: 0.1` refuses).
    pub fn admits(&self, value: &Number) -> bool {
        self.broken(Num::of(value)).is_none()
    }

    /// The effective lower bound of an integer whose type starts at `type_min`, and where it
    /// comes from (the inclusive bound wins a tie, then the exclusive one, then the type).
    pub(crate) fn integer_lower(&self, type_min: i128) -> (i128, Source) {
        let mut best = (type_min, Source::Type);
        if let Some(e) = &self.exclusive_minimum {
            let v = int_lower(e, true);
            if v >= best.0 {
                best = (v, Source::Exclusive);
            }
        }
        if let Some(m) = &self.minimum {
            let v = int_lower(m, false);
            if v >= best.0 {
                best = (v, Source::Inclusive);
            }
        }
        best
    }

    /// The effective upper bound of an integer whose type ends at `type_max`, and where it
    /// comes from.
    pub(crate) fn integer_upper(&self, type_max: i128) -> (i128, Source) {
        let mut best = (type_max, Source::Type);
        if let Some(e) = &self.exclusive_maximum {
            let v = int_upper(e, true);
            if v <= best.0 {
                best = (v, Source::Exclusive);
            }
        }
        if let Some(m) = &self.maximum {
            let v = int_upper(m, false);
            if v <= best.0 {
                best = (v, Source::Inclusive);
            }
        }
        best
    }

    /// The bounds of a float, in words: `> 0`, `0-1`, `>= 0, < 5`; `None` when unbounded.
    pub(crate) fn number_words(&self) -> Option<String> {
        let lower = match (&self.minimum, &self.exclusive_minimum) {
            (Some(m), Some(e)) if e.as_f64() >= m.as_f64() => Some((e, true)),
            (Some(m), _) => Some((m, false)),
            (None, Some(e)) => Some((e, true)),
            (None, None) => None,
        };
        let upper = match (&self.maximum, &self.exclusive_maximum) {
            (Some(m), Some(e)) if e.as_f64() <= m.as_f64() => Some((e, true)),
            (Some(m), _) => Some((m, false)),
            (None, Some(e)) => Some((e, true)),
            (None, None) => None,
        };
        range_words(
            lower.map(|(n, x)| (show(n), x)),
            upper.map(|(n, x)| (show(n), x)),
        )
    }

    /// The effective range of an integer of type range `type_min..=type_max` in words (`1-4`,
    /// `>= 0`, `-128 to 127`); a bound that is only the Rust type's own bound of a 32-bit or
    /// wider type is left out as noise.
    pub(crate) fn integer_words(&self, type_min: i128, type_max: i128) -> Option<String> {
        const WIDE: i128 = i32::MAX as i128;
        let (lo, lo_src) = self.integer_lower(type_min);
        let (hi, hi_src) = self.integer_upper(type_max);
        let narrow = |v: i128| v.unsigned_abs() < WIDE.unsigned_abs();
        let lower = (lo_src != Source::Type || narrow(lo)).then(|| (lo.to_string(), false));
        let upper = (hi_src != Source::Type || narrow(hi)).then(|| (hi.to_string(), false));
        range_words(lower, upper)
    }
}

/// Which source an effective integer bound comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The inclusive bound (`minimum`, `maximum`).
    Inclusive,
    /// The exclusive bound (`exclusiveMinimum`, `exclusiveMaximum`).
    Exclusive,
    /// The Rust type.
    Type,
}

/// The smallest integer `>= n` (or `> n` when `exclusive`).
fn int_lower(n: &Number, exclusive: bool) -> i128 {
    let step = i128::from(exclusive);
    if let Some(i) = n.as_i64() {
        i128::from(i) + step
    } else if let Some(u) = n.as_u64() {
        i128::from(u) + step
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        if exclusive {
            // `as` saturates past i128; so does the step (`> 1e300` is past every i128).
            (f.floor() as i128).saturating_add(1)
        } else {
            f.ceil() as i128
        }
    }
}

/// The largest integer `<= n` (or `< n` when `exclusive`).
fn int_upper(n: &Number, exclusive: bool) -> i128 {
    let step = i128::from(exclusive);
    if let Some(i) = n.as_i64() {
        i128::from(i) - step
    } else if let Some(u) = n.as_u64() {
        i128::from(u) - step
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        if exclusive {
            (f.ceil() as i128).saturating_sub(1)
        } else {
            f.floor() as i128
        }
    }
}

/// `value` as a JSON number (integers that fit, else a float).
pub(crate) fn int_number(value: i128) -> Number {
    if let Ok(v) = i64::try_from(value) {
        Number::from(v)
    } else if let Ok(v) = u64::try_from(value) {
        Number::from(v)
    } else {
        Number::from_f64(value as f64).unwrap_or_else(|| Number::from(0))
    }
}

/// A number as a model reads it: `0` (also for `0.0`), `0.5`, `-3`.
pub(crate) fn show(n: &Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

/// `a-b` (or `a to b` when a bound is negative), `>= a`, `> a`, `<= b`, `< b`, `> a, <= b`.
pub(crate) fn range_words(
    lower: Option<(String, bool)>,
    upper: Option<(String, bool)>,
) -> Option<String> {
    match (lower, upper) {
        (Some((lo, false)), Some((hi, false))) => {
            if lo == hi {
                Some(format!("= {lo}"))
            } else if lo.starts_with('-') || hi.starts_with('-') {
                Some(format!("{lo} to {hi}"))
            } else {
                Some(format!("{lo}-{hi}"))
            }
        }
        (Some((lo, lx)), Some((hi, hx))) => Some(format!(
            "{} {lo}, {} {hi}",
            if lx { ">" } else { ">=" },
            if hx { "<" } else { "<=" }
        )),
        (Some((lo, lx)), None) => Some(format!("{} {lo}", if lx { ">" } else { ">=" })),
        (None, Some((hi, hx))) => Some(format!("{} {hi}", if hx { "<" } else { "<=" })),
        (None, None) => None,
    }
}

/// `1-80`, `1+`, `<= 80`, `3` for a length constraint; `None` when unconstrained.
pub(crate) fn len_words(min: Option<u64>, max: Option<u64>) -> Option<String> {
    match (min, max) {
        (Some(a), Some(b)) if a == b => Some(a.to_string()),
        (Some(a), Some(b)) => Some(format!("{a}-{b}")),
        (Some(a), None) => Some(format!("{a}+")),
        (None, Some(b)) => Some(format!("<= {b}")),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Number;

    use super::*;

    /// A bound: an integer, or a float with a half (so `> 2.5` and `>= 2.5` differ for integers).
    fn bound() -> impl Strategy<Value = Option<Number>> {
        prop_oneof![
            Just(None),
            (-6i64..=6).prop_map(|i| Some(Number::from(i))),
            (-12i64..=12).prop_map(|h| Number::from_f64(h as f64 / 2.0)),
        ]
    }

    fn bounds() -> impl Strategy<Value = NumberBounds> {
        (bound(), bound(), bound(), bound()).prop_map(
            |(minimum, exclusive_minimum, maximum, exclusive_maximum)| NumberBounds {
                minimum,
                exclusive_minimum,
                maximum,
                exclusive_maximum,
            },
        )
    }

    /// What the keywords say of `v`, written out from JSON Schema's definitions.
    fn allows(b: &NumberBounds, v: f64) -> bool {
        let f = |n: &Option<Number>| n.as_ref().and_then(Number::as_f64);
        f(&b.minimum).is_none_or(|m| v >= m)
            && f(&b.exclusive_minimum).is_none_or(|m| v > m)
            && f(&b.maximum).is_none_or(|m| v <= m)
            && f(&b.exclusive_maximum).is_none_or(|m| v < m)
    }

    #[test]
    fn each_yields_the_bounds_set_as_comparisons_in_report_order() {
        let b = NumberBounds {
            minimum: Some(1.into()),
            exclusive_minimum: None,
            maximum: Some(9.into()),
            exclusive_maximum: Some(5.into()),
        };
        let each: Vec<(CmpOp, String)> = b.each().map(|(op, n)| (op, n.to_string())).collect();
        assert_eq!(
            each,
            [
                (CmpOp::Ge, "1".to_owned()),
                (CmpOp::Le, "9".to_owned()),
                (CmpOp::Lt, "5".to_owned())
            ]
        );
        assert!(NumberBounds::default().each().next().is_none());
        assert!(NumberBounds::default().is_unbounded());
        assert!(!b.is_unbounded());
    }

    #[test]
    fn integer_ends_name_the_bound_they_come_from() {
        let b = NumberBounds {
            minimum: Some(3.into()),
            exclusive_minimum: Number::from_f64(2.5),
            maximum: None,
            exclusive_maximum: Number::from_f64(7.5),
        };
        // `>= 3` and `> 2.5` give the same integer: the inclusive bound wins the tie.
        assert_eq!(b.integer_lower(0), (3, Source::Inclusive));
        assert_eq!(b.integer_upper(255), (7, Source::Exclusive));
        // A type tighter than the keywords.
        assert_eq!(b.integer_upper(5), (5, Source::Type));
        assert_eq!(b.integer_words(0, 255).as_deref(), Some("3-7"));
        assert_eq!(b.number_words().as_deref(), Some(">= 3, < 7.5"));
        // A runtime schema's bounds past i128 (`> 1e300`, `< -1e300`) saturate, with no
        // overflow, and leave no integer between them.
        let far = NumberBounds {
            exclusive_minimum: Number::from_f64(1e300),
            exclusive_maximum: Number::from_f64(-1e300),
            ..NumberBounds::default()
        };
        assert_eq!(far.integer_lower(i128::MIN), (i128::MAX, Source::Exclusive));
        assert_eq!(far.integer_upper(i128::MAX), (i128::MIN, Source::Exclusive));
    }

    proptest! {
        /// Every comparison [`NumberBounds::each`] yields holds of a value exactly when the
        /// keywords allow it (every value from -8 to 8 in halves, the bounds among them).
        #[test]
        fn each_agrees_with_the_keywords(b in bounds()) {
            for h in -16i64..=16 {
                let v = h as f64 / 2.0;
                let held = b.each().all(|(op, n)| {
                    v.partial_cmp(&n.as_f64().unwrap_or(f64::NAN)).is_some_and(|o| op.holds(o))
                });
                prop_assert_eq!(held, allows(&b, v), "{} under {:?}", v, b);
            }
        }

        /// An integer's effective ends are the first and last integers of its type's range
        /// that the keywords allow.
        #[test]
        fn integer_ends_are_the_allowed_extremes(b in bounds(), lo in -8i128..=0, hi in 0i128..=8) {
            let allowed: Vec<i128> = (lo..=hi).filter(|&i| allows(&b, i as f64)).collect();
            let (min, max) = (b.integer_lower(lo).0, b.integer_upper(hi).0);
            match (allowed.first(), allowed.last()) {
                (Some(&first), Some(&last)) => prop_assert_eq!((min, max), (first, last)),
                _ => prop_assert!(min > max, "{min}..={max} for none allowed"),
            }
        }
    }
}
