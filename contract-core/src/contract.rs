//! The [`Contract`] trait, the [`ContractSpec`] the derive builds per type (its name and its IR
//! node, [`crate::ir`]), and what the derive reads from Rust types and attributes to build it
//! ([`TypeSpec`], [`Constraints`]).
//!
//! `json_schema()`, `strict_schema()`, `signature()`, `grammar()`, `docs_markdown()` and the
//! validators are plain functions of the IR.

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Number, Value};

use crate::context::DocContext;
use crate::ir::{FieldSpec, Node, ObjectNode};
use crate::schema::StrictSchemaError;
use crate::validate::{Violation, Violations};

/// A type a language model can be asked to fill.
///
/// Implemented by `#[derive(Contract)]`, which also implements `schemars::JsonSchema` (call
/// `<T as Contract>::json_schema()` when both traits are in scope); every method except [`Contract::contract_spec`] has a
/// default computed from the IR, so a derived contract and a hand-written one behave alike.
///
/// A contract is an owned type (`'static`): what backends need of it is rendered once per type
/// and shared ([`Constraint::of`](crate::Constraint::of)).
pub trait Contract: FieldType + Serialize + DeserializeOwned + Sized + 'static {
    /// The IR every rendering is computed from.
    fn contract_spec() -> &'static ContractSpec;

    /// Runs the custom `check = path::to::fn` functions of this contract and of every nested
    /// contract value, pushing what they report (paths prefixed with `pointer`). A check may
    /// read the document the value came from (`fn(&Self, &DocContext) -> CheckResult`); `cx` is
    /// [`DocContext::none`] when there is none.
    ///
    /// The derive implements it; a hand-written contract without custom checks keeps the default.
    fn run_checks(&self, cx: &DocContext<'_>, pointer: &str, out: &mut Violations) {
        let _ = (cx, pointer, out);
    }

    /// Computes what code derives from the copied values, in this contract and every nested
    /// contract value: the `normalize = path::to::fn` functions
    /// (`fn(&mut Self, &DocContext) -> CheckResult`), nested values first. A value that cannot
    /// be read (an ambiguous or impossible date, a currency that names none) is a violation
    /// pushed into `out` (paths prefixed with `pointer`), never a guess.
    ///
    /// Runs after decoding and before the checks, whenever a contract is read
    /// ([`Contract::from_json`], [`Contract::from_json_in`], the extractor). The derive
    /// implements it; a hand-written contract keeps the default, which does nothing.
    fn normalize(&mut self, cx: &DocContext<'_>, pointer: &str, out: &mut Violations) {
        let _ = (cx, pointer, out);
    }

    /// JSON Schema draft 2020-12 for this contract (`$schema` set, nested contracts in `$defs`).
    fn json_schema() -> Value {
        crate::schema::root_schema::<Self>()
    }

    /// The OpenAI strict structured-outputs subset of [`Contract::json_schema`].
    ///
    /// # Panics
    ///
    /// When the contract breaks a limit of the subset (root not an object, nesting, property or
    /// enum counts). That is a property of the type, not of any input; use
    /// [`Contract::try_strict_schema`] to get the error as a value.
    fn strict_schema() -> Value {
        match Self::try_strict_schema() {
            Ok(schema) => schema,
            Err(e) => panic!("`{}` has no strict schema: {e}", Self::contract_spec().name),
        }
    }

    /// The OpenAI strict subset, or why this contract cannot be expressed in it.
    fn try_strict_schema() -> Result<Value, StrictSchemaError> {
        crate::schema::strict_schema(&Self::json_schema()).map(|s| s.schema)
    }

    /// One line a model reads: every field with its type, constraints and unit, nested inline.
    fn signature() -> String {
        crate::signature::signature(Self::contract_spec())
    }

    /// The token-mask spec the local backend decodes with: an llguidance JSON Schema (keys in
    /// order, bounds, enums, patterns) plus every object's cross-field rules.
    fn grammar() -> crate::grammar::Grammar {
        crate::grammar::Grammar::of(Self::contract_spec())
    }

    /// A field reference in Markdown for humans.
    fn docs_markdown() -> String {
        crate::docs::docs_markdown(Self::contract_spec())
    }

    /// Strict parse plus every check; all violations are reported at once. Values are
    /// normalised ([`Contract::normalize`]) without a document.
    fn from_json(text: &str) -> Result<Self, Violations> {
        crate::validate::from_json::<Self>(text)
    }

    /// [`Contract::from_json`] plus the grounding check against `source`: every grounded value
    /// that is not in its text is a `not_in_source` violation (path, the value, where it was
    /// looked for), reported with the other violations. Values are normalised and checked
    /// with `source` as their document ([`DocContext::of`]).
    fn from_json_in(text: &str, source: &crate::source::Source) -> Result<Self, Violations> {
        crate::ground::from_json_in::<Self>(text, source)
    }

    /// Checks a JSON value against the contract and, when it passes, deserializes it,
    /// normalises it and runs its checks without a document.
    fn from_value(value: &Value) -> Result<Self, Violations> {
        crate::validate::from_value::<Self>(value)
    }

    /// [`Contract::from_value`] with the values normalised and checked against `cx`'s document.
    fn from_value_in(value: &Value, cx: &DocContext<'_>) -> Result<Self, Violations> {
        crate::validate::from_value_in::<Self>(value, cx)
    }

    /// Checks a typed value: field constraints, cross-field rules and custom checks.
    fn validate(&self) -> Result<(), Violations> {
        crate::validate::validate_typed(self)
    }

    /// The value as a model writes it: serialized, without the fields code fills in
    /// (`#[contract(skip)]`, such as [`DateValue::iso`](crate::DateValue)) at any level. What
    /// [`Contract::from_json`] reads back (a worked example for a prompt, a test's perfect
    /// reply).
    fn to_model_json(&self) -> Result<Value, serde_json::Error> {
        let mut value = serde_json::to_value(self)?;
        crate::validate::strip_skipped(Self::contract_spec(), &mut value);
        Ok(value)
    }
}

