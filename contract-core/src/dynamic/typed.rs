//! Which grammar [`Extractor::runtime`](crate::Extractor::runtime) decodes a runtime contract
//! under, decided in one place so the extractor and the `x-rules` note in
//! [`DynContract::gaps`](super::DynContract::gaps) cannot disagree.
//!
//! The typed [`Grammar`](crate::grammar::Grammar) (the `Shape` lowering a derived contract
//! gets) is the only mask that holds cross-field rules, but it models less than a JSON Schema:
//! one type per value, no combinators, no `const`, no `multipleOf`, no `prefixItems`, no pattern
//! properties, no inline objects below the root (they become "any value"), every listed
//! property required. The schema's own JSON Schema
//! mask (`document_schema`) carries those keywords and no rules. So a schema with root
//! `x-rules` switches to the typed grammar only when the lowering keeps every constraint that
//! JSON Schema mask enforces ([`lossless`]); otherwise it keeps its JSON Schema and the
//! validator alone checks the rules, unless the fields the rules name are carried without loss
//! (each of one shape the grammar keeps whole): then the schema's own mask is kept and
//! the local backend's value filter holds the rules over it ([`Mask::RulesOverSchema`]), those
//! of the inline objects below the root that qualify the same way too ([`inline_rules_held`]).
//! A grounded schema decodes under the typed grammar regardless: grounding needs it.

use serde_json::Value;

use crate::grammar::{Grammar, GRAMMAR_FORMATS};
use crate::ir::ContractSpec;
use crate::ir::{JsonType, Node, ObjectNode, Target};

use super::json_type::is_of_type;
use super::values::has_def_refs;

/// The mask a runtime contract's root (its value types adopted) decodes under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mask {
    /// The typed grammar, grounded: a flat object root with a grounded field.
    Grounded,
    /// The typed grammar, for its root `x-rules`: a flat object root the grammar carries
    /// without loss ([`lossless`]).
    Rules,
    /// The schema's own JSON Schema, with the root's `x-rules` held by the local backend's value
    /// filter over it ([`Grammar::rules_over_schema`](crate::grammar::Grammar::rules_over_schema)):
    /// the grammar would lose a keyword elsewhere, but every field a rule names is carried by
    /// its shape without loss ([`rule_fields_lossless`]).
    RulesOverSchema,
    /// The schema's own JSON Schema: no cross-field rules.
    JsonSchema,
}

/// Which mask `spec` (a runtime contract's root, value types adopted) decodes under.
pub(crate) fn mask(spec: &ContractSpec) -> Mask {
    let Some(object) = spec.object() else {
        return Mask::JsonSchema;
    };
    if has_def_refs(&spec.node) {
        Mask::JsonSchema
    } else if crate::ground::has_grounding(spec) {
        Mask::Grounded
    } else if !object.rules.is_empty() && lossless(&spec.node) {
        Mask::Rules
    } else if rule_fields_lossless(&spec.node) {
        Mask::RulesOverSchema
    } else {
        Mask::JsonSchema
    }
}

/// The grammar `spec` (a runtime contract's root, value types adopted) decodes under, by its
/// [`mask`]; `schema` gives the contract's own JSON Schema. `None`: that JSON Schema alone.
pub(crate) fn mask_grammar(spec: &ContractSpec, schema: impl FnOnce() -> Value) -> Option<Grammar> {
    match mask(spec) {
        Mask::Grounded | Mask::Rules => Some(Grammar::of(spec)),
        Mask::RulesOverSchema => Some(Grammar::rules_over_schema(
            spec,
            schema(),
            inline_rules_held,
        )),
        Mask::JsonSchema => None,
    }
}

