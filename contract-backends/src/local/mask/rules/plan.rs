//! The grammar compiled for the filter ([`RulePlan`]): every value position as a slot with its
//! domain, every object's fields with the rules that tie them, the finished values rules read
//! ([`Done`]), and the memo of number sets by partner values. Apart from the scanner, which walks
//! the output, and the rules' verdicts (`permit`), which read the plan; it reads neither.

use std::sync::{Arc, Mutex};

use contract_core::decimal::Decimal;
use contract_core::grammar::{Grammar, Shape};
use contract_core::{CmpOp, Format, Pattern, Rule};
use serde_json::Value;

use super::super::rules_dec::{intersect, permitted, Interval, NumSyntax};
use super::numbers::{Memo, NumSet};

/// A finished value of a field, kept for the rules of its object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Done {
    Pending,
    /// Finished with a value whose only bearing is that it is not null: only in the keys of
    /// the filter's memos ([`Rules::partners`](super::permit::Rules::partners)).
    Given,
    Null,
    Num(Decimal),
    Str(Arc<Vec<u8>>),
    Bool(bool),
    Other,
}

pub(super) type SlotId = usize;
pub(super) const OPAQUE: SlotId = usize::MAX;

/// A grammar compiled for the filter: every value position as a slot.
#[derive(Debug)]
pub struct RulePlan {
    pub(super) slots: Vec<Slot>,
    pub(super) objects: Vec<ObjPlan>,
    pub(super) root: SlotId,
    /// The number sets computed at value starts, by field and the values its rules read: every
    /// candidate token that starts the same value reuses one. Looked up at every value start
    /// by the key's hash ([`NumKey::hash_of`]), compared against the partners' values in place:
    /// a lookup allocates nothing (a `Vec<Done>` key built for each, with a `Decimal`'s digits
    /// cloned into it, was a third of the filter's work at a value start).
    num_memo: Mutex<KeyMemo<Option<Arc<NumSet>>>>,
    /// The verdicts of [`Rules::numbers_hold`](super::permit::Rules), by field, whether it is
    /// null, and the values it reads: asked at every value start, by every token that starts
    /// a value.
    hold_memo: Mutex<KeyMemo<Option<Arc<[Range]>>>>,
}

/// A memo by [`NumKey`], looked up by the key's hash (a list for the keys that share one).
type KeyMemo<T> = Memo<u64, Vec<(NumKey, T)>>;

/// A number's lowest and highest value as the comparisons leave them, each with whether it is
/// only approached (`None`: no bound but a double's own).
pub(super) type Range = (Option<(Decimal, bool)>, Option<(Decimal, bool)>);

/// What a number set depends on: the object and field (or `usize::MAX` and the slot, outside
/// rules), and the values of the field's rule partners ([`Rules::partners`]).
#[derive(Debug)]
struct NumKey {
    obj: usize,
    field: usize,
    partners: Vec<Done>,
}

impl NumKey {
    /// The memo's hash of a key with these parts.
    fn hash_of<'d>(obj: usize, field: usize, partners: impl Iterator<Item = &'d Done>) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = rustc_hash::FxBuildHasher.build_hasher();
        (obj, field).hash(&mut h);
        for d in partners {
            d.hash(&mut h);
        }
        h.finish()
    }

    /// Whether this is the key with these parts.
    fn is<'d>(
        &self,
        obj: usize,
        field: usize,
        mut partners: impl Iterator<Item = &'d Done>,
    ) -> bool {
        self.obj == obj && self.field == field && self.partners.iter().eq(&mut partners)
    }
}

#[derive(Debug)]
pub(super) struct Slot {
    pub(super) nullable: bool,
    pub(super) kind: Kind,
}

#[derive(Debug)]
pub(super) enum Kind {
    Bool,
    Num(NumSlot),
    Str(Arc<StrDomain>),
    Enum(Arc<EnumSlot>),
    List(SlotId),
    Object(usize),
    Opaque,
}

#[derive(Debug)]
pub(super) struct NumSlot {
    pub(super) syntax: NumSyntax,
    pub(super) domain: Vec<Interval>,
    /// The bound below which the domain's values lie, and whether it is only approached
    /// (`exclusive_maximum`); `None` where the schema sets none (the domain still stops at the
    /// largest double).
    pub(super) sup: Option<(Decimal, bool)>,
    /// The bound above which they lie, likewise.
    pub(super) inf: Option<(Decimal, bool)>,
}

