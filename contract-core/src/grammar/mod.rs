//! `C::grammar()`: the contract's token-mask spec, rendered from the IR.
//!
//! A [`Grammar`] has two halves:
//!
//! - a JSON Schema in the subset llguidance's JSON compiler accepts ([`Grammar::schema`]): keys in
//!   declaration order, every key required, no extra keys, numeric bounds kept (llama.cpp drops
//!   them), enums, patterns, formats as exact regular expressions, nested objects and lists, and
//!   the whitespace layout in `x-guidance`;
//! - the shapes of every object with its cross-field rules ([`Grammar::objects`]), which no JSON
//!   Schema can carry; the local backend's value filter enforces them while decoding.
//!
//! It is plain data (serde), so a grammar can be stored, diffed and sent to another process.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Number, Value};

use crate::contract::{
    CmpOp, Constraints, ContractSpec, Format, Grounding, Rule, SpecKind, TypeSpec,
};
use crate::schema::bounds::{integer_lower, integer_upper};

pub mod grounded;
#[cfg(test)]
mod tests;

/// The whitespace the mask lets a model write between JSON tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Whitespace {
    /// None at all: `{"a":1,"b":2}`. Fastest, but pushes small models off their habits.
    Compact,
    /// Any JSON whitespace the model likes (spaces, newlines and indentation), at most `max`
    /// characters between two tokens, so a model cannot pad until its token limit.
    Bounded {
        /// The most whitespace characters in one gap.
        max: usize,
    },
}

impl Whitespace {
    /// The default layout: bounded, the model's own layout with at most 24 characters a gap.
    ///
    /// Settled by the filings study (40 releases, SmolLM2-135M, `docs/benchmarks.md`): both
    /// layouts gave 40/40 valid and 0/40 correct; bounded named the right period in 2, compact
    /// in 1. Compact was faster (2.3 against 3.0 s and 53 against 93 forward calls per document),
    /// but earlier measurements here saw it push Qwen-0.5B off its habits, so accuracy keeps the
    /// bounded layout; [`Whitespace::Compact`] is one option away.
    pub const DEFAULT: Whitespace = Whitespace::Bounded { max: 24 };

    /// The `x-guidance` options that select this layout in llguidance's JSON compiler.
    pub fn x_guidance(self) -> Value {
        match self {
            Whitespace::Compact => json!({"whitespace_flexible": false}),
            Whitespace::Bounded { max } => json!({
                "whitespace_flexible": false,
                "whitespace_pattern": format!("[\\x20\\x0A\\x0D\\x09]{{1,{}}}", max.max(1)),
            }),
        }
    }
}

impl Default for Whitespace {
    fn default() -> Self {
        Whitespace::DEFAULT
    }
}

/// How a [`Grammar`] is rendered: layout, and the caps put on strings and lists whose contract
/// sets no `max_len` (so every constrained output is bounded in length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrammarOptions {
    /// Whitespace between tokens.
    pub whitespace: Whitespace,
    /// Longest string, in characters, where the contract sets no `max_len` (`None`: unbounded).
    pub max_string_len: Option<u64>,
    /// Most list items, where the contract sets no `max_len` (`None`: unbounded).
    pub max_items: Option<u64>,
}

impl Default for GrammarOptions {
    fn default() -> Self {
        GrammarOptions {
            whitespace: Whitespace::DEFAULT,
            max_string_len: Some(1000),
            max_items: Some(100),
        }
    }
}

/// A contract's token-mask spec: JSON Schema for the syntax mask plus the shapes and
/// cross-field rules for the value filter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grammar {
    /// The root contract's name.
    pub name: String,
    /// How it was rendered.
    pub options: GrammarOptions,
    /// The root value.
    pub root: Shape,
    /// Every object contract reachable from the root, each once; [`Shape::Object`] indexes it.
    pub objects: Vec<ObjectShape>,
}

/// One object contract: fields in the order they are generated, and its rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectShape {
    /// The contract's name.
    pub name: String,
    /// Fields in declaration order (the order keys are generated in); all required.
    pub fields: Vec<FieldShape>,
    /// Cross-field rules among the fields.
    pub rules: Vec<GrammarRule>,
    /// JSON pointers where the object occurs in an output, `*` standing for any list index
    /// (`/premium/evidence/*`); a recursive contract lists each path up to the first repeat.
    pub paths: Vec<String>,
}