/// Whether the value filter can hold the root object's rules over the schema's own JSON Schema
/// mask: every field a rule names is listed, its schema is one the typed grammar carries without
/// loss ([`value`]) with a value other than `null`, and nothing at the root narrows it further
/// (no alternatives, enum or pattern properties). Then the filter, which refuses only a value
/// that leaves some rule no way to hold given what its partners may still be, knows each
/// partner's values exactly: a value it lets through leaves every partner a value both masks
/// allow, so it does not empty the JSON Schema mask. A partner the schema leaves optional is
/// taken as one that may still be written: with `low <= high` and `high` at most 10, `low` may
/// not be 30 even where the model would leave `high` out (the validator would take that). Other
/// fields are any value to the filter.
/// Without rules at the root or in an inline object the filter takes in, nothing to hold.
fn rule_fields_lossless(root: &Node) -> bool {
    plain_object(root).is_some_and(rules_held)
}

/// Whether the value filter holds the rules of the inline object `node` (a property's schema,
/// below the root) over the schema's own mask, as [`rule_fields_lossless`] does the root's: the
/// property is an object (or `null`), with no alternatives or enum, nothing narrowing its
/// listed properties, every field its rules name carried without loss; and it has rules, or an
/// inline object of its own whose rules are held. Its other properties are any value to the
/// filter; an inline object whose rules are not held is too (the validator checks them).
pub(crate) fn inline_rules_held(node: &Node) -> bool {
    node.value_types().eq([JsonType::Object]) && plain_object(node).is_some_and(rules_held)
}

/// Whether the filter holds rules in `object` (the root's, or an inline object's that passed
/// [`plain_object`]): every field its rules name carried without loss, and rules of its own or
/// in an inline object below it that it holds.
fn rules_held(object: &ObjectNode) -> bool {
    rules_writable(object)
        && (!object.rules.is_empty()
            || object.properties.iter().any(|f| inline_rules_held(&f.node)))
}

/// The JSON pointers of the subschemas whose `x-rules` the value filter holds when `root`
/// decodes under [`Mask::RulesOverSchema`]: the root's (`""`) and those of the inline objects
/// below it ([`inline_rules_held`], `/properties/range`).
pub(crate) fn held_rule_paths(root: &Node) -> Vec<String> {
    fn walk(object: &ObjectNode, path: &str, out: &mut Vec<String>) {
        if !object.rules.is_empty() {
            out.push(path.to_owned());
        }
        for f in &object.properties {
            if inline_rules_held(&f.node) {
                if let Some(inner) = f.node.object.as_deref() {
                    let properties = crate::validate::join_pointer(path, "properties");
                    walk(
                        inner,
                        &crate::validate::join_pointer(&properties, &f.name),
                        out,
                    );
                }
            }
        }
    }
    let mut out = Vec::new();
    if let Some(object) = plain_object(root) {
        walk(object, "", &mut out);
    }
    out
}

/// Whether every field `object`'s rules name is listed and carried without loss, with a value
/// other than `null`.
fn rules_writable(object: &ObjectNode) -> bool {
    object.rules.iter().flat_map(|r| r.fields()).all(|name| {
        object.field(name).is_some_and(|f| {
            value(&f.node)
                && f.node
                    .enumeration
                    .as_ref()
                    .is_none_or(|values| values.iter().any(|v| !v.is_null()))
        })
    })
}

/// The root's object when nothing at the root narrows its listed properties beyond their own
/// schemas: an object type, no alternatives, no enum, no pattern properties (a pattern property
/// also constrains the listed properties it matches). What both [`lossless`] and
/// [`rule_fields_lossless`] ask first.
fn plain_object(root: &Node) -> Option<&ObjectNode> {
    let object = root.object.as_deref()?;
    ((root.types.is_empty() || root.has_type(JsonType::Object))
        && no_alternatives(root)
        && root.enumeration.is_none()
        && object.pattern_properties.is_empty())
    .then_some(object)
}

