//! The [`Contract`] trait, what a typed contract is to the rest of the crate, and [`FieldType`],
//! what each Rust field type is to the IR: a thin facade. Its methods are plain functions of the
//! contract's IR ([`ContractSpec`], in [`crate::ir`]; the field attributes in [`crate::attrs`]):
//! `json_schema()`, `strict_schema()`, `signature()`, `grammar()`, `docs_markdown()` and the
//! validators. Nothing they call names this trait: the validator reads a typed contract through
//! [`Checked`](crate::validate::Checked), which every contract is.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::context::DocContext;
use crate::schema::StrictSchemaError;
use crate::validate::{Violation, Violations};

pub use crate::attrs::{CmpOp, FieldAttrs, Form, Format, Grounding, Pattern, Rule};
pub use crate::ir::{ContractRef, ContractSpec, ExternalRef, TypeSpec};

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
        crate::schema::root_schema(Self::contract_spec())
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

impl<C: Contract> crate::validate::Checked for C {
    fn checked_spec() -> &'static ContractSpec {
        C::contract_spec()
    }

    fn checked_normalize(&mut self, cx: &DocContext<'_>, pointer: &str, out: &mut Violations) {
        self.normalize(cx, pointer, out);
    }

    fn checked_run_checks(&self, cx: &DocContext<'_>, pointer: &str, out: &mut Violations) {
        self.run_checks(cx, pointer, out);
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

impl ContractRef {
    /// The reference to contract `C`.
    pub fn of<C: Contract + schemars::JsonSchema>() -> Self {
        ContractRef::new(C::contract_spec, |generator| generator.subschema_for::<C>())
    }
}

/// A custom check's result, as written by users: `fn(&Self) -> CheckResult`.
pub type CheckResult = Result<(), Violation>;
