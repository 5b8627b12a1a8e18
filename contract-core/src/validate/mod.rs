//! Violations and the validators: `from_json`, `from_value` and `validate` on typed values.
//!
//! Where each part lives: [`Violation`]s and JSON pointers in `violation.rs`; the entry points
//! (`from_json`, `from_value`, `validate_typed`, `check_value`, `strip_skipped`) in `entry.rs`;
//! the checker's walk over a value and the cross-field rules in `check.rs`; `from_json`'s fast
//! path for flat objects in `flat.rs`, over the reader in `read.rs`; the parsed document and the
//! views the checker reads in `doc.rs`; string formats in `format.rs`; how messages are written
//! in `message.rs`; what the validator needs of a typed contract ([`Checked`]) in `checked.rs`;
//! where a value sits (its pointer and its name in messages) in `path.rs`. Numbers are compared
//! exactly by the crate's `num.rs`, which the bounds and the grounded grammar use too.

#[macro_use]
mod message;
mod check;
mod checked;
mod doc;
mod entry;
mod flat;
mod format;
mod path;
mod read;
mod violation;

pub(crate) use check::rule_violations;
pub use checked::Checked;
pub(crate) use doc::{Doc, Json, JsonMap, View};
pub(crate) use entry::from_doc_with;
pub use entry::{
    check_value, from_json, from_json_with, from_value, from_value_in, strip_skipped,
    validate_typed,
};
pub use format::format_ok;
pub(crate) use read::tree;
pub use violation::{join_pointer, Violation, ViolationKind, Violations};
