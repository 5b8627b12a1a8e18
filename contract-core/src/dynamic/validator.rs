//! The validator of a runtime contract: the `jsonschema` crate (formats enforced, `x-rules` as a
//! custom keyword, no remote references), its errors mapped to [`Violation`]s.

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

use std::sync::OnceLock;

use super::json_type::is_of_type;
use super::keywords::VALIDATOR_FORMATS;
use super::SchemaError;
use crate::attrs::Rule;
use crate::validate::{join_pointer, rule_violations, Violation, ViolationKind, Violations};

/// Separates the key a rule violation is reported at from its message.
const KEY_END: char = '\u{1f}';

/// Checkers of [`VALIDATOR_FORMATS`] as draft 2020-12 defines them, so that every draft checks
/// them (the `jsonschema` crate knows `uuid` and `duration` only from draft 2019-09 on, `iri`
/// from draft 7, ...; an unknown format would pass unchecked).
fn format_checkers() -> &'static [(&'static str, jsonschema::Validator)] {
    static CHECKERS: OnceLock<Vec<(&'static str, jsonschema::Validator)>> = OnceLock::new();
    CHECKERS.get_or_init(|| {
        VALIDATOR_FORMATS
            .iter()
            .filter_map(|&name| {
                let v = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .should_validate_formats(true)
                    .build(&serde_json::json!({ "format": name }))
                    .ok()?;
                Some((name, v))
            })
            .collect()
    })
}

pub(super) fn build(
    schema: &Value,
    refs: &[(String, String)],
) -> Result<jsonschema::Validator, SchemaError> {
    let mut options = jsonschema::options().should_validate_formats(true);
    for (name, checker) in format_checkers() {
        options = options.with_format(*name, move |text: &str| {
            checker.is_valid(&Value::String(text.to_owned()))
        });
    }
    options
        .with_keyword(
            "x-rules",
            |parent: &Map<String, Value>, value: &Value, _path| {
                let types = property_types(parent);
                let rules = value
                    .as_array()
                    .map(|rules| {
                        rules
                            .iter()
                            .filter_map(|r| r.as_str().and_then(Rule::parse))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Box::new(Rules { rules, types }) as Box<dyn for<'i> Keyword<'i>>)
            },
        )
        .build(schema)
        .map_err(|e| build_error(&e, refs))
}

fn build_error(e: &ValidationError<'_>, refs: &[(String, String)]) -> SchemaError {
    let message = e.to_string();
    if let ValidationErrorKind::Referencing(_) = e.kind() {
        // Point at the `$ref` the message names (the longest match, so `#/a/b` wins over `#/a`).
        let named = |r: &str| {
            let bare = r.trim_start_matches('#');
            !bare.is_empty() && (message.contains(r) || message.contains(&format!("'{bare}'")))
        };
        let found = refs
            .iter()
            .filter(|(_, r)| named(r))
            .max_by_key(|(_, r)| r.len())
            .or_else(|| refs.iter().find(|(_, r)| !r.starts_with('#')));
        if let Some((path, reference)) = found {
            return SchemaError::UnresolvedRef {
                path: path.clone(),
                reference: reference.clone(),
            };
        }
    }
    SchemaError::Invalid {
        path: e.instance_path().as_str().to_owned(),
        reason: message,
    }
}

/// The `x-rules` keyword: the object's cross-field rules, and the JSON types each property
/// declares (so that, as for a derived contract, a comparison holds when a side is not of its
/// field's type: the type keyword reports that).
struct Rules {
    rules: Vec<Rule>,
    types: Map<String, Value>,
}

/// The JSON types each of `object`'s properties declares (`type`, or the types of its `anyOf`
/// / `oneOf` branches), as an array of type names; a property whose types cannot be read off
/// (a `$ref`, no `type`) is left out, and any value of it is compared.
fn property_types(object: &Map<String, Value>) -> Map<String, Value> {
    fn types_of(schema: &Value, out: &mut Vec<Value>) -> bool {
        match schema.get("type") {
            Some(Value::String(t)) => out.push(Value::String(t.clone())),
            Some(Value::Array(ts)) => out.extend(ts.iter().cloned()),
            Some(_) => return false,
            None => {
                let branches = ["anyOf", "oneOf"]
                    .iter()
                    .find_map(|k| schema.get(*k).and_then(Value::as_array));
                let Some(branches) = branches else {
                    return false;
                };
                return branches.iter().all(|b| types_of(b, out));
            }
        }
        true
    }
    let mut out = Map::new();
    if let Some(Value::Object(props)) = object.get("properties") {
        for (name, schema) in props {
            let mut types = Vec::new();
            if types_of(schema, &mut types) {
                out.insert(name.clone(), Value::Array(types));
            }
        }
    }
    out
}

/// Whether `value` is of one of the JSON `types` ([`is_of_type`]).
fn of_type(types: &Value, value: &Value) -> bool {
    let Some(types) = types.as_array() else {
        return true;
    };
    types
        .iter()
        .filter_map(Value::as_str)
        .any(|t| is_of_type(t, value))
}

impl Rules {
    fn errors(&self, instance: &Value) -> Vec<ValidationError<'static>> {
        let Value::Object(map) = instance else {
            return Vec::new();
        };
        let comparable = |name: &str, v: &Value| self.types.get(name).is_none_or(|t| of_type(t, v));
        self.rules
            .iter()
            .flat_map(|rule| rule_violations::<Value>(rule, map, comparable))
            .map(|(key, message)| {
                ValidationError::custom(format!("{}{KEY_END}{message}", key.unwrap_or_default()))
            })
            .collect()
    }
}

impl<'i> Keyword<'i> for Rules {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        match self.errors(instance).into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        self.errors(instance).is_empty()
    }

    fn iter_errors(
        &self,
        instance: &'i Value,
    ) -> Box<dyn Iterator<Item = ValidationError<'i>> + 'i> {
        let errors: Vec<ValidationError<'i>> = self.errors(instance);
        Box::new(errors.into_iter())
    }
}

