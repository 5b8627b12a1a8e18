//! The value filter's number sets: "can this number prefix still end inside the values the
//! rules permit?", answered on exact decimals (contract-core's [`Decimal`]), never in `f64`.
//!
//! The sets a rule permits are unions of [`Interval`]s of exact decimals, chosen so that every
//! decimal inside one is accepted by the validator, which compares numbers after serde_json
//! has parsed them (integers exactly, the rest as `f64`): `x <= 0.3` becomes "x below the midpoint
//! between 0.3 and the next double", the exact set of literals that parse to at most `0.3`.

use std::cmp::Ordering;
use std::sync::LazyLock;

use contract_core::decimal::Decimal;
use contract_core::CmpOp;

/// One end of an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    Unbounded,
    Closed(Decimal),
    Open(Decimal),
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

    pub(crate) fn contains(&self, x: &Decimal) -> bool {
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

    /// The magnitudes of the part at or above zero (`neg == false`) or below it.
    fn magnitudes(&self, neg: bool) -> Option<Interval> {
        // A negative literal writes a value the validator reads below zero: zero is written
        // `0`, never `-0`, which llguidance's number ranges do not take. With `-0` allowed, the
        // filter let a model write `-` where only `-0` kept a rule, and the JSON Schema mask of
        // a runtime contract then allowed no digit after it (`mask_soundness`, the runtime
        // walks). Nor `-0.000…03` under `y >= 0`: the literals between it and zero that parse
        // to `-0.0` have over 300 digits, past `MAX_NUMBER_LEN`, and the runtime walks found
        // that one too.
        let zero = Interval {
            lo: End::Closed(Decimal::ZERO),
            hi: End::Unbounded,
        };
        // Below zero as the validator reads it, computed once: its end is the exact midpoint
        // between zero and the least double, a decimal of some 750 digits.
        static BELOW_ZERO: LazyLock<Interval> = LazyLock::new(|| {
            let below = permitted(CmpOp::Lt, &Decimal::ZERO);
            below.first().map_or_else(Interval::all, Clone::clone)
        });
        let part = if neg {
            self.intersect(&BELOW_ZERO).mirror().intersect(&zero)
        } else {
            self.intersect(&zero)
        };
        (!part.is_empty()).then_some(part)
    }

    fn mirror(&self) -> Interval {
        let flip = |e: &End| match e {
            End::Unbounded => End::Unbounded,
            End::Closed(d) => End::Closed(d.negated()),
            End::Open(d) => End::Open(d.negated()),
        };
        Interval {
            lo: flip(&self.hi),
            hi: flip(&self.lo),
        }
    }
}