/// A type that can be a field of a contract: it knows its [`TypeSpec`].
///
/// Implemented for `bool`, the integer and float types, `String`, `Option<T>`, `Vec<T>`,
/// `Box<T>` and every contract.
pub trait FieldType {
    /// The type as the IR sees it.
    fn type_spec() -> TypeSpec;

    /// Runs the custom checks of contract values inside `self` (nested contracts, lists of
    /// them). `self` sits at JSON pointer `parent` + `/key`; implementations build that pointer
    /// only when they have checks to run, so plain fields cost `from_json` no allocation.
    fn run_nested_checks(
        &self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        let _ = (cx, parent, key, out);
    }

    /// Normalises the contract values inside `self` ([`Contract::normalize`]), at JSON pointer
    /// `parent` + `/key`.
    fn normalize_nested(
        &mut self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        let _ = (cx, parent, key, out);
    }
}

/// One contract as the derive declares it: its name and its IR node (a closed object with
/// fields and rules, or a string enum).
#[derive(Debug, Clone)]
pub struct ContractSpec {
    /// The Rust type name, also the schema name (`Guidance`, `Evidenced_for_Amount`).
    pub name: String,
    /// The contract's IR: an object node (fields, rules, custom checks, skipped fields) or a
    /// string node with an `enum`; its description is the doc comment or
    /// `#[contract(description = "..")]`.
    pub node: Node,
}

/// A field's Rust type as [`FieldType`] describes it: what [`Node::field`] builds the field's
/// IR node from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TypeSpec {
    /// `true` / `false`.
    Bool,
    /// An integer within the Rust type's bounds.
    Integer {
        /// Smallest value of the Rust type.
        min: i128,
        /// Largest value of the Rust type.
        max: i128,
    },
    /// A JSON number (`f32`, `f64`).
    Number,
    /// A JSON string.
    String,
    /// `Option<T>`: required, but may be `null`.
    Nullable(Box<TypeSpec>),
    /// `Vec<T>`: a JSON array.
    List(Box<TypeSpec>),
    /// A nested contract.
    Contract(ContractRef),
    /// Any other `schemars::JsonSchema` type, used through its own schema.
    External(ExternalRef),
}

/// A reference to a nested contract, resolved lazily so recursive contracts work.
#[derive(Clone, Copy)]
pub struct ContractRef {
    spec: fn() -> &'static ContractSpec,
    schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl ContractRef {
    /// The reference to contract `C`.
    pub fn of<C: Contract + schemars::JsonSchema>() -> Self {
        ContractRef {
            spec: C::contract_spec,
            schema: |generator| generator.subschema_for::<C>(),
        }
    }

    /// The nested contract's IR.
    pub fn spec(&self) -> &'static ContractSpec {
        (self.spec)()
    }