/// One field of an [`ObjectShape`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldShape {
    /// The JSON key.
    pub name: String,
    /// The value's shape.
    pub shape: Shape,
    /// Where the value (each value inside an `Option` or a list) must be copied from; the
    /// local backend composes the mask per document from it ([`grounded`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounded: Option<Grounding>,
}

/// The values a position in the output may hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Shape {
    /// `true` or `false`.
    Bool,
    /// An integer in `min..=max` (written without fraction or exponent).
    Integer {
        /// Smallest value (a decimal string when serialised: JSON numbers stop at 64 bits).
        #[serde(with = "int_text")]
        min: i128,
        /// Largest value (likewise).
        #[serde(with = "int_text")]
        max: i128,
    },
    /// A finite JSON number within the bounds set.
    Number {
        /// `value >= minimum`.
        minimum: Option<Number>,
        /// `value > exclusive_minimum`.
        exclusive_minimum: Option<Number>,
        /// `value <= maximum`.
        maximum: Option<Number>,
        /// `value < exclusive_maximum`.
        exclusive_maximum: Option<Number>,
    },
    /// A string.
    String {
        /// Fewest characters.
        min_len: Option<u64>,
        /// Most characters (the contract's `max_len`, else [`GrammarOptions::max_string_len`]).
        max_len: Option<u64>,
        /// Regular expressions the string must contain a match of (the contract's `pattern`,
        /// and the exact expression of its `format` where one is known).
        patterns: Vec<String>,
        /// A format passed to llguidance by name (those without an exact expression here).
        format: Option<String>,
    },
    /// One of a fixed set of JSON values (`one_of`, enum contracts).
    Enum {
        /// The values.
        values: Vec<Value>,
    },
    /// `null` or the inner shape.
    Nullable {
        /// The shape when not null.
        inner: Box<Shape>,
    },
    /// A JSON array.
    List {
        /// Every item's shape.
        items: Box<Shape>,
        /// Fewest items.
        min_items: Option<u64>,
        /// Most items.
        max_items: Option<u64>,
    },
    /// An object contract: an index into [`Grammar::objects`].
    Object {
        /// The index.
        index: usize,
    },
    /// A schemars type used through its own schema; the value filter does not look inside.
    External {
        /// Its schema (its definitions moved into the grammar's `$defs`).
        schema: Value,
    },
}

/// `i128` as a decimal string (serde_json reads no `i128` inside tagged enums).
mod int_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &i128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i128, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Shape {
    /// The shape with `Nullable` peeled off, and whether it was there.
    pub fn strip_nullable(&self) -> (&Shape, bool) {
        match self {
            Shape::Nullable { inner } => (inner.strip_nullable().0, true),
            other => (other, false),
        }
    }
}

/// A cross-field rule as the grammar carries it (serialisable form of [`Rule`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum GrammarRule {
    /// `left op right`; holds when either side is null.
    Compare {
        /// Left field.
        left: String,
        /// `<`, `<=`, `>`, `>=`, `==` or `!=`.
        op: String,
        /// Right field.
        right: String,
    },
    /// All of the fields are null, or none is.
    BothOrNeither {
        /// The fields.
        fields: Vec<String>,
    },
    /// At least one of the fields is not null.
    AtLeastOne {
        /// The fields.
        fields: Vec<String>,
    },
}

impl From<&Rule> for GrammarRule {
    fn from(rule: &Rule) -> Self {
        match rule {
            Rule::Compare { left, op, right } => GrammarRule::Compare {
                left: left.clone(),
                op: op.as_str().to_owned(),
                right: right.clone(),
            },
            Rule::BothOrNeither(fields) => GrammarRule::BothOrNeither {
                fields: fields.clone(),
            },
            Rule::AtLeastOne(fields) => GrammarRule::AtLeastOne {
                fields: fields.clone(),
            },
        }
    }
}

impl GrammarRule {
    /// The IR rule (`None` for an unknown operator in a hand-edited grammar).
    pub fn to_rule(&self) -> Option<Rule> {
        Some(match self {
            GrammarRule::Compare { left, op, right } => Rule::Compare {
                left: left.clone(),
                op: CmpOp::parse(op)?,
                right: right.clone(),
            },
            GrammarRule::BothOrNeither { fields } => Rule::BothOrNeither(fields.clone()),
            GrammarRule::AtLeastOne { fields } => Rule::AtLeastOne(fields.clone()),
        })
    }
}

