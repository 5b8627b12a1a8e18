//! The Markdown field reference of a JSON Schema, in the layout of [`crate::docs`]: one section
//! per object schema (the root, then definitions by name and inline objects by their path, in the
//! order they are met), a table of fields each, its rules; enum definitions as lists of values.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::resolve::{ref_name, Resolver};
use super::signature::{bounds, integer_words, json, multiple_of, types_of, u, ObjectView, Writer};
use crate::contract::Rule;
use crate::docs::{anchor, cell, one_line, rule_line};
use crate::schema::bounds::{len_words, number_range};

/// Keywords the table shows in its own columns; every other keyword with a meaning is listed in
/// the constraint column as it is written.
const SHOWN: [&str; 44] = [
    "x-grounded",
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
    "x-unit",
    "x-rules",
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "x-guidance",
];

pub(super) fn docs_markdown<'a>(schema: &'a Value, name: &str) -> String {
    let resolver = Resolver::new(schema);
    let mut d = Docs {
        resolver: &resolver,
        root: schema,
        root_name: name,
        names: Vec::new(),
        linked: Vec::new(),
        titles: HashSet::new(),
        refs: Vec::new(),
    };
    d.names.push((schema as *const Value, name.to_owned()));
    d.titles.insert(name.to_owned());
    // Sections depth first, each at the first place the walk reaches it: the order the derived
    // contract's docs use (`crate::docs`). An explicit stack, so a long chain of definitions
    // cannot overflow the call stack.
    let mut placed: HashSet<*const Value> = HashSet::new();
    let mut stack: Vec<&'a Value> = vec![schema];
    let mut out = String::new();
    while let Some(s) = stack.pop() {
        if !placed.insert(s as *const Value) {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let title = d.name_of(s).unwrap_or(name).to_owned();
        d.section(&title, s, &mut out);
        stack.extend(std::mem::take(&mut d.linked).into_iter().rev());
    }
    out
}

struct Docs<'r, 'a> {
    resolver: &'r Resolver<'a>,
    root: &'a Value,
    root_name: &'r str,
    /// Every section's schema and its title, in the order first linked.
    names: Vec<(*const Value, String)>,
    /// The schemas the section being written links to, in order.
    linked: Vec<&'a Value>,
    titles: HashSet<String>,
    /// `$ref` targets whose type is being named (a reference to itself ends there).
    refs: Vec<*const Value>,
}

impl<'a> Docs<'_, 'a> {
    fn section(&mut self, title: &str, schema: &'a Value, out: &mut String) {
        let _ = writeln!(out, "## {title}\n");
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(b) => {
                let _ = writeln!(out, "Value: {}", if *b { "any" } else { "none" });
                return;
            }
            _ => return,
        };
        if let Some(d) = map.get("description").and_then(Value::as_str) {
            let _ = writeln!(out, "{}\n", d.trim());
        }
        let Some(view) = ObjectView::of(self.resolver, map) else {
            if let Some(Value::Array(values)) = map.get("enum") {
                out.push_str("Values:\n\n");
                for v in values {
                    match v {
                        Value::String(s) => {
                            let _ = writeln!(out, "- `{s}`");
                        }
                        other => {
                            let _ = writeln!(out, "- `{other}`");
                        }
                    }
                }
            } else {
                let mut w = Writer::new(self.resolver, self.root, self.root_name);
                let _ = writeln!(out, "Value: `{}`", w.value(schema));
                let others = others(map);
                if !others.is_empty() {
                    let _ = writeln!(out, "\nAlso: {others}");
                }
            }
            return;
        };
        out.push_str("| field | type | constraint | unit | nullable | description |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        let prefix = if std::ptr::eq(schema, self.root) {
            String::new()
        } else {
            title.to_owned()
        };
        for &(name, property) in &view.properties {
            let optional = if view.required.contains(&name) {
                ""
            } else {
                " (optional)"
            };
            let field = format!("`{name}`{optional}");
            self.row(&field, &format!("{prefix}/{name}"), property, out);
        }
        for &(pattern, property) in &view.patterns {
            let field = format!("keys matching `{pattern}`");
            self.row(&field, &format!("{prefix}/{pattern}"), property, out);
        }
        if let Some(extra) = view.additional {
            if !matches!(extra, Value::Bool(_)) {
                self.row("other keys", &format!("{prefix}/*"), extra, out);
            }
        }
        let rules: Vec<String> = map
            .get("x-rules")
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|r| Rule::parse(r).map_or_else(|| format!("`{r}`"), |r| rule_line(&r)))
                    .collect()
            })
            .unwrap_or_default();
        let mut extra = others(map);
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(v) = map.get(key) {
                if key != "allOf" || !view_merged_all_of(map) {
                    extra.push_str(&format!("{}`{key}`: `{}`", sep(&extra), short(v)));
                }
            }
        }
        if !rules.is_empty() || !extra.is_empty() {
            out.push_str("\nRules:\n\n");
            for rule in rules {
                let _ = writeln!(out, "- {rule}");
            }
            if !extra.is_empty() {
                let _ = writeln!(out, "- also: {extra}");
            }
        }
    }

    fn row(&mut self, field: &str, path: &str, schema: &'a Value, out: &mut String) {
        let (ty, nullable) = self.type_name(schema, path);
        let map = schema.as_object();
        let unit = map
            .and_then(|m| m.get("x-unit"))
            .map(|u| match u {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default();
        let description = map
            .and_then(|m| m.get("description"))
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_default();
        let constraint = map.map(|m| self.constraints(m)).unwrap_or_default();
        let cells = [
            field.to_owned(),
            ty,
            constraint,
            unit,
            if nullable { "yes" } else { "no" }.to_owned(),
            description,
        ];
        let cells: Vec<String> = cells.iter().map(|c| cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }

    /// The type column (nested objects linked to their section) and whether `null` is allowed.
    fn type_name(&mut self, schema: &'a Value, path: &str) -> (String, bool) {
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(false) => return ("never".into(), false),
            _ => return ("any".into(), true),
        };
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            if let Some(target) = self.resolver.resolve(r) {
                let nullable = types_of(map).is_some_and(|(_, n)| n);
                let name = if std::ptr::eq(target, self.root) {
                    self.root_name.to_owned()
                } else {
                    ref_name(r)
                };
                let documented = target.as_object().is_some_and(|t| {
                    ObjectView::of(self.resolver, t).is_some() || t.contains_key("enum")
                });
                if documented {
                    return (self.link(&name, target), nullable);
                }
                let key = target as *const Value;
                if self.refs.contains(&key) || self.refs.len() > 32 {
                    return (name, nullable);
                }
                self.refs.push(key);
                let (inner, inner_null) = self.type_name(target, path);
                self.refs.pop();
                return (inner, nullable || inner_null);
            }
            return (ref_name(r), false);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                let mut names: Vec<String> = Vec::new();
                let mut nullable = false;
                for (i, b) in branches.iter().enumerate() {
                    if b.get("type").and_then(Value::as_str) == Some("null") {
                        nullable = true;
                        continue;
                    }
                    let (n, bn) = self.type_name(b, &format!("{path}/{key}/{i}"));
                    nullable |= bn;
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
                return (names.join(" or "), nullable);
            }
        }
        if ObjectView::of(self.resolver, map).is_some() {
            let nullable = types_of(map).is_some_and(|(_, n)| n);
            return (self.link(path, schema), nullable);
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let mut kinds: Vec<&str> = Vec::new();
            for v in values.iter().filter(|v| !v.is_null()) {
                let k = json_type(v);
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            return (kinds.join(" or "), values.iter().any(Value::is_null));
        }
        if let Some(c) = map.get("const") {
            return (json_type(c).to_owned(), c.is_null());
        }
        let Some((types, nullable)) = types_of(map) else {
            return ("any".into(), true);
        };
        let names: Vec<String> = types
            .iter()
            .map(|t| match *t {
                "array" => match map.get("items") {
                    Some(items @ (Value::Object(_) | Value::Bool(_))) => {
                        let (inner, _) = self.type_name(items, &format!("{path}/*"));
                        format!("list of {inner}")
                    }
                    _ => "list".into(),
                },
                other => other.to_owned(),
            })
            .collect();
        (names.join(" or "), nullable)
    }

    fn link(&mut self, title: &str, target: &'a Value) -> String {
        self.linked.push(target);
        let name = match self.name_of(target) {
            Some(name) => name.to_owned(),
            None => {
                let mut name = title.to_owned();
                let mut n = 2;
                while self.titles.contains(&name) {
                    name = format!("{title}{n}");
                    n += 1;
                }
                self.titles.insert(name.clone());
                self.names.push((target as *const Value, name.clone()));
                name
            }
        };
        format!("[`{name}`](#{})", anchor(&name))
    }

    /// The title given to `schema`'s section, once it has one.
    fn name_of(&self, schema: &Value) -> Option<&str> {
        self.names
            .iter()
            .find(|(s, _)| std::ptr::eq(*s, schema))
            .map(|(_, n)| n.as_str())
    }

    /// The constraint column, `; `-separated.
    fn constraints(&mut self, map: &'a Map<String, Value>) -> String {
        let mut parts: Vec<String> = Vec::new();
        let types = types_of(map).map(|(t, _)| t).unwrap_or_default();
        if types.contains(&"array") {
            if let Some(len) = len_words(u(map, "minItems"), u(map, "maxItems")) {
                parts.push(format!("{len} items"));
            }
            if map.get("uniqueItems") == Some(&Value::Bool(true)) {
                parts.push("unique".into());
            }
            if let Some(Value::Object(items)) = map.get("items") {
                let inner = self.constraints(items);
                if !inner.is_empty() {
                    parts.push(format!("items: {inner}"));
                }
            }
        }
        if types.contains(&"integer") {
            parts.extend(integer_words(map));
        }
        if types.contains(&"number") {
            parts.extend(number_range(&bounds(map)));
        }
        parts.extend(multiple_of(map));
        if types.contains(&"string") {
            if let Some(len) = len_words(u(map, "minLength"), u(map, "maxLength")) {
                parts.push(format!("{len} chars"));
            }
            if let Some(p) = map.get("pattern").and_then(Value::as_str) {
                parts.push(format!("pattern `{p}`"));
            }
            if let Some(f) = map.get("format").and_then(Value::as_str) {
                parts.push(format!("format `{f}`"));
            }
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let shown: Vec<String> = values
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| format!("`{v}`"))
                .collect();
            parts.push(format!("one of {}", shown.join(", ")));
        }
        if let Some(c) = map.get("const") {
            parts.push(format!("= `{c}`"));
        }
        if let Some(g) = map
            .get("x-grounded")
            .and_then(crate::contract::Grounding::from_keyword)
        {
            parts.push(g.words());
        }
        let others = others(map);
        if !others.is_empty() {
            parts.push(others);
        }
        parts.join("; ")
    }
}

/// Every keyword with a meaning the columns do not show, as written (`` `not`: `{..}` ``).
fn others(map: &Map<String, Value>) -> String {
    map.iter()
        .filter(|(k, _)| !SHOWN.contains(&k.as_str()))
        .map(|(k, v)| format!("`{k}`: `{}`", short(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn view_merged_all_of(map: &Map<String, Value>) -> bool {
    map.get("allOf").is_some_and(|all| {
        all.as_array().is_some_and(|parts| {
            parts
                .iter()
                .all(|p| p.is_object() && p.get("anyOf").is_none() && p.get("oneOf").is_none())
        })
    })
}

fn sep(text: &str) -> &'static str {
    if text.is_empty() {
        ""
    } else {
        ", "
    }
}

/// Compact JSON, cut at 120 characters.
fn short(value: &Value) -> String {
    let text = json(value);
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}
