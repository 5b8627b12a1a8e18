//! Comparisons followed through an object: which values a number field may take so that every
//! comparison of the object can still hold, whatever the chain (`low <= mid`, `mid <= high`,
//! `high` at most 10: `low` may not be 30 before `mid` is written).
//!
//! Before it, the filter read a comparison one partner deep: a pending partner bounded the
//! field by the partner's own bounds, not by what the partner's partners leave it. A model could
//! then write `"low": 30` under the chain above and find no `mid` to write.
//!
//! How: each way the object's pending, nullable compared numbers may end up null or given that
//! its `both_or_neither` and `at_least_one` rules allow ([`Rules::nulls_hold`]) is tried (at
//! most [`MAX_FREE`] such fields; past that, those the rules force to be given are given and the
//! others taken as possibly null, one partner deep as before); in each, the bounds of the given
//! numbers are tightened along the comparisons until nothing moves (`a <= b`: `a`'s upper bound
//! is at most `b`'s, `b`'s lower at least `a`'s). An integer's bound is rounded to an integer
//! and a double's strict bound to the next double inward, so a strict chain (`a < b < c`, all
//! integers) leaves room for each value; an enum's bound to its nearest value. An assignment
//! in which some number has no value left is dropped; the field may take any value of the
//! others' ranges. For comparisons without offsets between intervals, this is exact (the
//! ranges are the projections of the solutions); with enums it is arc consistency, which can
//! still admit a value a cycle through `=` rules out. `!=` between two pending numbers is not
//! followed. A string is also held to the finished strings its chains reach through partners
//! that must be given ([`Rules::chained_strings`]), a necessary condition only (the fields'
//! patterns are not searched); booleans are compared with their finished partners only.

use std::sync::Arc;

use contract_core::decimal::Decimal;
use contract_core::CmpOp;

use super::super::rules_dec::{ceil, floor, intersect, permitted, pred, succ, Interval};
use super::permit::Rules;
use super::plan::{Done, Kind, Range as Ends};

/// Most pending nullable compared numbers whose null-or-given choices are tried one by one
/// (`2^MAX_FREE` assignments, each a few passes over the comparisons).
pub(super) const MAX_FREE: usize = 8;

/// A bound of a number: the value, and whether it is only approached (`<`, not `<=`); `None`
/// where there is none (a double's own limit, which every range keeps).
type Bound = Option<(Decimal, bool)>;

/// What a number may be as far as the comparisons go.
#[derive(Debug, Clone, PartialEq)]
struct Range {
    inf: Bound,
    sup: Bound,
    kind: RangeKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum RangeKind {
    Integer,
    /// A number as the validator reads it: a double, or an integer literal exactly.
    Double,
    /// One of an enum's numbers (its index in the object's fields, to find them).
    Points(usize),
}

impl Rules<'_> {
    /// Whether the comparisons of this field's object can all still hold with this field null
    /// (`null`) or given; and, given and a number, the ranges it may take (one per way the other
    /// fields may end up null or given). `None` when no way works.
    pub(super) fn numbers_hold(&self, null: bool) -> Option<Arc<[Ends]>> {
        self.plan.remembered_hold(
            (self.obj, self.field, null),
            || self.partners(),
            || self.numbers_hold_now(null),
        )
    }

    /// [`Rules::numbers_hold`], computed.
    fn numbers_hold_now(&self, null: bool) -> Option<Vec<Ends>> {
        let obj = &self.plan.objects[self.obj];
        let me = self.field;
        let numeric = |f: usize| self.is_number(f);
        let mut free = Vec::new();
        for &g in &obj.compared {
            if g != me && *self.val(g) == Done::Pending && self.slot(g).nullable && numeric(g) {
                free.push(g);
            }
        }
        let enumerate = free.len() <= MAX_FREE;
        let tries = if enumerate { 1usize << free.len() } else { 1 };
        let mut out = Vec::new();
        let mut any = false;
        let mut assume = Vec::with_capacity(free.len() + 1);
        let mut given = vec![false; obj.fields.len()];
        for &g in &obj.compared {
            given[g] = *self.val(g) == Done::Pending && !self.slot(g).nullable;
        }
        for bits in 0..tries {
            assume.clear();
            assume.push((me, null));
            given[me] = !null;
            for (i, &g) in free.iter().enumerate() {
                given[g] = if enumerate {
                    bits >> i & 1 == 1
                } else {
                    !self.nulls_hold(&[(me, null), (g, true)])
                };
                if enumerate {
                    assume.push((g, !given[g]));
                }
            }
            if !self.nulls_hold(&assume) {
                continue;
            }
            let Some(ranges) = self.tighten(&given) else {
                continue;
            };
            any = true;
            if let Some(r) = &ranges[me] {
                out.push((r.inf.clone(), r.sup.clone()));
            }
        }
        any.then_some(out)
    }

