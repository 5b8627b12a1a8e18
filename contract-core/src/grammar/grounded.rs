//! Grounded grammars: the contract's output in llguidance's Lark syntax, with every grounded
//! value drawn from the document.
//!
//! A grounded string becomes a substring terminal (`%regex {"substring_chunks": [..]}`) over
//! its text: one alternative per source line for values grounded in the document, so a quote
//! stays within one line; the value's own text for `grounded(in = ..)`. A grounded number
//! becomes the alternation of the numbers its text writes ([`numbers_in`](crate::ground::numbers_in)),
//! kept to those the field's bounds allow. Everything else is llguidance's JSON compiler
//! (`%json {..}`), with the grammar's whitespace layout.
//!
//! A value grounded in a field decoded earlier cannot be one static grammar. The root object is
//! cut into *segments* ([`Grammar::grounded_segments`]): a new segment starts at each field whose
//! text is a field of the current segment. Segment `k`'s grammar ([`Grammar::grounded_lark`]) is
//! built from the source and the values decoded in segments `0..k`; it ends with the `,` after its
//! last field (the next one starts with ` "key": `, which the mask forces), so the end of a
//! segment is the moment its matcher accepts. [`Grammar::static_grounded_lark`] is the one
//! grammar for servers that take a grammar: values grounded in another field are grounded in the
//! whole document there, and checked against their field after decoding.
//!
//! Layout: the root object is written `{"a": 1, "b": 2}`; nested grounded objects likewise.
//! Inside a nested object a value grounded in a sibling string is grounded in the whole document
//! (the validator checks the sibling); only the root's fields are composed. A nested object
//! whose value is grounded in the lines two sibling fields name (a [`Span`](crate::Span)) is
//! offered as one alternative per line range of the document (ranges of at most four lines,
//! while there are at most 1,200 of them), so its quote lies in its lines exactly and its
//! `start_line <= end_line` holds by construction. A span at the root takes its line numbers
//! from the document's lines (at most 256), the pairs its order allows written out as chains of
//! rules that share their tails, so the grammar holds that rule too.
//!
//! [`GroundedSegment::rules_enforced`] says when one segment's grammar holds every cross-field
//! rule by itself (the local mask then runs no value filter over the allowed tokens): false as
//! soon as a rule had to be left out (too many joint choices, a side with no candidates, a
//! nested value with rules written through llguidance's JSON compiler).

use std::fmt::Write as _;
use std::ops::Range;

use serde_json::{json, Map, Value};

use super::{shape_schema, Grammar, ObjectShape, Shape};
use crate::contract::{CmpOp, Form, Grounding, Rule};
use crate::ground::{Decimal, GroundText, Grounds};

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
}

/// Deepest nesting of grounded objects rendered inline (a recursive contract stops there and
/// goes on through llguidance's JSON compiler, ungrounded).
const MAX_DEPTH: usize = 8;
/// Documents with more lines are offered as one substring terminal instead of one per line.
const MAX_LINE_ALTERNATIVES: usize = 2000;
/// Longest span (in lines) a nested span-like object may cite under a grounded mask.
const MAX_SPAN_LINES: usize = 4;
/// Most line ranges enumerated for a nested span-like object; beyond, its quote is grounded in
/// the whole document (and checked against its lines after decoding).
const MAX_LINE_RANGES: usize = 1200;
/// Most document lines a span-like root's line fields are enumerated over (`start <= end`
/// written out as a chain of suffixes, one rule per line); beyond, its rule is left to a filter.
const MAX_ROOT_SPAN_LINES: usize = 256;
/// Number alternations longer than this are written as chains that share their tails.
const CHAIN_MIN: usize = 8;

impl Grammar {
    /// Whether any field of any object is grounded in a text of its own (not only
    /// `with_container` parts).
    pub fn is_grounded(&self) -> bool {
        self.objects.iter().any(|o| {
            o.fields
                .iter()
                .any(|f| matches!(&f.grounded, Some(g) if *g != Grounding::WithContainer))
        })
    }

    /// The same grammar without its groundings (what `rules` mode decodes with).
    pub fn without_grounding(mut self) -> Grammar {
        for o in &mut self.objects {
            for f in &mut o.fields {
                f.grounded = None;
            }
        }
        self
    }

    fn root_object(&self) -> Result<&ObjectShape, GroundedGrammarError> {
        match &self.root {
            Shape::Object { index } => self
                .objects
                .get(*index)
                .ok_or_else(|| GroundedGrammarError::NotAnObject(self.name.clone())),
            _ => Err(GroundedGrammarError::NotAnObject(self.name.clone())),
        }
    }

    /// The root's fields cut into segments (index ranges): a segment ends before a field grounded
    /// in a field of the same segment.
    pub fn grounded_segments(&self) -> Result<Vec<Range<usize>>, GroundedGrammarError> {
        let root = self.root_object()?;
        let mut out = Vec::new();
        let mut start = 0;
        for (i, f) in root.fields.iter().enumerate() {
            let depends = f
                .grounded
                .as_ref()
                .map(|g| g.depends_on())
                .unwrap_or_default();
            let inside = depends.iter().any(|d| {
                root.fields[start..i]
                    .iter()
                    .any(|earlier| earlier.name == *d)
            });
            if inside && i > start {
                out.push(start..i);
                start = i;
            }
        }
        out.push(start..root.fields.len());
        Ok(out)
    }

    /// Segment `segment`'s grammar, for the source in `grounds`, given the root's values decoded
    /// in the segments before it (`decoded`, by JSON key).
    pub fn grounded_lark(
        &self,
        grounds: &Grounds<'_>,
        segment: usize,
        decoded: &Map<String, Value>,
    ) -> Result<String, GroundedGrammarError> {
        self.grounded_segment(grounds, segment, decoded)
            .map(|s| s.lark)
    }

    /// Segment `segment`'s grammar as [`Grammar::grounded_lark`] builds it, and whether it
    /// enforces every cross-field rule on its own ([`GroundedSegment::rules_enforced`]).
    pub fn grounded_segment(
        &self,
        grounds: &Grounds<'_>,
        segment: usize,
        decoded: &Map<String, Value>,
    ) -> Result<GroundedSegment, GroundedGrammarError> {
        let segments = self.grounded_segments()?;
        let range = segments
            .get(segment)
            .cloned()
            .ok_or(GroundedGrammarError::NoSegment(segment))?;
        let last = segment + 1 == segments.len();
        let (lark, all_composed) =
            Renderer::new(self, grounds).root(range, segment == 0, last, Some(decoded))?;
        Ok(GroundedSegment {
            lark,
            rules_enforced: all_composed && self.rules_composable_in(&segments),
        })
    }