/// What a string field accepts, for "can the partner's value still be written here?".
#[derive(Debug)]
pub(super) struct StrDomain {
    min_len: Option<u64>,
    pub(super) max_len: Option<u64>,
    pub(super) patterns: Vec<Pattern>,
    pub(super) format: Option<Format>,
}

impl StrDomain {
    pub(super) fn accepts(&self, s: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(s) else {
            return false;
        };
        let n = text.chars().count() as u64;
        self.min_len.is_none_or(|m| n >= m)
            && self.max_len.is_none_or(|m| n <= m)
            && self.patterns.iter().all(|p| p.is_match(text))
            && self
                .format
                .is_none_or(|f| contract_core::validate::format_ok(f, text))
    }
}

#[derive(Debug, Default)]
pub(super) struct EnumSlot {
    pub(super) nums: Vec<(Vec<u8>, Decimal)>,
    pub(super) strs: Vec<Vec<u8>>,
    trues: bool,
    falses: bool,
    null: bool,
}

#[derive(Debug)]
pub(super) struct ObjPlan {
    pub(super) fields: Vec<FieldPlan>,
    pub(super) has_rules: bool,
    /// Each field's class under `both_or_neither`: the fields it ties are null or given
    /// together, so they share one (a representative field's index).
    pub(super) classes: Vec<usize>,
    /// The object's `at_least_one` groups, each once.
    pub(super) at_least_one: Vec<Vec<usize>>,
    /// The fields some comparison names, in order.
    pub(super) compared: Vec<usize>,
    /// Whether each field's being null or given decides another's: it shares a
    /// `both_or_neither` class or an `at_least_one` group.
    pub(super) null_ruled: Vec<bool>,
    /// Whether the comparisons tie the fields in pairs only (each compared field has one
    /// partner) and no compared field is in a null rule: then a field's comparisons can be read
    /// one partner deep, exactly.
    pub(super) pairs_only: bool,
}

#[derive(Debug)]
pub(super) struct FieldPlan {
    pub(super) name: Vec<u8>,
    pub(super) slot: SlotId,
    pub(super) compares: Vec<(CmpOp, usize)>,
    pub(super) both_or_neither: Vec<Vec<usize>>,
}

impl RulePlan {
    /// Compiles `grammar`'s shapes and rules.
    pub fn new(grammar: &Grammar) -> RulePlan {
        let mut plan = RulePlan {
            slots: Vec::new(),
            objects: Vec::new(),
            root: OPAQUE,
            num_memo: Mutex::new(Memo::default()),
            hold_memo: Mutex::new(Memo::default()),
        };
        let mut object_slots = Vec::new();
        for object in &grammar.objects {
            let fields = object
                .fields
                .iter()
                .map(|f| FieldPlan {
                    name: f.name.as_bytes().to_vec(),
                    slot: plan.slot(&f.shape),
                    compares: Vec::new(),
                    both_or_neither: Vec::new(),
                })
                .collect();
            object_slots.push(ObjPlan {
                fields,
                has_rules: !object.rules.is_empty(),
                classes: Vec::new(),
                at_least_one: Vec::new(),
                compared: Vec::new(),
                null_ruled: Vec::new(),
                pairs_only: true,
            });
        }
        plan.objects = object_slots;
        for (o, object) in grammar.objects.iter().enumerate() {
            let index = |name: &str| {
                plan.objects[o]
                    .fields
                    .iter()
                    .position(|f| f.name == name.as_bytes())
            };
            let mut compares = Vec::new();
            let mut bon = Vec::new();
            let mut alo = Vec::new();
            for rule in &object.rules {
                match rule {
                    Rule::Compare { left, op, right } => {
                        if let (Some(l), Some(r)) = (index(left), index(right)) {
                            compares.push((l, *op, r));
                        }
                    }
                    Rule::BothOrNeither(fields) => {
                        bon.push(fields.iter().filter_map(|f| index(f)).collect::<Vec<_>>())
                    }
                    Rule::AtLeastOne(fields) => {
                        alo.push(fields.iter().filter_map(|f| index(f)).collect::<Vec<_>>())
                    }
                }
            }
            let obj = &mut plan.objects[o];
            obj.classes = classes(obj.fields.len(), &bon);
            let fields = &mut obj.fields;
            for (l, op, r) in compares {
                fields[l].compares.push((op, r));
                fields[r].compares.push((op.flip(), l));
            }
            for group in bon {
                for &f in &group {
                    fields[f]
                        .both_or_neither
                        .push(group.iter().copied().filter(|&g| g != f).collect());
                }
            }
            // A group naming no field of the object asks nothing of it.
            obj.at_least_one = alo.into_iter().filter(|g| !g.is_empty()).collect();
            obj.compared = (0..fields.len())
                .filter(|&f| !fields[f].compares.is_empty())
                .collect();
            let classes = &obj.classes;
            obj.null_ruled = (0..fields.len())
                .map(|f| {
                    classes
                        .iter()
                        .enumerate()
                        .any(|(g, &c)| g != f && c == classes[f])
                        || obj.at_least_one.iter().any(|group| group.contains(&f))
                })
                .collect();
            obj.pairs_only = obj.compared.iter().all(|&f| {
                let first = fields[f].compares[0].1;
                !obj.null_ruled[f] && fields[f].compares.iter().all(|&(_, g)| g == first)
            });
        }
        plan.root = plan.slot(&grammar.root);
        plan
    }

