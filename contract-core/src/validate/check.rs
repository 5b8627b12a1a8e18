//! Checking JSON values against the IR.
//!
//! One walk over the value reports every violation in document order: unknown keys and field
//! values as they come, then missing fields, then the object's cross-field rules. JSON pointers
//! and messages are built only when a violation is pushed, so a valid document costs no
//! allocation beyond its parse.

use std::cmp::Ordering;
use std::fmt::{self, Display, Write as _};

use serde_json::{Number, Value};
use smallvec::SmallVec;

use super::doc::{Json, JsonMap, View};
use super::format::format_ok;
use super::violation::{push_segment, Violation, ViolationKind, Violations};
use crate::context::DocContext;
use crate::contract::{Contract, ContractSpec, Format, Rule};
use crate::ir::{JsonType, Node, NumberKeywords, ObjectNode};

/// A message written piece by piece with `push_str`, for the messages refused model output
/// gets most (bounds, types, unknown, missing and repeated keys, a comparison rule).
/// `message!` runs `core::fmt::write` over a template, which costs more than the pieces: with
/// these, `from_json` on the bench's out-of-range documents runs 10% fewer instructions
/// (callgrind, 442.9 to 399.6 million, 2026-12-04).
struct Text(String);

impl Text {
    fn new() -> Text {
        Text(String::with_capacity(96))
    }

    #[inline]
    fn s(mut self, piece: &str) -> Text {
        self.0.push_str(piece);
        self
    }

    /// The path's [`Path::label`].
    #[inline]
    fn label(mut self, path: &Path<'_>) -> Text {
        // Writing to a `String` cannot fail.
        let _ = path.write_label(&mut self.0);
        self
    }

    /// A JSON number as serde_json displays it ([`write_number`]).
    #[inline]
    fn number(mut self, value: &Number) -> Text {
        // Writing to a `String` cannot fail.
        let _ = write_number(&mut self.0, value);
        self
    }

    /// An integer bound.
    #[inline]
    fn int(mut self, value: i128) -> Text {
        self.0.push_str(itoa::Buffer::new().format(value));
        self
    }

    /// [`write_value`] of `value`.
    #[inline]
    fn value<J: Json>(mut self, value: &J, as_scalar: bool) -> Text {
        let _ = write_value(&mut self.0, value, as_scalar);
        self
    }

    /// Names as [`list_names`] writes them.
    fn names<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Text {
        push_names(&mut self.0, names);
        self
    }

    fn done(self) -> String {
        self.0
    }
}

pub(super) fn has_field_level(out: &Violations) -> bool {
    out.iter().any(|v| v.kind.is_field_level())
}

/// Normalises a decoded value and runs its custom checks (against `cx`'s document), or reports
/// why it did not decode. A value that cannot be normalised is not checked further.
pub(super) fn finish<C: Contract, E: Display>(
    decoded: Result<C, E>,
    mut out: Violations,
    cx: &DocContext<'_>,
) -> Result<C, Violations> {
    match decoded {
        Ok(mut typed) => {
            let before = out.len();
            typed.normalize(cx, "", &mut out);
            if out.len() == before {
                typed.run_checks(cx, "", &mut out);
            }
            if out.is_empty() {
                Ok(typed)
            } else {
                Err(out)
            }
        }
        Err(e) => {
            out.push(Violation::new(
                "",
                ViolationKind::TypeMismatch,
                message!("the value does not deserialize: {e}"),
            ));
            Err(out)
        }
    }
}

/// Where a value sits, kept on the stack; turned into a JSON pointer or a display name only
/// when a violation is reported.
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
    /// The checked value: its pointer and the contract's name.
    Root(&'a str, &'a str),
    /// A key of an object.
    Key(&'a Path<'a>, &'a str),
    /// An item of an array.
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn pointer(&self) -> String {
        // Room for most pointers, so that the pushes do not grow it.
        let mut out = String::with_capacity(32);
        self.write_pointer(&mut out);
        out
    }

    /// [`Path::pointer`], pushed onto `out`.
    fn write_pointer(&self, out: &mut String) {
        match self {
            Path::Root(pointer, _) => out.push_str(pointer),
            Path::Key(parent, key) => {
                parent.write_pointer(out);
                push_segment(out, key);
            }
            Path::Index(parent, i) => {
                parent.write_pointer(out);
                // Writing to a `String` cannot fail.
                let _ = write!(out, "/{i}");
            }
        }
    }

    /// The name messages use: `low`, `items[2]`, or the contract's name for the root.
    fn label(&self) -> Label<'_> {
        Label(self)
    }

    /// [`Path::label`], written into `out`.
    fn write_label(&self, out: &mut impl fmt::Write) -> fmt::Result {
        match self {
            Path::Root(_, name) => out.write_str(name),
            Path::Key(_, key) => out.write_str(key),
            Path::Index(parent, i) => {
                parent.write_label(out)?;
                write!(out, "[{i}]")
            }
        }
    }
}

/// [`Path::label`], written straight into a message.
struct Label<'p>(&'p Path<'p>);

impl fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_label(f)
    }
}

/// A JSON number, compared exactly with any other.
#[derive(Clone, Copy, Debug)]
pub(super) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    // `#[inline]` on these: the checker is generic, so it is compiled in the caller's crate, where
    // small functions of this one are inlined only when marked.
    #[inline]
    pub(super) fn of(n: &Number) -> Num {
        if let Some(i) = n.as_i64() {
            Num::Int(i128::from(i))
        } else if let Some(u) = n.as_u64() {
            Num::Int(i128::from(u))
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    /// Exact comparison; `None` only for NaN, which JSON cannot hold.
    #[inline]
    pub(super) fn cmp(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
            (Num::Int(a), Num::Float(b)) => cmp_int_float(a, b),
            (Num::Float(a), Num::Int(b)) => cmp_int_float(b, a).map(Ordering::reverse),
        }
    }

    /// Whether the number has no fraction (`3`, `3.0`, `1e30`).
    #[inline]
    pub(super) fn is_integral(self) -> bool {
        match self {
            Num::Int(_) => true,
            Num::Float(f) => f.fract() == 0.0,
        }
    }
}

/// Compares an integer with a float without rounding either.
#[inline]
fn cmp_int_float(i: i128, f: f64) -> Option<Ordering> {
    // 2^53: every integer up to it in magnitude is a float, so comparing as floats is exact.
    const EXACT: i64 = 1 << 53;
    match i64::try_from(i) {
        Ok(small) if (-EXACT..=EXACT).contains(&small) => (small as f64).partial_cmp(&f),
        _ => cmp_wide_int_float(i, f),
    }
}

/// [`cmp_int_float`] past 2^53. Kept out of line: inlined, its `floor` (a libm call on baseline
/// x86-64) and i128 conversion were computed on every comparison, then thrown away.
#[cold]
#[inline(never)]
fn cmp_wide_int_float(i: i128, f: f64) -> Option<Ordering> {
    // 2^127: every float below it (and at or above its negation) converts to i128 exactly
    // once its fraction is dropped.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f.is_nan() {
        return None;
    }
    if f >= LIMIT {
        return Some(Ordering::Less);
    }
    if f < -LIMIT {
        return Some(Ordering::Greater);
    }
    let floor = f.floor();
    Some(match i.cmp(&(floor as i128)) {
        Ordering::Equal if f > floor => Ordering::Less,
        other => other,
    })
}