    /// The nested contract's schema in `generator` (a `$ref` into its definitions).
    pub fn subschema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.schema)(generator)
    }
}

impl fmt::Debug for ContractRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ContractRef")
            .field(&self.spec().name)
            .finish()
    }
}

/// A field type that is not a contract but implements `schemars::JsonSchema`.
///
/// Its schema is used as schemars renders it; values are checked by deserialization only.
#[derive(Clone)]
pub struct ExternalRef {
    name: fn() -> Cow<'static, str>,
    schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl ExternalRef {
    /// The reference to the schemars type `T`.
    pub fn of<T: schemars::JsonSchema>() -> Self {
        ExternalRef {
            name: T::schema_name,
            schema: |generator| generator.subschema_for::<T>(),
        }
    }

    /// The type's schema name.
    pub fn name(&self) -> Cow<'static, str> {
        (self.name)()
    }

    /// The type's schema in `generator`.
    pub fn subschema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.schema)(generator)
    }

    /// The type's schema as a standalone draft 2020-12 document.
    pub fn standalone_schema(&self) -> Value {
        let mut generator = schemars::generate::SchemaSettings::draft2020_12()
            .with(|s| s.meta_schema = None)
            .into_generator();
        let schema = self.subschema(&mut generator);
        let mut value = schema.to_value();
        let defs = generator.take_definitions(true);
        if !defs.is_empty() {
            if let Value::Object(map) = &mut value {
                map.insert("$defs".into(), Value::Object(defs));
            }
        }
        value
    }
}

impl fmt::Debug for ExternalRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ExternalRef").field(&self.name()).finish()
    }
}

/// A field's constraint attributes, as the derive reads them.
///
/// Numeric bounds, `pattern`, `format` and `one_of` apply to the scalar inside `Option` and
/// `Vec`; `len` applies to the string or list itself: [`Node::field`] places each on the IR node
/// it applies to, once, and nothing downstream reads this again.
#[derive(Debug, Clone, Default)]
pub struct Constraints {
    /// `value >= minimum`.
    pub minimum: Option<Number>,
    /// `value <= maximum`.
    pub maximum: Option<Number>,
    /// `value > exclusive_minimum`.
    pub exclusive_minimum: Option<Number>,
    /// `value < exclusive_maximum`.
    pub exclusive_maximum: Option<Number>,
    /// Shortest string (in characters) or list.
    pub min_len: Option<u64>,
    /// Longest string (in characters) or list.
    pub max_len: Option<u64>,
    /// A regular expression the string must contain a match of (JSON Schema semantics:
    /// unanchored; anchor it with `^...$`).
    pub pattern: Option<Pattern>,
    /// The allowed values.
    pub one_of: Option<Vec<Value>>,
    /// A string format.
    pub format: Option<Format>,
    /// Where the value must be found: a grounded value is copied from the source, never
    /// composed by the model (`#[contract(grounded)]`).
    pub grounded: Option<Grounding>,
    /// What kind of expression a text value is (`#[contract(form = date)]`): copied whole from
    /// the document when grounded, and read by code afterwards.
    pub form: Option<Form>,
    /// The question that finds the field's evidence (`#[contract(question = "..")]`), asked of
    /// every passage of a document; by default one is made from the field's doc comment.
    pub question: Option<String>,
    /// The fields judged and extracted together (`#[contract(group = "..")]`): fields with the
    /// same group share their evidence passages.
    pub group: Option<String>,
}

/// Where a grounded value must be found.
///
/// A grounded string is a verbatim substring of that text (whitespace runs compare equal); a
/// grounded number is a number the text writes, read with the text's numeral conventions and
/// compared as decimal text. For `Option` and `Vec` fields it applies to each value inside.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grounding {
    /// Anywhere in the source document (`#[contract(grounded)]`).
    Source,
    /// A whole line of the source document, its surrounding whitespace trimmed; where the layout
    /// wrapped a sentence over two or three lines, the whole sentence instead, its line breaks
    /// written as spaces (`#[contract(grounded(line))]`;
    /// [`ground::quotable_lines`](crate::ground::quotable_lines)): a quoted sentence that cannot
    /// stop halfway.
    Line,
    /// Inside the text of an earlier field of the same object, by JSON name
    /// (`#[contract(grounded(in = quote))]`): the string itself, or the source lines of the
    /// spans inside it.
    In(String),
    /// Inside the source lines from the value of field `start` to the value of field `end`
    /// (1-based, inclusive), both earlier integer fields of the same object
    /// (`#[contract(grounded(in = start_line..=end_line))]`): how [`Span::quote`](crate::Span)
    /// lies in its lines.
    Lines {
        /// The field holding the first line.
        start: String,
        /// The field holding the last line.
        end: String,
    },
    /// Grounded where the value containing it is grounded, in the same text; not grounded
    /// otherwise (`#[contract(grounded(with_container))]`): how `Amount.value` and `Amount.unit`
    /// are copied when an `Amount` field is grounded.
    WithContainer,
}

