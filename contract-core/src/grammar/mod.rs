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
use serde_json::{json, Map, Value};

use crate::attrs::{Form, Format, Grounding, Rule};
use crate::ir::ContractSpec;
use crate::ir::{Document, JsonType, Node, NumberBounds, ObjectNode, Structure, Target};

pub mod lark;
#[cfg(test)]
mod tests;
pub mod think;

pub use think::Think;

/// The `format`s llguidance's mask enforces (others are left to the validator, and a runtime
/// contract lists them in [`DynContract::gaps`](crate::DynContract::gaps) as missing from the
/// grammar).
pub const GRAMMAR_FORMATS: [&str; 10] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
];

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
    /// The JSON Schema the syntax mask is compiled from when it is not the shapes' own
    /// ([`schema`](Self::schema) returns it): a runtime contract whose schema the shapes do not
    /// carry without loss, whose shapes then hold only what its root's rules read, for the
    /// local backend's value filter (`dynamic::typed`, [`Grammar::rules_over_schema`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_schema: Option<Value>,
}

/// One object contract: fields in the order they are generated, and its rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectShape {
    /// The contract's name.
    pub name: String,
    /// Fields in declaration order (the order keys are generated in); all required.
    pub fields: Vec<FieldShape>,
    /// Cross-field rules among the fields.
    pub rules: Vec<Rule>,
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
    /// local backend composes the mask per document from it ([`lark`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounded: Option<Grounding>,
    /// The kind of expression a grounded string value is ([`Form`]): under a grounded mask it
    /// is one of the expressions of that kind its text writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Form>,
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
        /// The bounds (serialised as four keys beside `type`).
        #[serde(flatten)]
        bounds: NumberBounds,
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

impl Grammar {
    /// The grammar of `spec` with the default options.
    pub fn of(spec: &ContractSpec) -> Grammar {
        Grammar::with_options(spec, GrammarOptions::default())
    }

    /// The grammar of `spec` rendered with `options`.
    pub fn with_options(spec: &ContractSpec, options: GrammarOptions) -> Grammar {
        Grammar::build(spec, options, None)
    }

    /// [`Grammar::with_options`], with the inline objects `inline` picks lowered to objects of
    /// their own (the others are any value).
    fn build(
        spec: &ContractSpec,
        options: GrammarOptions,
        inline: Option<fn(&Node) -> bool>,
    ) -> Grammar {
        let mut builder = Builder {
            options,
            objects: Vec::new(),
            index: HashMap::new(),
            inline,
        };
        let root = builder.contract(spec);
        let mut grammar = Grammar {
            name: spec.name.clone(),
            options,
            root,
            objects: builder.objects,
            mask_schema: None,
        };
        grammar.fill_paths();
        grammar
    }

    /// The same grammar with another whitespace layout.
    pub fn with_whitespace(mut self, whitespace: Whitespace) -> Grammar {
        self.options.whitespace = whitespace;
        self
    }

    /// A runtime contract's own JSON Schema `schema` as the syntax mask, with the value filter
    /// holding its rules over it: the shapes of `spec` (the contract's root, value types
    /// adopted; no default caps on strings and lists) with every field no rule of its object
    /// names made any value (the filter does not look inside), so that the filter refuses
    /// nothing but what breaks a rule. The inline objects below the root that `inline_rules`
    /// picks keep their shape, each an object of the grammar with its own rules, treated the
    /// same way; any other inline object is any value. Sound only when the schema constrains
    /// each field a rule names no more than its shape says (`dynamic::typed` decides, and
    /// picks the inline objects; otherwise the filter could leave a partner no value the
    /// schema allows).
    pub fn rules_over_schema(
        spec: &ContractSpec,
        schema: Value,
        inline_rules: fn(&Node) -> bool,
    ) -> Grammar {
        // No default caps on strings and lists: the shapes say what the schema says, no more.
        let options = GrammarOptions {
            max_string_len: None,
            max_items: None,
            ..GrammarOptions::default()
        };
        let mut grammar = Grammar::build(spec, options, Some(inline_rules));
        for object in &mut grammar.objects {
            let named: Vec<String> = object
                .rules
                .iter()
                .flat_map(|r| r.fields().into_iter().cloned())
                .collect();
            for field in object.fields.iter_mut() {
                let inline = matches!(field.shape.strip_nullable().0, Shape::Object { .. });
                if !inline && !named.contains(&field.name) {
                    field.shape = Shape::External { schema: json!({}) };
                }
            }
        }
        grammar.mask_schema = Some(schema);
        grammar
    }

