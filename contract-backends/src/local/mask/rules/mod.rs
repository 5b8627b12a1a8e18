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
//! `rules_dec`); the partners still to come are kept satisfiable through every chain of
//! comparisons (`low <= mid`, `mid <= high`, `high <= 10`: `low` at most 10 before `mid` is
//! written; `chains.rs`, `Rules::numbers_hold`); `null` or a value only where every
//! `both_or_neither` and `at_least_one` rule of the object can still hold, decided over all of
//! them at once (`permit.rs`, `Rules::nulls_hold`), and where the numbers it leaves to be given
//! can still be. Numbers of every field are also kept finite and inside their bounds as the
//! validator reads them (`1e999` does not parse, `1e-400` is `0`), exponents are capped, and a
//! literal must be able to end inside its set within [`MAX_NUMBER_LEN`] bytes.
//!
//! Strings in comparisons (ISO dates: `effective_date <= expiry_date`) are compared as the
//! validator does, byte by byte; a prefix that ties with the partner is kept only while the
//! partner itself is a valid value of the field (so it can still be written in full), or the
//! partner with one byte after the prefix raised or lowered is, as the comparison needs
//! (`StrCons::bumped`: `2024-03-1` may still pass `2024-03-15` as `2024-03-16`). A
//! finished string bounds a string through a chain of pending ones too (`start <= signed <=
//! end`: `end >= start` before `signed` is written), where the null rules force them given.
//!
//! Invariant: the text so far is a prefix of an output that satisfies the grammar and the rules;
//! llguidance always offers a token continuing such an output, so the filtered mask is never
//! empty before the grammar accepts.
//!
//! This module holds the scanner (where values start and end in the output); the grammar
//! compiled for it is in `plan`, what the rules permit for a field in `permit` (comparisons
//! followed through the object in `chains`, an `impl` of permit's `Rules` kept in its own
//! file), the number sets in `numbers`, and one step's checks over a mask's tokens in `probe`
//! (which reads the scanner; the scanner does not read it).

mod chains;
mod numbers;
mod permit;
mod plan;
pub mod probe;

use std::sync::Arc;

use numbers::{is_number_byte, NumSet};
pub use numbers::{number_byte, MAX_NUMBER_LEN};
use permit::{null_ok, number_set, Rules, StrCons};
pub use plan::RulePlan;
use plan::{number_value, Done, Kind, SlotId, OPAQUE};

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
                let Some(set) = number_set(plan, slot_id, rules.as_ref()) else {
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

#[cfg(test)]
mod tests;
