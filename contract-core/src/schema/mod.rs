//! JSON Schema renderings: draft 2020-12 (through schemars), the OpenAI strict subset and
//! Anthropic's.
//!
//! [`contract_schema`] is the body of every contract's `impl JsonSchema`; [`root_schema`] wraps
//! it into a standalone document; [`strict_schema`] turns any draft 2020-12 schema into the
//! subset OpenAI accepts with `strict: true`, moving what the subset cannot carry into
//! descriptions and recording every move; [`anthropic_schema`] does the same for Anthropic's
//! structured outputs, whose subset is smaller.

pub(crate) mod bounds;
mod draft;
mod limits;
pub(crate) mod pointer;
mod strict;

use serde_json::Value;

use crate::contract::{Contract, ContractSpec};

pub use limits::{
    check_limits, MAX_ENUM_VALUES, MAX_LARGE_ENUM_TEXT, MAX_NESTING, MAX_PROPERTIES,
    MAX_SMALL_ENUM_VALUES, MAX_TOTAL_TEXT,
};
pub use strict::{anthropic_schema, strict_schema, subset_schema, Subset, STRICT_FORMATS};

/// The `$schema` of every document [`root_schema`] returns.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// A strict-subset schema and what had to be moved into descriptions to get it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StrictSchema {
    /// The schema, valid for `response_format: {type: json_schema, strict: true}`.
    pub schema: Value,
    /// Every keyword the subset cannot carry, and where its meaning went.
    pub moved: Vec<Moved>,
}

/// One keyword the strict subset cannot carry as it was.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Moved {
    /// JSON pointer of the subschema in the source schema.
    pub path: String,
    /// The keyword (`minLength`, `x-unit`, `title`).
    pub keyword: String,
    /// Its value in the source schema.
    pub value: Value,
    /// What became of it:
    ///
    /// - `description`: its meaning is now in the subschema's description text;
    /// - `dropped`: an annotation with no meaning for the model (`title`, `$schema`, `default`,
    ///   `examples`, `$comment`);
    /// - `nullable`: properties that were optional are now required and accept `null` instead
    ///   (`keyword` is `required`, `value` the original list);
    /// - `anyOf`: a `oneOf` became an `anyOf` (the branches of a model answer are read as
    ///   alternatives; exclusivity is not enforced);
    /// - `merged`: an `allOf` was merged into its parent schema;
    /// - `inlined`: a `$ref` with sibling keywords was replaced by the referenced schema, since
    ///   the subset does not allow keywords beside a `$ref`.
    pub into: String,
}

/// Why a schema has no strict-subset rendering.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StrictSchemaError {
    /// The root is not an object schema.
    #[error("the root of a strict schema must be an object, found {found}")]
    RootNotObject {
        /// What the root is.
        found: String,
    },
    /// Objects nest deeper than the subset allows.
    #[error(
        "objects nest {depth} levels deep at `{path}`, the strict subset allows at most {limit}"
    )]
    TooDeep {
        /// JSON pointer of the deepest object found.
        path: String,
        /// Its nesting level (the root object is level 1).
        depth: usize,
        /// The limit.
        limit: usize,
    },
    /// Too many object properties in the whole schema.
    #[error("the schema has {count} object properties, the strict subset allows at most {limit}")]
    TooManyProperties {
        /// Properties of every object schema, counted once per subschema.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// Too many enum values in the whole schema.
    #[error("the schema has {count} enum values, the strict subset allows at most {limit}")]
    TooManyEnumValues {
        /// Values of every `enum`, added up.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// One large string enum whose values are too long in total.
    #[error(
        "the enum at `{path}` has {values} values of {length} characters in total, the strict \
         subset allows at most {limit} characters for an enum of more than {large} values"
    )]
    EnumTooLong {
        /// JSON pointer of the enum's subschema.
        path: String,
        /// How many values it has.
        values: usize,
        /// Their total length in characters.
        length: usize,
        /// The limit on the total length.
        limit: usize,
        /// The number of values above which the limit applies.
        large: usize,
    },
    /// Property names, definition names, enum and const values are too long in total.
    #[error(
        "property names, definition names, enum and const values add up to {length} characters, \
         the strict subset allows at most {limit}"
    )]
    TooMuchText {
        /// Their total length in characters.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// A subschema accepts any JSON value, which the subset cannot express.
    #[error("`{path}` accepts any JSON value; the strict subset needs a type")]
    AnyValue {
        /// JSON pointer of the subschema in the source schema.
        path: String,
    },
    /// A `$ref` that does not point into the schema's definitions.
    #[error("`$ref` `{reference}` at `{path}` does not resolve")]
    UnresolvedRef {
        /// JSON pointer of the subschema in the source schema.
        path: String,
        /// The reference.
        reference: String,
    },
    /// The input is not a well-formed JSON Schema.
    #[error("`{path}` is not a valid schema: {reason}")]
    Invalid {
        /// JSON pointer of the offending subschema.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// `C::json_schema()`: a standalone draft 2020-12 document.
///
/// `$schema` and `title` come first, then the contract's own schema, then `$defs` with every
/// nested contract (and any schemars type used as a field). A contract that refers to itself
/// refers to the root (`"$ref": "#"`).
pub fn root_schema<C: Contract>() -> Value {
    draft::root_schema(C::contract_spec())
}

/// [`root_schema`] of the contract `spec` describes (a derived contract's, or a part of one:
/// [`ContractSpec::subset`]).
pub fn spec_root_schema(spec: &ContractSpec) -> Value {
    draft::root_schema(spec)
}

/// The schema of `spec` inside `generator` (the body of a contract's `impl JsonSchema`).
///
/// Nested contracts are `$ref`s into the generator's definitions.
pub fn contract_schema(
    spec: &ContractSpec,
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    draft::contract_schema(spec, generator)
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
