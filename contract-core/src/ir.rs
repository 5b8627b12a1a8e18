//! The intermediate representation: one schema [`Node`] per value, every constraint on the node
//! it applies to.
//!
//! A node is a typed JSON Schema: what `#[derive(Contract)]` declares ([`ContractSpec::node`],
//! built once per contract from the Rust types and the field attributes) and what
//! [`DynContract::from_schema`](crate::DynContract::from_schema) reads from a schema document
//! (a [`Document`], with what it could not carry in its gaps) are the same structure, and every
//! rendering is one function over it: the JSON Schema, the signature, the docs, the token-mask
//! grammar and the validator of a derived contract.
//!
//! A field's attributes ([`FieldAttrs`]) sit where they apply: a list's item bounds on its
//! [`ArrayNode::items`], a nullable field's bounds on the field's node beside `null` in
//! [`Node::types`], a list's length on the list. Nothing downstream has to work out where a field
//! attribute applies. A number's bounds are a [`NumberBounds`], which also says what they mean
//! (each as the comparison a value must pass, an integer's effective ends), for every reader.
//!
//! A reference ([`Ref`]) points at a nested contract (derived: [`Target::Contract`], resolved
//! lazily so recursive contracts work) or at a node of the document ([`Target::Def`]: a runtime
//! schema's `$ref` target, node 0 being the root).

use serde_json::{Number, Value};

use std::borrow::Cow;
use std::fmt;

use crate::attrs::{FieldAttrs, Form, Grounding, Pattern, Rule};
pub use crate::bounds::NumberBounds;

/// A JSON type, as `type` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonType {
    /// `null`.
    Null,
    /// `true` / `false`.
    Boolean,
    /// A number without a fraction (`3`, also `3.0`).
    Integer,
    /// Any number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonType {
    /// Every type, in the order JSON Schema lists them.
    pub const ALL: [JsonType; 7] = [
        JsonType::Null,
        JsonType::Boolean,
        JsonType::Integer,
        JsonType::Number,
        JsonType::String,
        JsonType::Array,
        JsonType::Object,
    ];

    /// The name `type` uses (`boolean`).
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }

    /// The type named `name`.
    pub fn from_name(name: &str) -> Option<JsonType> {
        JsonType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// One value's schema.
///
/// Every keyword is optional; a node with none accepts any value. Keywords a rendering does not
/// model (`not`, `if`, `dependentSchemas`, ...) are kept as written in [`Node::other`], so the
/// docs can show them; a runtime contract reports them in its gaps.
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// `Some(b)` for the boolean schemas `true` (any value) and `false` (none).
    pub boolean: Option<bool>,
    /// `title`.
    pub title: Option<String>,
    /// `description`: a field's doc comment, a contract's description.
    pub description: Option<String>,
    /// `x-unit`: the unit the value is written in (`USD millions`).
    pub unit: Option<String>,
    /// `x-grounded`: where the value (each value inside, for a nullable or list field) must be
    /// copied from.
    pub grounded: Option<Grounding>,
    /// `x-form`: what kind of expression the text value (each one inside) is.
    pub form: Option<Form>,
    /// `x-question`: the question that finds the value's evidence in a document (on a field),
    /// or the whole contract's (on a contract).
    pub question: Option<String>,
    /// `x-group`: the name of the fields judged and extracted together with this one.
    pub group: Option<String>,
    /// `type`, in the order written (empty: not said). A derived `Option<T>` is `T`'s type
    /// followed by `null`.
    pub types: Vec<JsonType>,
    /// `enum`: the allowed values (with `null` for a nullable derived field).
    pub enumeration: Option<Vec<Value>>,
    /// For a derived enum contract, each value's doc comment, in the order of
    /// [`Node::enumeration`].
    pub enum_descriptions: Vec<Option<String>>,
    /// `const`.
    pub constant: Option<Value>,
    /// `$ref`.
    pub reference: Option<Ref>,
    /// `$dynamicRef` / `$recursiveRef` as written (not followed by the renderings).
    pub dynamic_reference: Option<String>,
    /// Numeric keywords.
    pub number: NumberKeywords,
    /// String keywords.
    pub string: StringKeywords,
    /// Array keywords, when the node has any.
    pub array: Option<Box<ArrayNode>>,
    /// Object keywords, when the node has any.
    pub object: Option<Box<ObjectNode>>,
    /// `anyOf`.
    pub any_of: Option<Vec<Node>>,
    /// `oneOf`.
    pub one_of: Option<Vec<Node>>,
    /// `allOf`.
    pub all_of: Option<Vec<Node>>,
    /// A derived field of a type that is not a contract but implements `schemars::JsonSchema`:
    /// its schema is schemars', its values are checked by deserialization only.
    pub external: Option<ExternalRef>,
    /// Keywords with a meaning that the renderings do not model, as written, in order.
    pub other: Vec<(String, Value)>,
    /// The order a runtime schema wrote `properties`, `$ref`, `allOf`, `anyOf` and `oneOf` in
    /// (those it did not write follow in [`Structure::DEFAULT_ORDER`]). Not a constraint: llguidance writes the properties
    /// of an intersection in the order it meets its parts, so the grammar keeps the schema's.
    pub structure: Vec<Structure>,
}

