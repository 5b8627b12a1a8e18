//! Draft 2020-12 schemas of contracts.

use serde_json::{json, Map, Value};

use super::pointer::def_ref;
use crate::bounds::{int_number, NumberBounds, Source};
use crate::ir::ContractSpec;
use crate::ir::{Node, Target};

/// The `$schema` of every document [`root_schema`](super::root_schema) returns.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

pub(super) fn root_schema(spec: &ContractSpec) -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.meta_schema = None)
        .into_generator();
    let body = contract_schema(spec, &mut generator).to_value();
    let mut defs = generator.take_definitions(true);

    let mut root = Map::new();
    root.insert("$schema".into(), DRAFT_2020_12.into());
    root.insert("title".into(), spec.name.clone().into());
    let Value::Object(body) = body else {
        unreachable!("contract schemas are objects")
    };

    // A recursive contract put its own schema into the definitions; refer to the root instead.
    let own = defs
        .iter()
        .find(|(_, def)| def.as_object() == Some(&body))
        .map(|(name, _)| name.clone());
    root.extend(body);
    if let Some(name) = own {
        defs.shift_remove(&name);
        let from = def_ref(&name);
        let mut all = Value::Object(root);
        replace_ref(&mut all, &from, "#");
        for def in defs.values_mut() {
            replace_ref(def, &from, "#");
        }
        let Value::Object(map) = all else {
            unreachable!()
        };
        root = map;
    }
    if !defs.is_empty() {
        root.insert("$defs".into(), Value::Object(defs));
    }
    Value::Object(root)
}

fn replace_ref(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "$ref" && v.as_str() == Some(from) {
                    *v = to.into();
                } else {
                    replace_ref(v, from, to);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| replace_ref(v, from, to)),
        _ => {}
    }
}

pub(super) fn contract_schema(
    spec: &ContractSpec,
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    let node = spec.node();
    let mut map = Map::new();
    if let Some(object) = node.object.as_deref() {
        map.insert("type".into(), "object".into());
        if let Some(description) = &node.description {
            map.insert("description".into(), description.clone().into());
        }
        let properties: Map<String, Value> = object
            .properties
            .iter()
            .map(|f| (f.name.clone(), field_schema(&f.node, generator)))
            .collect();
        let required: Vec<Value> = object.required.iter().map(|f| f.clone().into()).collect();
        map.insert("properties".into(), properties.into());
        map.insert("required".into(), required.into());
        map.insert("additionalProperties".into(), false.into());
        if !object.rules.is_empty() {
            let rules: Vec<Value> = object.rules.iter().map(|r| r.to_string().into()).collect();
            map.insert("x-rules".into(), rules.into());
        }
        if let Some(question) = &node.question {
            map.insert("x-question".into(), question.clone().into());
        }
    } else {
        map.insert("type".into(), "string".into());
        let values = node.enumeration.clone().unwrap_or_default();
        let documented: Vec<String> = values
            .iter()
            .zip(&node.enum_descriptions)
            .filter_map(|(v, d)| Some(format!("`{}`", v.as_str()?) + ": " + d.as_deref()?))
            .collect();
        map.insert("enum".into(), values.into());
        let mut description = node.description.clone().unwrap_or_default();
        if !documented.is_empty() {
            if !description.is_empty() {
                description.push(' ');
            }
            description.push_str(&documented.join("; "));
        }
        if !description.is_empty() {
            map.insert("description".into(), description.into());
        }
    }
    schemars::Schema::from(map)
}

/// A field's schema: description, the value's keywords, unit, grounding.
fn field_schema(node: &Node, generator: &mut schemars::SchemaGenerator) -> Value {
    let mut map = Map::new();
    if let Some(description) = &node.description {
        map.insert("description".into(), description.clone().into());
    }
    map.extend(value_schema(node, generator));
    if let Some(unit) = &node.unit {
        map.insert("x-unit".into(), unit.clone().into());
    }
    if let Some(grounded) = &node.grounded {
        map.insert("x-grounded".into(), grounded_keyword(grounded));
    }
    if let Some(form) = node.form {
        map.insert("x-form".into(), form.as_str().into());
    }
    if let Some(question) = &node.question {
        map.insert("x-question".into(), question.clone().into());
    }
    if let Some(group) = &node.group {
        map.insert("x-group".into(), group.clone().into());
    }
    Value::Object(map)
}

