//! The plain words for what the strict subset cannot carry: each keyword it drops (or, for a
//! subset that refuses bounds, each bound) said in a sentence for the description. Apart from
//! the schema walk in the parent, which decides what moves; this only decides how it reads.

use serde_json::{Map, Value};

use super::subset::Subset;

/// Keywords described together with `key` (recorded with it).
pub(super) fn partners(key: &str) -> &'static [&'static str] {
    match key {
        "minLength" => &["maxLength"],
        "minProperties" => &["maxProperties"],
        "minContains" => &["maxContains"],
        "if" => &["then", "else"],
        _ => &[],
    }
}

fn count(n: &Value, one: &str, many: &str) -> String {
    if n.as_u64() == Some(1) {
        format!("1 {one}")
    } else {
        format!("{} {many}", plain(n))
    }
}

/// The meaning of a keyword the subset cannot carry, in plain words; `None` when it has none.
pub(super) fn words(key: &str, value: &Value, map: &Map<String, Value>) -> Option<String> {
    let range = |min: &str, max: &str, one: &str, many: &str, what: &str| match (
        map.get(min),
        map.get(max),
    ) {
        (Some(a), Some(b)) if a == b => format!("{what} exactly {}.", count(a, one, many)),
        (Some(a), Some(b)) => format!("{what} {}-{} {many}.", plain(a), plain(b)),
        (Some(a), None) => format!("At least {}.", count(a, one, many)),
        (None, Some(b)) => format!("At most {}.", count(b, one, many)),
        (None, None) => String::new(),
    };
    Some(match key {
        "minLength" | "maxLength" => range(
            "minLength",
            "maxLength",
            "character",
            "characters",
            "Length",
        ),
        "minProperties" | "maxProperties" => range(
            "minProperties",
            "maxProperties",
            "property",
            "properties",
            "Has",
        ),
        "minContains" | "maxContains" => range(
            "minContains",
            "maxContains",
            "matching item",
            "matching items",
            "Has",
        ),
        "uniqueItems" => match value {
            Value::Bool(true) => "Items must be unique.".into(),
            _ => return None,
        },
        "x-unit" => format!("Unit: {}.", plain(value)),
        "x-grounded" => match value {
            Value::String(s) if s == "source" => "Copied verbatim from the document.".into(),
            Value::String(s) if s == "line" => {
                "A whole line copied verbatim from the document.".into()
            }
            Value::String(s) if s == "with_container" => {
                "Copied verbatim from the document where the object holding it is.".into()
            }
            Value::Object(m) if m.contains_key("in") => format!(
                "Copied verbatim from the value of `{}`.",
                m.get("in").map(plain).unwrap_or_default()
            ),
            Value::Object(m) if m.contains_key("lines") => {
                "Copied verbatim from the lines the span cites.".into()
            }
            other => format!("Grounded: {}.", plain(other)),
        },
        "x-form" => match value.as_str().and_then(crate::attrs::Form::from_name) {
            Some(form) => format!("{}, copied whole.", capitalise(form.words())),
            None => format!("Form: {}.", plain(value)),
        },
        // Where a pipeline looks for the value's evidence: nothing the model is asked.
        "x-question" | "x-group" => return None,
        "x-rules" => match value {
            Value::Array(rules) => format!(
                "Rules: {}.",
                rules.iter().map(plain).collect::<Vec<_>>().join("; ")
            ),
            other => format!("Rules: {}.", plain(other)),
        },
        "not" => format!("Must not match {}.", compact(value)),
        "if" => {
            let mut text = format!("If it matches {}", compact(value));
            if let Some(then) = map.get("then") {
                text.push_str(&format!(", it must match {}", compact(then)));
            }
            if let Some(otherwise) = map.get("else") {
                text.push_str(&format!("; otherwise it must match {}", compact(otherwise)));
            }
            text.push('.');
            text
        }
        "then" | "else" => return None,
        "dependentRequired" => {
            let Value::Object(deps) = value else {
                return Some(format!("Dependent required: {}.", compact(value)));
            };
            deps.iter()
                .map(|(name, needed)| {
                    let needed = match needed {
                        Value::Array(n) => n
                            .iter()
                            .map(|n| format!("`{}`", plain(n)))
                            .collect::<Vec<_>>()
                            .join(", "),
                        other => plain(other),
                    };
                    format!("If `{name}` is set, {needed} must be set too.")
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
        "dependentSchemas" => {
            let Value::Object(deps) = value else {
                return Some(format!("Dependent schemas: {}.", compact(value)));
            };
            deps.iter()
                .map(|(name, s)| {
                    format!("If `{name}` is set, the object must match {}.", compact(s))
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
        "patternProperties" => format!("Properties by name pattern: {}.", compact(value)),
        "propertyNames" => format!("Property names must match {}.", compact(value)),
        "prefixItems" => format!("Items by position: {}.", compact(value)),
        "contains" => format!("Must contain an item matching {}.", compact(value)),
        "unevaluatedProperties" | "unevaluatedItems" | "additionalItems" => match value {
            Value::Bool(_) => return None,
            other => format!("{}: {}.", key, compact(other)),
        },
        "contentEncoding" => format!("Encoding: {}.", plain(value)),
        "contentMediaType" => format!("Media type: {}.", plain(value)),
        k if k.starts_with("x-") => {
            let name = k[2..].replace(['-', '_'], " ");
            let mut chars = name.chars();
            let name = match chars.next() {
                Some(c) => c.to_uppercase().chain(chars).collect::<String>(),
                None => return None,
            };
            format!("{name}: {}.", plain(value))
        }
        _ => format!("{key}: {}.", compact(value)),
    })
}

/// The plain words for a bound `subset` refuses, and the partner keywords said with it; `None`
/// for a keyword said with its partner (`maximum` beside a `minimum`).
pub(super) fn bound_words(
    key: &str,
    map: &Map<String, Value>,
    subset: Subset,
) -> Option<(String, &'static [&'static str])> {
    let get = |k: &str| map.get(k).map(plain);
    let moved_min_items = map
        .get("minItems")
        .is_some_and(|v| subset.refuses("minItems", v));
    Some(match key {
        "minimum" => match get("maximum") {
            Some(max) => (format!("From {} to {max}.", get("minimum")?), &["maximum"]),
            None => (format!("At least {}.", get("minimum")?), &[]),
        },
        "maximum" if map.contains_key("minimum") => return None,
        "maximum" => (format!("At most {}.", get("maximum")?), &[]),
        "exclusiveMinimum" => (format!("Greater than {}.", get(key)?), &[]),
        "exclusiveMaximum" => (format!("Less than {}.", get(key)?), &[]),
        "multipleOf" => (format!("A multiple of {}.", get(key)?), &[]),
        "minItems" => match map.get("maxItems") {
            Some(max) => (
                format!("Has {}-{} items.", get("minItems")?, plain(max)),
                &["maxItems"],
            ),
            None => (
                format!("At least {}.", count(map.get("minItems")?, "item", "items")),
                &[],
            ),
        },
        "maxItems" if moved_min_items => return None,
        "maxItems" => (
            format!("At most {}.", count(map.get("maxItems")?, "item", "items")),
            &[],
        ),
        _ => return None,
    })
}

/// A string as itself, anything else as compact JSON.
pub(super) fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => compact(other),
    }
}

pub(super) fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

pub(super) fn join_text(description: &str, extra: &str) -> String {
    let d = description.trim_end();
    if d.is_empty() {
        return extra.to_owned();
    }
    let stop = if d.ends_with(['.', '!', '?', ':']) {
        ""
    } else {
        "."
    };
    format!("{d}{stop} {extra}")
}

pub(super) fn append_description(out: &mut Map<String, Value>, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let extra = notes.join(" ");
    let text = match out.get("description").and_then(Value::as_str) {
        Some(d) => join_text(d, &extra),
        None => extra,
    };
    out.insert("description".into(), text.into());
}
/// `text` with its first letter in upper case.
fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