/// A keyword whose place among its siblings decides the order of an intersection's properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Structure {
    /// `properties` (the other object keywords are written with it).
    Properties,
    /// `$ref`.
    Ref,
    /// `allOf`.
    AllOf,
    /// `anyOf`.
    AnyOf,
    /// `oneOf`.
    OneOf,
}

impl Structure {
    /// The order when none was written.
    pub const DEFAULT_ORDER: [Structure; 5] = [
        Structure::Ref,
        Structure::AllOf,
        Structure::Properties,
        Structure::AnyOf,
        Structure::OneOf,
    ];
}

/// The numeric keywords of a [`Node`].
#[derive(Debug, Clone, Default)]
pub struct NumberKeywords {
    /// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, and what they mean.
    pub bounds: NumberBounds,
    /// `multipleOf`.
    pub multiple_of: Option<Number>,
    /// A derived integer's Rust type range (`u8`: `0..=255`), apart from the bounds above: the
    /// JSON Schema writes the tighter of the two, messages name the type.
    pub integer_type: Option<(i128, i128)>,
}

impl NumberKeywords {
    /// Whether no bound is set (the Rust type's range aside).
    pub fn is_unbounded(&self) -> bool {
        self.bounds.is_unbounded()
    }
}

/// The string keywords of a [`Node`].
#[derive(Debug, Clone, Default)]
pub struct StringKeywords {
    /// `minLength`, in characters.
    pub min_length: Option<u64>,
    /// `maxLength`, in characters.
    pub max_length: Option<u64>,
    /// `pattern` (unanchored, as JSON Schema reads it).
    pub pattern: Option<Pattern>,
    /// `format`, by name (`date-time`); [`crate::Format`] names the ones a derived contract can
    /// declare.
    pub format: Option<String>,
}

/// The array keywords of a [`Node`].
#[derive(Debug, Clone, Default)]
pub struct ArrayNode {
    /// `items`: every item's schema (after [`ArrayNode::prefix_items`], when both are set).
    pub items: Option<Node>,
    /// `prefixItems` (and the list form of `items` in drafts before 2020-12).
    pub prefix_items: Option<Vec<Node>>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `uniqueItems: true`.
    pub unique_items: bool,
}

/// The object keywords of a [`Node`]: a derived contract's fields and rules.
#[derive(Debug, Clone, Default)]
pub struct ObjectNode {
    /// `properties`, in order (the order keys are asked in).
    pub properties: Vec<FieldSpec>,
    /// `required`: every property of a derived contract.
    pub required: Vec<String>,
    /// Whether `properties`, `patternProperties`, `additionalProperties` or `required` was
    /// written (an empty `properties` too): the node describes an object's keys.
    pub has_shape: bool,
    /// `patternProperties`, as written.
    pub pattern_properties: Vec<(String, Node)>,
    /// `additionalProperties`: `Some(false)` schema for a closed (derived) object.
    pub additional_properties: Option<Box<Node>>,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `x-rules`: cross-field rules, checked after decoding (and during it, by the local
    /// backend).
    pub rules: Vec<Rule>,
    /// Names of a derived contract's custom `check` functions, for the docs.
    pub checks: Vec<String>,
    /// JSON names of a derived contract's fields present in the Rust type but not asked of the
    /// model.
    pub skipped: Vec<String>,
}

impl ObjectNode {
    /// The property named `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSpec> {
        self.properties.iter().find(|f| f.name == name)
    }

