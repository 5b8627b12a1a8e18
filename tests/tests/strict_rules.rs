//! `strict_schema()` outputs pass the independent checker of the OpenAI strict rules, and the
//! checker itself rejects schemas that break them.

use contract_core::schema::strict_schema;
use contract_tests::openai_rules::check;
use serde_json::{json, Value};

fn strict(schema: &Value) -> Value {
    match strict_schema(schema) {
        Ok(s) => s.schema,
        Err(e) => panic!("no strict schema: {e}\n{schema:#}"),
    }
}

fn assert_passes(schema: &Value) {
    if let Err(problems) = check(schema) {
        panic!("{problems:#?}\n{schema:#}");
    }
}

fn assert_rejected(schema: &Value, needle: &str) {
    match check(schema) {
        Ok(()) => panic!("accepted:\n{schema:#}"),
        Err(problems) => assert!(
            problems.iter().any(|p| p.contains(needle)),
            "no problem mentions {needle:?}: {problems:#?}"
        ),
    }
}

fn inputs() -> Vec<Value> {
    vec![
        // Optional properties, formats, lengths, units, rules.
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Person",
            "type": "object",
            "description": "A person.",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 80, "default": "x"},
                "email": {"type": "string", "format": "email"},
                "site": {"type": "string", "format": "uri"},
                "born": {"type": "string", "format": "date", "examples": ["2000-01-01"]},
                "height": {"type": "number", "exclusiveMinimum": 0, "x-unit": "cm"},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "uniqueItems": true},
                "role": {"enum": ["admin", "user"]}
            },
            "required": ["name"],
            "x-rules": ["born <= today"]
        }),
        // Nested definitions, references with descriptions, nullable references.
        json!({
            "type": "object",
            "properties": {
                "home": {"$ref": "#/$defs/Address", "description": "Where they live."},
                "work": {"$ref": "#/$defs/Address"},
                "previous": {"type": "array", "items": {"$ref": "#/$defs/Address"}, "maxItems": 3}
            },
            "required": ["home", "previous"],
            "additionalProperties": false,
            "$defs": {
                "Address": {
                    "type": "object",
                    "title": "Address",
                    "properties": {
                        "street": {"type": "string"},
                        "country": {"$ref": "#/$defs/Country"},
                        "geo": {
                            "type": "object",
                            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                            "minProperties": 2
                        }
                    },
                    "required": ["street"]
                },
                "Country": {"type": "string", "enum": ["FR", "DE"], "description": "ISO code"}
            }
        }),
        // Draft-7 definitions, allOf, oneOf, const, not, if/then, dependentRequired.
        json!({
            "type": "object",
            "allOf": [
                {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                {"properties": {"n": {"type": "integer", "not": {"const": 0}}}}
            ],
            "properties": {
                "choice": {"oneOf": [{"$ref": "#/definitions/A"}, {"type": "null"}]},
                "id": {"type": "string", "format": "uuid", "$comment": "v4"}
            },
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"required": ["n"]},
            "dependentRequired": {"id": ["kind"]},
            "definitions": {
                "A": {"type": "object", "properties": {"x": {"type": "boolean"}}, "additionalProperties": true}
            }
        }),
        // A recursive schema.
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#"}}
            }
        }),
    ]
}

#[test]
fn strict_outputs_pass_the_checker() {
    for input in inputs() {
        assert!(
            check(&input).is_err(),
            "inputs are not strict already:\n{input:#}"
        );
        let out = strict(&input);
        assert_passes(&out);
    }
}

#[test]
fn moved_meaning_is_in_descriptions() {
    let out = strict(&inputs()[0]);
    let p = &out["properties"];
    assert_eq!(p["name"]["description"], "Length 1-80 characters.");
    assert_eq!(p["site"]["description"], "Format: uri.");
    assert_eq!(p["height"]["description"], "Unit: cm.");
    assert_eq!(p["tags"]["description"], "Items must be unique.");
    assert_eq!(out["description"], "A person. Rules: born <= today.");
    assert_eq!(p["email"]["type"], json!(["string", "null"]));
    assert_eq!(p["role"]["enum"], json!(["admin", "user", null]));
}

