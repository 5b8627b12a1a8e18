//! The value filter: cross-field rules enforced while decoding.
//!
//! llguidance keeps the output inside the contract's JSON Schema; it cannot know that `high`
//! must be `>= low` once `low` is written. This filter runs after its mask. It keeps a byte-level
//! scanner of the JSON being generated (key path, value state, the finished values of rule
//! fields) and, for each token llguidance allows, runs the scanner over the token's bytes on a
//! copy of the state: the token is dropped when it finishes a value outside what the rules
//! permit, or leaves a value open that can no longer finish inside it.
//!
//! What a rule permits for the field being written: its own domain; a `null` partner in a
//! `both_or_neither` group forbids values and a non-null one forbids `null`; a finished partner
//! of a comparison bounds it (`high >= low`, decided exactly on the digits, see
//! `rules_dec`); a partner still to come is kept satisfiable (`low <= max(high)`,
//! `null` only when every later member of its group may be `null`); `at_least_one` forbids the
//! last `null`. Numbers of every field are also kept finite and inside their bounds as the
//! validator reads them (`1e999` does not parse, `1e-400` is `0`), and exponents are capped.
//!
//! Strings in comparisons (ISO dates: `effective_date <= expiry_date`) are compared as the
//! validator does, byte by byte; a prefix that ties with the partner is kept only while the
//! partner itself is a valid value of the field (so it can still be written in full).
//!
//! Invariant: the text so far is a prefix of an output that satisfies the grammar and the rules;
//! llguidance always offers a token continuing such an output, so the filtered mask is never
//! empty before the grammar accepts.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use contract_core::grammar::{Grammar, GrammarRule, Shape};
use contract_core::{Format, Pattern};
use serde_json::Value;

use super::rules_dec::{intersect, permitted, Dec, Interval, NumPrefix, NumSyntax, Op, Parts};

type SlotId = usize;
const OPAQUE: SlotId = usize::MAX;

/// A grammar compiled for the filter: every value position as a slot.
#[derive(Debug)]
pub struct RulePlan {
    slots: Vec<Slot>,
    objects: Vec<ObjPlan>,
    root: SlotId,
    /// The number sets computed at value starts, by field and the values its rules read: every
    /// candidate token that starts the same value reuses one.
    num_memo: Mutex<HashMap<NumKey, Arc<NumSet>>>,
}

type NumKey = (usize, usize, Vec<Done>);

#[derive(Debug)]
struct Slot {
    nullable: bool,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Bool,
    Num(NumSlot),
    Str(Arc<StrDomain>),
    Enum(Arc<EnumSlot>),
    List(SlotId),
    Object(usize),
    Opaque,
}

#[derive(Debug)]
struct NumSlot {
    syntax: NumSyntax,
    domain: Vec<Interval>,
    /// Largest value in the domain, and whether it is only approached (`exclusive_maximum`).
    sup: (Dec, bool),
    /// Smallest value in the domain, likewise.
    inf: (Dec, bool),
}

/// What a string field accepts, for "can the partner's value still be written here?".
#[derive(Debug)]
struct StrDomain {
    min_len: Option<u64>,
    max_len: Option<u64>,
    patterns: Vec<Pattern>,
    format: Option<Format>,
}