/// A scalar as JSON text, long strings cut, written straight into a message.
fn scalar<J: Json>(value: &J) -> Describe<'_, J> {
    Describe(value, true)
}

/// [`write_value`] as `Display`.
struct Describe<'v, J>(&'v J, bool);

impl<J: Json> fmt::Display for Describe<'_, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_value(f, self.0, self.1)
    }
}

/// A value for a message: with `as_scalar`, a scalar as JSON text (long strings cut); without,
/// a short description (`a string ("..")`, `an array`).
fn write_value<J: Json>(out: &mut impl fmt::Write, value: &J, as_scalar: bool) -> fmt::Result {
    match value.view() {
        View::Null => out.write_str("null"),
        View::Bool(b) => out.write_str(if b { "true" } else { "false" }),
        View::Number(n) => write_number(out, n),
        View::String(s) if as_scalar => write_quoted(out, s),
        View::String(s) => {
            out.write_str("a string (")?;
            write_quoted(out, s)?;
            out.write_str(")")
        }
        View::Array(_) => out.write_str("an array"),
        View::Object(_) => out.write_str("an object"),
    }
}

/// `n` as serde_json's `Display` writes it (and so `Value::to_string`): an integer through
/// itoa, a float through zmij's shortest round-trip form, the two calls serde_json's own
/// `Display for Number` makes. Why not `write!(out, "{n}")` (the rules ask for a measured
/// reason): an out-of-range message shows two numbers, and `core::fmt`'s machinery around
/// serde_json's `Display` took about 270 of the 3,102 instructions `from_json` ran on an
/// out-of-range bench document; written so, 2,930 (callgrind, 2026-12-05). A test holds the two
/// to the same text for any integer and float.
fn write_number(out: &mut impl fmt::Write, n: &Number) -> fmt::Result {
    if let Some(u) = n.as_u64() {
        out.write_str(itoa::Buffer::new().format(u))
    } else if let Some(i) = n.as_i64() {
        out.write_str(itoa::Buffer::new().format(i))
    } else if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
        out.write_str(zmij::Buffer::new().format_finite(f))
    } else {
        // Not reached without serde_json's `arbitrary_precision` (a `Number` is an integer or
        // a finite float); its own `Display` then.
        write!(out, "{n}")
    }
}

/// How many characters of a string a message quotes before cutting it (with `…`).
const QUOTED_MAX: usize = 60;

/// `s` as a JSON string (as `Value::String` writes it), cut after [`QUOTED_MAX`] characters.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(4 * QUOTED_MAX) + 8);
    // Writing to a `String` cannot fail.
    let _ = write_quoted(&mut out, s);
    out
}

/// [`quoted`], written into `out`. A string with nothing to escape (no quote, backslash or
/// control character: the only characters serde_json escapes) is written between quotes as it
/// is, the text serde_json gives it, without building a `String` first; any other goes through
/// serde_json. Measured reason: on the bench's type-mismatch documents (a string for a number)
/// `from_json` ran 3,299 instructions a document, 2,844 so (callgrind, 2026-12-05, with
/// [`write_number`]). A test holds it to serde_json's text of any string.
fn write_quoted(out: &mut impl fmt::Write, s: &str) -> fmt::Result {
    let (s, cut) = match s.char_indices().nth(QUOTED_MAX) {
        Some((at, _)) => (&s[..at], true),
        None => (s, false),
    };
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // A string always serializes.
        out.write_str(&serde_json::to_string(s).unwrap_or_default())?;
    } else {
        out.write_char('"')?;
        out.write_str(s)?;
        out.write_char('"')?;
    }
    if cut {
        out.write_char('…')?;
    }
    Ok(())
}

/// `one_of` values as the message lists them: strings bare, others as JSON, in backticks.
fn list_values(values: &[Value]) -> String {
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        // Writing to a `String` cannot fail.
        let _ = match v {
            Value::String(s) => write!(out, "{sep}`{s}`"),
            other => write!(out, "{sep}`{other}`"),
        };
    }
    out
}

fn list_names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    push_names(&mut out, names);
    out
}

/// [`list_names`], pushed onto `out`.
fn push_names<'a>(out: &mut String, names: impl IntoIterator<Item = &'a str>) {
    for (i, name) in names.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('`');
        out.push_str(name);
        out.push('`');
    }
}

/// The Rust integer type with these bounds, for messages.
fn integer_type_name(min: i128, max: i128) -> Option<&'static str> {
    Some(match (min, max) {
        (-128, 127) => "i8",
        (-32_768, 32_767) => "i16",
        (-2_147_483_648, 2_147_483_647) => "i32",
        (-9_223_372_036_854_775_808, 9_223_372_036_854_775_807) => "i64",
        (0, 255) => "u8",
        (0, 65_535) => "u16",
        (0, 4_294_967_295) => "u32",
        (0, 18_446_744_073_709_551_615) => "u64",
        _ => return None,
    })
}

/// Which fields of an object were seen, without allocating for up to 64 fields.
pub(super) enum Seen {
    Small(u64),
    Large(Vec<bool>),
}

impl Seen {
    pub(super) fn new(len: usize) -> Seen {
        if len <= 64 {
            Seen::Small(0)
        } else {
            Seen::Large(vec![false; len])
        }
    }

    /// Marks field `i`; false when it was already seen (a repeated key).
    pub(super) fn set(&mut self, i: usize) -> bool {
        match self {
            Seen::Small(bits) => {
                let fresh = *bits & (1 << i) == 0;
                *bits |= 1 << i;
                fresh
            }
            Seen::Large(flags) => !std::mem::replace(&mut flags[i], true),
        }
    }

    pub(super) fn get(&self, i: usize) -> bool {
        match self {
            Seen::Small(bits) => bits & (1 << i) != 0,
            Seen::Large(flags) => flags[i],
        }
    }
}

pub(super) struct Checker<'o> {
    out: &'o mut Violations,
    /// Checking a serialized typed value: keys of skipped fields are expected.
    typed: bool,
    /// An integer field holds a float with a zero fraction.
    pub(super) normalise: bool,
}

impl<'o> Checker<'o> {
    pub(super) fn new(out: &'o mut Violations, typed: bool) -> Self {
        Checker {
            out,
            typed,
            normalise: false,
        }
    }

    fn push(&mut self, path: &Path<'_>, kind: ViolationKind, message: String) {
        self.out.push(Violation::new(path.pointer(), kind, message));
    }

    fn mismatch<J: Json>(&mut self, path: &Path<'_>, expected: &str, nullable: bool, value: &J) {
        let or_null = if nullable { " or null" } else { "" };
        let message = Text::new()
            .s("`")
            .label(path)
            .s("` must be ")
            .s(expected)
            .s(or_null)
            .s(", got ")
            .value(value, false)
            .done();
        self.push(path, ViolationKind::TypeMismatch, message);
    }

    pub(super) fn check_root<J: Json>(&mut self, spec: &ContractSpec, value: &J) {
        self.check_contract(spec, value, &Path::Root("", &spec.name), false);
    }

