//! Exact decimal arithmetic for the value filter: "can this number prefix still end inside the
//! values the rules permit?", answered on the digits, never in `f64`.
//!
//! The sets a rule permits are unions of [`Interval`]s of exact decimals, chosen so that every
//! decimal inside one is accepted by the validator, which compares numbers after serde_json
//! has parsed them (integers exactly, the rest as `f64`): `x <= 0.3` becomes "x below the midpoint
//! between 0.3 and the next double", the exact set of literals that parse to at most `0.3`.

use std::cmp::Ordering;

/// An exact decimal: `±0.d1d2d3… × 10^exp`; `digits` has no leading or trailing zeros and is
/// empty for zero.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Dec {
    neg: bool,
    digits: Vec<u8>,
    exp: i64,
}

impl Dec {
    pub(crate) fn zero() -> Dec {
        Dec {
            neg: false,
            digits: Vec::new(),
            exp: 0,
        }
    }

    /// From a sign, decimal digits (ASCII or values, leading zeros allowed) and a power of ten:
    /// `±digits × 10^pow10`.
    pub(crate) fn from_digits(neg: bool, digits: &[u8], pow10: i64) -> Dec {
        let mut d: Vec<u8> = digits
            .iter()
            .map(|&c| if c >= b'0' { c - b'0' } else { c })
            .collect();
        let lead = d.iter().take_while(|&&x| x == 0).count();
        d.drain(..lead);
        while d.last() == Some(&0) {
            d.pop();
        }
        if d.is_empty() {
            return Dec::zero();
        }
        // value = int(original digits) × 10^pow10; after dropping `lead` leading zeros the
        // integer has `n` digits, so it is 0.d… × 10^n.
        let n = (digits.len() - lead) as i64;
        Dec {
            neg,
            digits: d,
            exp: n + pow10,
        }
    }

    /// The value of a JSON number literal (`-12.5e3`); `None` when it is not one.
    pub(crate) fn parse_literal(text: &[u8]) -> Option<Dec> {
        let (neg, rest) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, text),
        };
        let mantissa_end = rest
            .iter()
            .position(|&c| c == b'e' || c == b'E')
            .unwrap_or(rest.len());
        let (mantissa, exp_part) = rest.split_at(mantissa_end);
        let (int, frac) = match mantissa.iter().position(|&c| c == b'.') {
            Some(p) => (&mantissa[..p], &mantissa[p + 1..]),
            None => (mantissa, &[][..]),
        };
        if int.is_empty() || !int.iter().chain(frac).all(u8::is_ascii_digit) {
            return None;
        }
        let exp: i64 = if exp_part.is_empty() {
            0
        } else {
            let e = &exp_part[1..];
            let (eneg, edigits) = match e.split_first() {
                Some((b'-', r)) => (true, r),
                Some((b'+', r)) => (false, r),
                _ => (false, e),
            };
            if edigits.is_empty() || edigits.len() > 12 || !edigits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v: i64 = std::str::from_utf8(edigits).ok()?.parse().ok()?;
            if eneg {
                -v
            } else {
                v
            }
        };
        let mut all = int.to_vec();
        all.extend_from_slice(frac);
        Some(Dec::from_digits(neg, &all, exp - frac.len() as i64))
    }

    pub(crate) fn from_i128(v: i128) -> Dec {
        let s = v.unsigned_abs().to_string();
        Dec::from_digits(v < 0, s.as_bytes(), 0)
    }

    /// The exact value of a finite double.
    pub(crate) fn from_f64(f: f64) -> Dec {
        let (m, e) = decompose(f.abs());
        let mut d = mul_pow2(m as u128, e);
        d.neg = f < 0.0 && !d.digits.is_empty();
        d
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    pub(crate) fn negate(&self) -> Dec {
        let mut d = self.clone();
        d.neg = !d.neg && !d.digits.is_empty();
        d
    }

    /// `self × 10^t`.
    pub(crate) fn shift(&self, t: i64) -> Dec {
        let mut d = self.clone();
        if !d.digits.is_empty() {
            d.exp += t;
        }
        d
    }

    /// The decimal exponent (`0.d… × 10^exp`); meaningless for zero.
    pub(crate) fn exp(&self) -> i64 {
        self.exp
    }

    fn cmp_mag(&self, other: &Dec) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        self.exp
            .cmp(&other.exp)
            .then_with(|| self.digits.cmp(&other.digits))
    }

    /// The value as a double when it is exactly one.
    pub(crate) fn exact_f64(&self) -> Option<f64> {
        let f = self.nearest_f64();
        (f.is_finite() && Dec::from_f64(f) == *self).then_some(f)
    }

    /// The nearest double (Rust's correctly rounded parse); may be infinite.
    pub(crate) fn nearest_f64(&self) -> f64 {
        if self.digits.is_empty() {
            return 0.0;
        }
        if self.exp > 400 {
            return if self.neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
        if self.exp < -400 {
            return if self.neg { -0.0 } else { 0.0 };
        }
        let mut s = String::with_capacity(self.digits.len() + 8);
        if self.neg {
            s.push('-');
        }
        s.push_str("0.");
        s.extend(self.digits.iter().map(|&d| (b'0' + d) as char));
        s.push('e');
        s.push_str(&self.exp.to_string());
        s.parse().unwrap_or(f64::NAN)
    }
}