    /// Whether the composed grammar ([`Grammar::grounded_lark`]) can enforce every cross-field
    /// rule of the contract by itself, so that no filter over the tokens is needed: every rule
    /// is the root object's and names root fields of one segment, and the two sides of a
    /// comparison are numbers grounded in a text (drawn from a finite list of candidates, so
    /// the pairs that satisfy it can be written out; the line fields of a [`Span`](crate::Span)-like
    /// root count as such, drawn from the document's line numbers). A nested object's rule
    /// counts only when it is a span's `start <= end`, which the grammar's enumeration of line
    /// ranges holds. A rule of any other nested object, a comparison of strings or of
    /// ungrounded numbers, or a rule whose fields fall in different segments (the earlier one
    /// could leave the later one nothing to copy) is not. Whether one document's grammar holds
    /// them is [`GroundedSegment::rules_enforced`]: a long document can leave a rule out.
    pub fn grounded_rules_composable(&self) -> bool {
        self.grounded_segments()
            .is_ok_and(|segments| self.rules_composable_in(&segments))
    }

    /// [`Grammar::grounded_rules_composable`], given the root's segments.
    fn rules_composable_in(&self, segments: &[Range<usize>]) -> bool {
        let Ok(root) = self.root_object() else {
            return false;
        };
        // A nested object's rules are held only where they are a span's own line order, which
        // the grammar's enumeration of line ranges holds.
        let nested_rules = self
            .objects
            .iter()
            .any(|o| !std::ptr::eq(o, root) && !o.rules.is_empty() && !held_by_ranges(o));
        if nested_rules {
            return false;
        }
        // A span-like root's line fields are offered as the document's line numbers.
        let root_lines = line_fields(root);
        let is_line_field = |name: &str| {
            root_lines
                .as_ref()
                .is_some_and(|(s, e)| s == name || e == name)
        };
        let segment_of = |name: &str| {
            let i = root.fields.iter().position(|f| f.name == name)?;
            segments.iter().position(|s| s.contains(&i))
        };
        let grounded_number = |name: &str| {
            is_line_field(name)
                || root.fields.iter().any(|f| {
                    f.name == name
                        && matches!(&f.grounded, Some(g) if *g != Grounding::WithContainer)
                        && matches!(
                            f.shape.strip_nullable().0,
                            Shape::Integer { .. } | Shape::Number { .. }
                        )
                })
        };
        root.rules.iter().all(|r| {
            let Some(rule) = r.to_rule() else {
                return false;
            };
            let (names, numbers): (Vec<&str>, bool) = match &rule {
                Rule::BothOrNeither(g) | Rule::AtLeastOne(g) => {
                    (g.iter().map(String::as_str).collect(), true)
                }
                Rule::Compare { left, right, .. } => (
                    vec![left.as_str(), right.as_str()],
                    grounded_number(left) && grounded_number(right),
                ),
            };
            let Some(first) = names.first().and_then(|n| segment_of(n)) else {
                return false;
            };
            numbers && names.iter().all(|n| segment_of(n) == Some(first))
        })
    }

    /// One grammar for the whole output: values grounded in another field are grounded in the
    /// document instead (a server cannot compose per field).
    pub fn static_grounded_lark(
        &self,
        grounds: &Grounds<'_>,
    ) -> Result<String, GroundedGrammarError> {
        let n = self.root_object()?.fields.len();
        Renderer::new(self, grounds)
            .root(0..n, true, true, None)
            .map(|(lark, _)| lark)
    }
}

/// One segment's grammar ([`Grammar::grounded_segment`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroundedSegment {
    /// The segment's grammar, in llguidance's Lark syntax.
    pub lark: String,
    /// Whether this grammar alone holds every cross-field rule of the contract (for this
    /// segment and, by construction, the ones before it): true when the contract's rules are
    /// [composable](Grammar::grounded_rules_composable) and none of them had to be left out of
    /// this segment (too many joint choices, a compared side with no list of candidates, a
    /// nested value with rules written through llguidance's JSON compiler, a span with more
    /// line ranges than are enumerated). When false, a decoder needs a rule filter on top.
    pub rules_enforced: bool,
}

impl Grammar {
    /// The contract's JSON Schema ([`Grammar::schema`]) with every value grounded in the
    /// document that JSON Schema can say, for servers that compile a schema into their own
    /// grammar (the llama.cpp server's `response_format.schema`, vLLM's `guided_json`): a
    /// grounded number or integer becomes the `enum` of the numbers the document writes (its
    /// bounds applied, read with the source's numeral conventions), a string grounded in a whole
    /// line the `enum` of the document's lines, a string grounded in a substring the `enum` of
    /// the document's runs of up to eight whole words (end punctuation trimmed as a second
    /// option; only while there are at most 2,000 of them, else its plain schema: a schema
    /// cannot say "a substring of" compactly).
    /// Values grounded in another field are grounded in the whole document here (the values
    /// decoded earlier are not known when the request is sent); the extractor checks every value
    /// against its own text after decoding. A number the document writes that an
    /// `f64` cannot hold exactly leaves its field's plain schema too (a JSON Schema `enum` is read
    /// as `f64` by these servers).
    pub fn static_grounded_schema(&self, grounds: &Grounds<'_>) -> Value {
        let renderer = Renderer::new(self, grounds);
        let mut defs = renderer.defs.clone();
        let root = renderer
            .schema_of(&self.root, None, 0, &mut defs)
            .unwrap_or_else(|| shape_schema(&self.root, &self.objects, &mut defs));
        // The same layout as [`Grammar::schema`]: the root's keywords, the whitespace, `$defs`.
        let mut schema = match root {
            Value::Object(map) => map,
            other => {
                let mut map = Map::new();
                map.insert("allOf".into(), Value::Array(vec![other]));
                map
            }
        };
        schema.insert("x-guidance".into(), self.options.whitespace.x_guidance());
        if !defs.is_empty() {
            schema.insert("$defs".into(), Value::Object(defs));
        }
        Value::Object(schema)
    }
}

/// Most words in one option of a substring `enum` ([`word_spans`]).
const MAX_SPAN_WORDS: usize = 8;
/// Most options a substring `enum` may have; a longer document's strings keep their plain
/// schema in [`Grammar::static_grounded_schema`].
const MAX_SPAN_OPTIONS: usize = 2000;

