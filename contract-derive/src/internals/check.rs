//! Checks that need more than one attribute, or a field's type. Each `check_*` is one rule.

use proc_macro2::Span;
use syn::Type;

use super::ast::{type_text, Container, Data, Field, Scalar};
use super::attr::GroundedKind;
use super::ctxt::Ctxt;
use super::suggest;
use super::symbol::*;

/// A type the derive could not recognise by its syntax: the expansion asks the compiler,
/// `::contract_core::__private::<func>::<types>()` spanned at `span`.
pub struct Assertion<'a> {
    pub func: &'static str,
    pub types: Vec<&'a Type>,
    pub span: Span,
}

/// Runs every check; what only the compiler can decide comes back as assertions.
pub fn check<'a>(cx: &Ctxt, cont: &Container<'a>) -> Vec<Assertion<'a>> {
    let mut assertions = Vec::new();
    if let Data::Struct(fields) = &cont.data {
        check_skip(cx, fields);
        check_json_names(cx, fields);
        for field in fields {
            check_field_types(cx, field, &mut assertions);
        }
        check_grounded(cx, fields);
        check_rules(cx, cont, fields, &mut assertions);
        check_groups(cx, cont, fields, &mut assertions);
    }
    if let Data::Enum(variants) = &cont.data {
        let mut names: Vec<&str> = Vec::new();
        for v in variants.iter().filter(|v| !v.skipped) {
            if names.contains(&v.json_name.as_str()) {
                cx.error_spanned_by(v.ident, format!("duplicate JSON name `{}`", v.json_name));
            }
            names.push(&v.json_name);
        }
    }
    assertions
}

const CONSTRAINT_KEYS: &[Symbol] = &[
    RANGE,
    MIN,
    MAX,
    EXCLUSIVE_MIN,
    EXCLUSIVE_MAX,
    LEN,
    PATTERN,
    ONE_OF,
    FORMAT,
    UNIT,
    GROUNDED,
    JSON_SCHEMA,
    FORM,
    QUESTION,
    GROUP,
];

/// `#[contract(skip)]` is only sound when serde can build the value without the model
/// (`skip`, `skip_deserializing`, `default`); a field the model writes cannot have a serde
/// default or be left out of serialization; a skipped field takes no constraints.
fn check_skip(cx: &Ctxt, fields: &[Field]) {
    for field in fields {
        let (serde, keys) = (&field.serde, &field.attrs.serde_keys);
        if let Some(span) = field.attrs.skip {
            if !serde.skip_deserializing() && serde.default().is_none() {
                cx.error_at(
                    span,
                    "`skip` needs `#[serde(skip)]` or `#[serde(default)]`: the model never writes this field",
                );
            }
        }
        if field.skipped() {
            for (key, span) in &field.attrs.keys {
                if CONSTRAINT_KEYS.contains(key) {
                    cx.error_at(
                        *span,
                        format!(
                            "`{key}` has no effect: `{}` is not in the contract",
                            field.rust_name
                        ),
                    );
                }
            }
            continue;
        }
        if let Some(span) = keys.span("default").filter(|_| !serde.default().is_none()) {
            cx.error_at(
                span,
                "`#[serde(default)]` is not supported by `#[derive(Contract)]` on a field the model writes: add `#[contract(skip)]` if it never does",
            );
        }
        if let Some(span) = keys
            .span("skip_serializing")
            .filter(|_| serde.skip_serializing())
        {
            cx.error_at(
                span,
                "`#[serde(skip_serializing)]` is not supported by `#[derive(Contract)]`: the contract could not describe the JSON shape",
            );
        }
    }
}

/// Two fields with one JSON name (after serde renames) cannot both be asked for.
fn check_json_names(cx: &Ctxt, fields: &[Field]) {
    let mut names: Vec<&str> = Vec::new();
    for field in fields.iter().filter(|f| !f.skipped()) {
        if names.contains(&field.json_name.as_str()) {
            cx.error_spanned_by(
                field.ident,
                format!("duplicate JSON name `{}`", field.json_name),
            );
        }
        names.push(&field.json_name);
    }
}