/// Whether the typed grammar of the object `root` enforces every constraint the schema's JSON
/// Schema mask enforces. It may enforce more, as a derived contract's does: no keys beyond the
/// listed properties, strings of at most 1000 characters and lists of at most 100 items where
/// the schema sets no limit.
fn lossless(root: &Node) -> bool {
    // The grammar writes an object, every listed property in order, nothing else.
    let Some(object) = plain_object(root) else {
        return false;
    };
    let n = object.properties.len() as u64;
    // An optional property would have to be written; a required key that is not listed
    // could not be.
    object
        .properties
        .iter()
        .all(|f| object.is_required(&f.name))
        && object.required.iter().all(|r| object.field(r).is_some())
        && object.min_properties.is_none_or(|m| m <= n)
        && object.max_properties.is_none_or(|m| m >= n)
        && object.properties.iter().all(|f| value(&f.node))
}

/// Whether the node has none of `const`, `$ref` (to a definition), `anyOf`, `oneOf`, `allOf`
/// or a boolean schema, which the grammar's shapes do not model.
fn no_alternatives(node: &Node) -> bool {
    node.boolean.is_none()
        && node.constant.is_none()
        && node.reference.is_none()
        && node.any_of.is_none()
        && node.one_of.is_none()
        && node.all_of.is_none()
}

/// Whether the grammar's shape of a property (or a list's items) enforces what the node does.
fn value(node: &Node) -> bool {
    // `anyOf: [X, {"type": "null"}]`: the grammar's nullable X, with nothing beside it.
    if let Some([a, b]) = node.any_of.as_deref() {
        let inner = match (a.is_null_only(), b.is_null_only()) {
            (false, true) => a,
            (true, false) => b,
            _ => return false,
        };
        let alone = Node {
            any_of: None,
            ..node.clone()
        };
        return node.types.is_empty()
            && no_alternatives(&alone)
            && alone.enumeration.is_none()
            && no_value_keywords(&alone)
            && value(inner);
    }
    // One of the library's value types (`#/$defs/Amount`): its own shape, nothing beside it.
    if matches!(
        node.reference.as_ref().and_then(|r| r.target.as_ref()),
        Some(Target::Contract(_))
    ) {
        return node.types.is_empty()
            && node.enumeration.is_none()
            && no_value_keywords(node)
            && no_alternatives(&Node {
                reference: None,
                ..node.clone()
            });
    }
    if !no_alternatives(node) {
        return false;
    }
    let types: Vec<JsonType> = node.value_types().collect();
    if let Some(values) = &node.enumeration {
        // The grammar's enum is the values but `null`, and `null` when the type allows it: the
        // type and the value keywords must not narrow the values further, and `null` must be
        // allowed by both or by neither.
        let null_by_type = node.has_type(JsonType::Null);
        let null_listed = values.contains(&Value::Null);
        return no_value_keywords(node)
            && (!null_by_type || null_listed)
            && (!node.types.is_empty() || !null_listed)
            && values
                .iter()
                .filter(|v| !v.is_null())
                .all(|v| node.types.is_empty() || types.iter().any(|t| is_of_type(t.as_str(), v)));
    }
    // The grammar keeps one type: the first.
    let [only] = types.as_slice() else {
        return false;
    };
    let n = &node.number;
    let s = &node.string;
    match only {
        JsonType::Boolean => true,
        JsonType::Integer | JsonType::Number => n.multiple_of.is_none(),
        JsonType::String => {
            s.pattern.as_ref().is_none_or(|p| p.is_compiled())
                && s.format
                    .as_deref()
                    .is_none_or(|f| GRAMMAR_FORMATS.contains(&f))
        }
        JsonType::Array => node
            .array
            .as_deref()
            .is_none_or(|a| a.prefix_items.is_none() && a.items.as_ref().is_none_or(value)),
        // An inline object is "any value" to the grammar.
        JsonType::Object | JsonType::Null => false,
    }
}

/// Whether the node has no numeric, string or array keyword.
fn no_value_keywords(node: &Node) -> bool {
    let n = &node.number;
    let s = &node.string;
    n.is_unbounded()
        && n.multiple_of.is_none()
        && s.min_length.is_none()
        && s.max_length.is_none()
        && s.pattern.is_none()
        && s.format.is_none()
        && node.array.is_none()
}
