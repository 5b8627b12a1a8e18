//! Grounded grammars: the contract's output in llguidance's Lark syntax, with every grounded
//! value drawn from the document.
//!
//! A grounded string becomes a substring terminal (`%regex {"substring_chunks": [..]}`) over
//! its text, cut into chunks at word boundaries (words, whitespace runs, other characters alone)
//! so that a value never starts or ends inside a word. For values grounded in the document, one
//! alternative per window of [`MAX_VALUE_LINES`] consecutive lines (none blank) joined by a space
//! (`document_windows`): a name or an address wrapped over two lines can be copied whole (with
//! a space for the break) and a quote still cannot run on through the document; for
//! `grounded(in = ..)`, the value's own text. A string's length bound is intersected with its
//! substrings only while that stays cheap for llguidance (`EXACT_LENGTH_BUDGET`); a longer
//! text is offered as overlapping pieces of at most the bound (`substring_alternatives`), so
//! compiling stays linear in the document (one line of 200,000 characters included). The
//! validator ([`GroundText::find_str`]) accepts exactly the values a window offers. A grounded number
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
use crate::ground::{Decimal, GroundText, Grounds, MAX_VALUE_LINES};

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
        /// The most they may hold ([`MAX_OFFERED_CHARS`]).
        max: usize,
    },
}

/// Deepest nesting of grounded objects rendered inline (a recursive contract stops there and
/// goes on through llguidance's JSON compiler, ungrounded).
const MAX_DEPTH: usize = 8;
/// Documents with more windows of [`MAX_VALUE_LINES`] lines than this (or whose windows hold
/// more than [`MAX_OFFERED_CHARS`] characters) are offered as one substring terminal over their
/// lines, a value kept within one line.
const MAX_WINDOW_ALTERNATIVES: usize = 2000;
/// Most characters the substring alternatives of one grounded string may hold. llguidance
/// refuses a grammar whose lexer starts with more than its initial fuel (1,000,000 units by
/// default: measured, one line of 200,000 characters cut into pieces for a length bound of 1,000
/// is refused, "initial lexer configuration (grammar) too big"); past this bound the grammar says
/// so at once, naming the passages a document can be cut into.
pub const MAX_OFFERED_CHARS: usize = 250_000;
/// Largest `characters x max_len` for which a grounded string's length bound is written as a
/// regex intersected with its substrings (`& /.{1,max}/`). llguidance runs such a lexeme over
/// the whole token trie when it compiles it, through states that pair a place in the text with
/// a count of characters: measured with the SmolLM2 tokenizer, 5,000 characters of one line
/// with `max_len` 1,000 took 5.9 s to compile (100: 0.6 s; none: 36 ms), and one line of 200,000
/// characters ran for over 20 minutes. Beyond this, texts longer than `max_len` are cut into
/// overlapping pieces instead ([`substring_alternatives`]).
const EXACT_LENGTH_BUDGET: usize = 100_000;
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

/// A grounded string's escaped text starts with neither a space nor an escaped `\n`, `\t`, `\r`
/// (a character other than a space or `\`, or `\` and another escape) and ends with neither (a
/// character other than those, an `n`, `t` or `r` not escaped, or an escaped `\`): two positive
/// regexes, not empty.
const NOT_BLANK_AT_ENDS: &str =
    "/(?s:([^ \\\\]|\\\\[^ntr]).*)/ & /(?s:.*[^ ntr\\\\]|.*[^\\\\][ntr]|[ntr]|.*\\\\\\\\)/";

/// Most words in one option of a substring `enum` ([`word_spans`]).
const MAX_SPAN_WORDS: usize = 8;
/// Most options a substring `enum` may have; a longer document's strings keep their plain
/// schema in [`Grammar::static_grounded_schema`].
const MAX_SPAN_OPTIONS: usize = 2000;