impl Grammar {
    /// The grammar of `spec` with the default options.
    pub fn of(spec: &'static ContractSpec) -> Grammar {
        Grammar::with_options(spec, GrammarOptions::default())
    }

    /// The grammar of `spec` rendered with `options`.
    pub fn with_options(spec: &'static ContractSpec, options: GrammarOptions) -> Grammar {
        let mut builder = Builder {
            options,
            objects: Vec::new(),
            index: HashMap::new(),
        };
        let root = builder.contract(spec);
        let mut grammar = Grammar {
            name: spec.name.clone(),
            options,
            root,
            objects: builder.objects,
        };
        grammar.fill_paths();
        grammar
    }

    /// The same grammar with another whitespace layout.
    pub fn with_whitespace(mut self, whitespace: Whitespace) -> Grammar {
        self.options.whitespace = whitespace;
        self
    }

    /// The JSON Schema llguidance compiles (with the layout in `x-guidance`): every object
    /// contract in `$defs`, the root a `$ref` to it.
    pub fn schema(&self) -> Value {
        let mut defs = Map::new();
        for (i, object) in self.objects.iter().enumerate() {
            let mut properties = Map::new();
            for field in &object.fields {
                properties.insert(
                    field.name.clone(),
                    shape_schema(&field.shape, &self.objects, &mut defs),
                );
            }
            let required: Vec<Value> = object
                .fields
                .iter()
                .map(|f| Value::String(f.name.clone()))
                .collect();
            defs.insert(
                def_name(i, &object.name),
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                }),
            );
        }
        let mut root = match shape_schema(&self.root, &self.objects, &mut defs) {
            Value::Object(map) => map,
            other => {
                let mut map = Map::new();
                map.insert("allOf".into(), json!([other]));
                map
            }
        };
        root.insert("x-guidance".into(), self.options.whitespace.x_guidance());
        if !defs.is_empty() {
            root.insert("$defs".into(), Value::Object(defs));
        }
        Value::Object(root)
    }

    /// llguidance's `TopLevelGrammar` in its JSON form (`{"grammars": [{"json_schema": ..}]}`).
    pub fn llguidance_json(&self) -> Value {
        json!({
            "grammars": [{"name": self.name, "json_schema": self.schema()}],
            "max_tokens": null,
        })
    }

    /// The same grammar in llguidance's Lark syntax (`start: %json{..}`).
    pub fn lark(&self) -> String {
        format!("start: %json {}", self.schema())
    }

    /// Every object that has cross-field rules, with the JSON pointers it occurs at.
    pub fn rules(&self) -> Vec<(&[String], &[GrammarRule])> {
        self.objects
            .iter()
            .filter(|o| !o.rules.is_empty())
            .map(|o| (o.paths.as_slice(), o.rules.as_slice()))
            .collect()
    }

    /// Whether any object has a cross-field rule.
    pub fn has_rules(&self) -> bool {
        self.objects.iter().any(|o| !o.rules.is_empty())
    }

    fn fill_paths(&mut self) {
        let mut paths: Vec<Vec<String>> = vec![Vec::new(); self.objects.len()];
        let mut stack = Vec::new();
        walk_paths(
            &self.root,
            String::new(),
            &self.objects,
            &mut stack,
            &mut paths,
        );
        for (object, p) in self.objects.iter_mut().zip(paths) {
            object.paths = p;
        }
    }
}

fn walk_paths(
    shape: &Shape,
    path: String,
    objects: &[ObjectShape],
    stack: &mut Vec<usize>,
    out: &mut [Vec<String>],
) {
    match shape {
        Shape::Nullable { inner } => walk_paths(inner, path, objects, stack, out),
        Shape::List { items, .. } => walk_paths(items, format!("{path}/*"), objects, stack, out),
        Shape::Object { index } => {
            if out[*index].len() < 64 {
                out[*index].push(path.clone());
            }
            if stack.contains(index) {
                return;
            }
            stack.push(*index);
            for field in &objects[*index].fields {
                let child = crate::validate::join_pointer(&path, &field.name);
                walk_paths(&field.shape, child, objects, stack, out);
            }
            stack.pop();
        }
        _ => {}
    }
}

fn def_name(index: usize, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("o{index}_{clean}")
}