    /// The numbers this field may be as far as the comparisons through its object go: the
    /// union of [`Rules::numbers_hold`]'s ranges, as the literals that parse into them. An end
    /// the field's own bounds or a finished partner already set (which the number set holds
    /// anyway) is left open: each end costs an exact conversion of a double.
    pub(super) fn chained_set(&self, ranges: &[Ends]) -> Vec<Interval> {
        let own = self.slot_range(self.field);
        let mut held: Vec<(&Bound, bool)> = Vec::new();
        if let Some(r) = &own {
            held.push((&r.inf, false));
            held.push((&r.sup, true));
        }
        let mut partner_ends = Vec::new();
        for &(op, g) in &self.fp(self.field).compares {
            if let Done::Num(p) = self.val(g) {
                for &(upper, strict) in sides(op) {
                    partner_ends.push((Some((p.clone(), strict)), upper));
                }
            }
        }
        held.extend(partner_ends.iter().map(|(b, s)| (b, *s)));
        // One side of the set: all of it where the end is none or one the set holds anyway.
        let side = |end: &Bound, is_sup: bool| match end {
            Some((v, strict)) if !held.contains(&(end, is_sup)) => {
                permitted(bound_op(is_sup, *strict), v)
            }
            _ => vec![Interval::all()],
        };
        let mut set: Vec<Interval> = Vec::new();
        for (inf, sup) in ranges {
            for i in intersect(&side(inf, false), &side(sup, true)) {
                if !set.contains(&i) {
                    set.push(i);
                }
            }
        }
        set
    }

    /// The sets `op` against pending partner `g`'s own bounds leaves this field (`<=`: at most
    /// `g`'s upper bound), for a partner read one deep.
    pub(super) fn partner_bounds(&self, op: CmpOp, g: usize) -> Vec<Vec<Interval>> {
        let Some(r) = self.slot_range(g) else {
            return Vec::new();
        };
        sides(op)
            .iter()
            .filter_map(|&(upper, strict)| {
                let end = if upper { &r.sup } else { &r.inf };
                end.as_ref()
                    .map(|(v, s)| permitted(bound_op(upper, strict || *s), v))
            })
            .collect()
    }