/// Every run of at most `max_words` whole words of one line of `text` (as written, inner
/// spacing kept), and each run with the punctuation at its ends removed; `None` when there are
/// more than `max_options` distinct ones. Each is a substring of `text`, so an `enum` of them
/// admits only grounded values: a stricter promise than "any substring" (a value that starts
/// or ends inside a word is left out), which is what a JSON Schema can say without one
/// alternative per character position.
fn word_spans(text: &str, max_words: usize, max_options: usize) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        // Byte ranges of the line's words (runs of non-whitespace).
        let mut words: Vec<(usize, usize)> = Vec::new();
        let mut start = None;
        for (i, c) in line.char_indices() {
            match (c.is_whitespace(), start) {
                (true, Some(s)) => {
                    words.push((s, i));
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = start {
            words.push((s, line.len()));
        }
        for i in 0..words.len() {
            for j in i..words.len().min(i + max_words) {
                let span = &line[words[i].0..words[j].1];
                let trimmed =
                    span.trim_matches(|c: char| c.is_ascii_punctuation() && c != '$' && c != '%');
                for option in [span, trimmed] {
                    if !option.is_empty() && seen.insert(option.to_string()) {
                        if out.len() == max_options {
                            return None;
                        }
                        out.push(option.to_string());
                    }
                }
            }
        }
    }
    Some(out)
}

/// One grounded number as a JSON number, when it survives the `f64` a server reads it as.
fn json_number(d: &Decimal) -> Option<Value> {
    let n: serde_json::Number = serde_json::from_str(&d.to_json_literal()).ok()?;
    let back = Decimal::from_json_literal(&n.to_string())?;
    (back.cmp_value(d) == std::cmp::Ordering::Equal).then_some(Value::Number(n))
}

/// Line fields fixed to one range, and the text of those lines.
struct Fixed<'t> {
    start: &'t String,
    end: &'t String,
    a: usize,
    b: usize,
    lines: &'t GroundText,
}

/// The two line fields of an object with a field grounded in the lines they name.
fn line_fields(object: &ObjectShape) -> Option<(String, String)> {
    object.fields.iter().find_map(|f| match &f.grounded {
        Some(Grounding::Lines { start, end }) => Some((start.clone(), end.clone())),
        _ => None,
    })
}

/// Whether every rule of a span-like `object` is its line order (`start <= end`, or
/// `end >= start`), which enumerating the ranges `a <= b` holds.
fn held_by_ranges(object: &ObjectShape) -> bool {
    let Some((start, end)) = line_fields(object) else {
        return false;
    };
    object.rules.iter().all(|r| {
        matches!(r.to_rule(), Some(Rule::Compare { left, op, right })
            if (op == CmpOp::Le && left == start && right == end)
                || (op == CmpOp::Ge && left == end && right == start))
    })
}

/// Whether a value of `shape` can hold an object with rules.
fn reaches_rules(objects: &[ObjectShape], shape: &Shape, seen: &mut Vec<usize>) -> bool {
    match shape {
        Shape::Nullable { inner } => reaches_rules(objects, inner, seen),
        Shape::List { items, .. } => reaches_rules(objects, items, seen),
        Shape::Object { index } => {
            if seen.contains(index) {
                return false;
            }
            seen.push(*index);
            objects.get(*index).is_some_and(|o| {
                !o.rules.is_empty()
                    || o.fields
                        .iter()
                        .any(|f| reaches_rules(objects, &f.shape, seen))
            })
        }
        _ => false,
    }
}

/// The text a value is drawn from.
#[derive(Clone, Copy)]
enum Text<'t> {
    /// The whole document, one substring alternative per line.
    Document,
    /// The whole document, a string being one of its whole lines.
    Lines,
    /// A decoded value's text (or a line range).
    Of(&'t GroundText),
    /// Nothing: only null fits.
    Empty,
}

struct Renderer<'g, 's> {
    grammar: &'g Grammar,
    grounds: &'g Grounds<'s>,
    /// Every object contract's schema, for `%json` values that reference them.
    defs: Map<String, Value>,
    /// Terminal and rule definitions, after `start`.
    lines: Vec<String>,
    /// The document's per-line substring terminal, once defined.
    document_terminal: Option<String>,
    /// While rendering a field a later non-null field is grounded in: that field's shape, which
    /// the chosen text must be able to ground (line ranges that cannot are not offered).
    require: Option<Shape>,
    /// Set when a nested value with rules was written without them (llguidance's JSON
    /// compiler, or a span whose line ranges were too many to enumerate).
    rules_left: bool,
    next: usize,
    /// While rendering a field with a [`Form`]: its strings are the expressions of that kind
    /// their text writes.
    form: Option<Form>,
}

impl<'g, 's> Renderer<'g, 's> {
    fn new(grammar: &'g Grammar, grounds: &'g Grounds<'s>) -> Self {
        let defs = match grammar.schema().get("$defs") {
            Some(Value::Object(d)) => d.clone(),
            _ => Map::new(),
        };
        Renderer {
            grammar,
            grounds,
            defs,
            lines: Vec::new(),
            document_terminal: None,
            require: None,
            rules_left: false,
            next: 0,
            form: None,
        }
    }

