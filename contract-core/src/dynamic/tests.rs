use serde_json::{json, Value};

use super::*;
use crate::schema::fixtures::*;
use crate::Contract;

fn contract(schema: Value) -> DynContract {
    match DynContract::from_schema(schema.clone()) {
        Ok(c) => c,
        Err(e) => panic!("{e}\n{schema:#}"),
    }
}

/// `(path, kind)` of each violation.
fn kinds(c: &DynContract, value: Value) -> Vec<(String, &'static str)> {
    match c.validate(&value) {
        Ok(()) => Vec::new(),
        Err(v) => v
            .iter()
            .map(|v| (v.path.clone(), v.kind.as_str()))
            .collect(),
    }
}

fn pairs(expected: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
    expected
        .iter()
        .map(|(p, k)| ((*p).to_owned(), *k))
        .collect()
}

/// `(path, keyword, missing)` of each gap.
fn gaps(c: &DynContract) -> Vec<(String, String, Vec<Rendering>)> {
    c.gaps()
        .iter()
        .map(|g| (g.path.clone(), g.keyword.clone(), g.missing.clone()))
        .collect()
}

fn gap(path: &str, keyword: &str, missing: &[Rendering]) -> (String, String, Vec<Rendering>) {
    (path.to_owned(), keyword.to_owned(), missing.to_vec())
}

use Rendering::{Grammar as G, Signature as S, Validator as V};

#[test]
fn derived_schemas_give_the_derived_signature() {
    let guidance = contract(<Guidance as Contract>::json_schema());
    assert_eq!(guidance.name(), "Guidance");
    assert_eq!(guidance.signature(), Guidance::signature());
    let tree = contract(<Tree as Contract>::json_schema());
    assert_eq!(tree.signature(), Tree::signature());
    let node = contract(<Node as Contract>::json_schema());
    assert_eq!(node.signature(), Node::signature());
    let currency = contract(<Currency as Contract>::json_schema());
    assert_eq!(currency.signature(), Currency::signature());
}

/// The fixture `Policy` has every shape: a nested contract used twice, a nullable enum, an
/// external type (`Ipv4Addr`), lists with item constraints, a rule.
#[test]
fn policy_signature_matches_the_derived_one() {
    let policy = contract(<Policy as Contract>::json_schema());
    assert_eq!(policy.signature(), Policy::signature());
}

#[test]
fn derived_docs_match_for_guidance() {
    let guidance = contract(<Guidance as Contract>::json_schema());
    assert_eq!(guidance.docs_markdown(), Guidance::docs_markdown());
}

#[test]
fn derived_validation_matches_for_guidance() {
    let guidance = contract(<Guidance as Contract>::json_schema());
    assert!(guidance.gaps_in(Rendering::Validator).next().is_none());
    for value in [
        json!({"quarter": 3, "year": 2024, "low": 1.5, "high": 2}),
        json!({"quarter": 5, "year": 2024, "low": 9, "high": 7}),
        json!({"quarter": null, "year": null, "low": 9, "high": null}),
        json!({"quarter": 1, "year": 2040, "low": null, "high": null, "extra": 1}),
        json!({"quarter": "1", "low": -1, "high": 0}),
    ] {
        let derived = Guidance::from_value(&value).err().unwrap_or_default();
        let dynamic = guidance.validate(&value).err().unwrap_or_default();
        let mut d: Vec<(String, &str)> = derived
            .iter()
            .map(|v| (v.path.clone(), v.kind.as_str()))
            .collect();
        let mut r: Vec<(String, &str)> = dynamic
            .iter()
            .map(|v| (v.path.clone(), v.kind.as_str()))
            .collect();
        d.sort();
        r.sort();
        assert_eq!(r, d, "{value}");
    }
    let err = guidance
        .validate(&json!({"quarter": 1, "year": 2020, "low": 9, "high": 7}))
        .unwrap_err();
    assert_eq!(
        err.0,
        [Violation::cross_field(
            "/high",
            "`low` (9) must be <= `high` (7)"
        )]
    );
}

