use serde_json::{json, Value};

use super::fixtures::*;
use super::*;
use crate::Contract;

fn guidance_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Guidance",
        "type": "object",
        "description": "Next-quarter revenue guidance stated in an earnings release.",
        "properties": {
            "quarter": {"type": ["integer", "null"], "minimum": 1, "maximum": 4},
            "year": {"type": ["integer", "null"], "minimum": 2018, "maximum": 2030},
            "low": {
                "description": "Low end of the range.",
                "type": ["number", "null"],
                "exclusiveMinimum": 0,
                "x-unit": "USD millions"
            },
            "high": {"type": ["number", "null"], "exclusiveMinimum": 0, "x-unit": "USD millions"}
        },
        "required": ["quarter", "year", "low", "high"],
        "additionalProperties": false,
        "x-rules": ["low <= high", "both_or_neither(low, high)"]
    })
}

fn strict(schema: &Value) -> StrictSchema {
    match strict_schema(schema) {
        Ok(s) => s,
        Err(e) => panic!("no strict schema: {e}\n{schema:#}"),
    }
}

fn moved(s: &StrictSchema) -> Vec<(String, String, String)> {
    s.moved
        .iter()
        .map(|m| (m.path.clone(), m.keyword.clone(), m.into.clone()))
        .collect()
}

fn triple(path: &str, keyword: &str, into: &str) -> (String, String, String) {
    (path.into(), keyword.into(), into.into())
}

#[test]
fn guidance_json_schema_exact() {
    let schema = root_schema(Guidance::contract_spec());
    assert_eq!(schema, guidance_schema());
    let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["quarter", "year", "low", "high"],
        "declaration order"
    );
}

#[test]
fn json_schemas_are_valid_draft_2020_12() {
    for schema in [
        root_schema(Guidance::contract_spec()),
        root_schema(Amount::contract_spec()),
        root_schema(Currency::contract_spec()),
        root_schema(Policy::contract_spec()),
        root_schema(Node::contract_spec()),
        root_schema(Tree::contract_spec()),
    ] {
        if let Err(e) = jsonschema::meta::validate(&schema) {
            panic!("{e}\n{schema:#}");
        }
        assert_eq!(schema["$schema"], DRAFT_2020_12);
        if schema["type"] != "object" {
            continue;
        }
        let strict = strict(&schema).schema;
        if let Err(e) = jsonschema::meta::validate(&strict) {
            panic!("{e}\n{strict:#}");
        }
    }
}

#[test]
fn json_schema_accepts_and_rejects_like_the_contract() {
    let schema = root_schema(Guidance::contract_spec());
    let strict = strict(&schema).schema;
    let good = json!({"quarter": 3, "year": 2025, "low": 7230.0, "high": 7650.5});
    let nulls = json!({"quarter": null, "year": null, "low": null, "high": null});
    for s in [&schema, &strict] {
        assert!(jsonschema::is_valid(s, &good));
        assert!(jsonschema::is_valid(s, &nulls));
        for bad in [
            json!({"quarter": 5, "year": 2025, "low": 1, "high": 2}),
            json!({"quarter": 1, "year": 2017, "low": 1, "high": 2}),
            json!({"quarter": 1, "year": 2020, "low": 0, "high": 2}),
            json!({"quarter": 1.5, "year": 2020, "low": 1, "high": 2}),
            json!({"quarter": 1, "year": 2020, "low": 1}),
            json!({"quarter": 1, "year": 2020, "low": 1, "high": 2, "extra": 1}),
        ] {
            assert!(!jsonschema::is_valid(s, &bad), "{bad} accepted by {s:#}");
        }
    }
}