    fn root(
        mut self,
        range: Range<usize>,
        first: bool,
        last: bool,
        decoded: Option<&Map<String, Value>>,
    ) -> Result<(String, bool), GroundedGrammarError> {
        let root = self.grammar.root_object()?.clone();
        let mut all_composed = true;
        // A span-like root's line fields: the document's line numbers, so that its line order
        // can be written out.
        let root_lines = line_fields(&root);
        let line_count = self.grounds.line_count();
        let empty = Map::new();
        let decoded_values = decoded.unwrap_or(&empty);
        // Each field of the segment: its null and non-null expressions, its numeric candidates.
        let mut fields: Vec<SegField> = Vec::new();
        for (i, f) in root
            .fields
            .iter()
            .enumerate()
            .filter(|(i, _)| range.contains(i))
        {
            let text_owned;
            let text = match (&f.grounded, decoded) {
                (None | Some(Grounding::WithContainer), _) => None,
                (Some(Grounding::Line), _) => Some(Text::Lines),
                (Some(Grounding::Source), _) | (Some(_), None) => Some(Text::Document),
                (Some(g), Some(decoded)) => {
                    text_owned = self.grounds.resolve(g, decoded, None).flatten();
                    Some(text_owned.as_ref().map_or(Text::Empty, Text::Of))
                }
            };
            // A field a later non-null value is grounded in must leave that value something to
            // copy.
            self.require = root.fields[i + 1..]
                .iter()
                .find(|later| {
                    later
                        .grounded
                        .as_ref()
                        .is_some_and(|g| g.depends_on().contains(&f.name.as_str()))
                        && !matches!(later.shape, Shape::Nullable { .. })
                })
                .map(|later| later.shape.clone());
            let (inner, nullable) = f.shape.strip_nullable();
            let inner = inner.clone();
            self.form = f.form;
            let non_null = self.value(&inner, text, 0);
            self.form = None;
            self.require = None;
            let is_line_field = root_lines
                .as_ref()
                .is_some_and(|(s, e)| *s == f.name || *e == f.name);
            let candidates = match &inner {
                Shape::Integer { min, max } if is_line_field && text.is_none() => {
                    (line_count <= MAX_ROOT_SPAN_LINES).then(|| {
                        (1..=line_count as i128)
                            .filter(|k| k >= min && k <= max)
                            .filter_map(|k| Decimal::from_json_literal(&k.to_string()))
                            .collect()
                    })
                }
                _ => self.number_candidates(&inner, text),
            };
            fields.push(SegField {
                name: f.name.clone(),
                nullable,
                non_null,
                candidates,
                place: place(text, self.grounds),
            });
        }
        let rules: Vec<Rule> = root.rules.iter().filter_map(|r| r.to_rule()).collect();
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        // What each rule asks of the segment's fields, as alternative assignments.
        let mut alternatives: Vec<Vec<Choice>> = vec![vec![Choice::Any; fields.len()]];
        for rule in &rules {
            if !rule_writable(rule, &names, &fields, decoded_values) {
                // A side with no list of candidates: the grammar cannot hold this rule.
                all_composed = false;
            }
            let options = rule_options(rule, &names, &fields, decoded_values);
            let mut next = Vec::new();
            for alt in &alternatives {
                for option in &options {
                    if let Some(merged) = merge(alt, option) {
                        next.push(merged);
                    }
                }
            }
            if next.len() > MAX_ASSIGNMENTS {
                // Too many joint choices: this rule is left to the value filter.
                all_composed = false;
                continue;
            }
            alternatives = next;
        }
        let mut lists = NumberLists::default();
        let mut sequences = Vec::new();
        for alt in &alternatives {
            let mut parts = Vec::new();
            let mut ok = true;
            for (n, (f, choice)) in fields.iter().zip(alt).enumerate() {
                let Some(v) = f.render(choice, &mut lists) else {
                    ok = false;
                    break;
                };
                let sep = if n == 0 {
                    if first {
                        lit("{")
                    } else {
                        lit(" ")
                    }
                } else {
                    lit(", ")
                };
                parts.push(format!(
                    "{sep} {} {v}",
                    lit(&format!("{}: ", json_str(&f.name)))
                ));
            }
            if ok {
                sequences.push(parts.join(" "));
            }
        }
        if sequences.is_empty() {
            let f = fields
                .iter()
                .find(|f| !f.nullable && f.non_null.is_none())
                .or(fields.first());
            return Err(GroundedGrammarError::Nothing {
                field: f.map_or_else(|| self.grammar.name.clone(), |f| f.name.clone()),
                place: f.map_or_else(String::new, |f| f.place.clone()),
            });
        }
        let mut body = if sequences.len() == 1 {
            sequences.remove(0)
        } else {
            format!("({})", sequences.join(" | "))
        };
        if fields.is_empty() && first {
            body = lit("{");
        }
        let end = lit(if last { "}" } else { "," });
        let mut out = format!("start: {body} {end}\n");
        for line in self.lines.iter().chain(&lists.lines) {
            out.push_str(line);
            out.push('\n');
        }
        Ok((out, all_composed && !self.rules_left))
    }

    /// The numbers a numeric scalar `shape` may take from `text` (its bounds applied); `None`
    /// for any other shape or without a text.
    fn number_candidates(&self, shape: &Shape, text: Option<Text<'_>>) -> Option<Vec<Decimal>> {
        use std::cmp::Ordering::*;
        let text = text?;
        let numbers = self.numbers(text);
        match shape {
            Shape::Integer { min, max } => Some(
                numbers
                    .into_iter()
                    .filter(|d| d.to_i128().is_some_and(|n| n >= *min && n <= *max))
                    .collect(),
            ),
            Shape::Number {
                minimum,
                exclusive_minimum,
                maximum,
                exclusive_maximum,
            } => {
                let bound = |n: &Option<serde_json::Number>| {
                    n.as_ref()
                        .and_then(|n| Decimal::from_json_literal(&n.to_string()))
                };
                let (lo, xlo, hi, xhi) = (
                    bound(minimum),
                    bound(exclusive_minimum),
                    bound(maximum),
                    bound(exclusive_maximum),
                );
                Some(
                    numbers
                        .into_iter()
                        .filter(|d| {
                            lo.as_ref().is_none_or(|b| d.cmp_value(b) != Less)
                                && xlo.as_ref().is_none_or(|b| d.cmp_value(b) == Greater)
                                && hi.as_ref().is_none_or(|b| d.cmp_value(b) != Greater)
                                && xhi.as_ref().is_none_or(|b| d.cmp_value(b) == Less)
                        })
                        .collect(),
                )
            }
            _ => None,
        }
    }