impl StrDomain {
    fn accepts(&self, s: &[u8]) -> bool {
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
struct EnumSlot {
    nums: Vec<(Vec<u8>, Dec)>,
    strs: Vec<Vec<u8>>,
    trues: bool,
    falses: bool,
    null: bool,
}

#[derive(Debug)]
struct ObjPlan {
    fields: Vec<FieldPlan>,
    has_rules: bool,
}

#[derive(Debug)]
struct FieldPlan {
    name: Vec<u8>,
    slot: SlotId,
    compares: Vec<(Op, usize)>,
    both_or_neither: Vec<Vec<usize>>,
    at_least_one: Vec<Vec<usize>>,
}

impl RulePlan {
    /// Compiles `grammar`'s shapes and rules.
    pub fn new(grammar: &Grammar) -> RulePlan {
        let mut plan = RulePlan {
            slots: Vec::new(),
            objects: Vec::new(),
            root: OPAQUE,
            num_memo: Mutex::new(HashMap::new()),
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
                    at_least_one: Vec::new(),
                })
                .collect();
            object_slots.push(ObjPlan {
                fields,
                has_rules: !object.rules.is_empty(),
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
                    GrammarRule::Compare { left, op, right } => {
                        if let (Some(l), Some(r), Some(op)) =
                            (index(left), index(right), Op::parse(op))
                        {
                            compares.push((l, op, r));
                        }
                    }
                    GrammarRule::BothOrNeither { fields } => {
                        bon.push(fields.iter().filter_map(|f| index(f)).collect::<Vec<_>>())
                    }
                    GrammarRule::AtLeastOne { fields } => {
                        alo.push(fields.iter().filter_map(|f| index(f)).collect::<Vec<_>>())
                    }
                }
            }
            let fields = &mut plan.objects[o].fields;
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
            for group in alo {
                for &f in &group {
                    fields[f]
                        .at_least_one
                        .push(group.iter().copied().filter(|&g| g != f).collect());
                }
            }
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
                let lo = Dec::from_i128(*min);
                let hi = Dec::from_i128(*max);
                let domain = intersect(&permitted(Op::Ge, &lo), &permitted(Op::Le, &hi));
                let syntax = NumSyntax {
                    fraction: false,
                    exponent: false,
                };
                self.push(
                    nullable,
                    Kind::Num(NumSlot {
                        syntax,
                        domain,
                        sup: (hi, false),
                        inf: (lo, false),
                    }),
                )
            }
            Shape::Number {
                minimum,
                exclusive_minimum,
                maximum,
                exclusive_maximum,
            } => {
                let num = |n: &serde_json::Number| number_value(n);
                let max = Dec::from_f64(f64::MAX);
                let mut domain =
                    intersect(&permitted(Op::Le, &max), &permitted(Op::Ge, &max.negate()));
                let mut sup = (max.clone(), false);
                let mut inf = (max.negate(), false);
                let bounds = [
                    (minimum, Op::Ge),
                    (exclusive_minimum, Op::Gt),
                    (maximum, Op::Le),
                    (exclusive_maximum, Op::Lt),
                ];
                for (bound, op) in bounds {
                    let Some(b) = bound.as_ref().and_then(num) else {
                        continue;
                    };
                    domain = intersect(&domain, &permitted(op, &b));
                    match op {
                        Op::Le | Op::Lt if b < sup.0 || (b == sup.0 && op == Op::Lt) => {
                            sup = (b, op == Op::Lt)
                        }
                        Op::Ge | Op::Gt if b > inf.0 || (b == inf.0 && op == Op::Gt) => {
                            inf = (b, op == Op::Gt)
                        }
                        _ => {}
                    }
                }
                let bounded = minimum.is_some()
                    || exclusive_minimum.is_some()
                    || maximum.is_some()
                    || exclusive_maximum.is_some();
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
fn number_value(n: &serde_json::Number) -> Option<Dec> {
    if let Some(i) = n.as_i64() {
        Some(Dec::from_i128(i.into()))
    } else if let Some(u) = n.as_u64() {
        Some(Dec::from_i128(u.into()))
    } else {
        n.as_f64().filter(|f| f.is_finite()).map(Dec::from_f64)
    }
}

/// A finished value of a field, kept for the rules of its object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Done {
    Pending,
    Null,
    Num(Dec),
    Str(Arc<Vec<u8>>),
    Bool(bool),
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ObjSt {
    KeyOrEnd,
    Colon,
    Value,
    CommaOrEnd,
}

#[derive(Debug, Clone)]
enum Frame {
    Obj {
        obj: usize,
        field: usize,
        st: ObjSt,
        vals: Arc<Vec<Done>>,
    },
    Arr {
        item: SlotId,
        expect_value: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    No,
    Backslash,
    Unicode(u8, u32),
}

/// Where a value sits: an object field (frame depth, field index), or a list item / the root.
type Ctx = Option<(usize, usize)>;

#[derive(Debug, Clone)]
struct StrCons {
    domain: Option<Arc<StrDomain>>,
    compares: Vec<(Op, Arc<Vec<u8>>)>,
    choices: Option<Arc<EnumSlot>>,
}

#[derive(Debug, Clone)]
enum Cur {
    None,
    Key {
        buf: Vec<u8>,
        esc: Esc,
    },
    Str {
        ctx: Ctx,
        esc: Esc,
        buf: Option<Vec<u8>>,
        cons: Option<Arc<StrCons>>,
    },
    Num {
        ctx: Ctx,
        text: Vec<u8>,
        set: Arc<NumSet>,
    },
    Lit(&'static [u8]),
}

#[derive(Debug)]
enum NumSet {
    Intervals(NumSyntax, Vec<Interval>, Parts),
    Choices(Vec<Vec<u8>>),
}

impl NumSet {
    fn feasible(&self, text: &[u8]) -> bool {
        match self {
            NumSet::Intervals(syntax, _, parts) => NumPrefix {
                text: text.to_vec(),
            }
            .feasible_in(*syntax, parts),
            NumSet::Choices(c) => c.iter().any(|t| t.starts_with(text)),
        }
    }

    fn complete(&self, text: &[u8]) -> bool {
        match self {
            NumSet::Intervals(_, set, _) => NumPrefix {
                text: text.to_vec(),
            }
            .complete_in(set),
            NumSet::Choices(c) => c.iter().any(|t| t == text),
        }
    }
}

/// The longest number literal the filter lets a model write, in bytes. Without it a masked model
/// can write digits until its token limit (SmolLM2-135M wrote `"low": 12500000…` for 100
/// tokens); no contract value needs more.
pub const MAX_NUMBER_LEN: usize = 32;

/// The byte-level scanner of the JSON being generated.
#[derive(Debug, Clone)]
pub struct Scanner {
    stack: Vec<Frame>,
    cur: Cur,
    root_done: bool,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new()
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

impl Scanner {
    /// The scanner before any output.
    pub fn new() -> Scanner {
        Scanner {
            stack: Vec::new(),
            cur: Cur::None,
            root_done: false,
        }
    }

    /// Whether the next token can matter only if it leaves a string that no rule reads: then
    /// only tokens with both `"` and `:` need a check (an index of them is kept per tokenizer).
    pub fn in_free_string(&self) -> bool {
        matches!(self.cur, Cur::Key { .. } | Cur::Str { buf: None, .. })
    }

    /// Whether whitespace-only tokens cannot change anything a rule sees (between tokens; not
    /// after a number, which whitespace finishes, nor inside a string).
    pub fn blank_is_neutral(&self) -> bool {
        matches!(self.cur, Cur::None)
    }

    /// Whether every whitespace-only token has the same effect (inside a number, which the first
    /// whitespace byte finishes, after which whitespace is neutral): the filter checks one.
    pub fn blank_acts_alike(&self) -> bool {
        matches!(self.cur, Cur::Num { .. })
    }

    /// Whether the output is one finished value (EOS allowed).
    pub fn can_end(&self, plan: &RulePlan) -> bool {
        match &self.cur {
            Cur::None => self.root_done,
            Cur::Num { text, set, .. } => {
                self.stack.is_empty() && set.complete(text) && plan.root != OPAQUE
            }
            _ => false,
        }
    }

    /// Whether `bytes` keep the output completable inside the rules (the state is unchanged).
    pub fn allows(&self, plan: &RulePlan, bytes: &[u8]) -> bool {
        let mut copy = self.clone();
        copy.advance(plan, bytes)
    }

    /// Advances over `bytes`; `false` when they break a rule (the state is then unusable).
    pub fn advance(&mut self, plan: &RulePlan, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.step(plan, b))
    }

    fn step(&mut self, plan: &RulePlan, b: u8) -> bool {
        match &mut self.cur {
            Cur::None => self.structural(plan, b),
            Cur::Lit(rest) => {
                if let Some((_, tail)) = rest.split_first() {
                    *rest = tail;
                }
                if rest.is_empty() {
                    self.cur = Cur::None;
                    self.value_done();
                }
                true
            }
            Cur::Key { buf, esc } => {
                if let Some(closed) = string_byte(buf, esc, b, true) {
                    if closed {
                        let key = std::mem::take(buf);
                        self.cur = Cur::None;
                        if let Some(Frame::Obj { obj, field, st, .. }) = self.stack.last_mut() {
                            *field = if *obj == OPAQUE {
                                usize::MAX
                            } else {
                                plan.objects[*obj]
                                    .fields
                                    .iter()
                                    .position(|f| f.name == key)
                                    .unwrap_or(usize::MAX)
                            };
                            *st = ObjSt::Colon;
                        }
                    }
                }
                true
            }
            Cur::Str {
                ctx,
                esc,
                buf,
                cons,
            } => {
                let ctx = *ctx;
                match buf {
                    None => {
                        let mut scratch = Vec::new();
                        if string_byte(&mut scratch, esc, b, false) == Some(true) {
                            self.cur = Cur::None;
                            self.record(ctx, Done::Other);
                            self.value_done();
                        }
                        true
                    }
                    Some(buf) => {
                        let before = buf.len();
                        match string_byte(buf, esc, b, true) {
                            Some(true) => {
                                let text = std::mem::take(buf);
                                let ok = cons.as_ref().is_none_or(|c| c.complete(&text));
                                self.cur = Cur::None;
                                self.record(ctx, Done::Str(Arc::new(text)));
                                self.value_done();
                                ok
                            }
                            _ => {
                                if buf.len() != before && *esc == Esc::No {
                                    cons.as_ref().is_none_or(|c| c.feasible(buf))
                                } else {
                                    true
                                }
                            }
                        }
                    }
                }
            }
            Cur::Num { ctx, text, set } => {
                if b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-') {
                    // Bounded length: a digit fits within MAX_NUMBER_LEN; a sign, point or
                    // exponent only with room left for the digits it needs after it.
                    let room = if b.is_ascii_digit() { 0 } else { 2 };
                    if text.len() + 1 + room > MAX_NUMBER_LEN {
                        return false;
                    }
                    text.push(b);
                    // At the cap the number must be one the field accepts as it stands.
                    return set.feasible(text)
                        && (text.len() < MAX_NUMBER_LEN || set.complete(text));
                }
                let ctx = *ctx;
                if !set.complete(text) {
                    return false;
                }
                let value = serde_json::from_slice::<serde_json::Number>(text)
                    .ok()
                    .and_then(|n| number_value(&n));
                self.cur = Cur::None;
                self.record(ctx, value.map_or(Done::Other, Done::Num));
                self.value_done();
                self.structural(plan, b)
            }
        }
    }

    fn structural(&mut self, plan: &RulePlan, b: u8) -> bool {
        if is_ws(b) {
            return true;
        }
        // Where a value may start, and its slot.
        let value_at: Option<(SlotId, Ctx)> = match self.stack.last() {
            None if !self.root_done => Some((plan.root, None)),
            None => None,
            Some(Frame::Obj {
                obj,
                field,
                st: ObjSt::Value,
                ..
            }) => {
                let depth = self.stack.len() - 1;
                if *obj == OPAQUE || *field == usize::MAX {
                    Some((OPAQUE, None))
                } else {
                    let slot = plan.objects[*obj].fields[*field].slot;
                    let ctx = plan.objects[*obj].has_rules.then_some((depth, *field));
                    Some((slot, ctx))
                }
            }
            Some(Frame::Obj { .. }) => None,
            Some(Frame::Arr { item, expect_value }) => {
                (*expect_value && b != b']').then_some((*item, None))
            }
        };
        if let Some((slot, ctx)) = value_at {
            return self.start_value(plan, slot, ctx, b);
        }
        match self.stack.last_mut() {
            Some(Frame::Obj { st, .. }) => match (b, *st) {
                (b'"', ObjSt::KeyOrEnd) => {
                    self.cur = Cur::Key {
                        buf: Vec::new(),
                        esc: Esc::No,
                    };
                    true
                }
                (b':', ObjSt::Colon) => {
                    *st = ObjSt::Value;
                    true
                }
                (b',', ObjSt::CommaOrEnd) => {
                    *st = ObjSt::KeyOrEnd;
                    true
                }
                (b'}', ObjSt::KeyOrEnd | ObjSt::CommaOrEnd) => {
                    self.stack.pop();
                    self.value_done();
                    true
                }
                _ => true,
            },
            Some(Frame::Arr { expect_value, .. }) => match b {
                b',' => {
                    *expect_value = true;
                    true
                }
                b']' => {
                    self.stack.pop();
                    self.value_done();
                    true
                }
                _ => true,
            },
            None => true,
        }
    }

    fn value_done(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Obj { st, .. }) => *st = ObjSt::CommaOrEnd,
            Some(Frame::Arr { expect_value, .. }) => *expect_value = false,
            None => self.root_done = true,
        }
    }

    fn record(&mut self, ctx: Ctx, done: Done) {
        if let Some((depth, field)) = ctx {
            if let Some(Frame::Obj { vals, .. }) = self.stack.get_mut(depth) {
                if let Some(v) = Arc::make_mut(vals).get_mut(field) {
                    *v = done;
                }
            }
        }
    }

    fn vals(&self, ctx: Ctx) -> Option<(&Arc<Vec<Done>>, usize, usize)> {
        let (depth, field) = ctx?;
        match self.stack.get(depth) {
            Some(Frame::Obj { vals, obj, .. }) => Some((vals, *obj, field)),
            _ => None,
        }
    }

    fn start_value(&mut self, plan: &RulePlan, slot_id: SlotId, ctx: Ctx, b: u8) -> bool {
        let slot = plan.slots.get(slot_id);
        let rules = self.vals(ctx).map(|(vals, obj, field)| Rules {
            plan,
            vals: vals.clone(),
            obj,
            field,
        });
        match b {
            b'n' => {
                if let Some(r) = &rules {
                    if !r.null_ok() {
                        return false;
                    }
                }
                if slot.is_some_and(|s| !s.nullable) && slot_id != OPAQUE {
                    return false;
                }
                self.record(ctx, Done::Null);
                self.cur = Cur::Lit(b"ull");
                true
            }
            b't' | b'f' => {
                let value = b == b't';
                if let Some(r) = &rules {
                    if !r.non_null_ok() || !r.bool_ok(value) {
                        return false;
                    }
                }
                self.record(ctx, Done::Bool(value));
                self.cur = Cur::Lit(if value { b"rue" } else { b"alse" });
                true
            }
            b'"' => {
                if let Some(r) = &rules {
                    if !r.non_null_ok() {
                        return false;
                    }
                }
                let (domain, choices) = match slot.map(|s| &s.kind) {
                    Some(Kind::Str(d)) => (Some(d.clone()), None),
                    Some(Kind::Enum(e)) => (None, Some(e.clone())),
                    _ => (None, None),
                };
                let compares = rules.as_ref().map(Rules::str_compares).unwrap_or_default();
                let tracked = rules.is_some()
                    && (!compares.is_empty() || rules.as_ref().is_some_and(Rules::is_compared));
                let cons = (!compares.is_empty() || choices.is_some()).then(|| {
                    Arc::new(StrCons {
                        domain,
                        compares,
                        choices,
                    })
                });
                let track = tracked || cons.is_some();
                self.cur = Cur::Str {
                    ctx: if tracked { ctx } else { None },
                    esc: Esc::No,
                    buf: track.then(Vec::new),
                    cons,
                };
                true
            }
            b'-' | b'0'..=b'9' => {
                if let Some(r) = &rules {
                    if !r.non_null_ok() {
                        return false;
                    }
                }
                let key = Some(match &rules {
                    Some(r) => (r.obj, r.field, r.key()),
                    None => (usize::MAX, slot_id, Vec::new()),
                });
                let cached = key
                    .as_ref()
                    .and_then(|k| plan.num_memo.lock().ok().and_then(|m| m.get(k).cloned()));
                let set = match cached {
                    Some(set) => set,
                    None => {
                        let Some(set) = num_set(slot, rules.as_ref()) else {
                            return false;
                        };
                        let set = Arc::new(set);
                        if let (Some(k), Ok(mut memo)) = (key, plan.num_memo.lock()) {
                            if memo.len() > 4096 {
                                memo.clear();
                            }
                            memo.insert(k, set.clone());
                        }
                        set
                    }
                };
                let text = vec![b];
                if !set.feasible(&text) {
                    return false;
                }
                self.cur = Cur::Num { ctx, text, set };
                true
            }
            b'{' => {
                if let Some(r) = &rules {
                    if !r.non_null_ok() {
                        return false;
                    }
                }
                self.record(ctx, Done::Other);
                let obj = match slot.map(|s| &s.kind) {
                    Some(Kind::Object(o)) => *o,
                    _ => OPAQUE,
                };
                let n = if obj == OPAQUE {
                    0
                } else {
                    plan.objects[obj].fields.len()
                };
                let vals = if obj != OPAQUE && plan.objects[obj].has_rules {
                    vec![Done::Pending; n]
                } else {
                    Vec::new()
                };
                self.stack.push(Frame::Obj {
                    obj,
                    field: usize::MAX,
                    st: ObjSt::KeyOrEnd,
                    vals: Arc::new(vals),
                });
                true
            }
            b'[' => {
                if let Some(r) = &rules {
                    if !r.non_null_ok() {
                        return false;
                    }
                }
                self.record(ctx, Done::Other);
                let item = match slot.map(|s| &s.kind) {
                    Some(Kind::List(i)) => *i,
                    _ => OPAQUE,
                };
                self.stack.push(Frame::Arr {
                    item,
                    expect_value: true,
                });
                true
            }
            _ => true,
        }
    }
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
            NumSet::Intervals(n.syntax, set, parts)
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
            NumSet::Choices(choices)
        }
        _ => {
            let set = vec![Interval::all()];
            let parts = Parts::of(&set);
            NumSet::Intervals(
                NumSyntax {
                    fraction: true,
                    exponent: true,
                },
                set,
                parts,
            )
        }
    })
}

