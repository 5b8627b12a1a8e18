//! Reading a contract from a JSON Schema file.

use std::path::Path;

use contract_core::ir::JsonType;
use contract_core::DynContract;
use serde_json::Value;

use crate::error::CliError;

/// The contract of the schema file `path`.
pub fn load(path: &Path) -> Result<DynContract, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Schema(format!("{}: {e}", path.display())))?;
    let schema: Value = serde_json::from_str(&text).map_err(|e| {
        CliError::Schema(format!(
            "{}: not JSON ({e}); a contract is a JSON Schema document",
            path.display()
        ))
    })?;
    DynContract::from_schema(schema).map_err(|e| {
        CliError::Schema(format!(
            "{}: {e}; fix that part of the schema (`contract show` lists what each keyword \
             reaches)",
            path.display()
        ))
    })
}

/// [`load`], for extraction: the root must describe a JSON object (the model fills one object).
pub fn load_for_extraction(path: &Path) -> Result<DynContract, CliError> {
    let contract = load(path)?;
    let root = contract.document().root();
    let object =
        root.object.is_some() || root.types.contains(&JsonType::Object) || root.reference.is_some();
    if !object {
        return Err(CliError::Schema(format!(
            "{}: the root schema at `/` must describe an object (`\"type\": \"object\"` with \
             `properties`): a model fills one JSON object per document",
            path.display()
        )));
    }
    Ok(contract)
}
