//! `contract`: make a language model fill a typed contract instead of writing an answer.
//!
//! `#[derive(Contract)]` on an annotated struct gives a JSON Schema, the OpenAI strict subset, a
//! one-line prompt signature, field docs and validators, all computed from one IR: a tree of
//! [`ir::Node`]s (a typed JSON Schema, every constraint on the node it applies to) that the
//! derive builds per contract ([`ContractSpec::node`]) and [`DynContract::from_schema`] reads
//! from a schema received at run time.
//!
//! ```
//! use contract_core::Contract;
//!
//! /// Next-quarter revenue guidance stated in an earnings release.
//! #[derive(Contract, Debug, serde::Serialize, serde::Deserialize)]
//! #[contract(rule = "low <= high", both_or_neither(low, high))]
//! struct Guidance {
//!     #[contract(range = 1..=4)]
//!     quarter: Option<u8>,
//!     #[contract(exclusive_min = 0, unit = "USD millions")]
//!     low: Option<f64>,
//!     #[contract(exclusive_min = 0, unit = "USD millions")]
//!     high: Option<f64>,
//! }
//!
//! let g = Guidance::from_json(r#"{"quarter": 3, "low": 7230, "high": 7650}"#).unwrap();
//! assert_eq!(g.quarter, Some(3));
//! let err = Guidance::from_json(r#"{"quarter": 5, "low": 9, "high": 7}"#).unwrap_err();
//! assert_eq!(err.len(), 2); // quarter out of range, and low > high
//! ```

extern crate self as contract_core;

mod attrs;
pub mod audit;
mod bounds;
mod cache;
pub mod chunk;
pub mod compute;
mod constraint;
mod context;
mod contract;
pub mod decimal;
pub mod docs;
pub mod dynamic;
pub mod extract;
mod field;
pub mod grammar;
pub mod ground;
pub mod ir;
pub mod judge;
mod num;
pub mod parse;
pub mod passage;
pub mod prompt;
pub mod read;
pub mod schema;
pub mod select;
pub mod signature;
pub mod source;
pub mod stream;
pub mod validate;
pub mod values;

pub use audit::{extract_pages, Audit, PageExtraction};
pub use compute::{ComputeError, Converted, Decision, Rates, Threshold};
pub use constraint::{Constraint, Decoding};
pub use context::{Adjust, DocContext};
pub use contract::*;
pub use contract_derive::Contract;
pub use dynamic::{DynContract, SchemaError};
pub use extract::{
    Backend, BackendError, Extraction, Extractor, Request, Response, ScoreRequest, ScoreResponse,
};
pub use ir::{FieldSpec, ObjectNode};
pub use parse::{parse_output, Level, Parsed};
pub use schema::{StrictSchema, StrictSchemaError};
pub use source::{completeness, Completeness, Source};
pub use validate::{Violation, ViolationKind, Violations};
pub use values::{
    Amount, DateValue, DurationValue, Evidenced, Feedback, NameValue, Period, Scale, ScaleError,
    Span, TableValue,
};

#[doc(hidden)]
pub mod __private;
