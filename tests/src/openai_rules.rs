//! An independent checker of the OpenAI strict structured-outputs rules.
//!
//! Written from the "Supported schemas" part of OpenAI's Structured Outputs guide
//! (<https://developers.openai.com/api/docs/guides/structured-outputs>), not from
//! `contract_core::schema::strict_schema`, so the two can check each other. It reports every
//! problem it finds, each prefixed with the JSON pointer of the offending subschema.
//!
//! Rules checked:
//!
//! - the root is an object schema (`"type": "object"`), not an `anyOf`;
//! - every subschema is a JSON object using only the supported keywords: `type`, `properties`,
//!   `required`, `additionalProperties`, `items`, `enum`, `const`, `anyOf`, `$ref`, `$defs`,
//!   `description`, `pattern`, `format`, `minimum`, `maximum`, `exclusiveMinimum`,
//!   `exclusiveMaximum`, `multipleOf`, `minItems`, `maxItems` (so no `title`, `default`,
//!   `allOf`, `not`, `if`/`then`/`else`, `dependentRequired`, `minLength`, ...);
//! - types are among string, number, boolean, integer, object, array, null; every subschema
//!   says what it is (`type`, `enum`, `const`, `anyOf` or `$ref`);
//! - every object has `additionalProperties: false` and lists every property in `required`;
//! - `format` is one of date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid;
//! - a `$ref` points into `$defs` (or is `#`) and stands alone: the OpenAI SDKs inline a
//!   `$ref` that has sibling keywords before sending a schema, since the API refuses them;
//! - limits: at most 10 levels of object nesting, 5000 object properties, 1000 enum values,
//!   15,000 characters in one string enum of more than 250 values, and 120,000 characters in
//!   all property names, definition names, enum and const values together.

use serde_json::{Map, Value};

/// Keywords the strict subset supports.
pub const SUPPORTED: [&str; 20] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// `format` values the strict subset supports.
pub const FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Types the strict subset supports.
pub const TYPES: [&str; 7] = [
    "string", "number", "boolean", "integer", "object", "array", "null",
];

/// Most levels of object nesting (the root object is level 1).
pub const MAX_NESTING: usize = 10;
/// Most object properties in a schema.
pub const MAX_PROPERTIES: usize = 5000;
/// Most enum values in a schema.
pub const MAX_ENUM_VALUES: usize = 1000;
/// Above this many values, one string enum is limited to [`MAX_LARGE_ENUM_CHARS`].
pub const LARGE_ENUM: usize = 250;
/// Most characters in the values of one string enum of more than [`LARGE_ENUM`] values.
pub const MAX_LARGE_ENUM_CHARS: usize = 15_000;
/// Most characters in property names, definition names, enum values and const values.
pub const MAX_TEXT: usize = 120_000;

/// Checks `schema` against the strict rules; `Err` lists every problem found.
pub fn check(schema: &Value) -> Result<(), Vec<String>> {
    let mut checker = Checker {
        root: schema,
        problems: Vec::new(),
        properties: 0,
        enum_values: 0,
        text: 0,
    };
    match schema {
        Value::Object(root) => {
            if root.contains_key("anyOf") {
                checker.problem("", "the root must not be `anyOf`");
            }
            if root.get("type") != Some(&Value::String("object".into())) {
                checker.problem("", "the root must be an object (`\"type\": \"object\"`)");
            }
            checker.subschema(schema, "");
            if let Some(Value::Object(defs)) = root.get("$defs") {
                checker.text += defs.keys().map(|k| k.chars().count()).sum::<usize>();
            }
            let depth = checker.depth(schema, &mut Vec::new());
            if depth > MAX_NESTING {
                checker.problem(
                    "",
                    &format!("{depth} levels of nesting exceeds limit of {MAX_NESTING}"),
                );
            }
        }
        _ => checker.problem("", "the root must be a JSON object"),
    }
    if checker.properties > MAX_PROPERTIES {
        let n = checker.properties;
        checker.problem(
            "",
            &format!("{n} object properties exceed the limit of {MAX_PROPERTIES}"),
        );
    }
    if checker.enum_values > MAX_ENUM_VALUES {
        let n = checker.enum_values;
        checker.problem(
            "",
            &format!("{n} enum values exceed the limit of {MAX_ENUM_VALUES}"),
        );
    }
    if checker.text > MAX_TEXT {
        let n = checker.text;
        checker.problem(
            "",
            &format!(
                "names, enum and const values total {n} characters, over the limit of {MAX_TEXT}"
            ),
        );
    }
    if checker.problems.is_empty() {
        Ok(())
    } else {
        Err(checker.problems)
    }
}

