//! `x-rules`: the cross-field rules a derived contract writes into its schema, read back and
//! checked on values (the same messages and paths as a derived contract's validator).

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::contract::{CmpOp, Rule};

/// Parses `low <= high`, `both_or_neither(low, high)`, `at_least_one(a, b)`.
pub(super) fn parse_rule(text: &str) -> Option<Rule> {
    let text = text.trim();
    let name_ok = |s: &str| {
        !s.is_empty()
            && !s
                .chars()
                .any(|c| c.is_whitespace() || "<>=!(),".contains(c))
    };
    for (prefix, both) in [("both_or_neither(", true), ("at_least_one(", false)] {
        if let Some(inner) = text.strip_prefix(prefix).and_then(|t| t.strip_suffix(')')) {
            let names: Vec<String> = inner.split(',').map(|n| n.trim().to_owned()).collect();
            if names.iter().all(|n| name_ok(n)) {
                return Some(if both {
                    Rule::BothOrNeither(names)
                } else {
                    Rule::AtLeastOne(names)
                });
            }
            return None;
        }
    }
    let (at, op) = ["<=", ">=", "==", "!=", "<", ">"]
        .into_iter()
        .filter_map(|op| text.find(op).map(|i| (i, op)))
        .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())))?;
    let left = text[..at].trim();
    let right = text[at + op.len()..].trim();
    if !(name_ok(left) && name_ok(right)) {
        return None;
    }
    Some(Rule::Compare {
        left: left.to_owned(),
        op: CmpOp::parse(op)?,
        right: right.to_owned(),
    })
}

/// The rules' violations on `object`: the key each is reported at (`None`: the object itself)
/// and its message. A rule whose field is missing, or a comparison with a null side or sides of
/// different types, holds (the other keywords report those).
pub(super) fn check(rules: &[Rule], object: &Map<String, Value>) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for rule in rules {
        match rule {
            Rule::Compare { left, op, right } => {
                let (Some(l), Some(r)) = (object.get(left), object.get(right)) else {
                    continue;
                };
                let Some(ord) = compare(l, r) else { continue };
                if !op.holds(ord) {
                    out.push((
                        Some(right.clone()),
                        format!(
                            "`{left}` ({}) must be {} `{right}` ({})",
                            scalar(l),
                            op.as_str(),
                            scalar(r)
                        ),
                    ));
                }
            }
            Rule::BothOrNeither(names) => {
                let values: Option<Vec<&Value>> = names.iter().map(|n| object.get(n)).collect();
                let Some(values) = values else { continue };
                let nulls = values.iter().filter(|v| v.is_null()).count();
                if nulls == 0 || nulls == names.len() {
                    continue;
                }
                let given = list(
                    names
                        .iter()
                        .zip(&values)
                        .filter(|(_, v)| !v.is_null())
                        .map(|(n, _)| n.as_str()),
                );
                let verb = if names.len() - nulls == 1 {
                    "is"
                } else {
                    "are"
                };
                let advice = if names.len() == 2 {
                    "give both or neither".to_owned()
                } else {
                    format!(
                        "give all of {} or none",
                        list(names.iter().map(String::as_str))
                    )
                };
                for (name, value) in names.iter().zip(&values) {
                    if value.is_null() {
                        out.push((
                            Some(name.clone()),
                            format!("`{name}` is null but {given} {verb} not: {advice}"),
                        ));
                    }
                }
            }
            Rule::AtLeastOne(names) => {
                let values: Option<Vec<&Value>> = names.iter().map(|n| object.get(n)).collect();
                let Some(values) = values else { continue };
                if values.iter().all(|v| v.is_null()) {
                    let message = match names.as_slice() {
                        [one] => format!("`{one}` must not be null"),
                        _ => format!(
                            "at least one of {} must be given (not null)",
                            list(names.iter().map(String::as_str))
                        ),
                    };
                    out.push((None, message));
                }
            }
        }
    }
    out
}

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > 60 => {
            let cut: String = s.chars().take(60).collect();
            format!("{}…", Value::String(cut))
        }
        other => other.to_string(),
    }
}

/// Numbers by value (exactly for integers), strings lexicographically, booleans `false < true`.
fn compare(l: &Value, r: &Value) -> Option<Ordering> {
    match (l, r) {
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
                Some(x.cmp(&y))
            } else if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                Some(x.cmp(&y))
            } else {
                a.as_f64()?.partial_cmp(&b.as_f64()?)
            }
        }
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    }
}