/// Feeds one byte of a JSON string; `Some(true)` when it closes the string. Decoded bytes go to
/// `buf` when `decode`.
fn string_byte(buf: &mut Vec<u8>, esc: &mut Esc, b: u8, decode: bool) -> Option<bool> {
    match *esc {
        Esc::No => match b {
            b'"' => return Some(true),
            b'\\' => *esc = Esc::Backslash,
            _ => {
                if decode {
                    buf.push(b)
                }
            }
        },
        Esc::Backslash => {
            *esc = Esc::No;
            let c = match b {
                b'n' => b'\n',
                b't' => b'\t',
                b'r' => b'\r',
                b'b' => 8,
                b'f' => 12,
                b'u' => {
                    *esc = Esc::Unicode(4, 0);
                    return Some(false);
                }
                other => other,
            };
            if decode {
                buf.push(c);
            }
        }
        Esc::Unicode(left, acc) => {
            let v = (b as char).to_digit(16).unwrap_or(0);
            let acc = acc * 16 + v;
            if left > 1 {
                *esc = Esc::Unicode(left - 1, acc);
            } else {
                *esc = Esc::No;
                if decode {
                    let c = char::from_u32(acc).unwrap_or('\u{FFFD}');
                    let mut tmp = [0u8; 4];
                    buf.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                }
            }
        }
    }
    Some(false)
}

