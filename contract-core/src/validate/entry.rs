//! The validators' entry points: `from_json` and `from_value` (parse, check, normalise, decode,
//! run the custom checks), `validate_typed`, `check_value` and `strip_skipped`. `from_json`
//! tries the flat path (`flat.rs`) first and falls back to the tree and the checker
//! (`check.rs`).

use serde_json::Value;

use super::check::{finish, has_field_level, Checker};
use super::checked::Checked;
use super::doc::Doc;
use super::path::Path;
use super::violation::{Violation, ViolationKind, Violations};
use crate::context::DocContext;
use crate::ir::ContractSpec;
use crate::ir::{JsonType, Node};
use crate::num::as_integer;

/// `C::from_json`: parses `text`, then checks and decodes it as [`from_value`] does.
///
/// Text that is not one JSON value gives a single `json_invalid` violation whose message carries
/// the line and column. A key written twice in one object is an `extra_field` (a `Value` would
/// keep the last one silently).
///
/// The usual document, one object of scalars for a contract of scalar fields, is read onto the
/// stack and checked by a plan compiled once per contract, then decoded with no tree; any other
/// is parsed by serde_json into a tree that borrows its strings. Both give the same result, to
/// the message (the plan hands a document it refuses to the same checker).
pub fn from_json<C: Checked>(text: &str) -> Result<C, Violations> {
    from_json_with(text, &DocContext::none())
}

/// [`from_json`], the values normalised and checked against `cx`'s document.
pub fn from_json_with<C: Checked>(text: &str, cx: &DocContext<'_>) -> Result<C, Violations> {
    // A flat object of scalars, the usual case, is checked without building a tree; the
    // result is the tree path's (see `flat`).
    match super::flat::from_json::<C>(text, cx) {
        Some(result) => result,
        None => from_json_tree_with(text, cx),
    }
}

/// [`from_json`] through the parsed tree, for every document.
#[cfg(test)]
pub(super) fn from_json_tree<C: Checked>(text: &str) -> Result<C, Violations> {
    from_json_tree_with(text, &DocContext::none())
}

/// [`from_json_with`] through the parsed tree, for every document.
pub(super) fn from_json_tree_with<C: Checked>(
    text: &str,
    cx: &DocContext<'_>,
) -> Result<C, Violations> {
    let doc: Doc<'_> = match serde_json::from_str(text) {
        Ok(doc) => doc,
        Err(e) => {
            return Err(Violations::one(Violation::new(
                "",
                ViolationKind::JsonInvalid,
                message!("invalid JSON: {e}"),
            )))
        }
    };
    from_doc_with(doc, cx)
}

/// [`from_json_tree_with`] on a document already parsed (by serde_json or by
/// [`read::tree`](super::read::tree)): checked, normalised, decoded.
pub(crate) fn from_doc_with<C: Checked>(
    mut doc: Doc<'_>,
    cx: &DocContext<'_>,
) -> Result<C, Violations> {
    let spec = C::checked_spec();
    let mut out = Violations::new();
    let mut checker = Checker::new(&mut out, false);
    checker.check_root(spec, &doc);
    if checker.normalise {
        normalise_doc(spec, &mut doc);
    }
    if has_field_level(&out) {
        return Err(out);
    }
    finish(C::deserialize(&doc), out, cx)
}

/// `C::from_value`: checks `value` against `C::checked_spec()` and, when no field-level
/// violation was found, deserializes it and runs the custom checks.
///
/// An integer field accepts a number with a zero fraction (`3.0`), as JSON Schema does; such
/// values are normalised to integers before deserializing (the value is cloned only then).
/// Cross-field violations are reported together with field-level ones; custom checks need a
/// typed value, so they run only when the value deserializes.
pub fn from_value<C: Checked>(value: &Value) -> Result<C, Violations> {
    from_value_in(value, &DocContext::none())
}

/// [`from_value`], the values normalised and checked against `cx`'s document.
pub fn from_value_in<C: Checked>(value: &Value, cx: &DocContext<'_>) -> Result<C, Violations> {
    let spec = C::checked_spec();
    let mut out = Violations::new();
    let mut checker = Checker::new(&mut out, false);
    checker.check_root(spec, value);
    let normalise = checker.normalise;
    if has_field_level(&out) {
        return Err(out);
    }
    if normalise {
        let mut owned = value.clone();
        normalise_value(spec, &mut owned);
        finish(C::deserialize(&owned), out, cx)
    } else {
        finish(C::deserialize(value), out, cx)
    }
}

