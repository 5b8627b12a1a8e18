//! A JSON value's type as a schema's `type` names it: read by the validator's `x-rules` typing
//! (`validator`) and by the choice of the typed grammar (`typed`). A leaf: it imports nothing of
//! the crate.

use serde_json::Value;

/// Whether `value` is of the JSON type named `name` (`integer`: a number without a fraction,
/// `1.0` included, as JSON Schema reads it); `false` for a name that is no type.
pub(super) fn is_of_type(name: &str, value: &Value) -> bool {
    match (name, value) {
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("null", Value::Null)
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        _ => false,
    }
}
