//! The values judge ([`Judge::Values`]): the values a group's first field could take,
//! enumerated from the document ([`value_candidates`]: a form's expressions, the numbers it
//! writes, a short line's [`line_values`]), how they are scored ([`ValueCandidates::request`])
//! and the passages ranked by the best value written in them ([`ValueCandidates::rank`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::ops::Range;

use serde_json::{Map, Value};

use super::groups::{capitalise, first_clause, FieldGroup};
use super::judge::{Judge, Ranked, ValuePrompt};
use crate::attrs::{Form, Grounding};
use crate::extract::ScoreRequest;
use crate::ir::ContractSpec;
use crate::ir::Node;
use crate::passage::Passage;
use crate::prompt::{Message, Messages};
use crate::source::Source;

/// What a group's first field could be, enumerated from the document, for [`Judge::Values`]:
/// each value as the JSON text that would follow [`ValueCandidates::prefix`] in the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueCandidates {
    /// The field.
    pub field: String,
    /// The answer up to the value: `{"total": {"value": `.
    pub prefix: String,
    /// Each value's JSON text, then the character that ends it where the value could go on (a
    /// number is followed by `,` or `}`: `60.3,`); a string ends with its closing quote.
    pub values: Vec<String>,
    /// Where each value is written: (1-based line, byte range in that line).
    pub places: Vec<Vec<(usize, Range<usize>)>>,
    /// The answer `{"field": null`, when the field may be null.
    pub null: Option<String>,
    /// Whether the value is the group's whole answer (one field; the value is the field, or
    /// the only field the model fills inside it; a form's expression or a number, not a line):
    /// the group is filled by the best value itself, closed by `closing`.
    pub direct: bool,
    /// What closes the answer after a value (`}}` for `{"date": {"original": ".."`).
    pub closing: String,
    /// What the field is, in words: the first clause of its doc comment ("the total amount
    /// paid"), else its name ("the total"); what [`ValueCandidates::question`] asks.
    pub clause: String,
    /// Whether the values are numbers (not strings): [`ValuePrompt::Auto`] asks for them in
    /// words.
    pub numbers: bool,
}

/// What kind of values a field's first copied leaf takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaf {
    /// A number; `fractional` when the schema lets it hold a fraction (`number`, not
    /// `integer`): an amount, a measure.
    Number {
        fractional: bool,
    },
    Form(Form),
    Line,
}

/// The first copied leaf of `node`: the keys to it inside nested value types, its kind,
/// whether it is the last property of its object, and whether it is the only one along the path.
fn lead_leaf(node: &Node, depth: usize) -> Option<(Vec<String>, Leaf, bool, bool)> {
    if depth > 8 {
        return None;
    }
    let n = node.non_null();
    if n.items().is_some() {
        return None;
    }
    if let Some(spec) = n.contract() {
        let object = spec.object()?;
        let first = object.properties.first()?;
        first.node.grounded.as_ref()?;
        let (mut keys, leaf, _, only) = lead_leaf(&first.node, depth + 1)?;
        keys.insert(0, first.name.clone());
        let alone = object.properties.len() == 1;
        return Some((keys, leaf, alone, only && alone));
    }
    if n.is_numeric() {
        let fractional = n.value_types().any(|t| t == crate::ir::JsonType::Number);
        return Some((Vec::new(), Leaf::Number { fractional }, true, true));
    }
    if n.value_types().any(|t| t == crate::ir::JsonType::String) {
        let leaf = match (n.form, node.form) {
            (Some(f), _) | (None, Some(f)) => Leaf::Form(f),
            _ => Leaf::Line,
        };
        return Some((Vec::new(), leaf, true, true));
    }
    None
}

