//! `$ref`s after the walk: each one with sibling keywords inlined (the subset allows no
//! siblings beside a `$ref`), every one checked to resolve, and the definitions nothing refers
//! to any more removed. Apart because it runs once over the finished schema, not per keyword.

use serde_json::Value;

use crate::schema::pointer::decode_ref;
use crate::schema::strict_output::{invalid, Moved, StrictSchemaError};
use crate::validate::join_pointer;

/// Inlines each `$ref` that has sibling keywords (recording it in `moved`), checks that every
/// `$ref` resolves, and removes the definitions left unused.
pub(super) fn inline_refs(
    out: &mut Value,
    moved: &mut Vec<Moved>,
) -> Result<(), StrictSchemaError> {
    let snapshot = out.clone();
    let mut inliner = Inliner {
        root: &snapshot,
        moved,
        stack: Vec::new(),
    };
    inliner.walk(out, "", true)?;
    prune_defs(out);
    Ok(())
}

/// Replaces each `$ref` that has sibling keywords by the schema it points to (siblings on top),
/// and checks that every `$ref` resolves.
struct Inliner<'a> {
    root: &'a Value,
    moved: &'a mut Vec<Moved>,
    /// The references being inlined (decoded), to stop at recursion.
    stack: Vec<Vec<String>>,
}

impl Inliner<'_> {
    fn resolve(&self, reference: &str, path: &str) -> Result<Value, StrictSchemaError> {
        let unresolved = || StrictSchemaError::UnresolvedRef {
            path: path.to_owned(),
            reference: reference.to_owned(),
        };
        let segments = decode_ref(reference).ok_or_else(unresolved)?;
        let mut target = self.root;
        for segment in &segments {
            target = match target {
                Value::Object(map) => map.get(segment),
                Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            }
            .ok_or_else(unresolved)?;
        }
        let mut target = target.clone();
        if segments.is_empty() {
            if let Value::Object(map) = &mut target {
                map.shift_remove("$defs");
            }
        }
        Ok(target)
    }

    fn walk(
        &mut self,
        value: &mut Value,
        path: &str,
        is_root: bool,
    ) -> Result<(), StrictSchemaError> {
        let Value::Object(map) = value else {
            return Ok(());
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str).map(str::to_owned) {
            let target = self.resolve(&reference, path)?;
            let key = decode_ref(&reference).unwrap_or_default();
            if map.len() > 1 {
                if self.stack.contains(&key) {
                    // Inlining again would never end: keep the bare reference.
                    let siblings: Vec<String> =
                        map.keys().filter(|k| *k != "$ref").cloned().collect();
                    for key in siblings {
                        if let Some(v) = map.shift_remove(&key) {
                            self.moved.push(moved(path, &key, v, "dropped"));
                        }
                    }
                    return Ok(());
                }
                let Value::Object(mut inlined) = target else {
                    return Err(invalid(path, "`$ref` points at a boolean schema"));
                };
                let reference_value = map.shift_remove("$ref").unwrap_or(Value::Null);
                for (key, v) in std::mem::take(map) {
                    inlined.insert(key, v);
                }
                *map = inlined;
                self.moved
                    .push(moved(path, "$ref", reference_value, "inlined"));
                self.stack.push(key);
                let result = self.walk_children(value, path, false);
                self.stack.pop();
                return result;
            }
            return Ok(());
        }
        self.walk_children(value, path, is_root)
    }

    fn walk_children(
        &mut self,
        value: &mut Value,
        path: &str,
        is_root: bool,
    ) -> Result<(), StrictSchemaError> {
        let Value::Object(map) = value else {
            return Ok(());
        };
        for (key, child) in map.iter_mut() {
            let child_path = join_pointer(path, key);
            match key.as_str() {
                "items" => self.walk(child, &child_path, false)?,
                "properties" | "anyOf" => match child {
                    Value::Object(children) => {
                        for (name, c) in children.iter_mut() {
                            self.walk(c, &join_pointer(&child_path, name), false)?;
                        }
                    }
                    Value::Array(children) => {
                        for (i, c) in children.iter_mut().enumerate() {
                            self.walk(c, &join_pointer(&child_path, &i.to_string()), false)?;
                        }
                    }
                    _ => {}
                },
                "$defs" if is_root => {
                    if let Value::Object(defs) = child {
                        for (name, def) in defs.iter_mut() {
                            self.walk(def, &join_pointer(&child_path, name), false)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn moved(path: &str, keyword: &str, value: Value, into: &str) -> Moved {
    Moved {
        path: path.to_owned(),
        keyword: keyword.to_owned(),
        value,
        into: into.to_owned(),
    }
}

/// Removes definitions nothing refers to any more.
fn prune_defs(schema: &mut Value) {
    let Some(Value::Object(defs)) = schema.get("$defs").cloned() else {
        return;
    };
    let mut reachable: Vec<String> = Vec::new();
    let mut queue: Vec<&Value> = Vec::new();
    if let Value::Object(root) = &*schema {
        queue.extend(root.iter().filter(|(k, _)| *k != "$defs").map(|(_, v)| v));
    }
    while let Some(value) = queue.pop() {
        match value {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    if let Some(segments) = decode_ref(reference) {
                        if segments.len() == 2
                            && segments[0] == "$defs"
                            && !reachable.contains(&segments[1])
                        {
                            if let Some(def) = defs.get(&segments[1]) {
                                reachable.push(segments[1].clone());
                                queue.push(def);
                            }
                        }
                    }
                }
                queue.extend(map.values());
            }
            Value::Array(items) => queue.extend(items),
            _ => {}
        }
    }
    let Some(Value::Object(out_defs)) = schema.get_mut("$defs") else {
        return;
    };
    out_defs.retain(|name, _| reachable.contains(name));
    if out_defs.is_empty() {
        if let Value::Object(root) = schema {
            root.shift_remove("$defs");
        }
    }
}