#[test]
fn refs_defs_and_combinators() {
    let c = contract(json!({
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "customer": {"$ref": "#/$defs/customer"},
            "lines": {
                "type": "array",
                "items": {"$ref": "#/definitions/line"},
                "minItems": 1
            },
            "status": {"enum": ["open", "paid", null]},
            "kind": {"const": "order"},
            "paid_with": {"oneOf": [
                {"type": "string", "maxLength": 20},
                {"type": "integer", "exclusiveMinimum": 0}
            ]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "meta": {"type": "object", "additionalProperties": {"type": "number"}}
        },
        "required": ["id", "customer", "lines", "kind"],
        "additionalProperties": false,
        "$defs": {
            "customer": {
                "allOf": [
                    {"$ref": "#/$defs/named"},
                    {"properties": {"email": {"type": "string", "format": "email"}},
                     "required": ["email"]}
                ]
            },
            "named": {
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1}},
                "required": ["name"]
            }
        },
        "definitions": {
            "line": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                    "price": {"type": "number", "minimum": 0, "x-unit": "EUR"}
                },
                "required": ["sku", "qty"]
            }
        }
    }));
    assert_eq!(
        c.signature(),
        concat!(
            r#"{"id": string (uuid), "#,
            r#""customer": {"name": string (1+ chars), "email": string (email)}, "#,
            r#""lines": [{"sku": string /^[A-Z]{3}-[0-9]+$/, "qty": integer 1-99, "price"?: number >= 0 (EUR)}, ...] (1+ items), "#,
            r#""status"?: "open" | "paid" | null, "kind": "order", "#,
            r#""paid_with"?: string (<= 20 chars) | integer >= 1, "note"?: string | null, "#,
            r#""meta"?: {...: number}}"#
        )
    );
    assert_eq!(
        gaps(&c),
        [gap("/properties/paid_with", "oneOf", &[G])],
        "{:#?}",
        c.gaps()
    );

    let good = json!({
        "id": "6f1c2a1e-8d2b-4c3e-9f3a-1b2c3d4e5f60",
        "customer": {"name": "Ada", "email": "ada@example.com"},
        "lines": [{"sku": "ABC-1", "qty": 2, "price": 9.5}],
        "kind": "order",
        "paid_with": 12,
        "meta": {"weight": 1.5}
    });
    assert_eq!(kinds(&c, good.clone()), []);
    assert_eq!(c.from_json(&good.to_string()).unwrap(), good);
    assert_eq!(
        kinds(
            &c,
            json!({
                "id": "not-a-uuid",
                "customer": {"name": ""},
                "lines": [{"sku": "abc", "qty": 100}, {"qty": 1.5}],
                "kind": "invoice",
                "status": "lost",
                "paid_with": -3,
                "meta": {"weight": "heavy"},
                "extra": true
            })
        ),
        pairs(&[
            ("/id", "format_mismatch"),
            ("/customer/name", "length"),
            ("/customer/email", "missing_field"),
            ("/lines/0/sku", "pattern_mismatch"),
            ("/lines/0/qty", "out_of_range"),
            ("/lines/1/sku", "missing_field"),
            ("/lines/1/qty", "type_mismatch"),
            ("/kind", "enum_mismatch"),
            ("/status", "enum_mismatch"),
            ("/paid_with", "schema_mismatch"),
            ("/meta/weight", "type_mismatch"),
            ("/extra", "extra_field"),
        ])
    );
    assert_eq!(
        kinds(&c, json!([])),
        pairs(&[("", "type_mismatch")]),
        "a wrong root type is one violation"
    );
    let err = c.from_json("{\"id\": ").unwrap_err();
    assert_eq!(err.0[0].kind, ViolationKind::JsonInvalid);
}

#[test]
fn unsupported_keywords_are_reported_by_pointer() {
    let c = contract(json!({
        "type": "object",
        "properties": {
            "kind": {"enum": ["a", "b"]},
            "size": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "not": {"type": "string", "not": {"const": "x"}},
            "code": {"type": "string", "format": "int32"},
            "when": {"type": "string", "format": "uri-reference"},
            "data": {"$dynamicRef": "#meta"}
        },
        "$defs": {"meta": {"$dynamicAnchor": "meta", "type": "object"}},
        "patternProperties": {"^x-": {"type": "string"}},
        "propertyNames": {"maxLength": 10},
        "if": {"properties": {"kind": {"const": "a"}}},
        "then": {"required": ["size"]},
        "else": {"required": ["tags"]},
        "dependentSchemas": {"size": {"required": ["kind"]}},
        "minProperties": 1,
        "nullable": true
    }));
    assert_eq!(
        gaps(&c),
        [
            gap("/properties/tags", "uniqueItems", &[G]),
            gap("/properties/not", "not", &[S, G]),
            gap("/properties/code", "format", &[G, V]),
            gap("/properties/when", "format", &[G]),
            gap("/properties/data", "$dynamicRef", &[S, G]),
            gap("", "propertyNames", &[S, G]),
            gap("", "if", &[S, G]),
            gap("", "then", &[S, G]),
            gap("", "else", &[S, G]),
            gap("", "dependentSchemas", &[S, G]),
            gap("", "minProperties", &[S, G]),
            gap("", "nullable", &[S, G, V]),
        ]
    );
    assert_eq!(
        c.gaps()[2].to_string(),
        "`format` at `/properties/code`: not in the grammar, validator (unknown format `int32`: \
         shown in the signature, enforced nowhere)"
    );

    // The grammar keeps what llguidance compiles, drops the rest, and keeps property names.
    let grammar = c.grammar_with(Whitespace::Compact);
    let properties = &grammar["properties"];
    assert!(
        properties.get("not").is_some(),
        "a property named `not` stays"
    );
    assert!(properties["not"].get("not").is_none());
    assert!(properties["tags"].get("uniqueItems").is_none());
    assert!(properties["code"].get("format").is_none());
    assert_eq!(properties["when"].get("format"), None);
    assert!(grammar.get("patternProperties").is_some());
    assert!(
        grammar.get("minProperties").is_none(),
        "llguidance cannot bound an object with optional properties"
    );
    let map = contract(json!({"additionalProperties": {"type": "integer"}, "minProperties": 1}));
    assert_eq!(map.grammar()["minProperties"], 1, "a map it can");
    for dropped in ["if", "then", "else", "dependentSchemas", "propertyNames"] {
        assert!(grammar.get(dropped).is_none(), "{dropped}");
    }
    assert_eq!(
        grammar["x-guidance"],
        json!({"whitespace_flexible": false, "coerce_one_of": true, "lenient": true})
    );
    assert_eq!(
        c.grammar()["x-guidance"]["whitespace_pattern"],
        "[\\x20\\x0A\\x0D\\x09]{1,24}"
    );

    // The validator carries them.
    assert_eq!(
        kinds(
            &c,
            json!({"kind": "a", "tags": ["q", "q"], "not": "x", "when": "a b", "x-y": 1})
        ),
        pairs(&[
            ("/tags", "duplicate_items"),
            ("/not", "schema_mismatch"),
            ("/when", "format_mismatch"),
            ("/x-y", "type_mismatch"),
            ("/size", "missing_field"),
        ])
    );
    assert_eq!(
        kinds(&c, json!({"kind": "b", "tags": [], "size": 1})),
        [],
        "`else` and `dependentSchemas` hold"
    );
    assert_eq!(
        kinds(&c, json!({})),
        pairs(&[("", "length"), ("/size", "missing_field")])
    );
}