/// `value.validate()`: field constraints, cross-field rules and custom checks of a typed value.
///
/// The value is serialized with `serde_json::to_value` (a failure is one `type_mismatch`) and
/// checked like model output, except that the keys of fields marked `skip` (listed in
/// [`ObjectNode::skipped`](crate::ir::ObjectNode::skipped)) are ignored at every level, in nested contracts too: code fills
/// them, so they are not extra here.
pub fn validate_typed<C: Checked>(value: &C) -> Result<(), Violations> {
    let mut out = Violations::new();
    match serde_json::to_value(value) {
        Ok(json) => Checker::new(&mut out, true).check_root(C::checked_spec(), &json),
        Err(e) => out.push(Violation::new(
            "",
            ViolationKind::TypeMismatch,
            message!("the value does not serialize: {e}"),
        )),
    }
    value.checked_run_checks(&DocContext::none(), "", &mut out);
    out.into_result()
}

/// Removes from `value` the keys of fields code fills in (`#[contract(skip)]`), in `spec`'s
/// objects and every nested contract's, lists included: the value as a model writes it.
pub fn strip_skipped(spec: &ContractSpec, value: &mut Value) {
    fn node(n: &Node, value: &mut Value, depth: usize) {
        if depth > 64 {
            return;
        }
        let n = n.non_null();
        if let (Some(items), Value::Array(xs)) = (n.items(), &mut *value) {
            for x in xs {
                node(items, x, depth + 1);
            }
            return;
        }
        if let Some(spec) = n.contract() {
            contract(spec, value, depth + 1);
        }
    }
    fn contract(spec: &ContractSpec, value: &mut Value, depth: usize) {
        let (Some(object), Value::Object(map)) = (spec.object(), value) else {
            return;
        };
        for key in &object.skipped {
            map.remove(key);
        }
        for f in &object.properties {
            if let Some(v) = map.get_mut(&f.name) {
                node(&f.node, v, depth);
            }
        }
    }
    contract(spec, value, 0);
}

/// Checks `value` (at JSON pointer `pointer`) against `spec`: field constraints and rules,
/// pushing every violation into `out` in document order.
///
/// This is the check of model output: keys of skipped fields are `extra_field`.
pub fn check_value(spec: &ContractSpec, value: &Value, pointer: &str, out: &mut Violations) {
    Checker::new(out, false).check_contract(spec, value, &Path::Root(pointer, &spec.name), false);
}

/// Rewrites floats with a zero fraction in integer fields as integers, so serde accepts them.
fn normalise_value(spec: &ContractSpec, value: &mut Value) {
    fn walk(node: &Node, value: &mut Value) {
        let node = node.non_null();
        if let Some(spec) = node.contract() {
            return normalise_value(spec, value);
        }
        match value {
            Value::Number(n) if node.has_type(JsonType::Integer) => {
                if let Some(int) = as_integer(n) {
                    *n = int;
                }
            }
            Value::Array(items) => {
                if let Some(item) = node.items() {
                    items.iter_mut().for_each(|v| walk(item, v));
                }
            }
            _ => {}
        }
    }
    if let (Some(object), Value::Object(map)) = (spec.object(), value) {
        for field in &object.properties {
            if let Some(v) = map.get_mut(&field.name) {
                walk(&field.node, v);
            }
        }
    }
}

/// [`normalise_value`] for a parsed document.
fn normalise_doc(spec: &ContractSpec, doc: &mut Doc<'_>) {
    fn walk(node: &Node, doc: &mut Doc<'_>) {
        let node = node.non_null();
        if let Some(spec) = node.contract() {
            return normalise_doc(spec, doc);
        }
        match doc {
            Doc::Number(n, _) if node.has_type(JsonType::Integer) => {
                if let Some(int) = as_integer(n) {
                    *n = int;
                }
            }
            Doc::Array(items) => {
                if let Some(item) = node.items() {
                    items.iter_mut().for_each(|v| walk(item, v));
                }
            }
            _ => {}
        }
    }
    if let (Some(object), Doc::Object(entries)) = (spec.object(), doc) {
        for (key, value) in entries.iter_mut() {
            if let Some(field) = object.field(key) {
                walk(&field.node, value);
            }
        }
    }
}