    /// Whether `name` is required.
    pub fn is_required(&self, name: &str) -> bool {
        self.required.iter().any(|r| r == name)
    }

    /// Whether no other key is allowed (`additionalProperties: false`, no pattern properties).
    pub fn is_closed(&self) -> bool {
        self.pattern_properties.is_empty()
            && self
                .additional_properties
                .as_deref()
                .is_some_and(|n| n.boolean == Some(false))
    }
}

/// One property of an object node: a derived contract's field.
#[derive(Debug, Clone)]
pub struct FieldSpec {
    /// The JSON key (after serde renames).
    pub name: String,
    /// The Rust field name (empty for a runtime schema's property).
    pub rust_name: String,
    /// The value's schema, with the field's description, unit and grounding.
    pub node: Node,
}

impl FieldSpec {
    /// The field's doc comment.
    pub fn description(&self) -> Option<&str> {
        self.node.description.as_deref()
    }

    /// The unit the value is written in.
    pub fn unit(&self) -> Option<&str> {
        self.node.unit.as_deref()
    }

    /// Where the value must be copied from.
    pub fn grounded(&self) -> Option<&Grounding> {
        self.node.grounded.as_ref()
    }

    /// Whether the field may be `null`.
    pub fn is_nullable(&self) -> bool {
        self.node.is_nullable()
    }
}

/// A `$ref`.
#[derive(Debug, Clone)]
pub struct Ref {
    /// The reference as written (empty for a derived contract's, named when asked: a contract
    /// being built cannot ask its own spec for its name).
    written: String,
    /// What it points at; `None` when the renderings cannot follow it (the validator of a
    /// runtime contract resolves what they cannot, such as references relative to an embedded
    /// `$id`).
    pub target: Option<Target>,
}

/// What a [`Ref`] points at.
#[derive(Debug, Clone)]
pub enum Target {
    /// A node of the [`Document`] (0 is the root).
    Def(usize),
    /// A derived nested contract.
    Contract(ContractRef),
}

impl Ref {
    /// A reference as written in a schema, and what it points at.
    pub fn new(written: impl Into<String>, target: Option<Target>) -> Ref {
        Ref {
            written: written.into(),
            target,
        }
    }

    /// The reference to derived contract `r` (its schema name in `$defs`).
    pub fn contract(r: ContractRef) -> Ref {
        Ref {
            written: String::new(),
            target: Some(Target::Contract(r)),
        }
    }

    /// The reference as written (`#/$defs/Amount`): its last segment names the target.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match &self.target {
            Some(Target::Contract(c)) => crate::schema::pointer::def_ref(&c.spec().name).into(),
            _ => self.written.as_str().into(),
        }
    }
}

/// A schema document in the IR: its nodes, the root first, then every `$ref` target once.
#[derive(Debug, Clone)]
pub struct Document {
    /// The root's name (the schema's `title`, else `Root`; a derived contract's type name).
    pub name: String,
    /// Node 0 is the root; [`Target::Def`] indexes the rest.
    pub nodes: Vec<Node>,
    /// The size of the schema as written, in characters: a signature that inlines every
    /// definition is kept while it is no longer than this.
    pub source_len: usize,
}

impl Document {
    /// The root node.
    pub fn root(&self) -> &Node {
        &self.nodes[0]
    }

    /// The node `r` points at (a derived contract's from its spec), when it can be followed.
    pub fn resolve<'a>(&'a self, r: &Ref) -> Option<&'a Node> {
        match r.target.as_ref()? {
            Target::Def(i) => self.nodes.get(*i),
            Target::Contract(c) => Some(c.spec().node()),
        }
    }
}

impl Node {
    /// A node accepting values of `types`.
    pub fn of_types(types: &[JsonType]) -> Node {
        Node {
            types: types.to_vec(),
            ..Node::default()
        }
    }

    /// The boolean schema `value`.
    pub fn boolean(value: bool) -> Node {
        Node {
            boolean: Some(value),
            ..Node::default()
        }
    }

    /// A field's node, from the Rust type's [`TypeSpec`] and the field's attributes: bounds,
    /// patterns, formats and `one_of` go to the scalar inside `Option` and `Vec`, `len` to the
    /// string or the list itself, the unit, the description and the grounding to the field.
    /// The one place a field attribute is placed.
    pub fn field(
        ty: &TypeSpec,
        constraints: &FieldAttrs,
        description: Option<&str>,
        unit: Option<&str>,
    ) -> Node {
        let mut node = Node::of_type(ty, constraints);
        node.description = description.map(str::to_owned);
        node.unit = unit.map(str::to_owned);
        node.grounded = constraints.grounded.clone();
        node.form = constraints.form;
        node.question = constraints.question.clone();
        node.group = constraints.group.clone();
        node
    }

