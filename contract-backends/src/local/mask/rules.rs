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

use std::cell::RefCell;
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
    /// candidate token that starts the same value reuses one. Looked up at every value start
    /// by the key's hash ([`NumKey::hash_of`]), compared against the partners' values in place:
    /// a lookup allocates nothing (a `Vec<Done>` key built for each, with a `Dec`'s digits
    /// cloned into it, was a third of the filter's work at a value start).
    num_memo: Mutex<NumMemo>,
}

/// A map of the filter's memos: looked up at every step, with short keys (number literals, a
/// field's partner values) that come from the model's own output and are capped in number, so
/// FxHash (one multiply a word) serves where SipHash's resistance to chosen keys buys nothing.
type Memo<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

/// [`RulePlan`]'s number sets, by their key's hash (a list for the keys that share one).
type NumMemo = Memo<u64, Vec<(NumKey, Arc<NumSet>)>>;

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
            num_memo: Mutex::new(Memo::default()),
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

/// The numbers a value may still be, with the verdicts found so far.
#[derive(Debug)]
struct NumSet {
    kind: NumKind,
    /// What is known of each literal prefix met so far. A set is shared by every value of its
    /// field with the same partner values ([`RulePlan`]'s `num_memo`), and the same prefixes
    /// come back at every step and in every generation: the decimal arithmetic behind a
    /// verdict runs once per prefix and byte.
    memo: Mutex<Memo<Vec<u8>, Next>>,
}

#[derive(Debug)]
enum NumKind {
    Intervals(NumSyntax, Vec<Interval>, Parts),
    Choices(Vec<Vec<u8>>),
}

/// The bytes a number literal is made of (any other byte ends it), in the order of [`Next`]'s
/// bits.
const NUMBER_BYTES: &[u8; 15] = b"0123456789.eE+-";

/// For each byte, its index in [`NUMBER_BYTES`], or `NOT_NUMBER`.
const NUMBER_INDEX: [u8; 256] = {
    let mut index = [NOT_NUMBER; 256];
    let mut i = 0;
    while i < NUMBER_BYTES.len() {
        index[NUMBER_BYTES[i] as usize] = i as u8;
        i += 1;
    }
    index
};
const NOT_NUMBER: u8 = u8::MAX;

/// The bits of [`NUMBER_BYTES`] that start a number alone (`-` and the digits).
const START_NUMBER_BYTES: u16 = 0b100_0000_0000_0000 | 0b11_1111_1111;

/// The index of `b` in `NUMBER_BYTES` (`None`: any other byte).
pub fn number_byte(b: u8) -> Option<u32> {
    let i = NUMBER_INDEX[usize::from(b)];
    (i != NOT_NUMBER).then_some(u32::from(i))
}

/// What is known of one literal prefix: whether it is a literal of the set, and which number
/// bytes may follow it ([`NumSet::extends`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Next {
    complete: Option<bool>,
    /// Bit `i`: the verdict on `NUMBER_BYTES[i]` is in `ok`.
    known: u16,
    ok: u16,
}

/// The most prefixes a [`NumSet`] remembers (it starts over past them).
const NUM_MEMO: usize = 4096;

impl NumSet {
    fn new(kind: NumKind) -> NumSet {
        NumSet {
            kind,
            memo: Mutex::new(Memo::default()),
        }
    }

    /// What is remembered of `text`.
    fn known(&self, text: &[u8]) -> Next {
        let memo = self.memo.lock().ok();
        memo.and_then(|m| m.get(text).copied()).unwrap_or_default()
    }

    /// Remembers `next` for `text`.
    fn remember(&self, text: &[u8], next: Next) {
        if let Ok(mut m) = self.memo.lock() {
            if m.len() >= NUM_MEMO && !m.contains_key(text) {
                m.clear();
            }
            m.insert(text.to_vec(), next);
        }
    }

    /// Whether `text` can still become a literal of the set.
    fn feasible(&self, text: &[u8]) -> bool {
        match &self.kind {
            NumKind::Intervals(syntax, _, parts) => NumPrefix {
                text: text.to_vec(),
            }
            .feasible_in(*syntax, parts),
            NumKind::Choices(c) => c.iter().any(|t| t.starts_with(text)),
        }
    }