    /// Whether some non-null value of `shape` can be drawn from `text` (what [`Self::value`]
    /// would find), without writing any grammar.
    fn can_ground(&self, shape: &Shape, text: Text<'_>, depth: usize) -> bool {
        if depth >= MAX_DEPTH {
            return true;
        }
        match shape {
            Shape::Nullable { .. } => true,
            Shape::List {
                min_items, items, ..
            } => min_items.unwrap_or(0) == 0 || self.can_ground(items, text, depth + 1),
            Shape::Object { index } => self.grammar.objects.get(*index).is_some_and(|o| {
                o.fields.iter().all(|f| match &f.grounded {
                    Some(Grounding::WithContainer) => self.can_ground(&f.shape, text, depth + 1),
                    _ => true,
                })
            }),
            Shape::String {
                patterns, format, ..
            } if patterns.is_empty() && format.is_none() => match text {
                Text::Empty => false,
                Text::Document | Text::Lines => true,
                Text::Of(t) => !t.text().is_empty(),
            },
            Shape::Integer { .. } | Shape::Number { .. } => self
                .number_candidates(shape, Some(text))
                .is_some_and(|c| !c.is_empty()),
            _ => true,
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// The Lark expression of a value of `shape`, grounded in `text` when given; `None` when
    /// no value of the shape can be written there.
    fn value(&mut self, shape: &Shape, text: Option<Text<'_>>, depth: usize) -> Option<String> {
        match shape {
            Shape::Nullable { inner } => Some(match self.value(inner, text, depth) {
                Some(e) => format!("({} | {e})", lit("null")),
                None => lit("null"),
            }),
            Shape::List {
                items,
                min_items,
                max_items,
            } => {
                let min = min_items.unwrap_or(0);
                let max = max_items.unwrap_or(u64::MAX);
                if max == 0 || (text.is_none() && !self.has_grounding(shape, depth)) {
                    return if max == 0 {
                        Some(lit("[]"))
                    } else {
                        Some(self.json(shape))
                    };
                }
                let Some(item) = self.value(items, text, depth) else {
                    return (min == 0).then(|| lit("[]"));
                };
                let rule = self.fresh("list_");
                let more_max = max.saturating_sub(1).min(10_000);
                let more_min = min.saturating_sub(1);
                let rep = format!("({} {item})~{more_min}..{more_max}", lit(", "));
                let body = format!("{item} {rep}");
                let inner = if min == 0 { format!("({body})?") } else { body };
                self.lines
                    .push(format!("{rule}: {} {inner} {}", lit("["), lit("]")));
                Some(rule)
            }
            Shape::Object { index } => {
                if depth >= MAX_DEPTH || !self.has_grounding(shape, depth) && text.is_none() {
                    return Some(self.json(shape));
                }
                let object = self.grammar.objects.get(*index)?.clone();
                let Some((start, end)) = line_fields(&object) else {
                    self.rules_left |= !object.rules.is_empty();
                    return self.object_body(&object, text, depth, None);
                };
                // A value grounded in the lines two sibling fields name: one alternative per
                // line range of at most `MAX_SPAN_LINES` lines of the document.
                let n = self.grounds.line_count();
                let pairs: Vec<(usize, usize)> = (1..=n)
                    .flat_map(|a| (a..=(a + MAX_SPAN_LINES - 1).min(n)).map(move |b| (a, b)))
                    .collect();
                if pairs.len() > MAX_LINE_RANGES {
                    self.rules_left |= !object.rules.is_empty();
                    return self.object_body(&object, text, depth, None);
                }
                self.rules_left |= !held_by_ranges(&object) && !object.rules.is_empty();
                let mut alts = Vec::new();
                let require = self.require.take();
                for (a, b) in pairs {
                    let lines = self.grounds.lines(a as u64, b as u64);
                    if let Some(r) = &require {
                        if !self.can_ground(r, Text::Of(&lines), 0) {
                            continue;
                        }
                    }
                    let fixed = Fixed {
                        start: &start,
                        end: &end,
                        a,
                        b,
                        lines: &lines,
                    };
                    if let Some(alt) = self.object_body(&object, text, depth, Some(&fixed)) {
                        alts.push(alt);
                    }
                }
                self.require = require;
                let alt = alternation(alts)?;
                let rule = self.fresh("spans_");
                self.lines.push(format!("{rule}: {alt}"));
                Some(rule)
            }
            Shape::String {
                min_len,
                max_len,
                patterns,
                format,
            } if text.is_some() && patterns.is_empty() && format.is_none() => {
                let text = text?;
                if let Some(form) = self.form {
                    // One whole expression of the form, as its text writes it.
                    let raw = match text {
                        Text::Empty => return None,
                        Text::Document | Text::Lines => self.grounds.document().raw(),
                        Text::Of(t) => t.raw(),
                    };
                    let found: Vec<String> = crate::read::expressions(form, raw)
                        .into_iter()
                        .filter(|e| max_len.is_none_or(|m| e.chars().count() as u64 <= m))
                        .filter(|e| e.chars().count() as u64 >= min_len.unwrap_or(0))
                        .map(|e| lit(&json_str(&e)))
                        .collect();
                    return alternation(found);
                }
                if let Text::Lines = text {
                    return self.lines_terminal(*max_len);
                }
                let chunks = match text {
                    Text::Empty => return None,
                    Text::Lines => return None,
                    Text::Document => self.document_terminal(),
                    Text::Of(t) => {
                        let c = chunks(t.raw());
                        if c.is_empty() {
                            return None;
                        }
                        let name = self.fresh("SUB");
                        self.lines.push(format!("{name}: {}", substring(&c)));
                        Some(name)
                    }
                }?;
                if min_len.unwrap_or(0) > 0 && max_len == &Some(0) {
                    return None;
                }
                let name = self.fresh("STR");
                // Not empty, no whitespace (a space or an escaped `\n`, `\t`, `\r`) at either
                // end; at most `max_len` bytes of escaped text (so at most that many characters).
                let mut def = format!(
                    "{name}: {chunks} & /(?s:.+)/ & ~/(?s:( |\\\\[ntr]).*|.*( |\\\\[ntr]))/"
                );
                if let Some(max) = max_len {
                    let _ = write!(def, " & /.{{1,{max}}}/");
                }
                self.lines.push(def);
                Some(format!("{} {name} {}", lit("\""), lit("\"")))
            }
            Shape::Integer { .. } | Shape::Number { .. } if text.is_some() => {
                let candidates = self.number_candidates(shape, text)?;
                alternation(
                    candidates
                        .iter()
                        .map(|d| lit(&d.to_json_literal()))
                        .collect(),
                )
            }
            other => Some(self.json(other)),
        }
    }

    /// An object's fields inline, `{"a": .., "b": ..}`; with `fixed`, its line fields take
    /// those lines and the values grounded in them are drawn from their text.
    fn object_body(
        &mut self,
        object: &ObjectShape,
        text: Option<Text<'_>>,
        depth: usize,
        fixed: Option<&Fixed<'_>>,
    ) -> Option<String> {
        let mut parts = Vec::new();
        for (n, f) in object.fields.iter().enumerate() {
            let v = match fixed {
                Some(x) if f.name == *x.start => Some(lit(&x.a.to_string())),
                Some(x) if f.name == *x.end => Some(lit(&x.b.to_string())),
                _ => {
                    let inner_text = match (&f.grounded, fixed) {
                        (None, _) => None,
                        (Some(Grounding::WithContainer), _) => text,
                        (Some(Grounding::Lines { .. }), Some(x)) => Some(Text::Of(x.lines)),
                        // Grounded in a sibling: within a nested object, the whole document
                        // (the validator checks the sibling).
                        (Some(_), _) => Some(Text::Document),
                    };
                    let outer = std::mem::replace(&mut self.form, f.form);
                    let v = self.value(&f.shape, inner_text, depth + 1);
                    self.form = outer;
                    v
                }
            }?;
            let sep = if n == 0 { lit("{") } else { lit(", ") };
            parts.push(format!(
                "{sep} {} {v}",
                lit(&format!("{}: ", json_str(&f.name)))
            ));
        }
        if parts.is_empty() {
            parts.push(lit("{"));
        }
        parts.push(lit("}"));
        let rule = self.fresh("obj_");
        self.lines.push(format!("{rule}: {}", parts.join(" ")));
        Some(rule)
    }

    /// The JSON Schema of a value of `shape` grounded in `text` where a schema can say it
    /// ([`Grammar::static_grounded_schema`]); `None` when no value of the shape can be written
    /// there.
    fn schema_of(
        &self,
        shape: &Shape,
        text: Option<Text<'_>>,
        depth: usize,
        defs: &mut Map<String, Value>,
    ) -> Option<Value> {
        let plain =
            |defs: &mut Map<String, Value>| shape_schema(shape, &self.grammar.objects, defs);
        match shape {
            Shape::Nullable { inner } => Some(match self.schema_of(inner, text, depth, defs) {
                Some(Value::Object(mut m)) if m.len() == 1 && m.contains_key("enum") => {
                    if let Some(Value::Array(values)) = m.get_mut("enum") {
                        values.push(Value::Null);
                    }
                    Value::Object(m)
                }
                Some(s) => json!({"anyOf": [s, {"type": "null"}]}),
                None => json!({"type": "null"}),
            }),
            Shape::List {
                items,
                min_items,
                max_items,
            } => {
                let item = match self.schema_of(items, text, depth, defs) {
                    Some(item) => item,
                    None if min_items.unwrap_or(0) == 0 => {
                        return Some(json!({"type": "array", "maxItems": 0}))
                    }
                    None => return None,
                };
                let mut map = Map::new();
                map.insert("type".into(), "array".into());
                map.insert("items".into(), item);
                if let Some(n) = min_items {
                    map.insert("minItems".into(), json!(n));
                }
                if let Some(n) = max_items {
                    map.insert("maxItems".into(), json!(n));
                }
                Some(Value::Object(map))
            }
            Shape::Object { index }
                if depth < MAX_DEPTH && (text.is_some() || self.has_grounding(shape, depth)) =>
            {
                let object = self.grammar.objects.get(*index)?;
                let mut properties = Map::new();
                for f in &object.fields {
                    let field_text = match &f.grounded {
                        None => None,
                        // A part copied where its container is: a part of a whole line is a
                        // substring, not a line.
                        Some(Grounding::WithContainer) => text.map(|t| match t {
                            Text::Lines => Text::Document,
                            other => other,
                        }),
                        Some(Grounding::Line) => Some(Text::Lines),
                        Some(_) => Some(Text::Document),
                    };
                    let value = self
                        .schema_of(&f.shape, field_text, depth + 1, defs)
                        .unwrap_or_else(|| shape_schema(&f.shape, &self.grammar.objects, defs));
                    properties.insert(f.name.clone(), value);
                }
                let required: Vec<Value> = object
                    .fields
                    .iter()
                    .map(|f| Value::String(f.name.clone()))
                    .collect();
                Some(json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                }))
            }
            Shape::Integer { .. } | Shape::Number { .. } if text.is_some() => {
                let candidates = self.number_candidates(shape, text)?;
                let mut values: Vec<Value> = Vec::new();
                for d in &candidates {
                    match json_number(d) {
                        Some(v) if !values.contains(&v) => values.push(v),
                        Some(_) => {}
                        None => return Some(plain(defs)),
                    }
                }
                (!values.is_empty()).then(|| json!({"enum": values}))
            }
            Shape::String {
                min_len,
                max_len,
                patterns,
                format,
            } if matches!(text, Some(Text::Lines)) && patterns.is_empty() && format.is_none() => {
                let lines: Vec<Value> = self
                    .document_lines(*max_len)
                    .into_iter()
                    .filter(|l| min_len.is_none_or(|m| l.chars().count() as u64 >= m))
                    .map(Value::from)
                    .collect();
                (!lines.is_empty()).then(|| json!({"enum": lines}))
            }
            Shape::String {
                min_len,
                max_len,
                patterns,
                format,
            } if matches!(text, Some(Text::Document))
                && patterns.is_empty()
                && format.is_none() =>
            {
                let fits = |o: &str| {
                    let n = o.chars().count() as u64;
                    n > 0 && min_len.is_none_or(|m| n >= m) && max_len.is_none_or(|m| n <= m)
                };
                match word_spans(
                    self.grounds.document().raw(),
                    MAX_SPAN_WORDS,
                    MAX_SPAN_OPTIONS,
                ) {
                    Some(spans) => {
                        let options: Vec<Value> = spans
                            .into_iter()
                            .filter(|o| fits(o))
                            .map(Value::String)
                            .collect();
                        (!options.is_empty()).then(|| json!({"enum": options}))
                    }
                    None => Some(plain(defs)),
                }
            }
            _ => Some(plain(defs)),
        }
    }