impl Ord for Dec {
    fn cmp(&self, other: &Dec) -> Ordering {
        let sa = if self.digits.is_empty() {
            0
        } else if self.neg {
            -1
        } else {
            1
        };
        let sb = if other.digits.is_empty() {
            0
        } else if other.neg {
            -1
        } else {
            1
        };
        match (sa, sb) {
            (a, b) if a != b => a.cmp(&b),
            (0, 0) => Ordering::Equal,
            (1, 1) => self.cmp_mag(other),
            _ => other.cmp_mag(self),
        }
    }
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, other: &Dec) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `f = m × 2^e` with `m` the 53-bit significand (fewer bits for subnormals).
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

/// The exact decimal of `m × 2^e`.
fn mul_pow2(m: u128, e: i64) -> Dec {
    if m == 0 {
        return Dec::zero();
    }
    // Little-endian base 10^9 limbs.
    const BASE: u64 = 1_000_000_000;
    let mut limbs: Vec<u64> = Vec::new();
    let mut x = m;
    while x > 0 {
        limbs.push((x % BASE as u128) as u64);
        x /= BASE as u128;
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
    let (factor_step, factor, mut left) = if e >= 0 {
        (29, 1u64 << 29, e)
    } else {
        (13, 1_220_703_125u64, -e) // 5^13
    };
    let single = if e >= 0 { 2u64 } else { 5u64 };
    while left >= factor_step {
        mul(&mut limbs, factor);
        left -= factor_step;
    }
    for _ in 0..left {
        mul(&mut limbs, single);
    }
    let mut text = limbs.last().map(|l| l.to_string()).unwrap_or_default();
    for l in limbs.iter().rev().skip(1) {
        text.push_str(&format!("{l:09}"));
    }
    let pow10 = if e >= 0 { 0 } else { e };
    Dec::from_digits(false, text.as_bytes(), pow10)
}

/// The midpoints below and above a finite double: the literals strictly between them parse to
/// it (round to nearest).
fn mids(f: f64) -> (Dec, Dec) {
    if f == 0.0 {
        let h = mul_pow2(1, -1075);
        return (h.negate(), h);
    }
    let (m, e) = decompose(f.abs());
    let m = m as u128;
    let hi = mul_pow2(2 * m + 1, e - 1);
    let lo = if m == 1 << 52 && e > -1074 {
        mul_pow2(4 * m - 1, e - 2)
    } else {
        mul_pow2(2 * m - 1, e - 1)
    };
    if f < 0.0 {
        (hi.negate(), lo.negate())
    } else {
        (lo, hi)
    }
}

fn next_up(f: f64) -> f64 {
    if f == 0.0 {
        return f64::from_bits(1);
    }
    let b = f.to_bits();
    f64::from_bits(if f > 0.0 { b + 1 } else { b - 1 })
}

fn next_down(f: f64) -> f64 {
    -next_up(-f)
}

/// One end of an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    Unbounded,
    Closed(Dec),
    Open(Dec),
}