    fn push(&mut self, nullable: bool, kind: Kind) -> SlotId {
        self.slots.push(Slot { nullable, kind });
        self.slots.len() - 1
    }

    fn slot(&mut self, shape: &Shape) -> SlotId {
        let (inner, nullable) = shape.strip_nullable();
        match inner {
            Shape::Bool => self.push(nullable, Kind::Bool),
            Shape::Integer { min, max } => {
                let lo = Decimal::from_i128(*min);
                let hi = Decimal::from_i128(*max);
                let domain = intersect(&permitted(CmpOp::Ge, &lo), &permitted(CmpOp::Le, &hi));
                let syntax = NumSyntax {
                    fraction: false,
                    exponent: false,
                };
                self.push(
                    nullable,
                    Kind::Num(NumSlot {
                        syntax,
                        domain,
                        sup: (*max < i128::MAX).then_some((hi, false)),
                        inf: (*min > i128::MIN).then_some((lo, false)),
                    }),
                )
            }
            Shape::Number { bounds } => {
                let num = |n: &serde_json::Number| number_value(n);
                let max = Decimal::from_f64(f64::MAX)
                    .unwrap_or_else(|| unreachable!("f64::MAX is finite"));
                let mut domain = intersect(
                    &permitted(CmpOp::Le, &max),
                    &permitted(CmpOp::Ge, &max.negated()),
                );
                let mut sup: Option<(Decimal, bool)> = None;
                let mut inf: Option<(Decimal, bool)> = None;
                for (op, bound) in bounds.each() {
                    let Some(b) = num(bound) else {
                        continue;
                    };
                    domain = intersect(&domain, &permitted(op, &b));
                    let strict = matches!(op, CmpOp::Lt | CmpOp::Gt);
                    match op {
                        CmpOp::Le | CmpOp::Lt
                            if sup.as_ref().is_none_or(|s| b < s.0 || (b == s.0 && strict)) =>
                        {
                            sup = Some((b, strict))
                        }
                        CmpOp::Ge | CmpOp::Gt
                            if inf.as_ref().is_none_or(|i| b > i.0 || (b == i.0 && strict)) =>
                        {
                            inf = Some((b, strict))
                        }
                        _ => {}
                    }
                }
                let bounded = !bounds.is_unbounded();
                let syntax = NumSyntax {
                    fraction: true,
                    // llguidance writes bounded ranges without exponents.
                    exponent: !bounded,
                };
                self.push(
                    nullable,
                    Kind::Num(NumSlot {
                        syntax,
                        domain,
                        sup,
                        inf,
                    }),
                )
            }
            Shape::String {
                min_len,
                max_len,
                patterns,
                format,
            } => {
                let domain = StrDomain {
                    min_len: *min_len,
                    max_len: *max_len,
                    patterns: patterns
                        .iter()
                        .filter_map(|p| Pattern::new(p).ok())
                        .collect(),
                    format: format.as_deref().and_then(Format::from_name),
                };
                self.push(nullable, Kind::Str(Arc::new(domain)))
            }
            Shape::Enum { values } => {
                let mut e = EnumSlot::default();
                for v in values {
                    match v {
                        Value::Null => e.null = true,
                        Value::Bool(true) => e.trues = true,
                        Value::Bool(false) => e.falses = true,
                        Value::Number(n) => {
                            if let Some(d) = number_value(n) {
                                e.nums.push((n.to_string().into_bytes(), d));
                            }
                        }
                        Value::String(s) => e.strs.push(s.as_bytes().to_vec()),
                        _ => {}
                    }
                }
                let null = e.null;
                self.push(nullable || null, Kind::Enum(Arc::new(e)))
            }
            Shape::List { items, .. } => {
                let item = self.slot(items);
                self.push(nullable, Kind::List(item))
            }
            Shape::Object { index } => self.push(nullable, Kind::Object(*index)),
            Shape::External { .. } | Shape::Nullable { .. } => self.push(true, Kind::Opaque),
        }
    }
}

