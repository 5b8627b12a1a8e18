//! Grounded grammars: the contract's output in llguidance's Lark syntax, with every grounded
//! value drawn from the document.
//!
//! A grounded string becomes a substring terminal (`%regex {"substring_chunks": [..]}`) over its
//! text, cut into chunks at word boundaries (words, whitespace runs, other characters alone) so
//! that a value never starts or ends inside a word. For values grounded in the document, one
//! alternative per window of [`MAX_VALUE_LINES`](crate::ground::MAX_VALUE_LINES) consecutive lines
//! (none blank) joined by a space (`document_windows`): a name or an address wrapped over two lines
//! can be copied whole (with a space for the break) and a quote still cannot run on through the
//! document; for `grounded(in = ..)`, the value's own text. A string's length bound is intersected
//! with its substrings only while that stays cheap for llguidance (`EXACT_LENGTH_BUDGET`); a longer
//! text is offered as overlapping pieces of at most the bound (`substring_alternatives`), so
//! compiling stays linear in the document (one line of 200,000 characters included). The validator
//! ([`GroundText::find_str`](crate::ground::GroundText::find_str)) accepts exactly the values a
//! window offers. A grounded number becomes the alternation of the numbers its text writes
//! ([`numbers_in`](crate::ground::numbers_in)), kept to those the field's bounds allow. Everything
//! else is llguidance's JSON compiler (`%json {..}`), with the grammar's whitespace layout.
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
//!
//! This module holds the entry points and the segmenting; the Lark rendering is in `render`, the
//! rules' joint choices at the root in `rules`, the static schema in `schema`, the document's
//! windows, chunks and substring terminals in `text`, the bounds (`MAX_*`, `CHAIN_MIN`,
//! `EXACT_LENGTH_BUDGET`) in `limits`, span-like objects' line fields in `lines`, and
//! [`GroundedGrammarError`] in `error`.

mod error;
mod limits;
mod lines;
mod render;
mod rules;
mod schema;
mod text;

use std::ops::Range;

use serde_json::{Map, Value};

use super::{shape_schema, Grammar, ObjectShape, Shape};
use crate::attrs::{Grounding, Rule};
use crate::ground::Grounds;
use lines::{held_by_ranges, line_fields};
use render::Renderer;

pub use error::GroundedGrammarError;
pub use limits::MAX_OFFERED_CHARS;

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
        root.rules.iter().all(|rule| {
            let (names, numbers): (Vec<&str>, bool) = match rule {
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

#[cfg(test)]
mod tests {
    use super::limits::MAX_WINDOW_ALTERNATIVES;
    use super::*;

    /// A name copied from the document.
    #[derive(crate::Contract, serde::Serialize, serde::Deserialize)]
    struct Named {
        #[contract(grounded)]
        name: Option<String>,
        #[contract(grounded, len = ..=40)]
        short: Option<String>,
    }

    /// A share under an exclusive bound.
    #[derive(crate::Contract, serde::Serialize, serde::Deserialize)]
    struct Share {
        #[contract(grounded, exclusive_max = 0.1)]
        share: Option<f64>,
    }

    /// Two figures, the first below the second.
    #[derive(crate::Contract, serde::Serialize, serde::Deserialize)]
    #[contract(rule = "low < high")]
    struct Pair {
        #[contract(grounded)]
        low: Option<f64>,
        #[contract(grounded)]
        high: Option<f64>,
    }

    #[test]
    fn numbers_are_offered_as_the_validator_reads_them() {
        use crate::Contract as _;
        // `0.09999999999999999999` is below 0.1 as a decimal, but a reply that writes it parses
        // to the float 0.1, which the validator refuses under `< 0.1`.
        let text = "Shares of 0.05 and 0.09999999999999999999 were sold.";
        let source = crate::Source::from_text(text);
        let lark = Share::grammar()
            .static_grounded_lark(&Grounds::new(&source))
            .expect("grammar");
        assert!(lark.contains("0.05"), "{lark}");
        assert!(!lark.contains("0.0999"), "{lark}");
        for (reply, ok) in [("0.05", true), ("0.09999999999999999999", false)] {
            let json = format!(r#"{{"share": {reply}}}"#);
            assert_eq!(
                Share::from_json_in(&json, &source).is_ok(),
                ok,
                "the validator on {json}"
            );
        }
    }

    #[test]
    fn rules_compare_numbers_as_the_validator_reads_them() {
        use crate::Contract as _;
        // `0.10000000000000000001` parses to the float 0.1: not above `0.1` for the validator.
        let text = "From 0.1 to 0.10000000000000000001, then 0.2.";
        let source = crate::Source::from_text(text);
        let lark = Pair::grammar()
            .static_grounded_lark(&Grounds::new(&source))
            .expect("grammar");
        let long = "0.10000000000000000001";
        let ok = |low: &str, high: &str| {
            Pair::from_json_in(&format!(r#"{{"low": {low}, "high": {high}}}"#), &source).is_ok()
        };
        assert!(!ok("0.1", long) && ok("0.1", "0.2") && ok(long, "0.2"));
        // The grammar writes out a pair of non-null values exactly when the validator takes it:
        // each low value's alternative lists the high values it may take.
        let highs_after = |low: &str| {
            let marker = format!(r#""\"low\": " "{low}" ", " "\"high\": " "#);
            lark.split(&marker)
                .nth(1)
                .map(|rest| rest.split(r#" | "{""#).next().unwrap_or(rest).to_owned())
                .unwrap_or_default()
        };
        for low in ["0.1", long, "0.2"] {
            for high in ["0.1", long, "0.2"] {
                let written = highs_after(low).contains(&format!(r#""{high}""#));
                assert_eq!(written, ok(low, high), "low {low}, high {high}: {lark}");
            }
        }
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
}
