//! `from_json`'s fast path for the shape most contracts have: one object whose fields are
//! scalars (numbers, integers, booleans, plain strings, each maybe nullable) with cross-field
//! rules over them.
//!
//! The object is read onto the stack ([`read::flat`]), then checked against a [`Plan`] compiled
//! once per contract from its IR: field positions instead of name lookups (the reader is given
//! the fields' names as the keys expected, and reports the entries whose key is the field at
//! their own position), each field's type and bounds, rules by field index. A document the plan finds valid is decoded straight from
//! the entries, with no tree. A document it refuses is reported by the tree path's own checker
//! code on the same entries (`Checker::check_entry`, `report_missing`, `check_rule`, called as
//! `check_object` calls them, skipping only the values and rules the plan found sound), so its
//! violations (kinds, pointers, messages, order) are the tree path's. An integral float in an
//! integer field (`3.0`) is checked as the checker checks it and made the integer before
//! decoding, as the tree path's `normalise_doc` does. Whatever the plan does not cover (a
//! contract with nested contracts, lists, string keywords or `one_of`; a document with nested
//! values or escapes) goes the tree path, unchanged. Tests hold the two paths to the same result
//! on every document they generate.
//!
//! Measured reason for a second path (the rules ask for one): `cargo bench -p contract-core
//! --bench from_json` (issue 17, goal 3; the commands and figures in `docs/benchmarks.md`),
//! medians of ten runs taken in turn with the tree path's build: valid documents 283 -> 162 ns,
//! refused ones 412 -> 346, all 336 -> 237.

use std::cell::RefCell;

use serde::de::value::{Error, MapAccessDeserializer};
use serde::de::{Deserializer, IntoDeserializer, Visitor};

use super::check::{compare, finish, has_field_level, Checker, Seen};
use super::checked::Checked;
use super::doc::{visit_number, Entries, Scalar};
use super::path::Path;
use super::read;
use super::violation::Violations;
use crate::attrs::{CmpOp, Rule};
use crate::context::DocContext;
use crate::ir::ContractSpec;
use crate::ir::{JsonType, ObjectNode};
use crate::num::{as_integer, Num};

/// `C::from_json` on the fast path; `None` where the tree path must decide.
pub(crate) fn from_json<C: Checked>(
    text: &str,
    cx: &DocContext<'_>,
) -> Option<Result<C, Violations>> {
    let spec = C::checked_spec();
    let plan = plan_for(spec)?;
    let mut entries = Entries::new();
    let named = read::flat(text, &mut entries, &plan.keys)?;
    let mut out = Violations::new();
    let (verdict, scan) = plan.check(&entries, named);
    match verdict {
        Verdict::Valid => {}
        Verdict::TreePath => return None,
        Verdict::Invalid => {
            let object = spec.object()?;
            let mut checker = Checker::new(&mut out, false);
            plan.report(
                object,
                &entries,
                &scan,
                &mut checker,
                &Path::Root("", &spec.name),
            );
            if has_field_level(&out) {
                return Some(Err(out));
            }
        }
    }
    if scan.int_floats {
        plan.normalise(&mut entries);
    }
    Some(finish(C::deserialize(Object(&entries)), out, cx))
}

/// What the plan found of the entries and fields.
struct Scan {
    /// The entries (at most 64) whose key names a field met for the first time and whose
    /// value passes that field's checks, as bits.
    ok: u64,
    /// Per field: the entry of its first value ([`NONE`]: missing).
    at: [u8; 64],
    /// The fields given more than once, as bits.
    repeated: u64,
    /// The entries whose key the reader found to be the field at their own position, as bits.
    named: u64,
    /// Some integer field's first value is an integral float (`3.0`), which
    /// [`Plan::normalise`] makes an integer before decoding.
    int_floats: bool,
}

/// No entry.
const NONE: u8 = u8::MAX;

impl Default for Scan {
    fn default() -> Self {
        // A fixed array, written in place: a `SmallVec` of the fields' length was filled by a
        // call to `memset` and then copied whole, a store-forwarding stall on which `perf
        // annotate` put 28% of `Plan::check`'s samples.
        Scan {
            ok: 0,
            at: [NONE; 64],
            repeated: 0,
            named: 0,
            int_floats: false,
        }
    }
}

/// What the plan makes of a document.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// No violation: decode it.
    Valid,
    /// At least one violation: the checker writes them.
    Invalid,
    /// Something the plan does not cover: the tree path decides.
    TreePath,
}

