//! [`GroupPlan`]: one group of fields as the extractor asks for it under selection, built once
//! per extractor (`selected.rs` builds and uses it; the extractor keeps it).

use std::sync::Arc;

use crate::constraint::Constraint;
use crate::ir::ContractSpec;
use crate::prompt::PromptParts;
use crate::select::FieldGroup;

/// One group of fields as the extractor asks for it under selection: the group, the part of the
/// contract it covers, its constraint and its prompt.
pub(super) struct GroupPlan {
    pub(super) group: FieldGroup,
    pub(super) spec: ContractSpec,
    pub(super) constraint: Arc<Constraint>,
    pub(super) parts: PromptParts,
}
