//! Built-in value types, each itself a contract.
//!
//! They make answers auditable: the model copies what the document says, the library computes
//! the rest when it reads the value ([`Contract::normalize`](crate::Contract::normalize)),
//! with the document's conventions ([`DocContext`](crate::DocContext)):
//!
//! | type | the model copies | the library computes |
//! |---|---|---|
//! | [`DateValue`] | `original`, one whole date (`05 MAR 2018`) | `iso` (`2018-03-05`), day or month first as the document writes dates |
//! | [`Amount`] | `value`, `currency` and `unit` as written (`60.30`, `RM`, null) | `code` (`MYR`), the scale ([`Amount::in_scale`]) |
//! | [`Period`] | `original`, one whole period (`the upcoming quarter`) | `quarter` / `half` / `month`, `year`, `fiscal` |
//! | [`DurationValue`] | `original`, one whole duration (`three (3) years`) | `count`, `unit`, `normalized` (`3 years`) |
//! | [`NameValue`] | `original`, a name as written (`the Company`) | `name`, the full name a defined short name stands for (`Acme Widgets, Inc.`) |
//!
//! A value the library cannot read for certain (an ambiguous date, an unknown currency) is a
//! violation, never a guess. Every value can carry the lines it came from ([`Evidenced`],
//! [`Span`]).

mod amount;
mod date;
mod duration;
mod evidence;
mod name;
mod period;
mod table;

pub use crate::read::{Scale, ScaleError};
pub use amount::Amount;
pub use date::DateValue;
pub use duration::DurationValue;
pub use evidence::{Evidenced, Feedback, Span};
pub use name::NameValue;
pub use period::Period;
pub use table::TableValue;