    /// A string that is one whole line of the document (trimmed), at most `max_len` characters.
    fn lines_terminal(&mut self, max_len: Option<u64>) -> Option<String> {
        let mut alts: Vec<String> = self
            .document_lines(max_len)
            .into_iter()
            .map(|l| lit(&json_str(l)))
            .collect();
        alts.sort();
        if alts.is_empty() {
            return None;
        }
        let name = self.fresh("LINE");
        self.lines.push(format!("{name}: {}", alts.join(" | ")));
        Some(name)
    }

    /// The document's distinct non-empty lines, trimmed, of at most `max_len` characters, in
    /// document order: what a `grounded(line)` string may be.
    fn document_lines(&self, max_len: Option<u64>) -> Vec<&str> {
        let mut seen = std::collections::HashSet::new();
        self.grounds
            .document()
            .raw()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .filter(|l| max_len.is_none_or(|m| l.chars().count() as u64 <= m))
            .filter(|l| seen.insert(*l))
            .collect()
    }

    fn numbers(&self, text: Text<'_>) -> Vec<Decimal> {
        match text {
            Text::Document | Text::Lines => self.grounds.document().numbers().to_vec(),
            Text::Of(t) => t.numbers().to_vec(),
            Text::Empty => Vec::new(),
        }
    }

    /// The terminal offering any substring of one source line, defined once.
    fn document_terminal(&mut self) -> Option<String> {
        if let Some(t) = &self.document_terminal {
            return Some(t.clone());
        }
        let raw = self.grounds.document().raw().to_owned();
        let lines: Vec<&str> = raw.lines().filter(|l| !l.trim().is_empty()).collect();
        let alts: Vec<String> = if lines.len() > MAX_LINE_ALTERNATIVES {
            vec![substring(&chunks(&raw))]
        } else {
            lines.iter().map(|l| substring(&chunks(l))).collect()
        };
        if alts.is_empty() {
            return None;
        }
        let name = self.fresh("DOC");
        self.lines.push(format!("{name}: {}", alts.join(" | ")));
        self.document_terminal = Some(name.clone());
        Some(name)
    }

