//! A JSON Schema document converted into the IR ([`crate::ir::Document`]): node 0 is the root,
//! every `$ref` target that resolves inside the document becomes one node, once.
//!
//! The conversion keeps what the renderings read: types, `enum` / `const`, bounds, string and
//! array keywords, properties (required or not), pattern and additional properties, the
//! combinators, `x-unit`, `x-grounded`, `x-rules`, descriptions; a draft-4 boolean
//! `exclusiveMinimum` becomes an exclusive bound, the draft-4 list form of `items` becomes
//! `prefixItems`. Every other keyword with a meaning is kept as written in [`Node::other`] (what
//! it means for each rendering is in [`super::Gap`]s, found by the scan before this runs).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::keywords::FULL;
use super::resolve::Resolver;
use crate::attrs::{Form, Grounding, Pattern, Rule};
use crate::ir::{
    ArrayNode, Document, FieldSpec, JsonType, Node, ObjectNode, Ref, Structure, Target,
};

/// Keywords converted into typed fields of a [`Node`] besides those every rendering carries
/// ([`FULL`]), and annotations with no meaning for any rendering; every other key goes to
/// [`Node::other`].
const READ: [&str; 25] = [
    "x-grounded",
    "x-form",
    "x-question",
    "x-group",
    "format",
    "uniqueItems",
    "$ref",
    "oneOf",
    "x-unit",
    "x-rules",
    "$schema",
    "$id",
    "id",
    "$anchor",
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
    "x-guidance",
];

/// Converts `schema` (already checked by the scan: refs resolve, depth bounded, rules parse).
pub(super) fn document(schema: &Value, name: &str) -> Document {
    let resolver = Resolver::new(schema);
    let mut c = Converter {
        resolver: &resolver,
        index: HashMap::new(),
        pending: Vec::new(),
        old_draft: old_draft(schema, false),
    };
    c.index.insert(schema as *const Value, 0);
    let mut nodes = vec![Node::default()];
    c.pending.push(schema);
    let mut i = 0;
    while i < c.pending.len() {
        let target = c.pending[i];
        let node = c.node(target, c.old_draft);
        if i < nodes.len() {
            nodes[i] = node;
        } else {
            nodes.push(node);
        }
        i += 1;
    }
    Document {
        name: name.to_owned(),
        nodes,
        source_len: serde_json::to_string(schema).map_or(0, |s| s.chars().count()),
    }
}

struct Converter<'r, 'a> {
    resolver: &'r Resolver<'a>,
    /// Each reference target's node index.
    index: HashMap<*const Value, usize>,
    /// Targets in index order, converted one after the other (references are not followed
    /// recursively, so a long chain of definitions cannot overflow the stack).
    pending: Vec<&'a Value>,
    /// Whether the root declares draft 4, 6 or 7.
    old_draft: bool,
}

/// Whether `schema` declares draft 4, 6 or 7 (`inherited` when it declares none): those drafts
/// ignore the keywords beside a `$ref`.
fn old_draft(schema: &Value, inherited: bool) -> bool {
    match schema.get("$schema").and_then(Value::as_str) {
        Some(uri) => ["draft-03", "draft-04", "draft-06", "draft-07"]
            .iter()
            .any(|d| uri.contains(d)),
        None => inherited,
    }
}

