//! Draft 2020-12 to the OpenAI strict structured-outputs subset, and to Anthropic's.
//!
//! The subset (OpenAI's Structured Outputs guide, "Supported schemas":
//! <https://developers.openai.com/api/docs/guides/structured-outputs>): every object closed and
//! every property required, `null` unions for what was optional, the root an object, only the
//! keywords below, a few limits. What the subset cannot carry is put into the description text
//! in plain words, and every change is recorded as a [`Moved`].
//!
//! Anthropic's structured outputs (its "JSON Schema limitations") take the same closed objects
//! but fewer keywords: no numeric bounds (`minimum`, `maximum`, their exclusive forms,
//! `multipleOf`), no `maxItems`, `minItems` only 0 or 1; `uri` is one more format it knows.
//! [`Subset::Anthropic`] moves those into descriptions as well.
//!
//! This module walks the schema and decides what moves; `subset` says which keywords and formats
//! each subset takes, `words` says the rest in plain words, `refs` inlines and checks the `$ref`s
//! of the finished schema. What a rendering gives ([`StrictSchema`], [`Moved`],
//! [`StrictSchemaError`]) is in `schema/strict_output.rs`, which the limits check reads too.

mod refs;
mod subset;
mod words;

use std::borrow::Cow;

use serde_json::{json, Map, Value};

use super::limits::check_limits;
use super::strict_output::{invalid, Moved, StrictSchema, StrictSchemaError};
use crate::validate::join_pointer;
use refs::inline_refs;
use words::{append_description, bound_words, compact, join_text, partners, plain, words};

pub use subset::{Subset, STRICT_FORMATS};

/// Keywords kept as they are.
const KEPT: [&str; 13] = [
    "type",
    "enum",
    "const",
    "description",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "$ref",
];

/// Annotations with no meaning for the model: dropped.
const DROPPED: [&str; 14] = [
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "title",
    "default",
    "examples",
    "example",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$dynamicRef",
];

/// Converts a draft 2020-12 schema into the OpenAI strict subset.
///
/// - every object gets `additionalProperties: false` and `required` listing every property; a
///   property that was optional becomes nullable (`"type": ["string", "null"]`, or an `anyOf`
///   with `{"type": "null"}`);
/// - `$ref`s into `$defs` are kept (`definitions` is renamed `$defs`); a `$ref` with sibling
///   keywords is replaced by the schema it points to, with the siblings on top;
/// - `$schema`, `title`, `default`, `examples` and `$comment` are dropped;
/// - keywords outside the subset (`minLength`, `uniqueItems`, `x-unit`, `x-rules`, `not`, a
///   `format` it does not know, ...) are removed and their meaning appended to the
///   description in plain words (`Length 1-80 characters.`, `Unit: USD millions.`);
/// - a simple `allOf` is merged into its parent, `oneOf` becomes `anyOf`;
/// - the limits are checked ([`check_limits`]).
///
/// # Errors
///
/// When the root is not an object, a subschema accepts any value, a `$ref` does not resolve,
/// the input is malformed, or a limit of the subset is exceeded.
pub fn strict_schema(schema: &Value) -> Result<StrictSchema, StrictSchemaError> {
    subset_schema(schema, Subset::OpenAi)
}

/// Converts a draft 2020-12 schema into Anthropic's structured-outputs subset: what
/// [`strict_schema`] does, and also the keywords Anthropic refuses (numeric bounds, `maxItems`,
/// `minItems` above 1) moved into the description in plain words (`From 1 to 4.`, `At most 3
/// items.`) and recorded in [`StrictSchema::moved`].
///
/// A schema already in the OpenAI subset (a contract's
/// [`strict_schema`](crate::Contract::strict_schema)) converts with only those moves.
///
/// # Errors
///
/// As [`strict_schema`].
pub fn anthropic_schema(schema: &Value) -> Result<StrictSchema, StrictSchemaError> {
    subset_schema(schema, Subset::Anthropic)
}

