//! The groups' values merged into the whole contract's object ([`merge`]), a violation sent to
//! its group ([`group_of_path`]), and list items merged from several replies without repeats
//! ([`merge_lists`], [`item_key`]).

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::groups::is_list;
use super::FieldGroup;
use crate::ir::ContractSpec;

/// The JSON object of the whole contract from each group's values: the fields in the
/// contract's order, a group without values giving null (an empty list for a list field).
pub fn merge(
    spec: &ContractSpec,
    values: &[Option<Map<String, Value>>],
    groups: &[FieldGroup],
) -> Value {
    let mut out = Map::new();
    let Some(object) = spec.object() else {
        return Value::Object(out);
    };
    for f in &object.properties {
        let g = groups.iter().position(|g| g.fields.contains(&f.name));
        let v = g
            .and_then(|g| values.get(g)?.as_ref()?.get(&f.name).cloned())
            .unwrap_or_else(|| {
                if is_list(&f.node) && !f.node.is_nullable() {
                    Value::Array(Vec::new())
                } else {
                    Value::Null
                }
            });
        out.insert(f.name.clone(), v);
    }
    Value::Object(out)
}

/// The group a violation at JSON pointer `path` belongs to (by its first segment), if any.
pub fn group_of_path(groups: &[FieldGroup], path: &str) -> Option<usize> {
    let first = path.trim_start_matches('/').split('/').next()?;
    let first = first.replace("~1", "/").replace("~0", "~");
    groups.iter().position(|g| g.fields.contains(&first))
}

/// Items of list values merged from several replies in order, repeats (the same JSON value,
/// strings compared with whitespace collapsed and case folded) left out.
pub fn merge_lists(parts: &[Map<String, Value>], fields: &[String]) -> Map<String, Value> {
    let mut out = Map::new();
    for f in fields {
        let mut items: Vec<Value> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        let mut scalar: Option<Value> = None;
        for part in parts {
            match part.get(f) {
                Some(Value::Array(xs)) => {
                    for x in xs {
                        let key = item_key(x);
                        if !keys.contains(&key) {
                            keys.push(key);
                            items.push(x.clone());
                        }
                    }
                }
                Some(Value::Null) | None => {}
                Some(other) => {
                    if scalar.is_none() {
                        scalar = Some(other.clone());
                    }
                }
            }
        }
        let value = match scalar {
            Some(s) if items.is_empty() => s,
            _ => Value::Array(items),
        };
        out.insert(f.clone(), value);
    }
    out
}

/// What two list items are compared by: a string's words, case folded; any other value's JSON
/// text with every string so normalised (an evidenced item by its value alone).
pub(crate) fn item_key(v: &Value) -> String {
    let v = match v {
        Value::Object(m) if m.contains_key("value") && m.contains_key("evidence") => &m["value"],
        other => other,
    };
    match v {
        Value::String(s) => crate::source::normalize(s),
        other => {
            let mut s = String::new();
            let _ = write!(s, "{}", normalized_json(other));
            s
        }
    }
}

fn normalized_json(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(crate::source::normalize(s)),
        Value::Array(xs) => Value::Array(xs.iter().map(normalized_json).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normalized_json(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}
