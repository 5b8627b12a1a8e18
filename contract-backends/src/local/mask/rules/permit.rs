//! What the rules permit for the field being written ([`Rules`]): `null` or not, the numbers
//! its comparisons and bounds leave ([`number_set`], remembered in the plan), the strings a
//! finished partner still allows ([`StrCons`]). Per-rule evaluation, apart from the scanner's
//! plumbing (where a value starts and ends), which asks it; it reads the plan and the number
//! sets, not the scanner.

use std::cmp::Ordering;
use std::sync::Arc;

use contract_core::CmpOp;

use super::super::rules_dec::{intersect, permitted, Interval, NumSyntax, Parts};
use super::numbers::{NumKind, NumSet};
use super::plan::{Done, EnumSlot, FieldPlan, Kind, RulePlan, Slot, SlotId, StrDomain, OPAQUE};

/// Whether `null` may be the value starting in `slot_id`, under `rules`.
pub(super) fn null_ok(plan: &RulePlan, slot_id: SlotId, rules: Option<&Rules<'_>>) -> bool {
    if rules.is_some_and(|r| !r.null_ok()) {
        return false;
    }
    !(plan.slots.get(slot_id).is_some_and(|s| !s.nullable) && slot_id != OPAQUE)
}

/// The numbers the value starting in `slot_id` may be, under `rules`; `None` when numbers are
/// out. Remembered by field and partner values ([`RulePlan::remembered_number_set`]).
pub(super) fn number_set(
    plan: &RulePlan,
    slot_id: SlotId,
    rules: Option<&Rules<'_>>,
) -> Option<Arc<NumSet>> {
    let key = rules.map_or((usize::MAX, slot_id), |r| (r.obj, r.field));
    plan.remembered_number_set(
        key,
        || rules.into_iter().flat_map(Rules::partners),
        || num_set(plan.slots.get(slot_id), rules),
    )
}

/// The numbers a value in `slot` may be, under `rules`; `None` when numbers are out.
fn num_set(slot: Option<&Slot>, rules: Option<&Rules<'_>>) -> Option<NumSet> {
    Some(match slot.map(|s| &s.kind) {
        Some(Kind::Num(n)) => {
            let mut set = n.domain.clone();
            if let Some(r) = rules {
                for c in r.num_constraints()? {
                    set = intersect(&set, &c);
                }
            }
            let parts = Parts::of(&set);
            NumSet::new(NumKind::Intervals(n.syntax, set, parts))
        }
        Some(Kind::Enum(e)) => {
            let extra = match rules {
                Some(r) => Some(r.num_constraints()?),
                None => None,
            };
            let choices = e
                .nums
                .iter()
                .filter(|(_, v)| {
                    extra
                        .as_ref()
                        .is_none_or(|cs| cs.iter().all(|c| c.iter().any(|i| i.contains(v))))
                })
                .map(|(t, _)| t.clone())
                .collect();
            NumSet::new(NumKind::Choices(choices))
        }
        _ => {
            if rules.is_some_and(|r| !r.non_null_ok()) {
                return None;
            }
            let set = vec![Interval::all()];
            let parts = Parts::of(&set);
            NumSet::new(NumKind::Intervals(
                NumSyntax {
                    fraction: true,
                    exponent: true,
                },
                set,
                parts,
            ))
        }
    })
}

/// The rules of one field, given the values finished so far in its object.
pub(super) struct Rules<'a> {
    pub(super) plan: &'a RulePlan,
    pub(super) vals: Arc<Vec<Done>>,
    pub(super) obj: usize,
    pub(super) field: usize,
}

