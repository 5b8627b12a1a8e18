//! Streaming an extraction: each field handed on as soon as its value is closed in the reply
//! and checked ([`Extractor::stream`](crate::extract::Extractor::stream)).
//!
//! The reply is read incrementally by [`MemberScanner`], a small scanner of the top-level
//! members of one JSON object. No crate in the dependency tree reads partial JSON, and only the
//! *end* of each member's value is needed (the value itself is then parsed whole by
//! `serde_json`), which a byte scanner finds with a few states: strings with escapes, nested
//! braces and brackets, scalars ended by `,`, `}` or whitespace. On the local backend the
//! mask guarantees the shape; on a server the reply may be anything, so the scanner gives up
//! (emits nothing more for that reply) at the first byte that is not JSON where JSON must be,
//! and the ladder still reads the whole reply at the end, as
//! [`Extractor::extract`](crate::extract::Extractor::extract) does.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::extract::Extraction;
use crate::ground::{check_reply, Grounds};
use crate::ir::ContractSpec;
use crate::validate::{check_value, Violations};

/// One field of the contract, or one item of a list field, closed in a reply and checked.
///
/// A list field (`Vec<T>`, `Vec<Evidenced<T>>`) streams item by item: each item is emitted
/// as soon as it is closed in the reply and passes its own checks (the item type's
/// constraints and, with grounding on, its grounding in the source: an `Evidenced` item's
/// value inside the lines its spans cite), with [`FieldEvent::item`] set and its pointer as
/// [`FieldEvent::path`] (`/items/2`). The whole list follows as a field event of its own
/// (`item: None`, path `/items`) when it closes and passes the list's checks (its length,
/// the rules it takes part in). An item that fails its checks is not emitted: its index is
/// skipped (the next item keeps its own index, so a gap says an item was refused), the whole
/// list is then not emitted either, and the violation is in the [`StreamEvent::Done`]
/// record's attempts, at the item's pointer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldEvent {
    /// The field's JSON pointer (`/company`), or a list item's (`/items/2`).
    pub path: String,
    /// The value as the reply wrote it (the contract's reading, which may normalise it, runs on
    /// the whole reply at the end: the [`StreamEvent::Done`] record): a list item's value for
    /// an item event, evidence spans included when the item type carries them.
    pub value: Value,
    /// Which attempt gave it: its 1-based index in [`Extraction::attempts`].
    pub attempt: usize,
    /// With evidence selection, the group of fields it was asked with.
    pub group: Option<String>,
    /// `Some(i)` when the event is item `i` (0-based) of the list field whose pointer is
    /// `path` less its last segment; `None` for a whole field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
}

impl FieldEvent {
    /// Whether the event is one item of a list field (not the whole field).
    pub fn is_item(&self) -> bool {
        self.item.is_some()
    }

    /// The JSON pointer of the root field the event belongs to: `path` itself for a whole
    /// field, the list's pointer for an item (`/items` for `/items/2`).
    pub fn field_path(&self) -> &str {
        match self.item {
            Some(_) => self.path.rsplit_once('/').map_or(&self.path, |(f, _)| f),
            None => &self.path,
        }
    }
}

/// What [`Extractor::stream`](crate::extract::Extractor::stream) hands on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[allow(clippy::large_enum_variant)]
pub enum StreamEvent<C> {
    /// A field closed and checked.
    Field(FieldEvent),
    /// The extraction's record, the same as
    /// [`Extractor::extract`](crate::extract::Extractor::extract) returns; always the last event.
    Done(Extraction<C>),
}

/// Where events go while an extraction runs.
pub(crate) type Sink<'a> = dyn Fn(FieldEvent) + Send + Sync + 'a;

/// One top-level member of the reply's object, closed.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The member's name, unescaped.
    pub key: String,
    /// The value's text, as written.
    pub raw: String,
    /// The value, parsed.
    pub value: Value,
}

/// One item of a top-level member whose value is an array, closed.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The member's name, unescaped.
    pub key: String,
    /// The item's 0-based index in the array.
    pub index: usize,
    /// The item's text, as written.
    pub raw: String,
    /// The item, parsed.
    pub value: Value,
}

/// What [`MemberScanner::scan`] finds closed, in the order the reply closes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Scanned {
    /// An item of a top-level array, closed (an object or array item at its closing bracket,
    /// a string at its closing quote, a number or literal at the `,`, `]` or whitespace after
    /// it). Each comes before its array's [`Scanned::Member`].
    Item(Item),
    /// A top-level member, closed.
    Member(Member),
}

