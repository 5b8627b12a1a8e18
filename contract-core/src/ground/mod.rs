//! Grounded values: a value the model copies from the document, checked against it.
//!
//! A field marked `#[contract(grounded)]` must come from the source: a string is a verbatim
//! substring (whitespace runs compare equal), a number is one the text writes, read with the
//! text's numeral conventions ([`Numerals`]) and compared as decimal text ([`Decimal`]), never
//! through an `f64`. `grounded(in = quote)` narrows the text to an earlier field's value (a
//! string, or the source lines of the spans inside it); `grounded(in = start_line..=end_line)` to
//! the lines two earlier fields name. Parts marked `grounded(with_container)` (`Amount.value`,
//! `Amount.unit`, `DateValue.original`) are grounded in whatever text their container is.
//!
//! [`check_grounding`] walks a value with its contract and reports every value outside its text
//! as a [`ViolationKind::NotInSource`] violation; [`Contract::from_json_in`](crate::Contract::from_json_in)
//! runs it after the other checks, and the [`Extractor`](crate::Extractor) runs it on every reply
//! of every backend, so a remote model's invented value is rejected and fed back on retry.
//!
//! A reply is read once: [`from_json_in`] and [`check_text`] parse it with the validator's reader
//! into its borrowed tree, which keeps each number's literal text
//! (`validate::read::tree`; why not serde_json's `arbitrary_precision` or `RawValue`s:
//! that module's comment), walk it for grounding, then hand the same tree to the validator.
//! Text that reader leaves to serde_json is read as before: a `Value`, then the literals by
//! pointer ([`number_literals`]), then `from_json`. [`check_grounding`] and [`check_reply`]
//! check a `Value` already parsed, with the literals from the reply's text.
//!
//! Where it lives: `numerals.rs` holds a text's numeral conventions ([`Numerals`]);
//! `numbers.rs` reads the numbers a text writes ([`Decimal`], [`numbers_in`]); this file holds
//! the texts a value is looked for in ([`GroundText`], [`Grounds`]) and the check itself.
//!
//! Reading numbers from prose is hand-written: no crate in the workspace reads `2,757` and
//! `1.730` by a document's conventions, and the comparison must be exact decimal text.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use crate::attrs::{Form, Grounding};
use crate::ir::{ContractSpec, JsonType, Node};
use crate::source::{citations, Source};
use crate::validate::{
    join_pointer, Checked, Doc, Json, JsonMap, View, Violation, ViolationKind, Violations,
};

mod numbers;
mod numerals;
mod quotable;

pub use numbers::{
    amounts_in, numbers_at, numbers_in, outside_dates, times_in, written_literal, Decimal,
};
pub use numerals::Numerals;
pub use quotable::{quotable_lines, MAX_VALUE_LINES};

/// The text a grounded value must lie in, and how to name it in a violation.
///
/// A string lies in it when, whitespace collapsed, it is a substring that starts and ends at
/// word boundaries ([`is_word_boundary`]): `2018` holds `2018` and `18` does not hold `20`.
#[derive(Debug, Clone)]
pub struct GroundText {
    /// The text as written.
    raw: String,
    /// The text (whitespace runs collapsed to single spaces).
    text: String,
    /// Its numbers.
    numbers: Vec<Decimal>,
    /// How it writes numbers.
    numerals: Numerals,
    /// Its numbers written outside dates and periods ([`GroundText::amounts`]), read when first
    /// asked for.
    amounts: OnceLock<Vec<Decimal>>,
    /// Where it is, for messages (`the document`, "`quote`", `lines 3 to 4`).
    pub place: String,
    /// When set, a string must be one of these whole lines (collapsed), not any substring.
    whole_lines: Option<Vec<String>>,
    /// When set, a string must lie within this many consecutive lines, none blank; with the
    /// offset in `text` where each non-empty line starts and its 0-based line number.
    window: Option<(usize, Vec<(usize, usize)>)>,
}

/// Whether a string lies in a [`GroundText`], and if not, why ([`GroundText::find_str`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrMatch {
    /// It lies there.
    Found,
    /// It is written there only inside a longer word: it starts or ends inside `word` (a run of
    /// letters and digits: `20` cut out of `2018`).
    CutsWord {
        /// The word it cuts, as the text writes it.
        word: String,
    },
    /// It is written there only across more consecutive lines than a value may span.
    TooManyLines {
        /// The most lines a value may span.
        max: usize,
    },
    /// It is written there only across a blank line.
    AcrossBlankLine,
    /// It is not written there (or it is empty).
    Missing,
}

/// Whether byte offset `at` of `text` is a word boundary: the start or the end of the text, or
/// a position that does not lie between two alphanumeric characters ([`char::is_alphanumeric`]:
/// letters and digits of any script). Words are runs of alphanumeric characters; a grounded
/// string starts and ends at boundaries, so it may start or end at any other character (a space,
/// `$`, `%`, `(`, `,`, `_`) but never inside a word. The grounded grammar cuts the text into the
/// same words (its chunks), so both agree.
pub fn is_word_boundary(text: &str, at: usize) -> bool {
    let (Some(before), Some(after)) = (text.get(..at), text.get(at..)) else {
        return false;
    };
    let prev = before.chars().next_back();
    let next = after.chars().next();
    !(prev.is_some_and(char::is_alphanumeric) && next.is_some_and(char::is_alphanumeric))
}

impl GroundText {
    /// `text`, named `place`, read with `numerals`.
    pub fn new(text: &str, place: impl Into<String>, numerals: Numerals) -> GroundText {
        GroundText {
            raw: text.to_owned(),
            text: collapse(text),
            numbers: numbers_in(text, numerals),
            numerals,
            amounts: OnceLock::new(),
            place: place.into(),
            whole_lines: None,
            window: None,
        }
    }

