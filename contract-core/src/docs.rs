//! Field reference in Markdown.

use crate::contract::ContractSpec;

/// A Markdown field reference for `spec` and the contracts nested in it.
pub fn docs_markdown(spec: &ContractSpec) -> String {
    let _ = spec;
    todo!()
}