struct Checker<'a> {
    root: &'a Value,
    problems: Vec<String>,
    properties: usize,
    enum_values: usize,
    text: usize,
}

fn child(path: &str, segment: &str) -> String {
    format!("{path}/{}", segment.replace('~', "~0").replace('/', "~1"))
}

fn types_of(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn chars(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        other => other.to_string().chars().count(),
    }
}

impl<'a> Checker<'a> {
    fn problem(&mut self, path: &str, message: &str) {
        let at = if path.is_empty() { "/" } else { path };
        self.problems.push(format!("{at}: {message}"));
    }

    fn subschema(&mut self, schema: &Value, path: &str) {
        let Value::Object(map) = schema else {
            self.problem(path, "a subschema must be a JSON object");
            return;
        };
        for key in map.keys() {
            match key.as_str() {
                "title" => self.problem(path, "'title' is not permitted"),
                "default" => self.problem(path, "'default' is not permitted"),
                k if !SUPPORTED.contains(&k) => {
                    self.problem(path, &format!("keyword `{k}` is not supported"))
                }
                _ => {}
            }
        }
        if !["type", "enum", "const", "anyOf", "$ref"]
            .iter()
            .any(|k| map.contains_key(*k))
        {
            self.problem(path, "the subschema says nothing about its type");
        }
        let types = types_of(map);
        match map.get("type") {
            None => {}
            Some(Value::String(_)) | Some(Value::Array(_)) => {
                for t in &types {
                    if !TYPES.contains(t) {
                        self.problem(path, &format!("unknown type `{t}`"));
                    }
                }
                if let Some(Value::Array(ts)) = map.get("type") {
                    if ts.len() != types.len() || ts.is_empty() {
                        self.problem(path, "`type` must be a string or a list of strings");
                    }
                }
            }
            Some(_) => self.problem(path, "`type` must be a string or a list of strings"),
        }
        let has = |t: &str| types.is_empty() || types.contains(&t);

        if let Some(reference) = map.get("$ref") {
            if map.len() > 1 {
                let others: Vec<&String> = map.keys().filter(|k| *k != "$ref").collect();
                self.problem(
                    path,
                    &format!("`$ref` must stand alone, found {others:?} beside it"),
                );
            }
            match reference.as_str() {
                Some("#") => {}
                Some(r) => {
                    let target = r
                        .strip_prefix("#/$defs/")
                        .and_then(|name| self.root.get("$defs")?.get(name));
                    if target.is_none() {
                        self.problem(path, &format!("`$ref` `{r}` does not point into `$defs`"));
                    }
                }
                None => self.problem(path, "`$ref` must be a string"),
            }
        }

        if types.contains(&"object") || map.contains_key("properties") {
            self.object(map, path);
        }
        if let Some(items) = map.get("items") {
            if !has("array") {
                self.problem(path, "`items` on a schema that is not an array");
            }
            self.subschema(items, &child(path, "items"));
        }
        for key in ["minItems", "maxItems"] {
            if map.contains_key(key) && !has("array") {
                self.problem(path, &format!("`{key}` on a schema that is not an array"));
            }
        }
        for key in ["pattern", "format"] {
            if map.contains_key(key) && !has("string") {
                self.problem(path, &format!("`{key}` on a schema that is not a string"));
            }
        }
        if let Some(format) = map.get("format") {
            if !format.as_str().is_some_and(|f| FORMATS.contains(&f)) {
                self.problem(path, &format!("format {format} is not supported"));
            }
        }
        for key in [
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ] {
            if let Some(v) = map.get(key) {
                if !v.is_number() {
                    self.problem(path, &format!("`{key}` must be a number"));
                }
                if !has("number") && !has("integer") {
                    self.problem(path, &format!("`{key}` on a schema that is not a number"));
                }
            }
        }
        if let Some(values) = map.get("enum") {
            self.enumeration(values, &types, path);
        }
        if let Some(c) = map.get("const") {
            self.text += chars(c);
        }
        if let Some(branches) = map.get("anyOf") {
            match branches {
                Value::Array(bs) if !bs.is_empty() => {
                    for (i, b) in bs.iter().enumerate() {
                        self.subschema(b, &child(&child(path, "anyOf"), &i.to_string()));
                    }
                }
                _ => self.problem(path, "`anyOf` must be a non-empty list of schemas"),
            }
        }
        if let Some(defs) = map.get("$defs") {
            match defs {
                Value::Object(defs) => {
                    for (name, def) in defs {
                        self.subschema(def, &child(&child(path, "$defs"), name));
                    }
                }
                _ => self.problem(path, "`$defs` must be an object"),
            }
        }
        if let Some(d) = map.get("description") {
            if !d.is_string() {
                self.problem(path, "`description` must be a string");
            }
        }
    }