    /// The JSON Schema llguidance compiles (with the layout in `x-guidance`): every object
    /// contract in `$defs`, the root a `$ref` to it; or the schema a runtime contract's mask is
    /// compiled from ([`mask_schema`](Self::mask_schema)).
    pub fn schema(&self) -> Value {
        if let Some(schema) = &self.mask_schema {
            return schema.clone();
        }
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
    pub fn rules(&self) -> Vec<(&[String], &[Rule])> {
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
    /// Which inline objects (below the root, not contracts of their own) become objects of the
    /// grammar; `None`: none, they are any value.
    inline: Option<fn(&Node) -> bool>,
}

impl Builder {
    fn contract(&mut self, spec: &ContractSpec) -> Shape {
        let Some(object) = spec.object() else {
            return Shape::Enum {
                values: spec.variants().map(<[Value]>::to_vec).unwrap_or_default(),
            };
        };
        let key = spec as *const ContractSpec;
        if let Some(&index) = self.index.get(&key) {
            return Shape::Object { index };
        }
        self.index.insert(key, self.objects.len());
        self.object(&spec.name, object)
    }

    /// A new object of the grammar for `object`, its fields' shapes built.
    fn object(&mut self, name: &str, object: &ObjectNode) -> Shape {
        let index = self.objects.len();
        self.objects.push(ObjectShape {
            name: name.to_owned(),
            fields: Vec::new(),
            rules: object.rules.clone(),
            paths: Vec::new(),
        });
        let fields = object
            .properties
            .iter()
            .map(|f| FieldShape {
                name: f.name.clone(),
                shape: self.shape(&f.node),
                grounded: f.node.grounded.clone(),
                form: f.node.form,
            })
            .collect();
        self.objects[index].fields = fields;
        Shape::Object { index }
    }

    /// The shape of a derived value node.
    fn shape(&mut self, node: &Node) -> Shape {
        if node.is_nullable() {
            let inner = match node.non_null() {
                same if std::ptr::eq(same, node) => self.shape_of_type(node),
                inner => self.shape(inner),
            };
            return Shape::Nullable {
                inner: Box::new(inner),
            };
        }
        self.shape_of_type(node)
    }

    /// The shape of `node`'s own (non-null) type.
    fn shape_of_type(&mut self, node: &Node) -> Shape {
        if let Some(r) = &node.external {
            return Shape::External {
                schema: r.standalone_schema(),
            };
        }
        if let Some(spec) = node.contract() {
            return self.contract(spec);
        }
        if let (Some(object), Some(keep)) = (node.object.as_deref(), self.inline) {
            if keep(node) {
                return self.object("inline", object);
            }
        }
        if let Some(values) = &node.enumeration {
            let values = values.iter().filter(|v| !v.is_null()).cloned().collect();
            if node.array.is_none() {
                return Shape::Enum { values };
            }
        }
        let n = &node.number;
        let s = &node.string;
        match node.value_types().next() {
            Some(JsonType::Boolean) => Shape::Bool,
            Some(JsonType::Integer) => {
                let (min, max) = n.integer_type.unwrap_or((i128::MIN, i128::MAX));
                Shape::Integer {
                    min: n.bounds.integer_lower(min).0,
                    max: n.bounds.integer_upper(max).0,
                }
            }
            Some(JsonType::Number) => Shape::Number {
                bounds: n.bounds.clone(),
            },
            Some(JsonType::String) => {
                let mut patterns = Vec::new();
                if let Some(p) = &s.pattern {
                    patterns.push(p.as_str().to_owned());
                }
                let mut format = None;
                if let Some(name) = &s.format {
                    match Format::from_name(name).and_then(format_regex) {
                        Some(rx) => patterns.push(format!("^(?:{rx})$")),
                        None => format = Some(name.clone()),
                    }
                }
                let max_len = match (s.max_length, self.options.max_string_len) {
                    (Some(m), _) => Some(m),
                    (None, Some(cap)) => Some(cap.max(s.min_length.unwrap_or(0))),
                    (None, None) => None,
                };
                Shape::String {
                    min_len: s.min_length,
                    max_len,
                    patterns,
                    format,
                }
            }
            Some(JsonType::Array) => {
                let a = node.array.as_deref().cloned().unwrap_or_default();
                let max_items = match (a.max_items, self.options.max_items) {
                    (Some(m), _) => Some(m),
                    (None, Some(cap)) => Some(cap.max(a.min_items.unwrap_or(0))),
                    (None, None) => None,
                };
                let items = match &a.items {
                    Some(items) => self.shape(items),
                    None => Shape::External { schema: json!({}) },
                };
                Shape::List {
                    items: Box::new(items),
                    min_items: a.min_items,
                    max_items,
                }
            }
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
            // `unsigned_abs`: an integer with no lower bound has `i128::MIN`, whose `abs`
            // overflows (a release build wrapped it and wrote `"minimum": 0`).
            if min.unsigned_abs() <= EXACT_INT.unsigned_abs() {
                map.insert("minimum".into(), json!(*min as i64));
            }
            if max.unsigned_abs() <= EXACT_INT.unsigned_abs() {
                map.insert("maximum".into(), json!(*max as i64));
            }
            Value::Object(map)
        }
        Shape::Number { bounds } => {
            let mut map = Map::new();
            map.insert("type".into(), "number".into());
            for (key, bound) in [
                ("minimum", &bounds.minimum),
                ("exclusiveMinimum", &bounds.exclusive_minimum),
                ("maximum", &bounds.maximum),
                ("exclusiveMaximum", &bounds.exclusive_maximum),
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

/// The JSON Schema llguidance compiles for a runtime schema document
/// ([`DynContract::grammar`](crate::DynContract::grammar)): every node in llguidance's dialect,
/// reference targets in `$defs` (`d1`, `d2`, ..; `#` for the root), the layout and the options
/// in `x-guidance`. Left out, since llguidance does not enforce them (the validator does): the
/// keywords the IR keeps as written (`not`, `if`, ...), dynamic references, `uniqueItems`,
/// `format`s it does not know, and `minProperties` / `maxProperties` on an object with optional
/// properties (llguidance closes such objects too early); a reference the renderings cannot
/// follow accepts any value.
pub(crate) fn document_schema(doc: &Document, whitespace: Whitespace) -> Value {
    let mut options = whitespace.x_guidance();
    if let Value::Object(o) = &mut options {
        o.insert("coerce_one_of".into(), true.into());
        o.insert("lenient".into(), true.into());
    }
    let mut root = match llguidance_node(doc.root()) {
        Value::Object(map) => map,
        // `true` (any value) or `false` (none).
        Value::Bool(false) => {
            let mut map = Map::new();
            map.insert("not".into(), json!({}));
            map
        }
        _ => Map::new(),
    };
    if doc.nodes.len() > 1 {
        let defs: Map<String, Value> = doc
            .nodes
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, node)| (format!("d{i}"), llguidance_node(node)))
            .collect();
        root.insert("$defs".into(), Value::Object(defs));
    }
    root.insert("x-guidance".into(), options);
    Value::Object(root)
}

/// One node in llguidance's JSON Schema dialect.
fn llguidance_node(node: &Node) -> Value {
    if let Some(b) = node.boolean {
        return Value::Bool(b);
    }
    let mut map = Map::new();
    match node.types.as_slice() {
        [] => {}
        [one] => {
            map.insert("type".into(), one.as_str().into());
        }
        many => {
            let names: Vec<Value> = many.iter().map(|t| t.as_str().into()).collect();
            map.insert("type".into(), names.into());
        }
    }
    if let Some(values) = &node.enumeration {
        map.insert("enum".into(), values.clone().into());
    }
    if let Some(value) = &node.constant {
        map.insert("const".into(), value.clone());
    }
    // llguidance writes the properties of an intersection (`properties` beside `$ref`, `allOf`,
    // `anyOf`, `oneOf`) in the order it meets them: the order the schema wrote them in.
    let unwritten = Structure::DEFAULT_ORDER
        .into_iter()
        .filter(|p| !node.structure.contains(p));
    for part in node.structure.iter().copied().chain(unwritten) {
        write_part(part, node, &mut map);
    }
    let n = &node.number;
    for (key, bound) in [
        ("minimum", &n.bounds.minimum),
        ("maximum", &n.bounds.maximum),
        ("exclusiveMinimum", &n.bounds.exclusive_minimum),
        ("exclusiveMaximum", &n.bounds.exclusive_maximum),
        ("multipleOf", &n.multiple_of),
    ] {
        if let Some(v) = bound {
            map.insert(key.into(), Value::Number(v.clone()));
        }
    }
    let s = &node.string;
    if let Some(v) = s.min_length {
        map.insert("minLength".into(), v.into());
    }
    if let Some(v) = s.max_length {
        map.insert("maxLength".into(), v.into());
    }
    if let Some(p) = &s.pattern {
        map.insert("pattern".into(), p.as_str().into());
    }
    if let Some(f) = s.format.as_deref().filter(|f| GRAMMAR_FORMATS.contains(f)) {
        map.insert("format".into(), f.into());
    }
    if let Some(a) = node.array.as_deref() {
        if let Some(prefix) = &a.prefix_items {
            map.insert("prefixItems".into(), list(prefix));
        }
        if let Some(items) = &a.items {
            map.insert("items".into(), llguidance_node(items));
        }
        if let Some(v) = a.min_items {
            map.insert("minItems".into(), v.into());
        }
        if let Some(v) = a.max_items {
            map.insert("maxItems".into(), v.into());
        }
    }
    Value::Object(map)
}

fn list(nodes: &[Node]) -> Value {
    Value::Array(nodes.iter().map(llguidance_node).collect())
}

/// Writes one of the keywords whose order llguidance reads.
fn write_part(part: Structure, node: &Node, map: &mut Map<String, Value>) {
    match part {
        Structure::Ref => {
            if let Some(target) = node.reference.as_ref().and_then(|r| r.target.as_ref()) {
                let pointer = match target {
                    Target::Def(0) => "#".to_owned(),
                    Target::Def(i) => format!("#/$defs/d{i}"),
                    Target::Contract(c) => format!("#/$defs/{}", c.spec().name),
                };
                map.insert("$ref".into(), pointer.into());
            }
        }
        Structure::AllOf | Structure::AnyOf | Structure::OneOf => {
            let (key, branches) = match part {
                Structure::AllOf => ("allOf", &node.all_of),
                Structure::AnyOf => ("anyOf", &node.any_of),
                _ => ("oneOf", &node.one_of),
            };
            if let Some(branches) = branches {
                map.insert(key.into(), list(branches));
            }
        }
        Structure::Properties => {
            let Some(o) = node.object.as_deref() else {
                return;
            };
            if !o.properties.is_empty() {
                let properties: Map<String, Value> = o
                    .properties
                    .iter()
                    .map(|f| (f.name.clone(), llguidance_node(&f.node)))
                    .collect();
                map.insert("properties".into(), properties.into());
            }
            if !o.required.is_empty() {
                map.insert("required".into(), o.required.clone().into());
            }
            if !o.pattern_properties.is_empty() {
                let patterns: Map<String, Value> = o
                    .pattern_properties
                    .iter()
                    .map(|(p, n)| (p.clone(), llguidance_node(n)))
                    .collect();
                map.insert("patternProperties".into(), patterns.into());
            }
            if let Some(extra) = &o.additional_properties {
                map.insert("additionalProperties".into(), llguidance_node(extra));
            }
            // llguidance bounds an object's key count only when every listed property is
            // required (otherwise it closes the object too early).
            if o.properties.iter().all(|f| o.is_required(&f.name)) {
                if let Some(v) = o.min_properties {
                    map.insert("minProperties".into(), v.into());
                }
                if let Some(v) = o.max_properties {
                    map.insert("maxProperties".into(), v.into());
                }
            }
        }
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

/// `schema` with each `format` whose llguidance built-in accepts values the validator rejects
/// written as the exact `pattern` of [`format_regex`] instead, where the subschema has no
/// `pattern` of its own (a runtime contract's JSON Schema, compiled by llguidance as it is: its
/// `"format": "date"` let a model write `9733-02-29`, which the validator refuses). Values
/// (`const`, `enum`, `default`, `examples`) are left as they are.
pub fn exact_formats(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let exact = match (map.get("format"), map.get("pattern")) {
                (Some(Value::String(name)), None) => Format::from_name(name).and_then(format_regex),
                _ => None,
            };
            if let Some(rx) = exact {
                map.remove("format");
                map.insert("pattern".into(), Value::String(format!("^(?:{rx})$")));
            }
            for (key, value) in map.iter_mut() {
                if !matches!(key.as_str(), "const" | "enum" | "default" | "examples") {
                    exact_formats(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(exact_formats),
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
