//! Draft 2020-12 schemas of contracts.

use serde_json::{json, Map, Value};

use super::bounds::{int_number, integer_lower, integer_upper, Source};
use super::pointer::def_ref;
use super::DRAFT_2020_12;
use crate::contract::{Constraints, ContractSpec, FieldSpec, SpecKind, TypeSpec};

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
    let mut map = Map::new();
    match &spec.kind {
        SpecKind::Object(object) => {
            map.insert("type".into(), "object".into());
            if let Some(description) = &spec.description {
                map.insert("description".into(), description.clone().into());
            }
            let properties: Map<String, Value> = object
                .fields
                .iter()
                .map(|f| (f.name.clone(), field_schema(f, generator)))
                .collect();
            let required: Vec<Value> = object
                .fields
                .iter()
                .map(|f| f.name.clone().into())
                .collect();
            map.insert("properties".into(), properties.into());
            map.insert("required".into(), required.into());
            map.insert("additionalProperties".into(), false.into());
            if !object.rules.is_empty() {
                let rules: Vec<Value> = object.rules.iter().map(|r| r.to_string().into()).collect();
                map.insert("x-rules".into(), rules.into());
            }
        }
        SpecKind::Enum(e) => {
            map.insert("type".into(), "string".into());
            let values: Vec<Value> = e.variants.iter().map(|v| v.name.clone().into()).collect();
            map.insert("enum".into(), values.into());
            let documented: Vec<String> = e
                .variants
                .iter()
                .filter_map(|v| Some(format!("`{}`: {}", v.name, v.description.as_deref()?)))
                .collect();
            let mut description = spec.description.clone().unwrap_or_default();
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
    }
    schemars::Schema::from(map)
}

fn field_schema(field: &FieldSpec, generator: &mut schemars::SchemaGenerator) -> Value {
    let mut map = Map::new();
    if let Some(description) = &field.description {
        map.insert("description".into(), description.clone().into());
    }
    map.extend(type_schema(&field.ty, &field.constraints, generator));
    if let Some(unit) = &field.unit {
        map.insert("x-unit".into(), unit.clone().into());
    }
    if let Some(grounded) = &field.constraints.grounded {
        map.insert("x-grounded".into(), grounded_keyword(grounded));
    }
    Value::Object(map)
}

/// The `x-grounded` keyword: `"source"`, `"line"`, `{"in": "quote"}`, `{"lines": ["start_line",
/// "end_line"]}` or `"with_container"`.
pub(crate) fn grounded_keyword(grounded: &crate::contract::Grounding) -> Value {
    use crate::contract::Grounding;
    match grounded {
        Grounding::Source => "source".into(),
        Grounding::Line => "line".into(),
        Grounding::In(field) => serde_json::json!({ "in": field }),
        Grounding::Lines { start, end } => serde_json::json!({ "lines": [start, end] }),
        Grounding::WithContainer => "with_container".into(),
    }
}

fn type_schema(
    ty: &TypeSpec,
    c: &Constraints,
    generator: &mut schemars::SchemaGenerator,
) -> Map<String, Value> {
    let mut map = Map::new();
    match ty {
        TypeSpec::Bool => {
            map.insert("type".into(), "boolean".into());
            one_of(&mut map, c);
        }
        TypeSpec::Integer { min, max } => {
            map.insert("type".into(), "integer".into());
            integer_bounds(&mut map, *min, *max, c);
            one_of(&mut map, c);
        }
        TypeSpec::Number => {
            map.insert("type".into(), "number".into());
            let bounds = [
                ("minimum", &c.minimum),
                ("exclusiveMinimum", &c.exclusive_minimum),
                ("maximum", &c.maximum),
                ("exclusiveMaximum", &c.exclusive_maximum),
            ];
            for (key, bound) in bounds {
                if let Some(n) = bound {
                    map.insert(key.into(), n.clone().into());
                }
            }
            one_of(&mut map, c);
        }
        TypeSpec::String => {
            map.insert("type".into(), "string".into());
            if let Some(n) = c.min_len {
                map.insert("minLength".into(), n.into());
            }
            if let Some(n) = c.max_len {
                map.insert("maxLength".into(), n.into());
            }
            if let Some(p) = &c.pattern {
                map.insert("pattern".into(), p.as_str().into());
            }
            if let Some(f) = c.format {
                map.insert("format".into(), f.as_str().into());
            }
            one_of(&mut map, c);
        }
        TypeSpec::List(item) => {
            let item_constraints = c.for_items();
            map.insert("type".into(), "array".into());
            map.insert(
                "items".into(),
                type_schema(item, &item_constraints, generator).into(),
            );
            if let Some(n) = c.min_len {
                map.insert("minItems".into(), n.into());
            }
            if let Some(n) = c.max_len {
                map.insert("maxItems".into(), n.into());
            }
        }
        TypeSpec::Nullable(inner) => {
            let schema = type_schema(inner, c, generator);
            return nullable(schema, inner);
        }
        TypeSpec::Contract(r) => return into_map(r.subschema(generator).to_value()),
        TypeSpec::External(r) => return into_map(r.subschema(generator).to_value()),
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

fn nullable(mut schema: Map<String, Value>, inner: &TypeSpec) -> Map<String, Value> {
    let scalar_or_list = !matches!(inner, TypeSpec::Contract(_) | TypeSpec::External(_));
    if scalar_or_list {
        if let Some(Value::String(t)) = schema.get("type") {
            let t = t.clone();
            schema.insert("type".into(), json!([t, "null"]));
            if let Some(Value::Array(values)) = schema.get_mut("enum") {
                if !values.contains(&Value::Null) {
                    values.push(Value::Null);
                }
            }
            return schema;
        }
    }
    let mut map = Map::new();
    map.insert(
        "anyOf".into(),
        json!([Value::Object(schema), {"type": "null"}]),
    );
    map
}

fn one_of(map: &mut Map<String, Value>, c: &Constraints) {
    if let Some(values) = &c.one_of {
        map.insert("enum".into(), values.clone().into());
    }
}

/// The tighter of the Rust type's bounds and the constraints.
fn integer_bounds(map: &mut Map<String, Value>, type_min: i128, type_max: i128, c: &Constraints) {
    match integer_lower(type_min, c) {
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
    match integer_upper(type_max, c) {
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