    /// The node of `ty` with constraints `c` placed where they apply.
    fn of_type(ty: &TypeSpec, c: &FieldAttrs) -> Node {
        let scalar = |t: JsonType| Node {
            types: vec![t],
            enumeration: c.one_of.clone(),
            ..Node::default()
        };
        let bounds = || NumberKeywords {
            bounds: c.bounds.clone(),
            multiple_of: None,
            integer_type: None,
        };
        match ty {
            TypeSpec::Bool => scalar(JsonType::Boolean),
            TypeSpec::Integer { min, max } => Node {
                number: NumberKeywords {
                    integer_type: Some((*min, *max)),
                    ..bounds()
                },
                ..scalar(JsonType::Integer)
            },
            TypeSpec::Number => Node {
                number: bounds(),
                ..scalar(JsonType::Number)
            },
            TypeSpec::String => Node {
                string: StringKeywords {
                    min_length: c.min_len,
                    max_length: c.max_len,
                    pattern: c.pattern.clone(),
                    format: c.format.map(|f| f.as_str().to_owned()),
                },
                ..scalar(JsonType::String)
            },
            TypeSpec::List(item) => Node {
                types: vec![JsonType::Array],
                array: Some(Box::new(ArrayNode {
                    // Every attribute but the length, which is the list's own.
                    items: Some(Node::of_type(
                        item,
                        &FieldAttrs {
                            min_len: None,
                            max_len: None,
                            ..c.clone()
                        },
                    )),
                    min_items: c.min_len,
                    max_items: c.max_len,
                    ..ArrayNode::default()
                })),
                ..Node::default()
            },
            TypeSpec::Nullable(inner) => Node::of_type(inner, c).nullable(),
            TypeSpec::Contract(r) => Node {
                reference: Some(Ref::contract(*r)),
                ..Node::default()
            },
            TypeSpec::External(r) => Node {
                external: Some(r.clone()),
                ..Node::default()
            },
        }
    }

    /// This node or `null`: `null` joins a scalar's or a list's `type` (and its `enum`); a
    /// reference or an external type becomes `anyOf: [it, {"type": "null"}]`, as the JSON
    /// Schema writes them.
    pub fn nullable(mut self) -> Node {
        if self.is_nullable() {
            return self;
        }
        if self.types.len() == 1 && self.reference.is_none() && self.external.is_none() {
            self.types.push(JsonType::Null);
            if let Some(values) = &mut self.enumeration {
                if !values.contains(&Value::Null) {
                    values.push(Value::Null);
                }
            }
            return self;
        }
        Node {
            any_of: Some(vec![self, Node::of_types(&[JsonType::Null])]),
            ..Node::default()
        }
    }

    /// Whether `null` is allowed by `type` or by an `anyOf` branch that is only `null`.
    pub fn is_nullable(&self) -> bool {
        self.types.contains(&JsonType::Null)
            || self
                .any_of
                .as_ref()
                .is_some_and(|b| b.iter().any(Node::is_null_only))
    }

    /// Whether the node is `{"type": "null"}`.
    pub fn is_null_only(&self) -> bool {
        self.types == [JsonType::Null]
    }

    /// The node with `null` peeled off: a nullable derived field's value node (the `anyOf`
    /// branch that is not `null`), else the node itself.
    pub fn non_null(&self) -> &Node {
        match &self.any_of {
            Some(branches) if branches.len() == 2 && self.is_nullable() => {
                branches.iter().find(|b| !b.is_null_only()).unwrap_or(self)
            }
            _ => self,
        }
    }

    /// Whether `type` lists `t`.
    pub fn has_type(&self, t: JsonType) -> bool {
        self.types.contains(&t)
    }

