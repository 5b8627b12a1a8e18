//! `$ref` resolution inside one document, for the renderings (the validator resolves on its own).

use std::collections::HashMap;

use serde_json::Value;

use super::subschemas::{holds, Holds};
use crate::schema::pointer::decode_ref;

/// Resolves `$ref`s inside one schema document: JSON pointers (`#/$defs/a`), anchors (`#a`,
/// `$anchor` or a draft-4 `id: "#a"`) and embedded resources (`$id` / `id`, then a fragment).
pub(super) struct Resolver<'a> {
    root: &'a Value,
    anchors: HashMap<String, &'a Value>,
    /// Embedded resources below the root, by their `$id` as written.
    ids: Vec<(String, &'a Value)>,
    root_id: Option<String>,
}

impl<'a> Resolver<'a> {
    pub fn new(root: &'a Value) -> Self {
        let mut r = Resolver {
            root,
            anchors: HashMap::new(),
            ids: Vec::new(),
            root_id: None,
        };
        r.root_id = id_of(root).map(|id| id.trim_end_matches('#').to_owned());
        let mut stack = vec![(root, true, 0usize)];
        while let Some((schema, is_root, depth)) = stack.pop() {
            let Value::Object(map) = schema else { continue };
            if let Some(anchor) = map.get("$anchor").and_then(Value::as_str) {
                r.anchors.entry(anchor.to_owned()).or_insert(schema);
            }
            if let Some(id) = id_of(schema) {
                if let Some(anchor) = id.strip_prefix('#') {
                    r.anchors.entry(anchor.to_owned()).or_insert(schema);
                } else if !is_root {
                    r.ids.push((id.trim_end_matches('#').to_owned(), schema));
                }
            }
            if depth > super::MAX_SCHEMA_DEPTH {
                continue;
            }
            for child in children(map) {
                stack.push((child, false, depth + 1));
            }
        }
        r
    }

    /// Whether subschemas below the root set their own base URI.
    pub fn has_embedded_ids(&self) -> bool {
        !self.ids.is_empty()
    }

    /// The subschema `reference` points at, when it is inside the document.
    pub fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let (base, fragment) = match reference.split_once('#') {
            Some((b, f)) => (b, f),
            None => (reference, ""),
        };
        let resource = if base.is_empty() || Some(base) == self.root_id.as_deref() {
            self.root
        } else {
            self.ids
                .iter()
                .find(|(id, _)| {
                    id == base || id.ends_with(&format!("/{base}")) || base.ends_with(id.as_str())
                })
                .map(|(_, s)| *s)?
        };
        if fragment.is_empty() {
            return Some(resource);
        }
        if !fragment.starts_with('/') {
            return self.anchors.get(fragment).copied();
        }
        let mut target = resource;
        for segment in decode_ref(&format!("#{fragment}"))? {
            target = match target {
                Value::Object(map) => map.get(&segment)?,
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(target)
    }
}

fn id_of(schema: &Value) -> Option<&str> {
    let map = schema.as_object()?;
    map.get("$id")
        .or_else(|| map.get("id"))
        .and_then(Value::as_str)
}

/// The subschemas directly inside a schema object.
pub(super) fn children(map: &serde_json::Map<String, Value>) -> Vec<&Value> {
    let mut out = Vec::new();
    for (key, value) in map {
        match (holds(key), value) {
            (Holds::One, v) => out.push(v),
            (Holds::Either, v) if key == "items" && !v.is_array() => out.push(v),
            (Holds::Map | Holds::Either, Value::Object(m)) => {
                out.extend(m.values().filter(|v| !v.is_array()))
            }
            (Holds::List | Holds::Either, Value::Array(items)) => out.extend(items),
            _ => {}
        }
    }
    out
}