    /// The finished strings a string here must still compare with through the partners still
    /// to come (`start <= signed <= end`, `start` written: `end >= start` before `signed` is).
    /// Each follows by transitivity along comparisons of one direction (`<=` or `<`, `>=` or
    /// `>`, `=` either way; strict where one step is) through pending string fields that the
    /// null rules force to be given, so it refuses only a value no completion could keep. It
    /// does not know the fields' domains: under `start < signed < end`, two dates a day apart
    /// still leave `signed` none (the numbers' search above knows integers and doubles; strings
    /// have no such step).
    pub(super) fn chained_strings(&self) -> Vec<(CmpOp, Arc<Vec<u8>>)> {
        let obj = &self.plan.objects[self.obj];
        let me = self.field;
        let is_string = |g: usize| match &self.slot(g).kind {
            Kind::Str(_) => true,
            Kind::Enum(e) => !e.strs.is_empty(),
            _ => false,
        };
        // (field, the direction: above (`>=`) or below (`<=`), strict so far)
        let mut seen: Vec<(usize, bool, bool)> = Vec::new();
        let mut queue: Vec<(usize, bool, bool)> = Vec::new();
        let mut out = Vec::new();
        for above in [true, false] {
            queue.push((me, above, false));
        }
        while let Some((f, above, strict)) = queue.pop() {
            for &(op, g) in &obj.fields[f].compares {
                // `f >= g` keeps going up the chain (`f` above), `f <= g` down.
                let Some(&(_, s)) = sides(op).iter().find(|&&(upper, _)| upper != above) else {
                    continue;
                };
                if g == me {
                    continue;
                }
                let strict = strict || s;
                match self.val(g) {
                    // A finished partner of this field itself is read directly.
                    Done::Str(p) if f != me => out.push((bound_op(!above, strict), p.clone())),
                    Done::Pending
                        if is_string(g)
                            && !self.nulls_hold(&[(me, false), (g, true)])
                            && !seen.contains(&(g, above, strict)) =>
                    {
                        seen.push((g, above, strict));
                        queue.push((g, above, strict));
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// Whether field `f` holds a number that comparisons bound: a number slot, or an enum with
    /// numbers, or a finished number.
    fn is_number(&self, f: usize) -> bool {
        matches!(self.val(f), Done::Num(_))
            || match &self.slot(f).kind {
                Kind::Num(_) => true,
                Kind::Enum(e) => !e.nums.is_empty(),
                _ => false,
            }
    }

    /// The range of each given number (`given`, and the finished ones) once the comparisons
    /// have tightened them all; `None` when one is left empty.
    fn tighten(&self, given: &[bool]) -> Option<Vec<Option<Range>>> {
        let obj = &self.plan.objects[self.obj];
        let mut ranges: Vec<Option<Range>> = Vec::with_capacity(given.len());
        let mut points = 0;
        for (f, &g) in given.iter().enumerate() {
            if f != self.field && obj.fields[f].compares.is_empty() {
                ranges.push(None);
                continue;
            }
            let r = match self.val(f) {
                Done::Num(p) => Some(Range {
                    inf: Some((p.clone(), false)),
                    sup: Some((p.clone(), false)),
                    kind: RangeKind::Double,
                }),
                Done::Pending if g => self.slot_range(f),
                _ => None,
            };
            if let Some(Range {
                kind: RangeKind::Points(_),
                ..
            }) = &r
            {
                points += self.enum_nums(f).len();
            }
            ranges.push(r);
        }
        // Bellman-Ford's bound: without a strict cycle every bound settles within a pass per
        // field, and an enum's bound moves at most once per number. A strict cycle (`a < b`,
        // `b < a`) never settles and holds no value.
        let passes = (given.len() + 1) * (points + 2);
        for _ in 0..passes {
            let mut moved = false;
            for &f in &obj.compared {
                let Some(mut r) = ranges[f].clone() else {
                    continue;
                };
                for &(op, g) in &obj.fields[f].compares {
                    let Some(p) = &ranges[g] else { continue };
                    for &(upper, strict) in sides(op) {
                        if upper {
                            lower(&mut r.sup, &p.sup, strict);
                        } else {
                            raise(&mut r.inf, &p.inf, strict);
                        }
                    }
                }
                let r = self.snap(r)?;
                if ranges[f].as_ref() != Some(&r) {
                    ranges[f] = Some(r);
                    moved = true;
                }
            }
            if !moved {
                return Some(ranges);
            }
        }
        None
    }

    /// A pending field's own range, from its slot; `None` for a field that holds no number.
    fn slot_range(&self, f: usize) -> Option<Range> {
        match &self.slot(f).kind {
            Kind::Num(n) => Some(Range {
                inf: n.inf.clone(),
                sup: n.sup.clone(),
                kind: if n.syntax.fraction {
                    RangeKind::Double
                } else {
                    RangeKind::Integer
                },
            }),
            Kind::Enum(e) => {
                let min = e.nums.iter().map(|(_, v)| v).min()?;
                let max = e.nums.iter().map(|(_, v)| v).max()?;
                Some(Range {
                    inf: Some((min.clone(), false)),
                    sup: Some((max.clone(), false)),
                    kind: RangeKind::Points(f),
                })
            }
            _ => None,
        }
    }

    fn enum_nums(&self, f: usize) -> &[(Vec<u8>, Decimal)] {
        match &self.slot(f).kind {
            Kind::Enum(e) => &e.nums,
            _ => &[],
        }
    }

    /// `r` with its bounds moved onto values the field can hold; `None` when none is left.
    fn snap(&self, mut r: Range) -> Option<Range> {
        match r.kind {
            RangeKind::Integer => {
                r.sup = r.sup.map(|sup| match sup {
                    (v, true) if v.is_integer() => (pred(&v), false),
                    (v, _) => (floor(&v), false),
                });
                r.inf = r.inf.map(|inf| match inf {
                    (v, true) if v.is_integer() => (succ(&v), false),
                    (v, _) => (ceil(&v), false),
                });
            }
            RangeKind::Double => {
                // Below 2^53 every integer is a double, so the next double inward is the next
                // value; past it a strict bound stays strict (a range a little too wide).
                let inward = |v: &Decimal, up: bool| {
                    let f = v
                        .exact_f64()
                        .filter(|f| f.abs() <= 9_007_199_254_740_992.0)?;
                    Decimal::from_f64(if up { f.next_up() } else { f.next_down() })
                };
                if let Some((v, true)) = &r.sup {
                    if let Some(d) = inward(v, false) {
                        r.sup = Some((d, false));
                    }
                }
                if let Some((v, true)) = &r.inf {
                    if let Some(d) = inward(v, true) {
                        r.inf = Some((d, false));
                    }
                }
            }
            RangeKind::Points(f) => {
                let inside = |v: &Decimal| {
                    r.inf.as_ref().is_none_or(|(l, s)| v > l || (v == l && !s))
                        && r.sup.as_ref().is_none_or(|(h, s)| v < h || (v == h && !s))
                };
                let mut nums = self
                    .enum_nums(f)
                    .iter()
                    .map(|(_, v)| v)
                    .filter(|v| inside(v));
                let first = nums.next()?;
                let (min, max) = nums.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v)));
                r.inf = Some((min.clone(), false));
                r.sup = Some((max.clone(), false));
            }
        }
        let empty = match (&r.inf, &r.sup) {
            (Some((l, ls)), Some((h, hs))) => match l.cmp(h) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => *ls || *hs,
                std::cmp::Ordering::Less => false,
            },
            _ => false,
        };
        (!empty).then_some(r)
    }
}

/// The bounds `field op partner` puts on the field from the partner's value: `(true, _)` from
/// above (`<=`, `<`), `(false, _)` from below, with whether it is strict; `=` both, not strict;
/// `!=` none. The one reading of an operator as bounds here.
fn sides(op: CmpOp) -> &'static [(bool, bool)] {
    match op {
        CmpOp::Le => &[(true, false)],
        CmpOp::Lt => &[(true, true)],
        CmpOp::Ge => &[(false, false)],
        CmpOp::Gt => &[(false, true)],
        CmpOp::Eq => &[(true, false), (false, false)],
        CmpOp::Ne => &[],
    }
}

/// The comparison that keeps a value under (`upper`) or over a bound, strictly or not: what
/// [`sides`] reads, written back.
fn bound_op(upper: bool, strict: bool) -> CmpOp {
    match (upper, strict) {
        (true, true) => CmpOp::Lt,
        (true, false) => CmpOp::Le,
        (false, true) => CmpOp::Gt,
        (false, false) => CmpOp::Ge,
    }
}

/// `sup` lowered to `by` (made strict with `strict`) where that is tighter.
fn lower(sup: &mut Bound, by: &Bound, strict: bool) {
    let Some((b, bs)) = by else { return };
    let strict = strict || *bs;
    let tighter = sup
        .as_ref()
        .is_none_or(|(v, s)| b < v || (b == v && strict && !s));
    if tighter {
        *sup = Some((b.clone(), strict));
    }
}

/// `inf` raised to `by` (made strict with `strict`) where that is tighter.
fn raise(inf: &mut Bound, by: &Bound, strict: bool) {
    let Some((b, bs)) = by else { return };
    let strict = strict || *bs;
    let tighter = inf
        .as_ref()
        .is_none_or(|(v, s)| b > v || (b == v && strict && !s));
    if tighter {
        *inf = Some((b.clone(), strict));
    }
}