/// The `x-grounded` keyword: `"source"`, `"line"`, `{"in": "quote"}`, `{"lines": ["start_line",
/// "end_line"]}` or `"with_container"`.
pub(crate) fn grounded_keyword(grounded: &crate::attrs::Grounding) -> Value {
    use crate::attrs::Grounding;
    match grounded {
        Grounding::Source => "source".into(),
        Grounding::Line => "line".into(),
        Grounding::In(field) => serde_json::json!({ "in": field }),
        Grounding::Lines { start, end } => serde_json::json!({ "lines": [start, end] }),
        Grounding::WithContainer => "with_container".into(),
    }
}

/// The keywords of a derived value node (without its description, unit and grounding), in the
/// order schemas have always written them.
fn value_schema(node: &Node, generator: &mut schemars::SchemaGenerator) -> Map<String, Value> {
    if let Some(r) = &node.external {
        return into_map(r.subschema(generator).to_value());
    }
    if let Some(Target::Contract(r)) = node.reference.as_ref().and_then(|r| r.target.as_ref()) {
        return into_map(r.subschema(generator).to_value());
    }
    if let Some(branches) = &node.any_of {
        let list: Vec<Value> = branches
            .iter()
            .map(|b| Value::Object(value_schema(b, generator)))
            .collect();
        let mut map = Map::new();
        map.insert("anyOf".into(), list.into());
        return map;
    }
    let mut map = Map::new();
    let names: Vec<Value> = node.types.iter().map(|t| t.as_str().into()).collect();
    match names.as_slice() {
        [] => {}
        [one] => {
            map.insert("type".into(), one.clone());
        }
        _ => {
            map.insert("type".into(), names.into());
        }
    }
    let n = &node.number;
    if let Some((type_min, type_max)) = n.integer_type {
        integer_bounds(&mut map, type_min, type_max, &n.bounds);
    } else {
        let b = &n.bounds;
        let bounds = [
            ("minimum", &b.minimum),
            ("exclusiveMinimum", &b.exclusive_minimum),
            ("maximum", &b.maximum),
            ("exclusiveMaximum", &b.exclusive_maximum),
        ];
        for (key, bound) in bounds {
            if let Some(n) = bound {
                map.insert(key.into(), n.clone().into());
            }
        }
    }
    let s = &node.string;
    if let Some(n) = s.min_length {
        map.insert("minLength".into(), n.into());
    }
    if let Some(n) = s.max_length {
        map.insert("maxLength".into(), n.into());
    }
    if let Some(p) = &s.pattern {
        map.insert("pattern".into(), p.as_str().into());
    }
    if let Some(f) = &s.format {
        map.insert("format".into(), f.clone().into());
    }
    if let Some(a) = node.array.as_deref() {
        if let Some(items) = &a.items {
            map.insert("items".into(), value_schema(items, generator).into());
        }
        if let Some(n) = a.min_items {
            map.insert("minItems".into(), n.into());
        }
        if let Some(n) = a.max_items {
            map.insert("maxItems".into(), n.into());
        }
    }
    if let Some(values) = &node.enumeration {
        map.insert("enum".into(), values.clone().into());
    }
    map
}

fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        // `true`: any value; `false`: none.
        Value::Bool(true) => Map::new(),
        other => {
            let mut map = Map::new();
            map.insert("not".into(), json!({}));
            debug_assert_eq!(other, Value::Bool(false));
            map
        }
    }
}

/// The tighter of the Rust type's bounds and the constraints.
fn integer_bounds(map: &mut Map<String, Value>, type_min: i128, type_max: i128, c: &NumberBounds) {
    match c.integer_lower(type_min) {
        (_, Source::Inclusive) => {
            map.insert("minimum".into(), c.minimum.clone().into());
        }
        (_, Source::Exclusive) => {
            map.insert(
                "exclusiveMinimum".into(),
                c.exclusive_minimum.clone().into(),
            );
        }
        (v, Source::Type) => {
            map.insert("minimum".into(), int_number(v).into());
        }
    }
    match c.integer_upper(type_max) {
        (_, Source::Inclusive) => {
            map.insert("maximum".into(), c.maximum.clone().into());
        }
        (_, Source::Exclusive) => {
            map.insert(
                "exclusiveMaximum".into(),
                c.exclusive_maximum.clone().into(),
            );
        }
        (v, Source::Type) => {
            map.insert("maximum".into(), int_number(v).into());
        }
    }
}