/// A set of exact decimals between two ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interval {
    pub(crate) lo: End,
    pub(crate) hi: End,
}

impl Interval {
    pub(crate) fn all() -> Interval {
        Interval {
            lo: End::Unbounded,
            hi: End::Unbounded,
        }
    }

    pub(crate) fn contains(&self, x: &Dec) -> bool {
        let lo_ok = match &self.lo {
            End::Unbounded => true,
            End::Closed(l) => x >= l,
            End::Open(l) => x > l,
        };
        let hi_ok = match &self.hi {
            End::Unbounded => true,
            End::Closed(h) => x <= h,
            End::Open(h) => x < h,
        };
        lo_ok && hi_ok
    }

    pub(crate) fn is_empty(&self) -> bool {
        match (&self.lo, &self.hi) {
            (End::Closed(l), End::Closed(h)) => l > h,
            (End::Closed(l), End::Open(h))
            | (End::Open(l), End::Closed(h))
            | (End::Open(l), End::Open(h)) => l >= h,
            _ => false,
        }
    }

    fn intersect(&self, other: &Interval) -> Interval {
        let lo = match (&self.lo, &other.lo) {
            (End::Unbounded, x) | (x, End::Unbounded) => x.clone(),
            (a, b) => {
                let (va, vb) = (end_val(a), end_val(b));
                match va.cmp(vb) {
                    Ordering::Greater => a.clone(),
                    Ordering::Less => b.clone(),
                    Ordering::Equal => {
                        if matches!(a, End::Open(_)) {
                            a.clone()
                        } else {
                            b.clone()
                        }
                    }
                }
            }
        };
        let hi = match (&self.hi, &other.hi) {
            (End::Unbounded, x) | (x, End::Unbounded) => x.clone(),
            (a, b) => {
                let (va, vb) = (end_val(a), end_val(b));
                match va.cmp(vb) {
                    Ordering::Less => a.clone(),
                    Ordering::Greater => b.clone(),
                    Ordering::Equal => {
                        if matches!(a, End::Open(_)) {
                            a.clone()
                        } else {
                            b.clone()
                        }
                    }
                }
            }
        };
        Interval { lo, hi }
    }

    /// The magnitudes of the part at or above zero (`neg == false`) or at or below it.
    fn magnitudes(&self, neg: bool) -> Option<Interval> {
        let zero = Interval {
            lo: End::Closed(Dec::zero()),
            hi: End::Unbounded,
        };
        let part = if neg {
            self.mirror().intersect(&zero)
        } else {
            self.intersect(&zero)
        };
        (!part.is_empty()).then_some(part)
    }

    fn mirror(&self) -> Interval {
        let flip = |e: &End| match e {
            End::Unbounded => End::Unbounded,
            End::Closed(d) => End::Closed(d.negate()),
            End::Open(d) => End::Open(d.negate()),
        };
        Interval {
            lo: flip(&self.hi),
            hi: flip(&self.lo),
        }
    }
}

fn end_val(e: &End) -> &Dec {
    match e {
        End::Closed(d) | End::Open(d) => d,
        End::Unbounded => unreachable!("unbounded ends are handled first"),
    }
}

/// Intersection of two unions of intervals.
pub(crate) fn intersect(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let i = x.intersect(y);
            if !i.is_empty() {
                out.push(i);
            }
        }
    }
    out
}

/// A comparison, seen from the value being written (`x op partner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    pub(crate) fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "==" => Op::Eq,
            "!=" => Op::Ne,
            _ => return None,
        })
    }

    /// `a op b` ⟺ `b op.flip() a`.
    pub(crate) fn flip(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            other => other,
        }
    }

    pub(crate) fn holds(self, ord: Ordering) -> bool {
        match self {
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
        }
    }
}