    /// The same text, where a string must be one of its whole lines, or, for a sentence the
    /// layout wrapped over up to [`MAX_VALUE_LINES`] lines, the whole sentence joined with one
    /// space in place of its lines ([`quotable_lines`]).
    pub fn lines_only(mut self) -> GroundText {
        self.whole_lines = Some(
            quotable_lines(&self.raw)
                .iter()
                .map(|l| collapse(l))
                .collect(),
        );
        self.place = format!("a line of {}", self.place);
        self
    }

    /// The same text, where a string must lie within `max` consecutive lines (at least 1), none
    /// of them blank: what the grounded grammar offers for a value grounded in the document
    /// ([`MAX_VALUE_LINES`]).
    pub fn within_lines(mut self, max: usize) -> GroundText {
        let mut starts = Vec::new();
        let mut at = 0;
        for (n, line) in self.raw.lines().enumerate() {
            let len = line.split_whitespace().map(|w| w.len() + 1).sum::<usize>();
            if len > 0 {
                starts.push((at, n));
                at += len;
            }
        }
        self.window = Some((max.max(1), starts));
        self
    }

    /// The whole lines a string must be one of, when it must.
    pub fn whole_lines(&self) -> Option<&[String]> {
        self.whole_lines.as_deref()
    }

    /// The most consecutive lines a string may span, when that is bounded.
    pub fn max_lines(&self) -> Option<usize> {
        self.window.as_ref().map(|(k, _)| *k)
    }

    /// The text as written.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The text, whitespace collapsed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The numbers it writes.
    pub fn numbers(&self) -> &[Decimal] {
        &self.numbers
    }

    /// The numbers it writes at least once outside a date, a period or a time of day
    /// ([`amounts_in`]): what a fractional number (an amount, a measure) may be copied as.
    pub fn amounts(&self) -> &[Decimal] {
        self.amounts
            .get_or_init(|| amounts_in(&self.raw, self.numerals))
    }

    /// Whether `s` lies in the text ([`GroundText::find_str`] finds it).
    pub fn contains_str(&self, s: &str) -> bool {
        self.find_str(s) == StrMatch::Found
    }

    /// Whether `s`, whitespace collapsed, is written in the text: a substring that starts and
    /// ends at word boundaries ([`is_word_boundary`]) and, where the text bounds it
    /// ([`GroundText::within_lines`]), lies within that many consecutive non-empty lines; or,
    /// with [`GroundText::lines_only`], one whole line. When it is not, why: the word it cuts,
    /// or the lines it runs over, for an occurrence that fails only that.
    pub fn find_str(&self, s: &str) -> StrMatch {
        let s = collapse(s);
        if let Some(lines) = &self.whole_lines {
            return if lines.contains(&s) {
                StrMatch::Found
            } else {
                StrMatch::Missing
            };
        }
        if s.is_empty() {
            return StrMatch::Missing;
        }
        let text = self.text.as_str();
        let mut failed = StrMatch::Missing;
        let mut from = 0;
        while let Some(i) = text.get(from..).and_then(|t| t.find(&s)) {
            let (a, b) = (from + i, from + i + s.len());
            if !is_word_boundary(text, a) || !is_word_boundary(text, b) {
                if failed == StrMatch::Missing {
                    failed = StrMatch::CutsWord {
                        word: word_around(text, a, b),
                    };
                }
            } else {
                match &self.window {
                    Some((k, starts)) => {
                        // The first and the last non-empty line it touches (indices into
                        // `starts`), and their line numbers: equal counts mean no blank between.
                        let nth = |at: usize| starts.partition_point(|&(x, _)| x <= at).max(1) - 1;
                        let (i, j) = (nth(a), nth(b - 1));
                        let (li, lj) = (starts[i].1, starts[j].1);
                        if lj - li != j - i {
                            if failed == StrMatch::Missing
                                || matches!(failed, StrMatch::CutsWord { .. })
                            {
                                failed = StrMatch::AcrossBlankLine;
                            }
                        } else if j - i < *k {
                            return StrMatch::Found;
                        } else {
                            failed = StrMatch::TooManyLines { max: *k };
                        }
                    }
                    None => return StrMatch::Found,
                }
            }
            // Occurrences may overlap: go on from the next character.
            from = a + text[a..].chars().next().map_or(1, char::len_utf8);
        }
        failed
    }

    /// Whether the text writes the number `d`.
    pub fn contains_number(&self, d: &Decimal) -> bool {
        self.numbers.contains(d)
    }

    /// The expressions of `form` the text writes ([`read::expressions`](crate::read::expressions)),
    /// each once: what a value of that form may be copied as.
    pub fn expressions(&self, form: Form) -> Vec<String> {
        crate::read::expressions(form, &self.raw)
    }

    /// Whether `s` (whitespace collapsed) is one whole expression of `form` the text writes.
    pub fn contains_expression(&self, form: Form, s: &str) -> bool {
        let s = collapse(s);
        !s.is_empty() && self.expressions(form).iter().any(|e| collapse(e) == s)
    }
}

/// The words of `text` around bytes `a..b` (widened to word boundaries).
fn word_around(text: &str, a: usize, b: usize) -> String {
    let start = text[..a]
        .char_indices()
        .rev()
        .find(|(_, c)| !c.is_alphanumeric())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let end = text[b..]
        .char_indices()
        .find(|(_, c)| !c.is_alphanumeric())
        .map_or(text.len(), |(i, _)| b + i);
    text[start..end].to_owned()
}

/// Whitespace runs collapsed to one space, trimmed (case kept: grounded strings are verbatim).
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The literal text of every number in a JSON document, by JSON pointer; `None` when `json` is
/// not one JSON value. Grounded numbers are compared by this text, not by the `f64` serde reads.
pub fn number_literals(json: &str) -> Option<HashMap<String, String>> {
    let raw: Box<serde_json::value::RawValue> = serde_json::from_str(json).ok()?;
    let mut out = HashMap::new();
    walk_raw(&raw, String::new(), &mut out)?;
    Some(out)
}