struct Builder {
    options: GrammarOptions,
    objects: Vec<ObjectShape>,
    index: HashMap<*const ContractSpec, usize>,
}

impl Builder {
    fn contract(&mut self, spec: &'static ContractSpec) -> Shape {
        match &spec.kind {
            SpecKind::Enum(e) => Shape::Enum {
                values: e
                    .variants
                    .iter()
                    .map(|v| Value::String(v.name.clone()))
                    .collect(),
            },
            SpecKind::Object(object) => {
                let key = spec as *const ContractSpec;
                if let Some(&index) = self.index.get(&key) {
                    return Shape::Object { index };
                }
                let index = self.objects.len();
                self.index.insert(key, index);
                self.objects.push(ObjectShape {
                    name: spec.name.clone(),
                    fields: Vec::new(),
                    rules: object.rules.iter().map(GrammarRule::from).collect(),
                    paths: Vec::new(),
                });
                let fields = object
                    .fields
                    .iter()
                    .map(|f| FieldShape {
                        name: f.name.clone(),
                        shape: self.ty(&f.ty, &f.constraints),
                        grounded: f.constraints.grounded.clone(),
                    })
                    .collect();
                self.objects[index].fields = fields;
                Shape::Object { index }
            }
        }
    }

    fn ty(&mut self, ty: &TypeSpec, c: &Constraints) -> Shape {
        if let Some(values) = &c.one_of {
            if !matches!(ty, TypeSpec::Nullable(_) | TypeSpec::List(_)) {
                return Shape::Enum {
                    values: values.clone(),
                };
            }
        }
        match ty {
            TypeSpec::Bool => Shape::Bool,
            TypeSpec::Integer { min, max } => Shape::Integer {
                min: integer_lower(*min, c).0,
                max: integer_upper(*max, c).0,
            },
            TypeSpec::Number => Shape::Number {
                minimum: c.minimum.clone(),
                exclusive_minimum: c.exclusive_minimum.clone(),
                maximum: c.maximum.clone(),
                exclusive_maximum: c.exclusive_maximum.clone(),
            },
            TypeSpec::String => {
                let mut patterns = Vec::new();
                if let Some(p) = &c.pattern {
                    patterns.push(p.as_str().to_owned());
                }
                let mut format = None;
                if let Some(f) = c.format {
                    match format_regex(f) {
                        Some(rx) => patterns.push(format!("^(?:{rx})$")),
                        None => format = Some(f.as_str().to_owned()),
                    }
                }
                let max_len = match (c.max_len, self.options.max_string_len) {
                    (Some(m), _) => Some(m),
                    (None, Some(cap)) => Some(cap.max(c.min_len.unwrap_or(0))),
                    (None, None) => None,
                };
                Shape::String {
                    min_len: c.min_len,
                    max_len,
                    patterns,
                    format,
                }
            }
            TypeSpec::Nullable(inner) => Shape::Nullable {
                inner: Box::new(self.ty(inner, c)),
            },
            TypeSpec::List(item) => {
                let item_constraints = c.for_items();
                let max_items = match (c.max_len, self.options.max_items) {
                    (Some(m), _) => Some(m),
                    (None, Some(cap)) => Some(cap.max(c.min_len.unwrap_or(0))),
                    (None, None) => None,
                };
                Shape::List {
                    items: Box::new(self.ty(item, &item_constraints)),
                    min_items: c.min_len,
                    max_items,
                }
            }
            TypeSpec::Contract(r) => self.contract(r.spec()),
            TypeSpec::External(r) => Shape::External {
                schema: r.standalone_schema(),
            },
            #[allow(unreachable_patterns)]
            _ => Shape::External { schema: json!({}) },
        }
    }
}

/// Largest magnitude a JSON number converts to an `f64` without rounding: integer bounds beyond
/// it are left to the value filter, since llguidance reads bounds as `f64`.
const EXACT_INT: i128 = 1 << 53;