/// The `x-rules` note says where the rules are held, per schema: in the grounded grammar's mask
/// for a flat grounded schema (what `Extractor::runtime` decodes it with), in the typed
/// grammar's mask for a flat ungrounded schema that grammar carries without loss, by the
/// validator only for a schema decoded under its own JSON Schema.
#[test]
fn the_rules_note_follows_the_mask_the_schema_decodes_under() {
    let note = |schema: Value| {
        let c = contract(schema);
        let notes: Vec<String> = c
            .gaps()
            .iter()
            .filter(|g| g.keyword == "x-rules")
            .inspect(|g| assert_eq!(g.missing, [G], "a JSON Schema mask never carries them"))
            .map(|g| g.note.clone())
            .collect();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            !c.decodes_grounded() || c.decodes_typed(),
            "the grounded grammar is a typed one"
        );
        (c.decodes_grounded(), notes[0].clone())
    };
    let field = |grounded: bool| {
        let mut f = json!({"type": ["number", "null"]});
        if grounded {
            f["x-grounded"] = json!("source");
        }
        f
    };
    let flat = |grounded: bool| {
        json!({"type": "object", "x-rules": ["low <= high"], "required": ["low", "high"],
               "properties": {"low": field(grounded), "high": field(grounded)}})
    };
    // Grounded and flat: the grounded grammar, the rules in its mask.
    let (grounded, text) = note(flat(true));
    assert!(grounded);
    assert!(text.contains("grounded grammar"), "{text}");
    assert!(!text.contains("validator only"), "{text}");
    // Nothing grounded, but the typed grammar carries every keyword: the rules in its mask.
    let (grounded, text) = note(flat(false));
    assert!(!grounded);
    assert!(contract(flat(false)).decodes_typed());
    assert!(text.contains("typed grammar"), "{text}");
    assert!(!text.contains("validator only"), "{text}");
    // Nothing grounded, and a keyword the typed grammar would lose: the schema's JSON Schema
    // mask, the rules the validator's only.
    let lossy = |edit: &dyn Fn(&mut Value)| {
        let mut schema = flat(false);
        edit(&mut schema);
        let c = contract(schema.clone());
        assert!(!c.decodes_typed() && !c.rules_in_mask(), "{schema}");
        let (grounded, text) = note(schema);
        assert!(!grounded);
        assert!(text.contains("validator only"), "{text}");
    };
    // A keyword the typed grammar would lose outside the fields the rules name: the schema's
    // own JSON Schema mask, the rules held over it by the local value filter. (Until
    // 2026-12-07 these cases, and a rule's optional field, were asserted "validator only": no
    // mask held the rules.)
    let over = |edit: &dyn Fn(&mut Value)| {
        let mut schema = flat(false);
        edit(&mut schema);
        let c = contract(schema.clone());
        assert!(!c.decodes_typed() && c.rules_in_mask(), "{schema}");
        let (grounded, text) = note(schema);
        assert!(!grounded);
        assert!(text.contains("value filter"), "{text}");
    };
    // A required key that is not a property (the typed grammar could not write it).
    over(&|s| s["required"] = json!(["low", "high", "mid"]));
    // More keys than the properties.
    over(&|s| s["minProperties"] = json!(3));
    // An optional property, of two types, beside the rules' fields.
    over(&|s| s["properties"]["note"] = json!({"type": ["string", "integer"]}));
    // A rule's field optional: the filter takes it as one that may still be written.
    over(&|s| s["required"] = json!(["low"]));
    over(&|s| s["required"] = json!([]));
    // A rule's field whose only value is null.
    lossy(&|s| {
        s["required"] = json!(["low"]);
        s["properties"]["high"] = json!({"enum": [null]});
    });
    // Alternatives at the root, which may narrow the rules' fields.
    lossy(&|s| s["anyOf"] = json!([{"properties": {"low": {"maximum": 1}}}]));
    // Keywords the typed shapes do not model, on a field a rule names.
    lossy(&|s| s["properties"]["low"]["multipleOf"] = json!(0.5));
    lossy(&|s| s["properties"]["low"] = json!({"type": ["number", "string"]}));
    lossy(&|s| s["properties"]["low"] = json!({"oneOf": [{"type": "number"}, {"type": "null"}]}));
    lossy(&|s| s["properties"]["low"] = json!({"const": 1}));
    lossy(&|s| s["properties"]["low"] = json!({"type": "object", "properties": {}}));
    lossy(&|s| s["properties"]["low"] = json!({"type": "array", "prefixItems": [{}]}));
    lossy(&|s| s["properties"]["low"] = json!({"type": "string", "format": "iri"}));
    lossy(&|s| s["patternProperties"] = json!({"^l": {"type": "integer"}}));
    // An enum the type narrows, or a `null` the type allows and the enum does not.
    lossy(&|s| s["properties"]["low"] = json!({"type": "number", "enum": [1, "a"]}));
    lossy(&|s| s["properties"]["low"] = json!({"type": ["number", "null"], "enum": [1, 2]}));
    lossy(&|s| s["properties"]["low"] = json!({"enum": [1, 2], "minimum": 2}));
    lossy(&|s| s["properties"]["low"] = json!({"enum": [1, 2, null]}));
    // Keywords the typed grammar carries keep it (it may close the object).
    for carried in [
        json!({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "null"}]}),
        json!({"type": "integer", "minimum": 1, "maximum": 4}),
        json!({"type": ["integer", "null"], "enum": [1, 2, null]}),
        json!({"enum": [1, 2]}),
        json!({"type": "string", "pattern": "^[0-9-]+$", "format": "date", "maxLength": 10}),
        json!({"type": "array", "items": {"type": "number"}, "maxItems": 3}),
    ] {
        let mut schema = flat(false);
        schema["properties"]["low"] = carried.clone();
        schema["additionalProperties"] = json!(true);
        let (grounded, text) = note(schema);
        assert!(
            !grounded && text.contains("typed grammar"),
            "{carried}: {text}"
        );
    }
    // A value type named by `$ref` is carried by its own shape.
    let mut with_value = flat(false);
    with_value["properties"]["paid"] = json!({"$ref": "#/$defs/Amount"});
    with_value["required"] = json!(["low", "high", "paid"]);
    with_value["$defs"] = json!({"Amount": {}});
    let (grounded, text) = note(with_value);
    assert!(!grounded);
    assert!(text.contains("typed grammar"), "{text}");
    // Grounded, but a field refers to a definition: decoded under the JSON Schema.
    let mut with_def = flat(true);
    with_def["properties"]["who"] = json!({"$ref": "#/$defs/who"});
    with_def["$defs"] = json!({"who": {"type": "string", "x-grounded": "source"}});
    let (grounded, text) = note(with_def.clone());
    assert!(!grounded);
    assert!(!contract(with_def).decodes_typed());
    assert!(text.contains("validator only"), "{text}");
    // A reference to one of the library's value types keeps the grounded grammar.
    let mut with_value = flat(true);
    with_value["properties"]["paid"] = json!({"$ref": "#/$defs/Amount"});
    with_value["$defs"] = json!({"Amount": {}});
    let (grounded, text) = note(with_value);
    assert!(grounded);
    assert!(text.contains("grounded grammar"), "{text}");
    // Rules nested in a grounded flat schema: the schema decodes under the grounded grammar,
    // but that grammar lowers an inline object below the root to any value, so its mask holds
    // neither the object's shape nor its rules; the validator alone does. (This asserted the
    // grounded grammar until 2026-12-07: the note claimed more than the mask held.)
    let nested = json!({"type": "object", "properties": {
        "who": {"type": "string", "x-grounded": "source"},
        "range": {"type": "object", "x-rules": ["low <= high"],
                  "properties": {"low": field(true), "high": field(true)}}}});
    let (grounded, text) = note(nested.clone());
    assert!(grounded);
    assert!(text.contains("validator only"), "{text}");
    let mut spec = contract(nested).root_spec();
    crate::dynamic::values::adopt_value_types(&mut spec);
    assert!(crate::grammar::Grammar::of(&spec).rules().is_empty());
    // Rules nested in an ungrounded schema: no typed grammar holds them, but the value filter
    // holds them over the schema's own mask, the inline object one of the filter's own. (This
    // asserted "validator only" until the filter took in inline objects.)
    let nested = json!({"type": "object", "required": ["range"], "properties": {
        "range": {"type": "object", "x-rules": ["low <= high"],
                  "properties": {"low": field(false), "high": field(false)}}}});
    let (grounded, text) = note(nested.clone());
    let c = contract(nested.clone());
    assert!(!grounded && !c.decodes_typed() && c.rules_in_mask());
    assert!(text.contains("value filter"), "{text}");
    let grammar = c
        .mask_grammar()
        .expect("a grammar holding the nested rules");
    assert_eq!(grammar.rules().len(), 1);
    // ... also where the object may be null, and where the root has rules of its own.
    let mut nullable = nested.clone();
    nullable["properties"]["range"]["type"] = json!(["object", "null"]);
    assert!(note(nullable).1.contains("value filter"));
    let mut both = nested.clone();
    both["x-rules"] = json!(["a <= b"]);
    both["properties"]["a"] = field(false);
    both["properties"]["b"] = field(false);
    let c = contract(both);
    let notes: Vec<&str> = c
        .gaps()
        .iter()
        .filter(|g| g.keyword == "x-rules")
        .map(|g| g.note.as_str())
        .collect();
    assert_eq!(notes.len(), 2);
    assert!(
        notes.iter().all(|n| n.contains("value filter")),
        "{notes:?}"
    );
    assert_eq!(c.mask_grammar().expect("a grammar").rules().len(), 2);
    // An inline object whose rule names a field the grammar cannot carry whole (`multipleOf`),
    // or one with alternatives, is any value to the filter: its rules the validator's.
    let mut lossy = nested.clone();
    lossy["properties"]["range"]["properties"]["low"]["multipleOf"] = json!(0.5);
    let (_, text) = note(lossy.clone());
    assert!(text.contains("validator only"), "{text}");
    assert!(!contract(lossy).rules_in_mask());
    let mut alternatives = nested;
    alternatives["properties"]["range"]["anyOf"] =
        json!([{"required": ["low"]}, {"required": ["high"]}]);
    assert!(note(alternatives).1.contains("validator only"));
}