    /// Whether `text` is a literal of the set.
    fn is_literal(&self, text: &[u8]) -> bool {
        match &self.kind {
            NumKind::Intervals(_, set, _) => NumPrefix {
                text: text.to_vec(),
            }
            .complete_in(set),
            NumKind::Choices(c) => c.iter().any(|t| t == text),
        }
    }

    /// Whether number byte `b` may follow `text` (the scanner's check inside a number).
    fn may_follow(&self, text: &[u8], b: u8) -> bool {
        // Bounded length: a digit fits within MAX_NUMBER_LEN; a sign, point or exponent only
        // with room left for the digits it needs after it.
        let room = if b.is_ascii_digit() { 0 } else { 2 };
        if text.len() + 1 + room > MAX_NUMBER_LEN {
            return false;
        }
        let mut buf = [0u8; MAX_NUMBER_LEN];
        let next = &mut buf[..text.len() + 1];
        next[..text.len()].copy_from_slice(text);
        next[text.len()] = b;
        // At the cap the number must be one the field accepts as it stands.
        self.feasible(next) && (next.len() < MAX_NUMBER_LEN || self.is_literal(next))
    }

    /// [`NumSet::may_follow`], from `known` (what is known of `text`) or else computed into it.
    fn extends_with(&self, text: &[u8], b: u8, known: &mut Next) -> bool {
        let Some(i) = number_byte(b) else {
            return self.may_follow(text, b);
        };
        let bit = 1 << i;
        if known.known & bit == 0 {
            known.known |= bit;
            if self.may_follow(text, b) {
                known.ok |= bit;
            }
        }
        known.ok & bit != 0
    }

    /// [`NumSet::is_literal`], from `known` or else computed into it.
    fn complete_with(&self, text: &[u8], known: &mut Next) -> bool {
        *known.complete.get_or_insert_with(|| self.is_literal(text))
    }

    /// Whether number byte `b` may follow `text`, remembered.
    fn extends(&self, text: &[u8], b: u8) -> bool {
        let before = self.known(text);
        let mut known = before;
        let ok = self.extends_with(text, b, &mut known);
        if known != before {
            self.remember(text, known);
        }
        ok
    }

    /// Whether `text` is a literal of the set, remembered.
    fn complete(&self, text: &[u8]) -> bool {
        let before = self.known(text);
        let mut known = before;
        let ok = self.complete_with(text, &mut known);
        if known != before {
            self.remember(text, known);
        }
        ok
    }
}

/// Whether `b` belongs to a number literal (any other byte ends it).
fn is_number_byte(b: u8) -> bool {
    number_byte(b).is_some()
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

/// The bytes without which a token cannot be refused ([`Scanner::quiet`]), in their order: a
/// check runs only at the first byte other than whitespace of a value, and a value starts only
/// after a `:` (or a `,` with a list open), after the `"` that closes the open string or key
/// for the string reaches. A `":` that ends a key, or a `,\n` between values, starts nothing
/// within its token: the classes are half the size of "holds a `:`" (SmolLM2: 42 tokens instead of
/// 81 for [`Reach::Colon`], 1 instead of 10 for [`Reach::QuoteColon`]), and the tokens the mask
/// allows most after a key or a value are among those left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// None: the output is one finished value.
    Nothing,
    /// `:`, then a byte other than whitespace (between values of objects).
    Colon,
    /// `:` or `,`, then a byte other than whitespace (with a list open).
    ColonComma,
    /// `"`, then `:`, then a byte other than whitespace (inside a key, or a string no rule
    /// reads).
    QuoteColon,
    /// `"`, then `:` or `,`, then a byte other than whitespace (inside a string no rule reads,
    /// with a list open).
    QuoteColonComma,
}

impl Reach {
    /// Every reach that some token can have (a token index is kept for each).
    pub const CLASSES: [Reach; 4] = [
        Reach::Colon,
        Reach::ColonComma,
        Reach::QuoteColon,
        Reach::QuoteColonComma,
    ];

