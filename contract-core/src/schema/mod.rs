//! JSON Schema renderings: draft 2020-12 (through schemars) and the OpenAI strict subset.

use serde_json::Value;

use crate::contract::{Contract, ContractSpec};

/// A strict-subset schema and what had to be moved into descriptions to get it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StrictSchema {
    /// The schema, valid for `response_format: {type: json_schema, strict: true}`.
    pub schema: Value,
    /// Every keyword the subset cannot carry, and where its meaning went.
    pub moved: Vec<Moved>,
}

/// One keyword the strict subset cannot carry.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Moved {
    /// JSON pointer of the subschema in the source schema.
    pub path: String,
    /// The keyword (`minLength`, `x-unit`, `title`).
    pub keyword: String,
    /// Its value in the source schema.
    pub value: Value,
    /// What became of it: `description` (its meaning is now in the description text) or
    /// `dropped` (annotations with no meaning for the model: `title`, `$schema`, `default`, `examples`).
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
    /// todo
    #[error("todo")]
    Todo,
}

/// `C::json_schema()`.
pub fn root_schema<C: Contract>() -> Value {
    todo!()
}

/// The schema of `spec` inside `generator` (the body of a contract's `impl JsonSchema`).
pub fn contract_schema(spec: &ContractSpec, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let _ = (spec, generator);
    todo!()
}

/// Converts a draft 2020-12 schema into the OpenAI strict subset.
pub fn strict_schema(schema: &Value) -> Result<StrictSchema, StrictSchemaError> {
    let _ = schema;
    todo!()
}