/// The typed grammar `Extractor::runtime` decodes a flat ungrounded schema under holds the
/// schema's rules, with the shapes the schema's keywords give.
#[test]
fn a_flat_schema_with_rules_lowers_to_a_grammar_holding_them() {
    let c = contract(json!({"type": "object", "x-rules": ["low <= high"],
        "required": ["low", "high"],
        "properties": {"low": {"type": "number", "minimum": 0}, "high": {"type": "number"}}}));
    assert!(c.decodes_typed() && !c.decodes_grounded());
    let mut spec = c.root_spec();
    values::adopt_value_types(&mut spec);
    assert_eq!(typed::mask(&spec), typed::Mask::Rules);
    let grammar = crate::grammar::Grammar::of(&spec);
    let rules: Vec<String> = grammar
        .rules()
        .iter()
        .flat_map(|(paths, rules)| {
            assert_eq!(*paths, [String::new()], "the root's rules");
            rules.iter().map(|r| r.to_string())
        })
        .collect();
    assert_eq!(rules, ["low <= high"]);
    let low = &grammar.objects[0].fields[0];
    assert_eq!(low.name, "low");
    assert!(
        matches!(&low.shape, crate::grammar::Shape::Number { bounds } if bounds.minimum == Some(0.into())),
        "{:?}",
        low.shape
    );
    // Without rules the schema keeps its JSON Schema mask, as before.
    let plain = contract(json!({"type": "object", "required": ["low"],
        "properties": {"low": {"type": "number"}}}));
    assert!(!plain.decodes_typed());
    // An integer bounded on one side only: the mask's schema bounds it on that side alone
    // (its missing lower bound, `i128::MIN`, overflowed `abs` and became `"minimum": 0`).
    let c = contract(json!({"type": "object", "x-rules": ["low <= high"],
        "required": ["low", "high"],
        "properties": {"low": {"type": "integer", "maximum": 10}, "high": {"type": "integer"}}}));
    assert!(c.decodes_typed());
    let schema = c
        .mask_grammar()
        .expect("the typed grammar")
        .schema()
        .to_string();
    assert!(!schema.contains("minimum"), "{schema}");
    assert!(schema.contains(r#""maximum":10"#), "{schema}");
}

#[test]
fn strict_schema_reports_what_moved() {
    let c = contract(json!({
        "title": "Person",
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 80},
            "nick": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
        },
        "required": ["name", "tags"]
    }));
    let strict = c.strict_schema().unwrap();
    assert_eq!(
        strict.schema,
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Length 1-80 characters."},
                "nick": {"type": ["string", "null"]},
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Items must be unique."
                }
            },
            "required": ["name", "nick", "tags"],
            "additionalProperties": false
        })
    );
    let moved: Vec<(&str, &str, &str)> = strict
        .moved
        .iter()
        .map(|m| (m.path.as_str(), m.keyword.as_str(), m.into.as_str()))
        .collect();
    assert_eq!(
        moved,
        [
            ("", "title", "dropped"),
            ("/properties/name", "minLength", "description"),
            ("/properties/name", "maxLength", "description"),
            ("/properties/tags", "uniqueItems", "description"),
            ("", "required", "nullable"),
        ]
    );
    let list = contract(json!({"type": "array"}));
    assert!(matches!(
        list.strict_schema(),
        Err(StrictSchemaError::RootNotObject { .. })
    ));
}

