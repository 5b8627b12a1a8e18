//! The one-line signature of a JSON Schema, in the notation of [`crate::signature`]:
//!
//! ```text
//! {"city": string (1+ chars), "unit": "celsius" | "fahrenheit", "days"?: integer 1-14}
//! ```
//!
//! Also the pieces the Markdown docs share (types in words, numeric bounds, object views that
//! merge `allOf`).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Number, Value};

use super::resolve::{children, ref_name, Resolver};
use crate::contract::{Constraints, Rule};
use crate::schema::bounds::{integer_range, len_words, number_range, show};
use crate::signature::{format_words, rule_words};

/// A definition used more than once is written inline only up to this many characters;
/// longer, it is named and written once after the root.
const INLINE_MAX: usize = 120;
/// Deepest nesting written out; below it, `...`.
const MAX_DEPTH: usize = 64;

pub(super) fn signature(schema: &Value, root_name: &str) -> String {
    let resolver = Resolver::new(schema);
    // Every definition inline, as a derived signature writes nested contracts; when that is
    // longer than the schema itself, long definitions used more than once are named instead.
    let budget = serde_json::to_string(schema).map_or(0, |s| s.chars().count());
    let mut w = Writer::new(&resolver, schema, root_name);
    w.budget = Some(budget);
    let out = w.root_signature(schema);
    if !w.over_budget && out.chars().count() <= budget {
        return out;
    }
    Writer::new(&resolver, schema, root_name).root_signature(schema)
}

type Key = *const Value;

pub(super) struct Writer<'r, 'a> {
    resolver: &'r Resolver<'a>,
    root: &'a Value,
    /// How many `$ref`s point at each target.
    counts: HashMap<Key, usize>,
    names: HashMap<Key, String>,
    used_names: HashSet<String>,
    /// Targets being written out (a reference to one of them is written as its name).
    stack: Vec<Key>,
    /// Renderings of reference targets.
    cache: HashMap<Key, String>,
    /// Targets written as names, defined after the root.
    defs: Vec<Key>,
    depth: usize,
    /// With a budget every definition is inlined, until the inlined text passes the budget.
    budget: Option<usize>,
    spent: usize,
    over_budget: bool,
}

