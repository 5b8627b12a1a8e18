//! What `#[derive(Contract)]` expands to. Not a public API.

pub use schemars;
pub use serde;
pub use serde_json;
pub use std::borrow::Cow;
pub use std::boxed::Box;
pub use std::default::Default;
pub use std::option::Option::{self, None, Some};
pub use std::sync::OnceLock as Lazy;
pub use std::vec::Vec;

pub use crate::context::DocContext;
pub use crate::contract::*;
pub use crate::ir::{FieldSpec, JsonType, Node, NumberBounds, ObjectNode};
pub use crate::validate::{join_pointer, Violation, Violations};

/// An object contract's IR: a closed object, every field required.
pub fn object_spec(
    name: &str,
    description: Option<&str>,
    fields: Vec<FieldSpec>,
    rules: Vec<Rule>,
    checks: &[&str],
    skipped: &[&str],
) -> ContractSpec {
    let object = ObjectNode {
        required: fields.iter().map(|f| f.name.clone()).collect(),
        properties: fields,
        additional_properties: Some(Box::new(Node::boolean(false))),
        has_shape: true,
        rules,
        checks: checks.iter().map(|s| (*s).to_owned()).collect(),
        skipped: skipped.iter().map(|s| (*s).to_owned()).collect(),
        ..ObjectNode::default()
    };
    ContractSpec {
        name: name.to_owned(),
        node: Node {
            types: vec![JsonType::Object],
            description: description.map(str::to_owned),
            object: Some(Box::new(object)),
            ..Node::default()
        },
    }
}

/// `spec` with the contract-level question (`#[contract(question = "..")]`).
pub fn with_question(mut spec: ContractSpec, question: &str) -> ContractSpec {
    spec.node.question = Some(question.to_owned());
    spec
}

/// A form name the derive already checked.
pub fn form(name: &str) -> Form {
    match Form::from_name(name) {
        Some(f) => f,
        None => panic!("unknown form `{name}`"),
    }
}

/// An enum contract's IR: a string with one of the variants' names; `variants` are (JSON name,
/// description).
pub fn enum_spec(
    name: &str,
    description: Option<&str>,
    variants: &[(&str, Option<&str>)],
) -> ContractSpec {
    ContractSpec {
        name: name.to_owned(),
        node: Node {
            types: vec![JsonType::String],
            description: description.map(str::to_owned),
            enumeration: Some(
                variants
                    .iter()
                    .map(|(n, _)| serde_json::Value::String((*n).to_owned()))
                    .collect(),
            ),
            enum_descriptions: variants.iter().map(|(_, d)| d.map(str::to_owned)).collect(),
            ..Node::default()
        },
    }
}

/// One field's IR: the node of its Rust type with the attributes placed where they apply.
pub fn field(
    name: &str,
    rust_name: &str,
    ty: TypeSpec,
    description: Option<&str>,
    unit: Option<&str>,
    constraints: FieldAttrs,
) -> FieldSpec {
    FieldSpec {
        name: name.to_owned(),
        rust_name: rust_name.to_owned(),
        node: Node::field(&ty, &constraints, description, unit),
    }
}

/// A pattern the derive already checked.
pub fn pattern(source: &str) -> Pattern {
    match Pattern::new(source) {
        Ok(p) => p,
        Err(e) => {
            panic!("pattern `{source}` was accepted at compile time but not at run time: {e}")
        }
    }
}

/// A format name the derive already checked.
pub fn format(name: &str) -> Format {
    match Format::from_name(name) {
        Some(f) => f,
        None => panic!("unknown format `{name}`"),
    }
}

/// An integer bound.
pub fn int(value: i128) -> serde_json::Number {
    if let Ok(v) = i64::try_from(value) {
        serde_json::Number::from(v)
    } else if let Ok(v) = u64::try_from(value) {
        serde_json::Number::from(v)
    } else {
        float(value as f64)
    }
}

/// A float bound.
pub fn float(value: f64) -> serde_json::Number {
    match serde_json::Number::from_f64(value) {
        Some(n) => n,
        None => panic!("bound {value} is not finite"),
    }
}

/// A string `one_of` value.
pub fn str_value(value: &str) -> serde_json::Value {
    serde_json::Value::String(value.to_owned())
}

/// The IR of a generic contract, built once per instantiation.
pub fn spec_cache<T: 'static>(build: fn() -> ContractSpec) -> &'static ContractSpec {
    crate::cache::per_type::<T, ContractSpec>(build)
}

/// The schema of a contract inside a schemars generator (what `impl JsonSchema` returns).
pub fn schema_for_spec(
    spec: &ContractSpec,
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    crate::schema::contract_schema(spec, generator)
}

/// Records the result of a custom check run at JSON pointer `pointer`.
pub fn push_check(result: CheckResult, pointer: &str, out: &mut Violations) {
    if let Err(violation) = result {
        out.push(violation.prefixed(pointer));
    }
}

