//! Where each extracted value is written in its document: the offsets the review page
//! highlights, and the values the document does not write.

use std::collections::HashSet;
use std::ops::Range;

use contract_core::ground::{numbers_at, Decimal, Numerals};
use serde::Serialize;
use serde_json::Value;

/// One value found in the document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    /// JSON pointer of the value in the row's `value` (`/company`, `/items/0/name`).
    pub path: String,
    /// The value as extracted (normalised: a number as a JSON number).
    pub value: Value,
    /// UTF-8 byte offset of its evidence in the document text.
    pub start: usize,
    /// End (exclusive) of its evidence.
    pub end: usize,
    /// The evidence as the document writes it (`$1,250`, `Acme  Corp`).
    pub written: String,
    /// Whether the schema grounds the value (`x-grounded`).
    pub grounded: bool,
}

/// Where the values of `value` are written in `text`, and the pointers of the values it does not
/// write. Strings and numbers are looked for (booleans and `null` are not); a string matches
/// with whitespace runs equal, a number where the document writes the same number (`1,250.0`
/// for `1250`). Each value gets one place, the first not taken by another value when there is
/// one.
pub fn locate(text: &str, value: &Value, grounded: &HashSet<String>) -> (Vec<Found>, Vec<String>) {
    let mut leaves = Vec::new();
    collect(value, String::new(), &mut leaves, 0);
    let mut numbers = Numbers::new(text);
    let mut found: Vec<Found> = Vec::new();
    let mut missing = Vec::new();
    for (path, leaf) in leaves {
        let places = places(text, leaf, &mut numbers);
        let free = places
            .iter()
            .find(|r| !found.iter().any(|f| f.start < r.end && r.start < f.end))
            .or(places.first())
            .cloned();
        match free {
            Some(r) => found.push(Found {
                grounded: grounded.contains(&path),
                path,
                value: leaf.clone(),
                written: text[r.clone()].to_owned(),
                start: r.start,
                end: r.end,
            }),
            None => missing.push(path),
        }
    }
    (found, missing)
}

/// The pointers among `paths` whose values `text` does not write, in the order [`locate`] lists
/// its missing ones (and by the same reading); only those values are looked for.
pub fn missing_at(text: &str, value: &Value, paths: &HashSet<String>) -> Vec<String> {
    if paths.is_empty() {
        return Vec::new();
    }
    let mut leaves = Vec::new();
    collect(value, String::new(), &mut leaves, 0);
    let mut numbers = Numbers::new(text);
    leaves
        .into_iter()
        .filter(|(path, _)| paths.contains(path))
        .filter(|(_, leaf)| places(text, leaf, &mut numbers).is_empty())
        .map(|(path, _)| path)
        .collect()
}

/// The numbers a document writes, read on first use.
struct Numbers<'t> {
    text: &'t str,
    read: Option<Vec<(Range<usize>, Decimal)>>,
}

impl<'t> Numbers<'t> {
    fn new(text: &'t str) -> Self {
        Numbers { text, read: None }
    }

    fn get(&mut self) -> &[(Range<usize>, Decimal)] {
        let text = self.text;
        self.read
            .get_or_insert_with(|| numbers_at(text, Numerals::detect(text)))
    }
}

/// Where `leaf` (a string or a number) is written in `text`: a string with whitespace runs
/// equal, a number where the document writes the same number.
fn places(text: &str, leaf: &Value, numbers: &mut Numbers<'_>) -> Vec<Range<usize>> {
    match leaf {
        Value::String(s) => string_places(text, s),
        Value::Number(n) => match Decimal::from_json_literal(&n.to_string()) {
            Some(d) => numbers
                .get()
                .iter()
                .filter(|(_, x)| x.cmp(&d).is_eq())
                .map(|(r, _)| r.clone())
                .collect(),
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Most nesting followed into a value.
const MAX_DEPTH: usize = 64;

fn collect<'v>(value: &'v Value, path: String, out: &mut Vec<(String, &'v Value)>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                collect(v, format!("{path}/{}", escape(k)), out, depth + 1);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect(v, format!("{path}/{i}"), out, depth + 1);
            }
        }
        Value::String(s) if s.trim().is_empty() => {}
        Value::String(_) | Value::Number(_) => out.push((path, value)),
        _ => {}
    }
}

/// A JSON pointer segment (`~` and `/` escaped).
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Most places of one value looked at.
const MAX_PLACES: usize = 64;

