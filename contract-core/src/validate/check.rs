//! Checking JSON values against the IR.

use serde_json::Value;

use super::Violations;
use crate::contract::{Contract, ContractSpec};

/// `C::from_json`.
pub fn from_json<C: Contract>(text: &str) -> Result<C, Violations> {
    let _ = text;
    todo!()
}

/// `C::from_value`.
pub fn from_value<C: Contract>(value: &Value) -> Result<C, Violations> {
    let _ = value;
    todo!()
}

/// `value.validate()`.
pub fn validate_typed<C: Contract>(value: &C) -> Result<(), Violations> {
    let _ = value;
    todo!()
}

/// Checks `value` (at JSON pointer `pointer`) against `spec`: field constraints and rules.
pub fn check_value(spec: &ContractSpec, value: &Value, pointer: &str, out: &mut Violations) {
    let _ = (spec, value, pointer, out);
    todo!()
}
