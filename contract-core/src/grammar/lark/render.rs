//! The Lark renderer ([`Renderer`]): a grounded value of each shape written as llguidance
//! rules and terminals (substrings of the document, numbers it writes, line ranges, nested
//! objects), everything else through llguidance's `%json`. Apart from the public entry points
//! in the parent, which pick the segment and the text, and from the static schema (`schema`).

use std::fmt::Write as _;
use std::ops::Range;

use serde_json::{Map, Value};

use super::error::GroundedGrammarError;
use super::limits::{
    MAX_DEPTH, MAX_LINE_RANGES, MAX_OFFERED_CHARS, MAX_ROOT_SPAN_LINES, MAX_SPAN_LINES,
};
use super::lines::{held_by_ranges, line_fields};
use super::rules::{
    merge, rule_options, rule_writable, Choice, NumberLists, SegField, MAX_ASSIGNMENTS,
};
use super::text::{
    alternation, document_windows, json_str, lit, place, substring_alternatives, substrings, Text,
};
use crate::attrs::{Form, Grounding, Rule};
use crate::grammar::{shape_schema, Grammar, ObjectShape, Shape};
use crate::ground::{Decimal, GroundText, Grounds};

/// A grounded string's escaped text starts with neither a space nor an escaped `\n`, `\t`, `\r`
/// (a character other than a space or `\`, or `\` and another escape) and ends with neither (a
/// character other than those, an `n`, `t` or `r` not escaped, or an escaped `\`): two positive
/// regexes, not empty.
const NOT_BLANK_AT_ENDS: &str =
    "/(?s:([^ \\\\]|\\\\[^ntr]).*)/ & /(?s:.*[^ ntr\\\\]|.*[^\\\\][ntr]|[ntr]|.*\\\\\\\\)/";

/// Line fields fixed to one range, and the text of those lines.
struct Fixed<'t> {
    start: &'t String,
    end: &'t String,
    a: usize,
    b: usize,
    lines: &'t GroundText,
}

pub(super) struct Renderer<'g, 's> {
    pub(super) grammar: &'g Grammar,
    pub(super) grounds: &'g Grounds<'s>,
    /// Every object contract's schema, for `%json` values that reference them.
    pub(super) defs: Map<String, Value>,
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
    pub(super) fn new(grammar: &'g Grammar, grounds: &'g Grounds<'s>) -> Self {
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

    pub(super) fn root(
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
                            .map(Decimal::from_i128)
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
        let rules: &[Rule] = &root.rules;
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        // What each rule asks of the segment's fields, as alternative assignments.
        let mut alternatives: Vec<Vec<Choice>> = vec![vec![Choice::Any; fields.len()]];
        for rule in rules {
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
    pub(super) fn number_candidates(
        &self,
        shape: &Shape,
        text: Option<Text<'_>>,
    ) -> Option<Vec<Decimal>> {
        let text = text?;
        let written = self.ground_text(text);
        match shape {
            Shape::Integer { min, max } => Some(
                written
                    .map_or(&[][..], GroundText::numbers)
                    .iter()
                    .filter(|d| d.to_i128().is_some_and(|n| n >= *min && n <= *max))
                    .cloned()
                    .collect(),
            ),
            // A fractional number is never a part of a date or a period (`2025` of `the second
            // quarter of 2025`): [`GroundText::amounts`](crate::ground::GroundText::amounts). Its
            // bounds are checked on the number the literal parses to, as the validator checks
            // them ([`NumberBounds::admits`](crate::ir::NumberBounds::admits)).
            Shape::Number { bounds } => Some(
                written
                    .map_or(&[][..], GroundText::amounts)
                    .iter()
                    .filter(|d| d.to_json_number().is_some_and(|n| bounds.admits(&n)))
                    .cloned()
                    .collect(),
            ),
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

    /// A string that is one whole line of the document (trimmed), at most `max_len` characters.
    fn lines_terminal(&mut self, max_len: Option<u64>) -> Option<String> {
        let mut alts: Vec<String> = self
            .document_lines(max_len)
            .into_iter()
            .map(|l| lit(&json_str(&l)))
            .collect();
        alts.sort();
        if alts.is_empty() {
            return None;
        }
        let name = self.fresh("LINE");
        self.lines.push(format!("{name}: {}", alts.join(" | ")));
        Some(name)
    }

    /// The document's whole-line values of at most `max_len` characters, in document order:
    /// what a `grounded(line)` string may be ([`quotable_lines`](crate::ground::quotable_lines):
    /// its distinct non-empty lines, trimmed, a sentence wrapped over two or three of them
    /// written whole in place of its lines).
    pub(super) fn document_lines(&self, max_len: Option<u64>) -> Vec<String> {
        crate::ground::quotable_lines(self.grounds.document().raw())
            .into_iter()
            .filter(|l| max_len.is_none_or(|m| l.chars().count() as u64 <= m))
            .collect()
    }

    /// The text a value drawn from `text` lies in; `None` for [`Text::Empty`].
    fn ground_text<'a>(&'a self, text: Text<'a>) -> Option<&'a GroundText> {
        match text {
            Text::Document | Text::Lines => Some(self.grounds.document()),
            Text::Of(t) => Some(t),
            Text::Empty => None,
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
    pub(super) fn has_grounding(&self, shape: &Shape, depth: usize) -> bool {
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