/// Each constraint needs a field type it can apply to.
fn check_field_types<'a>(cx: &Ctxt, field: &Field<'a>, assertions: &mut Vec<Assertion<'a>>) {
    if field.skipped() {
        return;
    }
    let info = &field.info;
    let name = &field.rust_name;
    let ty = type_text(field.ty);
    let other = info.scalar == Scalar::Other;
    for &(key, span) in &field.attrs.keys {
        let (ok, needs, func) = match key.0 {
            "range" | "min" | "max" | "exclusive_min" | "exclusive_max" => {
                (info.is_numeric(), "a numeric field", "assert_numeric")
            }
            "pattern" | "format" | "form" => (
                info.scalar == Scalar::String,
                "a string field",
                "assert_text",
            ),
            "len" => {
                // `Vec<String>`: `len` counts items.
                if info.has_list() {
                    continue;
                }
                (
                    info.scalar == Scalar::String,
                    "a string or list field",
                    "assert_has_len",
                )
            }
            "one_of" => {
                let strings = field.attrs.one_of.as_ref().map(|o| o.all_strings);
                match (info.scalar, strings) {
                    (Scalar::String, Some(false)) | (Scalar::Integer, Some(true)) => {
                        let has = if strings == Some(true) {
                            "strings"
                        } else {
                            "integers"
                        };
                        cx.error_at(span, format!("`one_of` has {has} but `{name}` is `{ty}`"));
                        continue;
                    }
                    (scalar, _) => (
                        matches!(scalar, Scalar::String | Scalar::Integer),
                        "a string or integer field",
                        "assert_one_of_value",
                    ),
                }
            }
            _ => continue,
        };
        if other {
            assertions.push(Assertion {
                func,
                types: vec![field.ty],
                span,
            });
        } else if !ok {
            cx.error_at(span, format!("`{key}` needs {needs}, `{name}` is `{ty}`"));
        }
    }
}

/// The contract field with Rust name `name`, or what is wrong (`where_` says where it was named).
fn lookup<'f, 'a>(
    fields: &'f [Field<'a>],
    name: &str,
    where_: &str,
) -> Result<&'f Field<'a>, String> {
    match fields.iter().find(|f| f.rust_name == name) {
        Some(f) if f.skipped() => Err(format!("field `{name}` in {where_} is not in the contract")),
        Some(f) => Ok(f),
        None => {
            let hint = suggest::closest(
                name,
                fields
                    .iter()
                    .filter(|f| !f.skipped())
                    .map(|f| f.rust_name.as_str()),
            )
            .map(|b| format!(", did you mean `{b}`?"))
            .unwrap_or_default();
            Err(format!("unknown field `{name}` in {where_}{hint}"))
        }
    }
}

/// A grounded value is copied: strings, numbers and contracts with grounded parts can be, a
/// `bool` cannot. `in = field` names a field of the struct written before this one (keys are
/// generated in declaration order, so the text it lies in is known when it is written);
/// `in = start..=end` names two such integer fields.
fn check_grounded(cx: &Ctxt, fields: &[Field]) {
    for (index, field) in fields.iter().enumerate() {
        let Some(grounded) = &field.attrs.grounded else {
            continue;
        };
        if field.skipped() {
            continue;
        }
        let name = &field.rust_name;
        if field.info.scalar == Scalar::Bool {
            cx.error_at(
                grounded.span,
                format!(
                    "`grounded` needs a string, a number or a contract, `{name}` is `{}`: a boolean cannot be copied from a document",
                    type_text(field.ty)
                ),
            );
        }
        let idents = match &grounded.kind {
            GroundedKind::In(a) => vec![a],
            GroundedKind::Lines(a, b) => vec![a, b],
            GroundedKind::Source | GroundedKind::Line | GroundedKind::WithContainer => Vec::new(),
        };
        let where_ = "`grounded(in = ..)`";
        for ident in idents {
            let target = ident.to_string();
            match lookup(fields, &target, where_) {
                Err(msg) => cx.error_spanned_by(ident, msg),
                Ok(f) => {
                    let pos = fields
                        .iter()
                        .position(|g| g.rust_name == f.rust_name)
                        .unwrap_or(usize::MAX);
                    if pos >= index {
                        let what = if pos == index {
                            "the field itself".to_owned()
                        } else {
                            format!("`{target}`, declared after `{name}`")
                        };
                        cx.error_spanned_by(
                            ident,
                            format!(
                                "`grounded(in = {target})` names {what}: a value can only lie in a field written before it"
                            ),
                        );
                    } else if matches!(grounded.kind, GroundedKind::Lines(..))
                        && !matches!(f.info.scalar, Scalar::Integer | Scalar::Other)
                    {
                        cx.error_spanned_by(
                            ident,
                            format!(
                                "line field `{target}` must be an integer, it is `{}`",
                                type_text(f.ty)
                            ),
                        );
                    } else if f.info.scalar == Scalar::Bool {
                        cx.error_spanned_by(
                            ident,
                            format!("`{target}` is a boolean: a value cannot lie in it"),
                        );
                    }
                }
            }
        }
    }
}