impl Grounding {
    /// The fields of the same object this grounding reads.
    pub fn depends_on(&self) -> Vec<&str> {
        match self {
            Grounding::In(field) => vec![field.as_str()],
            Grounding::Lines { start, end } => vec![start.as_str(), end.as_str()],
            Grounding::Source | Grounding::Line | Grounding::WithContainer => Vec::new(),
        }
    }

    /// Reads the JSON Schema keyword `x-grounded` (as [`Contract::json_schema`] writes it).
    pub fn from_keyword(value: &Value) -> Option<Grounding> {
        match value {
            Value::String(s) if s == "source" => Some(Grounding::Source),
            Value::String(s) if s == "line" => Some(Grounding::Line),
            Value::String(s) if s == "with_container" => Some(Grounding::WithContainer),
            Value::Object(m) => {
                if let Some(Value::String(field)) = m.get("in") {
                    return Some(Grounding::In(field.clone()));
                }
                match m.get("lines").and_then(Value::as_array).map(Vec::as_slice) {
                    Some([Value::String(start), Value::String(end)]) => Some(Grounding::Lines {
                        start: start.clone(),
                        end: end.clone(),
                    }),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// How a reader is told where the value comes from (`copied from the document`).
    pub fn words(&self) -> String {
        match self {
            Grounding::Source => "copied from the document".into(),
            Grounding::Line => "a whole line copied from the document".into(),
            Grounding::In(field) => format!("copied from `{field}`"),
            Grounding::Lines { start, end } => {
                format!("copied from lines `{start}`..`{end}`")
            }
            Grounding::WithContainer => "copied where its container is".into(),
        }
    }
}

impl Constraints {
    /// Whether no constraint is set.
    pub fn is_empty(&self) -> bool {
        self.minimum.is_none()
            && self.maximum.is_none()
            && self.exclusive_minimum.is_none()
            && self.exclusive_maximum.is_none()
            && self.min_len.is_none()
            && self.max_len.is_none()
            && self.pattern.is_none()
            && self.one_of.is_none()
            && self.format.is_none()
            && self.grounded.is_none()
            && self.form.is_none()
            && self.question.is_none()
            && self.group.is_none()
    }
}

/// A compiled `pattern`.
#[derive(Clone)]
pub struct Pattern {
    source: String,
    regex: Option<regex::Regex>,
}

impl Pattern {
    /// Compiles `source`.
    pub fn new(source: &str) -> Result<Self, regex::Error> {
        Ok(Pattern {
            source: source.to_owned(),
            regex: Some(regex::Regex::new(source)?),
        })
    }

    /// A pattern kept as text only: a runtime schema's pattern in a dialect the `regex` crate
    /// does not compile (lookaround, backreferences). The renderings show it; the runtime
    /// contract's validator (the `jsonschema` crate) enforces it; [`Pattern::is_match`] does not.
    pub fn uncompiled(source: &str) -> Self {
        Pattern {
            source: source.to_owned(),
            regex: None,
        }
    }

    /// Whether the pattern compiled (always, for a derived contract's: the derive checks them).
    pub fn is_compiled(&self) -> bool {
        self.regex.is_some()
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `text` contains a match (`true` for an [uncompiled](Pattern::uncompiled)
    /// pattern, which this crate does not check).
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.as_ref().is_none_or(|r| r.is_match(text))
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.source)
    }
}

/// The kind of expression a text value is: what a grounded value must be copied whole as, and
/// what code reads it as afterwards (`#[contract(form = date)]`, the JSON Schema keyword
/// `x-form`).
///
/// A grounded value with a form is one whole expression of that kind the document writes (a
/// model cannot copy `2018` out of `05 MAR 2018`, nor `3` out of `three (3) years`); an
/// ungrounded one must read as such an expression. The value types carry it on the text the
/// model copies: [`DateValue::original`](crate::DateValue) is a date, an
/// [`Amount`](crate::Amount)'s currency a currency and its unit a scale word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Form {
    /// A calendar date as written (`05 MAR 2018`, `19/10/2018`, `April 18, 2001`).
    Date,
    /// A currency as written (`RM`, `$`, `€`, `USD`, `euros`).
    Currency,
    /// A scale word as written (`million`, `bn`, `mil millones`).
    Scale,
    /// A reporting period as written (`Q3 2024`, `the upcoming quarter`, `fiscal 2025`).
    Period,
    /// A length of time as written (`three (3) years`, `12 months`).
    Duration,
}

impl Form {
    /// Every form, in the order the docs list them.
    pub const ALL: [Form; 5] = [
        Form::Date,
        Form::Currency,
        Form::Scale,
        Form::Period,
        Form::Duration,
    ];

    /// The name `x-form` and `#[contract(form = ..)]` use (`date`).
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Date => "date",
            Form::Currency => "currency",
            Form::Scale => "scale",
            Form::Period => "period",
            Form::Duration => "duration",
        }
    }

    /// The form named `name`.
    pub fn from_name(name: &str) -> Option<Form> {
        Form::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// How a reader is told what the value is (`a date as written`).
    pub fn words(self) -> &'static str {
        match self {
            Form::Date => "a date as written",
            Form::Currency => "a currency as written",
            Form::Scale => "a scale word as written",
            Form::Period => "a period as written",
            Form::Duration => "a length of time as written",
        }
    }
}

/// String formats a contract field may require.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// `2024-03-15` (RFC 3339 full-date).
    Date,
    /// `2024-03-15T10:00:00Z` (RFC 3339 date-time).
    DateTime,
    /// `10:00:00Z` (RFC 3339 full-time).
    Time,
    /// An e-mail address.
    Email,
    /// A hyphenated UUID.
    Uuid,
    /// An IPv4 address.
    Ipv4,
    /// An IPv6 address.
    Ipv6,
    /// A DNS host name.
    Hostname,
}