/// Converts a draft 2020-12 schema into `subset` ([`strict_schema`], [`anthropic_schema`]).
///
/// # Errors
///
/// As [`strict_schema`].
pub fn subset_schema(schema: &Value, subset: Subset) -> Result<StrictSchema, StrictSchemaError> {
    let Value::Object(root) = schema else {
        return Err(StrictSchemaError::RootNotObject {
            found: describe_kind(schema),
        });
    };
    if let Some(found) = root_problem(root) {
        return Err(StrictSchemaError::RootNotObject { found });
    }
    let mut t = Transformer {
        moved: Vec::new(),
        subset,
    };
    let mut out = t.schema(schema, "")?;
    if let Some(found) = out.as_object().and_then(root_problem) {
        return Err(StrictSchemaError::RootNotObject { found });
    }

    inline_refs(&mut out, &mut t.moved)?;
    if let Value::Object(root) = &mut out {
        // Definitions last, after `required` and `additionalProperties`.
        if let Some(defs) = root.shift_remove("$defs") {
            root.insert("$defs".into(), defs);
        }
    }
    check_limits(&out)?;
    Ok(StrictSchema {
        schema: out,
        moved: t.moved,
    })
}

/// Why `root` cannot be the root of a strict schema, if it cannot.
fn root_problem(root: &Map<String, Value>) -> Option<String> {
    for key in ["anyOf", "oneOf"] {
        if root.contains_key(key) {
            return Some(format!("`{key}`"));
        }
    }
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => None,
        Some(t) => Some(format!("type {t}")),
        None if root.contains_key("properties") || root.contains_key("allOf") => None,
        None if root.contains_key("$ref") => Some("a `$ref`".to_owned()),
        None => Some("a schema without a type".to_owned()),
    }
}