fn good() -> Value {
    json!({
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"], "format": "date"},
            "b": {"$ref": "#/$defs/B"}
        },
        "required": ["a", "b"],
        "additionalProperties": false,
        "$defs": {
            "B": {"type": "object", "properties": {"c": {"type": "integer", "minimum": 0}}, "required": ["c"], "additionalProperties": false}
        }
    })
}

#[test]
fn the_checker_accepts_a_strict_schema() {
    assert_passes(&good());
}

#[test]
fn the_checker_rejects_broken_schemas() {
    let mut missing_additional = good();
    missing_additional["$defs"]["B"]
        .as_object_mut()
        .unwrap()
        .remove("additionalProperties");
    assert_rejected(
        &missing_additional,
        "`additionalProperties: false` must always be set",
    );

    let mut open = good();
    open["additionalProperties"] = json!(true);
    assert_rejected(&open, "`additionalProperties: false` must always be set");

    let mut titled = good();
    titled["title"] = json!("Good");
    assert_rejected(&titled, "'title' is not permitted");

    let mut defaulted = good();
    defaulted["properties"]["a"]["default"] = json!(null);
    assert_rejected(&defaulted, "'default' is not permitted");

    let mut unlisted = good();
    unlisted["properties"]["a"]["minLength"] = json!(1);
    assert_rejected(&unlisted, "keyword `minLength` is not supported");

    let mut optional = good();
    optional["required"] = json!(["b"]);
    assert_rejected(&optional, "property `a` is not in `required`");

    let mut format = good();
    format["properties"]["a"]["format"] = json!("uri");
    assert_rejected(&format, "format \"uri\" is not supported");

    let mut ref_sibling = good();
    ref_sibling["properties"]["b"]["description"] = json!("The B.");
    assert_rejected(&ref_sibling, "`$ref` must stand alone");

    let mut dangling = good();
    dangling["properties"]["b"]["$ref"] = json!("#/$defs/Missing");
    assert_rejected(&dangling, "does not point into `$defs`");

    assert_rejected(
        &json!({"anyOf": [{"type": "object", "properties": {}, "required": [], "additionalProperties": false}]}),
        "the root must not be `anyOf`",
    );
    assert_rejected(&json!({"type": "string"}), "the root must be an object");
    assert_rejected(
        &json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", null]}}, "required": ["a"], "additionalProperties": false}),
        "enum value null does not match the type",
    );
    assert_rejected(
        &json!({"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": false}),
        "says nothing about its type",
    );
}

#[test]
fn the_checker_enforces_the_limits() {
    let mut deep = json!({"type": "string"});
    for _ in 0..11 {
        deep = json!({"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": false});
    }
    assert_rejected(&deep, "11 levels of nesting exceeds limit of 10");

    let values: Vec<Value> = (0..1001).map(|i| json!(format!("v{i}"))).collect();
    let many = json!({"type": "object", "properties": {"a": {"type": "string", "enum": values}}, "required": ["a"], "additionalProperties": false});
    assert_rejected(&many, "1001 enum values exceed the limit of 1000");

    let long: Vec<Value> = (0..251).map(|i| json!(format!("{i:0>60}"))).collect();
    let long = json!({"type": "object", "properties": {"a": {"type": "string", "enum": long}}, "required": ["a"], "additionalProperties": false});
    assert_rejected(
        &long,
        "an enum of 251 string values totals 15060 characters",
    );

    let properties: serde_json::Map<String, Value> = (0..5001)
        .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
        .collect();
    let names: Vec<&String> = properties.keys().collect();
    let wide = json!({"type": "object", "properties": properties, "required": names, "additionalProperties": false});
    assert_rejected(&wide, "5001 object properties exceed the limit of 5000");

    // The transform refuses the same schemas with its own errors.
    for schema in [&deep, &many, &long, &wide] {
        assert!(strict_schema(schema).is_err());
    }
}
