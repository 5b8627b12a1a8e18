//! Built-in value types, each itself a contract.
//!
//! They make answers auditable: the model copies what the document says ([`Amount`] keeps the
//! scale word as written, [`DateValue`] keeps the original text), code does the arithmetic, and
//! every value can carry the lines it came from ([`Evidenced`], [`Span`]).

mod amount;
mod date;
mod evidence;
mod table;

pub(crate) use amount::scale_word;
pub use amount::{Amount, Scale, ScaleError};
pub use date::DateValue;
pub use evidence::{Evidenced, Feedback, Span};
pub use table::TableValue;