#[test]
fn field_shapes() {
    let schema = root_schema(Policy::contract_spec());
    let p = &schema["properties"];
    assert_eq!(
        p["name"],
        json!({"description": "Name of the\npolicy.", "type": "string", "minLength": 1, "maxLength": 80})
    );
    assert_eq!(
        p["insured"],
        json!({"description": "Sum insured.", "$ref": "#/$defs/Amount"})
    );
    assert_eq!(
        p["deductible"],
        json!({"anyOf": [{"$ref": "#/$defs/Amount"}, {"type": "null"}]})
    );
    assert_eq!(p["start"], json!({"type": "string", "format": "date"}));
    assert_eq!(
        p["tags"],
        json!({"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1, "maxItems": 5})
    );
    assert_eq!(
        p["code"],
        json!({"type": ["string", "null"], "enum": ["A", "B", null]})
    );
    // The Rust type's bounds when no constraint is tighter.
    assert_eq!(
        p["count"],
        json!({"type": "integer", "minimum": 0, "maximum": 4294967295u64})
    );
    assert_eq!(
        p["ratio"],
        json!({"type": "number", "minimum": 0, "maximum": 1, "x-unit": "share"})
    );
    // `exclusive_min = -200.5` is looser than i8's -128: the type bound stays, the constraint goes.
    assert_eq!(
        p["level"],
        json!({"type": "integer", "minimum": -128, "exclusiveMaximum": 10})
    );
    assert_eq!(p["active"], json!({"type": "boolean"}));
    assert_eq!(
        p["scores"],
        json!({"type": ["array", "null"], "items": {"type": "integer", "minimum": 0, "maximum": 100}, "maxItems": 3})
    );
    assert_eq!(p["server"], json!({"type": "string", "format": "ipv4"}));
    assert_eq!(
        p["currencies"],
        json!({"type": "array", "items": {"$ref": "#/$defs/Currency"}})
    );
    assert_eq!(schema["x-rules"], json!(["at_least_one(code, scores)"]));
    let defs: Vec<&String> = schema["$defs"].as_object().unwrap().keys().collect();
    assert_eq!(defs, ["Amount", "Currency"]);
    assert_eq!(
        schema["$defs"]["Currency"],
        json!({
            "type": "string",
            "enum": ["USD", "EUR"],
            "description": "An ISO 4217 currency. `USD`: US dollar"
        })
    );
}

#[test]
fn recursive_contracts_refer_to_the_root() {
    let node = root_schema(Node::contract_spec());
    assert!(node.get("$defs").is_none(), "{node:#}");
    assert_eq!(
        node["properties"]["children"]["items"],
        json!({"$ref": "#"})
    );
    assert_eq!(
        node["properties"]["parent"],
        json!({"anyOf": [{"$ref": "#"}, {"type": "null"}]})
    );
    let tree = root_schema(Tree::contract_spec());
    assert_eq!(
        tree["$defs"]["Node"]["properties"]["children"]["items"],
        json!({"$ref": "#/$defs/Node"})
    );
}

#[test]
fn guidance_strict_schema_exact() {
    let s = strict(&guidance_schema());
    assert_eq!(
        s.schema,
        json!({
            "type": "object",
            "description": "Next-quarter revenue guidance stated in an earnings release. Rules: low <= high; both_or_neither(low, high).",
            "properties": {
                "quarter": {"type": ["integer", "null"], "minimum": 1, "maximum": 4},
                "year": {"type": ["integer", "null"], "minimum": 2018, "maximum": 2030},
                "low": {
                    "description": "Low end of the range. Unit: USD millions.",
                    "type": ["number", "null"],
                    "exclusiveMinimum": 0
                },
                "high": {"type": ["number", "null"], "exclusiveMinimum": 0, "description": "Unit: USD millions."}
            },
            "required": ["quarter", "year", "low", "high"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        moved(&s),
        [
            triple("", "$schema", "dropped"),
            triple("", "title", "dropped"),
            triple("/properties/low", "x-unit", "description"),
            triple("/properties/high", "x-unit", "description"),
            triple("", "x-rules", "description"),
        ]
    );
    assert_eq!(s.moved[2].value, json!("USD millions"));
}

#[test]
fn optional_properties_become_nullable() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "description": "A."},
            "b": {"type": "integer", "enum": [1, 2]},
            "c": {"$ref": "#/$defs/C"},
            "d": {"const": "x"},
            "e": {"anyOf": [{"type": "string"}, {"type": "number"}]},
            "f": {"type": ["string", "null"]},
            "g": {"type": "object", "properties": {"h": {"type": "boolean"}}}
        },
        "required": ["a"],
        "$defs": {"C": {"type": "object", "properties": {}}}
    });
    let s = strict(&schema);
    assert_eq!(
        s.schema,
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "description": "A."},
                "b": {"type": ["integer", "null"], "enum": [1, 2, null]},
                "c": {"anyOf": [{"$ref": "#/$defs/C"}, {"type": "null"}]},
                "d": {"enum": ["x", null]},
                "e": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]},
                "f": {"type": ["string", "null"]},
                "g": {
                    "type": ["object", "null"],
                    "properties": {"h": {"type": ["boolean", "null"]}},
                    "required": ["h"],
                    "additionalProperties": false
                }
            },
            "required": ["a", "b", "c", "d", "e", "f", "g"],
            "additionalProperties": false,
            "$defs": {
                "C": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}
            }
        })
    );
    assert!(moved(&s).contains(&triple("", "required", "nullable")));
    assert!(moved(&s).contains(&triple("/properties/g", "required", "nullable")));
}

