use std::fmt::{self, Display};

use syn::{Ident, Path};

#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Symbol(pub &'static str);

// Attribute paths.
pub const CONTRACT: Symbol = Symbol("contract");
pub const SERDE: Symbol = Symbol("serde");
pub const DOC: Symbol = Symbol("doc");

// Container keys of `#[contract(..)]`.

// #[contract(description = "Next-quarter revenue guidance")]
pub const DESCRIPTION: Symbol = Symbol("description");
// #[contract(rule = "low <= high")]
pub const RULE: Symbol = Symbol("rule");
// #[contract(both_or_neither(low, high))]
pub const BOTH_OR_NEITHER: Symbol = Symbol("both_or_neither");
// #[contract(at_least_one(email, phone))]
pub const AT_LEAST_ONE: Symbol = Symbol("at_least_one");
// #[contract(check = path::to::check_fn)]
pub const CHECK: Symbol = Symbol("check");
// #[contract(normalize = path::to::normalize_fn)]
pub const NORMALIZE: Symbol = Symbol("normalize");
// #[contract(question = "does this passage state the total amount paid?")] (also a field key)
pub const QUESTION: Symbol = Symbol("question");

// Field keys of `#[contract(..)]`.

// #[contract(range = 1..=4)], #[contract(range = 0.0..1.0)], #[contract(range = 5..)]
pub const RANGE: Symbol = Symbol("range");
// #[contract(min = 0)]
pub const MIN: Symbol = Symbol("min");
// #[contract(max = 10)]
pub const MAX: Symbol = Symbol("max");
// #[contract(exclusive_min = 0)]
pub const EXCLUSIVE_MIN: Symbol = Symbol("exclusive_min");
// #[contract(exclusive_max = 1.5)]
pub const EXCLUSIVE_MAX: Symbol = Symbol("exclusive_max");
// #[contract(len = 1..=80)], #[contract(len = 3)], #[contract(len = ..=10)]
pub const LEN: Symbol = Symbol("len");
// #[contract(pattern = "^[A-Z]{3}$")]
pub const PATTERN: Symbol = Symbol("pattern");
// #[contract(one_of = ["USD", "EUR"])], #[contract(one_of = [1, 2, 3])]
pub const ONE_OF: Symbol = Symbol("one_of");
// #[contract(format = "date")]
pub const FORMAT: Symbol = Symbol("format");
// #[contract(unit = "USD millions")]
pub const UNIT: Symbol = Symbol("unit");
// #[contract(grounded)], #[contract(grounded(in = quote))],
// #[contract(grounded(in = start_line..=end_line))], #[contract(grounded(with_container))]
pub const GROUNDED: Symbol = Symbol("grounded");
// grounded(in = quote)
pub const IN: Symbol = Symbol("in");
// grounded(line)
pub const LINE: Symbol = Symbol("line");
// grounded(with_container)
pub const WITH_CONTAINER: Symbol = Symbol("with_container");
// #[contract(skip)]
pub const SKIP: Symbol = Symbol("skip");
// #[contract(json_schema)]
pub const JSON_SCHEMA: Symbol = Symbol("json_schema");
// #[contract(form = date)], #[contract(form = "currency")]
pub const FORM: Symbol = Symbol("form");
// #[contract(group = "guidance")]
pub const GROUP: Symbol = Symbol("group");

// The keys of `#[serde(..)]` the derive supports (serde_derive_internals reads what they mean);
// any other is an error: the contract could not describe the JSON shape.

/// On a struct or enum: `rename`, `rename_all` (with one name each), `deny_unknown_fields` (the
/// contract is closed anyway), and keys that leave the JSON as it is.
pub const SERDE_CONTAINER_KEYS: &[&str] = &[
    "rename",
    "rename_all",
    "deny_unknown_fields",
    "bound",
    "crate",
    "expecting",
];

/// On a field (`default` and `skip_serializing` only where the model never writes it).
pub const SERDE_FIELD_KEYS: &[&str] = &[
    "rename",
    "skip",
    "skip_serializing",
    "skip_deserializing",
    "default",
    "bound",
];

/// On an enum variant.
pub const SERDE_VARIANT_KEYS: &[&str] = &["rename", "skip", "skip_deserializing", "bound"];

/// The container keys of `#[contract(..)]`, for "did you mean" hints.
pub const CONTAINER_KEYS: &[Symbol] = &[
    DESCRIPTION,
    RULE,
    BOTH_OR_NEITHER,
    AT_LEAST_ONE,
    CHECK,
    NORMALIZE,
    QUESTION,
];

/// The field keys of `#[contract(..)]`.
pub const FIELD_KEYS: &[Symbol] = &[
    DESCRIPTION,
    RANGE,
    MIN,
    MAX,
    EXCLUSIVE_MIN,
    EXCLUSIVE_MAX,
    LEN,
    PATTERN,
    ONE_OF,
    FORMAT,
    UNIT,
    GROUNDED,
    SKIP,
    JSON_SCHEMA,
    FORM,
    QUESTION,
    GROUP,
];

/// The variant keys of `#[contract(..)]`.
pub const VARIANT_KEYS: &[Symbol] = &[DESCRIPTION];

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for &Ident {
    fn eq(&self, word: &Symbol) -> bool {
        *self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for &Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl Display for Symbol {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str(self.0)
    }
}
