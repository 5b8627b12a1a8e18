//! Checking JSON values against the IR.
//!
//! One walk over the value reports every violation in document order: unknown keys and field
//! values as they come, then missing fields, then the object's cross-field rules. JSON pointers
//! and messages are built only when a violation is pushed, so a valid document costs no
//! allocation beyond its parse.

use std::cmp::Ordering;
use std::fmt::Display;

use serde_json::{Number, Value};
use smallvec::SmallVec;

use super::checked::Checked;
use super::doc::{Json, JsonMap, View};
use super::format::format_ok;
use super::message::{integer_type_name, list_names, list_values, quoted, scalar, Text};
use super::path::Path;
use super::violation::{Violation, ViolationKind, Violations};
use crate::attrs::{CmpOp, Format, Rule};
use crate::context::DocContext;
use crate::ir::ContractSpec;
use crate::ir::{JsonType, Node, NumberKeywords, ObjectNode};
use crate::num::Num;

pub(super) fn has_field_level(out: &Violations) -> bool {
    out.iter().any(|v| v.kind.is_field_level())
}

/// Normalises a decoded value and runs its custom checks (against `cx`'s document), or reports
/// why it did not decode. A value that cannot be normalised is not checked further.
pub(super) fn finish<C: Checked, E: Display>(
    decoded: Result<C, E>,
    mut out: Violations,
    cx: &DocContext<'_>,
) -> Result<C, Violations> {
    match decoded {
        Ok(mut typed) => {
            let before = out.len();
            typed.checked_normalize(cx, "", &mut out);
            if out.len() == before {
                typed.checked_run_checks(cx, "", &mut out);
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
                let text = text.s(op.as_str()).s(" ").int(bound);
                match integer_type_name(which.0, which.1) {
                    Some(name) => text.s(", the ").s(which.2).s(" `").s(name).s("`"),
                    None => text,
                }
            }
            Broken::Keyword { op, bound } => text.s(op.as_str()).s(" ").number(bound),
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
        op: CmpOp,
        bound: i128,
        which: (i128, i128, &'static str),
    },
    Keyword {
        op: CmpOp,
        bound: &'n Number,
    },
}

/// The first bound of `n` that `num` breaks, in the order messages report them: the integer
/// type's range, then the keywords ([`NumberBounds::broken`](crate::ir::NumberBounds::broken)).
#[inline]
fn broken_bound(num: Num, n: &NumberKeywords) -> Option<Broken<'_>> {
    if let Some((min, max)) = n.integer_type {
        if num.cmp(Num::Int(min)) == Some(Ordering::Less) {
            return Some(Broken::Type {
                op: CmpOp::Ge,
                bound: min,
                which: (min, max, "smallest"),
            });
        }
        if num.cmp(Num::Int(max)) == Some(Ordering::Greater) {
            return Some(Broken::Type {
                op: CmpOp::Le,
                bound: max,
                which: (min, max, "largest"),
            });
        }
    }
    n.bounds
        .broken(num)
        .map(|(op, bound)| Broken::Keyword { op, bound })
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

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::OnceLock;

    use serde::{Deserialize, Serialize};
    use serde_json::{json, Value};

    use crate::ir::NumberBounds;

    use crate::__private::{
        enum_spec, field, float, format, int, object_spec, pattern, push_check,
    };
    use crate::attrs::{CmpOp, FieldAttrs, Rule};
    use crate::contract::{CheckResult, Contract, FieldType};
    use crate::ir::{ContractRef, ContractSpec, TypeSpec};
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
                            FieldAttrs {
                                pattern: Some(pattern("^[A-Z]+-[0-9]+$")),
                                ..FieldAttrs::default()
                            },
                        ),
                        field(
                            "qty",
                            "qty",
                            u32::type_spec(),
                            None,
                            None,
                            FieldAttrs {
                                bounds: NumberBounds {
                                    minimum: Some(int(1)),
                                    ..NumberBounds::default()
                                },
                                ..FieldAttrs::default()
                            },
                        ),
                        field(
                            "currency",
                            "currency",
                            String::type_spec(),
                            None,
                            None,
                            FieldAttrs {
                                one_of: Some(vec![json!("USD"), json!("EUR")]),
                                ..FieldAttrs::default()
                            },
                        ),
                        field(
                            "note",
                            "note",
                            <Option<String>>::type_spec(),
                            None,
                            None,
                            FieldAttrs::default(),
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
                let positive = FieldAttrs {
                    bounds: NumberBounds {
                        exclusive_minimum: Some(int(0)),
                        ..NumberBounds::default()
                    },
                    ..FieldAttrs::default()
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
                            FieldAttrs {
                                min_len: Some(5),
                                max_len: Some(12),
                                pattern: Some(pattern("^ORD-")),
                                ..FieldAttrs::default()
                            },
                        ),
                        field(
                            "day",
                            "day",
                            String::type_spec(),
                            None,
                            None,
                            FieldAttrs {
                                format: Some(format("date")),
                                ..FieldAttrs::default()
                            },
                        ),
                        field(
                            "status",
                            "status",
                            Status::type_spec(),
                            None,
                            None,
                            FieldAttrs::default(),
                        ),
                        field(
                            "quarter",
                            "quarter",
                            <Option<u8>>::type_spec(),
                            None,
                            None,
                            FieldAttrs {
                                bounds: NumberBounds {
                                    minimum: Some(int(1)),
                                    maximum: Some(int(4)),
                                    ..NumberBounds::default()
                                },
                                ..FieldAttrs::default()
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
                            FieldAttrs {
                                bounds: NumberBounds {
                                    maximum: Some(float(1e6)),
                                    ..positive.bounds.clone()
                                },
                                ..positive
                            },
                        ),
                        field(
                            "items",
                            "items",
                            <Vec<Line>>::type_spec(),
                            None,
                            None,
                            FieldAttrs {
                                min_len: Some(1),
                                max_len: Some(3),
                                ..FieldAttrs::default()
                            },
                        ),
                        field(
                            "tags",
                            "tags",
                            <Vec<String>>::type_spec(),
                            None,
                            None,
                            FieldAttrs {
                                max_len: Some(2),
                                pattern: Some(pattern("^[a-z]+$")),
                                ..FieldAttrs::default()
                            },
                        ),
                        field(
                            "big",
                            "big",
                            <Option<i64>>::type_spec(),
                            None,
                            None,
                            FieldAttrs::default(),
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
                    FieldAttrs::default(),
                ),
                field(
                    "b",
                    "b",
                    <Option<String>>::type_spec(),
                    None,
                    None,
                    FieldAttrs::default(),
                ),
                field(
                    "c",
                    "c",
                    <Option<bool>>::type_spec(),
                    None,
                    None,
                    FieldAttrs::default(),
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