    /// Whether `bytes` hold what this reach needs, in its order.
    pub fn reached_by(self, bytes: &[u8]) -> bool {
        // The first separator decides: a byte other than whitespace after a later one is also
        // after the first (and the first `"` likewise).
        let starts_after = |bytes: &[u8], comma: bool| {
            let sep = bytes
                .iter()
                .position(|&b| b == b':' || (comma && b == b','));
            sep.is_some_and(|i| bytes[i + 1..].iter().any(|&b| !is_ws(b)))
        };
        let after_quote = |comma: bool| {
            let quote = bytes.iter().position(|&b| b == b'"');
            quote.is_some_and(|i| starts_after(&bytes[i + 1..], comma))
        };
        match self {
            Reach::Nothing => false,
            Reach::Colon => starts_after(bytes, false),
            Reach::ColonComma => starts_after(bytes, true),
            Reach::QuoteColon => after_quote(false),
            Reach::QuoteColonComma => after_quote(true),
        }
    }
}

/// How whitespace-only tokens fare at a step where every token is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blanks {
    /// They change nothing a rule sees (before a value).
    Neutral,
    /// They all end the open number, with the same verdict: one check answers for all.
    Alike,
    /// Each is checked (string content).
    Each,
}

/// One step's checks over the tokens of a mask ([`Scanner::probe`]). The verdicts of tokens
/// that only extend or end the open number, or only start the next value with a number or
/// `null`, follow from what is computed once for the step: the number set, what it remembers
/// of the literal so far (`Next`), and whether `null` may come. The others run a copy of
/// the scanner ([`Scanner::allows`]). [`Probe::finish`] remembers what the step found.
pub struct Probe<'a> {
    scanner: &'a Scanner,
    plan: &'a RulePlan,
    /// What a token must hold to be checked after the value it ends.
    after_value: Reach,
    /// At a value start, whether `null` may come; `None` elsewhere.
    null: Option<bool>,
    /// At a value start, whether an object (`{`) may come; `None` elsewhere.
    object: Option<bool>,
    /// The numbers the open (or starting) value may be, the literal so far, and what is known
    /// of it: at the step's start and now.
    number: RefCell<Option<(Arc<NumSet>, Next, Next)>>,
}

