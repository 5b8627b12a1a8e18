//! Runtime contracts: the contract machinery for a JSON Schema received at run time (function
//! calling, MCP tools, a schema from a configuration file), without a Rust type.
//!
//! [`DynContract::from_schema`] checks the schema once and gives the same renderings as a derived
//! contract: [`signature`](DynContract::signature), [`strict_schema`](DynContract::strict_schema)
//! (with what the strict subset could not carry), the token-mask
//! [`grammar`](DynContract::grammar), [`docs_markdown`](DynContract::docs_markdown) and
//! [`validate`](DynContract::validate).
//!
//! Not every keyword reaches every rendering: llguidance's mask has no `not` or `uniqueItems`, the
//! signature leaves out `if`/`then`/`else`, an unknown keyword means nothing to anyone. Each such
//! keyword is listed in [`DynContract::gaps`] with its JSON pointer and the renderings that do
//! not carry it; none is dropped silently. The validator (the `jsonschema` crate, formats
//! enforced, no remote references) carries every keyword of the schema's draft, so a value that
//! passes the mask and then [`DynContract::validate`] satisfies the whole schema.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::grammar::Whitespace;
use crate::schema::{StrictSchema, StrictSchemaError};
use crate::validate::{Violation, ViolationKind, Violations};

mod convert;
mod json_type;
mod keywords;
mod resolve;
mod subschemas;
pub(crate) mod typed;
mod validator;
pub(crate) mod values;

#[cfg(test)]
mod tests;

pub use crate::grammar::GRAMMAR_FORMATS;
pub use keywords::VALIDATOR_FORMATS;

/// A contract built at run time from a JSON Schema document.
///
/// ```
/// use contract_core::DynContract;
/// use serde_json::json;
///
/// let contract = DynContract::from_schema(json!({
///     "title": "Weather",
///     "type": "object",
///     "properties": {
///         "city": {"type": "string", "minLength": 1},
///         "unit": {"enum": ["celsius", "fahrenheit"]},
///         "days": {"type": "integer", "minimum": 1, "maximum": 14}
///     },
///     "required": ["city", "unit"],
///     "additionalProperties": false
/// }))
/// .unwrap();
///
/// assert_eq!(
///     contract.signature(),
///     r#"{"city": string (1+ chars), "unit": "celsius" | "fahrenheit", "days"?: integer 1-14}"#
/// );
/// assert!(contract.validate(&json!({"city": "Oslo", "unit": "celsius"})).is_ok());
/// let err = contract.validate(&json!({"city": "Oslo", "days": 30})).unwrap_err();
/// let found: Vec<_> = err.iter().map(|v| (v.path.as_str(), v.kind.as_str())).collect();
/// assert_eq!(found, [("/unit", "missing_field"), ("/days", "out_of_range")]);
/// assert!(contract.gaps().is_empty()); // every keyword reaches every rendering
/// ```
#[derive(Clone)]
pub struct DynContract {
    schema: Value,
    document: crate::ir::Document,
    gaps: Vec<Gap>,
    validator: jsonschema::Validator,
}

impl fmt::Debug for DynContract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynContract")
            .field("name", &self.document.name)
            .field("gaps", &self.gaps.len())
            .finish_non_exhaustive()
    }
}

/// A rendering of a contract that may not carry every keyword of a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rendering {
    /// The one-line signature the model reads.
    Signature,
    /// The token mask (llguidance's JSON Schema compiler).
    Grammar,
    /// The validator run on the decoded value.
    Validator,
}

impl Rendering {
    /// The snake_case name (`grammar`).
    pub fn as_str(self) -> &'static str {
        match self {
            Rendering::Signature => "signature",
            Rendering::Grammar => "grammar",
            Rendering::Validator => "validator",
        }
    }
}

impl fmt::Display for Rendering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A keyword some renderings do not carry (fully).
///
/// The Markdown docs list every keyword and the strict schema reports its own changes
/// ([`StrictSchema::moved`]), so neither appears in [`Gap::missing`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    /// JSON pointer of the subschema holding the keyword (`/properties/tags`).
    pub path: String,
    /// The keyword (`uniqueItems`).
    pub keyword: String,
    /// Its value in the schema.
    pub value: Value,
    /// The renderings that do not carry it.
    pub missing: Vec<Rendering>,
    /// What happens instead (`enforced by the validator only`).
    pub note: String,
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        let missing: Vec<&str> = self.missing.iter().map(|r| r.as_str()).collect();
        write!(
            f,
            "`{}` at `{path}`: not in the {} ({})",
            self.keyword,
            missing.join(", "),
            self.note
        )
    }
}