    pub(super) fn check_contract<J: Json>(
        &mut self,
        spec: &ContractSpec,
        value: &J,
        path: &Path<'_>,
        nullable: bool,
    ) {
        match (spec.object(), value.view()) {
            (Some(object), View::Object(map)) => self.check_object::<J>(object, map, path),
            (Some(_), _) => self.mismatch(path, "an object", nullable, value),
            (None, View::String(s)) => {
                let variants = spec.variants().unwrap_or_default();
                if !variants.iter().any(|v| v.as_str() == Some(s)) {
                    let message = message!(
                        "`{}` must be one of {}, got {}",
                        path.label(),
                        list_names(variants.iter().filter_map(Value::as_str)),
                        quoted(s)
                    );
                    self.push(path, ViolationKind::EnumMismatch, message);
                }
            }
            (None, _) => self.mismatch(path, "a string", nullable, value),
        }
    }

    fn check_object<J: Json>(&mut self, object: &ObjectNode, map: &J::Map, path: &Path<'_>) {
        let fields = &object.properties;
        let mut seen = Seen::new(fields.len());
        for (key, value) in map.entries() {
            let field = fields.iter().position(|f| f.name == key);
            self.check_entry(object, &mut seen, field, key, value, path);
        }
        self.report_missing(object, &seen, path);
        for rule in &object.rules {
            self.check_rule::<J>(object, map, rule, path);
        }
    }

    /// One entry of an object, in document order: `field` is the index of the field its key
    /// names; a field met twice is `extra_field`.
    pub(super) fn check_entry<J: Json>(
        &mut self,
        object: &ObjectNode,
        seen: &mut Seen,
        field: Option<usize>,
        key: &str,
        value: &J,
        path: &Path<'_>,
    ) {
        let child = Path::Key(path, key);
        match field {
            Some(i) if seen.set(i) => {
                self.check_node(&object.properties[i].node, value, &child, false);
            }
            Some(_) => {
                let message = Text::new()
                    .s("field `")
                    .s(key)
                    .s("` is given more than once")
                    .done();
                self.push(&child, ViolationKind::ExtraField, message);
            }
            None => {
                let skipped = object.skipped.iter().any(|s| s == key);
                if skipped && self.typed {
                    return;
                }
                let message = if skipped {
                    message!("unknown field `{key}`: it is filled in by code, not given")
                } else {
                    Text::new()
                        .s("unknown field `")
                        .s(key)
                        .s("`, expected one of ")
                        .names(object.properties.iter().map(|f| f.name.as_str()))
                        .done()
                };
                self.push(&child, ViolationKind::ExtraField, message);
            }
        }
    }

    /// A `missing_field` for every field of `object` not in `seen`.
    pub(super) fn report_missing(&mut self, object: &ObjectNode, seen: &Seen, path: &Path<'_>) {
        for (i, field) in object.properties.iter().enumerate() {
            if !seen.get(i) {
                let hint = if field.node.is_nullable() {
                    " (give null when there is no value)"
                } else {
                    ""
                };
                let message = Text::new()
                    .s("missing field `")
                    .s(&field.name)
                    .s("`")
                    .s(hint)
                    .done();
                self.push(
                    &Path::Key(path, &field.name),
                    ViolationKind::MissingField,
                    message,
                );
            }
        }
    }

    /// Checks `value` against a derived value node; `nullable`: the node was reached through
    /// a nullable wrapper (for messages).
    fn check_node<J: Json>(&mut self, node: &Node, value: &J, path: &Path<'_>, nullable: bool) {
        let nullable = nullable || node.is_nullable();
        if nullable && matches!(value.view(), View::Null) {
            return;
        }
        let inner = node.non_null();
        if !std::ptr::eq(inner, node) {
            return self.check_node(inner, value, path, true);
        }
        if node.external.is_some() {
            return;
        }
        if let Some(spec) = node.contract() {
            return self.check_contract(spec, value, path, nullable);
        }
        let Some(ty) = node.value_types().next() else {
            return;
        };
        match (ty, value.view()) {
            (JsonType::Boolean, View::Bool(_)) => self.check_one_of(node, value, path),
            (JsonType::Boolean, _) => self.mismatch(path, "a boolean", nullable, value),
            (JsonType::Integer, View::Number(n)) if Num::of(n).is_integral() => {
                let num = Num::of(n);
                if let Num::Float(_) = num {
                    self.normalise = true;
                }
                self.check_bounds(num, &node.number, n, path);
                self.check_one_of(node, value, path);
            }
            (JsonType::Integer, _) => self.mismatch(path, "an integer", nullable, value),
            (JsonType::Number, View::Number(n)) => {
                self.check_bounds(Num::of(n), &node.number, n, path);
                self.check_one_of(node, value, path);
            }
            (JsonType::Number, _) => self.mismatch(path, "a number", nullable, value),
            (JsonType::String, View::String(s)) => self.check_string(node, s, value, path),
            (JsonType::String, _) => self.mismatch(path, "a string", nullable, value),
            (JsonType::Array, View::Array(items)) => {
                let array = node.array.as_deref();
                if let Some(a) = array {
                    self.check_len(a.min_items, a.max_items, items.len() as u64, "items", path);
                }
                if let Some(item_node) = array.and_then(|a| a.items.as_ref()) {
                    for (i, item) in items.iter().enumerate() {
                        self.check_node(item_node, item, &Path::Index(path, i), false);
                    }
                }
            }
            (JsonType::Array, _) => self.mismatch(path, "an array", nullable, value),
            (JsonType::Null | JsonType::Object, _) => {}
        }
    }

    fn check_bounds(&mut self, num: Num, n: &NumberKeywords, value: &Number, path: &Path<'_>) {
        let Some(broken) = broken_bound(num, n) else {
            return;
        };
        let text = Text::new()
            .s("`")
            .label(path)
            .s("` (")
            .number(value)
            .s(") must be ");
        let message = match broken {
            Broken::Type { op, bound, which } => {
                let text = text.s(op).s(" ").int(bound);
                match integer_type_name(which.0, which.1) {
                    Some(name) => text.s(", the ").s(which.2).s(" `").s(name).s("`"),
                    None => text,
                }
            }
            Broken::Keyword { op, bound } => text.s(op).s(" ").number(bound),
        };
        self.push(path, ViolationKind::OutOfRange, message.done());
    }

    fn check_len(
        &mut self,
        min: Option<u64>,
        max: Option<u64>,
        len: u64,
        unit: &str,
        path: &Path<'_>,
    ) {
        let (least, bound) = match (min, max) {
            (Some(min), _) if len < min => (true, min),
            (_, Some(max)) if len > max => (false, max),
            _ => return,
        };
        let which = if least { "at least" } else { "at most" };
        let message = message!(
            "`{}` must have {which} {bound} {unit}, has {len}",
            path.label()
        );
        self.push(path, ViolationKind::Length, message);
    }

    fn check_string<J: Json>(&mut self, node: &Node, s: &str, value: &J, path: &Path<'_>) {
        let k = &node.string;
        if k.min_length.is_some() || k.max_length.is_some() {
            let len = s.chars().count() as u64;
            self.check_len(k.min_length, k.max_length, len, "characters", path);
        }
        if let Some(pattern) = &k.pattern {
            if !pattern.is_match(s) {
                let message = message!(
                    "`{}` ({}) must match the pattern `{}`",
                    path.label(),
                    quoted(s),
                    pattern.as_str()
                );
                self.push(path, ViolationKind::PatternMismatch, message);
            }
        }
        if let Some(format) = k.format.as_deref().and_then(Format::from_name) {
            if !format_ok(format, s) {
                let message = message!(
                    "`{}` ({}) is not a valid `{}`",
                    path.label(),
                    quoted(s),
                    format.as_str()
                );
                self.push(path, ViolationKind::FormatMismatch, message);
            }
        }
        self.check_one_of(node, value, path);
    }