    fn object(&mut self, map: &Map<String, Value>, path: &str) {
        if map.get("additionalProperties") != Some(&Value::Bool(false)) {
            self.problem(
                path,
                "`additionalProperties: false` must always be set in objects",
            );
        }
        let Some(Value::Object(properties)) = map.get("properties") else {
            self.problem(path, "an object needs `properties`");
            return;
        };
        self.properties += properties.len();
        self.text += properties.keys().map(|k| k.chars().count()).sum::<usize>();
        let required: Vec<&str> = match map.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => {
                self.problem(path, "an object needs `required`");
                Vec::new()
            }
        };
        for name in properties.keys() {
            if !required.contains(&name.as_str()) {
                self.problem(path, &format!("property `{name}` is not in `required`"));
            }
        }
        for name in &required {
            if !properties.contains_key(*name) {
                self.problem(
                    path,
                    &format!("`required` lists `{name}`, which is not a property"),
                );
            }
        }
        for (name, property) in properties {
            self.subschema(property, &child(&child(path, "properties"), name));
        }
    }

    fn enumeration(&mut self, values: &Value, types: &[&str], path: &str) {
        let Value::Array(values) = values else {
            self.problem(path, "`enum` must be a list");
            return;
        };
        if values.is_empty() {
            self.problem(path, "`enum` must not be empty");
        }
        self.enum_values += values.len();
        self.text += values.iter().map(chars).sum::<usize>();
        let strings: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
        let length: usize = strings.iter().map(|s| s.chars().count()).sum();
        if strings.len() > LARGE_ENUM && length > MAX_LARGE_ENUM_CHARS {
            self.problem(
                path,
                &format!(
                    "an enum of {} string values totals {length} characters, over the limit of {MAX_LARGE_ENUM_CHARS}",
                    strings.len()
                ),
            );
        }
        if !types.is_empty() {
            for v in values {
                let fits = match v {
                    Value::Null => types.contains(&"null"),
                    Value::Bool(_) => types.contains(&"boolean"),
                    Value::String(_) => types.contains(&"string"),
                    Value::Number(n) => {
                        types.contains(&"number")
                            || (types.contains(&"integer") && (n.is_i64() || n.is_u64()))
                    }
                    Value::Array(_) => types.contains(&"array"),
                    Value::Object(_) => types.contains(&"object"),
                };
                if !fits {
                    self.problem(path, &format!("enum value {v} does not match the type"));
                }
            }
        }
    }

    /// Levels of object nesting below `schema` (following `$ref`s, not recursion).
    fn depth(&self, schema: &'a Value, refs: &mut Vec<&'a str>) -> usize {
        let Value::Object(map) = schema else {
            return 0;
        };
        let mut deepest = 0;
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            if !refs.contains(&r) {
                let target = if r == "#" {
                    Some(self.root)
                } else {
                    r.strip_prefix("#/$defs/")
                        .and_then(|name| self.root.get("$defs")?.get(name))
                };
                if let Some(target) = target {
                    refs.push(r);
                    deepest = self.depth(target, refs);
                    refs.pop();
                }
            }
        }
        let mut children: Vec<&'a Value> = Vec::new();
        if let Some(Value::Object(p)) = map.get("properties") {
            children.extend(p.values());
        }
        if let Some(items) = map.get("items") {
            children.push(items);
        }
        if let Some(Value::Array(bs)) = map.get("anyOf") {
            children.extend(bs);
        }
        for c in children {
            deepest = deepest.max(self.depth(c, refs));
        }
        let is_object = types_of(map).contains(&"object") || map.contains_key("properties");
        deepest + usize::from(is_object)
    }
}