    /// The types listed, `null` left out.
    pub fn value_types(&self) -> impl Iterator<Item = JsonType> + '_ {
        self.types.iter().copied().filter(|t| *t != JsonType::Null)
    }

    /// The item node of a list (`items`).
    pub fn items(&self) -> Option<&Node> {
        self.array.as_deref()?.items.as_ref()
    }

    /// A derived nested contract this node refers to (through `Option`, not through lists).
    pub fn contract(&self) -> Option<&'static ContractSpec> {
        match self.non_null().reference.as_ref()?.target.as_ref()? {
            Target::Contract(r) => Some(r.spec()),
            Target::Def(_) => None,
        }
    }

    /// The derived nested contract at the bottom of `Option` and list wrappers.
    pub fn innermost_contract(&self) -> Option<&'static ContractSpec> {
        let node = self.non_null();
        match node.items() {
            Some(items) => items.innermost_contract(),
            None => node.contract(),
        }
    }

    /// Calls `f` on this node and every node written inside it (not through references, nor
    /// into the keywords kept as written in [`Node::other`]).
    pub fn walk(&self, f: &mut dyn FnMut(&Node)) {
        f(self);
        if let Some(a) = self.array.as_deref() {
            a.items
                .iter()
                .chain(a.prefix_items.iter().flatten())
                .for_each(|n| n.walk(f));
        }
        if let Some(o) = self.object.as_deref() {
            o.properties.iter().for_each(|p| p.node.walk(f));
            o.pattern_properties.iter().for_each(|(_, n)| n.walk(f));
            o.additional_properties.iter().for_each(|n| n.walk(f));
        }
        for list in [&self.any_of, &self.one_of, &self.all_of]
            .into_iter()
            .flatten()
        {
            list.iter().for_each(|n| n.walk(f));
        }
    }

    /// Whether the node holds a value of an integer or number type (`null` aside).
    pub fn is_numeric(&self) -> bool {
        self.value_types()
            .any(|t| matches!(t, JsonType::Integer | JsonType::Number))
    }
}

/// One contract as the derive declares it: its name and its IR node (a closed object with
/// fields and rules, or a string enum).
#[derive(Debug, Clone)]
pub struct ContractSpec {
    /// The Rust type name, also the schema name (`Guidance`, `Evidenced_for_Amount`).
    pub name: String,
    /// The contract's IR: an object node (fields, rules, custom checks, skipped fields) or a
    /// string node with an `enum`; its description is the doc comment or
    /// `#[contract(description = "..")]`.
    pub node: Node,
}

/// A field's Rust type as [`FieldType`](crate::FieldType) describes it: what [`Node::field`] builds the field's
/// IR node from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TypeSpec {
    /// `true` / `false`.
    Bool,
    /// An integer within the Rust type's bounds.
    Integer {
        /// Smallest value of the Rust type.
        min: i128,
        /// Largest value of the Rust type.
        max: i128,
    },
    /// A JSON number (`f32`, `f64`).
    Number,
    /// A JSON string.
    String,
    /// `Option<T>`: required, but may be `null`.
    Nullable(Box<TypeSpec>),
    /// `Vec<T>`: a JSON array.
    List(Box<TypeSpec>),
    /// A nested contract.
    Contract(ContractRef),
    /// Any other `schemars::JsonSchema` type, used through its own schema.
    External(ExternalRef),
}

/// A reference to a nested contract, resolved lazily so recursive contracts work.
#[derive(Clone, Copy)]
pub struct ContractRef {
    spec: fn() -> &'static ContractSpec,
    schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl ContractRef {
    /// A reference from the nested contract's spec and schema functions ([`ContractRef::of`]).
    pub(crate) fn new(
        spec: fn() -> &'static ContractSpec,
        schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    ) -> Self {
        ContractRef { spec, schema }
    }

    /// The nested contract's IR.
    pub fn spec(&self) -> &'static ContractSpec {
        (self.spec)()
    }

    /// The nested contract's schema in `generator` (a `$ref` into its definitions).
    pub fn subschema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.schema)(generator)
    }
}

impl fmt::Debug for ContractRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ContractRef")
            .field(&self.spec().name)
            .finish()
    }
}

/// A field type that is not a contract but implements `schemars::JsonSchema`.
///
/// Its schema is used as schemars renders it; values are checked by deserialization only.
#[derive(Clone)]
pub struct ExternalRef {
    name: fn() -> Cow<'static, str>,
    schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl ExternalRef {
    /// The reference to the schemars type `T`.
    pub fn of<T: schemars::JsonSchema>() -> Self {
        ExternalRef {
            name: T::schema_name,
            schema: |generator| generator.subschema_for::<T>(),
        }
    }

    /// The type's schema name.
    pub fn name(&self) -> Cow<'static, str> {
        (self.name)()
    }