    /// `enum`, for a value that is not `null` (a nullable field's `null` was accepted before).
    fn check_one_of<J: Json>(&mut self, node: &Node, value: &J, path: &Path<'_>) {
        let Some(allowed) = &node.enumeration else {
            return;
        };
        if !allowed.iter().any(|a| json_eq(a, value)) {
            let shown: Vec<Value> = allowed.iter().filter(|v| !v.is_null()).cloned().collect();
            let message = message!(
                "`{}` ({}) must be one of {}",
                path.label(),
                scalar(value),
                list_values(&shown)
            );
            self.push(path, ViolationKind::EnumMismatch, message);
        }
    }

    /// Rules are skipped when one of their fields is missing (already a `missing_field`);
    /// a comparison also when a side is null or not of its field's type.
    pub(super) fn check_rule<J: Json>(
        &mut self,
        object: &ObjectNode,
        map: &J::Map,
        rule: &Rule,
        path: &Path<'_>,
    ) {
        let of_its_type = |name: &str, v: &J| {
            object
                .field(name)
                .is_some_and(|f| fits(f.node.non_null(), v))
        };
        for (key, message) in rule_violations(rule, map, of_its_type) {
            match key {
                Some(key) => self.push(&Path::Key(path, key), ViolationKind::CrossField, message),
                None => self.push(path, ViolationKind::CrossField, message),
            }
        }
    }
}

/// The bound a number breaks: its Rust integer type's (`which`: the type's min, max, and
/// `smallest`/`largest`), or a `minimum`/`maximum`/`exclusive*` keyword's.
enum Broken<'n> {
    Type {
        op: &'static str,
        bound: i128,
        which: (i128, i128, &'static str),
    },
    Keyword {
        op: &'static str,
        bound: &'n Number,
    },
}

/// The first bound of `n` that `num` breaks, in the order messages report them: the integer
/// type's range, then `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`.
#[inline]
fn broken_bound(num: Num, n: &NumberKeywords) -> Option<Broken<'_>> {
    if let Some((min, max)) = n.integer_type {
        if num.cmp(Num::Int(min)) == Some(Ordering::Less) {
            return Some(Broken::Type {
                op: ">=",
                bound: min,
                which: (min, max, "smallest"),
            });
        }
        if num.cmp(Num::Int(max)) == Some(Ordering::Greater) {
            return Some(Broken::Type {
                op: "<=",
                bound: max,
                which: (min, max, "largest"),
            });
        }
    }
    let bounds = [
        (&n.minimum, ">=", Ordering::Less, true),
        (&n.maximum, "<=", Ordering::Greater, true),
        (&n.exclusive_minimum, ">", Ordering::Less, false),
        (&n.exclusive_maximum, "<", Ordering::Greater, false),
    ];
    for (bound, op, bad, inclusive) in bounds {
        let Some(bound) = bound else { continue };
        let Some(ord) = num.cmp(Num::of(bound)) else {
            continue;
        };
        if ord == bad || (!inclusive && ord == Ordering::Equal) {
            return Some(Broken::Keyword { op, bound });
        }
    }
    None
}

