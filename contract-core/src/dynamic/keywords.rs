//! One pass over a schema: which keyword each rendering carries, the `$ref`s, and the schema
//! llguidance compiles (without the keywords it does not implement).

use serde_json::Value;

use super::resolve::Resolver;
use super::subschemas::{holds, Holds};
use super::{Gap, Rendering, SchemaError, MAX_SCHEMA_DEPTH};
use crate::attrs::Rule;
use crate::grammar::GRAMMAR_FORMATS;
use crate::validate::join_pointer;

/// The `format`s the validator enforces, in every draft, as draft 2020-12 defines them (the
/// `jsonschema` crate's checks, without the `idn-` ones that need its `idna` feature).
pub const VALIDATOR_FORMATS: [&str; 17] = [
    "date",
    "date-time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "iri",
    "iri-reference",
    "json-pointer",
    "regex",
    "relative-json-pointer",
    "time",
    "uri",
    "uri-reference",
    "uri-template",
    "uuid",
];

/// Annotations: no meaning to enforce, nothing to report.
const ANNOTATIONS: [&str; 26] = [
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "x-unit",
    "x-grounded",
    "x-guidance",
    "x-form",
    "x-question",
    "x-group",
];

/// Keywords every rendering carries.
pub(super) const FULL: [&str; 22] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "allOf",
];

const VALIDATOR_ONLY: &str = "enforced by the validator only";

/// The note of a root `x-rules` gap in a schema that decodes under the grounded grammar
/// ([`DynContract::decodes_grounded`](super::DynContract::decodes_grounded)): the local model's
/// mask holds the root's rules there, a JSON Schema mask (llguidance's compiler, a server's
/// decoder) does not. An inline object's rules below the root are the validator's only: the
/// grammar lowers such an object to any value.
pub(super) const RULES_IN_GROUNDED_MASK: &str = "cross-field rules: this schema decodes under the \
     grounded grammar, whose mask on the local model holds them while decoding; a JSON Schema \
     mask (a server's) does not carry them, and the validator checks every reply";

/// The note of a root `x-rules` gap in a schema that decodes under the typed grammar for its
/// rules ([`DynContract::decodes_typed`](super::DynContract::decodes_typed), not grounded).
pub(super) const RULES_IN_TYPED_MASK: &str = "cross-field rules: this schema decodes under the \
     typed grammar, whose mask on the local model holds them while decoding; a JSON Schema mask \
     (a server's) does not carry them, and the validator checks every reply";

/// The note of an `x-rules` gap in a schema that keeps its own JSON Schema mask, the rules
/// held over it by the local backend's value filter
/// ([`DynContract::rules_in_mask`](super::DynContract::rules_in_mask), not typed): the root's,
/// and an inline object's below it that the filter takes in.
pub(super) const RULES_OVER_SCHEMA_MASK: &str = "cross-field rules: this schema decodes under its \
     own JSON Schema, and the local model's value filter holds them over that mask while \
     decoding; a server's mask does not carry them, and the validator checks every reply";

