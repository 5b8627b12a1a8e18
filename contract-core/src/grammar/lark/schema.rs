//! The static grounded JSON Schema ([`Grammar::static_grounded_schema`](super::Grammar)): what a
//! schema can say of the groundings, for servers that take a schema (numbers as the `enum` of
//! the document's numbers, strings as the `enum` of its runs of words or lines). Apart from the
//! Lark renderer, which can say more.

use serde_json::{json, Map, Value};

use super::limits::MAX_DEPTH;
use super::render::Renderer;
use super::text::Text;
use crate::attrs::Grounding;
use crate::grammar::{shape_schema, Shape};
use crate::ground::Decimal;

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

/// Whether `shape` is a string, nullable or not (what a [`Form`](crate::Form) reads).
fn is_string(shape: &Shape) -> bool {
    matches!(shape.strip_nullable().0, Shape::String { .. })
}

/// One grounded number as a JSON number, when it survives the `f64` a server reads it as.
fn json_number(d: &Decimal) -> Option<Value> {
    let n = d.to_json_number()?;
    let back = Decimal::from_json_literal(&n.to_string())?;
    back.cmp(d).is_eq().then_some(Value::Number(n))
}

impl Renderer<'_, '_> {
    /// A string field with a [`Form`](crate::Form): the `enum` of the whole expressions
    /// of that form its text writes (null added when the field is nullable), as the Lark
    /// renderer offers them. `None` for other shapes, or when the text writes none and the
    /// field cannot be null (no value can be written).
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

    /// The JSON Schema of a value of `shape` grounded in `text` where a schema can say it
    /// ([`Grammar::static_grounded_schema`]); `None` when no value of the shape can be written
    /// there.
    pub(super) fn schema_of(
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
                        (Some(form), Some(t)) if is_string(&f.shape) => {
                            self.form_schema(form, &f.shape, t)
                        }
                        _ => self.schema_of(&f.shape, field_text, depth + 1, defs),
                    };
                    let value = match value {
                        Some(v) => v,
                        // A grounded value its text cannot give (no number, no expression of
                        // its form): no object can be written, as in the Lark grammar, so a
                        // nullable container is null rather than open to any value.
                        None if field_text.is_some() => return None,
                        None => shape_schema(&f.shape, &self.grammar.objects, defs),
                    };
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ground::Grounds;

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
}
