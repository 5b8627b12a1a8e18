//! What `#[derive(Contract)]` expands to. Not a public API.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

pub use schemars;
pub use serde;
pub use serde_json;
pub use std::borrow::Cow;
pub use std::option::Option::{self, None, Some};
pub use std::sync::OnceLock as Lazy;
pub use std::vec::Vec;

pub use crate::contract::*;
pub use crate::validate::{join_pointer, Violation, Violations};

/// An object contract's IR.
pub fn object_spec(
    name: &str,
    description: Option<&str>,
    fields: Vec<FieldSpec>,
    rules: Vec<Rule>,
    checks: &[&str],
    skipped: &[&str],
) -> ContractSpec {
    ContractSpec {
        name: name.to_owned(),
        description: description.map(str::to_owned),
        kind: SpecKind::Object(ObjectSpec {
            fields,
            rules,
            checks: checks.iter().map(|s| (*s).to_owned()).collect(),
            skipped: skipped.iter().map(|s| (*s).to_owned()).collect(),
        }),
    }
}

/// An enum contract's IR; `variants` are (JSON name, description).
pub fn enum_spec(
    name: &str,
    description: Option<&str>,
    variants: &[(&str, Option<&str>)],
) -> ContractSpec {
    ContractSpec {
        name: name.to_owned(),
        description: description.map(str::to_owned),
        kind: SpecKind::Enum(EnumSpec {
            variants: variants
                .iter()
                .map(|(n, d)| VariantSpec {
                    name: (*n).to_owned(),
                    description: d.map(str::to_owned),
                })
                .collect(),
        }),
    }
}

/// One field's IR.
pub fn field(
    name: &str,
    rust_name: &str,
    ty: TypeSpec,
    description: Option<&str>,
    unit: Option<&str>,
    constraints: Constraints,
) -> FieldSpec {
    FieldSpec {
        name: name.to_owned(),
        rust_name: rust_name.to_owned(),
        ty,
        description: description.map(str::to_owned),
        constraints,
        unit: unit.map(str::to_owned),
    }
}

/// A pattern the derive already checked.
pub fn pattern(source: &str) -> Pattern {
    match Pattern::new(source) {
        Ok(p) => p,
        Err(e) => panic!("pattern `{source}` was accepted at compile time but not at run time: {e}"),
    }
}

/// A format name the derive already checked.
pub fn format(name: &str) -> Format {
    match Format::from_name(name) {
        Some(f) => f,
        None => panic!("unknown format `{name}`"),
    }
}

/// An integer bound.
pub fn int(value: i128) -> serde_json::Number {
    if let Ok(v) = i64::try_from(value) {
        serde_json::Number::from(v)
    } else if let Ok(v) = u64::try_from(value) {
        serde_json::Number::from(v)
    } else {
        float(value as f64)
    }
}

/// A float bound.
pub fn float(value: f64) -> serde_json::Number {
    match serde_json::Number::from_f64(value) {
        Some(n) => n,
        None => panic!("bound {value} is not finite"),
    }
}

/// A string `one_of` value.
pub fn str_value(value: &str) -> serde_json::Value {
    serde_json::Value::String(value.to_owned())
}

/// The IR of a generic contract, built once per instantiation.
pub fn spec_cache<T: 'static>(build: fn() -> ContractSpec) -> &'static ContractSpec {
    static CACHE: OnceLock<Mutex<HashMap<TypeId, &'static ContractSpec>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = TypeId::of::<T>();
    if let Some(spec) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return spec;
    }
    // Built outside the lock: building may ask for the specs of nested generic contracts.
    let spec: &'static ContractSpec = Box::leak(Box::new(build()));
    *cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_insert(spec)
}

/// The schema of a contract inside a schemars generator (what `impl JsonSchema` returns).
pub fn schema_for_spec(
    spec: &ContractSpec,
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    crate::schema::contract_schema(spec, generator)
}

/// Records the result of a custom check run at JSON pointer `pointer`.
pub fn push_check(result: CheckResult, pointer: &str, out: &mut Violations) {
    if let Err(violation) = result {
        out.push(violation.prefixed(pointer));
    }
}