#[test]
fn recursion_and_shared_definitions() {
    let c = contract(json!({
        "title": "Dir",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "entries": {"type": "array", "items": {"$ref": "#"}},
            "owner": {"$ref": "#/$defs/person"},
            "editor": {"$ref": "#/$defs/person"},
            "reader": {"$ref": "#/$defs/person"},
            "auditor": {"$ref": "#/$defs/person"}
        },
        "required": ["name"],
        "$defs": {
            "person": {
                "type": "object",
                "properties": {
                    "first_name": {"type": "string", "minLength": 1, "maxLength": 100},
                    "last_name": {"type": "string", "minLength": 1, "maxLength": 100},
                    "email": {"type": "string", "format": "email"},
                    "born": {"type": "string", "format": "date"}
                },
                "required": ["first_name", "last_name"]
            }
        }
    }));
    // Inlined four times the definition would be longer than the schema: it is named.
    assert_eq!(
        c.signature(),
        concat!(
            r#"{"name": string, "entries"?: [Dir, ...], "owner"?: person, "editor"?: person, "#,
            r#""reader"?: person, "auditor"?: person}; "#,
            r#"person = {"first_name": string (1-100 chars), "last_name": string (1-100 chars), "#,
            r#""email"?: string (email), "born"?: string (date YYYY-MM-DD)}"#
        )
    );
    // Used twice, it is short enough to inline (as a derived signature does).
    let mut two = c.schema().clone();
    for key in ["reader", "auditor"] {
        two["properties"].as_object_mut().unwrap().remove(key);
    }
    let person = r#"{"first_name": string (1-100 chars), "last_name": string (1-100 chars), "email"?: string (email), "born"?: string (date YYYY-MM-DD)}"#;
    assert_eq!(
        contract(two).signature(),
        format!(
            r#"{{"name": string, "entries"?: [Dir, ...], "owner"?: {person}, "editor"?: {person}}}"#
        )
    );
    let docs = c.docs_markdown();
    let headings: Vec<&str> = docs.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(headings, ["## Dir", "## person"], "{docs}");
    for line in [
        "| `entries` (optional) | list of [`Dir`](#dir) |  |  | no |  |",
        "| `owner` (optional) | [`person`](#person) |  |  | no |  |",
        "| `first_name` | string | 1-100 chars |  | no |  |",
        "| `born` (optional) | string | format `date` |  | no |  |",
    ] {
        assert!(
            docs.lines().any(|l| l == line),
            "missing {line:?} in\n{docs}"
        );
    }
    assert_eq!(
        kinds(&c, json!({"name": "a", "entries": [{"name": 1}]})),
        pairs(&[("/entries/0/name", "type_mismatch")])
    );
}

