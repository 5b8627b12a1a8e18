use serde_json::json;

use super::*;
use crate::attrs::CmpOp;
use crate::values::{Evidenced, Span};
use crate::Contract;

/// Next-quarter revenue guidance.
#[derive(Contract, serde::Serialize, serde::Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Guidance {
    #[contract(range = 1..=4)]
    quarter: Option<u8>,
    #[contract(exclusive_min = 0)]
    low: Option<f64>,
    #[contract(exclusive_min = 0)]
    high: Option<f64>,
}

/// A dated thing with evidence.
#[derive(Contract, serde::Serialize, serde::Deserialize)]
#[contract(rule = "start <= end")]
struct Dated {
    #[contract(format = "date")]
    start: String,
    #[contract(format = "date")]
    end: String,
    items: Vec<Evidenced<String>>,
}

#[test]
fn keys_in_order_all_required_bounds_kept() {
    let g = Guidance::grammar();
    let schema = g.schema();
    assert_eq!(schema["$ref"], "#/$defs/o0_Guidance");
    let object = &schema["$defs"]["o0_Guidance"];
    let keys: Vec<&str> = object["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["quarter", "low", "high"]);
    assert_eq!(object["required"], json!(["quarter", "low", "high"]));
    assert_eq!(object["additionalProperties"], json!(false));
    assert_eq!(
        object["properties"]["quarter"],
        json!({"anyOf": [{"type": "integer", "minimum": 1, "maximum": 4}, {"type": "null"}]})
    );
    assert_eq!(
        object["properties"]["low"]["anyOf"][0],
        json!({"type": "number", "exclusiveMinimum": 0})
    );
    assert_eq!(
        schema["x-guidance"],
        json!({"whitespace_flexible": false, "whitespace_pattern": "[\\x20\\x0A\\x0D\\x09]{1,24}"})
    );
    let compact = g.clone().with_whitespace(Whitespace::Compact).schema();
    assert_eq!(compact["x-guidance"], json!({"whitespace_flexible": false}));
}

#[test]
fn rules_come_with_their_paths() {
    let g = Dated::grammar();
    let rules = g.rules();
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert_eq!(rules[0].0, ["".to_owned()]);
    assert_eq!(
        rules[0].1,
        [Rule::Compare {
            left: "start".into(),
            op: CmpOp::Le,
            right: "end".into()
        }]
    );
    assert_eq!(rules[1].0, ["/items/*/evidence/*".to_owned()]);
    let span = g
        .objects
        .iter()
        .find(|o| o.name == Span::contract_spec().name)
        .unwrap();
    assert_eq!(span.rules[0].to_string(), "start_line <= end_line");
}

#[test]
fn serde_round_trip() {
    let g = Dated::grammar();
    let text = serde_json::to_string(&g).unwrap();
    let back: Grammar = serde_json::from_str(&text).unwrap();
    assert_eq!(back, g);
    assert!(g.lark().starts_with("start: %json {"));
    assert_eq!(
        g.llguidance_json()["grammars"][0]["json_schema"],
        g.schema()
    );
}

/// A number's shape is written as its four bounds beside `type`, as before they were one
/// [`NumberBounds`] (a grammar stored by an earlier version reads back the same).
#[test]
fn a_number_shape_keeps_its_wire_format() {
    let text = r#"{"type":"number","minimum":null,"exclusive_minimum":0,"maximum":null,"exclusive_maximum":1.5}"#;
    let shape: Shape = serde_json::from_str(text).unwrap();
    let Shape::Number { bounds } = &shape else {
        panic!("not a number: {shape:?}");
    };
    assert_eq!(bounds.exclusive_minimum, Some(0.into()));
    assert_eq!(
        bounds.exclusive_maximum.as_ref().and_then(|n| n.as_f64()),
        Some(1.5)
    );
    assert!(bounds.minimum.is_none() && bounds.maximum.is_none());
    assert_eq!(serde_json::to_string(&shape).unwrap(), text);
}

#[test]
fn strings_and_lists_get_default_caps() {
    let g = Dated::grammar();
    let evidenced = g
        .objects
        .iter()
        .find(|o| o.name.starts_with("Evidenced"))
        .unwrap();
    // `Evidenced` writes its evidence first, then the value grounded in it.
    let Shape::String { max_len, .. } = evidenced.fields[1].shape.clone() else {
        panic!("{:?}", evidenced.fields[1].shape)
    };
    assert_eq!(max_len, Some(1000));
    let Shape::List {
        min_items,
        max_items,
        ..
    } = evidenced.fields[0].shape.clone()
    else {
        panic!("{:?}", evidenced.fields[0].shape)
    };
    assert_eq!((min_items, max_items), (Some(1), Some(100)));
}

#[test]
fn date_regex_matches_the_validator() {
    let rx = regex::Regex::new(&format!("^(?:{})$", format_regex(Format::Date).unwrap())).unwrap();
    let years = (0..=40).chain([
        100, 400, 1600, 1700, 1800, 1900, 2000, 2023, 2024, 2100, 9996, 9999,
    ]);
    for year in years {
        for month in 0..=13 {
            for day in 0..=32 {
                let text = format!("{year:04}-{month:02}-{day:02}");
                assert_eq!(
                    rx.is_match(&text),
                    crate::validate::format_ok(Format::Date, &text),
                    "{text}"
                );
            }
        }
    }
}

/// A JSON Schema's inexact formats become their exact patterns, where the subschema has no
/// pattern of its own; values and other formats are left alone.
#[test]
fn inexact_formats_become_exact_patterns() {
    let mut schema = serde_json::json!({
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "coded": {"type": "string", "format": "date", "pattern": "^2"},
            "format": {"type": "string", "format": "time"},
            "fixed": {"const": {"format": "date"}, "enum": [{"format": "date"}]},
            "list": {"type": "array", "items": [{"format": "date"}]}
        }
    });
    super::exact_formats(&mut schema);
    let p = &schema["properties"];
    let date = format!(
        "^(?:{})$",
        super::format_regex(crate::Format::Date).unwrap()
    );
    assert_eq!(
        p["day"],
        serde_json::json!({"type": "string", "pattern": date})
    );
    assert!(p["at"]["pattern"]
        .as_str()
        .is_some_and(|s| s.contains("[tT]")));
    assert!(p["at"].get("format").is_none());
    assert_eq!(p["mail"]["format"], "email");
    assert_eq!(
        p["coded"],
        serde_json::json!({"type": "string", "format": "date", "pattern": "^2"})
    );
    assert!(p["format"].get("format").is_none() && p["format"]["pattern"].is_string());
    assert_eq!(p["fixed"]["const"], serde_json::json!({"format": "date"}));
    assert_eq!(p["fixed"]["enum"][0], serde_json::json!({"format": "date"}));
    assert_eq!(p["list"]["items"][0]["pattern"], serde_json::json!(date));
    // The regex refuses the leap day of a common year, and takes a leap year's.
    let rx = regex::Regex::new(&date).unwrap();
    assert!(!rx.is_match("9733-02-29") && rx.is_match("2024-02-29"));
}