/// Keywords only the validator carries: the signature leaves them out and llguidance does not
/// implement them.
const VALIDATOR_KEYWORDS: [&str; 13] = [
    "not",
    "if",
    "then",
    "else",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "contains",
    "minContains",
    "maxContains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// Which renderings miss `key` (with a note), or `None` when all carry it or it is an annotation.
fn missing(key: &str, value: &Value) -> Option<(Vec<Rendering>, String)> {
    use Rendering::*;
    let both = || vec![Signature, Grammar];
    Some(match key {
        k if ANNOTATIONS.contains(&k) || FULL.contains(&k) => return None,
        "$ref" => return None,
        "oneOf" => (
            vec![Grammar],
            "the mask reads it as `anyOf`; exclusivity is enforced by the validator only".into(),
        ),
        "format" => {
            let name = value.as_str().unwrap_or_default();
            let mut m = Vec::new();
            if !GRAMMAR_FORMATS.contains(&name) {
                m.push(Grammar);
            }
            if !VALIDATOR_FORMATS.contains(&name) {
                m.push(Validator);
            }
            if m.is_empty() {
                return None;
            }
            let note = if m == [Grammar] {
                format!("format `{name}`: {VALIDATOR_ONLY}")
            } else {
                format!("unknown format `{name}`: shown in the signature, enforced nowhere")
            };
            (m, note)
        }
        "minProperties" | "maxProperties" => (
            both(),
            "the mask enforces it only when every listed property is required; always enforced \
             by the validator"
                .into(),
        ),
        "uniqueItems" => {
            if value != &Value::Bool(true) {
                return None;
            }
            (vec![Grammar], VALIDATOR_ONLY.into())
        }
        "x-rules" => (
            vec![Grammar],
            "cross-field rules: enforced by the validator only (the mask of a derived contract \
             filters them while decoding)"
                .into(),
        ),
        k if VALIDATOR_KEYWORDS.contains(&k) => (both(), VALIDATOR_ONLY.into()),
        "$dynamicRef" | "$recursiveRef" => (
            both(),
            "dynamic reference: followed by the validator only; the mask accepts any value there"
                .into(),
        ),
        _ => (
            vec![Signature, Grammar, Validator],
            "unknown keyword: ignored by every rendering".into(),
        ),
    })
}

/// What the scan found.
pub(super) struct Scan {
    pub gaps: Vec<Gap>,
    /// Every `$ref` (and `$dynamicRef`, `$recursiveRef`): JSON pointer of its subschema, value.
    pub refs: Vec<(String, String)>,
}

pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Scans `schema` (an object or a boolean).
pub(super) fn scan(schema: &Value) -> Result<Scan, SchemaError> {
    let resolver = Resolver::new(schema);
    let mut s = Scanner {
        resolver: &resolver,
        gaps: Vec::new(),
        refs: Vec::new(),
    };
    s.schema(schema, "", 0)?;
    Ok(Scan {
        gaps: s.gaps,
        refs: s.refs,
    })
}

struct Scanner<'r, 'a> {
    resolver: &'r Resolver<'a>,
    gaps: Vec<Gap>,
    refs: Vec<(String, String)>,
}

impl Scanner<'_, '_> {
    /// Scans the subschema at `path`.
    fn schema(&mut self, schema: &Value, path: &str, depth: usize) -> Result<(), SchemaError> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep {
                path: path.to_owned(),
                limit: MAX_SCHEMA_DEPTH,
            });
        }
        let Value::Object(map) = schema else {
            // Booleans are schemas; anything else is for the validator's meta-schema check.
            return Ok(());
        };
        for (key, value) in map {
            let key_path = join_pointer(path, key);
            if let Some((missing, note)) = missing(key, value) {
                self.gaps.push(Gap {
                    path: path.to_owned(),
                    keyword: key.clone(),
                    value: value.clone(),
                    missing,
                    note,
                });
            }
            match key.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    if let Some(reference) = value.as_str() {
                        self.refs.push((path.to_owned(), reference.to_owned()));
                        // With embedded `$id`s a fragment may be relative to one of them: the
                        // validator resolves those.
                        if key == "$ref"
                            && reference.starts_with('#')
                            && !self.resolver.has_embedded_ids()
                            && self.resolver.resolve(reference).is_none()
                        {
                            return Err(SchemaError::UnresolvedRef {
                                path: path.to_owned(),
                                reference: reference.to_owned(),
                            });
                        }
                    }
                }
                "x-rules" => self.rules(value, &key_path)?,
                _ => {}
            }
            match (holds(key), value) {
                (Holds::One, v) => self.schema(v, &key_path, depth + 1)?,
                // `items` as one schema (a list of schemas in drafts before 2020-12).
                (Holds::Either, v) if key == "items" && !v.is_array() => {
                    self.schema(v, &key_path, depth + 1)?
                }
                (Holds::Map | Holds::Either, Value::Object(children)) => {
                    for (name, child) in children {
                        // `dependencies` lists of property names are not schemas.
                        if !child.is_array() {
                            self.schema(child, &join_pointer(&key_path, name), depth + 1)?;
                        }
                    }
                }
                (Holds::List | Holds::Either, Value::Array(children)) => {
                    for (i, child) in children.iter().enumerate() {
                        self.schema(child, &join_pointer(&key_path, &i.to_string()), depth + 1)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn rules(&mut self, value: &Value, path: &str) -> Result<(), SchemaError> {
        let bad = |p: String, rule: &Value| SchemaError::BadRule {
            path: p,
            rule: match rule {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
        };
        let Value::Array(rules) = value else {
            return Err(bad(path.to_owned(), value));
        };
        for (i, rule) in rules.iter().enumerate() {
            if rule.as_str().and_then(Rule::parse).is_none() {
                return Err(bad(join_pointer(path, &i.to_string()), rule));
            }
        }
        Ok(())
    }
}