#[test]
fn docs_list_every_constraint() {
    let c = contract(json!({
        "type": "object",
        "description": "A tool call.",
        "properties": {
            "query": {"type": "string", "description": "What to look for.", "maxLength": 200},
            "filters": {
                "type": "object",
                "properties": {"year": {"type": ["integer", "null"], "minimum": 1900}},
                "required": ["year"]
            },
            "mode": {"enum": ["fast", "exact"], "not": {"const": "exact"}}
        },
        "required": ["query"]
    }));
    let docs = c.docs_markdown();
    assert_eq!(
        docs,
        "\
## Root

A tool call.

| field | type | constraint | unit | nullable | description |
|---|---|---|---|---|---|
| `query` | string | <= 200 chars |  | no | What to look for. |
| `filters` (optional) | [`/filters`](#filters) |  |  | no |  |
| `mode` (optional) | string | one of `\"fast\"`, `\"exact\"`; `not`: `{\"const\":\"exact\"}` |  | no |  |

## /filters

| field | type | constraint | unit | nullable | description |
|---|---|---|---|---|---|
| `year` | integer | >= 1900 |  | yes |  |
"
    );
}

#[test]
fn schema_errors_name_the_place() {
    let err = |schema: Value| DynContract::from_schema(schema).unwrap_err();
    assert_eq!(
        err(json!(3)).to_string(),
        "`/` is not a valid schema: a schema is an object or a boolean, found a number"
    );
    assert_eq!(err(json!(false)), SchemaError::Unsatisfiable);
    assert_eq!(
        err(json!({"properties": {"a": {"$ref": "#/$defs/b"}}})),
        SchemaError::UnresolvedRef {
            path: "/properties/a".into(),
            reference: "#/$defs/b".into()
        }
    );
    assert!(matches!(
        err(json!({"properties": {"a": {"$ref": "https://example.com/s.json"}}})),
        SchemaError::UnresolvedRef { path, .. } if path == "/properties/a"
    ));
    match err(json!({"type": "object", "properties": {"a": {"type": 5}}})) {
        SchemaError::Invalid { path, .. } => assert_eq!(path, "/properties/a/type"),
        other => panic!("{other:?}"),
    }
    match err(json!({"properties": {"a": {"minLength": -1}}})) {
        SchemaError::Invalid { path, .. } => assert_eq!(path, "/properties/a/minLength"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err(json!({"type": "object", "x-rules": ["low <=> high"]})).to_string(),
        "`/x-rules/0`: unknown rule `low <=> high` (expected `a <= b`, \
         `both_or_neither(a, b)` or `at_least_one(a, b)`)"
    );
    let mut deep = json!({"type": "string"});
    for _ in 0..300 {
        deep = json!({"items": deep});
    }
    assert!(matches!(err(deep), SchemaError::TooDeep { limit: 256, .. }));
}

#[test]
fn odd_schemas_do_not_panic() {
    for schema in [
        json!(true),
        json!({}),
        json!({"type": []}),
        json!({"type": ["null"]}),
        json!({"enum": []}),
        json!({"items": [true, {"type": "integer"}], "additionalItems": false}),
        json!({"prefixItems": [{"type": "integer"}], "items": false}),
        json!({"allOf": [{"type": "string"}, {"type": "integer"}]}),
        json!({"anyOf": [true, false]}),
        json!({"$ref": "#", "type": "object"}),
        json!({"properties": {"a": {"$ref": "#/properties/a"}}}),
        json!({"minimum": 1e300, "type": "integer", "maximum": -1e300}),
        json!({"exclusiveMinimum": 1.5, "type": "integer"}),
        json!({"$id": "http://x.test/root", "$defs": {"a": {"$id": "a.json", "type": "string"}},
               "properties": {"p": {"$ref": "a.json"}}}),
        json!({"definitions": {"a": {"id": "#a", "type": "string"}},
               "properties": {"p": {"$ref": "#a"}}}),
        json!({"$defs": {"a": {"$anchor": "x", "type": "integer"}}, "items": {"$ref": "#x"}}),
        json!({"type": "object", "x-rules": ["a < b", "at_least_one(a)"],
               "properties": {"a": {}, "b": {}}}),
    ] {
        // Some are not valid schemas (`"type": []`): an error, never a panic.
        if let Ok(c) = DynContract::from_schema(schema) {
            let _ = (
                c.signature(),
                c.docs_markdown(),
                c.grammar(),
                c.strict_schema(),
            );
            let _ = c.validate(&json!({"a": 1, "b": 0}));
        }
    }
    let anchored = contract(
        json!({"$defs": {"a": {"$anchor": "x", "type": "integer"}}, "items": {"$ref": "#x"}}),
    );
    assert_eq!(anchored.signature(), "[integer, ...]");
    let embedded = contract(json!({
        "$id": "http://x.test/root",
        "$defs": {"a": {"$id": "a.json", "type": "string"}},
        "properties": {"p": {"$ref": "a.json"}}
    }));
    assert_eq!(embedded.signature(), r#"{"p"?: string}"#);
    assert_eq!(
        kinds(&embedded, json!({"p": 1})),
        pairs(&[("/p", "type_mismatch")])
    );
    let rules = contract(json!({
        "type": "object",
        "x-rules": ["a < b", "at_least_one(a)"],
        "properties": {"a": {}, "b": {}}
    }));
    assert_eq!(
        kinds(&rules, json!({"a": 2, "b": 1})),
        pairs(&[("/b", "cross_field")])
    );
    assert_eq!(
        kinds(&rules, json!({"a": null, "b": 1})),
        pairs(&[("", "cross_field")])
    );
}

/// The schema snapshots of the example contracts (`tests/snapshots`) give the derived
/// signature and, for contracts without custom checks or skipped fields, the derived docs.
#[test]
fn example_snapshots_give_the_derived_renderings() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/snapshots");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let (mut checked, mut docs_checked) = (0, 0);
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".schema.json"))
        else {
            continue;
        };
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let c = contract(schema);
        let signature = std::fs::read_to_string(dir.join(format!("{name}.signature.txt"))).unwrap();
        assert_eq!(c.signature(), signature.trim_end(), "{name}");
        if let Ok(docs) = std::fs::read_to_string(dir.join(format!("{name}.md"))) {
            if !docs.contains("custom check") && !docs.contains("Not asked of the model") {
                assert_eq!(c.docs_markdown(), docs, "{name}");
                docs_checked += 1;
            }
        }
        checked += 1;
    }
    // Custom checks and fields skipped for the model are not in a schema, so the docs of
    // `policy` and `table` (which have them) differ in those lines only.
    assert!(
        checked >= 6 && docs_checked >= 3,
        "{checked} snapshots, {docs_checked} docs"
    );
}