/// A rule names two fields of the struct (Rust names) whose values can be compared: both
/// numbers or both strings, `Option` allowed.
fn check_rules<'a>(
    cx: &Ctxt,
    cont: &Container<'a>,
    fields: &[Field<'a>],
    assertions: &mut Vec<Assertion<'a>>,
) {
    for rule in &cont.attrs.rules {
        let text = rule.text();
        let where_ = format!("rule `{text}`");
        let left = lookup(fields, &rule.left, &where_);
        let right = lookup(fields, &rule.right, &where_);
        let mut sides = Vec::new();
        for side in [&left, &right] {
            match side {
                Ok(f) => sides.push(*f),
                Err(msg) => cx.error_spanned_by(&rule.lit, msg),
            }
        }
        let [l, r] = sides[..] else { continue };
        let mut bad = false;
        for f in [l, r] {
            if f.info.has_list() || matches!(f.info.scalar, Scalar::Bool) {
                cx.error_spanned_by(
                    &rule.lit,
                    format!(
                        "rule `{text}` compares `{}` (`{}`): only numbers and strings can be compared",
                        f.rust_name,
                        type_text(f.ty)
                    ),
                );
                bad = true;
            }
        }
        if bad {
            continue;
        }
        let kind = |f: &Field| match f.info.scalar {
            Scalar::Integer | Scalar::Float => Some("number"),
            Scalar::String => Some("string"),
            _ => None,
        };
        match (kind(l), kind(r)) {
            (Some(a), Some(b)) if a != b => cx.error_spanned_by(
                &rule.lit,
                format!(
                    "rule `{text}` compares `{}` (`{}`) with `{}` (`{}`): both sides must be numbers or both strings",
                    l.rust_name,
                    type_text(l.ty),
                    r.rust_name,
                    type_text(r.ty)
                ),
            ),
            (Some(_), Some(_)) => {}
            _ => assertions.push(Assertion {
                func: "assert_comparable",
                types: vec![l.ty, r.ty],
                span: rule.lit.span(),
            }),
        }
    }
}

/// `both_or_neither` and `at_least_one` name `Option` fields of the struct.
fn check_groups<'a>(
    cx: &Ctxt,
    cont: &Container<'a>,
    fields: &[Field<'a>],
    assertions: &mut Vec<Assertion<'a>>,
) {
    for group in &cont.attrs.groups {
        let text = group.text();
        let key = &group.key;
        let mut names: Vec<String> = Vec::new();
        for ident in &group.fields {
            let name = ident.to_string();
            if names.contains(&name) {
                cx.error_spanned_by(ident, format!("`{name}` is listed twice in `{text}`"));
                continue;
            }
            names.push(name.clone());
            match lookup(fields, &name, &format!("`{text}`")) {
                Err(msg) => cx.error_spanned_by(ident, msg),
                Ok(f) if f.info.is_option() => {}
                Ok(f) if f.info.wrappers.is_empty() && f.info.scalar == Scalar::Other => assertions
                    .push(Assertion {
                        func: "assert_option",
                        types: vec![f.ty],
                        span: ident.span(),
                    }),
                Ok(f) => cx.error_spanned_by(
                    ident,
                    format!(
                        "`{key}` needs `Option` fields, `{name}` is `{}`",
                        type_text(f.ty)
                    ),
                ),
            }
        }
    }
}