/// A contract's checks, compiled for flat objects.
#[derive(Debug)]
struct Plan {
    fields: Vec<FieldPlan>,
    /// The fields' names, in order, given to [`read::flat`] as the keys expected; empty when
    /// one of them cannot be a [`read::Key`].
    keys: Vec<read::Key>,
    rules: Vec<RulePlan>,
}

#[derive(Debug)]
struct FieldPlan {
    name: &'static str,
    /// `null` is accepted.
    nullable: bool,
    ty: JsonType,
    /// The bounds `broken_bound` checks, as numbers: the integer type's, then the keywords'
    /// (`value op bound` must hold).
    bounds: Vec<(CmpOp, Num)>,
    /// The same bounds as one inclusive integer interval, for an integer, when they are all
    /// integers.
    ints: Option<(i128, i128)>,
    /// The same bounds as float intervals (`(bound, inclusive)`, either end open), for a float,
    /// when they are all floats or integers a float holds exactly.
    floats: Option<(f64, bool, f64, bool)>,
}

#[derive(Debug)]
enum RulePlan {
    Compare {
        left: usize,
        op: contract_rules::CmpOp,
        right: usize,
    },
    BothOrNeither(Vec<usize>),
    AtLeastOne(Vec<usize>),
}

impl Plan {
    /// The plan of `spec`, or `None` where it would not check exactly what the checker does.
    fn compile(spec: &'static ContractSpec) -> Option<Plan> {
        let object = spec.object()?;
        if !object.pattern_properties.is_empty()
            || object.min_properties.is_some()
            || object.max_properties.is_some()
            || object.properties.len() > 64
        {
            return None;
        }
        let mut fields = Vec::with_capacity(object.properties.len());
        for field in &object.properties {
            let outer = &field.node;
            let node = outer.non_null();
            // The checker peels one `anyOf [T, null]`; a second one, references, external
            // types, `one_of` and string keywords are left to it.
            let plain = std::ptr::eq(node.non_null(), node)
                && node.external.is_none()
                && node.reference.is_none()
                && node.enumeration.is_none()
                && node.array.is_none();
            let ty = node.value_types().next()?;
            let supported = match ty {
                JsonType::Boolean | JsonType::Integer | JsonType::Number => true,
                JsonType::String => {
                    let k = &node.string;
                    k.min_length.is_none()
                        && k.max_length.is_none()
                        && k.pattern.is_none()
                        && k.format.is_none()
                }
                _ => false,
            };
            if !plain || !supported {
                return None;
            }
            let n = &node.number;
            let mut bounds = Vec::new();
            if let Some((min, max)) = n.integer_type {
                bounds.push((CmpOp::Ge, Num::Int(min)));
                bounds.push((CmpOp::Le, Num::Int(max)));
            }
            bounds.extend(n.bounds.each().map(|(op, bound)| (op, Num::of(bound))));
            fields.push(FieldPlan {
                name: field.name.as_str(),
                nullable: outer.is_nullable() || node.is_nullable(),
                ty,
                ints: int_interval(&bounds),
                floats: float_interval(&bounds),
                bounds,
            });
        }
        let index = |name: &String| fields.iter().position(|f| f.name == name);
        let indices = |names: &Vec<String>| names.iter().map(index).collect::<Option<Vec<_>>>();
        let mut rules = Vec::with_capacity(object.rules.len());
        for rule in &object.rules {
            rules.push(match rule {
                Rule::Compare { left, op, right } => RulePlan::Compare {
                    left: index(left)?,
                    op: *op,
                    right: index(right)?,
                },
                Rule::BothOrNeither(names) => RulePlan::BothOrNeither(indices(names)?),
                Rule::AtLeastOne(names) => RulePlan::AtLeastOne(indices(names)?),
                #[allow(unreachable_patterns)]
                _ => return None,
            });
        }
        let keys = fields
            .iter()
            .map(|f| read::Key::new(f.name))
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        Some(Plan {
            fields,
            keys,
            rules,
        })
    }

    /// The field `key` names; `guess` (its position in the document) first.
    #[inline]
    fn index(&self, key: &str, guess: usize) -> Option<usize> {
        match self.fields.get(guess) {
            Some(f) if f.name == key => Some(guess),
            _ => self.fields.iter().position(|f| f.name == key),
        }
    }

    /// The field entry `i` (of key `key`) names: its own position's when the reader found its
    /// key to be that field's name (bit `i` of `named`), else looked up.
    #[inline]
    fn field_of(&self, named: u64, key: &str, i: usize) -> Option<usize> {
        if i < 64 && named & (1 << i) != 0 {
            Some(i)
        } else {
            self.index(key, i)
        }
    }

