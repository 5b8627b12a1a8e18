//! Why a grounded grammar cannot be built ([`GroundedGrammarError`]).

/// Why a grounded grammar cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroundedGrammarError {
    /// The contract's root is not an object.
    #[error("a grounded grammar needs an object contract, `{0}` is not one")]
    NotAnObject(String),
    /// A required value has nothing it could be copied from.
    #[error("no value of `{field}` can be copied from {place}")]
    Nothing {
        /// The field.
        field: String,
        /// Where it was looked for.
        place: String,
    },
    /// The segment does not exist.
    #[error("segment {0} does not exist")]
    NoSegment(usize),
    /// The document offers more text to copy from than a grounded grammar holds.
    #[error(
        "the document offers {chars} characters to copy `{field}` from, more than a grounded \
         grammar holds ({max}): cut it into passages (`contract_core::passage`) and extract from \
         the passages"
    )]
    TooLong {
        /// The field.
        field: String,
        /// The characters its substring alternatives would hold.
        chars: usize,
        /// The most they may hold
        /// ([`MAX_OFFERED_CHARS`](crate::grammar::lark::MAX_OFFERED_CHARS)).
        max: usize,
    },
}