pub(crate) fn shape_schema(
    shape: &Shape,
    objects: &[ObjectShape],
    defs: &mut Map<String, Value>,
) -> Value {
    match shape {
        Shape::Bool => json!({"type": "boolean"}),
        Shape::Integer { min, max } => {
            let mut map = Map::new();
            map.insert("type".into(), "integer".into());
            if min.abs() <= EXACT_INT {
                map.insert("minimum".into(), json!(*min as i64));
            }
            if max.abs() <= EXACT_INT {
                map.insert("maximum".into(), json!(*max as i64));
            }
            Value::Object(map)
        }
        Shape::Number {
            minimum,
            exclusive_minimum,
            maximum,
            exclusive_maximum,
        } => {
            let mut map = Map::new();
            map.insert("type".into(), "number".into());
            for (key, bound) in [
                ("minimum", minimum),
                ("exclusiveMinimum", exclusive_minimum),
                ("maximum", maximum),
                ("exclusiveMaximum", exclusive_maximum),
            ] {
                if let Some(n) = bound {
                    map.insert(key.into(), Value::Number(n.clone()));
                }
            }
            Value::Object(map)
        }
        Shape::String {
            min_len,
            max_len,
            patterns,
            format,
        } => {
            let mut map = Map::new();
            map.insert("type".into(), "string".into());
            if let Some(n) = min_len {
                map.insert("minLength".into(), json!(n));
            }
            if let Some(n) = max_len {
                map.insert("maxLength".into(), json!(n));
            }
            if let Some(f) = format {
                map.insert("format".into(), json!(f));
            }
            match patterns.as_slice() {
                [] => {}
                [one] => {
                    map.insert("pattern".into(), json!(one));
                }
                many => {
                    let all: Vec<Value> = many.iter().map(|p| json!({"pattern": p})).collect();
                    map.insert("allOf".into(), Value::Array(all));
                }
            }
            Value::Object(map)
        }
        Shape::Enum { values } => json!({"enum": values}),
        Shape::Nullable { inner } => match &**inner {
            Shape::Enum { values } => {
                let mut values = values.clone();
                if !values.contains(&Value::Null) {
                    values.push(Value::Null);
                }
                json!({"enum": values})
            }
            other => json!({"anyOf": [shape_schema(other, objects, defs), {"type": "null"}]}),
        },
        Shape::List {
            items,
            min_items,
            max_items,
        } => {
            let mut map = Map::new();
            map.insert("type".into(), "array".into());
            map.insert("items".into(), shape_schema(items, objects, defs));
            if let Some(n) = min_items {
                map.insert("minItems".into(), json!(n));
            }
            if let Some(n) = max_items {
                map.insert("maxItems".into(), json!(n));
            }
            Value::Object(map)
        }
        Shape::Object { index } => {
            json!({"$ref": format!("#/$defs/{}", def_name(*index, &objects[*index].name))})
        }
        Shape::External { schema } => external_schema(schema, defs),
    }
}

/// Moves an external type's `$defs` into the grammar's, renaming them apart.
fn external_schema(schema: &Value, defs: &mut Map<String, Value>) -> Value {
    let mut schema = schema.clone();
    let n = defs.keys().filter(|k| k.starts_with('x')).count();
    let prefix = format!("x{n}_");
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
        if let Some(Value::Object(own)) = map.remove("$defs") {
            for (name, mut def) in own {
                rename_refs(&mut def, &prefix);
                defs.insert(format!("{prefix}{name}"), def);
            }
        }
    }
    rename_refs(&mut schema, &prefix);
    schema
}

fn rename_refs(value: &mut Value, prefix: &str) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "$ref" {
                    if let Value::String(r) = v {
                        if let Some(name) = r.strip_prefix("#/$defs/") {
                            *r = format!("#/$defs/{prefix}{name}");
                        }
                    }
                } else {
                    rename_refs(v, prefix);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, prefix)),
        _ => {}
    }
}

/// An exact regular expression for the formats whose llguidance built-in accepts values the
/// validator rejects (`2023-02-29`, leap seconds at the wrong time).
pub fn format_regex(format: Format) -> Option<&'static str> {
    const DATE: &str = concat!(
        "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",
        "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)",
        "|02-(?:0[1-9]|1[0-9]|2[0-8]))",
        "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00|0000)-02-29)"
    );
    const TIME: &str = concat!(
        "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?",
        "(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    );
    const DATE_TIME: &str = concat!(
        "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",
        "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)",
        "|02-(?:0[1-9]|1[0-9]|2[0-8]))",
        "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00|0000)-02-29)",
        "[tT]",
        "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?",
        "(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    );
    match format {
        Format::Date => Some(DATE),
        Format::Time => Some(TIME),
        Format::DateTime => Some(DATE_TIME),
        Format::Uuid => {
            Some("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
        }
        _ => None,
    }
}