#[test]
fn formats_are_enforced_in_every_draft() {
    for draft in [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ] {
        for (format, good, bad) in [
            (
                "uuid",
                "123e4567-e89b-12d3-a456-426655440000",
                "123e4567-e89b-12d3",
            ),
            ("duration", "P1DT2H", "1 day"),
            ("date", "2024-02-29", "2023-02-29"),
            ("email", "ada@example.com", "not an email"),
            ("uri-reference", "../a?b#c", "a b"),
        ] {
            let c = contract(json!({"$schema": draft, "type": "string", "format": format}));
            assert_eq!(kinds(&c, json!(good)), [], "{draft} {format}");
            assert_eq!(
                kinds(&c, json!(bad)),
                pairs(&[("", "format_mismatch")]),
                "{draft} {format}"
            );
        }
    }
}

/// Drafts 4 to 7 ignore the keywords beside a `$ref`; the grammar and the validator agree.
#[test]
fn ref_siblings_follow_the_draft() {
    for (draft, kept) in [
        ("http://json-schema.org/draft-07/schema#", false),
        ("https://json-schema.org/draft/2020-12/schema", true),
    ] {
        let c = contract(json!({
            "$schema": draft,
            "definitions": {"a": {"type": "string"}},
            "properties": {"x": {"$ref": "#/definitions/a", "maxLength": 2}}
        }));
        let x = &c.grammar()["properties"]["x"];
        assert_eq!(x.get("maxLength").is_some(), kept, "{draft}");
        assert_eq!(c.is_valid(&json!({"x": "abc"})), !kept, "{draft}");
    }
}