impl Probe<'_> {
    /// How whitespace-only tokens fare at this step (when [`Scanner::quiet`] is `None`).
    pub fn blanks(&self) -> Blanks {
        match self.scanner.cur {
            Cur::None => Blanks::Neutral,
            Cur::Num { .. } => Blanks::Alike,
            _ => Blanks::Each,
        }
    }

    /// [`Scanner::allows`], for a token of the mask this step.
    pub fn allows(&self, bytes: &[u8]) -> bool {
        self.quick(bytes)
            .unwrap_or_else(|| self.scanner.allows(self.plan, bytes))
    }

    /// The literal written so far of the open number (empty at a value start).
    fn text(&self) -> &[u8] {
        match &self.scanner.cur {
            Cur::Num { text, .. } => text,
            _ => b"",
        }
    }

    /// The verdicts on the one-byte tokens of number bytes (bit `i`: `NUMBER_BYTES[i]`)
    /// that this step already knows without computing anything: `(known, allowed)`. Inside a
    /// number, what is remembered of the literal so far; at a value start, for `-` and the
    /// digits, what is remembered of the empty literal (all refused when numbers cannot come).
    /// Elsewhere nothing. A mask allows mostly digits inside a number: this spares them
    /// [`Probe::allows`].
    pub fn known_number_bytes(&self) -> (u16, u16) {
        let number = self.number.borrow();
        let now = number.as_ref().map(|(_, _, now)| *now);
        match (&self.scanner.cur, now) {
            (Cur::Num { .. }, Some(now)) => (now.known, now.ok),
            (Cur::None, now) if self.null.is_some() => {
                let starts = START_NUMBER_BYTES;
                match now {
                    Some(now) => (now.known & starts, now.ok & starts),
                    None => (starts, 0),
                }
            }
            _ => (0, 0),
        }
    }

    /// `f` on the number set and what is known of the literal so far; `None` when numbers
    /// cannot come.
    fn with_number<R>(&self, f: impl FnOnce(&NumSet, &[u8], &mut Next) -> R) -> Option<R> {
        let mut number = self.number.borrow_mut();
        let (set, _, now) = number.as_mut()?;
        Some(f(set, self.text(), now))
    }

    /// The verdict when it follows from the step's state without running the scanner: the
    /// scanner would make exactly this one check, and the token's other bytes cannot reach
    /// another ([`Scanner::quiet`] after the value).
    fn quick(&self, bytes: &[u8]) -> Option<bool> {
        match &self.scanner.cur {
            Cur::Num { .. } => match bytes {
                [b] if is_number_byte(*b) => {
                    self.with_number(|set, text, known| set.extends_with(text, *b, known))
                }
                [b, ..] if !is_number_byte(*b) && !self.after_value.reached_by(bytes) => {
                    self.with_number(|set, text, known| set.complete_with(text, known))
                }
                _ => None,
            },
            Cur::None => {
                let null = self.null?;
                let start = bytes.iter().position(|&b| !is_ws(b))?;
                match &bytes[start..] {
                    [b @ (b'-' | b'0'..=b'9')] => Some(
                        self.with_number(|set, text, known| set.extends_with(text, *b, known))
                            .unwrap_or(false),
                    ),
                    [b'n', rest @ ..] if !self.after_value.reached_by(rest) => Some(null),
                    // Inside the new object nothing is checked before a `:` (or a `,` with a
                    // list open), as between its values.
                    [b'{', rest @ ..] if !self.in_object().reached_by(rest) => self.object,
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// [`Scanner::quiet`] inside an object opened here.
    fn in_object(&self) -> Reach {
        match self.after_value {
            Reach::ColonComma => Reach::ColonComma,
            _ => Reach::Colon,
        }
    }

    /// Remembers in the number set what this step computed.
    pub fn finish(self) {
        if let Some((set, start, now)) = self.number.borrow_mut().take() {
            if now != start {
                set.remember(self.text(), now);
            }
        }
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

    /// What a token must contain for the rules to be able to refuse it, when that depends on
    /// its bytes alone: between values (and inside a literal or a string no rule reads), no
    /// check can run before a value starts, and a value starts only after a `:` (or a `,`
    /// inside a list). `None`: any byte may be checked (a value starts next, or one is open).
    pub fn quiet(&self) -> Option<Reach> {
        let lists = self.stack.iter().any(|f| matches!(f, Frame::Arr { .. }));
        match &self.cur {
            Cur::Key { .. } => Some(Reach::QuoteColon),
            Cur::Str { buf: None, .. } if lists => Some(Reach::QuoteColonComma),
            Cur::Str { buf: None, .. } => Some(Reach::QuoteColon),
            Cur::Lit(_) => Some(self.between_values(lists)),
            Cur::None if !self.at_value_start() => Some(self.between_values(lists)),
            _ => None,
        }
    }

    /// [`Scanner::quiet`] once the current value (or literal) is finished.
    fn between_values(&self, lists: bool) -> Reach {
        if self.stack.is_empty() {
            Reach::Nothing
        } else if lists {
            Reach::ColonComma
        } else {
            Reach::Colon
        }
    }

    /// Whether the next byte other than whitespace starts a value.
    fn at_value_start(&self) -> bool {
        match self.stack.last() {
            None => !self.root_done,
            Some(Frame::Obj { st, .. }) => *st == ObjSt::Value,
            Some(Frame::Arr { expect_value, .. }) => *expect_value,
        }
    }

    /// The checks of one step, for the tokens of one mask ([`Probe::allows`]).
    pub fn probe<'a>(&'a self, plan: &'a RulePlan) -> Probe<'a> {
        let lists = self.stack.iter().any(|f| matches!(f, Frame::Arr { .. }));
        let (null, object, set, text) = match &self.cur {
            Cur::Num { text, set, .. } => (None, None, Some(set.clone()), &text[..]),
            // At a value start, what `start_value` decides on `null`, objects and numbers.
            Cur::None => match self.value_at(plan, b'0') {
                Some((slot, ctx)) => {
                    let rules = self.rules(plan, ctx);
                    let rules = rules.as_ref();
                    (
                        Some(null_ok(plan, slot, rules)),
                        Some(rules.is_none_or(Rules::non_null_ok)),
                        plan.number_set(slot, rules),
                        &b""[..],
                    )
                }
                None => (None, None, None, &b""[..]),
            },
            _ => (None, None, None, &b""[..]),
        };
        let number = set.map(|set| {
            let known = set.known(text);
            (set, known, known)
        });
        Probe {
            scanner: self,
            plan,
            after_value: self.between_values(lists),
            null,
            object,
            number: RefCell::new(number),
        }
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
        for (i, &b) in bytes.iter().enumerate() {
            if copy.quiet().is_some_and(|r| !r.reached_by(&bytes[i..])) {
                return true;
            }
            if !copy.step(plan, b) {
                return false;
            }
        }
        true
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
                if is_number_byte(b) {
                    let ok = set.extends(text, b);
                    if ok {
                        text.push(b);
                    }
                    return ok;
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
        if let Some((slot, ctx)) = self.value_at(plan, b) {
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

    /// Where a value starts if `b` (not whitespace) comes next, and its slot.
    fn value_at(&self, plan: &RulePlan, b: u8) -> Option<(SlotId, Ctx)> {
        match self.stack.last() {
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

    fn rules<'p>(&self, plan: &'p RulePlan, ctx: Ctx) -> Option<Rules<'p>> {
        self.vals(ctx).map(|(vals, obj, field)| Rules {
            plan,
            vals: vals.clone(),
            obj,
            field,
        })
    }

    fn start_value(&mut self, plan: &RulePlan, slot_id: SlotId, ctx: Ctx, b: u8) -> bool {
        let slot = plan.slots.get(slot_id);
        let rules = self.rules(plan, ctx);
        match b {
            b'n' => {
                if !null_ok(plan, slot_id, rules.as_ref()) {
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
                let Some(set) = plan.number_set(slot_id, rules.as_ref()) else {
                    return false;
                };
                // The first byte gets the check of any later one ([`NumSet::extends`]).
                if !set.extends(b"", b) {
                    return false;
                }
                self.cur = Cur::Num {
                    ctx,
                    text: vec![b],
                    set,
                };
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

/// Whether `null` may be the value starting in `slot_id`, under `rules`.
fn null_ok(plan: &RulePlan, slot_id: SlotId, rules: Option<&Rules<'_>>) -> bool {
    if rules.is_some_and(|r| !r.null_ok()) {
        return false;
    }
    !(plan.slots.get(slot_id).is_some_and(|s| !s.nullable) && slot_id != OPAQUE)
}

impl RulePlan {
    /// The numbers the value starting in `slot_id` may be, under `rules`; `None` when numbers
    /// are out. Remembered by field and partner values.
    fn number_set(&self, slot_id: SlotId, rules: Option<&Rules<'_>>) -> Option<Arc<NumSet>> {
        if rules.is_some_and(|r| !r.non_null_ok()) {
            return None;
        }
        let (obj, field) = rules.map_or((usize::MAX, slot_id), |r| (r.obj, r.field));
        let partners = || rules.into_iter().flat_map(Rules::partners);
        let hash = NumKey::hash_of(obj, field, partners());
        let found = |memo: &NumMemo| {
            let bucket = memo.get(&hash)?;
            let (_, set) = bucket.iter().find(|(k, _)| k.is(obj, field, partners()))?;
            Some(set.clone())
        };
        if let Some(set) = self.num_memo.lock().ok().and_then(|m| found(&m)) {
            return Some(set);
        }
        let set = Arc::new(num_set(self.slots.get(slot_id), rules)?);
        if let Ok(mut memo) = self.num_memo.lock() {
            if memo.len() > 4096 {
                memo.clear();
            }
            let key = NumKey {
                obj,
                field,
                partners: partners().cloned().collect(),
            };
            memo.entry(hash).or_default().push((key, set.clone()));
        }
        Some(set)
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
    fn partners(&self) -> impl Iterator<Item = &Done> {
        let me = self.fp(self.field);
        let partners = me
            .compares
            .iter()
            .map(|&(_, g)| g)
            .chain(me.both_or_neither.iter().flatten().copied());
        partners.map(|g| self.val(g))
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