    /// The verdict on a document's entries, and what [`Plan::report`] needs of them. `named`:
    /// the entries whose key the reader found to be the field at their own position (bits).
    fn check(&self, entries: &[(&str, Scalar<'_>)], named: u64) -> (Verdict, Scan) {
        let mut scan = Scan {
            named,
            ..Scan::default()
        };
        let verdict = self.verdict(entries, &mut scan);
        (verdict, scan)
    }

    /// [`Plan::check`]'s verdict, filling `scan` (fresh but for [`Scan::named`]).
    fn verdict(&self, entries: &[(&str, Scalar<'_>)], scan: &mut Scan) -> Verdict {
        if entries.len() > 64 {
            return Verdict::TreePath;
        }
        for (i, (key, value)) in entries.iter().enumerate() {
            let Some(f) = self.field_of(scan.named, key, i) else {
                continue;
            };
            // At most 64 fields (`Plan::compile`) and 64 entries (above).
            if scan.at[f] != NONE {
                scan.repeated |= 1 << f;
                continue;
            }
            scan.at[f] = i as u8;
            let field = &self.fields[f];
            if field.check(value) {
                scan.ok |= 1 << i;
                if field.ty == JsonType::Integer {
                    scan.int_floats |= matches!(value, Scalar::Number(n) if n.is_f64());
                }
            }
        }
        let ok = scan.ok;
        // Valid so far: every entry names a field met the first time, and passes its checks.
        let all = if entries.len() == 64 {
            u64::MAX
        } else {
            (1u64 << entries.len()) - 1
        };
        if ok != all || entries.len() != self.fields.len() {
            return Verdict::Invalid;
        }
        // Every field is here once, with a value of its type or null.
        if self
            .rules
            .iter()
            .all(|rule| self.holds(rule, entries, scan))
        {
            Verdict::Valid
        } else {
            Verdict::Invalid
        }
    }

    /// Whether `rule` holds, every field of it being given once with a value that passed its
    /// checks (then `rule_violations`' own conditions, a side missing or not of its field's
    /// type, do not arise, and this is its verdict).
    fn holds(&self, rule: &RulePlan, entries: &[(&str, Scalar<'_>)], scan: &Scan) -> bool {
        let value = |f: usize| &entries[usize::from(scan.at[f])].1;
        let is_null = |f: usize| matches!(value(f), Scalar::Null);
        match rule {
            RulePlan::Compare { left, op, right } => {
                is_null(*left)
                    || is_null(*right)
                    || compare(value(*left), value(*right)).is_none_or(|ord| op.holds(ord))
            }
            RulePlan::BothOrNeither(fields) => {
                let nulls = fields.iter().filter(|f| is_null(**f)).count();
                nulls == 0 || nulls == fields.len()
            }
            RulePlan::AtLeastOne(fields) => !fields.iter().all(|f| is_null(*f)),
        }
    }

    /// What the tree path's `normalise_doc` does before decoding: an integral float (`3.0`) of
    /// an integer field becomes that integer, so that serde takes it.
    fn normalise(&self, entries: &mut [(&str, Scalar<'_>)]) {
        for (i, (key, value)) in entries.iter_mut().enumerate() {
            if let Scalar::Number(n) = value {
                if n.is_f64()
                    && self
                        .index(key, i)
                        .is_some_and(|f| self.fields[f].ty == JsonType::Integer)
                {
                    if let Some(int) = as_integer(n) {
                        *n = int;
                    }
                }
            }
        }
    }

    /// Whether [`Plan::holds`] decides `rule` here: each of its fields given once, with a value
    /// that passed its checks.
    fn decides(&self, rule: &RulePlan, scan: &Scan) -> bool {
        let given = |f: &usize| {
            let at = scan.at[*f];
            scan.repeated & (1 << f) == 0 && at != NONE && scan.ok & (1 << at) != 0
        };
        match rule {
            RulePlan::Compare { left, right, .. } => given(left) && given(right),
            RulePlan::BothOrNeither(fields) | RulePlan::AtLeastOne(fields) => {
                fields.iter().all(given)
            }
        }
    }

    /// The violations of a document the plan refused, as `Checker::check_object` reports them
    /// (the same calls, in the same order), skipping the values and rules the plan found sound,
    /// for which the checker would report nothing.
    fn report(
        &self,
        object: &ObjectNode,
        entries: &[(&str, Scalar<'_>)],
        scan: &Scan,
        checker: &mut Checker<'_>,
        path: &Path<'_>,
    ) {
        let mut seen = Seen::new(object.properties.len());
        for (i, (key, value)) in entries.iter().enumerate() {
            let field = self.field_of(scan.named, key, i);
            match field {
                Some(f) if scan.ok & (1 << i) != 0 => {
                    seen.set(f);
                }
                _ => checker.check_entry(object, &mut seen, field, key, value, path),
            }
        }
        checker.report_missing(object, &seen, path);
        for (rule, compiled) in object.rules.iter().zip(&self.rules) {
            if self.decides(compiled, scan) && self.holds(compiled, entries, scan) {
                continue;
            }
            checker.check_rule::<Scalar<'_>>(object, entries, rule, path);
        }
    }
}

impl FieldPlan {
    /// Whether the checker's `check_node` finds nothing wrong with this field's value.
    #[inline]
    fn check(&self, value: &Scalar<'_>) -> bool {
        match (self.ty, value) {
            (_, Scalar::Null) => self.nullable,
            (JsonType::Boolean, Scalar::Bool(_)) | (JsonType::String, Scalar::String(_)) => true,
            (JsonType::Integer, Scalar::Number(n)) => {
                // `3.0` is an integer (its bounds compared exactly, as the checker does;
                // [`Plan::normalise`] makes it `3` before decoding); a fraction is a type
                // mismatch.
                let num = Num::of(n);
                num.is_integral() && self.within(num)
            }
            (JsonType::Number, Scalar::Number(n)) => self.within(Num::of(n)),
            _ => false,
        }
    }

    /// Whether `num` breaks none of the bounds (what `broken_bound` finds, without which).
    #[inline]
    fn within(&self, num: Num) -> bool {
        match (num, self.ints, self.floats) {
            (Num::Int(v), Some((lo, hi)), _) => return lo <= v && v <= hi,
            (Num::Float(f), _, Some((lo, lo_in, hi, hi_in))) => {
                return (f > lo || (lo_in && f == lo)) && (f < hi || (hi_in && f == hi));
            }
            _ => {}
        }
        self.bounds
            .iter()
            .all(|&(op, bound)| num.cmp(bound).is_none_or(|ord| op.holds(ord)))
    }
}

/// `bounds` as one inclusive interval of integers, when every bound is an integer (`> 3` is
/// `>= 4`).
fn int_interval(bounds: &[(CmpOp, Num)]) -> Option<(i128, i128)> {
    let (mut lo, mut hi) = (i128::MIN, i128::MAX);
    for &(op, bound) in bounds {
        let Num::Int(b) = bound else { return None };
        match op {
            CmpOp::Ge => lo = lo.max(b),
            CmpOp::Gt => lo = lo.max(b.checked_add(1)?),
            CmpOp::Le => hi = hi.min(b),
            CmpOp::Lt => hi = hi.min(b.checked_sub(1)?),
            CmpOp::Eq | CmpOp::Ne => return None,
        }
    }
    Some((lo, hi))
}

/// `bounds` as float ends (`(lo, inclusive, hi, inclusive)`), when every bound is a float or an
/// integer of at most 2^53 in magnitude (so comparing as floats is exact, as `Num::cmp` does).
fn float_interval(bounds: &[(CmpOp, Num)]) -> Option<(f64, bool, f64, bool)> {
    const EXACT: i128 = 1 << 53;
    let (mut lo, mut hi) = ((f64::NEG_INFINITY, true), (f64::INFINITY, true));
    for &(op, bound) in bounds {
        let b = match bound {
            Num::Float(f) => f,
            Num::Int(i) if (-EXACT..=EXACT).contains(&i) => i as f64,
            // An integer type's range past 2^53 (`i64`, `u64`): only integer fields have one,
            // and their floats are left to the loop.
            Num::Int(_) => return None,
        };
        let inclusive = matches!(op, CmpOp::Ge | CmpOp::Le);
        match op {
            CmpOp::Ge | CmpOp::Gt => {
                if b > lo.0 || (b == lo.0 && !inclusive) {
                    lo = (b, inclusive);
                }
            }
            CmpOp::Le | CmpOp::Lt => {
                if b < hi.0 || (b == hi.0 && !inclusive) {
                    hi = (b, inclusive);
                }
            }
            CmpOp::Eq | CmpOp::Ne => return None,
        }
    }
    Some((lo.0, lo.1, hi.0, hi.1))
}

/// The plan of `spec` (`None`: not covered), compiled once per contract and kept for the life of
/// the program (contract specs are `'static` too).
///
/// Kept in the crate's one cache ([`crate::cache`]), with a per-thread list of the plans this
/// thread has used in front of it: `from_json` asks for its plan on every call, and the typed
/// list spares it the cache's generic lookup (`cargo bench --bench from_json`, `Guidance`, medians
/// of 10 alternated turns: 139.7 ns a document through the cache alone, 136.6 with this list,
/// 136.5 before the cache).
fn plan_for(spec: &'static ContractSpec) -> Option<&'static Plan> {
    thread_local! {
        static LOCAL: RefCell<Vec<(usize, Option<&'static Plan>)>> = const { RefCell::new(Vec::new()) };
    }
    let key = std::ptr::from_ref(spec) as usize;
    // `try_with`: a thread being torn down has no local list; the cache serves it.
    let local = LOCAL
        .try_with(|plans| {
            plans
                .borrow()
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, p)| *p)
        })
        .ok()
        .flatten();
    if let Some(plan) = local {
        return plan;
    }
    let plan = crate::cache::per_spec(spec, || Plan::compile(spec)).as_ref();
    let _ = LOCAL.try_with(|plans| plans.borrow_mut().push((key, plan)));
    plan
}

/// The entries as the object the tree path decodes (`&Doc::Object`'s deserializer).
#[derive(Clone, Copy)]
struct Object<'s, 'a>(&'s [(&'a str, Scalar<'a>)]);

impl<'de> Object<'de, 'de> {
    fn map(self) -> EntryAccess<'de> {
        EntryAccess {
            rest: self.0,
            value: None,
            taken: 0,
        }
    }
}

/// The entries as a `MapAccess`, as serde's `MapDeserializer` gives them (keys as `&str`,
/// values as `&Scalar`), with the same error when the visitor leaves some entries unread.
///
/// Why not `MapDeserializer` itself (the rules ask for a measured reason): its `next_key_seed`
/// and `next_value_seed` were not inlined into the decoding in the library's test build
/// (callgrind: 116 and 64 instructions a valid bench document in them), and with these two
/// `from_json` runs 2,054 -> 1,898 instructions a valid document; the release bench alternated
/// 10 times with `MapDeserializer` (2026-12-04): valid documents 120.2 -> 112.4 ns.
struct EntryAccess<'de> {
    /// The entries not read yet.
    rest: &'de [(&'de str, Scalar<'de>)],
    /// The value of the key just read.
    value: Option<&'de Scalar<'de>>,
    /// How many entries were read.
    taken: usize,
}

/// What `MapDeserializer::end` says was expected: `taken` entries.
struct InMap(usize);

impl serde::de::Expected for InMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == 1 {
            f.write_str("1 element in map")
        } else {
            write!(f, "{} elements in map", self.0)
        }
    }
}

impl<'de> serde::de::MapAccess<'de> for EntryAccess<'de> {
    type Error = Error;

    #[inline]
    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.rest.split_first() {
            Some(((key, value), rest)) => {
                self.rest = rest;
                self.value = Some(value);
                self.taken += 1;
                seed.deserialize(IntoDeserializer::<Error>::into_deserializer(*key))
                    .map(Some)
            }
            None => Ok(None),
        }
    }

    #[inline]
    fn next_value_seed<T: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(serde::de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest.len())
    }
}

impl<'de> Deserializer<'de> for Object<'de, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut map = self.map();
        let value = visitor.visit_map(&mut map)?;
        if !map.rest.is_empty() {
            return Err(serde::de::Error::invalid_length(
                map.taken + map.rest.len(),
                &InMap(map.taken),
            ));
        }
        Ok(value)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(MapAccessDeserializer::new(self.map()))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// A scalar as `&Doc`'s deserializer gives it.
impl<'de> Deserializer<'de> for &'de Scalar<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Scalar::Null => visitor.visit_unit(),
            Scalar::Bool(b) => visitor.visit_bool(*b),
            Scalar::Number(n) => visit_number(n, visitor),
            Scalar::String(s) => visitor.visit_borrowed_str(s),
        }
    }

