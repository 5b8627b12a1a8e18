//! JSON Schema renderings: draft 2020-12 (through schemars), the OpenAI strict subset and
//! Anthropic's.
//!
//! [`contract_schema`] is the body of every contract's `impl JsonSchema`; [`root_schema`] wraps
//! it into a standalone document; [`strict_schema`] turns any draft 2020-12 schema into the
//! subset OpenAI accepts with `strict: true`, moving what the subset cannot carry into
//! descriptions and recording every move; [`anthropic_schema`] does the same for Anthropic's
//! structured outputs, whose subset is smaller.

mod draft;
mod limits;
pub(crate) mod pointer;
mod strict;
mod strict_output;

use serde_json::Value;

use crate::ir::ContractSpec;

pub use draft::DRAFT_2020_12;
pub use limits::{
    check_limits, MAX_ENUM_VALUES, MAX_LARGE_ENUM_TEXT, MAX_NESTING, MAX_PROPERTIES,
    MAX_SMALL_ENUM_VALUES, MAX_TOTAL_TEXT,
};
pub use strict::{anthropic_schema, strict_schema, subset_schema, Subset, STRICT_FORMATS};
pub use strict_output::{Moved, StrictSchema, StrictSchemaError};

/// The contract `spec` describes (a derived contract's, or a part of one:
/// [`ContractSpec::subset`]) as a standalone draft 2020-12 document: `C::json_schema()`.
///
/// `$schema` and `title` come first, then the contract's own schema, then `$defs` with every
/// nested contract (and any schemars type used as a field). A contract that refers to itself
/// refers to the root (`"$ref": "#"`).
pub fn root_schema(spec: &ContractSpec) -> Value {
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