/// Where a top-level array member's items stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Items {
    /// The next item's index.
    index: usize,
    /// Where the current item's text starts, while it is open.
    start: Option<usize>,
    /// What the array's own level may hold next.
    next: Next,
}

/// What an array may hold next, at its own level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// After `[`: an item or `]`.
    First,
    /// After `,`: an item.
    Item,
    /// Inside an item.
    In,
    /// After an item: `,` or `]`.
    Sep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the object: whitespace, a code fence, a `<think>` block.
    Preamble,
    /// After `{` or `,`: a key (or `}` right after `{`).
    Key { first: bool },
    /// Inside a key's string.
    InKey { start: usize, escape: bool },
    /// After a key: `:`.
    Colon,
    /// After `:`: the value's first byte.
    Value,
    /// Inside a string value.
    InString { start: usize, escape: bool },
    /// Inside an object or array value; an array's items are tracked.
    InContainer {
        start: usize,
        depth: usize,
        in_string: bool,
        escape: bool,
        items: Option<Items>,
    },
    /// Inside a number or literal.
    InScalar { start: usize },
    /// After a value: `,` or `}`.
    After,
    /// The object closed.
    Closed,
    /// Not JSON where JSON must be: nothing more is read.
    Dead,
}

/// Finds the top-level members of a reply's JSON object as its text arrives, in pieces of any
/// size (empty ones included). A member is handed out once its value is closed: a string at
/// its closing quote, an object or array at its closing bracket, a number or literal at the
/// `,`, `}` or whitespace after it (never at the end of the text so far: `12` may go on as
/// `123`). The reply may open with whitespace, a `<think>...</think>` block and a code fence
/// (```` ```json ````); anything else before the `{` stops the scanner.
#[derive(Debug, Clone)]
pub struct MemberScanner {
    text: String,
    pos: usize,
    state: State,
    key: Option<String>,
}

impl Default for MemberScanner {
    fn default() -> Self {
        MemberScanner::new()
    }
}

impl MemberScanner {
    /// A scanner before any text.
    pub fn new() -> MemberScanner {
        MemberScanner {
            text: String::new(),
            pos: 0,
            state: State::Preamble,
            key: None,
        }
    }

    /// Whether the scanner stopped on text that is not JSON.
    pub fn is_dead(&self) -> bool {
        self.state == State::Dead
    }

    /// Whether the object closed.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Reads `piece`, the next part of the reply; returns the members it closed, in order.
    pub fn push(&mut self, piece: &str) -> Vec<Member> {
        self.scan(piece)
            .into_iter()
            .filter_map(|s| match s {
                Scanned::Member(m) => Some(m),
                Scanned::Item(_) => None,
            })
            .collect()
    }