/// The values [`Judge::Values`] scores for `group` (its first field) in `source`: `None` when
/// that field is not copied from the document, is a list, takes values that cannot be
/// enumerated (a grounded string in prose: a line longer than `max_line_chars`, or a median
/// line longer than 40 characters), is a whole line of evidence (`grounded(line)`), or the
/// document writes none or more than `max_values`. A form's values are its whole expressions,
/// a number's the numbers the document writes (read with its numeral conventions; for a
/// fractional number, not those written only inside a date, a period or a time of day), a
/// string's the document's lines, their [`line_values`] and each line joined to the next.
pub fn value_candidates(
    spec: &ContractSpec,
    group: &FieldGroup,
    source: &Source,
    max_line_chars: usize,
    max_values: usize,
) -> Option<ValueCandidates> {
    let object = spec.object()?;
    let name = group.fields.first()?;
    let position = object.properties.iter().position(|f| &f.name == name)?;
    let field = &object.properties[position];
    // A whole line of evidence (`grounded(line)`: the sentence that states the values) is
    // judged by question: on filings releases the values judge ranked a results line above
    // the guidance line in 2 of the 5 releases it judged (`docs/benchmarks.md`).
    if matches!(field.node.grounded.as_ref()?, Grounding::Line) {
        return None;
    }
    let (keys, leaf, last_in_object, only) = lead_leaf(&field.node, 0)?;
    let mut prefix = format!("{{{}: ", json_key(name));
    for k in &keys {
        let _ = write!(prefix, "{{{}: ", json_key(k));
    }
    // What follows a number: the next property of its object, or the object's end.
    let last_field = group.fields.len() == 1;
    let number_end = if keys.is_empty() {
        if last_field {
            "}"
        } else {
            ","
        }
    } else if last_in_object {
        "}"
    } else {
        ","
    };
    let lines: Vec<(usize, &str)> = (1..=source.line_count())
        .filter_map(|n| source.line(n).map(|l| (n, l)))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    if leaf == Leaf::Line && is_prose(&lines, max_line_chars) {
        return None;
    }
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut values: Vec<String> = Vec::new();
    let mut places: Vec<Vec<(usize, Range<usize>)>> = Vec::new();
    let mut add = |text: String, place: (usize, Range<usize>)| {
        let i = *index.entry(text.clone()).or_insert_with(|| {
            values.push(text);
            places.push(Vec::new());
            values.len() - 1
        });
        places[i].push(place);
    };
    let numerals = source.numerals();
    // A number's values: each line's numbers, read once; a fractional number's leave out those
    // inside dates, periods and times (`2025` of `the second quarter of 2025`), as the grounded
    // grammar does ([`crate::ground::amounts_in`]).
    let numbers: Vec<Vec<(Range<usize>, crate::ground::Decimal)>> = match leaf {
        Leaf::Number { fractional } => lines
            .iter()
            .map(|(_, l)| {
                let found = crate::ground::numbers_at(l, numerals);
                if fractional {
                    crate::ground::outside_dates(l, found)
                } else {
                    found
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    // Whether the document writes any number with two fraction digits: then its amounts carry
    // minor units, and a long bare digit run is a code, not an amount ([`is_code_digits`]).
    let writes_fractions = lines.iter().zip(&numbers).any(|((_, l), found)| {
        found
            .iter()
            .any(|(r, _)| l.get(r.clone()).is_some_and(has_minor_units))
    });
    for (k, (n, line)) in lines.iter().enumerate() {
        match leaf {
            Leaf::Line => {
                let own = line_values(line);
                for r in &own {
                    if let Some(text) = line.get(r.clone()) {
                        let json = serde_json::to_string(text).unwrap_or_default();
                        add(json, (*n, r.clone()));
                    }
                }
                // A value the layout wrapped: the line (when it runs to the line's end), then
                // the start of the next one (whole, or before its code), written with a space
                // where the line breaks; not a code alone on the next line (`(65351-M)` under
                // a name): a name is not its identifier ([`line_values`]).
                let next = source.line(n + 1).filter(|l| !l.trim().is_empty());
                let first = own.first().filter(|r| r.end == line.trim_end().len());
                if let (Some(first), Some(next)) = (first, next) {
                    let next_start = next.len() - next.trim_start().len();
                    for r in line_values(next)
                        .into_iter()
                        .filter(|r| r.start == next_start)
                        .filter(|r| trailing_code(&next[r.clone()]).is_none_or(|(at, _)| at > 0))
                    {
                        let joined = format!("{} {}", &line[first.clone()], &next[r]);
                        if joined.chars().count() <= max_line_chars {
                            let json = serde_json::to_string(&joined).unwrap_or_default();
                            add(json, (*n, first.clone()));
                        }
                    }
                }
            }
            Leaf::Form(form) => {
                for r in crate::read::find(form, line) {
                    if let Some(text) = line.get(r.clone()) {
                        let json = serde_json::to_string(text).unwrap_or_default();
                        add(json, (*n, r));
                    }
                }
            }
            Leaf::Number { fractional } => {
                // Each number as the line writes it (`538.00`, not `538`): the form the
                // model copies is the one it scores well.
                let mut seen: Vec<String> = Vec::new();
                for (r, d) in numbers.get(k).into_iter().flatten() {
                    let written = line.get(r.clone()).unwrap_or_default();
                    if fractional && writes_fractions && is_code_digits(written) {
                        continue;
                    }
                    let literal = crate::ground::written_literal(d, written);
                    if !seen.contains(&literal) {
                        add(format!("{literal}{number_end}"), (*n, 0..line.len()));
                        seen.push(literal);
                    }
                }
            }
        }
    }
    if values.is_empty() || values.len() > max_values {
        return None;
    }
    let closing = "}".repeat(keys.len() + 1);
    Some(ValueCandidates {
        field: name.clone(),
        null: field
            .node
            .is_nullable()
            .then(|| format!("{{{}: null", json_key(name))),
        prefix,
        values,
        places,
        // A form's whole expression, a number, a short line or its value after a label or
        // before a bracketed code is the value itself.
        direct: only && last_field,
        closing,
        numbers: matches!(leaf, Leaf::Number { .. }),
        clause: field
            .description()
            .and_then(first_clause)
            .unwrap_or_else(|| format!("the {}", name.replace('_', " "))),
    })
}

/// The longest median line (in characters) of a document whose lines are offered as values:
/// a receipt, a form or a list is written in short lines (the development receipts' median
/// lines are 5 to 12 characters), prose in lines as wide as its page (the development
/// agreements' are 54 to 161). In prose a line is a piece of a sentence, not a value: offered as
/// values, a heading won over the state named inside the governing-law sentence, which no line
/// holds alone (`docs/benchmarks.md`, "Agreements").
const MAX_MEDIAN_VALUE_LINE_CHARS: usize = 40;

/// Whether the non-blank `lines` are prose rather than values: one is longer than
/// `max_line_chars`, or the median one longer than [`MAX_MEDIAN_VALUE_LINE_CHARS`].
fn is_prose(lines: &[(usize, &str)], max_line_chars: usize) -> bool {
    let mut lengths: Vec<usize> = lines
        .iter()
        .map(|(_, l)| l.trim().chars().count())
        .collect();
    lengths.sort_unstable();
    lengths.last().is_some_and(|&l| l > max_line_chars)
        || lengths
            .get(lengths.len() / 2)
            .is_some_and(|&m| m > MAX_MEDIAN_VALUE_LINE_CHARS)
}

/// Whether `written` (one number as a document writes it) is a run of five or more digits with
/// no separator: a postcode, a barcode, a registration or slip number. Such a run is not offered
/// as a fractional number's value (an amount, a measure) when the document writes a number with
/// two fraction digits elsewhere ([`has_minor_units`]): printed amounts of five digits or more
/// are grouped (`47,400.00`) or carry their minor units, codes are not. Measured on the development receipts (`docs/benchmarks.md`,
/// "Receipts"): a postcode or a barcode outscored the total in 4 of 20.
fn is_code_digits(written: &str) -> bool {
    written.len() >= 5 && written.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `written` ends in a separator and two digits (`28.50`, `1.234,56`): minor units.
fn has_minor_units(written: &str) -> bool {
    let b = written.as_bytes();
    b.len() >= 4
        && matches!(b[b.len() - 3], b'.' | b',')
        && b[b.len() - 2..].iter().all(u8::is_ascii_digit)
}

/// The values a short line offers a grounded string, as byte ranges of the line: the line
/// (trimmed), the part after a label (`Company: ACME LTD`: up to four words before a colon that
/// is not inside a time or a number), and both again without a bracketed code at their end.
/// A line that ends in a bracketed code (`ACME SDN BHD (123456-X)`: a registration, tax or
/// branch number) offers the text before the code and the code (inside its brackets) as two
/// values, not the two together: a name is not its identifier, and offered whole the model
/// scored the name with its code above the name alone (`docs/benchmarks.md`, "Receipts").
pub fn line_values(line: &str) -> Vec<Range<usize>> {
    let trim = |r: Range<usize>| -> Option<Range<usize>> {
        let text = line.get(r.clone())?;
        let start = r.start + (text.len() - text.trim_start().len());
        let end = r.start + text.trim_end().len();
        (start < end && line[start..end].chars().any(char::is_alphanumeric)).then_some(start..end)
    };
    let Some(whole) = trim(0..line.len()) else {
        return Vec::new();
    };
    let text = &line[whole.clone()];
    // After a label: a colon after one to four words, not between digits (a time, a ratio).
    let after_label = text.find(':').and_then(|at| {
        let label = &text[..at];
        let words = label.split_whitespace().count();
        let digit_around = label.ends_with(|c: char| c.is_ascii_digit())
            && text[at + 1..].starts_with(|c: char| c.is_ascii_digit());
        ((1..=4).contains(&words) && !digit_around)
            .then(|| trim(whole.start + at + 1..whole.end))
            .flatten()
    });
    // A value without its bracketed code, and the code, when `r` ends in one and holds text
    // before it that is not a label (`BR NO.: (124525-H)`); else `r` itself.
    let split = |r: Range<usize>| -> Vec<Range<usize>> {
        match trailing_code(&line[r.clone()]) {
            Some((at, inner)) => match trim(r.start..r.start + at)
                .filter(|name| !line[name.clone()].ends_with(':'))
            {
                Some(name) => [Some(name), trim(r.start + inner.start..r.start + inner.end)]
                    .into_iter()
                    .flatten()
                    .collect(),
                None => vec![r],
            },
            None => vec![r],
        }
    };
    let mut out: Vec<Range<usize>> = Vec::new();
    for r in split(whole)
        .into_iter()
        .chain(after_label.into_iter().flat_map(split))
    {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// A bracketed code at the end of `t` (`(...)`, `[...]` or `<...>` holding a digit and no
/// letters-only word longer than three: a code or a number, not a name's part such as
/// `(Malaysia)`): where its opening bracket is, and the byte range inside the brackets.
fn trailing_code(t: &str) -> Option<(usize, Range<usize>)> {
    let close = t.chars().last()?;
    let open = match close {
        ')' => '(',
        ']' => '[',
        '>' => '<',
        _ => return None,
    };
    let at = t.rfind(open)?;
    let inner = at + open.len_utf8()..t.len() - close.len_utf8();
    let text = t.get(inner.clone())?;
    let code = text.chars().any(|c| c.is_ascii_digit())
        && !text
            .split(|c: char| !c.is_alphabetic())
            .any(|w| w.chars().count() > 3);
    code.then_some((at, inner))
}

fn json_key(key: &str) -> String {
    serde_json::to_string(key).unwrap_or_default()
}

impl ValueCandidates {
    /// The prompt of [`ValuePrompt::Question`]: the document's non-empty lines, numbered as
    /// the extraction prompt numbers them, then a question in words about the field.
    pub fn question(&self, source: &Source) -> Messages {
        Messages(vec![Message::user(format!(
            "{}\n\nQuestion: what is {}? Answer in one sentence.",
            source.numbered_nonempty().trim_end(),
            self.clause
        ))])
    }

    /// The answers [`ValueCandidates::question`] is scored by, in the order of
    /// [`ValueCandidates::answers`]: each value as the sentence that answers it, written as the
    /// document writes it ("The total amount paid is 60.30.\n"), then "… is not stated.\n"
    /// when the field may be null.
    ///
    /// Each sentence ends in a line break after its full stop: a full stop right after a whole
    /// number's digits (`... is 12.`) also takes the probability of a decimal point, so without
    /// the break a whole number outscored the amounts on the receipt (`12` of the till code
    /// `POS:TC12` above `12.30`, `1` of the address's `19-1` above `3.20`); the break is
    /// unlikely where the model expects fraction digits. Measured on the 20 development
    /// receipts: the right total 13 of 20 with the break, 12 without (sroie-068 gained, none
    /// lost).
    pub fn sentences(&self) -> Vec<String> {
        let subject = capitalise(&self.clause);
        let mut out: Vec<String> = self
            .values
            .iter()
            .map(|v| {
                let v = v.trim_end_matches([',', '}']);
                let text = serde_json::from_str::<String>(v).unwrap_or_else(|_| v.to_owned());
                format!("{subject} is {text}.\n")
            })
            .collect();
        if self.null.is_some() {
            out.push(format!("{subject} is not stated.\n"));
        }
        out
    }

    /// Whether `prompt` asks for these values in words ([`ValueCandidates::question`]) rather
    /// than as the contract's reply.
    pub fn in_words(&self, prompt: ValuePrompt) -> bool {
        match prompt {
            ValuePrompt::Auto => self.numbers,
            ValuePrompt::Question => true,
            ValuePrompt::Contract => false,
        }
    }

    /// The prompt and answers `prompt` scores the values by, over the whole `source`; `parts`
    /// is the group's extraction prompt ([`ValuePrompt::Contract`]); under
    /// [`ValuePrompt::Auto`], numbers are asked for in words, the rest as the contract's reply.
    pub fn request(
        &self,
        prompt: ValuePrompt,
        parts: &crate::prompt::PromptParts,
        source: &Source,
    ) -> ScoreRequest {
        if self.in_words(prompt) {
            ScoreRequest {
                prompts: vec![self.question(source)],
                answers: self.sentences(),
            }
        } else {
            ScoreRequest {
                prompts: vec![parts.messages_for_excerpt(source)],
                answers: self.answers(),
            }
        }
    }

    /// The answers to score: every value after the prefix, then `null` when the field may be
    /// null.
    pub fn answers(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .values
            .iter()
            .map(|v| format!("{}{v}", self.prefix))
            .collect();
        out.extend(self.null.clone());
        out
    }

    /// Passages ranked by their best value (`logprobs` answers [`ValueCandidates::answers`]
    /// for one prompt): a passage's margin is the log-likelihood of the best value written in
    /// it minus `null`'s (minus the best value's when the field cannot be null).
    pub fn rank(&self, passages: &[Passage], logprobs: &[f64]) -> Ranked {
        let n = self.values.len();
        let null = if self.null.is_some() {
            logprobs.get(n).copied()
        } else {
            None
        };
        let base = null.unwrap_or_else(|| {
            logprobs
                .iter()
                .take(n)
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
        });
        let mut margins: BTreeMap<usize, f64> = BTreeMap::new();
        let mut direct: Vec<(Map<String, Value>, f64, Vec<usize>)> = Vec::new();
        for (v, places) in self.places.iter().enumerate() {
            let Some(lp) = logprobs.get(v).copied().filter(|x| !x.is_nan()) else {
                continue;
            };
            let m = lp - base;
            if m.is_nan() {
                continue;
            }
            for (line, bytes) in places {
                // A piece of a line holds the values inside its bytes; a value no piece
                // holds whole (a whole line, a number read across a cut) goes to every
                // passage of its line.
                let holds = |p: &Passage| {
                    p.lines.contains(line)
                        && p.chars
                            .as_ref()
                            .is_none_or(|c| c.start <= bytes.start && bytes.end <= c.end)
                };
                let mut raise = |i: usize| {
                    let e = margins.entry(i).or_insert(f64::NEG_INFINITY);
                    *e = e.max(m);
                };
                let holding: Vec<usize> = (0..passages.len())
                    .filter(|&i| holds(&passages[i]))
                    .collect();
                if holding.is_empty() {
                    (0..passages.len())
                        .filter(|&i| passages[i].lines.contains(line))
                        .for_each(&mut raise);
                } else {
                    holding.into_iter().for_each(&mut raise);
                }
            }
            if self.direct {
                // The value without the end a number is scored with (a JSON string ends with
                // its quote, a number literal with a digit: neither with `,` or `}`).
                let value = self.values[v].trim_end_matches([',', '}']);
                let text = format!("{}{value}{}", self.prefix, self.closing);
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&text) {
                    let mut lines: Vec<usize> = places.iter().map(|(l, _)| *l).collect();
                    lines.dedup();
                    direct.push((map, m, lines));
                }
            }
        }
        direct.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut order: Vec<(usize, f64)> = margins.iter().map(|(&p, &m)| (p, m)).collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ranked {
            order: order.into_iter().map(|(p, _)| p).collect(),
            margins,
            candidates: n,
            judge: Judge::Values,
            direct,
        }
    }
}