fn walk_raw(
    raw: &serde_json::value::RawValue,
    path: String,
    out: &mut HashMap<String, String>,
) -> Option<()> {
    let text = raw.get().trim();
    match text.as_bytes().first()? {
        b'{' => {
            let map: Vec<(String, Box<serde_json::value::RawValue>)> =
                serde_json::from_str::<RawObject>(text).ok()?.0;
            for (k, v) in map {
                walk_raw(&v, join_pointer(&path, &k), out)?;
            }
        }
        b'[' => {
            let items: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(text).ok()?;
            for (i, v) in items.iter().enumerate() {
                walk_raw(v, join_pointer(&path, &i.to_string()), out)?;
            }
        }
        b'-' | b'0'..=b'9' => {
            out.insert(path, text.to_owned());
        }
        _ => {}
    }
    Some(())
}

/// A JSON object's members in order, values unparsed.
struct RawObject(Vec<(String, Box<serde_json::value::RawValue>)>);

impl<'de> serde::Deserialize<'de> for RawObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawObject, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) =
                    map.next_entry::<String, Box<serde_json::value::RawValue>>()?
                {
                    out.push((k, v));
                }
                Ok(RawObject(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The source a value is checked against: the document and its numeral conventions.
#[derive(Debug, Clone)]
pub struct Grounds<'a> {
    source: &'a Source,
    numerals: Numerals,
    whole: GroundText,
}

impl<'a> Grounds<'a> {
    /// `source`, read with its numerals ([`Source::numerals`]: as set, else detected from its
    /// text).
    pub fn new(source: &'a Source) -> Grounds<'a> {
        Grounds::with_numerals(source, source.numerals())
    }

    /// `source`, read with `numerals`.
    pub fn with_numerals(source: &'a Source, numerals: Numerals) -> Grounds<'a> {
        Grounds {
            whole: GroundText::new(&source.text(), "the document", numerals)
                .within_lines(MAX_VALUE_LINES),
            source,
            numerals,
        }
    }

    /// The document's line count.
    pub fn line_count(&self) -> usize {
        self.source.line_count()
    }

    /// The numeral conventions in use.
    pub fn numerals(&self) -> Numerals {
        self.numerals
    }

    /// The whole document as a [`GroundText`].
    pub fn document(&self) -> &GroundText {
        &self.whole
    }

    /// The text of a decoded field value a later value is grounded in: a string itself; else
    /// the source lines of every span inside it; else every string inside it. `None` for null.
    pub fn text_of(&self, value: &Value, place: &str) -> Option<GroundText> {
        self.text_of_reply(value, place)
    }

    /// [`Grounds::text_of`] on either tree.
    fn text_of_reply<J: Reply>(&self, value: &J, place: &str) -> Option<GroundText> {
        let text = match value.view() {
            View::Null => return None,
            View::String(s) => Cow::Borrowed(s),
            _ => {
                let value = value.as_value();
                let spans = citations(&value);
                Cow::Owned(if spans.is_empty() {
                    let mut strings = Vec::new();
                    collect_strings(&value, &mut strings);
                    strings.join("\n")
                } else {
                    spans
                        .iter()
                        .map(|(_, start, end, _)| {
                            self.source.text_of_cited((*start).into(), (*end).into())
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                })
            }
        };
        Some(GroundText::new(&text, format!("`{place}`"), self.numerals))
    }

    /// Source lines `start..=end` (1-based) as a [`GroundText`].
    pub fn lines(&self, start: u64, end: u64) -> GroundText {
        GroundText::new(
            &self.source.text_of_cited(start, end),
            format!("lines {start} to {end}"),
            self.numerals,
        )
    }

    /// The text grounding `g` points at inside `object` (the JSON object holding the field),
    /// `inherited` being the text the object's own container is grounded in. `None` means the
    /// value is not grounded; `Some(None)` means its text is missing (a null `in` field): no
    /// value can be grounded there.
    pub fn resolve(
        &self,
        g: &Grounding,
        object: &serde_json::Map<String, Value>,
        inherited: Option<&GroundText>,
    ) -> Option<Option<GroundText>> {
        self.resolve_in::<Value>(g, object, inherited)
    }

    /// [`Grounds::resolve`] on either tree.
    fn resolve_in<J: Reply>(
        &self,
        g: &Grounding,
        object: &J::Map,
        inherited: Option<&GroundText>,
    ) -> Option<Option<GroundText>> {
        match g {
            Grounding::Source => Some(Some(self.whole.clone())),
            Grounding::Line => Some(Some(self.whole.clone().lines_only())),
            Grounding::WithContainer => inherited.map(|t| Some(t.clone())),
            Grounding::In(field) => {
                Some(object.get(field).and_then(|v| self.text_of_reply(v, field)))
            }
            Grounding::Lines { start, end } => {
                let line = |k: &str| match object.get(k).map(Json::view) {
                    Some(View::Number(n)) => n.as_u64(),
                    _ => None,
                };
                Some(match (line(start), line(end)) {
                    (Some(a), Some(b)) if a >= 1 && a <= b => Some(self.lines(a, b)),
                    _ => None,
                })
            }
        }
    }
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// Checks every grounded value of `value` (an instance of `spec`) against `grounds`, pushing a
/// [`ViolationKind::NotInSource`] violation for each value outside its text. Numbers are
/// compared by their literal text in `literals` (from [`number_literals`]) where it has the
/// value's pointer, else by the shortest decimal that reads back as the `f64`.
pub fn check_grounding(
    spec: &ContractSpec,
    value: &Value,
    grounds: &Grounds<'_>,
    literals: Option<&HashMap<String, String>>,
    out: &mut Violations,
) {
    let mut walker = Walker {
        grounds,
        literals,
        out,
    };
    walker.contract(spec, value, "", None);
}

/// A parsed reply the grounding walk reads: a `Value` (its numbers' literals given apart, by
/// pointer) or the validator's borrowed tree (which keeps them).
trait Reply: Json {
    /// The number's literal text, where the tree kept it.
    fn literal(&self) -> Option<&str>;

    /// The value as a `Value`, for the spans and strings of a field another is grounded in.
    fn as_value(&self) -> Cow<'_, Value>;
}

impl Reply for Value {
    fn literal(&self) -> Option<&str> {
        None
    }

    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Borrowed(self)
    }
}

impl Reply for Doc<'_> {
    fn literal(&self) -> Option<&str> {
        match self {
            Doc::Number(_, literal) => *literal,
            _ => None,
        }
    }

    fn as_value(&self) -> Cow<'_, Value> {
        fn convert(doc: &Doc<'_>) -> Value {
            match doc {
                Doc::Null => Value::Null,
                Doc::Bool(b) => Value::Bool(*b),
                Doc::Number(n, _) => Value::Number(n.clone()),
                Doc::String(s) => Value::String(s.as_ref().to_owned()),
                Doc::Array(items) => Value::Array(items.iter().map(convert).collect()),
                // `insert` keeps a repeated key where it came first, with its last value, as
                // serde_json's `Value` reads it.
                Doc::Object(entries) => Value::Object(
                    entries
                        .iter()
                        .map(|(k, v)| (k.as_ref().to_owned(), convert(v)))
                        .collect(),
                ),
            }
        }
        Cow::Owned(convert(self))
    }
}

struct Walker<'g, 's, 'o> {
    grounds: &'g Grounds<'s>,
    literals: Option<&'g HashMap<String, String>>,
    out: &'o mut Violations,
}

impl Walker<'_, '_, '_> {
    fn contract<J: Reply>(
        &mut self,
        spec: &ContractSpec,
        value: &J,
        path: &str,
        inherited: Option<&GroundText>,
    ) {
        let (Some(object), View::Object(map)) = (spec.object(), value.view()) else {
            return;
        };
        for field in &object.properties {
            let Some(v) = map.get(&field.name) else {
                continue;
            };
            let p = join_pointer(path, &field.name);
            match &field.node.grounded {
                None => self.ungrounded(&field.node, v, &p),
                Some(g) => match self.grounds.resolve_in::<J>(g, map, inherited) {
                    None => self.ungrounded(&field.node, v, &p),
                    Some(text) => {
                        self.grounded(&field.node, v, &p, text.as_ref(), g, field.node.form)
                    }
                },
            }
        }
    }

    /// A value not grounded itself: nested contracts may still ground their own fields.
    fn ungrounded<J: Reply>(&mut self, node: &Node, value: &J, path: &str) {
        let node = node.non_null();
        match (node.items(), value.view()) {
            (Some(item), View::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    self.ungrounded(item, v, &join_pointer(path, &i.to_string()));
                }
            }
            _ => {
                if let Some(spec) = node.contract() {
                    self.contract(spec, value, path, None);
                }
            }
        }
    }

    fn grounded<J: Reply>(
        &mut self,
        node: &Node,
        value: &J,
        path: &str,
        text: Option<&GroundText>,
        g: &Grounding,
        form: Option<Form>,
    ) {
        if let View::Null = value.view() {
            return;
        }
        let Some(text) = text else {
            let what = match g {
                Grounding::In(f) => format!("`{f}` is null or empty"),
                Grounding::Lines { start, end } => {
                    format!("`{start}`..`{end}` name no lines of the document")
                }
                _ => "there is no text to copy from".into(),
            };
            self.out.push(Violation::new(
                path,
                ViolationKind::NotInSource,
                format!("a value is given but {what}: write null, or copy it from there"),
            ));
            return;
        };
        let node = node.non_null();
        if let (Some(item), View::Array(items)) = (node.items(), value.view()) {
            for (i, v) in items.iter().enumerate() {
                self.grounded(
                    item,
                    v,
                    &join_pointer(path, &i.to_string()),
                    Some(text),
                    g,
                    form,
                );
            }
            return;
        }
        if let Some(spec) = node.contract() {
            self.contract(spec, value, path, Some(text));
            return;
        }
        match value.view() {
            View::String(s) if form.is_some_and(|f| !text.contains_expression(f, s)) => {
                let form = form.unwrap_or(Form::Date);
                let found = text.expressions(form);
                let hint = if found.is_empty() {
                    "none is written there: write null".to_owned()
                } else {
                    let shown: Vec<String> =
                        found.iter().take(5).map(|e| format!("{e:?}")).collect();
                    format!("copy one whole, such as {}", shown.join(", "))
                };
                self.out.push(Violation::new(
                    path,
                    ViolationKind::NotInSource,
                    format!(
                        "{:?} is not {} written in {}: {hint}",
                        s,
                        form.words().replace(" as written", ""),
                        text.place
                    ),
                ));
            }
            View::String(s) => {
                let why = match text.find_str(s) {
                    StrMatch::Found => return,
                    StrMatch::Missing => "copy it exactly as written".to_owned(),
                    StrMatch::CutsWord { word } => {
                        format!("it cuts the word {word:?} there: copy whole words")
                    }
                    StrMatch::TooManyLines { max } => {
                        format!("it runs over more than {max} lines there: copy a shorter part")
                    }
                    StrMatch::AcrossBlankLine => {
                        "it runs across a blank line there: copy from one paragraph".to_owned()
                    }
                };
                self.out.push(Violation::new(
                    path,
                    ViolationKind::NotInSource,
                    format!("{s:?} is not in {}: {why}", text.place),
                ));
            }
            View::Number(n) => {
                let literal = match value.literal() {
                    Some(written) => written.to_owned(),
                    None => self
                        .literals
                        .and_then(|l| l.get(path))
                        .cloned()
                        .unwrap_or_else(|| n.to_string()),
                };
                let d = Decimal::from_json_literal(&literal);
                let ok = d.as_ref().is_some_and(|d| text.contains_number(d));
                // A fractional number (an amount) is not a part of a date or a period: what the
                // grounded grammar offers it ([`GroundText::amounts`]).
                let fractional = node.value_types().any(|t| t == JsonType::Number);
                if !ok {
                    self.out.push(Violation::new(
                        path,
                        ViolationKind::NotInSource,
                        format!(
                            "{literal} is not a number written in {}: copy a number from there",
                            text.place
                        ),
                    ));
                } else if fractional
                    && d.as_ref()
                        .is_some_and(|d| d.is_integer() && !text.amounts().contains(d))
                {
                    self.out.push(Violation::new(
                        path,
                        ViolationKind::NotInSource,
                        format!(
                            "{literal} is written in {} only inside a date, a period or a time \
                             of day: copy an amount, or null when none is written",
                            text.place
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
}

/// `C::from_json_in`: [`Contract::from_json`](crate::Contract::from_json) plus
/// [`check_text`] against `source`, all violations at once.
///
/// The reply is parsed once (the module comment): the tree the grounding walk reads is the one
/// the validator checks and decodes.
pub fn from_json_in<C: Checked>(text: &str, source: &Source) -> Result<C, Violations> {
    let spec = C::checked_spec();
    let cx = crate::DocContext::of(source);
    if !has_grounding(spec) {
        return crate::validate::from_json_with::<C>(text, &cx);
    }
    let grounds = Grounds::new(source);
    let (grounded, read) = match crate::validate::tree(text) {
        Some(doc) => {
            let mut grounded = Violations::new();
            let mut walker = Walker {
                grounds: &grounds,
                literals: None,
                out: &mut grounded,
            };
            // Before the validator normalises the tree (`3.0` made `3` in an integer field).
            walker.contract(spec, &doc, "", None);
            (grounded, crate::validate::from_doc_with::<C>(doc, &cx))
        }
        // Left to serde_json: its error, or its tree and the literals read apart.
        None => (
            check_value_text(spec, text, &grounds),
            crate::validate::from_json_with::<C>(text, &cx),
        ),
    };
    match read {
        Ok(v) if grounded.is_empty() => Ok(v),
        Ok(_) => Err(grounded),
        Err(mut e) => {
            e.0.extend(grounded.0);
            Err(e)
        }
    }
}

/// The grounding violations of the JSON document `text` (nothing when it is not JSON: the
/// other checks report that).
pub fn check_text(spec: &ContractSpec, text: &str, grounds: &Grounds<'_>) -> Violations {
    let Some(doc) = crate::validate::tree(text) else {
        return check_value_text(spec, text, grounds);
    };
    let mut out = Violations::new();
    let mut walker = Walker {
        grounds,
        literals: None,
        out: &mut out,
    };
    walker.contract(spec, &doc, "", None);
    out
}

/// [`check_text`] through serde_json, for text the validator's reader leaves to it: a `Value`,
/// and the literals read apart.
fn check_value_text(spec: &ContractSpec, text: &str, grounds: &Grounds<'_>) -> Violations {
    let mut out = Violations::new();
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        let literals = number_literals(text);
        check_grounding(spec, &value, grounds, literals.as_ref(), &mut out);
    }
    out
}

/// The grounding violations of `value`, a reply recovered from `raw` (the model's text, where
/// the object may sit after a reasoning trace): number literals are read from the object's
/// own text when it can be found in `raw`, else from the `f64`s.
pub fn check_reply(
    spec: &ContractSpec,
    value: &Value,
    raw: &str,
    grounds: &Grounds<'_>,
) -> Violations {
    let literals = number_literals(raw.trim()).or_else(|| {
        crate::parse::scan::outermost_objects(raw)
            .into_iter()
            .rev()
            .filter_map(|(a, b)| raw.get(a..b))
            .find(|t| serde_json::from_str::<Value>(t).ok().as_ref() == Some(value))
            .and_then(number_literals)
    });
    let mut out = Violations::new();
    check_grounding(spec, value, grounds, literals.as_ref(), &mut out);
    out
}

/// Whether the contract (or a contract nested in it) grounds any value.
pub fn has_grounding(spec: &ContractSpec) -> bool {
    fn walk(spec: &ContractSpec, seen: &mut Vec<String>) -> bool {
        if seen.contains(&spec.name) {
            return false;
        }
        seen.push(spec.name.clone());
        let Some(object) = spec.object() else {
            return false;
        };
        object.properties.iter().any(|f| {
            matches!(
                &f.node.grounded,
                Some(g) if *g != Grounding::WithContainer
            ) || f.node.innermost_contract().is_some_and(|c| walk(c, seen))
        })
    }
    walk(spec, &mut Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        Decimal::from_json_literal(s).unwrap_or_else(|| panic!("not a literal: {s}"))
    }

    #[test]
    fn amounts_leave_out_the_numbers_of_dates_and_periods() {
        let lits =
            |v: Vec<Decimal>| -> Vec<String> { v.iter().map(Decimal::to_json_literal).collect() };
        let cases: [(&str, Numerals, &[&str]); 8] = [
            // A withdrawn outlook: its only numbers are the period's.
            (
                "The company is withdrawing the revenue outlook for the second quarter of 2025.",
                Numerals::Point,
                &[],
            ),
            (
                "For the quarter ending March 31, 2024, revenue of $3,195 million.",
                Numerals::Point,
                &["3195"],
            ),
            (
                "Para el tercer trimestre de 2024, ingresos de 2.150,5 millones.",
                Numerals::Comma,
                &["2150.5"],
            ),
            // A time's parts are not amounts (they were offered until a receipt's hour was
            // taken for its total: `05 JAN 2017 12:41PM`, total 12.60).
            (
                "19/10/2018 20:49:59 TOTAL 60.30",
                Numerals::Point,
                &["60.3"],
            ),
            (
                "05 JAN 2017 12:41PM TOTAL 12.60. Closed at 9:05. Table 3, 12:345",
                Numerals::Point,
                &["12.6", "3", "12", "345"],
            ),
            // After a label's colon, before a comma; not a time when joined to a number.
            (
                "TIME:20:49, paid 5.00 at 3.12:30",
                Numerals::Point,
                &["5", "3.12", "30"],
            ),
            // A number written inside a date and again on its own is an amount.
            (
                "Q3 2024 revenue: 2024 units at 3.5 each",
                Numerals::Point,
                &["2024", "3.5"],
            ),
            (
                "Revenue rose 14% to 3.16 billion in fiscal 2025.",
                Numerals::Point,
                &["14", "3.16"],
            ),
        ];
        for (text, numerals, want) in cases {
            assert_eq!(lits(amounts_in(text, numerals)), want, "{text}");
            let g = GroundText::new(text, "the text", numerals);
            assert_eq!(lits(g.amounts().to_vec()), want, "{text}");
            // Every number is still written there, for a whole number.
            assert_eq!(g.numbers(), numbers_in(text, numerals).as_slice());
        }
    }

    #[test]
    fn written_literals_keep_the_fraction_digits_the_text_shows() {
        let cases = [
            // (numeral as written, numerals, literal)
            ("538.00", Numerals::Point, "538.00"),
            ("60.30", Numerals::Point, "60.30"),
            ("60.31", Numerals::Point, "60.31"),
            ("0.50", Numerals::Point, "0.50"),
            ("1,234.50", Numerals::Point, "1234.50"),
            ("1.234,50", Numerals::Comma, "1234.50"),
            ("60,30", Numerals::Comma, "60.30"),
            // A thousands separator is not a decimal fraction.
            ("1,000", Numerals::Point, "1000"),
            ("1.000", Numerals::Comma, "1000"),
            ("2,500,000", Numerals::Point, "2500000"),
            ("55100", Numerals::Point, "55100"),
            ("10", Numerals::Point, "10"),
        ];
        for (written, numerals, want) in cases {
            let read = numbers_at(written, numerals);
            let (range, d) = read
                .first()
                .unwrap_or_else(|| panic!("{written}: no number"));
            assert_eq!(
                written_literal(d, &written[range.clone()]),
                want,
                "{written} ({numerals:?})"
            );
            // The literal is the same number.
            assert_eq!(
                Decimal::from_json_literal(want).as_ref(),
                Some(d),
                "{written}"
            );
        }
        // A negative number keeps its sign; a literal whose digits the numeral does not end in
        // (each digit run read alone) is the normalised one.
        let d = dec("-5.59");
        assert_eq!(written_literal(&d.negated(), "5.59"), "5.59");
        assert_eq!(written_literal(&dec("-5.5"), "5.50"), "-5.50");
        assert_eq!(written_literal(&dec("3"), "1.2.3"), "3");
    }

    #[test]
    fn decimals_compare_as_numbers_not_floats() {
        assert_eq!(dec("4065.50"), dec("4065.5"));
        assert_eq!(dec("4.0655e3"), dec("4065.5"));
        assert_eq!(dec("-0"), dec("0"));
        assert_eq!(dec("0.000"), dec("0"));
        assert_ne!(dec("1234567.5000000001"), dec("1234567.5"));
        assert_ne!(dec("9007199254740993"), dec("9007199254740992"));
        assert_eq!(dec("2757").to_json_literal(), "2757");
        assert_eq!(dec("0.0725").to_json_literal(), "0.0725");
        assert_eq!(dec("-12.5e1").to_json_literal(), "-125");
        for bad in ["", "-", "1.", ".5", "1e", "01x", "1,5", "+1"] {
            assert!(Decimal::from_json_literal(bad).is_none(), "{bad}");
        }
        assert!(dec("12.000").is_integer());
        use std::cmp::Ordering::*;
        assert_eq!(dec("4065").cmp(&dec("4140")), Less);
        assert_eq!(dec("10").cmp(&dec("9.99")), Greater);
        assert_eq!(dec("-10").cmp(&dec("-9.99")), Less);
        assert_eq!(dec("-1").cmp(&dec("0")), Less);
        assert_eq!(dec("0.5").cmp(&dec("5e-1")), Equal);
        assert_eq!(dec("1.25").cmp(&dec("1.3")), Less);
        assert_eq!(dec("2757").to_i128(), Some(2757));
        assert_eq!(dec("-2.5e1").to_i128(), Some(-25));
        assert_eq!(dec("2.5").to_i128(), None);
        assert!(!dec("12.5").is_integer());
    }

    fn lits(text: &str, n: Numerals) -> Vec<String> {
        numbers_in(text, n)
            .iter()
            .map(Decimal::to_json_literal)
            .collect()
    }

    #[test]
    fn numbers_read_by_the_document_conventions() {
        assert_eq!(
            lits("revenue of $2,757 million, up 7.5%", Numerals::Point),
            ["2757", "7.5"]
        );
        assert_eq!(
            lits("between $4,065–$4,140 million", Numerals::Point),
            ["4065", "4140"]
        );
        assert_eq!(
            lits(
                "ingresos de 1.730 millones y 7,23 mil millones",
                Numerals::Comma
            ),
            ["1730", "7.23"]
        );
        assert_eq!(lits("1.730,5 euros", Numerals::Comma), ["1730.5"]);
        assert_eq!(lits("1,730.5 dollars", Numerals::Point), ["1730.5"]);
        // A numeral that does not read by the document's convention reads by the other.
        assert_eq!(lits("7,23", Numerals::Point), ["7.23"]);
        // By neither: each digit run alone (a version, a date).
        assert_eq!(
            lits("v1.2.3 on 12/31/2024", Numerals::Point),
            ["1", "2", "3", "12", "31", "2024"]
        );
        assert_eq!(lits("a -5 change", Numerals::Point), ["-5", "5"]);
    }

    #[test]
    fn numerals_are_detected() {
        assert_eq!(
            Numerals::detect("Revenue was $2,757.3 million, up 4.5%."),
            Numerals::Point
        );
        assert_eq!(
            Numerals::detect("Los ingresos fueron 1.730,5 millones, un 7,23% más."),
            Numerals::Comma
        );
        assert_eq!(Numerals::detect("no numbers here"), Numerals::Point);
        // Only three-digit groups: thousands decide.
        assert_eq!(
            Numerals::detect("entre 3.590 millones y 3.645 millones; 305.624 miles."),
            Numerals::Comma
        );
        assert_eq!(
            Numerals::detect("Revenue was $1,355 million; net income $94,850 thousand."),
            Numerals::Point
        );
        assert_eq!(Numerals::detect("1.234.567 acciones"), Numerals::Comma);
        assert_eq!(Numerals::detect("1,234,567 shares"), Numerals::Point);
        // Telling fractions outweigh three-digit groups.
        assert_eq!(
            Numerals::detect("3.590 y 3.645 y 3.700, o 7.25 million"),
            Numerals::Point
        );
    }

    #[test]
    fn strings_start_and_end_at_word_boundaries() {
        let t = GroundText::new(
            "Founded in 2018 by John Smith (the \"Founder\"); revenue $4,065 million.",
            "the document",
            Numerals::Point,
        );
        for ok in [
            "2018",
            "John",
            "John Smith",
            "in 2018 by",
            "$4,065",
            "4,065",
            "065 million",
            "(the \"Founder\")",
            "Founder",
            "million.",
            ".",
            "Smith (the",
        ] {
            assert_eq!(t.find_str(ok), StrMatch::Found, "{ok:?}");
        }
        for (cut, word) in [
            ("20", "2018"),
            ("018", "2018"),
            ("ohn", "John"),
            ("Joh", "John"),
            ("n 2018", "in 2018"),
            ("John Smit", "John Smith"),
            ("illion.", "million."),
        ] {
            assert_eq!(
                t.find_str(cut),
                StrMatch::CutsWord { word: word.into() },
                "{cut:?}"
            );
            assert!(!t.contains_str(cut));
        }
        assert_eq!(t.find_str("2019"), StrMatch::Missing);
        assert_eq!(t.find_str("  "), StrMatch::Missing);
        // An occurrence inside a word does not hide a later whole one.
        let t = GroundText::new("in 2018: 20 staff", "the document", Numerals::Point);
        assert_eq!(t.find_str("20"), StrMatch::Found);
        // Letters of any script are word characters; `_` is not.
        let t = GroundText::new("Peñarol señor file_name", "x", Numerals::Point);
        assert!(!t.contains_str("eñor"));
        assert!(t.contains_str("name"));
        assert!(is_word_boundary("ab", 0) && is_word_boundary("ab", 2));
        assert!(!is_word_boundary("ab", 1) && is_word_boundary("a b", 1));
        assert!(!is_word_boundary("é", 1), "not a char boundary");
    }

    #[test]
    fn document_strings_span_at_most_three_lines() {
        let source = Source::from_text(
            "Insured: Northern Star\n  Shipping Company\nLimited, Port Louis\nPolicy 4471\n\nTerms",
        );
        let grounds = Grounds::new(&source);
        let doc = grounds.document();
        assert_eq!(doc.max_lines(), Some(MAX_VALUE_LINES));
        // Across two breaks, any whitespace for a break.
        assert!(doc.contains_str("Northern Star Shipping Company Limited"));
        assert!(doc.contains_str("Star\nShipping"));
        assert!(doc.contains_str("Insured: Northern Star Shipping Company Limited, Port Louis"));
        assert_eq!(
            doc.find_str("Star Shipping Company Limited, Port Louis Policy"),
            StrMatch::TooManyLines { max: 3 }
        );
        // Not across a blank line.
        assert_eq!(doc.find_str("4471 Terms"), StrMatch::AcrossBlankLine);
        // Not bounded: a value's own text, or the lines a span names.
        let quote = GroundText::new(&source.text(), "`quote`", Numerals::Point);
        assert!(quote.contains_str("Star Shipping Company Limited, Port Louis Policy"));
        assert!(grounds
            .lines(1, 5)
            .contains_str("Northern Star Shipping Company Limited, Port Louis Policy"));
        // The same words once within three lines and once across four: found.
        let source = Source::from_text("a\nb\nc\nd\na b c d");
        assert!(Grounds::new(&source).document().contains_str("a b c d"));
        // An excerpt's left-out lines are blank: a value does not join two kept parts.
        let excerpt = Source::from_text("Acme Ltd\n\n\n\nwill pay");
        assert!(!Grounds::new(&excerpt).document().contains_str("Ltd will"));
    }

    #[test]
    fn literal_texts_are_kept() {
        let l = number_literals(r#"{"a": 4065.50, "b": [1, {"c": -2e3}], "d": "7"}"#)
            .unwrap_or_default();
        assert_eq!(l.get("/a").map(String::as_str), Some("4065.50"));
        assert_eq!(l.get("/b/0").map(String::as_str), Some("1"));
        assert_eq!(l.get("/b/1/c").map(String::as_str), Some("-2e3"));
        assert!(!l.contains_key("/d"));
        assert!(number_literals("{not json").is_none());
    }

    /// A contract with every kind of grounding: in the source, in another field (a string, and
    /// a nested value with spans), in lines two fields name, nested and in lists.
    #[derive(crate::Contract, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    #[contract(rule = "low <= high")]
    struct Quoted {
        #[contract(grounded)]
        quote: Option<String>,
        #[contract(grounded(in = quote))]
        low: Option<f64>,
        #[contract(grounded(in = quote))]
        high: Option<f64>,
        #[contract(grounded)]
        counts: Vec<u32>,
        start_line: Option<u32>,
        end_line: Option<u32>,
        #[contract(grounded(in = start_line..=end_line))]
        said: Option<String>,
        #[contract(grounded)]
        revenue: Option<crate::values::Amount>,
        cited: Option<crate::values::Span>,
        #[contract(grounded(in = cited))]
        cited_figure: Option<f64>,
    }

    const RELEASE: &str = "Acme Reports Third Quarter 2024 Results\n\
        Revenue was $2,757.50 million, up 7.5% year over year.\n\
        For the fourth quarter, Acme expects revenue between $4,065 and $4,140.25 million.\n\
        Acme had 12,400 employees in 3 offices.";

    /// Replies of every shape: copied and invented values, numbers written as the document
    /// writes them and otherwise, escapes, repeated keys, nested values, text serde_json
    /// reads and the validator's reader leaves to it, and text that is not JSON.
    fn replies() -> Vec<String> {
        let quote =
            "For the fourth quarter, Acme expects revenue between $4,065 and $4,140.25 million.";
        let mut out = vec![
            format!(r#"{{"quote": "{quote}", "low": 4065, "high": 4140.25}}"#),
            format!(r#"{{"quote": "{quote}", "low": 4065.000, "high": 4.14025e3}}"#),
            format!(r#"{{"quote": "{quote}", "low": 4065, "high": 4140.2500000000000000001}}"#),
            format!(r#"{{"quote": "{quote}", "low": 4066, "high": 4140.25, "counts": [12400, 3, 4]}}"#),
            format!(r#"{{"quote": "{quote}", "low": 2757.5, "high": 4140.25}}"#),
            r#"{"quote": "Revenue was $2,757.50 million", "low": 2757.50, "high": 2757.5}"#.into(),
            r#"{"quote": "Revenue was \u0024\u0032,757.50 million", "low": 2757.5}"#.into(),
            r#"{"quote": "Revenue was\n$2,757.50", "low": 2757.5}"#.into(),
            r#"{"quote": "Revenue is \"$9\"", "low": 9}"#.into(),
            r#"{"quote": null, "low": 4065}"#.into(),
            r#"{"low": 4065, "low": 4066}"#.into(),
            r#"{"quote": "Acme had 12,400 employees", "low": 12400, "low": 12400.0}"#.into(),
            r#"{"start_line": 2, "end_line": 3, "said": "up 7.5% year over year"}"#.into(),
            r#"{"start_line": 2, "end_line": 2, "said": "Acme expects"}"#.into(),
            r#"{"start_line": 2.0, "end_line": 3, "said": "up 7.5%"}"#.into(),
            r#"{"start_line": 3, "end_line": 2, "said": "up 7.5%"}"#.into(),
            r#"{"revenue": {"value": 2757.50, "unit": "million"}}"#.into(),
            r#"{"revenue": {"value": 2757.51, "unit": "billion"}}"#.into(),
            r#"{"cited": {"start_line": 3, "end_line": 3, "quote": "between $4,065"}, "cited_figure": 4065}"#.into(),
            r#"{"cited": {"start_line": 3, "end_line": 3}, "cited_figure": 7.5}"#.into(),
            r#"{"counts": [12400, -0, 3]}"#.into(),
            r#"{"counts": [12400, 12345678901234567890]}"#.into(),
            r#"{"quote": "Revenue was \ud83d", "low": 1}"#.into(),
            r#"{"quote": "Acme", "low": 1,}"#.into(),
            r#"{"quote": "Acme", "extra": {"deep": [1, 2.50]}}"#.into(),
            "[1, 2]".into(),
            "{not json".into(),
            String::new(),
        ];
        // Every field alone with each number written several ways.
        for n in [
            "4065", "4065.0", "4.065e3", "40650e-1", "-4065", "0.1", "1e400",
        ] {
            out.push(format!(r#"{{"quote": "{quote}", "low": {n}}}"#));
            out.push(format!(r#"{{"counts": [{n}]}}"#));
        }
        // The keys a reply leaves out, added (every field is required), so that replies pass.
        let keys = [
            ("quote", "null"),
            ("low", "null"),
            ("high", "null"),
            ("counts", "[]"),
            ("start_line", "null"),
            ("end_line", "null"),
            ("said", "null"),
            ("revenue", "null"),
            ("cited", "null"),
            ("cited_figure", "null"),
        ];
        for reply in out.iter_mut() {
            if reply.starts_with(r#"{""#) {
                for (key, null) in keys {
                    if !reply.contains(&format!(r#""{key}""#)) {
                        reply.insert_str(1, &format!(r#""{key}": {null}, "#));
                    }
                }
            }
        }
        out
    }

    /// The walk over the validator's tree finds what the walk over serde_json's `Value` with
    /// the literals read apart finds, to the message.
    #[test]
    fn one_parse_finds_what_three_found() {
        let source = Source::from_text(RELEASE);
        let grounds = Grounds::new(&source);
        let spec = <Quoted as crate::Contract>::contract_spec();
        let mut refused = 0;
        for reply in replies() {
            let once = check_text(spec, &reply, &grounds);
            let thrice = check_value_text(spec, &reply, &grounds);
            assert_eq!(once, thrice, "on {reply}");
            refused += usize::from(!once.is_empty());
        }
        assert!(refused >= 10, "only {refused} replies refused");
    }

    /// `from_json_in` gives what `from_json_with` and the `Value` walk give together, on every
    /// reply: the value, or the same violations in the same order.
    #[test]
    fn from_json_in_is_from_json_and_the_grounding_check() {
        let source = Source::from_text(RELEASE);
        let spec = <Quoted as crate::Contract>::contract_spec();
        let (mut accepted, mut refused) = (0, 0);
        for reply in replies() {
            let grounded = check_value_text(spec, &reply, &Grounds::new(&source));
            let before = match crate::validate::from_json_with::<Quoted>(
                &reply,
                &crate::DocContext::of(&source),
            ) {
                Ok(v) if grounded.is_empty() => Ok(v),
                Ok(_) => Err(grounded),
                Err(mut e) => {
                    e.0.extend(grounded.0);
                    Err(e)
                }
            };
            let now = from_json_in::<Quoted>(&reply, &source);
            assert_eq!(now, before, "on {reply}");
            match now {
                Ok(_) => accepted += 1,
                Err(_) => refused += 1,
            }
        }
        assert!(
            accepted >= 5 && refused >= 10,
            "{accepted} accepted, {refused} refused"
        );
    }
}
