//! One pass over a schema: which keyword each rendering carries, the `$ref`s, and the schema
//! llguidance compiles (without the keywords it does not implement).

use serde_json::{Map, Value};

use super::resolve::Resolver;
use super::{Gap, Rendering, SchemaError, MAX_SCHEMA_DEPTH};
use crate::contract::Rule;
use crate::schema::pointer::decode_ref;
use crate::validate::join_pointer;

/// The `format`s llguidance's mask enforces (others are left to the validator).
pub const GRAMMAR_FORMATS: [&str; 10] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
];

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
const ANNOTATIONS: [&str; 23] = [
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
];

/// Annotations llguidance does not know: left out of the grammar (silently: no meaning lost).
const GRAMMAR_DROPS: [&str; 6] = [
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$vocabulary",
    "deprecated",
    "contentSchema",
    "x-guidance",
];

/// Keywords every rendering carries.
const FULL: [&str; 22] = [
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

/// Whether the grammar leaves `key` (of the subschema `map`) out: keywords llguidance knows but
/// does not implement (unknown keywords it ignores by itself), formats it does not know, and
/// `minProperties` / `maxProperties` where llguidance cannot enforce them (every listed property
/// must be required; otherwise, even in lenient mode, it closes such objects too early).
fn grammar_drops(key: &str, value: &Value, map: &Map<String, Value>) -> bool {
    if GRAMMAR_DROPS.contains(&key) {
        return true;
    }
    match key {
        "format" => !GRAMMAR_FORMATS.contains(&value.as_str().unwrap_or_default()),
        "uniqueItems" | "$dynamicRef" | "$recursiveRef" => true,
        k if VALIDATOR_KEYWORDS.contains(&k) => true,
        "minProperties" | "maxProperties" => {
            let Some(Value::Object(properties)) = map.get("properties") else {
                return false;
            };
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            !properties.keys().all(|k| required.contains(&k.as_str()))
        }
        _ => false,
    }
}

/// The JSON pointers local `$ref`s point at (anywhere in the document).
fn ref_targets(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![schema];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                    if let Some(segments) = decode_ref(r) {
                        out.push(
                            segments
                                .iter()
                                .fold(String::new(), |p, s| join_pointer(&p, s)),
                        );
                    }
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    out
}

/// What the scan found.
pub(super) struct Scan {
    pub gaps: Vec<Gap>,
    /// Every `$ref` (and `$dynamicRef`, `$recursiveRef`): JSON pointer of its subschema, value.
    pub refs: Vec<(String, String)>,
    /// The schema llguidance compiles.
    pub grammar: Value,
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
        targets: ref_targets(schema),
        gaps: Vec::new(),
        refs: Vec::new(),
    };
    let grammar = s.schema(schema, "", 0, false)?;
    Ok(Scan {
        gaps: s.gaps,
        refs: s.refs,
        grammar,
    })
}

struct Scanner<'r, 'a> {
    resolver: &'r Resolver<'a>,
    /// Where local `$ref`s point: a keyword holding a target stays in the grammar.
    targets: Vec<String>,
    gaps: Vec<Gap>,
    refs: Vec<(String, String)>,
}

/// How a keyword's value holds subschemas.
pub(super) enum Holds {
    One,
    Map,
    List,
    /// `items` (a schema, or a list in drafts before 2020-12) and `dependencies` (a map of
    /// schemas or of property lists).
    Either,
    None,
}

pub(super) fn holds(key: &str) -> Holds {
    match key {
        "additionalProperties"
        | "unevaluatedProperties"
        | "unevaluatedItems"
        | "additionalItems"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "contentSchema" => Holds::One,
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
            Holds::Map
        }
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => Holds::List,
        "items" | "dependencies" => Holds::Either,
        _ => Holds::None,
    }
}

impl Scanner<'_, '_> {
    /// Scans the subschema at `path`; returns its grammar rendering.
    fn schema(
        &mut self,
        schema: &Value,
        path: &str,
        depth: usize,
        old_draft: bool,
    ) -> Result<Value, SchemaError> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep {
                path: path.to_owned(),
                limit: MAX_SCHEMA_DEPTH,
            });
        }
        let Value::Object(map) = schema else {
            // Booleans are schemas; anything else is for the validator's meta-schema check.
            return Ok(schema.clone());
        };
        // Drafts 4 to 7 ignore the keywords beside a `$ref`; so does the grammar (llguidance
        // would intersect them, and cannot when the reference is recursive).
        let old = match map.get("$schema").and_then(Value::as_str) {
            Some(uri) => ["draft-03", "draft-04", "draft-06", "draft-07"]
                .iter()
                .any(|d| uri.contains(d)),
            None => old_draft,
        };
        let ref_only = old && map.contains_key("$ref");
        let mut out = Map::new();
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
            let converted = match (holds(key), value) {
                (Holds::One, v) => self.schema(v, &key_path, depth + 1, old)?,
                // `items` as one schema (a list of schemas in drafts before 2020-12).
                (Holds::Either, v) if key == "items" && !v.is_array() => {
                    self.schema(v, &key_path, depth + 1, old)?
                }
                (Holds::Map | Holds::Either, Value::Object(children)) => {
                    let mut m = Map::new();
                    for (name, child) in children {
                        let c = match child {
                            // `dependencies` lists of property names.
                            Value::Array(_) => child.clone(),
                            _ => {
                                let child_path = join_pointer(&key_path, name);
                                self.schema(child, &child_path, depth + 1, old)?
                            }
                        };
                        m.insert(name.clone(), c);
                    }
                    Value::Object(m)
                }
                (Holds::List | Holds::Either, Value::Array(children)) => {
                    let mut list = Vec::with_capacity(children.len());
                    for (i, child) in children.iter().enumerate() {
                        let child_path = join_pointer(&key_path, &i.to_string());
                        list.push(self.schema(child, &child_path, depth + 1, old)?);
                    }
                    Value::Array(list)
                }
                _ => value.clone(),
            };
            let referenced = || {
                self.targets.iter().any(|t| {
                    t == &key_path
                        || t.strip_prefix(key_path.as_str())
                            .is_some_and(|rest| rest.starts_with('/'))
                })
            };
            let ignored = ref_only && !matches!(key.as_str(), "$ref" | "$defs" | "definitions");
            if !(ignored || grammar_drops(key, value, map)) || referenced() {
                out.insert(key.clone(), converted);
            }
        }
        Ok(Value::Object(out))
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