const EXACT_INT: f64 = 9_007_199_254_740_992.0; // 2^53

/// The literals `x` whose parsed value satisfies `x op p` for the validator, where `p` is a
/// partner's or a bound's value (an integer or a double, as serde_json reads numbers).
pub(crate) fn permitted(op: Op, p: &Dec) -> Vec<Interval> {
    let below = |e: End| Interval {
        lo: End::Unbounded,
        hi: e,
    };
    let above = |e: End| Interval {
        lo: e,
        hi: End::Unbounded,
    };
    match p.exact_f64() {
        Some(d) if d.abs() <= EXACT_INT => {
            let (lm, hm) = mids(d);
            match op {
                Op::Le => vec![below(End::Open(hm))],
                Op::Lt => vec![below(End::Open(lm))],
                Op::Ge => vec![above(End::Open(lm))],
                Op::Gt => vec![above(End::Open(hm))],
                Op::Eq => vec![Interval {
                    lo: End::Open(lm),
                    hi: End::Open(hm),
                }],
                Op::Ne => vec![below(End::Open(lm)), above(End::Open(hm))],
            }
        }
        _ => {
            // Beyond 2^53 integers and doubles interleave: keep to doubles on the safe side,
            // which compare the same whether written as integers or floats.
            let f = p.nearest_f64();
            let fd = Dec::from_f64(f);
            let (le, ge) = match fd.cmp(p) {
                Ordering::Equal => (f, f),
                Ordering::Less => (f, next_up(f)),
                Ordering::Greater => (next_down(f), f),
            };
            let lt = if Dec::from_f64(le) == *p {
                next_down(le)
            } else {
                le
            };
            let gt = if Dec::from_f64(ge) == *p {
                next_up(ge)
            } else {
                ge
            };
            let d = |f: f64| Dec::from_f64(f);
            match op {
                Op::Le => vec![below(End::Closed(d(le)))],
                Op::Lt => vec![below(End::Closed(d(lt)))],
                Op::Ge => vec![above(End::Closed(d(ge)))],
                Op::Gt => vec![above(End::Closed(d(gt)))],
                Op::Eq => vec![Interval {
                    lo: End::Closed(p.clone()),
                    hi: End::Closed(p.clone()),
                }],
                Op::Ne => vec![below(End::Closed(d(lt))), above(End::Closed(d(gt)))],
            }
        }
    }
}

/// A set of numbers split into the magnitudes of its nonnegative and nonpositive parts.
#[derive(Debug, Clone)]
pub(crate) struct Parts {
    pos: Vec<Interval>,
    neg: Vec<Interval>,
}

impl Parts {
    pub(crate) fn of(set: &[Interval]) -> Parts {
        Parts {
            pos: set.iter().filter_map(|i| i.magnitudes(false)).collect(),
            neg: set.iter().filter_map(|i| i.magnitudes(true)).collect(),
        }
    }
}

/// What a number literal may still become: the grammar's number syntax for the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NumSyntax {
    /// A fraction may follow the integer part.
    pub(crate) fraction: bool,
    /// An exponent may follow the mantissa.
    pub(crate) exponent: bool,
}

/// Most digits the filter lets an exponent have (`1e999`); longer ones are dropped.
pub(crate) const MAX_EXP_DIGITS: usize = 3;

/// The parts of a number literal written so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NumPrefix {
    pub(crate) text: Vec<u8>,
}

impl NumPrefix {
    /// Whether the prefix can still become a literal inside `set` (a union of intervals).
    #[cfg(test)]
    pub(crate) fn feasible(&self, syntax: NumSyntax, set: &[Interval]) -> bool {
        self.feasible_in(syntax, &Parts::of(set))
    }

