//! The one-line signature a model reads.
//!
//! ```text
//! {"quarter": integer 1-4 | null, "low": number > 0 (USD millions) | null} where low <= high
//! ```
//!
//! Every field with its type, constraints and unit; nested contracts inline (a contract already
//! being written out is named instead, so recursive contracts end); enums as `"USD" | "EUR"`;
//! cross-field rules after `where`, with JSON names.

use serde_json::{Map, Value};

use crate::contract::{
    Constraints, ContractSpec, ExternalRef, FieldSpec, Grounding, Rule, SpecKind, TypeSpec,
};
use crate::schema::bounds::{integer_range, len_words, number_range};

/// `{"quarter": integer 1-4 | null, ...}` for `spec`, followed by ` where ` and its rules.
pub fn signature(spec: &ContractSpec) -> String {
    let mut stack = Vec::new();
    match &spec.kind {
        SpecKind::Object(_) => {
            let mut out = object(spec, &mut stack, false);
            if let Some(rules) = rules(spec) {
                out.push_str(" where ");
                out.push_str(&rules);
            }
            out
        }
        SpecKind::Enum(_) => enum_values(spec),
    }
}

/// The rules of an object contract in words (`low <= high; low, high both null or both set`).
pub(crate) fn rules(spec: &ContractSpec) -> Option<String> {
    let object = spec.object()?;
    if object.rules.is_empty() {
        return None;
    }
    Some(
        object
            .rules
            .iter()
            .map(rule_words)
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// One rule in words.
pub(crate) fn rule_words(rule: &Rule) -> String {
    match rule {
        Rule::Compare { .. } => rule.to_string(),
        Rule::BothOrNeither(fields) if fields.len() == 2 => {
            format!("{} both null or both set", fields.join(", "))
        }
        Rule::BothOrNeither(fields) => format!("{} all null or all set", fields.join(", ")),
        Rule::AtLeastOne(fields) => format!("at least one of {} set", fields.join(", ")),
    }
}

fn object(spec: &ContractSpec, stack: &mut Vec<String>, nested: bool) -> String {
    let Some(object) = spec.object() else {
        return enum_values(spec);
    };
    stack.push(spec.name.clone());
    let fields: Vec<String> = object
        .fields
        .iter()
        .map(|f| format!("{}: {}", quote(&f.name), field(f, stack)))
        .collect();
    stack.pop();
    let mut out = format!("{{{}", fields.join(", "));
    if nested {
        if let Some(rules) = rules(spec) {
            out.push_str(" where ");
            out.push_str(&rules);
        }
    }
    out.push('}');
    out
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn enum_values(spec: &ContractSpec) -> String {
    match &spec.kind {
        SpecKind::Enum(e) => e
            .variants
            .iter()
            .map(|v| quote(&v.name))
            .collect::<Vec<_>>()
            .join(" | "),
        SpecKind::Object(_) => spec.name.clone(),
    }
}

fn field(f: &FieldSpec, stack: &mut Vec<String>) -> String {
    let (ty, nullable) = f.ty.strip_nullable();
    let mut out = ty_words(ty, &f.constraints, stack);
    if let Some(unit) = &f.unit {
        out.push_str(&format!(" ({unit})"));
    }
    if let Some(note) = f.constraints.grounded.as_ref().and_then(grounding_note) {
        out.push(' ');
        out.push_str(&note);
    }
    if nullable {
        out.push_str(" | null");
    }
    out
}

/// What the signature says of a grounded value, so the model knows it copies
/// (`copied from the document`, `copied from "quote"`); nothing for
/// [`Grounding::WithContainer`], whose container's field says it.
pub(crate) fn grounding_note(grounded: &Grounding) -> Option<String> {
    Some(match grounded {
        Grounding::Source => "copied from the document".into(),
        Grounding::Line => "a whole line copied from the document".into(),
        Grounding::In(field) => format!("copied from {}", quote(field)),
        Grounding::Lines { .. } => "copied from its lines".into(),
        Grounding::WithContainer => return None,
    })
}

/// A type with its constraints, without unit and without the outer `| null`.
fn ty_words(ty: &TypeSpec, c: &Constraints, stack: &mut Vec<String>) -> String {
    if let Some(values) = &c.one_of {
        if !matches!(ty, TypeSpec::List(_)) {
            return values
                .iter()
                .map(|v| serde_json::to_string(v).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(" | ");
        }
    }
    match ty {
        TypeSpec::Bool => "boolean".into(),
        TypeSpec::Integer { min, max } => match integer_range(*min, *max, c) {
            Some(range) => format!("integer {range}"),
            None => "integer".into(),
        },
        TypeSpec::Number => match number_range(c) {
            Some(range) => format!("number {range}"),
            None => "number".into(),
        },
        TypeSpec::String => {
            let mut out = String::from("string");
            if let Some(p) = &c.pattern {
                out.push_str(&format!(" /{}/", p.as_str()));
            }
            let mut notes = Vec::new();
            if let Some(f) = c.format {
                notes.push(format_words(f.as_str()));
            }
            if let Some(len) = len_words(c.min_len, c.max_len) {
                notes.push(format!("{len} chars"));
            }
            if !notes.is_empty() {
                out.push_str(&format!(" ({})", notes.join(", ")));
            }
            out
        }
        TypeSpec::List(item) => {
            let item_constraints = c.for_items();
            let mut out = format!("[{}, ...]", ty_words(item, &item_constraints, stack));
            if let Some(len) = len_words(c.min_len, c.max_len) {
                out.push_str(&format!(" ({len} items)"));
            }
            out
        }
        TypeSpec::Nullable(inner) => format!("{} | null", ty_words(inner, c, stack)),
        TypeSpec::Contract(r) => {
            let spec = r.spec();
            if stack.contains(&spec.name) {
                spec.name.clone()
            } else {
                object(spec, stack, true)
            }
        }
        TypeSpec::External(r) => external_words(r),
    }
}

/// A compact rendering of an external (schemars) type: `string (ipv4)`, `{"a": integer}`.
pub(crate) fn external_words(r: &ExternalRef) -> String {
    let schema = r.standalone_schema();
    let defs = schema.get("$defs").and_then(Value::as_object).cloned();
    external(&schema, defs.as_ref(), &mut Vec::new())
}

pub(crate) fn format_words(format: &str) -> String {
    match format {
        "date" => "date YYYY-MM-DD".into(),
        "date-time" => "date-time YYYY-MM-DDThh:mm:ssZ".into(),
        "time" => "time hh:mm:ss".into(),
        other => other.into(),
    }
}

/// A compact rendering of a schemars type's schema: type names, enums, inline objects.
fn external(schema: &Value, defs: Option<&Map<String, Value>>, stack: &mut Vec<String>) -> String {
    let Value::Object(map) = schema else {
        return match schema {
            Value::Bool(false) => "never".into(),
            _ => "any".into(),
        };
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or(reference).to_owned();
        if stack.contains(&name) {
            return name;
        }
        let Some(target) = defs.and_then(|d| d.get(&name)) else {
            return name;
        };
        stack.push(name);
        let out = external(target, defs, stack);
        stack.pop();
        return out;
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return values
            .iter()
            .map(|v| serde_json::to_string(v).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(value) = map.get("const") {
        return serde_json::to_string(value).unwrap_or_default();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(key) {
            return branches
                .iter()
                .map(|b| external(b, defs, stack))
                .collect::<Vec<_>>()
                .join(" | ");
        }
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() {
        return "any".into();
    }
    types
        .iter()
        .map(|t| match *t {
            "object" => match map.get("properties") {
                Some(Value::Object(properties)) => {
                    let fields: Vec<String> = properties
                        .iter()
                        .map(|(k, v)| format!("{}: {}", quote(k), external(v, defs, stack)))
                        .collect();
                    format!("{{{}}}", fields.join(", "))
                }
                _ => "object".into(),
            },
            "array" => match map.get("items") {
                Some(items) => format!("[{}, ...]", external(items, defs, stack)),
                None => "[...]".into(),
            },
            "string" => match map.get("format").and_then(Value::as_str) {
                Some(f) => format!("string ({})", format_words(f)),
                None => "string".into(),
            },
            other => other.into(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::fixtures::*;
    use crate::Contract;

    const GUIDANCE: &str = "{\"quarter\": integer 1-4 | null, \"year\": integer 2018-2030 | null, \
        \"low\": number > 0 (USD millions) | null, \"high\": number > 0 (USD millions) | null} \
        where low <= high; low, high both null or both set";

    #[test]
    fn guidance() {
        assert_eq!(Guidance::signature(), GUIDANCE);
        assert_eq!(signature(Guidance::contract_spec()), GUIDANCE);
    }

    #[test]
    fn guidance_is_at_most_40_percent_of_the_schema() {
        let schema = serde_json::to_string(&<Guidance as Contract>::json_schema()).unwrap();
        let signature = Guidance::signature();
        assert!(
            signature.len() * 100 <= schema.len() * 40,
            "signature {} chars, schema {} chars",
            signature.len(),
            schema.len()
        );
    }

    #[test]
    fn every_shape() {
        assert_eq!(
            Policy::signature(),
            concat!(
                r#"{"name": string (1-80 chars), "#,
                r#""insured": {"value": number, "currency": "USD" | "EUR", "unit": string (1-20 chars) | null}, "#,
                r#""deductible": {"value": number, "currency": "USD" | "EUR", "unit": string (1-20 chars) | null} | null, "#,
                r#""start": string (date YYYY-MM-DD), "tags": [string /^[a-z]+$/, ...] (1-5 items), "#,
                r#""code": "A" | "B" | null, "count": integer >= 0, "ratio": number 0-1 (share), "#,
                r#""level": integer -128 to 9, "active": boolean, "scores": [integer 0-100, ...] (<= 3 items) | null, "#,
                r#""server": string (ipv4), "currencies": ["USD" | "EUR", ...]} "#,
                "where at least one of code, scores set"
            )
        );
        assert_eq!(Currency::signature(), r#""USD" | "EUR""#);
    }

    #[test]
    fn recursion_ends_at_the_name() {
        assert_eq!(
            Node::signature(),
            r#"{"name": string, "children": [Node, ...], "parent": Node | null}"#
        );
        assert_eq!(
            Tree::signature(),
            r#"{"root": {"name": string, "children": [Node, ...], "parent": Node | null}}"#
        );
    }

    #[test]
    fn bounds_in_words() {
        use crate::__private::{float, int};
        use crate::contract::Constraints;
        let c = |min: Option<f64>, xmin: Option<f64>, max: Option<f64>, xmax: Option<f64>| {
            Constraints {
                minimum: min.map(float),
                exclusive_minimum: xmin.map(float),
                maximum: max.map(float),
                exclusive_maximum: xmax.map(float),
                ..Constraints::default()
            }
        };
        let num = |c: &Constraints| ty_words(&TypeSpec::Number, c, &mut Vec::new());
        assert_eq!(num(&c(None, None, None, None)), "number");
        assert_eq!(num(&c(Some(0.0), None, Some(1.0), None)), "number 0-1");
        assert_eq!(num(&c(None, Some(0.0), None, None)), "number > 0");
        assert_eq!(num(&c(None, None, None, Some(5.5))), "number < 5.5");
        assert_eq!(num(&c(Some(0.25), None, None, None)), "number >= 0.25");
        assert_eq!(
            num(&c(None, Some(0.0), Some(1.0), None)),
            "number > 0, <= 1"
        );
        assert_eq!(num(&c(Some(-1.0), None, Some(1.0), None)), "number -1 to 1");
        let int_ty = |min: i128, max: i128| TypeSpec::Integer { min, max };
        let words = |t: &TypeSpec, c: &Constraints| ty_words(t, c, &mut Vec::new());
        let none = Constraints::default();
        assert_eq!(words(&int_ty(0, 255), &none), "integer 0-255");
        assert_eq!(
            words(&int_ty(i64::MIN.into(), i64::MAX.into()), &none),
            "integer"
        );
        assert_eq!(words(&int_ty(0, u64::MAX.into()), &none), "integer >= 0");
        let min1 = Constraints {
            minimum: Some(int(1)),
            ..Constraints::default()
        };
        assert_eq!(words(&int_ty(0, u64::MAX.into()), &min1), "integer >= 1");
        let xmax = Constraints {
            exclusive_maximum: Some(float(2.5)),
            ..Constraints::default()
        };
        assert_eq!(
            words(&int_ty(i32::MIN.into(), i32::MAX.into()), &xmax),
            "integer <= 2"
        );
        let exact = Constraints {
            minimum: Some(int(3)),
            maximum: Some(int(3)),
            ..Constraints::default()
        };
        assert_eq!(words(&int_ty(0, 255), &exact), "integer = 3");
    }

    #[test]
    fn strings_in_words() {
        use crate::__private::{format, pattern};
        use crate::contract::Constraints;
        let words = |c: Constraints| ty_words(&TypeSpec::String, &c, &mut Vec::new());
        assert_eq!(
            words(Constraints {
                pattern: Some(pattern("^[A-Z]{3}$")),
                ..Constraints::default()
            }),
            "string /^[A-Z]{3}$/"
        );
        assert_eq!(
            words(Constraints {
                format: Some(format("date-time")),
                min_len: Some(20),
                ..Constraints::default()
            }),
            "string (date-time YYYY-MM-DDThh:mm:ssZ, 20+ chars)"
        );
        assert_eq!(
            words(Constraints {
                min_len: Some(3),
                max_len: Some(3),
                ..Constraints::default()
            }),
            "string (3 chars)"
        );
        assert_eq!(
            words(Constraints {
                max_len: Some(80),
                ..Constraints::default()
            }),
            "string (<= 80 chars)"
        );
    }

    #[test]
    fn external_types() {
        let words = |r: ExternalRef| external_words(&r);
        assert_eq!(
            words(ExternalRef::of::<std::net::Ipv4Addr>()),
            "string (ipv4)"
        );
        assert_eq!(words(ExternalRef::of::<Vec<bool>>()), "[boolean, ...]");
        assert_eq!(words(ExternalRef::of::<Option<String>>()), "string | null");
        assert_eq!(
            words(ExternalRef::of::<std::collections::BTreeMap<String, i32>>()),
            "object"
        );
    }
}
