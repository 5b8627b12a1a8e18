//! What a strict-subset rendering gives: the schema and what moved ([`StrictSchema`],
//! [`Moved`]), or why there is none ([`StrictSchemaError`]). Read by the conversion
//! (`strict`, `strict/refs`) and by the limits check (`limits`).

use serde_json::Value;

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

/// A [`StrictSchemaError::Invalid`] at `path`.
pub(super) fn invalid(path: &str, reason: &str) -> StrictSchemaError {
    StrictSchemaError::Invalid {
        path: path.to_owned(),
        reason: reason.to_owned(),
    }
}