    /// [`MemberScanner::push`], with the items of top-level arrays as they close: each
    /// array's items in order, then the array's member.
    pub fn scan(&mut self, piece: &str) -> Vec<Scanned> {
        self.text.push_str(piece);
        let mut out = Vec::new();
        while self.pos < self.text.len() {
            if matches!(self.state, State::Closed | State::Dead) {
                break;
            }
            if self.state == State::Preamble {
                if !self.preamble() {
                    break;
                }
                continue;
            }
            let Some(&b) = self.text.as_bytes().get(self.pos) else {
                break;
            };
            let at = self.pos;
            self.pos += 1;
            self.state = match self.state {
                State::Key { first } => match b {
                    b if b.is_ascii_whitespace() => State::Key { first },
                    b'"' => State::InKey {
                        start: at,
                        escape: false,
                    },
                    b'}' if first => State::Closed,
                    _ => State::Dead,
                },
                State::InKey { start, escape } => match (escape, b) {
                    (true, _) => State::InKey {
                        start,
                        escape: false,
                    },
                    (false, b'\\') => State::InKey {
                        start,
                        escape: true,
                    },
                    (false, b'"') => {
                        match self
                            .text
                            .get(start..=at)
                            .and_then(|t| serde_json::from_str::<String>(t).ok())
                        {
                            Some(key) => {
                                self.key = Some(key);
                                State::Colon
                            }
                            None => State::Dead,
                        }
                    }
                    _ => State::InKey { start, escape },
                },
                State::Colon => match b {
                    b if b.is_ascii_whitespace() => State::Colon,
                    b':' => State::Value,
                    _ => State::Dead,
                },
                State::Value => match b {
                    b if b.is_ascii_whitespace() => State::Value,
                    b'"' => State::InString {
                        start: at,
                        escape: false,
                    },
                    b'{' | b'[' => State::InContainer {
                        start: at,
                        depth: 1,
                        in_string: false,
                        escape: false,
                        items: (b == b'[').then_some(Items {
                            index: 0,
                            start: None,
                            next: Next::First,
                        }),
                    },
                    b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => State::InScalar { start: at },
                    _ => State::Dead,
                },
                State::InString { start, escape } => match (escape, b) {
                    (true, _) => State::InString {
                        start,
                        escape: false,
                    },
                    (false, b'\\') => State::InString {
                        start,
                        escape: true,
                    },
                    (false, b'"') => self.close(start, at + 1, &mut out),
                    _ => State::InString { start, escape },
                },
                State::InContainer {
                    start,
                    depth,
                    in_string,
                    escape,
                    items,
                } => {
                    let (was_depth, was_in_string) = (depth, in_string);
                    let (depth, in_string, escape) = match (in_string, escape, b) {
                        (true, true, _) => (depth, true, false),
                        (true, false, b'\\') => (depth, true, true),
                        (true, false, b'"') => (depth, false, false),
                        (true, false, _) => (depth, true, false),
                        (false, _, b'"') => (depth, true, false),
                        (false, _, b'{' | b'[') => (depth + 1, false, false),
                        (false, _, b'}' | b']') => (depth - 1, false, false),
                        (false, _, _) => (depth, false, false),
                    };
                    let mut broken = false;
                    let items = items.map(|mut it| {
                        // Only what happens at the array's own level opens or closes an item;
                        // the separators are checked, so that no item of a broken array is
                        // handed out after the break.
                        let scalar = it.next == Next::In && was_depth == 1 && !was_in_string;
                        let mut closed_at = None;
                        if was_depth == 1 && !was_in_string {
                            match (b, it.next) {
                                (b' ' | b'\t' | b'\r' | b'\n', _) => {
                                    if scalar {
                                        closed_at = it.start.map(|s| (s, at));
                                    }
                                }
                                (b',', Next::In | Next::Sep) => {
                                    if scalar {
                                        closed_at = it.start.map(|s| (s, at));
                                    }
                                    it.next = Next::Item;
                                }
                                (b']', Next::In | Next::Sep | Next::First) => {
                                    if scalar {
                                        closed_at = it.start.map(|s| (s, at));
                                    }
                                }
                                (b',' | b']', _) => broken = true,
                                (_, Next::First | Next::Item) => {
                                    it.start = Some(at);
                                    it.next = Next::In;
                                }
                                (b'"' | b'{' | b'[', _) | (_, Next::Sep) => broken = true,
                                // The rest of a number or literal.
                                (_, Next::In) => {}
                            }
                        } else if (was_depth == 1 && was_in_string && !in_string)
                            || (was_depth == 2 && depth == 1 && !was_in_string)
                        {
                            // A string item at its closing quote, a container at its bracket.
                            closed_at = it.start.map(|s| (s, at + 1));
                        }
                        if let Some((s, e)) = closed_at {
                            it.start = None;
                            if it.next == Next::In {
                                it.next = Next::Sep;
                            }
                            broken |= !self.item(s, e, it.index, &mut out);
                            it.index += 1;
                        }
                        it
                    });
                    if broken {
                        State::Dead
                    } else if depth == 0 {
                        self.close(start, at + 1, &mut out)
                    } else {
                        State::InContainer {
                            start,
                            depth,
                            in_string,
                            escape,
                            items,
                        }
                    }
                }
                State::InScalar { start } => match b {
                    b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n' => {
                        // The terminator is read again as what follows the value.
                        self.pos = at;
                        self.close(start, at, &mut out)
                    }
                    _ => State::InScalar { start },
                },
                State::After => match b {
                    b if b.is_ascii_whitespace() => State::After,
                    b',' => State::Key { first: false },
                    b'}' => State::Closed,
                    _ => State::Dead,
                },
                s @ (State::Preamble | State::Closed | State::Dead) => s,
            };
        }
        out
    }

    /// The value `start..end` closed: parsed and handed out, or the scanner stops.
    fn close(&mut self, start: usize, end: usize, out: &mut Vec<Scanned>) -> State {
        let raw = self.text.get(start..end).unwrap_or_default();
        match (self.key.take(), serde_json::from_str::<Value>(raw).ok()) {
            (Some(key), Some(value)) => {
                out.push(Scanned::Member(Member {
                    key,
                    raw: raw.to_owned(),
                    value,
                }));
                State::After
            }
            _ => State::Dead,
        }
    }

    /// Item `index` of the current member, `start..end`, closed: handed out when it parses;
    /// `false` when it does not (the scanner then stops).
    fn item(&self, start: usize, end: usize, index: usize, out: &mut Vec<Scanned>) -> bool {
        let raw = self.text.get(start..end).unwrap_or_default();
        match (&self.key, serde_json::from_str::<Value>(raw)) {
            (Some(key), Ok(value)) => {
                out.push(Scanned::Item(Item {
                    key: key.clone(),
                    index,
                    raw: raw.to_owned(),
                    value,
                }));
                true
            }
            _ => false,
        }
    }

    /// Reads the preamble from `pos`; `false` when more text is needed.
    fn preamble(&mut self) -> bool {
        let rest = self.text.get(self.pos..).unwrap_or_default();
        let trimmed = rest.trim_start();
        let skipped = rest.len() - trimmed.len();
        if trimmed.is_empty() {
            self.pos += skipped;
            return false;
        }
        if trimmed.starts_with('{') {
            self.pos += skipped + 1;
            self.state = State::Key { first: true };
            return true;
        }
        for opening in ["<think>", "```"] {
            if trimmed.starts_with(opening) {
                let closing = if opening == "```" { "\n" } else { "</think>" };
                return match trimmed.get(opening.len()..).and_then(|t| t.find(closing)) {
                    Some(i) => {
                        self.pos += skipped + opening.len() + i + closing.len();
                        true
                    }
                    None => {
                        // Waits for the block's end; the opening must be whole first.
                        false
                    }
                };
            }
            if opening.starts_with(trimmed) {
                return false;
            }
        }
        self.state = State::Dead;
        false
    }
}