#[test]
fn unsupported_keywords_move_into_descriptions() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Doc",
        "$comment": "internal",
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 3, "maxLength": 3, "default": "abc", "examples": ["abc"]},
            "short": {"type": "string", "maxLength": 1},
            "site": {"type": "string", "format": "uri", "description": "Home page"},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 1},
            "odd": {"type": "integer", "not": {"multipleOf": 2}, "x-source-page": 4},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1}
        },
        "required": ["name", "short", "site", "when", "tags", "odd", "meta"],
        "dependentRequired": {"site": ["when"]},
        "additionalProperties": false
    });
    let s = strict(&schema);
    let p = &s.schema["properties"];
    assert_eq!(
        p["name"],
        json!({"type": "string", "description": "Length exactly 3 characters."})
    );
    assert_eq!(
        p["short"],
        json!({"type": "string", "description": "At most 1 character."})
    );
    assert_eq!(
        p["site"],
        json!({"type": "string", "description": "Home page. Format: uri."})
    );
    assert_eq!(p["when"], json!({"type": "string", "format": "date-time"}));
    assert_eq!(
        p["tags"],
        json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Items must be unique."})
    );
    assert_eq!(
        p["odd"],
        json!({"type": "integer", "description": "Must not match {\"multipleOf\":2}. Source page: 4."})
    );
    assert_eq!(
        p["meta"],
        json!({
            "type": "object",
            "description": "At least 1 property. Other properties: {\"type\":\"string\"}.",
            "properties": {},
            "required": [],
            "additionalProperties": false
        })
    );
    assert_eq!(
        s.schema["description"],
        "If `site` is set, `when` must be set too."
    );
    let m = moved(&s);
    for expected in [
        triple("", "$schema", "dropped"),
        triple("", "title", "dropped"),
        triple("", "$comment", "dropped"),
        triple("/properties/name", "minLength", "description"),
        triple("/properties/name", "maxLength", "description"),
        triple("/properties/name", "default", "dropped"),
        triple("/properties/name", "examples", "dropped"),
        triple("/properties/short", "maxLength", "description"),
        triple("/properties/site", "format", "description"),
        triple("/properties/tags", "uniqueItems", "description"),
        triple("/properties/odd", "not", "description"),
        triple("/properties/odd", "x-source-page", "description"),
        triple("/properties/meta", "minProperties", "description"),
        triple("/properties/meta", "additionalProperties", "description"),
        triple("", "dependentRequired", "description"),
    ] {
        assert!(m.contains(&expected), "{expected:?} not in {m:#?}");
    }
    assert_eq!(m.len(), 15, "{m:#?}");
}