impl Format {
    /// Every supported format, in the order the docs list them.
    pub const ALL: [Format; 8] = [
        Format::Date,
        Format::DateTime,
        Format::Time,
        Format::Email,
        Format::Uuid,
        Format::Ipv4,
        Format::Ipv6,
        Format::Hostname,
    ];

    /// The JSON Schema name (`date-time`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Date => "date",
            Format::DateTime => "date-time",
            Format::Time => "time",
            Format::Email => "email",
            Format::Uuid => "uuid",
            Format::Ipv4 => "ipv4",
            Format::Ipv6 => "ipv6",
            Format::Hostname => "hostname",
        }
    }

    /// The format with this JSON Schema name.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

pub use contract_rules::{CmpOp, Rule};

impl ContractSpec {
    /// The contract's IR node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The contract's description.
    pub fn description(&self) -> Option<&str> {
        self.node.description.as_deref()
    }

    /// The object part (fields, rules, checks), when this is an object contract.
    pub fn object(&self) -> Option<&ObjectNode> {
        self.node.object.as_deref()
    }

    /// The field with JSON name `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSpec> {
        self.object()?.field(name)
    }

    /// The values of an enum contract.
    pub fn variants(&self) -> Option<&[Value]> {
        self.node.enumeration.as_deref()
    }

    /// The same contract with only the fields named in `fields` (JSON names; others are left
    /// out, unknown names ignored) and the rules among them: what a model is asked when a
    /// document's evidence for a few fields is judged and extracted apart from the rest
    /// ([`select`](crate::select)). The renderings of the part are the whole contract's
    /// renderings restricted to those fields.
    pub fn subset(&self, fields: &[&str]) -> ContractSpec {
        let mut node = self.node.clone();
        if let Some(object) = node.object.as_deref_mut() {
            object
                .properties
                .retain(|f| fields.contains(&f.name.as_str()));
            object.required.retain(|f| fields.contains(&f.as_str()));
            object
                .rules
                .retain(|r| r.fields().iter().all(|f| fields.contains(&f.as_str())));
        }
        ContractSpec {
            name: self.name.clone(),
            node,
        }
    }
}

/// A custom check's result, as written by users: `fn(&Self) -> CheckResult`.
pub type CheckResult = Result<(), Violation>;