    // Inlined into the contract's decoder: left to the compiler, it stopped inlining this once
    // `read::tree` was added (1.5% more instructions on the bench's valid documents, callgrind).
    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Scalar::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self {
            Scalar::String(s) => visitor.visit_enum((*s).into_deserializer()),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, Error> for &'de Scalar<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::validate::entry::from_json_tree;
    use crate::Contract;

    /// Next-quarter revenue guidance (the bench's contract).
    #[derive(Contract, Serialize, Deserialize, Debug)]
    #[contract(rule = "low <= high", both_or_neither(low, high))]
    struct Guidance {
        #[contract(range = 1..=4)]
        quarter: Option<u8>,
        #[contract(range = 2018..=2030)]
        year: Option<u16>,
        #[contract(exclusive_min = 0)]
        low: Option<f64>,
        #[contract(exclusive_min = 0)]
        high: Option<f64>,
    }

    /// Every scalar the plan covers, and the third kind of rule.
    #[derive(Contract, Serialize, Deserialize, Debug)]
    #[contract(
        rule = "count < limit",
        rule = "name != note",
        at_least_one(name, note)
    )]
    struct Mixed {
        name: Option<String>,
        note: Option<String>,
        flag: bool,
        count: i32,
        limit: i64,
        #[contract(range = -5..=5)]
        small: i8,
        big: u64,
        #[contract(exclusive_max = 1.5)]
        ratio: f32,
        #[contract(min = -10, max = 1000000)]
        amount: Option<f64>,
    }

    /// A string keyword: the plan leaves the whole contract to the tree path.
    #[derive(Contract, Serialize, Deserialize, Debug)]
    struct Coded {
        #[contract(pattern = "^[A-Z]+$")]
        code: String,
        n: u8,
    }

    /// The same result, to the bit and the message, on both paths.
    fn agree<C: Contract + Debug>(text: &str) {
        let fast = super::super::entry::from_json::<C>(text);
        let tree = from_json_tree::<C>(text);
        assert_eq!(format!("{fast:?}"), format!("{tree:?}"), "on {text:?}");
    }

    /// Values for any field: edges of every type, wrong types, what the reader leaves out.
    const VALUES: &[&str] = &[
        "0",
        "-1",
        "127",
        "128",
        "-129",
        "255",
        "256",
        "65536",
        "2147483648",
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "123456789012345678901",
        "3.0",
        "-0.0",
        "1e400",
        "-0",
        "01",
        "\"\"",
        "\"a\\\"b\"",
        "\"é\"",
        "null",
        "true",
        "false",
        "[1]",
        "{}",
        "{\"a\": 1}",
    ];

    /// A field's name, valid values (edges included) and invalid ones near them.
    type Field = (
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
    );

    const POSITIVE: &[&str] = &[
        "1", "0.5", "7230.55", "7230.5", "1e3", "2.5e-1", "7650", "null", "1e-300",
    ];
    const NOT_POSITIVE: &[&str] = &["0", "0.0", "-0.0", "-1", "1e-400", "\"5\""];
    const GUIDANCE: &[Field] = &[
        (
            "quarter",
            &["1", "3", "4", "null"],
            &["0", "5", "3.0", "2.5", "\"Q3\"", "-1"],
        ),
        (
            "year",
            &["2018", "2024", "2030", "null"],
            &["2017", "2031", "2024.0", "65536"],
        ),
        ("low", POSITIVE, NOT_POSITIVE),
        ("high", POSITIVE, NOT_POSITIVE),
    ];
    const NAMES: &[&str] = &["\"a\"", "\"b\"", "null", "\"\""];
    const MIXED: &[Field] = &[
        ("name", NAMES, &["1", "\"a\\nb\""]),
        ("note", NAMES, &["true"]),
        ("flag", &["true", "false"], &["null", "0", "\"true\""]),
        (
            "count",
            &["-3", "0", "2147483647", "-2147483648", "5"],
            &["2147483648", "1.5"],
        ),
        (
            "limit",
            &["9", "0", "-9223372036854775808", "9223372036854775807", "5"],
            &["5.0", "9223372036854775808"],
        ),
        (
            "small",
            &["-5", "5", "0"],
            &["-6", "6", "127", "-128", "5.5"],
        ),
        (
            "big",
            &["0", "1", "123456789012345678"],
            &["-1", "18446744073709551615", "1e3"],
        ),
        (
            "ratio",
            &["1.25", "1.4999", "-7", "1", "-1e308"],
            &["1.5", "2", "1e308", "null"],
        ),
        (
            "amount",
            &["-10", "-10.0", "1000000", "1e6", "null", "3"],
            &["-10.5", "1000000.5", "-11"],
        ),
    ];

    /// A document over `fields`: each field once in order with a value from its own list or
    /// (sometimes) any, or random keys (the fields, unknown, escaped) in random order; random
    /// spacing; sometimes cut short.
    fn document(fields: &'static [Field]) -> impl Strategy<Value = String> {
        let keys: Vec<String> = fields
            .iter()
            .map(|(n, _, _)| format!("\"{n}\""))
            .chain(["\"extra\"".to_owned(), "\"lo\\u0077\"".to_owned()])
            .collect();
        let value = |valid: &'static [&'static str], invalid: &'static [&'static str]| {
            prop_oneof![
                14 => proptest::sample::select(valid),
                4 => proptest::sample::select(invalid),
                1 => proptest::sample::select(VALUES),
            ]
        };
        let complete = fields
            .iter()
            .map(|(_, valid, invalid)| value(valid, invalid))
            .collect::<Vec<_>>()
            .prop_map(|values| values.into_iter().enumerate().collect::<Vec<_>>());
        let all: Vec<&'static str> = fields
            .iter()
            .flat_map(|(_, valid, invalid)| valid.iter().chain(invalid.iter()).copied())
            .chain(VALUES.iter().copied())
            .collect();
        let random = proptest::collection::vec(
            (0..keys.len(), proptest::sample::select(all)),
            0..fields.len() + 3,
        );
        let entries = prop_oneof![3 => complete, 1 => random];
        (entries, 0..3usize, 0..12usize).prop_map(move |(entries, space, cut)| {
            let sep = [" ", "", "\n  "][space];
            let body: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}:{sep}{v}", keys[*k]))
                .collect();
            let mut text = format!("{{{sep}{}{sep}}}", body.join(&format!(",{sep}")));
            if cut == 0 {
                let mut end = text.len() / 2;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
            }
            text
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn guidance_agrees_with_the_tree_path(text in document(GUIDANCE)) {
            agree::<Guidance>(&text);
        }

        #[test]
        fn mixed_agrees_with_the_tree_path(text in document(MIXED)) {
            agree::<Mixed>(&text);
        }
    }

    /// The generated documents exercise the fast path: many take it, valid and refused ones.
    #[test]
    fn the_generated_documents_reach_the_fast_path() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = document(GUIDANCE);
        let (mut fast, mut valid, mut refused) = (0, 0, 0);
        for _ in 0..1000 {
            let text = strategy.new_tree(&mut runner).unwrap().current();
            match from_json::<Guidance>(&text, &DocContext::none()) {
                Some(Ok(_)) => valid += 1,
                Some(Err(_)) => refused += 1,
                None => continue,
            }
            fast += 1;
        }
        assert!(
            fast >= 400 && valid >= 50 && refused >= 100,
            "{fast} {valid} {refused}"
        );
    }

    #[test]
    fn plain_documents_take_the_fast_path_and_the_rest_do_not() {
        for text in [
            r#"{"quarter": 3, "year": 2024, "low": 7230.5, "high": 7650}"#,
            r#"{"quarter":null,"year":null,"low":null,"high":null}"#,
            r#"{"quarter": 5, "year": 2024, "low": 9, "high": 7}"#,
            r#"{"quarter": "Q3", "low": 1, "high": 2, "note": 1}"#,
            r#"{"quarter": 1, "quarter": 2, "year": 2024, "low": 1, "high": 2}"#,
            // Integral floats in integer fields: checked as integers, decoded as them.
            r#"{"quarter": 3.0, "year": 2.024e3, "low": 1, "high": 2}"#,
            r#"{"quarter": 3.0, "year": 2024, "low": 9, "high": 7}"#,
            r#"{"quarter": 5.0, "year": 2024.5, "low": 1, "high": 2}"#,
            r#"{"quarter": -0.0, "year": 2024, "low": 1, "high": 2}"#,
        ] {
            assert!(
                from_json::<Guidance>(text, &DocContext::none()).is_some(),
                "{text}"
            );
            agree::<Guidance>(text);
        }
        let decoded = from_json::<Guidance>(
            r#"{"quarter": 3.0, "year": 2.024e3, "low": 1, "high": 2}"#,
            &DocContext::none(),
        );
        assert!(
            matches!(
                decoded,
                Some(Ok(Guidance {
                    quarter: Some(3),
                    year: Some(2024),
                    ..
                }))
            ),
            "{decoded:?}"
        );
        for text in [
            r#"{"quarter": 3, "year": 2024, "low": [1], "high": 2}"#,
            r#"{"quart\u0065r": 3, "year": 2024, "low": 1, "high": 2}"#,
            r#"{"quarter": 3, "year": 2024, "low": 1, "high": 2"#,
            r#"{"quarter": 3, "year": 2024, "low": 1, "high": 2} x"#,
            "[1, 2]",
        ] {
            assert!(
                from_json::<Guidance>(text, &DocContext::none()).is_none(),
                "{text}"
            );
            agree::<Guidance>(text);
        }
        let coded = r#"{"code": "AB", "n": 1}"#;
        assert!(from_json::<Coded>(coded, &DocContext::none()).is_none());
        assert!(Coded::from_json(coded).is_ok());
    }

    /// Threads compiling and using the plans at once get the same results as one thread.
    #[test]
    fn threads_share_the_plans() {
        let texts: Vec<String> = (0..200)
            .map(|i| {
                format!(
                    r#"{{"quarter": {}, "year": 2024, "low": {i}.5, "high": {}}}"#,
                    i % 6,
                    i * 2
                )
            })
            .collect();
        let expected: Vec<String> = texts
            .iter()
            .map(|t| format!("{:?}", from_json_tree::<Guidance>(t)))
            .collect();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for (text, expected) in texts.iter().zip(&expected) {
                        let got = super::super::entry::from_json::<Guidance>(text);
                        assert_eq!(&format!("{got:?}"), expected);
                    }
                });
            }
        });
    }

    #[test]
    fn a_valid_document_decodes_to_the_same_value() {
        let text = r#"{"name": "a", "note": null, "flag": true, "count": -3, "limit": 9,
            "small": -5, "big": 123456789012345678, "ratio": 1.25, "amount": 1e3}"#;
        let Some(Ok(m)) = from_json::<Mixed>(text, &DocContext::none()) else {
            panic!("not decoded on the fast path")
        };
        assert_eq!(m.big, 123_456_789_012_345_678);
        assert_eq!(m.small, -5);
        assert_eq!(m.amount, Some(1000.0));
        agree::<Mixed>(text);
    }

    /// The entries decode through [`Object`] as through serde's own `MapDeserializer`: the same
    /// value, or the same error when a visitor leaves entries unread.
    #[test]
    fn entries_decode_as_through_serdes_map_deserializer() {
        use serde::de::value::MapDeserializer;
        use serde::de::{MapAccess, Visitor};

        /// Reads `N` entries, then stops.
        #[derive(Debug)]
        struct Prefix<const N: usize>(
            // Compared through `Debug`.
            #[allow(dead_code)] Vec<(String, serde_json::Value)>,
        );
        impl<'de, const N: usize> Deserialize<'de> for Prefix<N> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V<const N: usize>;
                impl<'de, const N: usize> Visitor<'de> for V<N> {
                    type Value = Prefix<N>;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a map")
                    }
                    fn visit_map<A: MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<Prefix<N>, A::Error> {
                        let mut out = Vec::new();
                        while out.len() < N {
                            match map.next_entry()? {
                                Some(entry) => out.push(entry),
                                None => break,
                            }
                        }
                        Ok(Prefix(out))
                    }
                }
                d.deserialize_map(V::<N>)
            }
        }
        fn both<T: for<'de> Deserialize<'de> + Debug>(entries: &Entries<'_>) -> (String, String) {
            let ours = T::deserialize(Object(entries)).map_err(|e| e.to_string());
            let serdes: Result<T, Error> =
                T::deserialize(MapDeserializer::new(entries.iter().map(|(k, v)| (*k, v))));
            let serdes = serdes.map_err(|e| e.to_string());
            (format!("{ours:?}"), format!("{serdes:?}"))
        }
        for text in [
            r#"{}"#,
            r#"{"quarter": 3}"#,
            r#"{"quarter": 3, "year": 2024, "low": 1.5, "high": null}"#,
            r#"{"a": "x", "b": true, "c": -2, "d": 1e3, "a": null}"#,
        ] {
            let mut entries = Entries::new();
            assert!(read::flat(text, &mut entries, &[]).is_some(), "{text}");
            for (ours, serdes) in [
                both::<Prefix<0>>(&entries),
                both::<Prefix<1>>(&entries),
                both::<Prefix<9>>(&entries),
                both::<Guidance>(&entries),
                both::<std::collections::BTreeMap<String, serde_json::Value>>(&entries),
            ] {
                assert_eq!(ours, serdes, "on {text}");
            }
        }
        let mut entries = Entries::new();
        assert!(read::flat(r#"{"a": 1, "b": 2}"#, &mut entries, &[]).is_some());
        assert_eq!(
            both::<Prefix<1>>(&entries).0,
            "Err(\"invalid length 2, expected 1 element in map\")"
        );
    }
}