fn describe_kind(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean schema `{b}`"),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

struct Transformer {
    moved: Vec<Moved>,
    subset: Subset,
}

impl Transformer {
    fn record(&mut self, path: &str, keyword: &str, value: &Value, into: &str) {
        self.moved.push(Moved {
            path: path.to_owned(),
            keyword: keyword.to_owned(),
            value: value.clone(),
            into: into.to_owned(),
        });
    }

    /// A subschema in a schema position (property, item, branch, definition).
    fn subschema(&mut self, schema: &Value, path: &str) -> Result<Value, StrictSchemaError> {
        let out = self.schema(schema, path)?;
        let typed = out.as_object().is_some_and(|m| {
            ["type", "enum", "const", "anyOf", "$ref", "properties"]
                .iter()
                .any(|k| m.contains_key(*k))
        });
        if typed || out == Value::Bool(false) {
            Ok(out)
        } else {
            Err(StrictSchemaError::AnyValue {
                path: path.to_owned(),
            })
        }
    }

    fn schema(&mut self, schema: &Value, path: &str) -> Result<Value, StrictSchemaError> {
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(true) => return Ok(json!({})),
            Value::Bool(false) => return Ok(Value::Bool(false)),
            other => {
                return Err(StrictSchemaError::Invalid {
                    path: path.to_owned(),
                    reason: format!(
                        "expected an object or a boolean, found {}",
                        describe_kind(other)
                    ),
                })
            }
        };
        let map = self.merge_all_of(map, path)?;
        let map = map.as_ref();

        let mut out = Map::new();
        let mut notes: Vec<String> = Vec::new();
        let mut required: Option<&Value> = None;
        let mut additional: Option<&Value> = None;
        let mut make_nullable = false;

        for (key, value) in map {
            let key_path = join_pointer(path, key);
            match key.as_str() {
                "$ref" => {
                    let Some(reference) = value.as_str() else {
                        return Err(invalid(path, "`$ref` is not a string"));
                    };
                    let reference = match reference.strip_prefix("#/definitions/") {
                        Some(rest) => format!("#/$defs/{rest}"),
                        None => reference.to_owned(),
                    };
                    out.insert(key.clone(), reference.into());
                }
                k if self.subset.refuses(k, value) => {
                    if let Some((text, partners)) = bound_words(k, map, self.subset) {
                        notes.push(text);
                        self.record(path, key, value, "description");
                        for partner in partners {
                            if let Some(v) = map.get(*partner) {
                                self.record(path, partner, v, "description");
                            }
                        }
                    }
                }
                k if KEPT.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                "format" => match value.as_str() {
                    Some(f) if self.subset.knows_format(f) => {
                        out.insert(key.clone(), value.clone());
                    }
                    _ => {
                        notes.push(format!("Format: {}.", plain(value)));
                        self.record(path, key, value, "description");
                    }
                },
                "properties" => {
                    let Value::Object(properties) = value else {
                        return Err(invalid(path, "`properties` is not an object"));
                    };
                    let mut converted = Map::new();
                    for (name, property) in properties {
                        let p = self.subschema(property, &join_pointer(&key_path, name))?;
                        converted.insert(name.clone(), p);
                    }
                    out.insert(key.clone(), converted.into());
                }
                "items" => match value {
                    Value::Object(_) | Value::Bool(_) => {
                        let items = self.subschema(value, &key_path)?;
                        out.insert(key.clone(), items);
                    }
                    _ => {
                        notes.push(format!("Items by position: {}.", compact(value)));
                        self.record(path, key, value, "description");
                    }
                },
                "anyOf" => {
                    let branches = self.branches(value, &key_path)?;
                    out.insert(key.clone(), branches.into());
                }
                "oneOf" if !map.contains_key("anyOf") => {
                    let branches = self.branches(value, &key_path)?;
                    out.insert("anyOf".into(), branches.into());
                    self.record(path, key, value, "anyOf");
                }
                "$defs" | "definitions" => {
                    let Value::Object(defs) = value else {
                        return Err(invalid(path, "definitions are not an object"));
                    };
                    let mut converted = match out.shift_remove("$defs") {
                        Some(Value::Object(existing)) => existing,
                        _ => Map::new(),
                    };
                    for (name, def) in defs {
                        if converted.contains_key(name) {
                            return Err(invalid(
                                path,
                                &format!(
                                    "definition `{name}` is in both `$defs` and `definitions`"
                                ),
                            ));
                        }
                        let d = self.subschema(def, &join_pointer(&key_path, name))?;
                        converted.insert(name.clone(), d);
                    }
                    out.insert("$defs".into(), converted.into());
                }
                "required" => required = Some(value),
                "additionalProperties" => additional = Some(value),
                "nullable" => {
                    if value == &Value::Bool(true) {
                        make_nullable = true;
                        self.record(path, key, value, "nullable");
                    } else {
                        self.record(path, key, value, "dropped");
                    }
                }
                "then" | "else" if map.contains_key("if") => {}
                "maxLength" if map.contains_key("minLength") => {}
                "maxProperties" if map.contains_key("minProperties") => {}
                "maxContains" if map.contains_key("minContains") => {}
                k if DROPPED.contains(&k) => self.record(path, key, value, "dropped"),
                _ => match words(key, value, map) {
                    Some(text) => {
                        notes.push(text);
                        self.record(path, key, value, "description");
                        for partner in partners(key) {
                            if let Some(v) = map.get(*partner) {
                                self.record(path, partner, v, "description");
                            }
                        }
                    }
                    None => self.record(path, key, value, "dropped"),
                },
            }
        }

        let is_object = match out.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
            _ => out.contains_key("properties") && !out.contains_key("anyOf"),
        };
        if is_object {
            if !out.contains_key("type") {
                out.insert("type".into(), "object".into());
            }
            self.close_object(&mut out, required, additional, path, &mut notes)?;
        } else {
            if let Some(value) = required {
                self.record(path, "required", value, "dropped");
            }
            if let Some(value) = additional {
                self.record(path, "additionalProperties", value, "dropped");
            }
        }

        append_description(&mut out, &notes);
        let mut out = Value::Object(out);
        if make_nullable {
            out = nullable(out);
        }
        Ok(out)
    }

    fn branches(&mut self, value: &Value, path: &str) -> Result<Vec<Value>, StrictSchemaError> {
        let Value::Array(branches) = value else {
            return Err(invalid(path, "expected an array of schemas"));
        };
        branches
            .iter()
            .enumerate()
            .map(|(i, b)| self.subschema(b, &join_pointer(path, &i.to_string())))
            .collect()
    }

    /// `additionalProperties: false`, every property required, the optional ones nullable.
    fn close_object(
        &mut self,
        out: &mut Map<String, Value>,
        required: Option<&Value>,
        additional: Option<&Value>,
        path: &str,
        notes: &mut Vec<String>,
    ) -> Result<(), StrictSchemaError> {
        let listed: Vec<&str> = match required {
            None => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| {
                    n.as_str()
                        .ok_or_else(|| invalid(path, "`required` lists a non-string"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid(path, "`required` is not an array")),
        };
        let properties = out
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .expect("properties were converted to an object");
        let mut changed = false;
        for (name, schema) in properties.iter_mut() {
            if !listed.contains(&name.as_str()) {
                *schema = nullable(std::mem::take(schema));
                changed = true;
            }
        }
        let names: Vec<Value> = properties.keys().map(|k| k.clone().into()).collect();
        if changed {
            self.record(
                path,
                "required",
                required.unwrap_or(&Value::Null),
                "nullable",
            );
        }
        out.insert("required".into(), names.into());
        match additional {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => {
                self.record(path, "additionalProperties", &Value::Bool(true), "dropped")
            }
            Some(schema) => {
                notes.push(format!("Other properties: {}.", compact(schema)));
                self.record(path, "additionalProperties", schema, "description");
            }
        }
        out.insert("additionalProperties".into(), false.into());
        Ok(())
    }

    /// Merges the elements of `allOf` that can be merged into the parent; the rest is described.
    fn merge_all_of<'a>(
        &mut self,
        map: &'a Map<String, Value>,
        path: &str,
    ) -> Result<Cow<'a, Map<String, Value>>, StrictSchemaError> {
        let Some(all_of) = map.get("allOf") else {
            return Ok(Cow::Borrowed(map));
        };
        let Value::Array(elements) = all_of else {
            return Err(invalid(path, "`allOf` is not an array"));
        };
        let mut merged: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| *k != "allOf")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut rest = Vec::new();
        for element in elements {
            match element {
                Value::Object(e) if can_merge(&merged, e) => merge_into(&mut merged, e),
                Value::Bool(true) => {}
                other => rest.push(other.clone()),
            }
        }
        if rest.is_empty() {
            self.record(path, "allOf", all_of, "merged");
        } else {
            let text = format!("Must also match: {}.", compact(&Value::Array(rest)));
            let description = match merged.get("description").and_then(Value::as_str) {
                Some(d) => join_text(d, &text),
                None => text,
            };
            merged.insert("description".into(), description.into());
            self.record(path, "allOf", all_of, "description");
        }
        Ok(Cow::Owned(merged))
    }
}