/// A custom `check = f`: `fn(&T) -> CheckResult`, or `fn(&T, &DocContext) -> CheckResult` for a
/// check that reads the document. `M` tells the two apart (a function implements one of them).
pub trait CheckFn<T, M> {
    /// Runs the check on `value`.
    fn run(&self, value: &T, cx: &DocContext<'_>) -> CheckResult;
}

/// [`CheckFn`] of a check on the value alone.
pub enum OnValue {}
/// [`CheckFn`] of a check that reads the document.
pub enum WithDocument {}

impl<T, F: Fn(&T) -> CheckResult> CheckFn<T, OnValue> for F {
    fn run(&self, value: &T, _: &DocContext<'_>) -> CheckResult {
        self(value)
    }
}

impl<T, F: Fn(&T, &DocContext<'_>) -> CheckResult> CheckFn<T, WithDocument> for F {
    fn run(&self, value: &T, cx: &DocContext<'_>) -> CheckResult {
        self(value, cx)
    }
}

/// Runs a custom check of either form and pushes what it reports (prefixed with `pointer`).
pub fn push_check_fn<T, M, F: CheckFn<T, M>>(
    check: F,
    value: &T,
    cx: &DocContext<'_>,
    pointer: &str,
    out: &mut Violations,
) {
    push_check(check.run(value, cx), pointer, out);
}

/// `left op right` (JSON names).
pub fn rule_compare(left: &str, op: CmpOp, right: &str) -> Rule {
    Rule::Compare {
        left: left.to_owned(),
        op,
        right: right.to_owned(),
    }
}

/// `both_or_neither(..)` (JSON names).
pub fn rule_both_or_neither(fields: &[&str]) -> Rule {
    Rule::BothOrNeither(fields.iter().map(|s| (*s).to_owned()).collect())
}

/// `at_least_one(..)` (JSON names).
pub fn rule_at_least_one(fields: &[&str]) -> Rule {
    Rule::AtLeastOne(fields.iter().map(|s| (*s).to_owned()).collect())
}

// What the derive asks the compiler about field types it cannot recognise by their syntax
// (aliases, contracts, type parameters); each assertion is spanned at the attribute.

/// Numbers, also inside `Option`, `Vec` and `Box`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a numeric type",
    label = "`range`, `min`, `max`, `exclusive_min` and `exclusive_max` need a numeric field"
)]
pub trait Numeric {}

/// Strings, also inside `Option`, `Vec` and `Box`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `String`",
    label = "`pattern` and `format` need a string field"
)]
pub trait Text {}

/// Strings and lists, also inside `Option` and `Box`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is neither `String` nor `Vec`",
    label = "`len` needs a string or list field"
)]
pub trait HasLen {}

/// Strings and integers, also inside `Option`, `Vec` and `Box`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is neither `String` nor an integer",
    label = "`one_of` needs a string or integer field"
)]
pub trait OneOfValue {}

/// `Option<T>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an `Option`",
    label = "`both_or_neither` and `at_least_one` need `Option` fields"
)]
pub trait IsOption {}

/// Values a `rule` can compare; both sides must have the same `Kind`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be compared in a rule",
    label = "rules compare numbers with numbers or strings with strings"
)]
pub trait Comparable {
    /// [`NumberKind`] or [`StringKind`].
    type Kind;
}

/// The kind of numbers in a rule.
pub struct NumberKind;
/// The kind of strings in a rule.
pub struct StringKind;

macro_rules! numeric {
    ($($t:ty),*) => {$(
        impl Numeric for $t {}
        impl Comparable for $t { type Kind = NumberKind; }
    )*};
}
numeric!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);

macro_rules! integer_one_of {
    ($($t:ty),*) => {$( impl OneOfValue for $t {} )*};
}
integer_one_of!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl Text for String {}
impl HasLen for String {}
impl OneOfValue for String {}
impl Comparable for String {
    type Kind = StringKind;
}

impl<T: Numeric> Numeric for Option<T> {}
impl<T: Numeric> Numeric for Vec<T> {}
impl<T: Numeric> Numeric for Box<T> {}
impl<T: Text> Text for Option<T> {}
impl<T: Text> Text for Vec<T> {}
impl<T: Text> Text for Box<T> {}
impl<T: HasLen> HasLen for Option<T> {}
impl<T> HasLen for Vec<T> {}
impl<T: HasLen> HasLen for Box<T> {}
impl<T: OneOfValue> OneOfValue for Option<T> {}
impl<T: OneOfValue> OneOfValue for Vec<T> {}
impl<T: OneOfValue> OneOfValue for Box<T> {}
impl<T> IsOption for Option<T> {}
impl<T: IsOption> IsOption for Box<T> {}
impl<T: Comparable> Comparable for Option<T> {
    type Kind = T::Kind;
}
impl<T: Comparable> Comparable for Box<T> {
    type Kind = T::Kind;
}

/// Asserts that a field can take numeric bounds.
pub fn assert_numeric<T: ?Sized + Numeric>() {}
/// Asserts that a field can take `pattern` and `format`.
pub fn assert_text<T: ?Sized + Text>() {}
/// Asserts that a field can take `len`.
pub fn assert_has_len<T: ?Sized + HasLen>() {}
/// Asserts that a field can take `one_of`.
pub fn assert_one_of_value<T: ?Sized + OneOfValue>() {}
/// Asserts that a field can be in `both_or_neither` / `at_least_one`.
pub fn assert_option<T: ?Sized + IsOption>() {}
/// Asserts that a rule's sides can be compared with each other.
pub fn assert_comparable<A, B, K>()
where
    A: ?Sized + Comparable<Kind = K>,
    B: ?Sized + Comparable<Kind = K>,
{
}