fn end_val(e: &End) -> &Decimal {
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

const EXACT_INT: f64 = 9_007_199_254_740_992.0; // 2^53

/// The literals `x` whose parsed value satisfies `x op p` for the validator, where `p` is a
/// partner's or a bound's value (an integer or a double, as serde_json reads numbers).
pub(crate) fn permitted(op: CmpOp, p: &Decimal) -> Vec<Interval> {
    let below = |e: End| Interval {
        lo: End::Unbounded,
        hi: e,
    };
    let above = |e: End| Interval {
        lo: e,
        hi: End::Unbounded,
    };
    let small = p.exact_f64().filter(|d| d.abs() <= EXACT_INT);
    if let Some((lm, hm)) = small.and_then(Decimal::midpoints) {
        return match op {
            CmpOp::Le => vec![below(End::Open(hm))],
            CmpOp::Lt => vec![below(End::Open(lm))],
            CmpOp::Ge => vec![above(End::Open(lm))],
            CmpOp::Gt => vec![above(End::Open(hm))],
            CmpOp::Eq => vec![Interval {
                lo: End::Open(lm),
                hi: End::Open(hm),
            }],
            CmpOp::Ne => vec![below(End::Open(lm)), above(End::Open(hm))],
        };
    }
    // Beyond 2^53 integers and doubles interleave: keep to doubles on the safe side,
    // which compare the same whether written as integers or floats. An infinity stands
    // past every finite double.
    let f = p.nearest_f64();
    let beyond = if f > 0.0 {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    let (le, ge) = match Decimal::from_f64(f).map_or(beyond, |fd| fd.cmp(p)) {
        Ordering::Equal => (f, f),
        Ordering::Less => (f, f.next_up()),
        Ordering::Greater => (f.next_down(), f),
    };
    let is_p = |f: f64| Decimal::from_f64(f).as_ref() == Some(p);
    let lt = if is_p(le) { le.next_down() } else { le };
    let gt = if is_p(ge) { ge.next_up() } else { ge };
    // A closed end at a double. Past `±f64::MAX` (`x > f64::MAX`), an open end at it: every
    // number field's domain lies within `±f64::MAX`, so the part beyond holds nothing.
    let d = |f: f64| match Decimal::from_f64(f) {
        Some(x) => End::Closed(x),
        None => End::Open(Decimal::from_f64(f.clamp(f64::MIN, f64::MAX)).unwrap_or_default()),
    };
    match op {
        CmpOp::Le => vec![below(d(le))],
        CmpOp::Lt => vec![below(d(lt))],
        CmpOp::Ge => vec![above(d(ge))],
        CmpOp::Gt => vec![above(d(gt))],
        CmpOp::Eq => vec![Interval {
            lo: End::Closed(p.clone()),
            hi: End::Closed(p.clone()),
        }],
        CmpOp::Ne => vec![below(d(lt)), above(d(gt))],
    }
}

/// A set of numbers split into the magnitudes of its nonnegative and negative parts.
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

impl Parts {
    /// The magnitudes of the negative part (`neg`) or of the other.
    fn of_sign(&self, neg: bool) -> &[Interval] {
        if neg {
            &self.neg
        } else {
            &self.pos
        }
    }
}

/// A number literal's prefix read into its parts: sign, integer digits, fraction digits after a
/// point, and the exponent's sign and digits after an `e`.
struct Written<'a> {
    neg: bool,
    /// Everything after the sign.
    rest: &'a [u8],
    int: &'a [u8],
    frac: Option<&'a [u8]>,
    /// The exponent's sign (`Some(true)`: `-`) and digits, once an `e` is written.
    exponent: Option<(Option<bool>, &'a [u8])>,
}

impl<'a> Written<'a> {
    fn of(t: &'a [u8]) -> Written<'a> {
        let (neg, rest) = match t.split_first() {
            Some((b'-', r)) => (true, r),
            _ => (false, t),
        };
        let epos = rest.iter().position(|&c| c == b'e' || c == b'E');
        let mantissa = &rest[..epos.unwrap_or(rest.len())];
        let (int, frac) = match mantissa.iter().position(|&c| c == b'.') {
            Some(p) => (&mantissa[..p], Some(&mantissa[p + 1..])),
            None => (mantissa, None),
        };
        let exponent = epos.map(|epos| {
            let e = &rest[epos + 1..];
            match e.split_first() {
                Some((b'-', r)) => (Some(true), r),
                Some((b'+', r)) => (Some(false), r),
                _ => (None, e),
            }
        });
        Written {
            neg,
            rest,
            int,
            frac,
            exponent,
        }
    }

    /// Whether only a sign (or nothing) is written.
    fn is_sign(&self) -> bool {
        self.rest.is_empty()
    }

    /// The mantissa's digits, its point left out.
    fn digits(&self) -> Vec<u8> {
        let mut digits = self.int.to_vec();
        digits.extend_from_slice(self.frac.unwrap_or(&[]));
        digits
    }

    /// The mantissa's value, its point where written.
    fn mantissa(&self) -> Option<Decimal> {
        let k = -(self.frac.map_or(0, <[u8]>::len) as i64);
        Decimal::from_scaled(false, &self.digits(), k)
    }

    /// The mantissa's digits as one integer, its point left out; `None` past `i128`.
    fn mantissa_int(&self) -> Option<i128> {
        std::str::from_utf8(&self.digits()).ok()?.parse().ok()
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
        let t = Written::of(&self.text);
        let parts = split.of_sign(t.neg);
        if parts.is_empty() {
            return false;
        }
        if t.is_sign() {
            // Only a sign: any magnitude (with a fraction, any value; else any integer).
            return parts.iter().any(|p| has_reachable_int_or_any(p, syntax));
        }
        let (int, frac) = (t.int, t.frac);
        if let Some((esign, edigits)) = t.exponent {
            let Some(m) = t.mantissa() else {
                return false;
            };
            if edigits.len() > MAX_EXP_DIGITS {
                return false;
            }
            return parts
                .iter()
                .any(|p| exp_feasible(&m, esign, edigits, p, usize::MAX));
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
                let Some((lo, hi)) = span(&digits, -(f.len() as i64)) else {
                    return false;
                };
                parts.iter().any(|p| family(&lo, &hi, tmin, tmax, p))
            }
            None => {
                if !syntax.fraction {
                    // Integers only: `int`, or more digits.
                    return parts.iter().any(|p| int_family(int, p));
                }
                if int == b"0" {
                    let width = Decimal::from_i128(1);
                    return parts
                        .iter()
                        .any(|p| family(&Decimal::ZERO, &width, tmin, tmax, p));
                }
                let Some((d, hi)) = span(int, 0) else {
                    return false;
                };
                parts.iter().any(|p| family(&d, &hi, tmin, None, p))
            }
        }
    }

    /// Whether the prefix, already [feasible](NumPrefix::feasible_in), can end inside the set
    /// within `room` more bytes (the filter's cap on a literal's length). Without it a prefix
    /// could be feasible only through a literal past the cap: under `9 <= mid < 10` with
    /// exponents, `0.08999999999999999214582147790` still reaches `9` as `…e2`, and with one
    /// byte left nothing could follow it (found by the runtime walks in `mask_soundness`).
    /// The completions looked for are more digits (a point among them where none is written),
    /// then, where the syntax has exponents, an exponent: the exponents tried for each length of
    /// the mantissa are those of a window the set's ends give, all of it when it is at most 48
    /// wide, else its 24 at each end and those from -3 to 3.
    pub(crate) fn completes_within(&self, room: usize, syntax: NumSyntax, split: &Parts) -> bool {
        let t = Written::of(&self.text);
        let parts = split.of_sign(t.neg);
        if t.is_sign() {
            // Only a sign, at most one byte into the cap: feasibility decides.
            return true;
        }
        if let Some((esign, edigits)) = t.exponent {
            let Some(m) = t.mantissa() else {
                return false;
            };
            return parts
                .iter()
                .any(|p| exp_feasible(&m, esign, edigits, p, room));
        }
        let m = t.mantissa_int();
        let (lone_zero, frac) = (t.int == b"0", t.frac.map(<[u8]>::len));
        if parts
            .iter()
            .any(|p| digits_reach(m, lone_zero, frac, room, syntax.fraction, p))
        {
            return true;
        }
        syntax.exponent
            && room >= 2
            && parts
                .iter()
                .any(|p| mantissa_and_exponent_reach(m, lone_zero, frac, room, p))
    }

    /// Whether the finished literal lies inside `set`.
    pub(crate) fn complete_in(&self, set: &[Interval]) -> bool {
        let literal = std::str::from_utf8(&self.text).ok();
        literal
            .and_then(Decimal::from_json_literal)
            .is_some_and(|v| set.iter().any(|i| i.contains(&v)))
    }
}

/// Whether the mantissa written, `m` as an integer (its point left out) with `frac` digits after
/// its point (`None`: no point; `lone_zero`: the integer part is a lone `0`), reaches `part`
/// (magnitudes) with at most `room` more digits, a point among them where none is written and
/// `fraction` allows one.
fn digits_reach(
    m: Option<i128>,
    lone_zero: bool,
    frac: Option<usize>,
    room: usize,
    fraction: bool,
    part: &Interval,
) -> bool {
    match frac {
        // A point needs a digit after it.
        Some(f) => (f > 0 || room > 0) && grid_meets(extended(m, room), (f + room) as i64, part),
        None => {
            // No digit after a leading zero but the point's.
            let most = if lone_zero { 0 } else { room };
            (0..=most).any(|j| {
                grid_meets(extended(m, j), 0, part)
                    || (fraction && room >= j + 2 && {
                        let q = room - j - 1;
                        grid_meets(extended(m, j + q), q as i64, part)
                    })
            })
        }
    }
}

/// The integers `k` more digits after the integer `m` write: `m × 10^k` to
/// `(m + 1) × 10^k - 1`; `None` past `i128` (not within the length cap) or without `m`.
fn extended(m: Option<i128>, k: usize) -> Option<(i128, i128)> {
    let step = 10i128.checked_pow(k as u32)?;
    let lo = m?.checked_mul(step)?;
    Some((lo, lo.checked_add(step - 1)?))
}

/// Whether some integer `N` of `range` ([`extended`]) has `N × 10^-q` in `part`. Where the
/// integers overflow (`None`), yes.
fn grid_meets(range: Option<(i128, i128)>, q: i64, part: &Interval) -> bool {
    let Some((lo, hi)) = range else {
        return true;
    };
    // The least (`lower`) or greatest N whose N·10^-q is inside the end `e`; `away` where the
    // end bounds nothing here, `None` where it leaves no N (past i128 on the far side).
    let end = |e: &End, lower: bool, away: i128| -> Option<i128> {
        let (End::Closed(v) | End::Open(v)) = e else {
            return Some(away);
        };
        let a = v.shifted(q);
        let n = match (matches!(e, End::Open(_)) && a.is_integer(), lower) {
            (true, true) => succ(&a),
            (true, false) => pred(&a),
            (false, true) => ceil(&a),
            (false, false) => floor(&a),
        };
        match n.to_i128() {
            Some(n) => Some(n),
            None if a.is_negative() == lower => Some(away),
            None => None,
        }
    };
    let (Some(n_min), Some(n_max)) = (end(&part.lo, true, lo), end(&part.hi, false, hi)) else {
        return false;
    };
    lo.max(n_min) <= hi.min(n_max)
}

/// Whether the mantissa written ([`digits_reach`]'s `m`, `lone_zero`, `frac`), with more digits
/// (and a point after a lone `0`), then an exponent, all within `room` more bytes, reaches
/// `part` (magnitudes). Where the point goes matters only for its byte: the exponent moves the
/// value, so more digits go before it.
fn mantissa_and_exponent_reach(
    m: Option<i128>,
    lone_zero: bool,
    frac: Option<usize>,
    room: usize,
    part: &Interval,
) -> bool {
    let width = |n: i128| n.max(1).to_string().len() as i64;
    for n in 0..=room.saturating_sub(2) {
        // `k` digits added, `f_tot` of the mantissa's digits after its point.
        let (k, f_tot) = match frac {
            Some(0) if n == 0 => continue,
            Some(f) => (n, f + n),
            None if lone_zero && n == 1 => continue,
            None if lone_zero && n > 1 => (n - 1, n - 1),
            None => (n, 0),
        };
        let e_room = room - n - 1;
        let Some((lo_n, hi_n)) = extended(m, k) else {
            return true;
        };
        // The scales `a` at which some N from lo_n to hi_n has N·10^a in the part, widened by
        // one at each end; the exponent is `a + f_tot`.
        let a_lo = match &part.lo {
            End::Closed(l) | End::Open(l) if !l.is_zero() => l.exponent() - width(hi_n) - 1,
            _ => -(max_exp() + f_tot as i64),
        };
        let a_hi = match &part.hi {
            End::Closed(h) | End::Open(h) => h.exponent() - width(lo_n) + 1,
            End::Unbounded => max_exp(),
        };
        let most = |d: usize| 10i64.pow(d.min(MAX_EXP_DIGITS) as u32) - 1;
        let e_min = if e_room >= 2 { -most(e_room - 1) } else { 0 };
        let e_max = most(e_room);
        let (from, to) = (
            (a_lo + f_tot as i64).max(e_min),
            (a_hi + f_tot as i64).min(e_max),
        );
        if from > to {
            continue;
        }
        let mut tried = (from..=to.min(from + 23))
            .chain((to - 23).max(from)..=to)
            .chain((-3..=3).filter(|e| (from..=to).contains(e)));
        if tried.any(|e| grid_meets(Some((lo_n, hi_n)), f_tot as i64 - e, part)) {
            return true;
        }
    }
    false
}

fn max_exp() -> i64 {
    10i64.pow(MAX_EXP_DIGITS as u32) - 1
}

/// `digits × 10^pow10` and `(digits + 1) × 10^pow10`, for the ASCII digits of a prefix: the
/// ends of the values it starts at that scale. `None` when a byte is not a digit.
fn span(digits: &[u8], pow10: i64) -> Option<(Decimal, Decimal)> {
    let lo = Decimal::from_scaled(false, digits, pow10)?;
    // Plus one: the trailing nines become zeros and the digit before them goes up.
    let mut next = digits.to_vec();
    match next.iter().rposition(|&b| b != b'9') {
        Some(i) => {
            next[i] += 1;
            next[i + 1..].fill(b'0');
        }
        None => {
            next.fill(b'0');
            next.insert(0, b'1');
        }
    }
    Some((lo, Decimal::from_scaled(false, &next, pow10)?))
}

/// Whether `[lo·10^t, hi·10^t)` meets `part` for some `t` in `tmin..=tmax` (`None`: no upper
/// limit); `0 <= lo < hi`, `part` within `[0, ∞)`.
fn family(lo: &Decimal, hi: &Decimal, tmin: i64, tmax: Option<i64>, part: &Interval) -> bool {
    let meets = |t: i64| {
        let candidate = Interval {
            lo: End::Closed(lo.shifted(t)),
            hi: End::Open(hi.shifted(t)),
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
                let guess = l.exponent() - hi.exponent() - 1;
                let mut t = guess.max(tmin);
                while hi.shifted(t) <= *l {
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
    let Some((d, next)) = span(int, 0) else {
        return false;
    };
    if int == b"0" {
        return part.contains(&d);
    }
    if part.contains(&d) {
        return true;
    }
    for j in 1..400i64 {
        let lo = d.shifted(j);
        // Largest integer with this prefix and j more digits: (d+1)·10^j − 1.
        let hi_excl = next.shifted(j);
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
    let c = if lo_open && c == *lo { succ(&c) } else { c };
    i.contains(&c)
}

/// The least integer at or above `d`.
pub(crate) fn ceil(d: &Decimal) -> Decimal {
    let t = d.trunc();
    if d.is_integer() || d.is_negative() {
        t
    } else {
        succ(&t)
    }
}

/// The greatest integer at or below `d`.
pub(crate) fn floor(d: &Decimal) -> Decimal {
    let t = d.trunc();
    if d.is_integer() || !d.is_negative() {
        t
    } else {
        pred(&t)
    }
}

/// `d + 1` for an integer `d` that fits `i128`; `d` itself past that.
pub(crate) fn succ(d: &Decimal) -> Decimal {
    d.to_i128()
        .and_then(|v| v.checked_add(1))
        .map_or_else(|| d.clone(), Decimal::from_i128)
}

/// `d - 1` for an integer `d` that fits `i128`; `d` itself past that.
pub(crate) fn pred(d: &Decimal) -> Decimal {
    d.to_i128()
        .and_then(|v| v.checked_sub(1))
        .map_or_else(|| d.clone(), Decimal::from_i128)
}

fn has_reachable_int_or_any(part: &Interval, syntax: NumSyntax) -> bool {
    if syntax.fraction {
        !part.is_empty()
    } else {
        has_int(part)
    }
}

/// Whether `m × 10^k` lies in `part` for an exponent `k` the written exponent prefix allows
/// within `room` more bytes.
fn exp_feasible(
    m: &Decimal,
    esign: Option<bool>,
    edigits: &[u8],
    part: &Interval,
    room: usize,
) -> bool {
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
                let mut k = l.exponent() - m.exponent() - 1;
                while !End::lo_ok(&part.lo, &m.shifted(k)) {
                    k += 1;
                }
                k
            }
        }
    };
    let k2 = match &part.hi {
        End::Unbounded => i64::MAX / 4,
        End::Closed(h) | End::Open(h) => {
            let mut k = h.exponent() - m.exponent() + 1;
            while !End::hi_ok(&part.hi, &m.shifted(k)) {
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
    // The largest exponent of at most `d` digits (`d` at least 1).
    let most = |d: usize| 10i64.pow(d.min(cap) as u32) - 1;
    if edigits.is_empty() {
        match esign {
            Some(true) if room >= 1 => ranges.push((-most(room), 0)),
            Some(false) if room >= 1 => ranges.push((0, most(room))),
            None if room >= 1 => {
                ranges.push((0, most(room)));
                // A minus sign takes a byte of its own.
                if room >= 2 {
                    ranges.push((-most(room - 1), 0));
                }
            }
            _ => {}
        }
    } else {
        let e: i64 = std::str::from_utf8(edigits)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        for r in 0..=(cap.saturating_sub(edigits.len())).min(room) {
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
    fn lo_ok(e: &End, x: &Decimal) -> bool {
        match e {
            End::Unbounded => true,
            End::Closed(l) => x >= l,
            End::Open(l) => x > l,
        }
    }

    fn hi_ok(e: &End, x: &Decimal) -> bool {
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

    fn d(s: &str) -> Decimal {
        Decimal::from_json_literal(s).unwrap()
    }

    fn exact(f: f64) -> Decimal {
        Decimal::from_f64(f).unwrap()
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
    fn permitted_sets_follow_f64_parsing() {
        let le = permitted(CmpOp::Le, &exact(0.3));
        // Parses to 0.3: allowed although larger than 0.3 as a decimal.
        assert!(le.iter().any(|i| i.contains(&d("0.30000000000000001"))));
        assert!(!le.iter().any(|i| i.contains(&d("0.30000000000000004"))));
        let lt = permitted(CmpOp::Lt, &exact(0.3));
        assert!(!lt.iter().any(|i| i.contains(&d("0.29999999999999999"))));
        assert!(lt.iter().any(|i| i.contains(&d("0.2999999999999999"))));
        let gt0 = permitted(CmpOp::Gt, &Decimal::ZERO);
        assert!(!gt0.iter().any(|i| i.contains(&d("1e-400"))));
        assert!(gt0.iter().any(|i| i.contains(&d("1e-300"))));
        let finite = permitted(CmpOp::Le, &exact(f64::MAX));
        assert!(finite
            .iter()
            .any(|i| i.contains(&d("1.7976931348623157e308"))));
        assert!(!finite.iter().any(|i| i.contains(&d("1e309"))));
        let big = permitted(CmpOp::Le, &Decimal::from_i128(9_007_199_254_740_993));
        assert!(big.iter().any(|i| i.contains(&d("9007199254740992"))));
        assert!(!big.iter().any(|i| i.contains(&d("9007199254740994"))));
    }

    #[test]
    fn nothing_lies_past_the_largest_double_and_prefixes_carry() {
        let max = exact(f64::MAX);
        let finite = intersect(
            &permitted(CmpOp::Le, &max),
            &permitted(CmpOp::Ge, &max.negated()),
        );
        assert!(intersect(&finite, &permitted(CmpOp::Gt, &max)).is_empty());
        assert!(intersect(&finite, &permitted(CmpOp::Lt, &max.negated())).is_empty());
        let ne = intersect(&finite, &permitted(CmpOp::Ne, &max));
        assert!(ne.iter().any(|i| i.contains(&d("1e308"))));
        assert!(!ne.iter().any(|i| i.contains(&max)));
        // `9.9` may still reach 10 (`9.99999999999999999`); `9.8` may not.
        let ge10 = permitted(CmpOp::Ge, &d("10"));
        assert!(feasible("9.9", NUM, &ge10));
        assert!(!feasible("9.8", NUM, &ge10));
    }

    #[test]
    fn prefixes() {
        let ge5 = permitted(CmpOp::Ge, &d("5"));
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
        let le_neg = permitted(CmpOp::Le, &d("-2"));
        assert!(feasible("-", NUM, &le_neg));
        assert!(feasible("-1", NUM, &le_neg)); // -10
        assert!(feasible("-1.", NUM, &le_neg)); // -1.99999999999999999 parses to -2
        assert!(!feasible("-1.5", NUM, &le_neg));
        assert!(!feasible("-0", NUM, &le_neg));
        assert!(!feasible("1", NUM, &le_neg));
        let le3 = permitted(CmpOp::Le, &d("3"));
        assert!(feasible("3", INT, &le3));
        assert!(!feasible("4", INT, &le3));
        // Zero is written `0`: `-0` starts no integer (until 2026-12-07 it did, and a walk over
        // a JSON Schema mask that does not take `-0` was left no digit after `-`).
        assert!(!feasible("-0", INT, &le3));
        assert!(feasible("-1", INT, &le3));
        assert!(feasible("-0", NUM, &le3)); // -0.5
        let range = intersect(
            &permitted(CmpOp::Ge, &d("1")),
            &permitted(CmpOp::Le, &d("4")),
        );
        assert!(feasible("2", INT, &range));
        assert!(feasible("1", INT, &range));
        assert!(!feasible("5", INT, &range));
        // Long exponents are capped.
        let any = vec![Interval::all()];
        assert!(feasible("1e00", EXP, &any));
        assert!(!feasible("1e0000", EXP, &any));
        let finite = intersect(
            &permitted(CmpOp::Le, &exact(f64::MAX)),
            &permitted(CmpOp::Ge, &exact(-f64::MAX)),
        );
        assert!(feasible("1e30", EXP, &finite));
        assert!(!feasible("1e309", EXP, &finite));
        assert!(feasible("2e30", EXP, &finite)); // 2e307 still
                                                 // Exactly equal to a partner written with many digits.
        let eq = permitted(CmpOp::Eq, &exact(0.1));
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
