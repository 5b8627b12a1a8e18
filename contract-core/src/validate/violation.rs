//! Violations: what a validator reports (a kind, a JSON pointer, a message), and JSON pointers.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What kind of rule a value broke. Serialized snake_case; a kind never changes meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ViolationKind {
    /// The text is not one JSON value.
    JsonInvalid,
    /// A required key is absent.
    MissingField,
    /// A key the contract does not have.
    ExtraField,
    /// A value of the wrong JSON type.
    TypeMismatch,
    /// A number outside its bounds.
    OutOfRange,
    /// A string without a match of its `pattern`.
    PatternMismatch,
    /// A string that is not a valid value of its `format`.
    FormatMismatch,
    /// A value outside `one_of` or an enum.
    EnumMismatch,
    /// A string or list too short or too long.
    Length,
    /// A cross-field rule does not hold.
    CrossField,
    /// A table row not as wide as the headers.
    TableShape,
    /// A custom check failed.
    Custom,
    /// An evidence span cites lines outside the source document.
    EvidenceOutOfBounds,
    /// An evidence span's quote is not in the lines it cites.
    EvidenceMismatch,
    /// A value that breaks a combination of subschemas of a runtime contract: no `anyOf` /
    /// `oneOf` branch matches (or more than one `oneOf` branch), it matches a `not`, no item
    /// matches `contains`, a key breaks `propertyNames`.
    SchemaMismatch,
    /// A list whose items must be unique (`uniqueItems`) repeats one.
    DuplicateItems,
    /// A grounded value that is not in the text it must be copied from (the source, or the
    /// field it is grounded in).
    NotInSource,
}

impl ViolationKind {
    /// The snake_case name (`out_of_range`).
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::JsonInvalid => "json_invalid",
            ViolationKind::MissingField => "missing_field",
            ViolationKind::ExtraField => "extra_field",
            ViolationKind::TypeMismatch => "type_mismatch",
            ViolationKind::OutOfRange => "out_of_range",
            ViolationKind::PatternMismatch => "pattern_mismatch",
            ViolationKind::FormatMismatch => "format_mismatch",
            ViolationKind::EnumMismatch => "enum_mismatch",
            ViolationKind::Length => "length",
            ViolationKind::CrossField => "cross_field",
            ViolationKind::TableShape => "table_shape",
            ViolationKind::Custom => "custom",
            ViolationKind::EvidenceOutOfBounds => "evidence_out_of_bounds",
            ViolationKind::EvidenceMismatch => "evidence_mismatch",
            ViolationKind::SchemaMismatch => "schema_mismatch",
            ViolationKind::DuplicateItems => "duplicate_items",
            ViolationKind::NotInSource => "not_in_source",
        }
    }

    /// Whether the kind is about one field's value alone (what JSON Schema can express).
    pub fn is_field_level(self) -> bool {
        !matches!(
            self,
            ViolationKind::CrossField
                | ViolationKind::TableShape
                | ViolationKind::Custom
                | ViolationKind::EvidenceOutOfBounds
                | ViolationKind::EvidenceMismatch
                | ViolationKind::NotInSource
        )
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule: where (a JSON pointer), what kind, and a message for humans and for the
/// model's retry prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer of the offending value (`/low`, `/rows/2`); empty for the whole document.
    pub path: String,
    /// Machine-readable kind.
    pub kind: ViolationKind,
    /// What is wrong, with the names in backticks.
    pub message: String,
}

impl Violation {
    /// A violation at `path`.
    pub fn new(path: impl Into<String>, kind: ViolationKind, message: impl Into<String>) -> Self {
        Violation {
            path: path.into(),
            kind,
            message: message.into(),
        }
    }

    /// A `cross_field` violation at `path`.
    pub fn cross_field(path: impl Into<String>, message: impl Into<String>) -> Self {
        Violation::new(path, ViolationKind::CrossField, message)
    }

    /// The same violation with `prefix` (a JSON pointer) put before its path.
    pub fn prefixed(mut self, prefix: &str) -> Self {
        if !prefix.is_empty() {
            self.path = format!("{prefix}{}", self.path);
        }
        self
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {} ({})", self.message, self.kind)
    }
}

/// Every violation found in one value, in document order. Never empty when returned as an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Violations(pub Vec<Violation>);

impl Violations {
    /// No violations.
    pub fn new() -> Self {
        Violations(Vec::new())
    }

    /// One violation.
    pub fn one(violation: Violation) -> Self {
        Violations(vec![violation])
    }

    /// Adds a violation.
    pub fn push(&mut self, violation: Violation) {
        self.0.push(violation);
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Iterates over them.
    pub fn iter(&self) -> std::slice::Iter<'_, Violation> {
        self.0.iter()
    }

    /// Whether any has `kind`.
    pub fn has_kind(&self, kind: ViolationKind) -> bool {
        self.0.iter().any(|v| v.kind == kind)
    }

    /// `Ok(())` when empty, else `Err(self)`.
    pub fn into_result(self) -> Result<(), Violations> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.len() {
            0 => f.write_str("no violations"),
            1 => write!(f, "{}", self.0[0]),
            n => {
                write!(f, "{n} violations:")?;
                for v in &self.0 {
                    write!(f, "\n  {v}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Violations {}

impl IntoIterator for Violations {
    type Item = Violation;
    type IntoIter = std::vec::IntoIter<Violation>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Violations {
    type Item = &'a Violation;
    type IntoIter = std::slice::Iter<'a, Violation>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl Extend<Violation> for Violations {
    fn extend<I: IntoIterator<Item = Violation>>(&mut self, iter: I) {
        self.0.extend(iter)
    }
}

/// Appends `segment` to JSON pointer `base`, escaping `~` and `/`.
pub fn join_pointer(base: &str, segment: &str) -> String {
    let mut out = String::with_capacity(base.len() + segment.len() + 1);
    out.push_str(base);
    push_segment(&mut out, segment);
    out
}

/// [`join_pointer`] onto `out`: `/` and `segment`, escaped.
pub(crate) fn push_segment(out: &mut String, segment: &str) {
    out.push('/');
    // Most segments (field names, indices) need no escape: one copy instead of a push per
    // character.
    if !segment.bytes().any(|b| b == b'~' || b == b'/') {
        out.push_str(segment);
        return;
    }
    for c in segment.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}
