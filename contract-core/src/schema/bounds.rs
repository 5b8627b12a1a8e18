//! Effective numeric bounds, shared by the schema, the signature and the docs.

use serde_json::Number;

use crate::attrs::FieldAttrs;

/// Which source an effective integer bound comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The inclusive constraint (`min`, `range`).
    Inclusive,
    /// The exclusive constraint (`exclusive_min`).
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
            f.floor() as i128 + 1
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
            f.ceil() as i128 - 1
        } else {
            f.floor() as i128
        }
    }
}

/// The effective lower bound of an integer field and where it comes from (the inclusive
/// constraint wins a tie, then the exclusive one, then the type).
pub(crate) fn integer_lower(type_min: i128, c: &FieldAttrs) -> (i128, Source) {
    let mut best = (type_min, Source::Type);
    if let Some(e) = &c.exclusive_minimum {
        let v = int_lower(e, true);
        if v >= best.0 {
            best = (v, Source::Exclusive);
        }
    }
    if let Some(m) = &c.minimum {
        let v = int_lower(m, false);
        if v >= best.0 {
            best = (v, Source::Inclusive);
        }
    }
    best
}

/// The effective upper bound of an integer field and where it comes from.
pub(crate) fn integer_upper(type_max: i128, c: &FieldAttrs) -> (i128, Source) {
    let mut best = (type_max, Source::Type);
    if let Some(e) = &c.exclusive_maximum {
        let v = int_upper(e, true);
        if v <= best.0 {
            best = (v, Source::Exclusive);
        }
    }
    if let Some(m) = &c.maximum {
        let v = int_upper(m, false);
        if v <= best.0 {
            best = (v, Source::Inclusive);
        }
    }
    best
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

/// The inclusive/exclusive bounds of a float field, in words: `> 0`, `0-1`, `>= 0, < 5`.
/// `None` when unbounded.
pub(crate) fn number_range(c: &FieldAttrs) -> Option<String> {
    let lower = match (&c.minimum, &c.exclusive_minimum) {
        (Some(m), Some(e)) if e.as_f64() >= m.as_f64() => Some((e, true)),
        (Some(m), _) => Some((m, false)),
        (None, Some(e)) => Some((e, true)),
        (None, None) => None,
    };
    let upper = match (&c.maximum, &c.exclusive_maximum) {
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

/// The effective range of an integer field in words (`1-4`, `>= 0`, `-128 to 127`); a bound
/// that is only the Rust type's own bound of a 32-bit or wider type is left out as noise.
pub(crate) fn integer_range(type_min: i128, type_max: i128, c: &FieldAttrs) -> Option<String> {
    const WIDE: i128 = i32::MAX as i128;
    let (lo, lo_src) = integer_lower(type_min, c);
    let (hi, hi_src) = integer_upper(type_max, c);
    let lower = (lo_src != Source::Type || lo.abs() < WIDE).then(|| (lo.to_string(), false));
    let upper = (hi_src != Source::Type || hi.abs() < WIDE).then(|| (hi.to_string(), false));
    range_words(lower, upper)
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