    /// [`NumPrefix::feasible`] with the set already split by sign.
    pub(crate) fn feasible_in(&self, syntax: NumSyntax, split: &Parts) -> bool {
        let t = &self.text;
        let (neg, rest) = match t.split_first() {
            Some((b'-', r)) => (true, r),
            _ => (false, &t[..]),
        };
        let parts = if neg { &split.neg } else { &split.pos };
        if parts.is_empty() {
            return false;
        }
        if rest.is_empty() {
            // Only a sign: any magnitude (with a fraction, any value; else any integer).
            return parts.iter().any(|p| has_reachable_int_or_any(p, syntax));
        }
        let epos = rest.iter().position(|&c| c == b'e' || c == b'E');
        let mantissa = &rest[..epos.unwrap_or(rest.len())];
        let (int, frac) = match mantissa.iter().position(|&c| c == b'.') {
            Some(p) => (&mantissa[..p], Some(&mantissa[p + 1..])),
            None => (mantissa, None),
        };
        if let Some(epos) = epos {
            let mut digits = int.to_vec();
            digits.extend_from_slice(frac.unwrap_or(&[]));
            let m = Dec::from_digits(false, &digits, -(frac.map_or(0, <[u8]>::len) as i64));
            let e = &rest[epos + 1..];
            let (esign, edigits) = match e.split_first() {
                Some((b'-', r)) => (Some(true), r),
                Some((b'+', r)) => (Some(false), r),
                _ => (None, e),
            };
            if edigits.len() > MAX_EXP_DIGITS {
                return false;
            }
            return parts.iter().any(|p| exp_feasible(&m, esign, edigits, p));
        }
        let tmin = if syntax.exponent { -max_exp() } else { 0 };
        let tmax = if syntax.exponent {
            Some(max_exp())
        } else {
            Some(0)
        };
        match frac {
            Some(f) => {
                let mut digits = int.to_vec();
                digits.extend_from_slice(f);
                let lo = Dec::from_digits(false, &digits, -(f.len() as i64));
                let width = Dec::from_digits(false, b"1", -(f.len() as i64));
                let hi = add_pos(&lo, &width);
                parts.iter().any(|p| family(&lo, &hi, tmin, tmax, p))
            }
            None => {
                let d = Dec::from_digits(false, int, 0);
                let int_complete = int == b"0";
                if !syntax.fraction {
                    // Integers only: `d`, or more digits.
                    return parts.iter().any(|p| int_family(int, p));
                }
                if int_complete {
                    let width = Dec::from_digits(false, b"1", 0);
                    return parts
                        .iter()
                        .any(|p| family(&Dec::zero(), &width, tmin, tmax, p));
                }
                let hi = add_pos(&d, &Dec::from_digits(false, b"1", 0));
                parts.iter().any(|p| family(&d, &hi, tmin, None, p))
            }
        }
    }

    /// Whether the finished literal lies inside `set`.
    pub(crate) fn complete_in(&self, set: &[Interval]) -> bool {
        match Dec::parse_literal(&self.text) {
            Some(v) => set.iter().any(|i| i.contains(&v)),
            None => false,
        }
    }
}

fn max_exp() -> i64 {
    10i64.pow(MAX_EXP_DIGITS as u32) - 1
}

/// `a + b` for nonnegative decimals.
fn add_pos(a: &Dec, b: &Dec) -> Dec {
    if a.is_zero() {
        return b.clone();
    }
    if b.is_zero() {
        return a.clone();
    }
    // Align on the smallest unit: value = int × 10^unit.
    let unit_a = a.exp - a.digits.len() as i64;
    let unit_b = b.exp - b.digits.len() as i64;
    let unit = unit_a.min(unit_b);
    let pad = |d: &Dec, u: i64| -> Vec<u8> {
        let mut v = d.digits.clone();
        v.extend(std::iter::repeat_n(0u8, (u - unit) as usize));
        v
    };
    let (x, y) = (pad(a, unit_a), pad(b, unit_b));
    let n = x.len().max(y.len()) + 1;
    let mut out = vec![0u8; n];
    let mut carry = 0u8;
    for i in 0..n {
        let dx = if i < x.len() { x[x.len() - 1 - i] } else { 0 };
        let dy = if i < y.len() { y[y.len() - 1 - i] } else { 0 };
        let s = dx + dy + carry;
        out[n - 1 - i] = s % 10;
        carry = s / 10;
    }
    Dec::from_digits(false, &out, unit)
}