#[test]
fn refs_definitions_all_of_one_of() {
    let schema = json!({
        "type": "object",
        "allOf": [
            {"properties": {"a": {"$ref": "#/definitions/A", "description": "The A."}}, "required": ["a"]},
            {"properties": {"b": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["b"]}
        ],
        "definitions": {
            "A": {"type": "object", "title": "A", "properties": {"x": {"type": "number"}}, "required": ["x"]},
            "Unused": {"type": "string"}
        }
    });
    let s = strict(&schema);
    assert_eq!(
        s.schema,
        json!({
            "type": "object",
            "properties": {
                "a": {
                    "type": "object",
                    "properties": {"x": {"type": "number"}},
                    "required": ["x"],
                    "additionalProperties": false,
                    "description": "The A."
                },
                "b": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        })
    );
    let m = moved(&s);
    assert!(m.contains(&triple("", "allOf", "merged")));
    assert!(m.contains(&triple("/definitions/A", "title", "dropped")));
    assert!(m.contains(&triple("/properties/b", "oneOf", "anyOf")));
    assert!(m.contains(&triple("/properties/a", "$ref", "inlined")));

    // Kept references are rewritten to `$defs`.
    let schema = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/A"}},
        "required": ["a"],
        "definitions": {"A": {"type": "string"}}
    });
    let s = strict(&schema).schema;
    assert_eq!(s["properties"]["a"], json!({"$ref": "#/$defs/A"}));
    assert_eq!(s["$defs"], json!({"A": {"type": "string"}}));
}

#[test]
fn strict_is_idempotent() {
    for schema in [
        root_schema(Guidance::contract_spec()),
        root_schema(Policy::contract_spec()),
        root_schema(Node::contract_spec()),
        root_schema(Tree::contract_spec()),
    ] {
        let once = strict(&schema).schema;
        let twice = strict(&once);
        assert_eq!(twice.schema, once);
        assert!(twice.moved.is_empty(), "{:?}", twice.moved);
    }
}

#[test]
fn policy_strict_schema() {
    let s = strict(&root_schema(Policy::contract_spec()));
    let p = &s.schema["properties"];
    assert_eq!(
        p["name"]["description"],
        "Name of the\npolicy. Length 1-80 characters."
    );
    // A `$ref` with a description is inlined; without one it stays a reference.
    assert_eq!(p["insured"]["type"], "object");
    assert_eq!(p["insured"]["description"], "Sum insured.");
    assert_eq!(
        p["insured"]["properties"]["currency"],
        json!({"$ref": "#/$defs/Currency"})
    );
    assert_eq!(
        p["deductible"],
        json!({"anyOf": [{"$ref": "#/$defs/Amount"}, {"type": "null"}]})
    );
    assert_eq!(
        s.schema["$defs"]["Amount"]["properties"]["unit"]["description"],
        "Scale or basis: `billion`, `per claim`. Length 1-20 characters."
    );
    assert_eq!(
        s.schema["description"],
        "An insurance policy | with a pipe. Rules: at_least_one(code, scores)."
    );
    let last = s
        .schema
        .as_object()
        .unwrap()
        .keys()
        .next_back()
        .unwrap()
        .clone();
    assert_eq!(last, "$defs");
}