/// The rules of one field, given the values finished so far in its object.
struct Rules<'a> {
    plan: &'a RulePlan,
    vals: Arc<Vec<Done>>,
    obj: usize,
    field: usize,
}

impl Rules<'_> {
    fn fp(&self, f: usize) -> &FieldPlan {
        &self.plan.objects[self.obj].fields[f]
    }

    fn val(&self, f: usize) -> &Done {
        self.vals.get(f).unwrap_or(&Done::Pending)
    }

    fn slot(&self, f: usize) -> &Slot {
        &self.plan.slots[self.fp(f).slot]
    }

    /// What the number set of this field depends on: the values of its rule partners.
    fn key(&self) -> Vec<Done> {
        let me = self.fp(self.field);
        let partners = me
            .compares
            .iter()
            .map(|&(_, g)| g)
            .chain(me.both_or_neither.iter().flatten().copied());
        partners.map(|g| self.val(g).clone()).collect()
    }

    fn is_compared(&self) -> bool {
        !self.fp(self.field).compares.is_empty()
    }

    fn null_ok(&self) -> bool {
        let me = self.fp(self.field);
        for group in &me.both_or_neither {
            for &g in group {
                match self.val(g) {
                    Done::Pending => {
                        if !self.slot(g).nullable {
                            return false;
                        }
                    }
                    Done::Null => {}
                    _ => return false,
                }
            }
        }
        for group in &me.at_least_one {
            let others_null = group.iter().all(|&g| *self.val(g) == Done::Null);
            if others_null {
                return false;
            }
        }
        true
    }

    fn non_null_ok(&self) -> bool {
        let me = self.fp(self.field);
        me.both_or_neither
            .iter()
            .all(|group| group.iter().all(|&g| *self.val(g) != Done::Null))
    }

    /// Whether partner `g` must end up non-null once this field is.
    fn forced_non_null(&self, g: usize) -> bool {
        !self.slot(g).nullable
            || self
                .fp(self.field)
                .both_or_neither
                .iter()
                .any(|group| group.contains(&g))
    }

    /// The interval sets a number here must lie in (all of them); `None` when numbers are out.
    fn num_constraints(&self) -> Option<Vec<Vec<Interval>>> {
        if !self.non_null_ok() {
            return None;
        }
        let mut out = Vec::new();
        for &(op, g) in &self.fp(self.field).compares {
            match self.val(g) {
                Done::Num(p) => out.push(permitted(op, p)),
                Done::Pending if self.forced_non_null(g) => {
                    let (sup, inf, domain) = match &self.slot(g).kind {
                        Kind::Num(n) => (n.sup.clone(), n.inf.clone(), n.domain.clone()),
                        Kind::Enum(e) if !e.nums.is_empty() => {
                            let max = e.nums.iter().map(|(_, v)| v).max().cloned();
                            let min = e.nums.iter().map(|(_, v)| v).min().cloned();
                            let (Some(max), Some(min)) = (max, min) else {
                                continue;
                            };
                            let points = e
                                .nums
                                .iter()
                                .flat_map(|(_, v)| permitted(Op::Eq, v))
                                .collect();
                            ((max, false), (min, false), points)
                        }
                        _ => continue,
                    };
                    match op {
                        Op::Le | Op::Lt => {
                            let (sup, strict) = &sup;
                            let op = if *strict || op == Op::Lt {
                                Op::Lt
                            } else {
                                Op::Le
                            };
                            out.push(permitted(op, sup));
                        }
                        Op::Ge | Op::Gt => {
                            let (inf, strict) = &inf;
                            let op = if *strict || op == Op::Gt {
                                Op::Gt
                            } else {
                                Op::Ge
                            };
                            out.push(permitted(op, inf));
                        }
                        Op::Eq => out.push(domain),
                        Op::Ne => {}
                    }
                }
                _ => {}
            }
        }
        Some(out)
    }

    fn bool_ok(&self, value: bool) -> bool {
        self.fp(self.field)
            .compares
            .iter()
            .all(|&(op, g)| match self.val(g) {
                Done::Bool(p) => op.holds(value.cmp(p)),
                _ => true,
            })
    }

    fn str_compares(&self) -> Vec<(Op, Arc<Vec<u8>>)> {
        self.fp(self.field)
            .compares
            .iter()
            .filter_map(|&(op, g)| match self.val(g) {
                Done::Str(p) => Some((op, p.clone())),
                _ => None,
            })
            .collect()
    }
}