    /// Whether a value of `shape` holds a field grounded in a text of its own.
    fn has_grounding(&self, shape: &Shape, depth: usize) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        match shape {
            Shape::Nullable { inner } => self.has_grounding(inner, depth),
            Shape::List { items, .. } => self.has_grounding(items, depth),
            Shape::Object { index } => self.grammar.objects.get(*index).is_some_and(|o| {
                o.fields.iter().any(|f| {
                    matches!(&f.grounded, Some(g) if *g != Grounding::WithContainer)
                        || self.has_grounding(&f.shape, depth + 1)
                })
            }),
            _ => false,
        }
    }

    /// `%json {..}`: llguidance's JSON compiler for an ungrounded value.
    fn json(&mut self, shape: &Shape) -> String {
        self.rules_left |= reaches_rules(&self.grammar.objects, shape, &mut Vec::new());
        let mut defs = self.defs.clone();
        let schema = shape_schema(shape, &self.grammar.objects, &mut defs);
        let mut map = match schema {
            Value::Object(m) => m,
            other => {
                let mut m = Map::new();
                m.insert("allOf".into(), Value::Array(vec![other]));
                m
            }
        };
        map.insert(
            "x-guidance".into(),
            self.grammar.options.whitespace.x_guidance(),
        );
        let text = serde_json::to_string(&Value::Object(map.clone())).unwrap_or_default();
        if text.contains("\"$ref\"") && !defs.is_empty() {
            map.insert("$defs".into(), Value::Object(defs));
        }
        let rule = self.fresh("json_");
        let body = serde_json::to_string(&Value::Object(map)).unwrap_or_default();
        self.lines.push(format!("{rule}: %json {body}"));
        rule
    }
}

/// Most joint assignments the rules of one segment are composed into.
const MAX_ASSIGNMENTS: usize = 512;

/// One field of the segment being rendered.
struct SegField {
    name: String,
    nullable: bool,
    /// A non-null value's expression (`None`: no non-null value can be written).
    non_null: Option<String>,
    /// A grounded number's candidates, for rules that compare it.
    candidates: Option<Vec<Decimal>>,
    place: String,
}

/// What an assignment asks of one field.
#[derive(Debug, Clone, PartialEq)]
enum Choice {
    Any,
    Null,
    NonNull,
    /// Non-null, one of these numbers.
    Numbers(Vec<Decimal>),
}

impl SegField {
    fn render(&self, choice: &Choice, lists: &mut NumberLists) -> Option<String> {
        let null = || self.nullable.then(|| lit("null"));
        match choice {
            Choice::Null => null(),
            Choice::NonNull => self.non_null.clone(),
            Choice::Any => match (null(), &self.non_null) {
                (Some(n), Some(v)) => Some(format!("({n} | {v})")),
                (Some(n), None) => Some(n),
                (None, v) => v.clone(),
            },
            Choice::Numbers(ds) => lists.render(ds),
        }
    }
}

/// Alternations of number literals for one segment. A long one is written as a chain of rules
/// `n_k: "x_k" | n_{k+1}` shared by every list with the same tail (hash-consed on the literal
/// and the rule after it), so the suffix lists a `start <= end` over `n` line numbers asks for
/// take `n` rules in all instead of `n * n / 2` literals.
#[derive(Default)]
struct NumberLists {
    chains: std::collections::HashMap<(String, Option<String>), String>,
    lines: Vec<String>,
}

impl NumberLists {
    fn render(&mut self, ds: &[Decimal]) -> Option<String> {
        let lits: Vec<String> = ds.iter().map(|d| lit(&d.to_json_literal())).collect();
        if lits.len() <= CHAIN_MIN {
            return alternation(lits);
        }
        let mut tail: Option<String> = None;
        for l in lits.into_iter().rev() {
            let key = (l, tail.take());
            let next = self.chains.len();
            let name = match self.chains.get(&key) {
                Some(name) => name.clone(),
                None => {
                    let name = format!("num_{next}");
                    let body = match &key.1 {
                        Some(t) => format!("{name}: {} | {t}", key.0),
                        None => format!("{name}: {}", key.0),
                    };
                    self.lines.push(body);
                    self.chains.insert(key, name.clone());
                    name
                }
            };
            tail = Some(name);
        }
        tail
    }
}

/// Whether the grammar can write `rule` out for this segment: each side of a comparison that
/// lies in the segment has a list of candidates, unless the other side was decoded as null
/// (then the rule holds whatever the segment writes).
fn rule_writable(
    rule: &Rule,
    names: &[&str],
    fields: &[SegField],
    decoded: &Map<String, Value>,
) -> bool {
    let Rule::Compare { left, right, .. } = rule else {
        return true;
    };
    let listed = |name: &str| {
        names
            .iter()
            .position(|x| *x == name)
            .is_none_or(|i| fields[i].candidates.is_some())
    };
    let null_before = |name: &str| decoded.get(name).is_some_and(Value::is_null);
    (listed(left) && listed(right)) || null_before(left) || null_before(right)
}

fn merge_choice(a: &Choice, b: &Choice) -> Option<Choice> {
    use Choice::*;
    Some(match (a, b) {
        (Any, x) | (x, Any) => x.clone(),
        (Null, Null) => Null,
        (NonNull, NonNull) => NonNull,
        (NonNull, Numbers(d)) | (Numbers(d), NonNull) => Numbers(d.clone()),
        (Numbers(x), Numbers(y)) => {
            let both: Vec<Decimal> = x.iter().filter(|d| y.contains(d)).cloned().collect();
            if both.is_empty() {
                return None;
            }
            Numbers(both)
        }
        _ => return None,
    })
}

fn merge(a: &[Choice], b: &[Choice]) -> Option<Vec<Choice>> {
    a.iter().zip(b).map(|(x, y)| merge_choice(x, y)).collect()
}