/// Whether `[lo·10^t, hi·10^t)` meets `part` for some `t` in `tmin..=tmax` (`None`: no upper
/// limit); `0 <= lo < hi`, `part` within `[0, ∞)`.
fn family(lo: &Dec, hi: &Dec, tmin: i64, tmax: Option<i64>, part: &Interval) -> bool {
    let meets = |t: i64| {
        let candidate = Interval {
            lo: End::Closed(lo.shift(t)),
            hi: End::Open(hi.shift(t)),
        };
        !candidate.intersect(part).is_empty()
    };
    if lo.is_zero() {
        // The union is [0, hi·10^tmax).
        return match tmax {
            Some(t) => meets(t),
            None => !part.is_empty(),
        };
    }
    // Smallest t whose upper end passes the part's lower end; larger t only move right.
    let t = match &part.lo {
        End::Unbounded => tmin,
        End::Closed(l) | End::Open(l) => {
            if l.is_zero() {
                tmin
            } else {
                let guess = l.exp() - hi.exp() - 1;
                let mut t = guess.max(tmin);
                while hi.shift(t) <= *l {
                    t += 1;
                }
                t
            }
        }
    };
    let t = t.max(tmin);
    if let Some(tmax) = tmax {
        if t > tmax {
            return false;
        }
    }
    meets(t)
}

/// Integer literals starting with `int` (no fraction, no exponent) inside `part`.
fn int_family(int: &[u8], part: &Interval) -> bool {
    let d = Dec::from_digits(false, int, 0);
    if int == b"0" {
        return part.contains(&d);
    }
    if part.contains(&d) {
        return true;
    }
    let one = Dec::from_digits(false, b"1", 0);
    let next = add_pos(&d, &one);
    for j in 1..400i64 {
        let lo = d.shift(j);
        // Largest integer with this prefix and j more digits: (d+1)·10^j − 1.
        let hi_excl = next.shift(j);
        let candidate = Interval {
            lo: End::Closed(lo.clone()),
            hi: End::Open(hi_excl),
        };
        let meet = candidate.intersect(part);
        if !meet.is_empty() && has_int(&meet) {
            return true;
        }
        let beyond = match &part.hi {
            End::Unbounded => false,
            End::Closed(h) | End::Open(h) => lo > *h,
        };
        if beyond {
            return false;
        }
    }
    false
}

/// Whether a nonempty interval holds an integer.
fn has_int(i: &Interval) -> bool {
    let (lo, lo_open) = match &i.lo {
        End::Unbounded => return true,
        End::Closed(d) => (d, false),
        End::Open(d) => (d, true),
    };
    let c = ceil(lo);
    let c = if lo_open && c == *lo {
        add_pos_signed(&c, 1)
    } else {
        c
    };
    i.contains(&c)
}

fn ceil(d: &Dec) -> Dec {
    if d.is_zero() || d.exp >= d.digits.len() as i64 {
        return d.clone();
    }
    if d.exp <= 0 {
        return if d.neg {
            Dec::zero()
        } else {
            Dec::from_digits(false, b"1", 0)
        };
    }
    let int = Dec::from_digits(d.neg, &d.digits[..d.exp as usize], 0);
    if d.neg {
        int
    } else {
        add_pos_signed(&int, 1)
    }
}

fn add_pos_signed(d: &Dec, k: i128) -> Dec {
    // Integers only (`d` is integral and small enough for i128 in practice).
    let text: String = d.digits.iter().map(|&x| (b'0' + x) as char).collect();
    let zeros = (d.exp - d.digits.len() as i64).max(0) as usize;
    let v: Option<i128> = format!("{text}{}", "0".repeat(zeros)).parse().ok();
    match v {
        Some(v) => Dec::from_i128(if d.neg { -v } else { v } + k),
        None => d.clone(),
    }
}

