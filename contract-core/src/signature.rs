//! The one-line signature a model reads.

use crate::contract::ContractSpec;

/// `{"quarter": integer 1-4 | null, ...}` for `spec`.
pub fn signature(spec: &ContractSpec) -> String {
    let _ = spec;
    todo!()
}