/// Where `needle` is written in `text`, whitespace runs compared equal.
fn string_places(text: &str, needle: &str) -> Vec<Range<usize>> {
    let words: Vec<&str> = needle.split_whitespace().collect();
    if words.is_empty() {
        return Vec::new();
    }
    let exact: Vec<Range<usize>> = text
        .match_indices(needle)
        .take(MAX_PLACES)
        .map(|(i, m)| i..i + m.len())
        .collect();
    if !exact.is_empty() || words.len() == 1 || words.len() > 400 {
        return exact;
    }
    let pattern = words
        .iter()
        .map(|w| regex::escape(w))
        .collect::<Vec<_>>()
        .join(r"\s+");
    match regex::RegexBuilder::new(&pattern)
        .size_limit(1 << 20)
        .build()
    {
        Ok(re) => re
            .find_iter(text)
            .take(MAX_PLACES)
            .map(|m| m.range())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The pointers of the values in `value` that `schema` grounds (`x-grounded` on their
/// subschema or on a subschema above them), following local `$ref`s, `anyOf` / `oneOf` /
/// `allOf` branches, `properties` and `items`.
pub fn grounded_paths(schema: &Value, value: &Value) -> HashSet<String> {
    let mut out = HashSet::new();
    walk_grounded(schema, schema, value, String::new(), false, &mut out, 0);
    out
}

fn walk_grounded(
    root: &Value,
    node: &Value,
    value: &Value,
    path: String,
    inherited: bool,
    out: &mut HashSet<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Value::Object(map) = node else { return };
    let grounded = inherited || map.get("x-grounded").is_some_and(|g| !g.is_null());
    if let Some(target) = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|p| root.pointer(p))
    {
        walk_grounded(root, target, value, path.clone(), grounded, out, depth + 1);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get(key) {
            for b in branches {
                walk_grounded(root, b, value, path.clone(), grounded, out, depth + 1);
            }
        }
    }
    match value {
        Value::Object(fields) => {
            let props = map.get("properties").and_then(Value::as_object);
            for (k, v) in fields {
                if let Some(sub) = props.and_then(|p| p.get(k)) {
                    let p = format!("{path}/{}", escape(k));
                    walk_grounded(root, sub, v, p, grounded, out, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = map.get("items") {
                for (i, v) in items.iter().enumerate() {
                    let p = format!("{path}/{i}");
                    walk_grounded(root, sub, v, p, grounded, out, depth + 1);
                }
            }
        }
        Value::String(_) | Value::Number(_) if grounded => {
            out.insert(path);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_strings_and_numbers_where_written() {
        let text = "Acme  Corp\nRevenue: $1,250.0 million\nCity: Oslo";
        let value = json!({"company": "Acme Corp", "revenue": 1250, "city": "Bergen", "ok": true});
        let grounded: HashSet<String> = ["/company".to_owned()].into();
        let (found, missing) = locate(text, &value, &grounded);
        let got: Vec<(&str, &str, bool)> = found
            .iter()
            .map(|f| (f.path.as_str(), &text[f.start..f.end], f.grounded))
            .collect();
        assert_eq!(
            got,
            [
                ("/company", "Acme  Corp", true),
                ("/revenue", "1,250.0", false)
            ]
        );
        assert_eq!(missing, ["/city"]);
    }

    #[test]
    fn missing_at_is_locates_missing_among_the_paths_asked() {
        let text = "Acme  Corp\nRevenue: $1,250.0 million\nCity: Oslo";
        let value = json!({"company": "Acme Corp", "revenue": 1250, "city": "Bergen",
                           "cost": 7, "tags": ["Oslo", "Rome"]});
        let all: HashSet<String> = [
            "/company", "/revenue", "/city", "/cost", "/tags/0", "/tags/1",
        ]
        .map(str::to_owned)
        .into();
        let (_, missing) = locate(text, &value, &all);
        assert_eq!(missing_at(text, &value, &all), missing);
        assert_eq!(missing, ["/city", "/cost", "/tags/1"]);
        let some: HashSet<String> = ["/company", "/cost"].map(str::to_owned).into();
        assert_eq!(missing_at(text, &value, &some), ["/cost"]);
        assert!(missing_at(text, &value, &HashSet::new()).is_empty());
    }

    #[test]
    fn grounded_paths_follow_refs_and_nullable_branches() {
        let schema = json!({
            "type": "object",
            "properties": {
                "who": {"anyOf": [{"$ref": "#/$defs/name"}, {"type": "null"}]},
                "items": {"type": "array", "items": {"type": "string", "x-grounded": "source"}},
                "free": {"type": "string"}
            },
            "$defs": {"name": {"type": "string", "x-grounded": "source"}}
        });
        let value = json!({"who": "Ann", "items": ["a", "b"], "free": "x"});
        let mut got: Vec<String> = grounded_paths(&schema, &value).into_iter().collect();
        got.sort();
        assert_eq!(got, ["/items/0", "/items/1", "/who"]);
    }

    #[test]
    fn a_self_referencing_schema_stops() {
        let schema = json!({"$ref": "#"});
        assert!(grounded_paths(&schema, &json!({"a": 1})).is_empty());
    }
}