#[test]
fn root_must_be_an_object() {
    for (schema, found) in [
        (
            json!({"anyOf": [{"type": "object"}, {"type": "null"}]}),
            "`anyOf`",
        ),
        (json!({"type": "string"}), "type \"string\""),
        (
            json!({"type": ["object", "null"], "properties": {}}),
            "type [\"object\",\"null\"]",
        ),
        (
            json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object"}}}),
            "a `$ref`",
        ),
        (json!(true), "the boolean schema `true`"),
    ] {
        let err = strict_schema(&schema).unwrap_err();
        assert_eq!(
            err,
            StrictSchemaError::RootNotObject {
                found: found.into()
            },
            "{schema}"
        );
    }
    let err = strict_schema(&json!({"type": "string"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the root of a strict schema must be an object, found type \"string\""
    );
}

#[test]
fn any_value_and_bad_refs_are_errors() {
    let err = strict_schema(&json!({"type": "object", "properties": {"v": {}}})).unwrap_err();
    assert_eq!(
        err,
        StrictSchemaError::AnyValue {
            path: "/properties/v".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "`/properties/v` accepts any JSON value; the strict subset needs a type"
    );
    let err = strict_schema(&json!({
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/Missing"}},
        "required": ["v"]
    }))
    .unwrap_err();
    assert_eq!(
        err,
        StrictSchemaError::UnresolvedRef {
            path: "/properties/v".into(),
            reference: "#/$defs/Missing".into()
        }
    );
}

fn nested(levels: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 0..levels {
        schema = json!({"type": "object", "properties": {"x": schema}, "required": ["x"], "additionalProperties": false});
    }
    schema
}

#[test]
fn nesting_limit() {
    assert!(strict_schema(&nested(MAX_NESTING)).is_ok());
    let err = strict_schema(&nested(MAX_NESTING + 2)).unwrap_err();
    let path = "/properties/x".repeat(MAX_NESTING + 1);
    assert_eq!(
        err,
        StrictSchemaError::TooDeep {
            path: path.clone(),
            depth: 12,
            limit: 10
        }
    );
    assert_eq!(
        err.to_string(),
        format!("objects nest 12 levels deep at `{path}`, the strict subset allows at most 10")
    );
    // Through references, counted as if inlined; recursion is not followed forever.
    let mut defs = serde_json::Map::new();
    for i in 0..11 {
        let next = if i == 10 {
            json!({"type": "string"})
        } else {
            json!({"$ref": format!("#/$defs/D{}", i + 1)})
        };
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": {"x": next}, "required": ["x"], "additionalProperties": false}),
        );
    }
    let schema = json!({"type": "object", "properties": {"d": {"$ref": "#/$defs/D0"}}, "required": ["d"], "$defs": defs});
    assert!(matches!(
        strict_schema(&schema),
        Err(StrictSchemaError::TooDeep { depth: 12, .. })
    ));
    assert!(strict_schema(&root_schema(Node::contract_spec())).is_ok());
}

#[test]
fn property_and_enum_limits() {
    let properties: serde_json::Map<String, Value> = (0..5001)
        .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
        .collect();
    let err = strict_schema(&json!({"type": "object", "properties": properties})).unwrap_err();
    assert_eq!(
        err,
        StrictSchemaError::TooManyProperties {
            count: 5001,
            limit: 5000
        }
    );
    assert_eq!(
        err.to_string(),
        "the schema has 5001 object properties, the strict subset allows at most 5000"
    );

    let values: Vec<Value> = (0..600).map(|i| json!(format!("v{i}"))).collect();
    let err = strict_schema(&json!({
        "type": "object",
        "properties": {"a": {"type": "string", "enum": values}, "b": {"type": "string", "enum": values}},
        "required": ["a", "b"]
    }))
    .unwrap_err();
    assert_eq!(
        err,
        StrictSchemaError::TooManyEnumValues {
            count: 1200,
            limit: 1000
        }
    );

    let long: Vec<Value> = (0..251).map(|i| json!(format!("{i:0>60}"))).collect();
    let err = strict_schema(&json!({
        "type": "object",
        "properties": {"a": {"type": "string", "enum": long}},
        "required": ["a"]
    }))
    .unwrap_err();
    assert_eq!(
        err,
        StrictSchemaError::EnumTooLong {
            path: "/properties/a".into(),
            values: 251,
            length: 15060,
            limit: 15000,
            large: 250
        }
    );
    assert!(err.to_string().contains("251 values of 15060 characters"));
    // 250 values of the same length are fine.
    let ok: Vec<Value> = (0..250).map(|i| json!(format!("{i:0>70}"))).collect();
    assert!(strict_schema(&json!({"type": "object", "properties": {"a": {"type": "string", "enum": ok}}, "required": ["a"]})).is_ok());

    let properties: serde_json::Map<String, Value> = (0..121)
        .map(|i| (format!("{i:0>1000}"), json!({"type": "boolean"})))
        .collect();
    let err = strict_schema(&json!({"type": "object", "properties": properties})).unwrap_err();
    assert_eq!(
        err,
        StrictSchemaError::TooMuchText {
            length: 121_000,
            limit: 120_000
        }
    );
}

#[test]
fn anthropic_subset_moves_bounds_into_descriptions() {
    let schema = json!({
        "type": "object",
        "properties": {
            "quarter": {"type": "integer", "minimum": 1, "maximum": 4},
            "low": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
            "names": {"type": "array", "items": {"type": "string", "format": "uri"}, "minItems": 1, "maxItems": 3},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 2},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"}
        },
        "required": ["quarter", "low", "names", "tags", "code"]
    });
    let openai = strict(&schema);
    let a = anthropic_schema(&schema).expect("anthropic schema");
    let p = &a.schema["properties"];
    // Gone from the schema, said in the descriptions.
    for (prop, keywords) in [
        ("quarter", &["minimum", "maximum"][..]),
        ("low", &["exclusiveMinimum", "multipleOf"][..]),
        ("names", &["maxItems"][..]),
        ("tags", &["minItems"][..]),
    ] {
        for k in keywords {
            assert!(p[prop].get(*k).is_none(), "{prop}.{k}: {}", p[prop]);
            assert!(
                a.moved
                    .iter()
                    .any(|m| m.path == format!("/properties/{prop}")
                        && m.keyword == *k
                        && m.into == "description"),
                "{prop}.{k} not listed: {:?}",
                a.moved
            );
            // The OpenAI subset keeps them.
            assert!(
                openai.schema["properties"][prop].get(*k).is_some(),
                "{prop}.{k}"
            );
        }
    }
    assert_eq!(p["quarter"]["description"], "From 1 to 4.");
    assert_eq!(
        p["low"]["description"],
        "Greater than 0. A multiple of 0.5."
    );
    assert_eq!(p["names"]["description"], "At most 3 items.");
    assert_eq!(p["tags"]["description"], "At least 2 items.");
    // Kept: `minItems` of 1, `pattern`, and `uri`, a format Anthropic knows (OpenAI does not).
    assert_eq!(p["names"]["minItems"], 1);
    assert_eq!(p["names"]["items"]["format"], "uri");
    assert!(openai.schema["properties"]["names"]["items"]
        .get("format")
        .is_none());
    assert_eq!(p["code"]["pattern"], "^[A-Z]{3}$");
    assert_eq!(a.schema["additionalProperties"], false);
    // The OpenAI moves are there too (`minLength`).
    assert!(a.moved.iter().any(|m| m.keyword == "minLength"));
    // From an OpenAI strict schema, only Anthropic's own moves; and it is a fixed point.
    let again = anthropic_schema(&openai.schema).expect("from strict");
    assert_eq!(again.schema["properties"]["quarter"], p["quarter"]);
    assert!(
        again.moved.iter().all(|m| m.keyword != "minLength"),
        "{:?}",
        again.moved
    );
    assert!(!again.moved.is_empty());
    let twice = anthropic_schema(&a.schema).expect("twice");
    assert_eq!(twice.schema, a.schema);
    assert!(twice.moved.is_empty(), "{:?}", twice.moved);
}

#[test]
fn anthropic_subset_of_a_derived_contract() {
    let a = anthropic_schema(&root_schema(Guidance::contract_spec())).expect("anthropic schema");
    let q = &a.schema["properties"]["quarter"];
    assert!(
        q.get("minimum").is_none() && q.get("maximum").is_none(),
        "{q}"
    );
    assert!(
        q["description"]
            .as_str()
            .is_some_and(|d| d.contains("From 1 to 4.")),
        "{q}"
    );
    let text = a.schema.to_string();
    for k in ["minimum", "maximum", "exclusiveMinimum"] {
        assert!(!text.contains(&format!("\"{k}\"")), "{k} left in {text}");
    }
}