impl Rules<'_> {
    pub(super) fn fp(&self, f: usize) -> &FieldPlan {
        &self.plan.objects[self.obj].fields[f]
    }

    pub(super) fn val(&self, f: usize) -> &Done {
        self.vals.get(f).unwrap_or(&Done::Pending)
    }

    pub(super) fn slot(&self, f: usize) -> &Slot {
        &self.plan.slots[self.fp(f).slot]
    }

    /// What the number set (and [`Rules::numbers_hold`]) of this field depends on: the values
    /// of the object's compared fields where comparisons are followed through it, else those
    /// of its own partners; and whether each other field whose null decides another's is
    /// null, given or pending.
    pub(super) fn partners(&self) -> impl Iterator<Item = &Done> {
        static STATES: [Done; 3] = [Done::Pending, Done::Null, Done::Given];
        let obj = &self.plan.objects[self.obj];
        let chained = self.chained();
        let compared = obj.compared.iter().filter(move |_| chained);
        let ruled = (0..obj.fields.len())
            .filter(move |&f| obj.null_ruled[f] && (!chained || obj.fields[f].compares.is_empty()));
        let pairs = self
            .fp(self.field)
            .compares
            .iter()
            .filter(move |_| !chained);
        compared
            .map(|&g| self.val(g))
            .chain(pairs.map(|&(_, g)| self.val(g)))
            .chain(ruled.map(|f| match self.val(f) {
                Done::Pending => &STATES[0],
                Done::Null => &STATES[1],
                _ => &STATES[2],
            }))
    }

    /// Whether this field's values depend on the object's comparisons: it is compared, or its
    /// being given decides another field's, in an object with comparisons.
    /// In an object whose comparisons are only pairs ([`ObjPlan::pairs_only`](super::plan::ObjPlan)),
    /// never: a pending partner bounds the field by its own bounds where it must be given,
    /// which is exact there and spares the value starts the search.
    fn chained(&self) -> bool {
        let obj = &self.plan.objects[self.obj];
        !obj.pairs_only
            && !obj.compared.is_empty()
            && (obj.null_ruled[self.field] || !self.fp(self.field).compares.is_empty())
    }

    pub(super) fn is_compared(&self) -> bool {
        !self.fp(self.field).compares.is_empty()
    }

    /// Whether this field may be null: the object's null rules hold, and so do its
    /// comparisons where its being null forces another number to be given.
    fn null_ok(&self) -> bool {
        self.nulls_hold(&[(self.field, true)])
            && (!self.chained()
                || !self.plan.objects[self.obj].null_ruled[self.field]
                || self.numbers_hold(true).is_some())
    }

    /// Whether this field may be given, under the object's null rules and comparisons.
    pub(super) fn non_null_ok(&self) -> bool {
        self.nulls_hold(&[(self.field, false)])
            && (!self.chained() || self.numbers_hold(false).is_some())
    }

    /// Whether the object's `both_or_neither` and `at_least_one` rules can all still hold with
    /// the fields of `assume` null (`true`) or given (`false`), beside the values finished so
    /// far and the fields that cannot be null. Exact for these two kinds of rule, whatever
    /// their chains: the fields `both_or_neither` ties are null or given together (one class
    /// each, [`ObjPlan::classes`](super::plan::ObjPlan), found when the plan is built); a class
    /// is refused when it must be both; and an `at_least_one` group holds when
    /// one of its fields' classes may be given (giving a class never makes another one null).
    /// Before it, the filter looked one rule deep: under `at_least_one(mid, high)` and
    /// `both_or_neither(low, high)`, after `"mid": null` it let `low` be null and left `high`
    /// no value (found by the runtime walks in `mask_soundness`).
    pub(super) fn nulls_hold(&self, assume: &[(usize, bool)]) -> bool {
        let obj = &self.plan.objects[self.obj];
        let n = obj.fields.len();
        let (mut null, mut given) = (vec![false; n], vec![false; n]);
        for (f, &c) in obj.classes.iter().enumerate() {
            let state = match assume.iter().find(|(a, _)| *a == f) {
                Some(&(_, true)) if !self.slot(f).nullable => return false,
                Some(&(_, is_null)) => Some(is_null),
                None => match self.val(f) {
                    Done::Pending => (!self.slot(f).nullable).then_some(false),
                    Done::Null => Some(true),
                    _ => Some(false),
                },
            };
            match state {
                Some(true) => null[c] = true,
                Some(false) => given[c] = true,
                None => {}
            }
        }
        !(0..n).any(|c| null[c] && given[c])
            && obj
                .at_least_one
                .iter()
                .all(|group| group.iter().any(|&m| !null[obj.classes[m]]))
    }

    /// The interval sets a number here must lie in (all of them); `None` when numbers are out.
    /// A finished partner bounds it exactly as the validator compares (`!=` too); the others
    /// through the object's comparisons ([`Rules::numbers_hold`]), or in an object of pairs
    /// by their own bounds where they must be given.
    fn num_constraints(&self) -> Option<Vec<Vec<Interval>>> {
        if !self.nulls_hold(&[(self.field, false)]) {
            return None;
        }
        let mut out = Vec::new();
        let chained = self.chained();
        if chained {
            let ranges = self.numbers_hold(false)?;
            out.push(self.chained_set(&ranges));
        }
        for &(op, g) in &self.fp(self.field).compares {
            match (self.val(g), &self.slot(g).kind) {
                (Done::Num(p), _) => out.push(permitted(op, p)),
                // Equal to an enum that must be given: one of its numbers, not only between them.
                (Done::Pending, Kind::Enum(e))
                    if op == CmpOp::Eq
                        && !e.nums.is_empty()
                        && !self.nulls_hold(&[(self.field, false), (g, true)]) =>
                {
                    out.push(
                        e.nums
                            .iter()
                            .flat_map(|(_, v)| permitted(CmpOp::Eq, v))
                            .collect(),
                    )
                }
                // A pair's partner that must be given (it is in no null rule): its own bounds.
                (Done::Pending, _) if !chained && !self.slot(g).nullable => {
                    out.extend(self.partner_bounds(op, g));
                }
                _ => {}
            }
        }
        Some(out)
    }

    pub(super) fn bool_ok(&self, value: bool) -> bool {
        self.fp(self.field)
            .compares
            .iter()
            .all(|&(op, g)| match self.val(g) {
                Done::Bool(p) => op.holds(value.cmp(p)),
                _ => true,
            })
    }

    /// The finished strings this string must compare with, and how: its finished partners',
    /// and those reached through partners still to come that must be given
    /// ([`Rules::chained_strings`]).
    pub(super) fn str_compares(&self) -> Vec<(CmpOp, Arc<Vec<u8>>)> {
        let mut out: Vec<(CmpOp, Arc<Vec<u8>>)> = self
            .fp(self.field)
            .compares
            .iter()
            .filter_map(|&(op, g)| match self.val(g) {
                Done::Str(p) => Some((op, p.clone())),
                _ => None,
            })
            .collect();
        if !self.plan.objects[self.obj].pairs_only {
            for c in self.chained_strings() {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }
}

/// What a string being written must still satisfy: its domain, its comparisons with finished
/// partners, its choices.
#[derive(Debug, Clone)]
pub(super) struct StrCons {
    pub(super) domain: Option<Arc<StrDomain>>,
    pub(super) compares: Vec<(CmpOp, Arc<Vec<u8>>)>,
    pub(super) choices: Option<Arc<EnumSlot>>,
}

impl StrCons {
    pub(super) fn complete(&self, s: &[u8]) -> bool {
        if let Some(e) = &self.choices {
            if !e.strs.iter().any(|c| c.as_slice() == s) {
                return false;
            }
        }
        self.compares
            .iter()
            .all(|(op, p)| op.holds(s.cmp(p.as_slice())))
    }

    pub(super) fn feasible(&self, s: &[u8]) -> bool {
        if let Some(e) = &self.choices {
            return e.strs.iter().any(|c| c.starts_with(s) && self.complete(c));
        }
        self.compares
            .iter()
            .all(|(op, p)| self.prefix_ok(*op, p, s))
    }

    /// Whether a string starting with `s` can still satisfy `s op p`.
    fn prefix_ok(&self, op: CmpOp, p: &[u8], s: &[u8]) -> bool {
        let n = s.len().min(p.len());
        let ord = s[..n].cmp(&p[..n]);
        let free = self.domain.as_ref().is_none_or(|d| {
            d.patterns.is_empty()
                && d.format.is_none()
                && d.max_len.is_none_or(|m| m as usize > p.len())
        });
        let p_writable = self.domain.as_ref().is_none_or(|d| d.accepts(p));
        match ord {
            Ordering::Less => matches!(op, CmpOp::Lt | CmpOp::Le | CmpOp::Ne),
            Ordering::Greater => matches!(op, CmpOp::Gt | CmpOp::Ge | CmpOp::Ne),
            Ordering::Equal if s.len() > p.len() => matches!(op, CmpOp::Gt | CmpOp::Ge | CmpOp::Ne),
            Ordering::Equal => {
                let shorter =
                    s.len() < p.len() && self.domain.as_ref().is_none_or(|d| d.accepts(s));
                match op {
                    CmpOp::Eq => p_writable,
                    CmpOp::Ge => p_writable || self.bumped(p, s, true),
                    CmpOp::Le => p_writable || shorter || self.bumped(p, s, false),
                    CmpOp::Gt => free || self.bumped(p, s, true),
                    CmpOp::Lt => shorter || self.bumped(p, s, false),
                    CmpOp::Ne => {
                        free || shorter || self.bumped(p, s, false) || self.bumped(p, s, true)
                    }
                }
            }
        }
    }

    /// Whether the field's domain holds a string that starts with `s` (a prefix of `p`) and
    /// lies above `p` (`up`) or below it. The witness looked for is `p` with one byte after `s`
    /// raised (lowered) to another printable ASCII byte, the last byte first (`2024-03-16`
    /// above `2024-03-15`); a string only a longer change reaches is missed, and the prefix
    /// refused. Before it, a prefix that tied with the partner was refused under `>` and `<`
    /// whenever the field had a pattern or a format: under `effective < expiry` with ISO dates
    /// and `effective` 2024-03-15, every `expiry` before the year 3000.
    fn bumped(&self, p: &[u8], s: &[u8], up: bool) -> bool {
        let accepts = |c: &[u8]| self.domain.as_ref().is_none_or(|d| d.accepts(c));
        let mut cand = p.to_vec();
        for i in (s.len()..p.len()).rev() {
            let b = p[i];
            let found = if up {
                (b.saturating_add(1)..=0x7e).any(|c| {
                    cand[i] = c;
                    accepts(&cand)
                })
            } else {
                (0x20..b).rev().any(|c| {
                    cand[i] = c;
                    accepts(&cand)
                })
            };
            if found {
                return true;
            }
            cand[i] = b;
        }
        false
    }
}