/// The JSON pointer of a top-level member (`~` and `/` escaped).
pub fn pointer(name: &str) -> String {
    format!("/{}", name.replace('~', "~0").replace('/', "~1"))
}

/// The root fields that are checked together: those tied by a cross-field rule or by a
/// grounding in another field (`grounded(in = quote)`, a span's lines). Each field's set, in
/// the contract's order of fields.
pub(crate) fn tied_fields(spec: &ContractSpec) -> Vec<(String, Vec<String>)> {
    let Some(object) = spec.object() else {
        return Vec::new();
    };
    let names: Vec<&str> = object.properties.iter().map(|f| f.name.as_str()).collect();
    let mut sets: Vec<Vec<usize>> = (0..names.len()).map(|i| vec![i]).collect();
    let mut links: Vec<Vec<usize>> = Vec::new();
    for rule in &object.rules {
        links.push(
            rule.fields()
                .iter()
                .filter_map(|f| names.iter().position(|n| n == f))
                .collect(),
        );
    }
    for (i, f) in object.properties.iter().enumerate() {
        if let Some(g) = &f.node.grounded {
            let mut link = vec![i];
            link.extend(
                g.depends_on()
                    .iter()
                    .filter_map(|d| names.iter().position(|n| n == d)),
            );
            links.push(link);
        }
    }
    // Joins linked sets until none changes (a handful of fields).
    let mut changed = true;
    while changed {
        changed = false;
        for link in &links {
            let mut joined: Vec<usize> = Vec::new();
            for &i in link {
                if let Some(s) = sets.get(i) {
                    joined.extend(s.iter().copied());
                }
            }
            joined.sort_unstable();
            joined.dedup();
            for &i in &joined {
                if let Some(s) = sets.get_mut(i) {
                    if *s != joined {
                        *s = joined.clone();
                        changed = true;
                    }
                }
            }
        }
    }
    names
        .iter()
        .zip(sets)
        .map(|(n, s)| {
            (
                (*n).to_owned(),
                s.iter()
                    .filter_map(|&i| names.get(i).map(|n| (*n).to_owned()))
                    .collect(),
            )
        })
        .collect()
}