/// Every run of at most `max_words` whole words of `text` that lies in one line or crosses one
/// line break into the next line (written with one space for the break, inner
/// spacing of a line kept), and each run with the punctuation at its ends removed; `None` when
/// there are more than `max_options` distinct ones. Each lies in `text` as a grounded string
/// grounded in the document must ([`GroundText::find_str`]), so an `enum` of them admits only
/// grounded values: a stricter promise than "any substring within a few lines" (a value that
/// starts or ends inside a word, or crosses two line breaks, is left out), which is what a JSON
/// Schema can say without one alternative per character position.
fn word_spans(text: &str, max_words: usize, max_options: usize) -> Option<Vec<String>> {
    // Byte ranges of a line's words (runs of non-whitespace).
    fn words(line: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in line.char_indices() {
            match (c.is_whitespace(), start) {
                (true, Some(s)) => {
                    out.push((s, i));
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = start {
            out.push((s, line.len()));
        }
        out
    }
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |span: &str| -> bool {
        let trimmed = span.trim_matches(|c: char| c.is_ascii_punctuation() && c != '$' && c != '%');
        for option in [span, trimmed] {
            if !option.is_empty() && seen.insert(option.to_string()) {
                if out.len() == max_options {
                    return false;
                }
                out.push(option.to_string());
            }
        }
        true
    };
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let here = words(line);
        for i in 0..here.len() {
            for j in i..here.len().min(i + max_words) {
                if !push(&line[here[i].0..here[j].1]) {
                    return None;
                }
            }
        }
        // Runs that start in this line and end in the next (a blank one ends the run).
        let Some(next) = lines.get(n + 1) else {
            continue;
        };
        let (Some(last), there) = (here.last(), words(next)) else {
            continue;
        };
        for i in 0..here.len() {
            let taken = here.len() - i;
            for j in 0..there.len().min(max_words.saturating_sub(taken)) {
                let span = format!(
                    "{} {}",
                    &line[here[i].0..last.1],
                    &next[there[0].0..there[j].1]
                );
                if !push(&span) {
                    return None;
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
    /// The document's substring terminals, once defined, by the length bound they were cut
    /// for: (bound, name, whether the bound must still be intersected, whether a value must
    /// stay within one line, the definition).
    document_terminals: Vec<(Option<u64>, String, bool, bool, String)>,
    /// The first value that could not be offered for a reason the caller must hear (a document
    /// too long to copy from).
    error: Option<GroundedGrammarError>,
    /// The field being rendered, for messages.
    field: String,
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
            document_terminals: Vec::new(),
            error: None,
            field: String::new(),
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
            self.field.clone_from(&f.name);
            let non_null = self.value(&inner, text, 0);
            self.form = None;
            if let Some(e) = self.error.take() {
                return Err(e);
            }
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
                if min_len.unwrap_or(0) > 0 && max_len == &Some(0) {
                    return None;
                }
                let (chunks, bounded, one_line) = match text {
                    Text::Empty | Text::Lines => return None,
                    Text::Document => self.document_terminal(*max_len)?,
                    Text::Of(t) => {
                        let (alts, bounded) =
                            substring_alternatives(&[t.raw().to_owned()], *max_len);
                        if alts.is_empty() {
                            return None;
                        }
                        let name = self.fresh("SUB");
                        self.lines.push(format!("{name}: {}", substrings(&alts)));
                        (name, bounded, false)
                    }
                };
                let name = self.fresh("STR");
                // Not empty, no whitespace (a space or an escaped `\n`, `\t`, `\r`) at either
                // end, said positively (a complement, `~/( |\\[ntr]).*|.*( |\\[ntr])/`, took 5x
                // as long to compile on 50,000 characters); in the document's one-text fallback,
                // no line break; where alternatives longer than `max_len` were kept whole, at
                // most `max_len` bytes of escaped text (so at most that many characters).
                let mut def = format!("{name}: {chunks} & {NOT_BLANK_AT_ENDS}");
                if one_line {
                    def.push_str(" & /(?s:([^\\\\]|\\\\[^n])*)/");
                }
                if let (true, Some(max)) = (bounded, max_len) {
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
    /// A string field with a [`Form`](crate::Form): the `enum` of the whole expressions
    /// of that form its text writes (null added when the field is nullable), as the Lark
    /// renderer offers them. `None` (the plain schema) for other shapes or when the text
    /// writes none and the field cannot be null.
    fn form_schema(&self, form: crate::Form, shape: &Shape, text: Text<'_>) -> Option<Value> {
        let (inner, nullable) = shape.strip_nullable();
        let Shape::String {
            min_len, max_len, ..
        } = inner
        else {
            return None;
        };
        let raw = match text {
            Text::Empty => "",
            Text::Document | Text::Lines => self.grounds.document().raw(),
            Text::Of(t) => t.raw(),
        };
        let mut values: Vec<Value> = Vec::new();
        for e in crate::read::expressions(form, raw) {
            let n = e.chars().count() as u64;
            if max_len.is_some_and(|m| n > m) || n < min_len.unwrap_or(0) {
                continue;
            }
            let v = Value::String(e);
            if !values.contains(&v) {
                values.push(v);
            }
        }
        if nullable {
            values.push(Value::Null);
        }
        (!values.is_empty()).then(|| json!({"enum": values}))
    }

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
                    let value = match (f.form, field_text) {
                        (Some(form), Some(t)) => self.form_schema(form, &f.shape, t),
                        _ => None,
                    }
                    .or_else(|| self.schema_of(&f.shape, field_text, depth + 1, defs))
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

    /// The terminal offering the substrings of the document a string of at most `max_len`
    /// characters grounded in it may be ([`document_windows`], [`substring_alternatives`]),
    /// defined once per bound; with whether the bound must still be intersected and whether a
    /// value must stay within one line.
    fn document_terminal(&mut self, max_len: Option<u64>) -> Option<(String, bool, bool)> {
        if let Some((_, name, bounded, one_line, _)) =
            self.document_terminals.iter().find(|t| t.0 == max_len)
        {
            return Some((name.clone(), *bounded, *one_line));
        }
        let (texts, one_line) = document_windows(self.grounds.document().raw());
        // Cutting for a bound only adds text: a document already too long is refused first.
        let raw_chars: usize = texts.iter().map(|t| t.chars().count()).sum();
        if raw_chars > MAX_OFFERED_CHARS {
            return self.too_long(raw_chars);
        }
        let (mut alts, bounded) = substring_alternatives(&texts, max_len);
        if one_line {
            // One text: the lines (or their pieces) with a line break between, which the
            // terminal keeps out of a value.
            let mut joined = Vec::new();
            for (i, a) in alts.into_iter().enumerate() {
                if i > 0 {
                    joined.push("\\n".to_owned());
                }
                joined.extend(a);
            }
            alts = vec![joined];
        }
        let chars: usize = alts.iter().flatten().map(|c| c.chars().count()).sum();
        if chars > MAX_OFFERED_CHARS {
            return self.too_long(chars);
        }
        if alts.iter().all(Vec::is_empty) {
            return None;
        }
        let body = substrings(&alts);
        // Bounds that cut nothing share one definition.
        let name = match self.document_terminals.iter().position(|t| t.4 == body) {
            Some(i) => self.document_terminals[i].1.clone(),
            None => {
                let name = self.fresh("DOC");
                self.lines.push(format!("{name}: {body}"));
                name
            }
        };
        self.document_terminals
            .push((max_len, name.clone(), bounded, one_line, body));
        Some((name, bounded, one_line))
    }

    /// Records that the field being rendered would offer `chars` characters, too many.
    fn too_long<T>(&mut self, chars: usize) -> Option<T> {
        self.error.get_or_insert(GroundedGrammarError::TooLong {
            field: self.field.clone(),
            chars,
            max: MAX_OFFERED_CHARS,
        });
        None
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

/// The texts a string grounded in the document is a substring of: one per window of up to
/// [`MAX_VALUE_LINES`] consecutive lines, none blank (each trimmed), the lines joined by one
/// space (a value may cross a line break, written as a space, and cannot run on through the
/// document nor across a blank line), without repeats; and whether a value must stay within one
/// line. A document with more than [`MAX_WINDOW_ALTERNATIVES`] windows, or windows of more than
/// [`MAX_OFFERED_CHARS`] characters in all, gives its lines instead, to be offered as one text
/// with a line break between them that a value may not cross (one substring terminal compiles
/// in time linear in its text; windows repeat each line up to [`MAX_VALUE_LINES`] times).
fn document_windows(raw: &str) -> (Vec<String>, bool) {
    // Runs of consecutive non-blank lines, trimmed.
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    for line in raw.lines().map(str::trim) {
        if line.is_empty() {
            if !block.is_empty() {
                blocks.push(std::mem::take(&mut block));
            }
        } else {
            block.push(line);
        }
    }
    if !block.is_empty() {
        blocks.push(block);
    }
    let k = MAX_VALUE_LINES.max(1);
    let starts = |b: &Vec<&str>| b.len().saturating_sub(k) + 1;
    let count: usize = blocks.iter().map(starts).sum();
    let total: usize = blocks
        .iter()
        .flatten()
        .map(|l| l.len() + 1)
        .sum::<usize>()
        .saturating_mul(k);
    if count > MAX_WINDOW_ALTERNATIVES || total > MAX_OFFERED_CHARS {
        return (
            blocks.into_iter().flatten().map(str::to_owned).collect(),
            true,
        );
    }
    let mut seen = std::collections::HashSet::new();
    let windows = blocks
        .iter()
        .flat_map(|b| (0..starts(b)).map(move |i| b[i..(i + k).min(b.len())].join(" ")))
        .filter(|w| seen.insert(w.clone()))
        .collect();
    (windows, false)
}

/// The chunk lists (escaped) of the substring alternatives that offer the substrings of
/// `texts` a string of at most `max_len` characters may be, and whether the bound must still be
/// intersected with them (`& /.{1,max}/`). Texts no longer than the bound need no bound. While
/// the texts longer than it hold at most [`EXACT_LENGTH_BUDGET`] / `max_len` characters, they
/// are kept whole and the bound is intersected (exact); beyond, each is cut into pieces of at
/// most `max_len` characters that overlap by at least half of it ([`pieces`]): every substring of
/// up to `max_len / 2` characters lies in one of them, longer ones where they fit one, none is
/// longer than the bound, and compiling stays linear in the text.
fn substring_alternatives(texts: &[String], max_len: Option<u64>) -> (Vec<Vec<String>>, bool) {
    let raw: Vec<Vec<&str>> = texts
        .iter()
        .map(|t| raw_chunks(t))
        .filter(|c| !c.is_empty())
        .collect();
    let escape = |lists: Vec<Vec<&str>>| -> Vec<Vec<String>> {
        lists
            .into_iter()
            .map(|c| c.into_iter().map(escaped).collect())
            .collect()
    };
    let Some(max) = max_len.map(|m| usize::try_from(m).unwrap_or(usize::MAX)) else {
        return (escape(raw), false);
    };
    let chars = |c: &[&str]| c.iter().map(|x| x.chars().count()).sum::<usize>();
    let long: usize = raw.iter().map(|c| chars(c)).filter(|&n| n > max).sum();
    if long == 0 {
        return (escape(raw), false);
    }
    if long.saturating_mul(max) <= EXACT_LENGTH_BUDGET {
        return (escape(raw), true);
    }
    let mut out = Vec::new();
    for c in raw {
        if chars(&c) <= max {
            out.push(c);
        } else {
            out.extend(pieces(&c, max));
        }
    }
    (escape(out), false)
}

/// `chunks` cut into runs of at most `max` characters, consecutive runs overlapping by at least
/// `max / 2` characters (so every run of chunks of up to that many characters lies in one);
/// a chunk longer than `max` belongs to none (no value of the bound can hold it).
fn pieces<'c>(chunks: &[&'c str], max: usize) -> Vec<Vec<&'c str>> {
    let half = (max / 2).max(1);
    let lens: Vec<usize> = chunks.iter().map(|c| c.chars().count()).collect();
    let mut out = Vec::new();
    let mut p = 0;
    while p < chunks.len() {
        if lens[p] > max {
            p += 1;
            continue;
        }
        let q = (p..chunks.len())
            .find(|&i| lens[i] > max)
            .unwrap_or(chunks.len());
        // Prefix sums over the segment `p..q`.
        let mut pre = Vec::with_capacity(q - p + 1);
        pre.push(0usize);
        for l in &lens[p..q] {
            pre.push(pre[pre.len() - 1] + l);
        }
        let (mut s, mut e, mut pushed) = (0, 0, 0);
        loop {
            while e < q - p && pre[e + 1] - pre[s] <= max {
                e += 1;
            }
            // A run that ends where the one before did lies inside it.
            if e > pushed {
                out.push(chunks[p + s..p + e].to_vec());
                pushed = e;
            }
            if e == q - p {
                break;
            }
            // The next run starts where at least `half` characters of this one remain.
            let target = pre[e].saturating_sub(half);
            let next = pre.partition_point(|&x| x <= target).saturating_sub(1);
            s = next.max(s + 1);
            e = e.max(s);
        }
        p = q;
    }
    out
}

fn substrings(alternatives: &[Vec<String>]) -> String {
    alternatives
        .iter()
        .map(|c| substring(c))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// `text` cut where a copied value may start or end: words (runs of alphanumeric characters),
/// whitespace runs, and every other character alone. A value made of whole chunks starts and
/// ends at word boundaries as [`is_word_boundary`](crate::ground::is_word_boundary) defines them.
fn raw_chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut kind = 0u8; // 1 word, 2 space, 3 other
    for (i, c) in text.char_indices() {
        let k = if c.is_alphanumeric() {
            1
        } else if c.is_whitespace() {
            2
        } else {
            3
        };
        if (k != kind || k == 3) && i > start {
            out.push(&text[start..i]);
            start = i;
        }
        kind = k;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// [`raw_chunks`], each chunk as JSON string content (escaped).
#[cfg(test)]
fn chunks(text: &str) -> Vec<String> {
    raw_chunks(text).into_iter().map(escaped).collect()
}

fn substring(chunks: &[String]) -> String {
    let value = serde_json::json!({ "substring_chunks": chunks });
    format!("%regex {value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_spans_are_runs_of_whole_words_across_at_most_one_break() {
        let text = "Revenue of $4,065  million.\n\nOutlook raised\nfor 2025";
        let spans = word_spans(text, 2, 100).expect("few");
        for want in [
            "Revenue",
            "Revenue of",
            "$4,065  million.",
            "$4,065  million",
            "million",
            "Outlook",
            // Across one line break, with a space.
            "million.",
            "raised for",
        ] {
            assert!(spans.iter().any(|s| s == want), "{want}: {spans:?}");
        }
        // Not across two breaks, not more than two words, not inside a word, no raw break.
        assert!(!spans.iter().any(|s| s.contains('\n')
            || s == "of $4,065  million"
            || s == "illion"
            || s.contains("million. Outlook")
            || s.contains("raised for 2025")));
        // Every option is what the validator accepts for a string grounded in the document.
        let source = crate::Source::from_text(text);
        let grounds = Grounds::new(&source);
        for s in &spans {
            assert!(grounds.document().contains_str(s), "{s:?}");
        }
        assert_eq!(
            word_spans("a b c d e f", 8, 5),
            None,
            "more options than allowed"
        );
    }

    /// What the document's terminal offers by its chunk model, whitespace collapsed: every run
    /// of whole chunks of a window with no whitespace at its ends.
    fn offered(doc: &str) -> std::collections::HashSet<String> {
        // In the one-line fallback the texts are the lines: the same model.
        let (windows, _) = document_windows(doc);
        let mut out = std::collections::HashSet::new();
        for w in &windows {
            let c = raw_chunks(w);
            for i in 0..c.len() {
                if c[i].trim().is_empty() {
                    continue;
                }
                let mut run = String::new();
                for chunk in &c[i..] {
                    run.push_str(chunk);
                    if !chunk.trim().is_empty() {
                        out.insert(crate::ground::collapse(&run));
                    }
                }
            }
        }
        out
    }

    /// A document of a few short lines: words, digits, punctuation, a letter outside ASCII,
    /// spacing runs, blank lines.
    fn document() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex(
            "([ab1é$,.()] {0,2}){0,8}(\n {0,2}([ab1é$,.()] {0,2}){0,8}){0,5}",
        )
        .unwrap_or_else(|e| panic!("strategy: {e}"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// The validator accepts a string grounded in the document exactly when the grounded
        /// grammar's chunks can write it (up to whitespace): every run of whole chunks of a
        /// window is accepted, and any other cut of the text (inside a word, over more lines
        /// than a window) is refused.
        #[test]
        fn the_validator_accepts_what_the_windows_offer(
            doc in document(),
            cuts in proptest::collection::vec((0usize..200, 0usize..200), 1..12),
        ) {
            let source = crate::Source::from_text(&doc);
            let grounds = Grounds::new(&source);
            let offered = offered(&doc);
            for v in &offered {
                proptest::prop_assert!(grounds.document().contains_str(v), "{v:?} in {doc:?}");
            }
            // Arbitrary cuts of the text as written and of its lines joined by spaces.
            let joined = doc.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
            for text in [doc.as_str(), joined.as_str()] {
                let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
                for &(a, b) in &cuts {
                    let (a, b) = (bounds[a % bounds.len()], bounds[b % bounds.len()]);
                    let v = &text[a.min(b)..a.max(b)];
                    let want = offered.contains(&crate::ground::collapse(v));
                    proptest::prop_assert_eq!(
                        grounds.document().contains_str(v), want, "{:?} in {:?}", v, doc
                    );
                }
            }
        }

        /// Pieces are never longer than the bound, and every run of chunks of up to half of it
        /// lies in one of them.
        #[test]
        fn pieces_cover_every_short_run(
            text in proptest::string::string_regex("([a-z]{1,9}[ ,.]){1,60}").unwrap_or_else(|e| panic!("{e}")),
            max in 4usize..40,
        ) {
            let chunks = raw_chunks(&text);
            let runs = pieces(&chunks, max);
            let len = |c: &[&str]| c.iter().map(|x| x.chars().count()).sum::<usize>();
            for r in &runs {
                proptest::prop_assert!(len(r) <= max && !r.is_empty());
            }
            let joined: Vec<String> = runs.iter().map(|r| r.concat()).collect();
            for i in 0..chunks.len() {
                for j in i + 1..=chunks.len() {
                    let run = &chunks[i..j];
                    if len(run) <= max / 2 && run.iter().all(|c| c.chars().count() <= max) {
                        let s = run.concat();
                        proptest::prop_assert!(joined.iter().any(|p| p.contains(&s)), "{s:?} / {max}");
                    }
                }
            }
        }
    }

    #[test]
    fn long_texts_are_cut_for_a_length_bound_or_bounded_exactly() {
        let short = vec!["Revenue of $4,065 million.".to_owned()];
        // No bound, or a bound longer than every text: no intersection needed.
        assert!(!substring_alternatives(&short, None).1);
        assert!(!substring_alternatives(&short, Some(100)).1);
        // A text longer than the bound, small: kept whole, the bound intersected.
        let (alts, bounded) = substring_alternatives(&short, Some(10));
        assert!(bounded);
        assert_eq!(alts.len(), 1);
        // A long one: pieces of at most the bound, no intersection.
        let long = vec!["word ".repeat(40_000)];
        let (alts, bounded) = substring_alternatives(&long, Some(1000));
        assert!(!bounded);
        assert!(alts.len() > 200 && alts.len() < 500, "{}", alts.len());
        assert!(alts
            .iter()
            .all(|a| a.iter().map(|c| c.chars().count()).sum::<usize>() <= 1000));
    }

    #[test]
    fn documents_are_windows_of_three_lines() {
        // A blank line ends a window; a repeated window is offered once.
        let (w, one_line) = document_windows("a\n\n  b  \nc\nd\nb\nc\nd");
        assert!(!one_line);
        assert_eq!(w, ["a", "b c d", "c d b", "d b c"]);
        assert_eq!(document_windows("only").0, ["only"]);
        assert!(document_windows(" \n\t").0.is_empty());
        let many = (0..MAX_WINDOW_ALTERNATIVES + 5)
            .map(|i| format!("l{i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let (w, one_line) = document_windows(&many);
        assert!(one_line, "too many windows: the lines, one text");
        assert_eq!(w.len(), MAX_WINDOW_ALTERNATIVES + 5);
        assert_eq!(w[1], "l1");
    }

    /// A name copied from the document.
    #[derive(crate::Contract, serde::Serialize, serde::Deserialize)]
    struct Named {
        #[contract(grounded)]
        name: Option<String>,
        #[contract(grounded, len = ..=40)]
        short: Option<String>,
    }

    #[test]
    fn the_document_terminal_is_windows_or_one_line_or_refused() {
        use crate::Contract as _;
        let grammar = Named::grammar();
        let lark = |text: &str| {
            let source = crate::Source::from_text(text);
            grammar.static_grounded_lark(&Grounds::new(&source))
        };
        // Windows: a line break is offered as a space; no length regex on short windows.
        let l = lark("Insured: Northern Star\nShipping Company\nLimited").expect("grammar");
        assert!(l.contains(r#""Star"," ","Shipping""#), "{l}");
        // Only `short` (at most 40 characters, the window has 48) needs a length regex; both
        // fields share the one terminal.
        assert_eq!(l.matches("/.{1,").count(), 1, "{l}");
        assert_eq!(l.matches("substring_chunks").count(), 1, "{l}");
        assert!(!l.contains('~'), "positive regexes only: {l}");
        // Past the window bound: one text, a value kept off its line breaks.
        let many = (0..MAX_WINDOW_ALTERNATIVES + 10)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let l = lark(&many).expect("grammar");
        assert_eq!(
            l.matches("substring_chunks").count(),
            1,
            "lines shorter than both bounds: one terminal"
        );
        assert!(l.contains(r#""0","\\n","line""#), "{}", &l[..300]);
        assert!(l.contains(r"[^n])*)/"), "no line break in a value");
        // A length bound over a text a little longer than it: intersected exactly.
        let l = lark(&"word ".repeat(20)).expect("grammar");
        assert!(l.contains("/.{1,40}/"), "{l}");
        // A giant line: refused at once, with the way out.
        let giant = "word ".repeat(120_000);
        let t0 = std::time::Instant::now();
        let err = lark(&giant).expect_err("too long");
        println!(
            "a 600,000-char line refused in {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
        assert!(
            matches!(err, GroundedGrammarError::TooLong { ref field, .. } if field == "name"),
            "{err}"
        );
        assert!(err.to_string().contains("contract_core::passage"), "{err}");
        // One of 100,000 characters: pieces of the bounds, compiled by llguidance elsewhere.
        let l = lark(&"word ".repeat(20_000)).expect("pieces fit");
        assert!(!l.contains("/.{1,"), "pieces need no length regex");
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
