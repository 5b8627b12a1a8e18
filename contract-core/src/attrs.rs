//! What a field declares beyond its Rust type, as the derive reads its attributes and a runtime
//! schema its keywords: [`FieldAttrs`] (bounds, lengths, [`Pattern`], `one_of`, [`Format`],
//! [`Grounding`], [`Form`], the evidence question and group), and the cross-field [`Rule`]s
//! (parsed by `contract-rules`). [`Node::field`](crate::ir::Node::field) places each on the IR
//! node it applies to.
//!
//! A leaf of the crate: it imports nothing else of it but the numeric bounds' leaf.

use std::fmt;

use serde_json::Value;

use crate::bounds::NumberBounds;

/// A field's constraint attributes, as the derive reads them.
///
/// Numeric bounds, `pattern`, `format` and `one_of` apply to the scalar inside `Option` and
/// `Vec`; `len` applies to the string or list itself:
/// [`Node::field`](crate::ir::Node::field) places each on the IR node it applies to, once, and
/// nothing downstream reads this again.
#[derive(Debug, Clone, Default)]
pub struct FieldAttrs {
    /// A number's bounds (`range = ..`).
    pub bounds: NumberBounds,
    /// Shortest string (in characters) or list.
    pub min_len: Option<u64>,
    /// Longest string (in characters) or list.
    pub max_len: Option<u64>,
    /// A regular expression the string must contain a match of (JSON Schema semantics:
    /// unanchored; anchor it with `^...$`).
    pub pattern: Option<Pattern>,
    /// The allowed values.
    pub one_of: Option<Vec<Value>>,
    /// A string format.
    pub format: Option<Format>,
    /// Where the value must be found: a grounded value is copied from the source, never
    /// composed by the model (`#[contract(grounded)]`).
    pub grounded: Option<Grounding>,
    /// What kind of expression a text value is (`#[contract(form = date)]`): copied whole from
    /// the document when grounded, and read by code afterwards.
    pub form: Option<Form>,
    /// The question that finds the field's evidence (`#[contract(question = "..")]`), asked of
    /// every passage of a document; by default one is made from the field's doc comment.
    pub question: Option<String>,
    /// The fields judged and extracted together (`#[contract(group = "..")]`): fields with the
    /// same group share their evidence passages.
    pub group: Option<String>,
}

/// Where a grounded value must be found.
///
/// A grounded string is a verbatim substring of that text (whitespace runs compare equal); a
/// grounded number is a number the text writes, read with the text's numeral conventions and
/// compared as decimal text. For `Option` and `Vec` fields it applies to each value inside.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grounding {
    /// Anywhere in the source document (`#[contract(grounded)]`).
    Source,
    /// A whole line of the source document, its surrounding whitespace trimmed; where the layout
    /// wrapped a sentence over two or three lines, the whole sentence instead, its line breaks
    /// written as spaces (`#[contract(grounded(line))]`;
    /// [`ground::quotable_lines`](crate::ground::quotable_lines)): a quoted sentence that cannot
    /// stop halfway.
    Line,
    /// Inside the text of an earlier field of the same object, by JSON name
    /// (`#[contract(grounded(in = quote))]`): the string itself, or the source lines of the
    /// spans inside it.
    In(String),
    /// Inside the source lines from the value of field `start` to the value of field `end`
    /// (1-based, inclusive), both earlier integer fields of the same object
    /// (`#[contract(grounded(in = start_line..=end_line))]`): how [`Span::quote`](crate::Span)
    /// lies in its lines.
    Lines {
        /// The field holding the first line.
        start: String,
        /// The field holding the last line.
        end: String,
    },
    /// Grounded where the value containing it is grounded, in the same text; not grounded
    /// otherwise (`#[contract(grounded(with_container))]`): how `Amount.value` and `Amount.unit`
    /// are copied when an `Amount` field is grounded.
    WithContainer,
}

impl Grounding {
    /// The fields of the same object this grounding reads.
    pub fn depends_on(&self) -> Vec<&str> {
        match self {
            Grounding::In(field) => vec![field.as_str()],
            Grounding::Lines { start, end } => vec![start.as_str(), end.as_str()],
            Grounding::Source | Grounding::Line | Grounding::WithContainer => Vec::new(),
        }
    }