/// A JSON number as the validator reads it: integers exactly, the rest as `f64`.
pub(super) fn number_value(n: &serde_json::Number) -> Option<Decimal> {
    if let Some(i) = n.as_i64() {
        Some(Decimal::from_i128(i.into()))
    } else if let Some(u) = n.as_u64() {
        Some(Decimal::from_i128(u.into()))
    } else {
        n.as_f64().and_then(Decimal::from_f64)
    }
}

impl RulePlan {
    /// The number set of field `field` of object `obj` (or `usize::MAX` and the slot, outside
    /// rules) whose rule partners hold `partners`: the one remembered, else `make`'s, then
    /// remembered. `None` when numbers are out.
    pub(super) fn remembered_number_set<'d, P: Iterator<Item = &'d Done>>(
        &self,
        key: (usize, usize),
        partners: impl Fn() -> P,
        make: impl FnOnce() -> Option<NumSet>,
    ) -> Option<Arc<NumSet>> {
        remembered(&self.num_memo, key, partners, || make().map(Arc::new))
    }

    /// [`Rules::numbers_hold`](super::permit::Rules)'s verdict for field `field` of object
    /// `obj`, null or not, whose rules read `partners`: remembered, else `make`'s.
    pub(super) fn remembered_hold<'d, P: Iterator<Item = &'d Done>>(
        &self,
        (obj, field, null): (usize, usize, bool),
        partners: impl Fn() -> P,
        make: impl FnOnce() -> Option<Vec<Range>>,
    ) -> Option<Arc<[Range]>> {
        let key = (obj, 2 * field + usize::from(null));
        remembered(&self.hold_memo, key, partners, || make().map(Arc::from))
    }
}

/// The value remembered in `memo` for `(obj, field)` and `partners`, else `make`'s, then
/// remembered. A lookup allocates nothing.
fn remembered<'d, T: Clone, P: Iterator<Item = &'d Done>>(
    memo: &Mutex<KeyMemo<T>>,
    (obj, field): (usize, usize),
    partners: impl Fn() -> P,
    make: impl FnOnce() -> T,
) -> T {
    let hash = NumKey::hash_of(obj, field, partners());
    let found = |memo: &KeyMemo<T>| {
        let bucket = memo.get(&hash)?;
        let (_, value) = bucket.iter().find(|(k, _)| k.is(obj, field, partners()))?;
        Some(value.clone())
    };
    if let Some(value) = memo.lock().ok().and_then(|m| found(&m)) {
        return value;
    }
    let value = make();
    if let Ok(mut memo) = memo.lock() {
        if memo.len() > 4096 {
            memo.clear();
        }
        let key = NumKey {
            obj,
            field,
            partners: partners().cloned().collect(),
        };
        memo.entry(hash).or_default().push((key, value.clone()));
    }
    value
}

/// Each of `n` fields' class under the `both_or_neither` `groups`: the index of one field of
/// its class (union-find, once per object when the plan is built).
fn classes(n: usize, groups: &[Vec<usize>]) -> Vec<usize> {
    fn root(class: &mut [usize], mut f: usize) -> usize {
        while class[f] != f {
            class[f] = class[class[f]];
            f = class[f];
        }
        f
    }
    let mut class: Vec<usize> = (0..n).collect();
    for group in groups {
        for pair in group.windows(2) {
            let (a, b) = (root(&mut class, pair[0]), root(&mut class, pair[1]));
            class[a] = b;
        }
    }
    (0..n).map(|f| root(&mut class, f)).collect()
}