/// The assignments of the segment's fields under which `rule` can still hold, given the values
/// decoded before the segment: `null` after a null partner, a value after a set one, the bound
/// of a compared number from the decoded side or, with both sides in the segment, every pair of
/// candidates that satisfies it.
fn rule_options(
    rule: &Rule,
    names: &[&str],
    fields: &[SegField],
    decoded: &Map<String, Value>,
) -> Vec<Vec<Choice>> {
    let n = fields.len();
    let any = vec![Choice::Any; n];
    let pos = |name: &str| names.iter().position(|x| *x == name);
    let with = |assign: &[(usize, Choice)]| {
        let mut v = any.clone();
        for (i, c) in assign {
            v[*i] = c.clone();
        }
        v
    };
    match rule {
        Rule::BothOrNeither(group) => {
            let here: Vec<usize> = group.iter().filter_map(|g| pos(g)).collect();
            if here.is_empty() {
                return vec![any];
            }
            let before: Vec<&Value> = group.iter().filter_map(|g| decoded.get(g)).collect();
            let set = |c: Choice| with(&here.iter().map(|&i| (i, c.clone())).collect::<Vec<_>>());
            match before.first() {
                Some(v) if v.is_null() => vec![set(Choice::Null)],
                Some(_) => vec![set(Choice::NonNull)],
                None => vec![set(Choice::Null), set(Choice::NonNull)],
            }
        }
        Rule::AtLeastOne(group) => {
            let here: Vec<usize> = group.iter().filter_map(|g| pos(g)).collect();
            let some_before = group
                .iter()
                .any(|g| decoded.get(g).is_some_and(|v| !v.is_null()));
            let later = group
                .iter()
                .any(|g| pos(g).is_none() && !decoded.contains_key(g));
            if some_before || later || here.is_empty() {
                return vec![any];
            }
            // The first non-null field of the group is the k-th of those in the segment.
            (0..here.len())
                .map(|k| {
                    let mut assign: Vec<(usize, Choice)> =
                        here[..k].iter().map(|&i| (i, Choice::Null)).collect();
                    assign.push((here[k], Choice::NonNull));
                    with(&assign)
                })
                .collect()
        }
        Rule::Compare { left, op, right } => {
            let decoded_number = |name: &str| {
                decoded
                    .get(name)
                    .and_then(|v| v.as_number())
                    .and_then(|n| Decimal::from_json_literal(&n.to_string()))
            };
            let holds = |l: &Decimal, r: &Decimal| op.holds(l.cmp_value(r));
            match (pos(left), pos(right)) {
                (Some(l), Some(r)) => {
                    let (Some(lc), Some(rc)) = (&fields[l].candidates, &fields[r].candidates)
                    else {
                        return vec![any];
                    };
                    // Either side null, or a pair that satisfies the rule.
                    let mut out = vec![with(&[(l, Choice::Null)]), with(&[(r, Choice::Null)])];
                    for a in lc {
                        let ok: Vec<Decimal> = rc.iter().filter(|b| holds(a, b)).cloned().collect();
                        if !ok.is_empty() {
                            out.push(with(&[
                                (l, Choice::Numbers(vec![a.clone()])),
                                (r, Choice::Numbers(ok)),
                            ]));
                        }
                    }
                    out
                }
                (None, Some(r)) => match (decoded_number(left), &fields[r].candidates) {
                    (Some(a), Some(rc)) => {
                        let ok: Vec<Decimal> =
                            rc.iter().filter(|b| holds(&a, b)).cloned().collect();
                        let mut out = vec![with(&[(r, Choice::Null)])];
                        if !ok.is_empty() {
                            out.push(with(&[(r, Choice::Numbers(ok))]));
                        }
                        out
                    }
                    _ => vec![any],
                },
                (Some(l), None) => match (decoded_number(right), &fields[l].candidates) {
                    (Some(b), Some(lc)) => {
                        let ok: Vec<Decimal> =
                            lc.iter().filter(|a| holds(a, &b)).cloned().collect();
                        let mut out = vec![with(&[(l, Choice::Null)])];
                        if !ok.is_empty() {
                            out.push(with(&[(l, Choice::Numbers(ok))]));
                        }
                        out
                    }
                    _ => vec![any],
                },
                (None, None) => vec![any],
            }
        }
    }
}

fn place(text: Option<Text<'_>>, grounds: &Grounds<'_>) -> String {
    match text {
        Some(Text::Of(t)) => t.place.clone(),
        Some(Text::Empty) => "an empty or null field".into(),
        Some(Text::Document | Text::Lines) | None => grounds.document().place.clone(),
    }
}

fn alternation(alts: Vec<String>) -> Option<String> {
    match alts.len() {
        0 => None,
        1 => alts.into_iter().next(),
        _ => Some(format!("({})", alts.join(" | "))),
    }
}

/// A Lark string literal.
fn lit(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// `text` as it appears inside a JSON string, without the quotes.
fn json_str(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn escaped(text: &str) -> String {
    let s = json_str(text);
    s[1..s.len() - 1].to_owned()
}

/// `text` cut where a copied value may start or end: words, whitespace runs, and every other
/// character alone; each chunk as JSON string content (escaped).
fn chunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut kind = 0u8; // 1 word, 2 space
    for c in text.chars() {
        let k = if c.is_alphanumeric() {
            1
        } else if c.is_whitespace() {
            2
        } else {
            3
        };
        if k != kind || k == 3 {
            if !cur.is_empty() {
                out.push(escaped(&cur));
                cur.clear();
            }
            kind = k;
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(escaped(&cur));
    }
    out
}

fn substring(chunks: &[String]) -> String {
    let value = serde_json::json!({ "substring_chunks": chunks });
    format!("%regex {value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_spans_are_runs_of_whole_words_within_a_line() {
        let spans = word_spans("Revenue of $4,065  million.\nOutlook", 2, 100).expect("few");
        for want in [
            "Revenue",
            "Revenue of",
            "$4,065  million.",
            "$4,065  million",
            "million",
            "Outlook",
        ] {
            assert!(spans.iter().any(|s| s == want), "{want}: {spans:?}");
        }
        // Not across lines, not more than two words, not inside a word.
        assert!(!spans
            .iter()
            .any(|s| s.contains('\n') || s == "of $4,065  million" || s == "illion"));
        assert!(spans
            .iter()
            .all(|s| "Revenue of $4,065  million.\nOutlook".contains(s.as_str())));
        assert_eq!(
            word_spans("a b c d e f", 8, 5),
            None,
            "more options than allowed"
        );
    }

    #[test]
    fn chunks_escape_and_split() {
        assert_eq!(
            chunks("Q3 \"rev\" $2,757"),
            ["Q3", " ", "\\\"", "rev", "\\\"", " ", "$", "2", ",", "757"]
        );
        assert_eq!(chunks("a\tb"), ["a", "\\t", "b"]);
        assert!(chunks("").is_empty());
    }
}