impl<'a> Converter<'_, 'a> {
    /// The node of `schema`; `old`: a draft 4 to 7 schema is around it.
    fn node(&mut self, schema: &'a Value, old: bool) -> Node {
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(b) => return Node::boolean(*b),
            // Not a schema (the scan and the validator's meta-schema check reject these).
            _ => return Node::boolean(true),
        };
        let old = old_draft(schema, old);
        if old {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                // Drafts 4 to 7 ignore every keyword beside a `$ref`; its title and description
                // still tell a reader of the docs what the reference is for.
                return Node {
                    title: text(map, "title"),
                    description: text(map, "description"),
                    reference: Some(self.reference(reference)),
                    ..Node::default()
                };
            }
        }
        let mut node = Node {
            title: text(map, "title"),
            description: text(map, "description"),
            unit: map.get("x-unit").map(|u| match u {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            grounded: map.get("x-grounded").and_then(Grounding::from_keyword),
            form: map
                .get("x-form")
                .and_then(Value::as_str)
                .and_then(Form::from_name),
            question: text(map, "x-question"),
            group: text(map, "x-group"),
            ..Node::default()
        };
        match map.get("type") {
            Some(Value::String(t)) => node.types.extend(JsonType::from_name(t)),
            Some(Value::Array(ts)) => node.types.extend(
                ts.iter()
                    .filter_map(Value::as_str)
                    .filter_map(JsonType::from_name),
            ),
            _ => {}
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            node.enumeration = Some(values.clone());
        }
        node.constant = map.get("const").cloned();
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            node.reference = Some(self.reference(reference));
        }
        node.dynamic_reference = ["$dynamicRef", "$recursiveRef"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
            .map(str::to_owned);
        self.numbers(map, &mut node);
        self.strings(map, &mut node);
        node.array = self.array(map, old);
        node.object = self.object(map, old);
        node.any_of = self.list(map, "anyOf", old);
        node.one_of = self.list(map, "oneOf", old);
        node.all_of = self.list(map, "allOf", old);
        for key in map.keys() {
            let part = match key.as_str() {
                "properties" => Structure::Properties,
                "$ref" => Structure::Ref,
                "allOf" => Structure::AllOf,
                "anyOf" => Structure::AnyOf,
                "oneOf" => Structure::OneOf,
                _ => continue,
            };
            if !node.structure.contains(&part) {
                node.structure.push(part);
            }
        }
        node.other = map
            .iter()
            .filter(|(k, _)| {
                !FULL.contains(&k.as_str())
                    && !READ.contains(&k.as_str())
                    && !matches!(k.as_str(), "$dynamicRef" | "$recursiveRef")
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        node
    }

    fn reference(&mut self, reference: &str) -> Ref {
        let target = self.resolver.resolve(reference).map(|target| {
            let key = target as *const Value;
            let next = self.index.len();
            let i = *self.index.entry(key).or_insert(next);
            if i == next {
                self.pending.push(target);
            }
            Target::Def(i)
        });
        Ref::new(reference, target)
    }

    fn numbers(&self, map: &Map<String, Value>, node: &mut Node) {
        let num = |k: &str| match map.get(k) {
            Some(Value::Number(n)) => Some(n.clone()),
            _ => None,
        };
        let n = &mut node.number;
        let b = &mut n.bounds;
        b.minimum = num("minimum");
        b.maximum = num("maximum");
        b.exclusive_minimum = num("exclusiveMinimum");
        b.exclusive_maximum = num("exclusiveMaximum");
        // Draft 4: a boolean `exclusiveMinimum` makes `minimum` exclusive.
        if map.get("exclusiveMinimum") == Some(&Value::Bool(true)) {
            b.exclusive_minimum = b.minimum.take();
        }
        if map.get("exclusiveMaximum") == Some(&Value::Bool(true)) {
            b.exclusive_maximum = b.maximum.take();
        }
        n.multiple_of = num("multipleOf");
    }

    fn strings(&self, map: &Map<String, Value>, node: &mut Node) {
        let s = &mut node.string;
        s.min_length = count(map, "minLength");
        s.max_length = count(map, "maxLength");
        s.pattern = map
            .get("pattern")
            .and_then(Value::as_str)
            .map(|p| Pattern::new(p).unwrap_or_else(|_| Pattern::uncompiled(p)));
        s.format = text(map, "format");
    }

    fn array(&mut self, map: &'a Map<String, Value>, old: bool) -> Option<Box<ArrayNode>> {
        let (prefix, rest) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), rest) => (Some(prefix), rest),
            (_, Some(Value::Array(prefix))) => (Some(prefix), map.get("additionalItems")),
            (_, rest) => (None, rest),
        };
        let a = ArrayNode {
            items: rest.map(|s| self.node(s, old)),
            prefix_items: prefix.map(|p| p.iter().map(|s| self.node(s, old)).collect()),
            min_items: count(map, "minItems"),
            max_items: count(map, "maxItems"),
            unique_items: map.get("uniqueItems") == Some(&Value::Bool(true)),
        };
        let any = a.items.is_some()
            || a.prefix_items.is_some()
            || a.min_items.is_some()
            || a.max_items.is_some()
            || a.unique_items;
        any.then(|| Box::new(a))
    }

    fn object(&mut self, map: &'a Map<String, Value>, old: bool) -> Option<Box<ObjectNode>> {
        let mut o = ObjectNode::default();
        let mut any = false;
        if let Some(Value::Object(properties)) = map.get("properties") {
            any = true;
            o.has_shape = true;
            for (name, schema) in properties {
                o.properties.push(FieldSpec {
                    name: name.clone(),
                    rust_name: String::new(),
                    node: self.node(schema, old),
                });
            }
        }
        if let Some(Value::Array(required)) = map.get("required") {
            any = true;
            o.has_shape = true;
            o.required = required
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
        }
        if let Some(Value::Object(patterns)) = map.get("patternProperties") {
            any = true;
            o.has_shape = true;
            for (pattern, schema) in patterns {
                o.pattern_properties
                    .push((pattern.clone(), self.node(schema, old)));
            }
        }
        if let Some(extra) = map.get("additionalProperties") {
            any = true;
            o.has_shape = true;
            o.additional_properties = Some(Box::new(self.node(extra, old)));
        }
        o.min_properties = count(map, "minProperties");
        o.max_properties = count(map, "maxProperties");
        if let Some(Value::Array(rules)) = map.get("x-rules") {
            o.rules = rules
                .iter()
                .filter_map(|r| r.as_str().and_then(Rule::parse))
                .collect();
        }
        any |= o.min_properties.is_some() || o.max_properties.is_some() || !o.rules.is_empty();
        any.then(|| Box::new(o))
    }

    fn list(&mut self, map: &'a Map<String, Value>, key: &str, old: bool) -> Option<Vec<Node>> {
        match map.get(key) {
            Some(Value::Array(items)) => Some(items.iter().map(|s| self.node(s, old)).collect()),
            _ => None,
        }
    }
}

fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A non-negative integer keyword (`3`, also `3.0`).
fn count(map: &Map<String, Value>, key: &str) -> Option<u64> {
    match map.get(key) {
        Some(Value::Number(n)) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}