fn has_reachable_int_or_any(part: &Interval, syntax: NumSyntax) -> bool {
    if syntax.fraction {
        !part.is_empty()
    } else {
        has_int(part)
    }
}

/// Whether `m × 10^k` lies in `part` for an exponent `k` the written exponent prefix allows.
fn exp_feasible(m: &Dec, esign: Option<bool>, edigits: &[u8], part: &Interval) -> bool {
    if m.is_zero() {
        return part.contains(m);
    }
    // The k with m·10^k in part form one range [k1, k2].
    let k1 = match &part.lo {
        End::Unbounded => i64::MIN / 4,
        End::Closed(l) | End::Open(l) => {
            if l.is_zero() {
                i64::MIN / 4
            } else {
                let mut k = l.exp() - m.exp() - 1;
                while !End::lo_ok(&part.lo, &m.shift(k)) {
                    k += 1;
                }
                k
            }
        }
    };
    let k2 = match &part.hi {
        End::Unbounded => i64::MAX / 4,
        End::Closed(h) | End::Open(h) => {
            let mut k = h.exp() - m.exp() + 1;
            while !End::hi_ok(&part.hi, &m.shift(k)) {
                k -= 1;
                if k < k1 {
                    return false;
                }
            }
            k
        }
    };
    if k1 > k2 {
        return false;
    }
    let cap = MAX_EXP_DIGITS;
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    if edigits.is_empty() {
        let m = max_exp();
        match esign {
            Some(true) => ranges.push((-m, 0)),
            Some(false) => ranges.push((0, m)),
            None => ranges.push((-m, m)),
        }
    } else {
        let e: i64 = std::str::from_utf8(edigits)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        for r in 0..=(cap - edigits.len()) {
            let p = 10i64.pow(r as u32);
            let (a, b) = (e * p, (e + 1) * p - 1);
            if esign == Some(true) {
                ranges.push((-b, -a));
            } else {
                ranges.push((a, b));
            }
        }
    }
    ranges.iter().any(|&(a, b)| a.max(k1) <= b.min(k2))
}

impl End {
    fn lo_ok(e: &End, x: &Dec) -> bool {
        match e {
            End::Unbounded => true,
            End::Closed(l) => x >= l,
            End::Open(l) => x > l,
        }
    }