impl<'r, 'a> Writer<'r, 'a> {
    pub(super) fn new(resolver: &'r Resolver<'a>, root: &'a Value, root_name: &str) -> Self {
        let mut w = Writer {
            resolver,
            root,
            counts: HashMap::new(),
            names: HashMap::new(),
            used_names: HashSet::new(),
            stack: vec![root as Key],
            cache: HashMap::new(),
            defs: Vec::new(),
            depth: 0,
            budget: None,
            spent: 0,
            over_budget: false,
        };
        w.names.insert(root as Key, root_name.to_owned());
        w.used_names.insert(root_name.to_owned());
        let mut queue = vec![(root, 0usize)];
        while let Some((schema, depth)) = queue.pop() {
            let Value::Object(map) = schema else { continue };
            if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                if let Some(target) = resolver.resolve(r) {
                    *w.counts.entry(target as Key).or_default() += 1;
                }
            }
            if depth < super::MAX_SCHEMA_DEPTH {
                queue.extend(children(map).into_iter().map(|c| (c, depth + 1)));
            }
        }
        w
    }

    /// The root in words, its rules after `where`, then the named definitions.
    fn root_signature(&mut self, schema: &'a Value) -> String {
        let mut out = self.value(schema);
        if let Value::Object(map) = schema {
            if let Some(rules) = rules_words(map) {
                out.push_str(" where ");
                out.push_str(&rules);
            }
        }
        let mut i = 0;
        while i < self.defs.len() {
            let key = self.defs[i];
            let name = self.names.get(&key).cloned().unwrap_or_default();
            let body = self.cache.get(&key).cloned().unwrap_or_default();
            out.push_str(&format!("; {name} = {body}"));
            i += 1;
        }
        out
    }

    /// The name a reference target is written as.
    fn name_for(&mut self, key: Key, reference: &str) -> String {
        if let Some(name) = self.names.get(&key) {
            return name.clone();
        }
        let base = ref_name(reference);
        let mut name = base.clone();
        let mut n = 2;
        while self.used_names.contains(&name) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.used_names.insert(name.clone());
        self.names.insert(key, name.clone());
        name
    }

    /// A subschema in words.
    pub(super) fn value(&mut self, schema: &'a Value) -> String {
        if self.depth >= MAX_DEPTH {
            return "...".into();
        }
        self.depth += 1;
        let out = self.value_inner(schema);
        self.depth -= 1;
        out
    }

    fn value_inner(&mut self, schema: &'a Value) -> String {
        let out = self.value_words(schema);
        let note = schema
            .get("x-grounded")
            .and_then(crate::contract::Grounding::from_keyword)
            .as_ref()
            .and_then(crate::signature::grounding_note);
        match note {
            // As the derived signature writes it: after the type and unit, before `| null`.
            Some(note) => match out.strip_suffix(" | null") {
                Some(head) => format!("{head} {note} | null"),
                None => format!("{out} {note}"),
            },
            None => out,
        }
    }

    fn value_words(&mut self, schema: &'a Value) -> String {
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(false) => return "never".into(),
            _ => return "any".into(),
        };
        let mut parts: Vec<String> = Vec::new();
        if let Some(view) = ObjectView::of(self.resolver, map) {
            parts.push(self.object(&view, schema));
        } else {
            if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                parts.push(self.reference(r));
            }
            for key in ["$dynamicRef", "$recursiveRef"] {
                if let Some(r) = map.get(key).and_then(Value::as_str) {
                    parts.push(ref_name(r));
                }
            }
            if let Some(own) = self.own(map) {
                parts.push(own);
            }
            if let Some(Value::Array(all)) = map.get("allOf") {
                for part in all {
                    parts.push(self.value(part));
                }
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                let words: Vec<String> = branches.iter().map(|b| self.value(b)).collect();
                let joined = dedup(words).join(" | ");
                if parts.is_empty() {
                    parts.push(joined);
                } else {
                    parts.push(format!("({joined})"));
                }
            }
        }
        match parts.len() {
            0 => "any".into(),
            1 => parts.pop().unwrap_or_default(),
            _ => parts
                .into_iter()
                .map(|p| {
                    if p.contains(" | ") && !p.starts_with('(') {
                        format!("({p})")
                    } else {
                        p
                    }
                })
                .collect::<Vec<_>>()
                .join(" & "),
        }
    }

    /// A `$ref`: the target inline, or its name (recursion, or a long definition used twice).
    fn reference(&mut self, reference: &str) -> String {
        let Some(target) = self.resolver.resolve(reference) else {
            return ref_name(reference);
        };
        let key = target as Key;
        if self.stack.contains(&key) || self.defs.contains(&key) {
            return self.name_for(key, reference);
        }
        let body = match self.cache.get(&key) {
            Some(body) => body.clone(),
            None => {
                self.name_for(key, reference);
                self.stack.push(key);
                let body = self.value(target);
                self.stack.pop();
                self.cache.insert(key, body.clone());
                body
            }
        };
        if let Some(budget) = self.budget {
            self.spent += body.len();
            if self.spent > budget {
                self.over_budget = true;
                return self.name_for(key, reference);
            }
            return body;
        }
        if self.counts.get(&key).copied().unwrap_or(0) > 1 && body.chars().count() > INLINE_MAX {
            self.defs.push(key);
            return self.name_for(key, reference);
        }
        body
    }

    /// The schema's own type (from `type`, `enum`, `const` or the keywords it has), with unit
    /// and `| null`; `None` when it says nothing about the type.
    fn own(&mut self, map: &'a Map<String, Value>) -> Option<String> {
        let unit = map.get("x-unit").map(|u| match u {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let (words, nullable) = if let Some(c) = map.get("const") {
            (vec![json(c)], false)
        } else if let Some(Value::Array(values)) = map.get("enum") {
            let words: Vec<String> = values.iter().filter(|v| !v.is_null()).map(json).collect();
            (words, values.iter().any(Value::is_null))
        } else {
            let (types, nullable) = types_of(map)?;
            let words = types.iter().map(|t| self.type_words(t, map)).collect();
            (words, nullable)
        };
        let mut out = words.join(" | ");
        if let Some(unit) = unit {
            if !out.is_empty() {
                out.push_str(&format!(" ({unit})"));
            }
        }

        if nullable {
            if out.is_empty() {
                out.push_str("null");
            } else {
                out.push_str(" | null");
            }
        }
        Some(out)
    }

    /// One JSON type of `map` with the keywords that apply to it.
    fn type_words(&mut self, t: &str, map: &'a Map<String, Value>) -> String {
        match t {
            "integer" => {
                let mut out = match integer_words(map) {
                    Some(range) => format!("integer {range}"),
                    None => "integer".into(),
                };
                push_notes(&mut out, multiple_of(map).into_iter().collect());
                out
            }
            "number" => {
                let mut out = match number_range(&bounds(map)) {
                    Some(range) => format!("number {range}"),
                    None => "number".into(),
                };
                push_notes(&mut out, multiple_of(map).into_iter().collect());
                out
            }
            "string" => {
                let mut out = String::from("string");
                if let Some(p) = map.get("pattern").and_then(Value::as_str) {
                    out.push_str(&format!(" /{p}/"));
                }
                push_notes(&mut out, string_notes(map));
                out
            }
            "array" => {
                let mut out = self.array(map);
                let mut notes = Vec::new();
                if let Some(len) = len_words(u(map, "minItems"), u(map, "maxItems")) {
                    notes.push(format!("{len} items"));
                }
                if map.get("uniqueItems") == Some(&Value::Bool(true)) {
                    notes.push("unique".into());
                }
                push_notes(&mut out, notes);
                out
            }
            "object" => {
                // Only reached for an object without properties of any kind.
                "object".into()
            }
            other => other.into(),
        }
    }

    fn array(&mut self, map: &'a Map<String, Value>) -> String {
        let (tuple, rest) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), rest) => (Some(prefix), rest),
            (_, Some(Value::Array(prefix))) => (Some(prefix), map.get("additionalItems")),
            (_, rest) => (None, rest),
        };
        match tuple {
            None => match rest {
                Some(items) => format!("[{}, ...]", self.value(items)),
                None => "[...]".into(),
            },
            Some(prefix) => {
                let mut words: Vec<String> = prefix.iter().map(|s| self.value(s)).collect();
                match rest {
                    Some(Value::Bool(false)) => {}
                    Some(items) => words.push(format!("{}, ...", self.value(items))),
                    None => words.push("...".into()),
                }
                format!("[{}]", words.join(", "))
            }
        }
    }

    /// An object (with its merged `allOf` parts): `{"a": integer, "b"?: string, ...: number}`.
    fn object(&mut self, view: &ObjectView<'a>, schema: &'a Value) -> String {
        let mut fields: Vec<String> = Vec::new();
        for &(name, property) in &view.properties {
            let optional = if view.required.contains(&name) {
                ""
            } else {
                "?"
            };
            let words = self.value(property);
            fields.push(format!("{}{optional}: {words}", json_str(name)));
        }
        for &(pattern, property) in &view.patterns {
            let words = self.value(property);
            fields.push(format!("/{pattern}/: {words}"));
        }
        if let Some(extra) = view.additional {
            if !matches!(extra, Value::Bool(_)) {
                let words = self.value(extra);
                fields.push(format!("...: {words}"));
            }
        }
        let mut out = if fields.is_empty() {
            "object".to_owned()
        } else {
            format!("{{{}", fields.join(", "))
        };
        if !fields.is_empty() {
            if !std::ptr::eq(schema, self.root) && !view.rules.is_empty() {
                out.push_str(" where ");
                out.push_str(&view.rules.join("; "));
            }
            out.push('}');
        }
        if view.nullable {
            out.push_str(" | null");
        }
        out
    }
}