/// The contract a list field's items are checked against, one at a time: the list field
/// (with the fields its grounding reads, such as `grounded(in = ..)`), the list's own length
/// and uniqueness left out, and no rule (a rule reads the whole list, checked when it closes).
/// `None` when `name` is not a list field.
fn item_contract(spec: &ContractSpec, name: &str) -> Option<(ContractSpec, Vec<String>)> {
    let field = spec.field(name)?;
    field.node.non_null().items()?;
    let deps: Vec<String> = field
        .node
        .grounded
        .as_ref()
        .map(|g| g.depends_on().into_iter().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut names: Vec<&str> = vec![name];
    names.extend(deps.iter().map(String::as_str));
    let mut part = spec.subset(&names);
    if let Some(object) = part.node.object.as_deref_mut() {
        object.rules.clear();
        for f in object.properties.iter_mut().filter(|f| f.name == name) {
            let unbound = |node: &mut crate::ir::Node| {
                if let Some(array) = node.array.as_deref_mut() {
                    array.min_items = None;
                    array.max_items = None;
                    array.unique_items = false;
                }
            };
            unbound(&mut f.node);
            f.node.any_of.iter_mut().flatten().for_each(unbound);
        }
    }
    Some((part, deps))
}

/// Hands `value`, the checked value of root field `name`, to `sink`: when the field is a list,
/// each item first (its pointer `/name/i`, [`FieldEvent::item`] set), then the whole list.
/// The paths that check a settled value whole (a chunked document's merged value, a group of
/// fields accepted) emit through this; the reply reader emits items as they close instead.
pub(crate) fn emit_field(
    sink: &Sink<'_>,
    spec: &ContractSpec,
    name: &str,
    value: Value,
    attempt: usize,
    group: Option<String>,
) {
    let is_list = spec
        .field(name)
        .is_some_and(|f| f.node.non_null().items().is_some());
    if let (true, Value::Array(items)) = (is_list, &value) {
        for (i, item) in items.iter().enumerate() {
            sink(FieldEvent {
                path: format!("{}/{i}", pointer(name)),
                value: item.clone(),
                attempt,
                group: group.clone(),
                item: Some(i),
            });
        }
    }
    sink(FieldEvent {
        path: pointer(name),
        value,
        attempt,
        group,
        item: None,
    });
}

/// A list field's item checks: its item contract and the fields its grounding reads.
struct ListCheck {
    name: String,
    part: ContractSpec,
    deps: Vec<String>,
}

/// Reads one reply as it arrives and emits its fields once closed and checked, and the items
/// of its list fields once each item is closed and checked.
pub(crate) struct FieldReader<'a> {
    scanner: MemberScanner,
    spec: &'a ContractSpec,
    ties: &'a [(String, Vec<String>)],
    grounds: Option<&'a Grounds<'a>>,
    lists: Vec<ListCheck>,
    /// Items closed before the fields their grounding reads, in order.
    pending: Vec<Item>,
    closed: Map<String, Value>,
    raws: Map<String, Value>,
    attempt: usize,
    group: Option<String>,
}