    /// The type's schema in `generator`.
    pub fn subschema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.schema)(generator)
    }

    /// The type's schema as a standalone draft 2020-12 document.
    pub fn standalone_schema(&self) -> Value {
        let mut generator = schemars::generate::SchemaSettings::draft2020_12()
            .with(|s| s.meta_schema = None)
            .into_generator();
        let schema = self.subschema(&mut generator);
        let mut value = schema.to_value();
        let defs = generator.take_definitions(true);
        if !defs.is_empty() {
            if let Value::Object(map) = &mut value {
                map.insert("$defs".into(), Value::Object(defs));
            }
        }
        value
    }
}

impl fmt::Debug for ExternalRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ExternalRef").field(&self.name()).finish()
    }
}

impl ContractSpec {
    /// The contract's IR node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The contract's description.
    pub fn description(&self) -> Option<&str> {
        self.node.description.as_deref()
    }

    /// The object part (fields, rules, checks), when this is an object contract.
    pub fn object(&self) -> Option<&ObjectNode> {
        self.node.object.as_deref()
    }

    /// The field with JSON name `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSpec> {
        self.object()?.field(name)
    }

    /// The values of an enum contract.
    pub fn variants(&self) -> Option<&[Value]> {
        self.node.enumeration.as_deref()
    }

    /// The same contract with only the fields named in `fields` (JSON names; others are left
    /// out, unknown names ignored) and the rules among them: what a model is asked when a
    /// document's evidence for a few fields is judged and extracted apart from the rest
    /// ([`select`](crate::select)). The renderings of the part are the whole contract's
    /// renderings restricted to those fields.
    pub fn subset(&self, fields: &[&str]) -> ContractSpec {
        let mut node = self.node.clone();
        if let Some(object) = node.object.as_deref_mut() {
            object
                .properties
                .retain(|f| fields.contains(&f.name.as_str()));
            object.required.retain(|f| fields.contains(&f.as_str()));
            object
                .rules
                .retain(|r| r.fields().iter().all(|f| fields.contains(&f.as_str())));
        }
        ContractSpec {
            name: self.name.clone(),
            node,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private::{int, pattern};
    use crate::contract::FieldType;

    #[test]
    fn field_attributes_land_on_the_node_they_apply_to() {
        let c = FieldAttrs {
            bounds: NumberBounds {
                minimum: Some(int(1)),
                ..NumberBounds::default()
            },
            min_len: Some(2),
            max_len: Some(5),
            pattern: Some(pattern("^[a-z]+$")),
            ..FieldAttrs::default()
        };
        // `Option<Vec<u8>>`: the length on the list, the bound on the items, `null` beside
        // the list's type.
        let node = Node::field(&Option::<Vec<u8>>::type_spec(), &c, Some("d"), Some("kg"));
        assert_eq!(node.types, [JsonType::Array, JsonType::Null]);
        let array = node.array.as_deref().unwrap();
        assert_eq!((array.min_items, array.max_items), (Some(2), Some(5)));
        let items = array.items.as_ref().unwrap();
        assert_eq!(items.types, [JsonType::Integer]);
        assert_eq!(items.number.bounds.minimum, Some(int(1)));
        assert_eq!(items.number.integer_type, Some((0, 255)));
        assert_eq!(
            items.string.min_length, None,
            "a list's length is not its items'"
        );
        assert_eq!(
            (node.description.as_deref(), node.unit.as_deref()),
            (Some("d"), Some("kg"))
        );
        // `Vec<String>`: the pattern on the items.
        let words = Node::field(&Vec::<String>::type_spec(), &c, None, None);
        assert!(words.string.pattern.is_none());
        assert_eq!(
            words
                .items()
                .unwrap()
                .string
                .pattern
                .as_ref()
                .map(|p| p.as_str()),
            Some("^[a-z]+$")
        );
        // `Option<String>` with `one_of`: `null` joins the enum.
        let one_of = FieldAttrs {
            one_of: Some(vec![Value::from("a")]),
            ..FieldAttrs::default()
        };
        let code = Node::field(&Option::<String>::type_spec(), &one_of, None, None);
        assert_eq!(code.enumeration, Some(vec![Value::from("a"), Value::Null]));
        assert!(code.is_nullable());
    }
}
