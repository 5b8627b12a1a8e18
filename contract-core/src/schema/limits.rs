//! The size limits of the OpenAI strict subset.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::pointer::decode_ref;
use super::strict_output::StrictSchemaError;
use crate::validate::join_pointer;

/// Most levels of object nesting (the root object is level 1; a `$ref` counts as the schema
/// it points to; a recursive reference is not followed again).
pub const MAX_NESTING: usize = 10;
/// Most object properties in the whole schema (each subschema counted once).
pub const MAX_PROPERTIES: usize = 5000;
/// Most enum values in the whole schema.
pub const MAX_ENUM_VALUES: usize = 1000;
/// Above this many values, one string enum is limited to [`MAX_LARGE_ENUM_TEXT`] characters.
pub const MAX_SMALL_ENUM_VALUES: usize = 250;
/// Most characters in all the values of one string enum of more than
/// [`MAX_SMALL_ENUM_VALUES`] values.
pub const MAX_LARGE_ENUM_TEXT: usize = 15_000;
/// Most characters in all property names, definition names, enum values and const values.
pub const MAX_TOTAL_TEXT: usize = 120_000;

/// Checks the size limits of the strict subset on `schema`.
///
/// # Errors
///
/// The first limit exceeded, with the limit and the actual figure.
pub fn check_limits(schema: &Value) -> Result<(), StrictSchemaError> {
    let mut totals = Totals::default();
    totals.visit(schema, "")?;
    if totals.properties > MAX_PROPERTIES {
        return Err(StrictSchemaError::TooManyProperties {
            count: totals.properties,
            limit: MAX_PROPERTIES,
        });
    }
    if totals.enum_values > MAX_ENUM_VALUES {
        return Err(StrictSchemaError::TooManyEnumValues {
            count: totals.enum_values,
            limit: MAX_ENUM_VALUES,
        });
    }
    if totals.text > MAX_TOTAL_TEXT {
        return Err(StrictSchemaError::TooMuchText {
            length: totals.text,
            limit: MAX_TOTAL_TEXT,
        });
    }
    let mut depth = Depth {
        root: schema,
        memo: HashMap::new(),
        stack: Vec::new(),
    };
    let (levels, path) = depth.max_depth(schema);
    if levels > MAX_NESTING {
        return Err(StrictSchemaError::TooDeep {
            path,
            depth: levels,
            limit: MAX_NESTING,
        });
    }
    Ok(())
}

/// The subschemas directly inside `map`, with their path segments.
fn children(map: &Map<String, Value>) -> Vec<(Vec<String>, &Value)> {
    let mut out = Vec::new();
    for (key, value) in map {
        match (key.as_str(), value) {
            (
                "properties" | "$defs" | "definitions" | "patternProperties" | "dependentSchemas",
                Value::Object(m),
            ) => {
                out.extend(
                    m.iter()
                        .map(|(name, v)| (vec![key.clone(), name.clone()], v)),
                );
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(items)) => {
                out.extend(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (vec![key.clone(), i.to_string()], v)),
                );
            }
            (
                "items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains",
                Value::Object(_),
            ) => {
                out.push((vec![key.clone()], value));
            }
            _ => {}
        }
    }
    out
}

fn text_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        other => serde_json::to_string(other).map_or(0, |s| s.chars().count()),
    }
}

#[derive(Default)]
struct Totals {
    properties: usize,
    enum_values: usize,
    text: usize,
}

impl Totals {
    fn visit(&mut self, value: &Value, path: &str) -> Result<(), StrictSchemaError> {
        let Value::Object(map) = value else {
            return Ok(());
        };
        if let Some(Value::Object(properties)) = map.get("properties") {
            self.properties += properties.len();
            self.text += properties.keys().map(|k| k.chars().count()).sum::<usize>();
        }
        if let Some(Value::Object(defs)) = map.get("$defs") {
            self.text += defs.keys().map(|k| k.chars().count()).sum::<usize>();
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            self.enum_values += values.len();
            let length: usize = values.iter().map(text_len).sum();
            self.text += length;
            let strings = values.iter().filter(|v| v.is_string()).count();
            let string_length: usize = values
                .iter()
                .filter_map(Value::as_str)
                .map(|s| s.chars().count())
                .sum();
            if strings > MAX_SMALL_ENUM_VALUES && string_length > MAX_LARGE_ENUM_TEXT {
                return Err(StrictSchemaError::EnumTooLong {
                    path: path.to_owned(),
                    values: values.len(),
                    length: string_length,
                    limit: MAX_LARGE_ENUM_TEXT,
                    large: MAX_SMALL_ENUM_VALUES,
                });
            }
        }
        if let Some(c) = map.get("const") {
            self.text += text_len(c);
        }
        for (segments, child) in children(map) {
            let child_path = segments
                .iter()
                .fold(path.to_owned(), |p, s| join_pointer(&p, s));
            self.visit(child, &child_path)?;
        }
        Ok(())
    }
}

struct Depth<'a> {
    root: &'a Value,
    /// Deepest nesting below each reference target, and the path to it (relative).
    memo: HashMap<String, (usize, String)>,
    stack: Vec<String>,
}

impl<'a> Depth<'a> {
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let mut target = self.root;
        for segment in decode_ref(reference)? {
            target = match target {
                Value::Object(map) => map.get(&segment)?,
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(target)
    }

    /// The most object levels along any path from `value` down, and the (relative) path of the
    /// deepest object.
    fn max_depth(&mut self, value: &'a Value) -> (usize, String) {
        let Value::Object(map) = value else {
            return (0, String::new());
        };
        let is_object = match map.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
            _ => map.contains_key("properties"),
        };
        let mut best = (0, String::new());
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            if let Some(found) = self.memo.get(reference) {
                best = found.clone();
            } else if !self.stack.iter().any(|r| r == reference) {
                if let Some(target) = self.resolve(reference) {
                    self.stack.push(reference.to_owned());
                    let found = self.max_depth(target);
                    self.stack.pop();
                    self.memo.insert(reference.to_owned(), found.clone());
                    best = found;
                }
            }
        }
        for (segments, child) in children(map) {
            if segments[0] == "$defs" || segments[0] == "definitions" {
                continue;
            }
            let (d, p) = self.max_depth(child);
            if d > best.0 {
                let prefix = segments
                    .iter()
                    .fold(String::new(), |p, s| join_pointer(&p, s));
                best = (d, format!("{prefix}{p}"));
            }
        }
        if is_object {
            best.0 += 1;
        }
        best
    }
}