pub(super) fn validate(validator: &jsonschema::Validator, value: &Value) -> Result<(), Violations> {
    if validator.is_valid(value) {
        return Ok(());
    }
    let mut out = Violations::new();
    for e in validator.iter_errors(value) {
        push(&e, &mut out);
    }
    if out.is_empty() {
        // `is_valid` and `iter_errors` disagree only if the validator is broken: say so.
        out.push(Violation::new(
            "",
            ViolationKind::TypeMismatch,
            "the value does not match the schema",
        ));
    }
    out.into_result()
}

fn push(e: &ValidationError<'_>, out: &mut Violations) {
    use ValidationErrorKind as K;
    let path = e.instance_path().as_str();
    let kind = match e.kind() {
        K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => {
            for key in unexpected {
                out.push(Violation::new(
                    join_pointer(path, key),
                    ViolationKind::ExtraField,
                    format!("unknown field `{key}`"),
                ));
            }
            return;
        }
        K::Required { property } => {
            let key = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            out.push(Violation::new(
                join_pointer(path, &key),
                ViolationKind::MissingField,
                format!("missing field `{key}`"),
            ));
            return;
        }
        K::Custom { message, .. } => {
            if let Some((key, text)) = message.split_once(KEY_END) {
                let at = if key.is_empty() {
                    path.to_owned()
                } else {
                    join_pointer(path, key)
                };
                out.push(Violation::new(at, ViolationKind::CrossField, text));
            } else {
                out.push(Violation::new(path, ViolationKind::Custom, message.clone()));
            }
            return;
        }
        K::AdditionalItems { .. } | K::UnevaluatedItems { .. } => ViolationKind::ExtraField,
        K::FalseSchema => {
            // `"properties": {"x": false}` and the like: a key that must not be there.
            let parent = e.schema_path().as_str().rsplit('/').nth(1).unwrap_or("");
            if matches!(
                parent,
                "properties" | "patternProperties" | "additionalProperties"
            ) || e.schema_path().as_str().ends_with("additionalProperties")
            {
                ViolationKind::ExtraField
            } else {
                ViolationKind::TypeMismatch
            }
        }
        K::Type { .. } => ViolationKind::TypeMismatch,
        K::Minimum { .. }
        | K::Maximum { .. }
        | K::ExclusiveMinimum { .. }
        | K::ExclusiveMaximum { .. }
        | K::MultipleOf { .. } => ViolationKind::OutOfRange,
        K::Pattern { .. } | K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
            ViolationKind::PatternMismatch
        }
        K::Format { .. }
        | K::ContentEncoding { .. }
        | K::ContentMediaType { .. }
        | K::FromUtf8 { .. } => ViolationKind::FormatMismatch,
        K::Enum { .. } | K::Constant { .. } => ViolationKind::EnumMismatch,
        K::MinLength { .. }
        | K::MaxLength { .. }
        | K::MinItems { .. }
        | K::MaxItems { .. }
        | K::MinProperties { .. }
        | K::MaxProperties { .. } => ViolationKind::Length,
        K::UniqueItems => ViolationKind::DuplicateItems,
        K::AnyOf { .. }
        | K::OneOfNotValid { .. }
        | K::OneOfMultipleValid { .. }
        | K::Not { .. }
        | K::Contains
        | K::PropertyNames { .. } => ViolationKind::SchemaMismatch,
        K::Referencing(_) => ViolationKind::SchemaMismatch,
    };
    out.push(Violation::new(path, kind, e.to_string()));
}