    /// Reads the JSON Schema keyword `x-grounded` (as
    /// [`Contract::json_schema`](crate::Contract::json_schema) writes it).
    pub fn from_keyword(value: &Value) -> Option<Grounding> {
        match value {
            Value::String(s) if s == "source" => Some(Grounding::Source),
            Value::String(s) if s == "line" => Some(Grounding::Line),
            Value::String(s) if s == "with_container" => Some(Grounding::WithContainer),
            Value::Object(m) => {
                if let Some(Value::String(field)) = m.get("in") {
                    return Some(Grounding::In(field.clone()));
                }
                match m.get("lines").and_then(Value::as_array).map(Vec::as_slice) {
                    Some([Value::String(start), Value::String(end)]) => Some(Grounding::Lines {
                        start: start.clone(),
                        end: end.clone(),
                    }),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// How a reader is told where the value comes from (`copied from the document`).
    pub fn words(&self) -> String {
        match self {
            Grounding::Source => "copied from the document".into(),
            Grounding::Line => "a whole line copied from the document".into(),
            Grounding::In(field) => format!("copied from `{field}`"),
            Grounding::Lines { start, end } => {
                format!("copied from lines `{start}`..`{end}`")
            }
            Grounding::WithContainer => "copied where its container is".into(),
        }
    }
}

impl FieldAttrs {
    /// Whether no constraint is set.
    pub fn is_empty(&self) -> bool {
        self.bounds.is_unbounded()
            && self.min_len.is_none()
            && self.max_len.is_none()
            && self.pattern.is_none()
            && self.one_of.is_none()
            && self.format.is_none()
            && self.grounded.is_none()
            && self.form.is_none()
            && self.question.is_none()
            && self.group.is_none()
    }
}

/// A compiled `pattern`.
#[derive(Clone)]
pub struct Pattern {
    source: String,
    regex: Option<regex::Regex>,
}

impl Pattern {
    /// Compiles `source`.
    pub fn new(source: &str) -> Result<Self, regex::Error> {
        Ok(Pattern {
            source: source.to_owned(),
            regex: Some(regex::Regex::new(source)?),
        })
    }

    /// A pattern kept as text only: a runtime schema's pattern in a dialect the `regex` crate
    /// does not compile (lookaround, backreferences). The renderings show it; the runtime
    /// contract's validator (the `jsonschema` crate) enforces it; [`Pattern::is_match`] does not.
    pub fn uncompiled(source: &str) -> Self {
        Pattern {
            source: source.to_owned(),
            regex: None,
        }
    }

    /// Whether the pattern compiled (always, for a derived contract's: the derive checks them).
    pub fn is_compiled(&self) -> bool {
        self.regex.is_some()
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `text` contains a match (`true` for an [uncompiled](Pattern::uncompiled)
    /// pattern, which this crate does not check).
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.as_ref().is_none_or(|r| r.is_match(text))
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.source)
    }
}

/// The kind of expression a text value is: what a grounded value must be copied whole as, and
/// what code reads it as afterwards (`#[contract(form = date)]`, the JSON Schema keyword
/// `x-form`).
///
/// A grounded value with a form is one whole expression of that kind the document writes (a
/// model cannot copy `2018` out of `05 MAR 2018`, nor `3` out of `three (3) years`); an
/// ungrounded one must read as such an expression. The value types carry it on the text the
/// model copies: [`DateValue::original`](crate::DateValue) is a date, an
/// [`Amount`](crate::Amount)'s currency a currency and its unit a scale word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Form {
    /// A calendar date as written (`05 MAR 2018`, `19/10/2018`, `April 18, 2001`).
    Date,
    /// A currency as written (`RM`, `$`, `€`, `USD`, `euros`).
    Currency,
    /// A scale word as written (`million`, `bn`, `mil millones`).
    Scale,
    /// A reporting period as written (`Q3 2024`, `the upcoming quarter`, `fiscal 2025`).
    Period,
    /// A length of time as written (`three (3) years`, `12 months`).
    Duration,
}

impl Form {
    /// Every form, in the order the docs list them.
    pub const ALL: [Form; 5] = [
        Form::Date,
        Form::Currency,
        Form::Scale,
        Form::Period,
        Form::Duration,
    ];

    /// The name `x-form` and `#[contract(form = ..)]` use (`date`).
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Date => "date",
            Form::Currency => "currency",
            Form::Scale => "scale",
            Form::Period => "period",
            Form::Duration => "duration",
        }
    }

    /// The form named `name`.
    pub fn from_name(name: &str) -> Option<Form> {
        Form::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// How a reader is told what the value is (`a date as written`).
    pub fn words(self) -> &'static str {
        match self {
            Form::Date => "a date as written",
            Form::Currency => "a currency as written",
            Form::Scale => "a scale word as written",
            Form::Period => "a period as written",
            Form::Duration => "a length of time as written",
        }
    }
}

/// String formats a contract field may require.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// `2024-03-15` (RFC 3339 full-date).
    Date,
    /// `2024-03-15T10:00:00Z` (RFC 3339 date-time).
    DateTime,
    /// `10:00:00Z` (RFC 3339 full-time).
    Time,
    /// An e-mail address.
    Email,
    /// A hyphenated UUID.
    Uuid,
    /// An IPv4 address.
    Ipv4,
    /// An IPv6 address.
    Ipv6,
    /// A DNS host name.
    Hostname,
}

impl Format {
    /// Every supported format, in the order the docs list them.
    pub const ALL: [Format; 8] = [
        Format::Date,
        Format::DateTime,
        Format::Time,
        Format::Email,
        Format::Uuid,
        Format::Ipv4,
        Format::Ipv6,
        Format::Hostname,
    ];

    /// The JSON Schema name (`date-time`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Date => "date",
            Format::DateTime => "date-time",
            Format::Time => "time",
            Format::Email => "email",
            Format::Uuid => "uuid",
            Format::Ipv4 => "ipv4",
            Format::Ipv6 => "ipv6",
            Format::Hostname => "hostname",
        }
    }

    /// The format with this JSON Schema name.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

pub use contract_rules::{CmpOp, Rule};