/// The grammar is written from the IR, and keeps the order the schema wrote `properties` and
/// the parts it is intersected with: llguidance writes an intersection's properties in the
/// order it meets them, so a schema's own order is the order the mask asks the keys in.
#[test]
fn the_grammar_keeps_the_order_of_an_intersection() {
    let keys = |grammar: &Value| -> Vec<String> {
        grammar
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| ["properties", "oneOf", "allOf", "$ref"].contains(&k.as_str()))
            .cloned()
            .collect()
    };
    let branches = json!([{"required": ["a"]}, {"required": ["b"]}]);
    let first = contract(json!({
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "oneOf": branches
    }));
    assert_eq!(keys(&first.grammar()), ["properties", "oneOf"]);
    let second = contract(json!({
        "oneOf": branches,
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}
    }));
    assert_eq!(keys(&second.grammar()), ["oneOf", "properties"]);
    // A reference target is one definition, however often it is referenced.
    let refs = contract(json!({
        "$defs": {"p": {"type": "integer", "minimum": 1}},
        "properties": {"x": {"$ref": "#/$defs/p"}, "y": {"$ref": "#/$defs/p"}},
        "allOf": [{"$ref": "#/$defs/p"}]
    }));
    let grammar = refs.grammar();
    assert_eq!(keys(&grammar), ["properties", "allOf"]);
    assert_eq!(grammar["properties"]["x"], json!({"$ref": "#/$defs/d1"}));
    assert_eq!(grammar["properties"]["y"], json!({"$ref": "#/$defs/d1"}));
    assert_eq!(
        grammar["$defs"],
        json!({"d1": {"type": "integer", "minimum": 1}})
    );
}

/// In drafts 4 to 7 the keywords beside a `$ref` mean nothing: the IR leaves them out (so the
/// signature does not show them), keeping only the title and description for the docs.
#[test]
fn old_drafts_ignore_what_stands_beside_a_ref() {
    for (draft, signature) in [
        (
            "http://json-schema.org/draft-04/schema#",
            r#"{"x"?: string}"#,
        ),
        (
            "https://json-schema.org/draft/2020-12/schema",
            r#"{"x"?: string & string (<= 2 chars)}"#,
        ),
    ] {
        let c = contract(json!({
            "$schema": draft,
            "definitions": {"a": {"type": "string"}},
            "properties": {"x": {"$ref": "#/definitions/a", "maxLength": 2, "description": "X."}}
        }));
        assert_eq!(c.signature(), signature, "{draft}");
        let x = &c.document().root().object.as_ref().unwrap().properties[0].node;
        assert_eq!(x.description.as_deref(), Some("X."), "{draft}");
    }
}