impl<'a> FieldReader<'a> {
    pub(crate) fn new(
        spec: &'a ContractSpec,
        ties: &'a [(String, Vec<String>)],
        grounds: Option<&'a Grounds<'a>>,
        attempt: usize,
        group: Option<String>,
    ) -> FieldReader<'a> {
        let lists = ties
            .iter()
            .filter_map(|(name, _)| {
                item_contract(spec, name).map(|(part, deps)| ListCheck {
                    name: name.clone(),
                    part,
                    deps,
                })
            })
            .collect();
        FieldReader {
            scanner: MemberScanner::new(),
            spec,
            ties,
            grounds,
            lists,
            pending: Vec::new(),
            closed: Map::new(),
            raws: Map::new(),
            attempt,
            group,
        }
    }

    /// Reads `piece`; the fields and list items it closed that pass their checks go to `sink`.
    pub(crate) fn push(&mut self, piece: &str, sink: &Sink<'_>) {
        for scanned in self.scanner.scan(piece) {
            match scanned {
                Scanned::Item(item) => {
                    self.pending.push(item);
                    self.flush_items(sink);
                }
                Scanned::Member(member) => self.member(member, sink),
            }
        }
    }

    /// Emits the pending items whose checks can run (the fields their grounding reads are
    /// closed), in order; an item that fails its checks is dropped.
    fn flush_items(&mut self, sink: &Sink<'_>) {
        let pending = std::mem::take(&mut self.pending);
        for item in pending {
            let Some(list) = self.lists.iter().find(|l| l.name == item.key) else {
                // Not a list field of the contract: its member's checks report it.
                continue;
            };
            if !list.deps.iter().all(|d| self.closed.contains_key(d)) {
                self.pending.push(item);
                continue;
            }
            let mut object = Map::new();
            let mut raw = String::from("{");
            raw.push_str(&Value::String(item.key.clone()).to_string());
            raw.push_str(":[");
            raw.push_str(&item.raw);
            raw.push(']');
            object.insert(item.key.clone(), Value::Array(vec![item.value.clone()]));
            for d in &list.deps {
                if let (Some(v), Some(Value::String(r))) = (self.closed.get(d), self.raws.get(d)) {
                    object.insert(d.clone(), v.clone());
                    raw.push(',');
                    raw.push_str(&Value::String(d.clone()).to_string());
                    raw.push(':');
                    raw.push_str(r);
                }
            }
            raw.push('}');
            let object = Value::Object(object);
            if self.check_part(&list.part, &object, &raw).is_empty() {
                sink(FieldEvent {
                    path: format!("{}/{}", pointer(&item.key), item.index),
                    value: item.value,
                    attempt: self.attempt,
                    group: self.group.clone(),
                    item: Some(item.index),
                });
            }
        }
    }

    /// `object` (the reply's text for it, `raw`) checked against `part`: its constraints and,
    /// grounding on, its grounding in the source.
    fn check_part(&self, part: &ContractSpec, object: &Value, raw: &str) -> Violations {
        let mut violations = Violations::new();
        check_value(part, object, "", &mut violations);
        if let Some(grounds) = self.grounds {
            violations
                .0
                .extend(check_reply(part, object, raw, grounds).0);
        }
        violations
    }

    /// A root member closed: its pending items may now be checked, then its set of tied
    /// fields, once all closed.
    fn member(&mut self, member: Member, sink: &Sink<'_>) {
        let Some((_, set)) = self.ties.iter().find(|(n, _)| *n == member.key) else {
            return;
        };
        self.closed.insert(member.key.clone(), member.value);
        self.raws.insert(member.key, Value::String(member.raw));
        if !self.pending.is_empty() {
            self.flush_items(sink);
        }
        if !set.iter().all(|n| self.closed.contains_key(n)) {
            return;
        }
        let names: Vec<&str> = set.iter().map(String::as_str).collect();
        let part = self.spec.subset(&names);
        let mut object = Map::new();
        let mut raw = String::from("{");
        for (i, n) in set.iter().enumerate() {
            let (Some(v), Some(Value::String(r))) = (self.closed.get(n), self.raws.get(n)) else {
                continue;
            };
            object.insert(n.clone(), v.clone());
            if i > 0 {
                raw.push(',');
            }
            raw.push_str(&Value::String(n.clone()).to_string());
            raw.push(':');
            raw.push_str(r);
        }
        raw.push('}');
        let object = Value::Object(object);
        let violations = self.check_part(&part, &object, &raw);
        if !violations.is_empty() {
            return;
        }
        if let Value::Object(map) = object {
            for (name, value) in map {
                sink(FieldEvent {
                    path: pointer(&name),
                    value,
                    attempt: self.attempt,
                    group: self.group.clone(),
                    item: None,
                });
            }
        }
    }
}

/// The queue between an extraction and its stream.
#[derive(Default)]
pub(crate) struct Shared {
    inner: Mutex<(VecDeque<FieldEvent>, Option<Waker>)>,
}