impl StrCons {
    fn complete(&self, s: &[u8]) -> bool {
        if let Some(e) = &self.choices {
            if !e.strs.iter().any(|c| c.as_slice() == s) {
                return false;
            }
        }
        self.compares
            .iter()
            .all(|(op, p)| op.holds(s.cmp(p.as_slice())))
    }

    fn feasible(&self, s: &[u8]) -> bool {
        if let Some(e) = &self.choices {
            return e.strs.iter().any(|c| c.starts_with(s) && self.complete(c));
        }
        self.compares
            .iter()
            .all(|(op, p)| self.prefix_ok(*op, p, s))
    }

    /// Whether a string starting with `s` can still satisfy `s op p`.
    fn prefix_ok(&self, op: Op, p: &[u8], s: &[u8]) -> bool {
        let n = s.len().min(p.len());
        let ord = s[..n].cmp(&p[..n]);
        let free = self.domain.as_ref().is_none_or(|d| {
            d.patterns.is_empty()
                && d.format.is_none()
                && d.max_len.is_none_or(|m| m as usize > p.len())
        });
        let p_writable = self.domain.as_ref().is_none_or(|d| d.accepts(p));
        match ord {
            Ordering::Less => matches!(op, Op::Lt | Op::Le | Op::Ne),
            Ordering::Greater => matches!(op, Op::Gt | Op::Ge | Op::Ne),
            Ordering::Equal if s.len() > p.len() => matches!(op, Op::Gt | Op::Ge | Op::Ne),
            Ordering::Equal => match op {
                Op::Ge | Op::Le | Op::Eq => p_writable,
                Op::Gt => free,
                Op::Lt | Op::Ne => {
                    (s.len() < p.len() && self.domain.as_ref().is_none_or(|d| d.accepts(s)))
                        || (op == Op::Ne && free)
                }
            },
        }
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