/// One rule's violations on an object's entries `map`: the key each is reported at (`None`: the
/// object itself) and its message. This is the one rule checker, for derived contracts and for
/// runtime ones (`x-rules`). A rule holds when one of its fields is missing (a `missing_field`
/// reports that); a comparison holds when a side is null or `comparable` says a side cannot be
/// compared (not of its field's type). Numbers compare exactly: an integer with a float without
/// rounding either.
pub(crate) fn rule_violations<'r, J: Json>(
    rule: &'r Rule,
    map: &J::Map,
    comparable: impl Fn(&str, &J) -> bool,
) -> SmallVec<[(Option<&'r str>, String); 2]> {
    let is_null = |v: &J| matches!(v.view(), View::Null);
    // Inline: most rules break once (a comparison) or twice, and the list is read at once.
    let mut out = SmallVec::new();
    match rule {
        Rule::Compare { left, op, right } => {
            let (Some(l), Some(r)) = (map.get(left), map.get(right)) else {
                return out;
            };
            if is_null(l) || is_null(r) || !comparable(left, l) || !comparable(right, r) {
                return out;
            }
            let Some(ord) = compare(l, r) else {
                return out;
            };
            if !op.holds(ord) {
                let message = Text::new()
                    .s("`")
                    .s(left)
                    .s("` (")
                    .value(l, true)
                    .s(") must be ")
                    .s(op.as_str())
                    .s(" `")
                    .s(right)
                    .s("` (")
                    .value(r, true)
                    .s(")")
                    .done();
                out.push((Some(right.as_str()), message));
            }
        }
        Rule::BothOrNeither(names) => {
            let mut nulls = 0;
            for name in names {
                match map.get(name) {
                    None => return out,
                    Some(v) if is_null(v) => nulls += 1,
                    Some(_) => {}
                }
            }
            if nulls == 0 || nulls == names.len() {
                return out;
            }
            let given = names
                .iter()
                .filter(|n| map.get(n).is_some_and(|v| !is_null(v)))
                .map(String::as_str);
            let verb = if names.len() - nulls == 1 {
                " is not: "
            } else {
                " are not: "
            };
            for name in names {
                if map.get(name).is_some_and(is_null) {
                    let text = Text::new()
                        .s("`")
                        .s(name)
                        .s("` is null but ")
                        .names(given.clone())
                        .s(verb);
                    let text = if names.len() == 2 {
                        text.s("give both or neither")
                    } else {
                        text.s("give all of ")
                            .names(names.iter().map(String::as_str))
                            .s(" or none")
                    };
                    out.push((Some(name.as_str()), text.done()));
                }
            }
        }
        Rule::AtLeastOne(names) => {
            let mut all_null = true;
            for name in names {
                match map.get(name) {
                    None => return out,
                    Some(v) => all_null &= is_null(v),
                }
            }
            if all_null {
                let message = if names.len() == 1 {
                    message!("`{}` must not be null", names[0])
                } else {
                    message!(
                        "at least one of {} must be given (not null)",
                        list_names(names.iter().map(String::as_str))
                    )
                };
                out.push((None, message));
            }
        }
    }
    out
}

/// Whether `value` has the JSON type of scalar node `node` (a derived field's, `null` peeled).
fn fits<J: Json>(node: &Node, value: &J) -> bool {
    if node.reference.is_some() || node.external.is_some() {
        return false;
    }
    match (node.value_types().next(), value.view()) {
        (Some(JsonType::Integer), View::Number(n)) => Num::of(n).is_integral(),
        (Some(JsonType::Number), View::Number(_))
        | (Some(JsonType::String), View::String(_))
        | (Some(JsonType::Boolean), View::Bool(_)) => true,
        _ => false,
    }
}

/// Numbers exactly, strings lexicographically, booleans `false < true`.
pub(super) fn compare<J: Json>(l: &J, r: &J) -> Option<Ordering> {
    match (l.view(), r.view()) {
        (View::Number(a), View::Number(b)) => Num::of(a).cmp(Num::of(b)),
        (View::String(a), View::String(b)) => Some(a.cmp(b)),
        (View::Bool(a), View::Bool(b)) => Some(a.cmp(&b)),
        _ => None,
    }
}

/// Whether scalar `value` equals `allowed`, numbers compared by value (`1 == 1.0`) as in JSON
/// Schema's `enum`.
fn json_eq<J: Json>(allowed: &Value, value: &J) -> bool {
    match (allowed, value.view()) {
        (Value::Number(x), View::Number(y)) => Num::of(x).cmp(Num::of(y)) == Some(Ordering::Equal),
        (Value::String(x), View::String(y)) => x == y,
        (Value::Bool(x), View::Bool(y)) => *x == y,
        (Value::Null, View::Null) => true,
        _ => false,
    }
}

/// The integer a float with a zero fraction stands for, when it fits `i64` or `u64`.
pub(super) fn as_integer(n: &Number) -> Option<Number> {
    // 2^63 and 2^64: the first floats past i64 and u64.
    const I64_END: f64 = 9_223_372_036_854_775_808.0;
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    let f = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0)?;
    if (-I64_END..I64_END).contains(&f) {
        Some(Number::from(f as i64))
    } else if (0.0..U64_END).contains(&f) {
        Some(Number::from(f as u64))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::OnceLock;

    use proptest::strategy::Strategy;
    use serde::{Deserialize, Serialize};
    use serde_json::{json, Value};

    use crate::__private::{
        enum_spec, field, float, format, int, object_spec, pattern, push_check,
    };
    use crate::contract::{
        CheckResult, CmpOp, Constraints, Contract, ContractRef, ContractSpec, FieldType, Rule,
        TypeSpec,
    };
    use crate::validate::{check_value, join_pointer, Violation, ViolationKind, Violations};
    use crate::DocContext;

    /// Implements `FieldType` and `JsonSchema` the way the derive does.
    macro_rules! contract_glue {
        ($t:ty) => {
            impl FieldType for $t {
                fn type_spec() -> TypeSpec {
                    TypeSpec::Contract(ContractRef::of::<$t>())
                }
                fn run_nested_checks(
                    &self,
                    cx: &DocContext<'_>,
                    parent: &str,
                    key: &str,
                    out: &mut Violations,
                ) {
                    self.run_checks(cx, &join_pointer(parent, key), out);
                }
            }
            impl schemars::JsonSchema for $t {
                fn schema_name() -> Cow<'static, str> {
                    stringify!($t).into()
                }
                fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                    schemars::json_schema!({})
                }
            }
        };
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Status {
        #[serde(rename = "open")]
        Open,
        #[serde(rename = "closed")]
        Closed,
    }

    impl Contract for Status {
        fn contract_spec() -> &'static ContractSpec {
            static SPEC: OnceLock<ContractSpec> = OnceLock::new();
            SPEC.get_or_init(|| {
                enum_spec("Status", None, &[("open", None), ("closed", Some("done"))])
            })
        }
    }
    contract_glue!(Status);

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Line {
        sku: String,
        qty: u32,
        currency: String,
        note: Option<String>,
    }

    impl Contract for Line {
        fn contract_spec() -> &'static ContractSpec {
            static SPEC: OnceLock<ContractSpec> = OnceLock::new();
            SPEC.get_or_init(|| {
                object_spec(
                    "Line",
                    None,
                    vec![
                        field(
                            "sku",
                            "sku",
                            String::type_spec(),
                            None,
                            None,
                            Constraints {
                                pattern: Some(pattern("^[A-Z]+-[0-9]+$")),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "qty",
                            "qty",
                            u32::type_spec(),
                            None,
                            None,
                            Constraints {
                                minimum: Some(int(1)),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "currency",
                            "currency",
                            String::type_spec(),
                            None,
                            None,
                            Constraints {
                                one_of: Some(vec![json!("USD"), json!("EUR")]),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "note",
                            "note",
                            <Option<String>>::type_spec(),
                            None,
                            None,
                            Constraints::default(),
                        ),
                    ],
                    vec![],
                    &[],
                    &[],
                )
            })
        }

        fn run_checks(&self, _: &DocContext<'_>, pointer: &str, out: &mut Violations) {
            push_check(line_check(self), pointer, out);
        }
    }
    contract_glue!(Line);

    fn line_check(line: &Line) -> CheckResult {
        if line.sku == "BAD-0" {
            return Err(Violation::new(
                "/sku",
                ViolationKind::Custom,
                "`sku` is blocked",
            ));
        }
        Ok(())
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Order {
        id: String,
        day: String,
        status: Status,
        quarter: Option<u8>,
        low: Option<f64>,
        high: Option<f64>,
        items: Vec<Line>,
        tags: Vec<String>,
        big: Option<i64>,
        #[serde(default)]
        internal: String,
    }

    impl Contract for Order {
        fn contract_spec() -> &'static ContractSpec {
            static SPEC: OnceLock<ContractSpec> = OnceLock::new();
            SPEC.get_or_init(|| {
                let positive = Constraints {
                    exclusive_minimum: Some(int(0)),
                    ..Constraints::default()
                };
                object_spec(
                    "Order",
                    Some("An order."),
                    vec![
                        field(
                            "id",
                            "id",
                            String::type_spec(),
                            None,
                            None,
                            Constraints {
                                min_len: Some(5),
                                max_len: Some(12),
                                pattern: Some(pattern("^ORD-")),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "day",
                            "day",
                            String::type_spec(),
                            None,
                            None,
                            Constraints {
                                format: Some(format("date")),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "status",
                            "status",
                            Status::type_spec(),
                            None,
                            None,
                            Constraints::default(),
                        ),
                        field(
                            "quarter",
                            "quarter",
                            <Option<u8>>::type_spec(),
                            None,
                            None,
                            Constraints {
                                minimum: Some(int(1)),
                                maximum: Some(int(4)),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "low",
                            "low",
                            <Option<f64>>::type_spec(),
                            None,
                            Some("USD"),
                            positive.clone(),
                        ),
                        field(
                            "high",
                            "high",
                            <Option<f64>>::type_spec(),
                            None,
                            Some("USD"),
                            Constraints {
                                maximum: Some(float(1e6)),
                                ..positive
                            },
                        ),
                        field(
                            "items",
                            "items",
                            <Vec<Line>>::type_spec(),
                            None,
                            None,
                            Constraints {
                                min_len: Some(1),
                                max_len: Some(3),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "tags",
                            "tags",
                            <Vec<String>>::type_spec(),
                            None,
                            None,
                            Constraints {
                                max_len: Some(2),
                                pattern: Some(pattern("^[a-z]+$")),
                                ..Constraints::default()
                            },
                        ),
                        field(
                            "big",
                            "big",
                            <Option<i64>>::type_spec(),
                            None,
                            None,
                            Constraints::default(),
                        ),
                    ],
                    vec![
                        Rule::Compare {
                            left: "low".into(),
                            op: CmpOp::Le,
                            right: "high".into(),
                        },
                        Rule::BothOrNeither(vec!["low".into(), "high".into()]),
                    ],
                    &["order_check"],
                    &["internal"],
                )
            })
        }

        fn run_checks(&self, cx: &DocContext<'_>, pointer: &str, out: &mut Violations) {
            push_check(order_check(self), pointer, out);
            self.items.run_nested_checks(cx, pointer, "items", out);
        }
    }
    contract_glue!(Order);

    fn order_check(order: &Order) -> CheckResult {
        if order.id == "ORD-000" {
            return Err(Violation::new(
                "/id",
                ViolationKind::Custom,
                "`id` is reserved",
            ));
        }
        Ok(())
    }

    fn valid() -> Value {
        json!({
            "id": "ORD-17",
            "day": "2024-02-29",
            "status": "open",
            "quarter": 3,
            "low": 7230,
            "high": 7650.5,
            "items": [
                {"sku": "A-1", "qty": 2, "currency": "USD", "note": null},
                {"sku": "B-22", "qty": 1, "currency": "EUR", "note": "gift"}
            ],
            "tags": ["x", "y"],
            "big": null
        })
    }

    fn with(patch: Value) -> Value {
        let mut doc = valid();
        if let (Value::Object(doc_map), Value::Object(patch)) = (&mut doc, patch) {
            for (k, v) in patch {
                doc_map.insert(k, v);
            }
        }
        doc
    }

    /// (path, kind) of every violation, in order.
    fn errors(value: &Value) -> Vec<(String, &'static str)> {
        match Order::from_value(value) {
            Ok(_) => vec![],
            Err(v) => v
                .iter()
                .map(|v| (v.path.clone(), v.kind.as_str()))
                .collect(),
        }
    }

    fn pairs(expected: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        expected
            .iter()
            .map(|(p, k)| ((*p).to_owned(), *k))
            .collect()
    }

    #[test]
    fn a_valid_document_decodes() {
        let order = Order::from_value(&valid()).unwrap();
        assert_eq!(order.quarter, Some(3));
        assert_eq!(order.items[1].note.as_deref(), Some("gift"));
        assert_eq!(order.status, Status::Open);
        let text = valid().to_string();
        assert_eq!(Order::from_json(&text).unwrap(), order);
        assert!(order.validate().is_ok());
    }

    #[test]
    fn every_violation_at_once_in_document_order() {
        let doc = json!({
            "zzz": 1,
            "id": "X",
            "day": "2023-02-29",
            "status": "shipped",
            "quarter": 5,
            "low": 9,
            "high": 7,
            "items": [],
            "tags": ["ok", "Not", "b", 4],
            "extra/key": true
        });
        let got = Order::from_value(&doc).unwrap_err();
        let kinds: Vec<_> = got
            .iter()
            .map(|v| (v.path.as_str(), v.kind.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("/zzz", "extra_field"),
                ("/id", "length"),
                ("/id", "pattern_mismatch"),
                ("/day", "format_mismatch"),
                ("/status", "enum_mismatch"),
                ("/quarter", "out_of_range"),
                ("/items", "length"),
                ("/tags", "length"),
                ("/tags/1", "pattern_mismatch"),
                ("/tags/3", "type_mismatch"),
                ("/extra~1key", "extra_field"),
                ("/big", "missing_field"),
                ("/high", "cross_field"),
            ]
        );
        let messages: Vec<_> = got.iter().map(|v| v.message.as_str()).collect();
        assert_eq!(messages[1], "`id` must have at least 5 characters, has 1");
        assert_eq!(messages[2], "`id` (\"X\") must match the pattern `^ORD-`");
        assert_eq!(messages[3], "`day` (\"2023-02-29\") is not a valid `date`");
        assert_eq!(
            messages[4],
            "`status` must be one of `open`, `closed`, got \"shipped\""
        );
        assert_eq!(messages[5], "`quarter` (5) must be <= 4");
        assert_eq!(messages[6], "`items` must have at least 1 items, has 0");
        assert_eq!(messages[9], "`tags[3]` must be a string, got 4");
        assert_eq!(
            messages[11],
            "missing field `big` (give null when there is no value)"
        );
        assert_eq!(messages[12], "`low` (9) must be <= `high` (7)");
        assert!(messages[0].starts_with("unknown field `zzz`, expected one of `id`, `day`"));
    }

    #[test]
    fn the_lib_example_reports_two() {
        let err = Order::from_value(&with(json!({"quarter": 5, "low": 9, "high": 7}))).unwrap_err();
        assert_eq!(err.len(), 2);
    }

    #[test]
    fn an_integral_float_is_an_integer() {
        let doc = with(json!({"quarter": 3.0, "big": -0.0, "items": [
            {"sku": "A-1", "qty": 2.0, "currency": "USD", "note": null}
        ]}));
        let order = Order::from_value(&doc).unwrap();
        assert_eq!(order.quarter, Some(3));
        assert_eq!(order.big, Some(0));
        assert_eq!(order.items[0].qty, 2);
        assert_eq!(Order::from_json(&doc.to_string()).unwrap(), order);
        assert_eq!(
            errors(&with(json!({"quarter": 3.5}))),
            pairs(&[("/quarter", "type_mismatch")])
        );
        let err = Order::from_value(&with(json!({"quarter": 2.5}))).unwrap_err();
        assert_eq!(
            err.0[0].message,
            "`quarter` must be an integer or null, got 2.5"
        );
    }

    #[test]
    fn huge_and_edge_integers() {
        for q in [
            json!(0),
            json!(-1),
            json!(256),
            json!(1e30),
            json!(u64::MAX),
            json!(i64::MIN),
        ] {
            assert_eq!(
                errors(&with(json!({ "quarter": q }))),
                pairs(&[("/quarter", "out_of_range")]),
                "{q}"
            );
        }
        let err = Order::from_value(&with(json!({"quarter": 300}))).unwrap_err();
        assert_eq!(
            err.0[0].message,
            "`quarter` (300) must be <= 255, the largest `u8`"
        );
        // i64 bounds, exactly: 2^63 - 1 fits, 2^63 (as u64 or as float) does not.
        assert!(errors(&with(json!({"big": i64::MAX}))).is_empty());
        assert!(errors(&with(json!({"big": i64::MIN}))).is_empty());
        assert!(errors(&with(json!({"big": -(2f64.powi(63))}))).is_empty());
        for big in [
            json!(9_223_372_036_854_775_808u64),
            json!(2f64.powi(63)),
            json!(-1e19),
        ] {
            assert_eq!(
                errors(&with(json!({ "big": big }))),
                pairs(&[("/big", "out_of_range")]),
                "{big}"
            );
        }
        let text = valid()
            .to_string()
            .replace("\"big\":null", "\"big\":123456789012345678901234567890");
        let err = Order::from_json(&text).unwrap_err();
        assert_eq!(err.0[0].path, "/big");
        assert_eq!(err.0[0].kind, ViolationKind::OutOfRange);
    }

    /// The careful comparison, for every integer: the one `cmp_int_float` leaves to
    /// `cmp_wide_int_float` past 2^53.
    fn slow_cmp(i: i128, f: f64) -> Option<std::cmp::Ordering> {
        super::cmp_wide_int_float(i, f)
    }

    #[test]
    fn int_float_comparison_agrees_with_the_careful_one_at_the_edges() {
        let two53 = 1i128 << 53;
        let ints = [
            0,
            1,
            -1,
            255,
            two53 - 1,
            two53,
            -two53,
            two53 + 1,
            -two53 - 1,
            i128::from(i64::MAX),
            i128::from(i64::MIN),
            i128::from(u64::MAX),
        ];
        let floats = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            254.9,
            255.0,
            255.1,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            -9_007_199_254_740_992.0,
            9.223_372_036_854_776e18,
            1e30,
            -1e30,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::NAN,
        ];
        for i in ints {
            for f in floats {
                assert_eq!(super::cmp_int_float(i, f), slow_cmp(i, f), "{i} vs {f}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn int_float_comparison_agrees_with_the_careful_one(
            i in proptest::prop_oneof![
                -(1i128 << 54)..(1i128 << 54),
                proptest::num::i64::ANY.prop_map(i128::from),
                proptest::num::u64::ANY.prop_map(i128::from),
            ],
            f in proptest::prop_oneof![
                proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::SUBNORMAL,
                (-(1i64 << 54)..(1i64 << 54)).prop_map(|n| n as f64),
                (-(1i64 << 54)..(1i64 << 54)).prop_map(|n| n as f64 + 0.5),
            ],
        ) {
            proptest::prop_assert_eq!(super::cmp_int_float(i, f), slow_cmp(i, f));
        }
    }

    #[test]
    fn quoted_strings_are_json_strings_cut_at_60_characters() {
        let long = "é".repeat(70);
        for s in [
            "",
            "plain",
            "a\"b\\c",
            "tab\tnew\nline\u{1}",
            "é€😀",
            long.as_str(),
        ] {
            assert_eq!(super::quoted(s), quoted_by_serde_json(s));
        }
    }

    /// [`super::quoted`] as it was written before it wrote plain strings itself: serde_json's
    /// text of the string, cut after 60 characters.
    fn quoted_by_serde_json(s: &str) -> String {
        match s.char_indices().nth(60) {
            Some((cut, _)) => format!("{}…", Value::String(s[..cut].to_owned())),
            None => Value::String(s.to_owned()).to_string(),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]

        /// Messages show a number as serde_json displays it, whichever kind it is.
        #[test]
        fn numbers_are_written_as_serde_json_displays_them(
            u in proptest::prelude::any::<u64>(),
            i in proptest::prelude::any::<i64>(),
            f in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL
                | proptest::num::f64::ZERO | proptest::num::f64::NEGATIVE,
            small in -1_000_000i64..1_000_000,
            scale in 0u32..8,
        ) {
            let decimal = small as f64 / 10f64.powi(scale as i32);
            use serde_json::Number;
            for n in [
                Number::from(u),
                Number::from(i),
                Number::from_f64(f).unwrap_or_else(|| Number::from(0)),
                Number::from_f64(decimal).unwrap_or_else(|| Number::from(0)),
            ] {
                let mut ours = String::new();
                super::write_number(&mut ours, &n).unwrap();
                proptest::prop_assert_eq!(ours, n.to_string());
            }
        }

        /// Quoted strings are serde_json's text of them, plain or with characters to escape,
        /// short or cut.
        #[test]
        fn quoted_strings_are_serde_jsons(
            s in proptest::string::string_regex("[a-z\"\\\\\t\n\u{1}\u{7f}é€😀 /]{0,80}").unwrap()
        ) {
            proptest::prop_assert_eq!(super::quoted(&s), quoted_by_serde_json(&s));
        }
    }

    #[test]
    fn number_bounds_are_exact() {
        assert_eq!(
            errors(&with(json!({"low": 0, "high": 0.0}))),
            pairs(&[("/low", "out_of_range"), ("/high", "out_of_range")])
        );
        assert!(errors(&with(json!({"low": 1e-300, "high": 1e6}))).is_empty());
        assert_eq!(
            errors(&with(json!({"low": 1, "high": 1000000.0000001}))),
            pairs(&[("/high", "out_of_range")])
        );
        let err = Order::from_value(&with(json!({"low": -2}))).unwrap_err();
        assert_eq!(err.0[0].message, "`low` (-2) must be > 0");
    }

    #[test]
    fn nested_paths() {
        let doc = with(json!({"items": [
            {"sku": "A-1", "qty": 2, "currency": "USD", "note": null},
            {"sku": "A-2", "qty": 0, "currency": "USD", "note": null},
            {"sku": "a-3", "qty": 1, "currency": "GBP", "note": 5, "x": 1},
            {"qty": 1, "currency": "USD", "note": null},
            "not an object"
        ]}));
        assert_eq!(
            errors(&doc),
            pairs(&[
                ("/items", "length"),
                ("/items/1/qty", "out_of_range"),
                ("/items/2/sku", "pattern_mismatch"),
                ("/items/2/currency", "enum_mismatch"),
                ("/items/2/note", "type_mismatch"),
                ("/items/2/x", "extra_field"),
                ("/items/3/sku", "missing_field"),
                ("/items/4", "type_mismatch"),
            ])
        );
        let err = Order::from_value(&doc).unwrap_err();
        assert_eq!(
            err.0[3].message,
            "`currency` (\"GBP\") must be one of `USD`, `EUR`"
        );
        assert_eq!(
            err.0[7].message,
            "`items[4]` must be an object, got a string (\"not an object\")"
        );
    }

    #[test]
    fn rules_with_nulls() {
        assert!(errors(&with(json!({"low": null, "high": null}))).is_empty());
        assert!(errors(&with(json!({"low": 5, "high": 5}))).is_empty());
        let err = Order::from_value(&with(json!({"low": 5, "high": null}))).unwrap_err();
        assert_eq!(
            err.0,
            vec![Violation::cross_field(
                "/high",
                "`high` is null but `low` is not: give both or neither"
            )]
        );
        assert_eq!(
            errors(&with(json!({"low": null, "high": 5}))),
            pairs(&[("/low", "cross_field")])
        );
        // An ill-typed side: only the type is reported, the comparison is skipped.
        assert_eq!(
            errors(&with(json!({"low": "9", "high": 7}))),
            pairs(&[("/low", "type_mismatch")])
        );
        // A missing side: only the missing field.
        let mut doc = with(json!({"low": 9}));
        if let Value::Object(map) = &mut doc {
            map.remove("high");
        }
        assert_eq!(errors(&doc), pairs(&[("/high", "missing_field")]));
        // Out of range but well typed: both reported.
        assert_eq!(
            errors(&with(json!({"low": 2e6, "high": 7}))),
            pairs(&[("/high", "cross_field")])
        );
        assert_eq!(
            errors(&with(json!({"low": 9e6, "high": 2e6}))),
            pairs(&[("/high", "out_of_range"), ("/high", "cross_field")])
        );
    }

    #[test]
    fn other_rules() {
        let spec = object_spec(
            "Pair",
            None,
            vec![
                field(
                    "a",
                    "a",
                    <Option<String>>::type_spec(),
                    None,
                    None,
                    Constraints::default(),
                ),
                field(
                    "b",
                    "b",
                    <Option<String>>::type_spec(),
                    None,
                    None,
                    Constraints::default(),
                ),
                field(
                    "c",
                    "c",
                    <Option<bool>>::type_spec(),
                    None,
                    None,
                    Constraints::default(),
                ),
            ],
            vec![
                Rule::Compare {
                    left: "a".into(),
                    op: CmpOp::Lt,
                    right: "b".into(),
                },
                Rule::AtLeastOne(vec!["a".into(), "b".into()]),
                Rule::BothOrNeither(vec!["a".into(), "b".into(), "c".into()]),
            ],
            &[],
            &[],
        );
        let check = |v: Value| {
            let mut out = Violations::new();
            check_value(&spec, &v, "/pair", &mut out);
            out.0
        };
        assert!(check(json!({"a": "apple", "b": "banana", "c": true})).is_empty());
        assert!(check(json!({"a": "b", "b": "a", "c": false}))[0]
            .message
            .contains("`a` (\"b\") must be < `b` (\"a\")"));
        let v = check(json!({"a": null, "b": null, "c": null}));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].path, "/pair");
        assert_eq!(
            v[0].message,
            "at least one of `a`, `b` must be given (not null)"
        );
        let v = check(json!({"a": "x", "b": null, "c": null}));
        assert_eq!(
            v.iter().map(|v| v.path.as_str()).collect::<Vec<_>>(),
            ["/pair/b", "/pair/c"]
        );
        assert_eq!(
            v[0].message,
            "`b` is null but `a` is not: give all of `a`, `b`, `c` or none"
        );
        assert_eq!(
            v[1].message,
            "`c` is null but `a` is not: give all of `a`, `b`, `c` or none"
        );
        let v = check(json!({"a": "x", "b": "y", "c": null}));
        assert_eq!(
            v.iter().map(|v| v.message.as_str()).collect::<Vec<_>>(),
            ["`c` is null but `a`, `b` are not: give all of `a`, `b`, `c` or none"]
        );
    }

    #[test]
    fn skipped_fields() {
        assert_eq!(
            errors(&with(json!({"internal": "x"}))),
            pairs(&[("/internal", "extra_field")])
        );
        let mut order = Order::from_value(&valid()).unwrap();
        order.internal = "filled by code".into();
        assert!(order.validate().is_ok());
    }

    #[test]
    fn validate_typed_checks_fields_rules_and_custom_checks() {
        let mut order = Order::from_value(&valid()).unwrap();
        order.quarter = Some(9);
        order.low = Some(9.0);
        order.high = Some(7.0);
        order.id = "ORD-000".into();
        order.items[1].sku = "BAD-0".into();
        order.items[0].currency = "JPY".into();
        let err = order.validate().unwrap_err();
        let got: Vec<_> = err
            .iter()
            .map(|v| (v.path.as_str(), v.kind.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/quarter", "out_of_range"),
                ("/items/0/currency", "enum_mismatch"),
                ("/high", "cross_field"),
                ("/id", "custom"),
                ("/items/1/sku", "custom"),
            ]
        );
        // A NaN serializes as null, which a non-null field refuses.
        order.items[0].currency = "USD".into();
        order.low = Some(f64::NAN);
        assert!(order
            .validate()
            .unwrap_err()
            .has_kind(ViolationKind::CrossField));
    }

    #[test]
    fn custom_checks_run_after_decoding() {
        let err = Order::from_value(&with(json!({"id": "ORD-000"}))).unwrap_err();
        assert_eq!(
            err.0,
            vec![Violation::new(
                "/id",
                ViolationKind::Custom,
                "`id` is reserved"
            )]
        );
        // Cross-field and custom violations come together.
        let err =
            Order::from_value(&with(json!({"id": "ORD-000", "low": 9, "high": 7}))).unwrap_err();
        assert_eq!(err.len(), 2);
        // Field-level violations stop before decoding, so no custom check runs.
        let err = Order::from_value(&with(json!({"id": "ORD-000", "quarter": 9}))).unwrap_err();
        assert_eq!(err.len(), 1);
    }

    #[test]
    fn enum_contracts() {
        assert_eq!(Status::from_json("\"closed\"").unwrap(), Status::Closed);
        let err = Status::from_json("\"Closed\"").unwrap_err();
        assert_eq!(err.0[0].kind, ViolationKind::EnumMismatch);
        assert_eq!(err.0[0].path, "");
        assert_eq!(
            errors(&with(json!({"status": 3}))),
            pairs(&[("/status", "type_mismatch")])
        );
        assert_eq!(
            errors(&with(json!({"status": null}))),
            pairs(&[("/status", "type_mismatch")])
        );
    }

    #[test]
    fn invalid_json_has_line_and_column() {
        let err = Order::from_json("{\n  \"id\": ,\n}").unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(err.0[0].kind, ViolationKind::JsonInvalid);
        assert!(
            err.0[0].message.contains("line 2 column"),
            "{}",
            err.0[0].message
        );
    }

    #[test]
    fn odd_input_never_panics() {
        let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let deep_object = format!(
            "{{\"id\": {}1{}}}",
            "{\"a\":".repeat(5_000),
            "}".repeat(5_000)
        );
        let long = format!("{{\"id\": \"{}\"}}", "é".repeat(10_000));
        let cases = [
            "",
            " ",
            "null",
            "[]",
            "[1, 2]",
            "{}",
            "\"\"",
            "NaN",
            "Infinity",
            "-",
            "1e400",
            "{\"quarter\": 1e400}",
            "{\"quarter\": NaN}",
            "{\"id\": \"\\ud800\"}",
            "{",
            "{\"a\":1,\"a\":2}",
            "\u{feff}{}",
            deep_array.as_str(),
            deep_object.as_str(),
            long.as_str(),
        ];
        for text in cases {
            let err = Order::from_json(text).unwrap_err();
            assert!(!err.is_empty());
            let _ = Status::from_json(text);
        }
        let err = Order::from_json("null").unwrap_err();
        assert_eq!(err.0[0].message, "`Order` must be an object, got null");
        assert_eq!(Order::from_json("{}").unwrap_err().len(), 9);
        let err = Order::from_json(&long).unwrap_err();
        assert!(err.0[0].message.len() < 200, "{}", err.0[0].message);
    }

    #[test]
    fn check_value_prefixes_pointers() {
        let mut out = Violations::new();
        check_value(
            Order::contract_spec(),
            &with(json!({"quarter": 0})),
            "/orders/3",
            &mut out,
        );
        assert_eq!(out.0[0].path, "/orders/3/quarter");
        let mut out = Violations::new();
        check_value(Line::contract_spec(), &json!(null), "/x", &mut out);
        assert_eq!(out.0[0].path, "/x");
        assert_eq!(out.0[0].message, "`Line` must be an object, got null");
    }

    #[test]
    fn length_counts_characters() {
        assert!(errors(&with(json!({"id": "ORD-ééééééé"}))).is_empty());
        assert_eq!(
            errors(&with(json!({"id": "ORD-ééééééééé"}))),
            pairs(&[("/id", "length")])
        );
    }

    #[test]
    fn from_json_agrees_with_from_value() {
        let docs = [
            valid(),
            with(json!({"quarter": 3.0, "items": [
                {"sku": "A-1", "qty": 2.0, "currency": "USD", "note": null}
            ]})),
            with(json!({"quarter": 5, "low": 9, "high": 7, "x": [1, {"y": null}]})),
            with(json!({"id": "ORD-000"})),
            with(json!({"items": [{"sku": "é-1", "qty": 1, "currency": "EUR", "note": "a\"b"}]})),
            json!([1, 2]),
            json!("open"),
        ];
        for doc in docs {
            let text = doc.to_string();
            assert_eq!(Order::from_json(&text), Order::from_value(&doc), "{text}");
        }
    }

    #[test]
    fn a_repeated_key_is_extra_in_from_json() {
        let text = valid()
            .to_string()
            .replace("\"big\":null", "\"big\":null,\"big\":1");
        let err = Order::from_json(&text).unwrap_err();
        assert_eq!(err.0.len(), 1);
        assert_eq!(err.0[0].path, "/big");
        assert_eq!(err.0[0].kind, ViolationKind::ExtraField);
        assert_eq!(err.0[0].message, "field `big` is given more than once");
    }
}