impl Shared {
    /// Queues an event and wakes the stream's task (the event may come from another thread,
    /// a local model's decode loop).
    pub(crate) fn push(&self, event: FieldEvent) {
        let waker = match self.inner.lock() {
            Ok(mut inner) => {
                inner.0.push_back(event);
                inner.1.take()
            }
            Err(_) => None,
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn pop(&self, waker: &Waker) -> Option<FieldEvent> {
        let mut inner = self.inner.lock().ok()?;
        let event = inner.0.pop_front();
        if event.is_none() {
            inner.1 = Some(waker.clone());
        }
        event
    }
}

/// A boxed extraction future.
type Running<'a, C> = Pin<Box<dyn std::future::Future<Output = Extraction<C>> + Send + 'a>>;

/// The stream [`Extractor::stream`](crate::extract::Extractor::stream) returns: it runs the
/// extraction as it is polled (nothing is spawned), so dropping it drops the extraction and
/// with it the backend's request.
pub struct ExtractionStream<'a, C> {
    running: Option<Running<'a, C>>,
    shared: Arc<Shared>,
    done: Option<Extraction<C>>,
}

impl<'a, C> ExtractionStream<'a, C> {
    pub(crate) fn new(running: Running<'a, C>, shared: Arc<Shared>) -> Self {
        ExtractionStream {
            running: Some(running),
            shared,
            done: None,
        }
    }
}

impl<C> Unpin for ExtractionStream<'_, C> {}

impl<C> futures_util::Stream for ExtractionStream<'_, C> {
    type Item = StreamEvent<C>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(event) = this.shared.pop(cx.waker()) {
            return Poll::Ready(Some(StreamEvent::Field(event)));
        }
        if let Some(running) = this.running.as_mut() {
            if let Poll::Ready(out) = running.as_mut().poll(cx) {
                this.running = None;
                this.done = Some(out);
            }
            if let Some(event) = this.shared.pop(cx.waker()) {
                return Poll::Ready(Some(StreamEvent::Field(event)));
            }
        }
        match this.done.take() {
            Some(out) => Poll::Ready(Some(StreamEvent::Done(out))),
            None if this.running.is_some() => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn members(pieces: &[&str]) -> (Vec<(String, Value)>, MemberScanner) {
        let mut s = MemberScanner::new();
        let mut out = Vec::new();
        for p in pieces {
            out.extend(s.push(p).into_iter().map(|m| (m.key, m.value)));
        }
        (out, s)
    }

    const REPLY: &str =
        r#"{"a": "x \"}\" y", "b": {"c": [1, "]"]}, "n": -1.5e3, "t": true, "z": null}"#;

    fn whole() -> Vec<(String, Value)> {
        let Value::Object(map) = serde_json::from_str::<Value>(REPLY).unwrap() else {
            panic!("an object")
        };
        map.into_iter().collect()
    }

    #[test]
    fn every_cut_gives_the_same_members() {
        let want = whole();
        for cut in 0..=REPLY.len() {
            let (a, b) = REPLY.split_at(cut);
            let (got, s) = members(&[a, "", b, ""]);
            assert_eq!(got, want, "cut at {cut}");
            assert!(s.is_closed());
        }
        let bytes: Vec<String> = REPLY.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(members(&pieces).0, want);
    }

    #[test]
    fn a_member_is_handed_out_only_once_closed() {
        let mut s = MemberScanner::new();
        assert!(s.push(r#"{"n": 12"#).is_empty(), "12 may go on");
        assert!(s.push(r#"3"#).is_empty());
        let m = s.push(",");
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].value, serde_json::json!(123));
        assert!(s.push(r#" "s": "ab"#).is_empty());
        assert!(
            s.push(r#"\""#).is_empty(),
            "an escaped quote does not close"
        );
        assert_eq!(s.push(r#"""#)[0].value, serde_json::json!("ab\""));
    }

    #[test]
    fn preambles_are_skipped_and_prose_stops_the_scanner() {
        let (got, _) = members(&[
            "<thi",
            "nk>{\"a\": 1}</think>\n```js",
            "on\n{\"a\": 2}\n```",
        ]);
        assert_eq!(got, vec![("a".to_owned(), serde_json::json!(2))]);
        let (got, s) = members(&["Sure! {\"a\": \"x\"}"]);
        assert!(got.is_empty());
        assert!(s.is_dead());
    }

    #[test]
    fn text_that_is_not_json_emits_nothing_more() {
        for bad in [
            r#"{"a": "x", "b": tru e, "c": 1}"#,
            r#"{"a": "x" "b": 1}"#,
            r#"{"a": [1}, "b": 1}"#,
            r#"{"a": 01, "b": 1}"#,
            r#"{a: 1, "b": 1}"#,
            r#"{"a": "x",, "b": 1}"#,
            r#"{"a": "x", }"#,
        ] {
            let (got, s) = members(&[bad]);
            assert!(got.iter().all(|(k, _)| k == "a"), "{bad}: {got:?}");
            assert!(s.is_dead(), "{bad}");
        }
    }

    #[test]
    fn a_duplicated_piece_never_panics_and_keeps_the_first_members() {
        let (a, b) = REPLY.split_at(20);
        let (got, _) = members(&[a, a, b]);
        // `{"a": "x \"}\" y", "{"a"...`: the duplicate breaks the object after `a`.
        assert_eq!(got.first().map(|(k, _)| k.as_str()), Some("a"));
        for cut in 0..REPLY.len() {
            let (a, b) = REPLY.split_at(cut);
            let _ = members(&[a, b, b, a, "\u{00e9}", "}"]);
        }
    }

    const LISTS: &str = r#"{"xs": [ {"a": "]}", "b": [1, {"c": "\"["}]}, "s\"]" ,-1.5e3 , true,null, [] ,{}], "e": [], "n": 2}"#;

    /// The items and members `pieces` closed, in order (`key` for a member, `key/index` for an
    /// item).
    fn scanned(pieces: &[&str]) -> Vec<(String, Value)> {
        let mut s = MemberScanner::new();
        let mut out = Vec::new();
        for p in pieces {
            out.extend(s.scan(p).into_iter().map(|x| match x {
                Scanned::Item(i) => (format!("{}/{}", i.key, i.index), i.value),
                Scanned::Member(m) => (m.key, m.value),
            }));
        }
        out
    }

    #[test]
    fn array_items_are_handed_out_in_order_before_their_member_at_every_cut() {
        let whole: Value = serde_json::from_str(LISTS).unwrap();
        let mut want: Vec<(String, Value)> = whole["xs"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("xs/{i}"), v.clone()))
            .collect();
        want.push(("xs".into(), whole["xs"].clone()));
        want.push(("e".into(), json!([])));
        want.push(("n".into(), json!(2)));
        for cut in 0..=LISTS.len() {
            let (a, b) = LISTS.split_at(cut);
            assert_eq!(scanned(&[a, "", b]), want, "cut at {cut}");
        }
        let bytes: Vec<String> = LISTS.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(scanned(&pieces), want);
        // `push` hands out the members alone, as before.
        let mut s = MemberScanner::new();
        let keys: Vec<String> = s.push(LISTS).into_iter().map(|m| m.key).collect();
        assert_eq!(keys, ["xs", "e", "n"]);
    }

    #[test]
    fn an_item_is_handed_out_only_once_closed() {
        let mut s = MemberScanner::new();
        assert!(s.scan(r#"{"xs": [{"a": 1"#).is_empty());
        assert!(
            s.scan(r#"}"#).len() == 1,
            "the object item closes at its brace"
        );
        assert!(s.scan(r#", 12"#).is_empty(), "12 may go on");
        let got = s.scan(r#"3]"#);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(matches!(&got[0], Scanned::Item(i) if i.index == 1 && i.value == json!(123)));
        assert!(matches!(&got[1], Scanned::Member(m) if m.key == "xs"));
        // Items of nested arrays are the top-level item's own business.
        let got = scanned(&[r#"{"o": {"xs": [1, 2]}, "ys": [[1, 2], [3]]}"#]);
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["o", "ys/0", "ys/1", "ys"]);
    }

    #[test]
    fn no_item_is_handed_out_after_an_array_breaks() {
        for bad in [
            r#"{"xs": [{"a": 1}, tru e, {"b": 2}], "n": 1}"#,
            r#"{"xs": [{"a": 1} {"b": 2}], "n": 1}"#,
            r#"{"xs": [{"a": 1}, , {"b": 2}], "n": 1}"#,
            r#"{"xs": [{"a": 1}, 1"y", {"b": 2}], "n": 1}"#,
            r#"{"xs": [{"a": 1}, 01, {"b": 2}], "n": 1}"#,
        ] {
            let mut s = MemberScanner::new();
            let got: Vec<String> = s
                .scan(bad)
                .into_iter()
                .map(|x| match x {
                    Scanned::Item(i) => format!("{}/{}", i.key, i.index),
                    Scanned::Member(m) => m.key,
                })
                .collect();
            assert_eq!(got, ["xs/0"], "{bad}");
            assert!(s.is_dead(), "{bad}");
        }
        // The items closed before the break were whole when they closed; none after it.
        for bad in [
            r#"{"xs": [1, 2,], "n": 1}"#,
            r#"{"xs": [1, 2 3, 4], "n": 1}"#,
            r#"{"xs": [1, "x" "y", 4], "n": 1}"#,
        ] {
            let mut s = MemberScanner::new();
            let got = s.scan(bad);
            assert_eq!(got.len(), 2, "{bad}: {got:?}");
            assert!(got.iter().all(|x| matches!(x, Scanned::Item(_))), "{bad}");
            assert!(s.is_dead(), "{bad}");
        }
    }

    #[test]
    fn pointers_escape() {
        assert_eq!(pointer("a/b~c"), "/a~1b~0c");
    }
}