/// Why a JSON Schema cannot be a contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The document (or one of its subschemas) is not a schema.
    #[error("`{}` is not a valid schema: {reason}", show(path))]
    Invalid {
        /// JSON pointer of the offending part of the schema.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A `$ref` that does not resolve inside the document (remote references are not fetched).
    #[error("`$ref` `{reference}` at `{}` does not resolve", show(path))]
    UnresolvedRef {
        /// JSON pointer of the subschema holding the `$ref`.
        path: String,
        /// The reference.
        reference: String,
    },
    /// The root schema accepts no value at all (`false`), so no answer could fill it.
    #[error("the root schema `false` accepts no value")]
    Unsatisfiable,
    /// Subschemas nest deeper than [`MAX_SCHEMA_DEPTH`].
    #[error("subschemas nest deeper than {limit} levels at `{}`", show(path))]
    TooDeep {
        /// JSON pointer where the limit was reached.
        path: String,
        /// The limit.
        limit: usize,
    },
    /// An `x-rules` entry that is not a rule.
    #[error(
        "`{}`: unknown rule `{rule}` (expected `a <= b`, `both_or_neither(a, b)` or \
         `at_least_one(a, b)`)",
        show(path)
    )]
    BadRule {
        /// JSON pointer of the entry.
        path: String,
        /// The entry as written.
        rule: String,
    },
}