fn can_merge(parent: &Map<String, Value>, element: &Map<String, Value>) -> bool {
    element
        .iter()
        .all(|(key, value)| match (key.as_str(), parent.get(key)) {
            (_, None) => true,
            ("description" | "title" | "$comment" | "required", _) => true,
            ("properties", Some(Value::Object(p))) => value
                .as_object()
                .is_some_and(|e| e.keys().all(|k| !p.contains_key(k))),
            (_, Some(existing)) => existing == value,
        })
}

fn merge_into(parent: &mut Map<String, Value>, element: &Map<String, Value>) {
    for (key, value) in element {
        match (key.as_str(), parent.get_mut(key)) {
            (_, None) => {
                parent.insert(key.clone(), value.clone());
            }
            ("properties", Some(Value::Object(p))) => {
                if let Value::Object(e) = value {
                    p.extend(e.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
            ("required", Some(Value::Array(r))) => {
                if let Value::Array(e) = value {
                    for name in e {
                        if !r.contains(name) {
                            r.push(name.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// `schema`, also accepting `null`.
fn nullable(schema: Value) -> Value {
    let Value::Object(mut map) = schema else {
        return json!({"anyOf": [schema, {"type": "null"}]});
    };
    if accepts_null(&map) {
        return Value::Object(map);
    }
    if !map.contains_key("$ref") {
        let typed = match map.get_mut("type") {
            Some(Value::String(t)) => {
                let t = std::mem::take(t);
                map.insert("type".into(), json!([t, "null"]));
                true
            }
            Some(Value::Array(types)) => {
                types.push("null".into());
                true
            }
            _ => false,
        };
        if let Some(c) = map.shift_remove("const") {
            map.insert("enum".into(), json!([c, null]));
        } else if let Some(Value::Array(values)) = map.get_mut("enum") {
            values.push(Value::Null);
        } else if !typed {
            if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
                branches.push(json!({"type": "null"}));
                return Value::Object(map);
            }
        }
        if typed || map.contains_key("enum") {
            return Value::Object(map);
        }
    }
    let description = map.shift_remove("description");
    let mut out = Map::new();
    out.insert(
        "anyOf".into(),
        json!([Value::Object(map), {"type": "null"}]),
    );
    if let Some(d) = description {
        out.insert("description".into(), d);
    }
    Value::Object(out)
}

fn accepts_null(map: &Map<String, Value>) -> bool {
    let typed_null = match map.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => false,
    };
    let enum_null = match map.get("enum") {
        Some(Value::Array(values)) => values.contains(&Value::Null),
        _ => true,
    };
    let branch_null = match map.get("anyOf") {
        Some(Value::Array(branches)) => branches
            .iter()
            .any(|b| b.as_object().is_some_and(accepts_null)),
        _ => false,
    };
    (typed_null && enum_null && map.get("const").is_none_or(Value::is_null))
        || (branch_null && !map.contains_key("type"))
}