    fn hi_ok(e: &End, x: &Dec) -> bool {
        match e {
            End::Unbounded => true,
            End::Closed(h) => x <= h,
            End::Open(h) => x < h,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse_literal(s.as_bytes()).unwrap()
    }

    const NUM: NumSyntax = NumSyntax {
        fraction: true,
        exponent: false,
    };
    const EXP: NumSyntax = NumSyntax {
        fraction: true,
        exponent: true,
    };
    const INT: NumSyntax = NumSyntax {
        fraction: false,
        exponent: false,
    };

    fn feasible(prefix: &str, syntax: NumSyntax, set: &[Interval]) -> bool {
        NumPrefix {
            text: prefix.as_bytes().to_vec(),
        }
        .feasible(syntax, set)
    }

    #[test]
    fn literals_compare_exactly() {
        assert_eq!(d("0.5e1"), d("5"));
        assert_eq!(d("-0"), Dec::zero());
        assert_eq!(d("-0.0e7"), Dec::zero());
        assert!(d("0.30000000000000001") > d("0.3"));
        assert!(d("-2") < d("-1.5"));
        assert!(d("1e2") > d("99.999"));
        assert_eq!(Dec::from_f64(0.5), d("0.5"));
        assert_eq!(
            Dec::from_f64(0.1),
            d("0.1000000000000000055511151231257827021181583404541015625")
        );
        assert_eq!(Dec::from_f64(1e300).nearest_f64(), 1e300);
        assert_eq!(Dec::from_f64(5e-324).nearest_f64(), 5e-324);
        assert_eq!(d("0.3").exact_f64(), None);
        assert_eq!(d("12").exact_f64(), Some(12.0));
    }

    #[test]
    fn permitted_sets_follow_f64_parsing() {
        let le = permitted(Op::Le, &Dec::from_f64(0.3));
        // Parses to 0.3: allowed although larger than 0.3 as a decimal.
        assert!(le.iter().any(|i| i.contains(&d("0.30000000000000001"))));
        assert!(!le.iter().any(|i| i.contains(&d("0.30000000000000004"))));
        let lt = permitted(Op::Lt, &Dec::from_f64(0.3));
        assert!(!lt.iter().any(|i| i.contains(&d("0.29999999999999999"))));
        assert!(lt.iter().any(|i| i.contains(&d("0.2999999999999999"))));
        let gt0 = permitted(Op::Gt, &Dec::zero());
        assert!(!gt0.iter().any(|i| i.contains(&d("1e-400"))));
        assert!(gt0.iter().any(|i| i.contains(&d("1e-300"))));
        let finite = permitted(Op::Le, &Dec::from_f64(f64::MAX));
        assert!(finite
            .iter()
            .any(|i| i.contains(&d("1.7976931348623157e308"))));
        assert!(!finite.iter().any(|i| i.contains(&d("1e309"))));
        let big = permitted(Op::Le, &Dec::from_i128(9_007_199_254_740_993));
        assert!(big.iter().any(|i| i.contains(&d("9007199254740992"))));
        assert!(!big.iter().any(|i| i.contains(&d("9007199254740994"))));
    }

    #[test]
    fn prefixes() {
        let ge5 = permitted(Op::Ge, &d("5"));
        assert!(feasible("5", NUM, &ge5));
        assert!(feasible("4", NUM, &ge5)); // 40
        assert!(!feasible("0", NUM, &ge5));
        assert!(!feasible("0.", NUM, &ge5));
        assert!(feasible("0.", EXP, &ge5)); // 0.5e1
        assert!(feasible("4.9", NUM, &ge5)); // 4.99999999999999999 parses to 5
        assert!(!feasible("4.8", NUM, &ge5));
        assert!(feasible("4.9e", EXP, &ge5));
        assert!(!feasible("4.9e-", EXP, &ge5));
        assert!(!feasible("-", NUM, &ge5));
        let le_neg = permitted(Op::Le, &d("-2"));
        assert!(feasible("-", NUM, &le_neg));
        assert!(feasible("-1", NUM, &le_neg)); // -10
        assert!(feasible("-1.", NUM, &le_neg)); // -1.99999999999999999 parses to -2
        assert!(!feasible("-1.5", NUM, &le_neg));
        assert!(!feasible("-0", NUM, &le_neg));
        assert!(!feasible("1", NUM, &le_neg));
        let le3 = permitted(Op::Le, &d("3"));
        assert!(feasible("3", INT, &le3));
        assert!(!feasible("4", INT, &le3));
        assert!(feasible("-0", INT, &le3));
        let range = intersect(&permitted(Op::Ge, &d("1")), &permitted(Op::Le, &d("4")));
        assert!(feasible("2", INT, &range));
        assert!(feasible("1", INT, &range));
        assert!(!feasible("5", INT, &range));
        // Long exponents are capped.
        let any = vec![Interval::all()];
        assert!(feasible("1e00", EXP, &any));
        assert!(!feasible("1e0000", EXP, &any));
        let finite = intersect(
            &permitted(Op::Le, &Dec::from_f64(f64::MAX)),
            &permitted(Op::Ge, &Dec::from_f64(-f64::MAX)),
        );
        assert!(feasible("1e30", EXP, &finite));
        assert!(!feasible("1e309", EXP, &finite));
        assert!(feasible("2e30", EXP, &finite)); // 2e307 still
                                                 // Exactly equal to a partner written with many digits.
        let eq = permitted(Op::Eq, &Dec::from_f64(0.1));
        assert!(feasible("0.1", NUM, &eq));
        assert!(!feasible("0.2", NUM, &eq));
        assert!(NumPrefix {
            text: b"0.1".to_vec()
        }
        .complete_in(&eq));
        assert!(NumPrefix {
            text: b"0.10000000000000001".to_vec()
        }
        .complete_in(&eq));
    }
}