fn show(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

/// Most levels of subschema nesting [`DynContract::from_schema`] accepts.
pub const MAX_SCHEMA_DEPTH: usize = 256;

impl DynContract {
    /// Checks `schema` and builds its contract.
    ///
    /// Drafts 4, 6, 7, 2019-09 and 2020-12 are read (by `$schema`; 2020-12 when absent).
    /// `$ref` may point anywhere inside the document (`#/$defs/..`, `#/definitions/..`, anchors,
    /// embedded `$id`s); remote references are never fetched and fail. Keywords some renderings
    /// cannot carry are listed in [`DynContract::gaps`].
    ///
    /// ```
    /// use contract_core::dynamic::{DynContract, Rendering, SchemaError};
    /// use serde_json::json;
    ///
    /// let tags = DynContract::from_schema(json!({
    ///     "type": "array",
    ///     "items": {"$ref": "#/$defs/tag"},
    ///     "uniqueItems": true,
    ///     "$defs": {"tag": {"type": "string", "pattern": "^[a-z]+$"}}
    /// }))
    /// .unwrap();
    /// assert_eq!(tags.signature(), "[string /^[a-z]+$/, ...] (unique)");
    /// let gap = &tags.gaps()[0];
    /// assert_eq!((gap.keyword.as_str(), gap.path.as_str()), ("uniqueItems", ""));
    /// assert_eq!(gap.missing, [Rendering::Grammar]); // the mask cannot see duplicates
    /// assert!(tags.validate(&json!(["a", "a"])).is_err()); // the validator can
    ///
    /// let err = DynContract::from_schema(json!({"$ref": "#/$defs/missing"})).unwrap_err();
    /// assert!(matches!(err, SchemaError::UnresolvedRef { .. }));
    /// assert_eq!(err.to_string(), "`$ref` `#/$defs/missing` at `/` does not resolve");
    /// ```
    ///
    /// # Errors
    ///
    /// When the document is not a valid schema of its draft, a `$ref` does not resolve, the root
    /// is `false`, subschemas nest deeper than [`MAX_SCHEMA_DEPTH`], or an `x-rules` entry is not
    /// a rule. Messages carry the JSON pointer of the problem.
    pub fn from_schema(schema: Value) -> Result<DynContract, SchemaError> {
        match &schema {
            Value::Bool(false) => return Err(SchemaError::Unsatisfiable),
            Value::Bool(true) | Value::Object(_) => {}
            other => {
                return Err(SchemaError::Invalid {
                    path: String::new(),
                    reason: format!(
                        "a schema is an object or a boolean, found {}",
                        keywords::kind_of(other)
                    ),
                })
            }
        }
        let scan = keywords::scan(&schema)?;
        let validator = validator::build(&schema, &scan.refs)?;
        let name = schema
            .get("title")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or("Root")
            .to_owned();
        let document = convert::document(&schema, &name);
        let mut contract = DynContract {
            schema,
            document,
            gaps: scan.gaps,
            validator,
        };
        // The note says whether the local mask holds the rules: under either typed grammar, the
        // root's alone (an inline object below the root is lowered to any value there: a
        // runtime contract's nested objects are not contracts of their own, so its `x-rules`
        // are the validator's only); over the schema's own mask, the root's and those of the
        // inline objects the value filter takes in (`typed::held_rule_paths`).
        if contract.gaps.iter().any(|g| g.keyword == "x-rules") {
            let mut spec = contract.root_spec();
            values::adopt_value_types(&mut spec);
            let (note, paths) = match typed::mask(&spec) {
                typed::Mask::Grounded => (keywords::RULES_IN_GROUNDED_MASK, vec![String::new()]),
                typed::Mask::Rules => (keywords::RULES_IN_TYPED_MASK, vec![String::new()]),
                typed::Mask::RulesOverSchema => (
                    keywords::RULES_OVER_SCHEMA_MASK,
                    typed::held_rule_paths(&spec.node),
                ),
                typed::Mask::JsonSchema => ("", Vec::new()),
            };
            for gap in contract.gaps.iter_mut().filter(|g| g.keyword == "x-rules") {
                if paths.contains(&gap.path) {
                    gap.note = note.to_owned();
                }
            }
        }
        Ok(contract)
    }

    /// The mask [`Extractor::runtime`](crate::Extractor::runtime) decodes this contract under.
    fn mask(&self) -> typed::Mask {
        let mut spec = self.root_spec();
        values::adopt_value_types(&mut spec);
        typed::mask(&spec)
    }

    /// Whether [`Extractor::runtime`](crate::Extractor::runtime) decodes this contract under
    /// the grounded grammar: its root is an object that grounds a value (`x-grounded`) and it
    /// refers to no definitions but the library's value types. The local model's mask then
    /// holds the root's `x-rules` while decoding (the grammar composes them or the values are
    /// filtered as they are written), as a derived contract's mask does. A schema that does not
    /// decode grounded may still decode under the typed grammar for its rules
    /// ([`decodes_typed`](Self::decodes_typed)).
    pub fn decodes_grounded(&self) -> bool {
        self.mask() == typed::Mask::Grounded
    }

    /// Whether [`Extractor::runtime`](crate::Extractor::runtime) decodes this contract under
    /// the typed grammar, whose mask on the local model holds the root's `x-rules` while
    /// decoding: when it [decodes grounded](Self::decodes_grounded), or when its root is an
    /// object with `x-rules`, it refers to no definitions but the library's value types, and
    /// the typed grammar enforces every constraint the schema's own JSON Schema mask would
    /// (one type per property, no combinators, `const`, `multipleOf`, pattern properties,
    /// inline objects or optional properties, only the formats the mask knows). Otherwise the
    /// mask is the schema's own JSON Schema ([`grammar`](Self::grammar)), which cannot carry
    /// the rules (its [`gaps`](Self::gaps) say so).
    pub fn decodes_typed(&self) -> bool {
        matches!(self.mask(), typed::Mask::Grounded | typed::Mask::Rules)
    }

    /// Whether the local model's mask holds `x-rules` while decoding: the root's under the
    /// typed grammar ([`decodes_typed`](Self::decodes_typed)); or over the schema's own JSON
    /// Schema mask, by the value filter, when the schema would lose a keyword in the typed
    /// grammar but every field a rule names is of one shape the grammar keeps whole (one type,
    /// no combinators, no `multipleOf`, no inline object), and the root has no alternatives,
    /// enum or pattern properties: the root's rules, and those of each inline object below it
    /// of the same kind (an object, or an object or `null`, with no alternatives, enum or
    /// pattern properties, its rules' fields carried whole), which [`gaps`](Self::gaps) name.
    /// There a rule's optional field is taken as one that may still be written: a value no
    /// value of it could keep the rule with is refused, even where the model would leave it
    /// out. A server's JSON Schema mask never holds the rules; the validator checks every
    /// reply.
    pub fn rules_in_mask(&self) -> bool {
        self.mask() != typed::Mask::JsonSchema
    }

    /// The grammar [`Extractor::runtime`](crate::Extractor::runtime) decodes this contract
    /// under when the local model's mask holds its rules or its grounding: the typed grammar
    /// ([`decodes_typed`](Self::decodes_typed)), or the schema's own JSON Schema
    /// ([`grammar`](Self::grammar)) with the shapes of the fields the rules name
    /// ([`Grammar::rules_over_schema`](crate::grammar::Grammar::rules_over_schema)). `None`
    /// when the contract decodes under its JSON Schema alone.
    pub fn mask_grammar(&self) -> Option<crate::grammar::Grammar> {
        let mut spec = self.root_spec();
        values::adopt_value_types(&mut spec);
        typed::mask_grammar(&spec, || self.grammar())
    }

    /// The contract's name: the schema's `title`, else `Root`.
    pub fn name(&self) -> &str {
        &self.document.name
    }

    /// The schema in the IR: what the signature and the docs are written from.
    pub fn document(&self) -> &crate::ir::Document {
        &self.document
    }

    /// The root as a contract spec (its name and root node): what the extractor, the prompt
    /// and the grounding checks read.
    pub fn root_spec(&self) -> crate::ContractSpec {
        crate::ContractSpec {
            name: self.name().to_owned(),
            node: self.document.root().clone(),
        }
    }

    /// The schema as given.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Every keyword some rendering does not carry, in document order.
    pub fn gaps(&self) -> &[Gap] {
        &self.gaps
    }

    /// The keywords `rendering` does not carry.
    pub fn gaps_in(&self, rendering: Rendering) -> impl Iterator<Item = &Gap> {
        self.gaps
            .iter()
            .filter(move |g| g.missing.contains(&rendering))
    }

    /// One line a model reads, in the notation of [`Contract::signature`](crate::Contract):
    /// `{"city": string (1+ chars), "days"?: integer 1-14}`.
    ///
    /// Optional properties are marked `"key"?`; other keys of an object are `...: type`
    /// (`additionalProperties`) or `/pattern/: type` (`patternProperties`); alternatives are
    /// joined with ` | `, intersections with ` & `. A `$ref` is written inline, except a
    /// recursive one (its name) and a long definition used more than once (its name, defined
    /// after the root as `; Name = ..`). The keywords it leaves out are in
    /// [`DynContract::gaps_in`]`(Rendering::Signature)`.
    pub fn signature(&self) -> String {
        crate::signature::document_signature(&self.document)
    }

    /// The OpenAI strict structured-outputs subset of the schema, with every keyword the subset
    /// could not carry and where its meaning went ([`StrictSchema::moved`]).
    ///
    /// # Errors
    ///
    /// When the schema cannot be expressed in the subset (root not an object, a subschema that
    /// accepts any value, a limit of the subset exceeded).
    pub fn strict_schema(&self) -> Result<StrictSchema, StrictSchemaError> {
        crate::schema::strict_schema(&self.schema)
    }

    /// The token-mask grammar with the default whitespace ([`Whitespace::DEFAULT`]): what
    /// [`Constraint::from_dyn`](crate::Constraint::from_dyn) gives a constrained decoder for a
    /// runtime contract ([`Decoding::JsonSchema`](crate::Decoding::JsonSchema); the local
    /// backend compiles it once per schema).
    ///
    /// It is written from the schema's IR ([`DynContract::document`]) for llguidance's JSON
    /// compiler, with the layout in `x-guidance` and every `$ref` target in `$defs`, less what
    /// llguidance cannot enforce: the keywords it does not implement (`not`, `if`,
    /// `uniqueItems`, ...) and `format`s it does not know, listed in
    /// [`DynContract::gaps_in`]`(Rendering::Grammar)`; `minProperties` / `maxProperties` on an
    /// object with optional properties; in drafts 4 to 7, the keywords beside a `$ref` (those
    /// drafts ignore them, and so does the IR). `oneOf` is read as `anyOf`, and
    /// `lenient` is set, so what llguidance still cannot compile is left to the validator rather
    /// than failing the mask. The mask therefore accepts a superset of the schema's values;
    /// [`DynContract::validate`] checks the rest. As llguidance does, the mask writes an object's
    /// listed properties in the order of `properties`.
    pub fn grammar(&self) -> Value {
        self.grammar_with(Whitespace::DEFAULT)
    }

    /// [`DynContract::grammar`] with another whitespace layout ([`Whitespace::Compact`]: none).
    pub fn grammar_with(&self, whitespace: Whitespace) -> Value {
        crate::grammar::document_schema(&self.document, whitespace)
    }

    /// A Markdown reference for humans: the root and every object schema in it (definitions by
    /// name, inline objects by their JSON pointer), a table of fields each, with every constraint
    /// (also those the signature and the mask leave out).
    pub fn docs_markdown(&self) -> String {
        crate::docs::document_docs(&self.document)
    }

    /// Checks `value` against the whole schema (formats enforced, `x-rules` included); every
    /// violation at once, with JSON pointers and kinds.
    ///
    /// # Errors
    ///
    /// The violations, in the validator's order.
    pub fn validate(&self, value: &Value) -> Result<(), Violations> {
        validator::validate(&self.validator, value)
    }

    /// Whether `value` satisfies the schema (faster than [`DynContract::validate`]).
    pub fn is_valid(&self, value: &Value) -> bool {
        self.validator.is_valid(value)
    }

    /// Parses `text` as one JSON value and validates it.
    ///
    /// # Errors
    ///
    /// One `json_invalid` violation when `text` is not JSON, else the violations of
    /// [`DynContract::validate`].
    pub fn from_json(&self, text: &str) -> Result<Value, Violations> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            Violations::one(Violation::new(
                "",
                ViolationKind::JsonInvalid,
                format!("invalid JSON: {e}"),
            ))
        })?;
        self.validate(&value)?;
        Ok(value)
    }
}