/// An object schema with its `allOf` parts (and the `$ref`s among them) merged: properties in
/// order of appearance, the first definition of a key winning.
pub(super) struct ObjectView<'a> {
    pub properties: Vec<(&'a str, &'a Value)>,
    pub required: Vec<&'a str>,
    pub patterns: Vec<(&'a str, &'a Value)>,
    pub additional: Option<&'a Value>,
    /// The cross-field rules in words.
    pub rules: Vec<String>,
    pub nullable: bool,
}

impl<'a> ObjectView<'a> {
    /// The view of `map` when it is an object schema whose `allOf` parts are objects too (or
    /// absent); `None` otherwise.
    pub fn of(resolver: &Resolver<'a>, map: &'a Map<String, Value>) -> Option<Self> {
        let (types, nullable) = types_of(map).unwrap_or_default();
        if !(types == ["object"]
            || types.is_empty() && is_object_like(map)
            || types.is_empty() && map.contains_key("allOf"))
        {
            return None;
        }
        if map.contains_key("enum") || map.contains_key("const") {
            return None;
        }
        let mut parts: Vec<&'a Map<String, Value>> = Vec::new();
        let mut seen: Vec<*const Map<String, Value>> = Vec::new();
        if !collect_parts(resolver, map, &mut parts, &mut seen, 0) {
            return None;
        }
        if !parts.iter().any(|p| is_object_like(p)) {
            return None;
        }
        let mut view = ObjectView {
            properties: Vec::new(),
            required: Vec::new(),
            patterns: Vec::new(),
            additional: None,
            rules: Vec::new(),
            nullable,
        };
        for part in parts {
            if let Some(Value::Object(properties)) = part.get("properties") {
                for (name, property) in properties {
                    if !view.properties.iter().any(|(n, _)| *n == name) {
                        view.properties.push((name, property));
                    }
                }
            }
            if let Some(Value::Array(required)) = part.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !view.required.contains(&name) {
                        view.required.push(name);
                    }
                }
            }
            if let Some(Value::Object(patterns)) = part.get("patternProperties") {
                view.patterns
                    .extend(patterns.iter().map(|(p, s)| (p.as_str(), s)));
            }
            if view.additional.is_none() {
                view.additional = part.get("additionalProperties");
            }
            if let Some(rules) = rules_words(part) {
                view.rules.push(rules);
            }
        }
        Some(view)
    }
}

/// Gathers `map` and its `allOf` parts (through `$ref`s); `false` when a part is not an object
/// schema (then the parts are written joined by `&`).
fn collect_parts<'a>(
    resolver: &Resolver<'a>,
    map: &'a Map<String, Value>,
    parts: &mut Vec<&'a Map<String, Value>>,
    seen: &mut Vec<*const Map<String, Value>>,
    depth: usize,
) -> bool {
    if depth > 16 || seen.contains(&(map as *const _)) {
        return true;
    }
    seen.push(map);
    parts.push(map);
    for key in [
        "anyOf",
        "oneOf",
        "not",
        "if",
        "$dynamicRef",
        "$recursiveRef",
    ] {
        if depth > 0 && map.contains_key(key) {
            return false;
        }
    }
    if depth > 0 {
        if let Some((types, _)) = types_of(map) {
            if types != ["object"] {
                return false;
            }
        }
    }
    if let Some(r) = map.get("$ref").and_then(Value::as_str) {
        match resolver.resolve(r) {
            Some(Value::Object(target)) => {
                if !collect_parts(resolver, target, parts, seen, depth + 1) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    if let Some(Value::Array(all)) = map.get("allOf") {
        for part in all {
            match part {
                Value::Object(p) => {
                    if !collect_parts(resolver, p, parts, seen, depth + 1) {
                        return false;
                    }
                }
                Value::Bool(true) => {}
                _ => return false,
            }
        }
    }
    true
}

fn is_object_like(map: &Map<String, Value>) -> bool {
    [
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
    ]
    .iter()
    .any(|k| map.contains_key(*k))
}

/// The JSON types a schema allows (without `null`), and whether it allows `null`; from `type`,
/// else from the keywords it has. `None` when it says nothing about the type.
pub(super) fn types_of(map: &Map<String, Value>) -> Option<(Vec<&'static str>, bool)> {
    const ALL: [&str; 7] = [
        "null", "boolean", "integer", "number", "string", "array", "object",
    ];
    let canonical = |t: &str| ALL.iter().copied().find(|a| *a == t);
    let listed: Vec<&'static str> = match map.get("type") {
        Some(Value::String(t)) => canonical(t).into_iter().collect(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter_map(canonical)
            .collect(),
        _ => Vec::new(),
    };
    let listed = if listed.is_empty() {
        let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
        let mut inferred = Vec::new();
        if has(&[
            "properties",
            "patternProperties",
            "additionalProperties",
            "required",
        ]) {
            inferred.push("object");
        }
        if has(&["items", "prefixItems", "minItems", "maxItems"]) {
            inferred.push("array");
        }
        if has(&["minLength", "maxLength", "pattern", "format"]) {
            inferred.push("string");
        }
        if has(&[
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ]) {
            inferred.push("number");
        }
        inferred
    } else {
        listed
    };
    if listed.is_empty() {
        return None;
    }
    let nullable = listed.contains(&"null");
    let mut types: Vec<&'static str> = listed.into_iter().filter(|t| *t != "null").collect();
    // `integer` is a `number`: say it once.
    if types.contains(&"number") {
        types.retain(|t| *t != "integer");
    }
    types.dedup();
    Some((types, nullable))
}

/// The numeric bounds of `map` (a draft-4 boolean `exclusiveMinimum` makes `minimum` exclusive).
pub(super) fn bounds(map: &Map<String, Value>) -> Constraints {
    let num = |k: &str| match map.get(k) {
        Some(Value::Number(n)) => Some(n.clone()),
        _ => None,
    };
    let mut c = Constraints {
        minimum: num("minimum"),
        maximum: num("maximum"),
        exclusive_minimum: num("exclusiveMinimum"),
        exclusive_maximum: num("exclusiveMaximum"),
        ..Constraints::default()
    };
    if map.get("exclusiveMinimum") == Some(&Value::Bool(true)) {
        c.exclusive_minimum = c.minimum.take();
    }
    if map.get("exclusiveMaximum") == Some(&Value::Bool(true)) {
        c.exclusive_maximum = c.maximum.take();
    }
    c
}

/// An integer's range in words (`1-4`, `>= 0`); a bound of 2^31 - 1 or more in size is left out
/// as the noise of a type's own bound, as the derived signature does.
pub(super) fn integer_words(map: &Map<String, Value>) -> Option<String> {
    const WIDE: f64 = i32::MAX as f64;
    let narrow = |n: Option<Number>| n.filter(|n| n.as_f64().is_some_and(|f| f.abs() < WIDE));
    let c = bounds(map);
    let c = Constraints {
        minimum: narrow(c.minimum),
        maximum: narrow(c.maximum),
        exclusive_minimum: narrow(c.exclusive_minimum),
        exclusive_maximum: narrow(c.exclusive_maximum),
        ..Constraints::default()
    };
    integer_range(i128::from(i64::MIN), i128::from(u64::MAX), &c)
}

/// `multiple of 5`.
pub(super) fn multiple_of(map: &Map<String, Value>) -> Option<String> {
    match map.get("multipleOf") {
        Some(Value::Number(n)) => Some(format!("multiple of {}", show(n))),
        _ => None,
    }
}

/// `date YYYY-MM-DD`, `1-80 chars`.
pub(super) fn string_notes(map: &Map<String, Value>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(f) = map.get("format").and_then(Value::as_str) {
        notes.push(format_words(f));
    }
    if let Some(len) = len_words(u(map, "minLength"), u(map, "maxLength")) {
        notes.push(format!("{len} chars"));
    }
    notes
}

pub(super) fn u(map: &Map<String, Value>, key: &str) -> Option<u64> {
    match map.get(key) {
        Some(Value::Number(n)) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

fn push_notes(out: &mut String, notes: Vec<String>) {
    if !notes.is_empty() {
        out.push_str(&format!(" ({})", notes.join(", ")));
    }
}

/// `x-rules` in words (`low <= high; low, high both null or both set`).
pub(super) fn rules_words(map: &Map<String, Value>) -> Option<String> {
    let Some(Value::Array(rules)) = map.get("x-rules") else {
        return None;
    };
    let words: Vec<String> = rules
        .iter()
        .filter_map(|r| {
            let text = r.as_str()?;
            Some(Rule::parse(text).map_or_else(|| text.to_owned(), |rule| rule_words(&rule)))
        })
        .collect();
    (!words.is_empty()).then(|| words.join("; "))
}

pub(super) fn json(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn json_str(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn dedup(words: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for w in words {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}
