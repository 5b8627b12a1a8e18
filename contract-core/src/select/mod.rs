//! Evidence selection: the model judges the document's passages (or the values it writes) for
//! each group of fields, and the values are copied from the best ones only.
//!
//! Why: asked to fill a contract from a whole document, a small model copies the wrong span
//! (a barcode as a receipt's total, a registration number as its date, the reported quarter
//! instead of the guidance): greedy decoding commits to the first tokens of an answer before
//! it has seen the rest of it. Scoring whole answers fixes most of that
//! (`docs/benchmarks.md`, "Passage choice"). So for a grounded contract the
//! [`Extractor`](crate::Extractor) by default:
//!
//! 1. cuts the document into passages ([`passage`](crate::passage): lines, sentences and
//!    entries that wrap over lines, pieces of long lines, every one bounded);
//! 2. groups the contract's fields ([`field_groups`]): fields tied by a rule or a grounding
//!    (`both_or_neither(period, low, high)`, `grounded(in = quote)`) or named in one
//!    `#[contract(group = "..")]` are judged and extracted together, every other field alone;
//! 3. judges, in [`Backend::score`](crate::Backend::score) requests (a local backend answers them in few forward
//!    calls, a server through log-probabilities):
//!    - [`Judge::Values`] (the default) for a group whose first field's values the document
//!      lets one list ([`value_candidates`]: the whole expressions of its form, the numbers it
//!      writes, its lines when they are short): every such value is scored as that field's
//!      answer over the whole document (by default as the sentence answering a question in
//!      words, [`ValuePrompt`]), and a passage ranks by the best value written in it;
//!    - a yes/no question about each passage alone for the other groups (and for documents
//!      longer than [`Selection::max_shown_chars`]): the group's
//!      `#[contract(question = "..")]`, else one made from the fields' doc comments;
//! 4. fills a group of one field whose whole value is such a value (a grounded string, a
//!    date's `original`) with the best value itself; extracts every other group from its best
//!    passage alone, under a mask that can only copy text of that passage (the request's
//!    source is an [excerpt](Source::excerpt)); a list from its best passages together;
//! 5. reads the whole contract back (normalised and checked against the document, the
//!    contract's own checks included); a group whose values are refused is tried again with
//!    its next value or passage, up to [`Selection::tries`], then left null;
//! 6. records every group's judge, question, scores, the passages used and every attempt in
//!    the [`Extraction`](crate::Extraction).
//!
//! A group whose best passage scores below [`Selection::min_margin`] is not stated in the
//! document: its fields are null (a list empty) without asking the model for them.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::ops::Range;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::contract::{ContractSpec, Form, Grounding};
use crate::extract::{ScoreRequest, ScoreResponse};
use crate::ir::Node;
use crate::passage::{Cutter, Passage};
use crate::prompt::{Message, Messages};
use crate::source::Source;

/// The answers a judge's question is scored by.
pub const ANSWERS: [&str; 4] = ["yes", "Yes", "no", "No"];

/// How a document is cut into the passages that are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Passages {
    /// Every non-empty line ([`Cutter::lines`]).
    Lines,
    /// Sentences and entries, wrapped lines joined ([`Cutter::sentences`], the default).
    Sentences,
    /// Runs of `lines` non-empty lines overlapping by `overlap` ([`Cutter::windows`]).
    Windows {
        /// Lines a window.
        lines: usize,
        /// Lines consecutive windows share (less than `lines`).
        overlap: usize,
    },
    /// One passage a page ([`Cutter::pages`]).
    Pages,
}

/// Whether and how an [`Extractor`](crate::Extractor) selects evidence.
#[derive(Debug, Clone)]
pub struct Selection {
    pub(crate) mode: SelectionMode,
    pub(crate) cutter: Cutter,
    pub(crate) passages: Passages,
    pub(crate) tries: usize,
    pub(crate) list_passages: usize,
    pub(crate) min_margin: f64,
    pub(crate) min_value_margin: f64,
    pub(crate) max_judged: usize,
    pub(crate) lexical_weight: f64,
    pub(crate) questions: BTreeMap<String, String>,
    pub(crate) judge: Judge,
    pub(crate) max_shown_chars: usize,
    pub(crate) max_value_line_chars: usize,
    pub(crate) max_values: usize,
    pub(crate) value_prompt: ValuePrompt,
}

/// How [`Judge::Values`] asks the model for a field's value when it scores the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ValuePrompt {
    /// The default: [`ValuePrompt::Question`] for a number (an amount, a count),
    /// [`ValuePrompt::Contract`] for a string or an expression of a form (a name, a date).
    /// Measured on the 20 development receipts with the 0.5B model (`docs/benchmarks.md`,
    /// "Receipts"): asked in words, the best value was the right total in 12 of 20, as the JSON
    /// reply in 8; for the shop's name the words lost one the JSON reply had right (a document
    /// number, `SO00022185`, was the best sentence) and gained none in the receipts compared.
    #[default]
    Auto,
    /// A question in words after the document, made from the field's doc comment
    /// ("Question: what is the total amount paid? Answer in one sentence."), and each value
    /// scored as the sentence that answers it ("The total amount paid is 60.30.";
    /// [`ValueCandidates::question`], [`ValueCandidates::sentences`]).
    Question,
    /// The contract's own extraction prompt, each value scored as the JSON reply starts
    /// (`{"total": {"value": 60.30,`; [`ValueCandidates::answers`]).
    Contract,
}

/// How a group's passages are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Judge {
    /// The default. When the group's first field has values the document lets one enumerate
    /// ([`value_candidates`]: the expressions of its form, the numbers the document writes, its
    /// lines; not a `grounded(line)` quote of evidence) and the whole document fits [`Selection::max_shown_chars`], each such value is
    /// scored as the field's answer over the whole document (as [`Selection::value_prompt`]
    /// asks), and `null` with it; a passage ranks by its best value, its margin that value's
    /// log-likelihood minus `null`'s. A grounded string's values are the document's short
    /// lines, each line's value after a label, a name and its bracketed code as two values
    /// ([`line_values`]), and each line joined to the next (a name the layout wrapped). A group of one field
    /// whose value is that whole copy (a date's `original`, a number, a grounded string) takes
    /// the values themselves, best first, without generating. Every other group is judged by
    /// [`Judge::Question`].
    Values,
    /// A yes/no question about each passage alone ([`judge_prompt`]).
    Question,
}

/// When selection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SelectionMode {
    /// For a grounded contract, when the backend scores answers.
    Auto,
    /// Never.
    Off,
}

impl Default for Selection {
    /// On for grounded contracts; passages cut by [`Cutter::default`]; values judged where a
    /// group's values can be enumerated ([`Judge::Values`], documents of up to 32,000
    /// characters, lines of up to 120 characters as values), else a question; 3 passages tried
    /// per group; lists from their best 4 passages; no group left null for its margins alone
    /// (see [`Selection::min_margin`]); at most 96 passages judged per group, 400 values.
    fn default() -> Self {
        Selection {
            mode: SelectionMode::Auto,
            cutter: Cutter::default(),
            passages: Passages::Sentences,
            tries: 3,
            list_passages: 4,
            min_margin: f64::NEG_INFINITY,
            min_value_margin: f64::NEG_INFINITY,
            max_judged: 96,
            lexical_weight: 1.0,
            questions: BTreeMap::new(),
            judge: Judge::Values,
            max_shown_chars: 32_000,
            max_value_line_chars: 120,
            max_values: 400,
            value_prompt: ValuePrompt::Auto,
        }
    }
}

impl Selection {
    /// No selection: the model reads the whole document (within the budget, if any).
    pub fn off() -> Self {
        Selection {
            mode: SelectionMode::Off,
            ..Selection::default()
        }
    }

    /// Whether selection may run.
    pub fn is_on(&self) -> bool {
        self.mode != SelectionMode::Off
    }

    /// How the document is cut into passages.
    pub fn cutter(mut self, cutter: Cutter) -> Self {
        self.cutter = cutter;
        self
    }

    /// How the document is cut into passages (sentences by default).
    pub fn passages(mut self, passages: Passages) -> Self {
        self.passages = passages;
        self
    }

    /// The document's passages as this selection cuts them. Windows that do not advance
    /// (`overlap >= lines`) are cut as windows of `lines` lines overlapping by `lines - 1`.
    pub fn cut(&self, source: &Source) -> Vec<Passage> {
        match self.passages {
            Passages::Lines => self.cutter.lines(source),
            Passages::Sentences => self.cutter.sentences(source),
            Passages::Windows { lines, overlap } => {
                let lines = lines.max(1);
                self.cutter
                    .windows(source, lines, overlap.min(lines - 1))
                    .unwrap_or_default()
            }
            Passages::Pages => self.cutter.pages(source),
        }
    }

    /// At most `n` passages (at least 1) tried per group before its fields are left null.
    pub fn tries(mut self, n: usize) -> Self {
        self.tries = n.max(1);
        self
    }

    /// A list field is filled from at most its `n` best passages (at least 1), shown together.
    pub fn list_passages(mut self, n: usize) -> Self {
        self.list_passages = n.max(1);
        self
    }

    /// The margin (`log P(yes) - log P(no)`, in nats) a group's best passage must exceed for
    /// the group to be stated in the document; below it the group is null without asking. Off
    /// by default (negative infinity): on filings releases the 0.5B model's margin for the right
    /// line was often just below 0 (-0.01 to -0.11 in 7 of 40 releases of one seed), so a
    /// group is left null only by the model (a null answer) or by the contract's checks
    /// refusing every passage tried.
    pub fn min_margin(mut self, margin: f64) -> Self {
        self.min_margin = margin;
        self
    }

    /// Under [`Judge::Values`], the margin (a value's log-likelihood minus `null`'s, in nats)
    /// the best value must exceed for the group to be stated; below it the group is null
    /// without asking. Off by default (negative infinity): on the development receipts the
    /// 0.5B model found `null` more likely than the right date on most of them.
    pub fn min_value_margin(mut self, margin: f64) -> Self {
        self.min_value_margin = margin;
        self
    }

    /// The margin below which a group judged by `judge` is not stated.
    pub(crate) fn floor(&self, judge: Judge) -> f64 {
        match judge {
            Judge::Values => self.min_value_margin,
            Judge::Question => self.min_margin,
        }
    }

    /// At most `n` passages (at least 1) judged per group: when more could hold the group's
    /// values, those sharing most words with its question are judged.
    pub fn max_judged(mut self, n: usize) -> Self {
        self.max_judged = n.max(1);
        self
    }

    /// What the words a passage shares with its group's question add to the question judge's
    /// margin, at most (nats; default 1, 0 for the model's margins alone; a value that is not
    /// a finite number, or below 0, counts as 0). The shares are IDF-weighted and scaled so
    /// that the passage sharing most gets all of it ([`JudgePlan::lexical`]). Why: on long
    /// prose the small model barely separates passages (on the development agreements its
    /// margins for the governing-law question spread 0.3 nats from the best passage to the
    /// median one, the governing-law clause ranked 4th to 66th), while the clause shares the
    /// most words with the question in each; a model that does separate passages, by several
    /// nats, still decides (`docs/benchmarks.md`, "Agreements").
    pub fn lexical_weight(mut self, nats: f64) -> Self {
        self.lexical_weight = if nats.is_finite() && nats > 0.0 {
            nats
        } else {
            0.0
        };
        self
    }

    /// How passages are judged ([`Judge::Values`] by default).
    pub fn judge(mut self, judge: Judge) -> Self {
        self.judge = judge;
        self
    }

    /// The longest document (in characters) [`Judge::Values`] shows whole to score values;
    /// a longer one is judged by question.
    pub fn max_shown_chars(mut self, chars: usize) -> Self {
        self.max_shown_chars = chars;
        self
    }

    /// The longest line (in characters) that is a candidate value of a grounded string under
    /// [`Judge::Values`]; a string field of a document whose lines are longer, or whose median
    /// line is longer than 40 characters (prose, whatever width it is wrapped at), is judged
    /// by question.
    pub fn max_value_line_chars(mut self, chars: usize) -> Self {
        self.max_value_line_chars = chars;
        self
    }

    /// The most values [`Judge::Values`] scores for one group (400 by default); a group whose
    /// field the document writes more values for is judged by question.
    pub fn max_values(mut self, n: usize) -> Self {
        self.max_values = n.max(1);
        self
    }

    /// How [`Judge::Values`] asks for a value when it scores them ([`ValuePrompt::Auto`] by
    /// default).
    pub fn value_prompt(mut self, prompt: ValuePrompt) -> Self {
        self.value_prompt = prompt;
        self
    }

    /// The question asked of every passage for the group holding `field` (a JSON name),
    /// instead of the contract's own (`#[contract(question = "..")]`) or the one made from the
    /// doc comments. Write it as a yes/no question about one passage ("Does this line give the
    /// total amount paid?").
    pub fn question(mut self, field: impl Into<String>, question: impl Into<String>) -> Self {
        self.questions.insert(field.into(), question.into());
        self
    }
}

/// What a passage must contain to hold a group's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Needs {
    /// A digit: the group has a number to copy.
    pub digit: bool,
    /// A letter: the group has text to copy.
    pub letter: bool,
}

/// Fields judged and extracted together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldGroup {
    /// The group's name: its `#[contract(group = "..")]`, else its first field's.
    pub name: String,
    /// Its fields' JSON names, in the contract's order.
    pub fields: Vec<String>,
    /// The question asked of every passage.
    pub question: String,
    /// Whether a field is a list (filled from several passages).
    pub list: bool,
    /// Whether every field may be absent (null, or an empty list): the group may be "not
    /// stated".
    pub optional: bool,
    /// What a passage must contain to hold the values.
    pub needs: Needs,
}

/// The contract's root fields grouped for selection: fields tied by a cross-field rule, by a
/// grounding in another field (`grounded(in = quote)`, a span's lines) or by one
/// `#[contract(group = "..")]` are one group; a contract-level `#[contract(question = "..")]`
/// makes every field without its own `group` or `question` one group asked that question;
/// every other field is a group of its own. Groups come in the order of their first field.
/// `overrides` are questions by field name ([`Selection::question`]).
pub fn field_groups(spec: &ContractSpec, overrides: &BTreeMap<String, String>) -> Vec<FieldGroup> {
    let Some(object) = spec.object() else {
        return Vec::new();
    };
    let fields = &object.properties;
    let n = fields.len();
    let index = |name: &str| fields.iter().position(|f| f.name == name);
    // Union-find over field indices.
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], i: usize) -> usize {
        let mut i = i;
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let union = |parent: &mut Vec<usize>, a: usize, b: usize| {
        let (ra, rb) = (find(parent, a), find(parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    };
    for rule in &object.rules {
        let names: Vec<usize> = rule.fields().iter().filter_map(|f| index(f)).collect();
        for pair in names.windows(2) {
            union(&mut parent, pair[0], pair[1]);
        }
    }
    for (i, f) in fields.iter().enumerate() {
        if let Some(g) = &f.node.grounded {
            for d in g.depends_on() {
                if let Some(j) = index(d) {
                    union(&mut parent, i, j);
                }
            }
        }
    }
    let mut by_group: HashMap<&str, usize> = HashMap::new();
    for (i, f) in fields.iter().enumerate() {
        if let Some(g) = &f.node.group {
            match by_group.get(g.as_str()) {
                Some(&j) => union(&mut parent, i, j),
                None => {
                    by_group.insert(g, i);
                }
            }
        }
    }
    let contract_question = spec.node.question.as_deref();
    if contract_question.is_some() {
        let loose: Vec<usize> = (0..n)
            .filter(|&i| fields[i].node.group.is_none() && fields[i].node.question.is_none())
            .collect();
        for pair in loose.windows(2) {
            union(&mut parent, pair[0], pair[1]);
        }
    }
    let mut order: Vec<usize> = Vec::new();
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..n {
        let r = find(&mut parent, i);
        if !members.contains_key(&r) {
            order.push(r);
        }
        members.entry(r).or_default().push(i);
    }
    order
        .into_iter()
        .map(|r| {
            let idx = &members[&r];
            let names: Vec<String> = idx.iter().map(|&i| fields[i].name.clone()).collect();
            let name = idx
                .iter()
                .find_map(|&i| fields[i].node.group.clone())
                .unwrap_or_else(|| names[0].clone());
            let question = names
                .iter()
                .find_map(|f| overrides.get(f).cloned())
                .or_else(|| idx.iter().find_map(|&i| fields[i].node.question.clone()))
                .or_else(|| {
                    let all_loose = idx.iter().all(|&i| {
                        fields[i].node.group.is_none() && fields[i].node.question.is_none()
                    });
                    contract_question.filter(|_| all_loose).map(str::to_owned)
                })
                .unwrap_or_else(|| {
                    let described: Vec<&crate::ir::FieldSpec> =
                        idx.iter().map(|&i| &fields[i]).collect();
                    question_from_docs(spec, &described)
                });
            let mut needs = Needs::default();
            for &i in idx {
                let node = &fields[i].node;
                let (digit, letter) = node_needs(node, 0);
                needs.digit |= digit;
                needs.letter |= letter;
            }
            FieldGroup {
                name,
                list: idx.iter().any(|&i| is_list(&fields[i].node)),
                optional: idx
                    .iter()
                    .all(|&i| fields[i].node.is_nullable() || is_list(&fields[i].node)),
                fields: names,
                question: capitalise(question.trim()),
                needs,
            }
        })
        .collect()
}

/// Whether a field's value is a list.
fn is_list(node: &Node) -> bool {
    node.non_null().array.is_some()
}

/// What a passage needs to hold a value of `node`: a digit (a number, a date, a period), a
/// letter (text, a currency, a duration).
fn node_needs(node: &Node, depth: usize) -> (bool, bool) {
    if depth > 8 {
        return (false, true);
    }
    let node = node.non_null();
    if let Some(items) = node.items() {
        return node_needs(items, depth + 1);
    }
    if let Some(spec) = node.contract() {
        let Some(object) = spec.object() else {
            return (false, true);
        };
        // The copied parts of a value type: a grounded number or a dated text needs a digit.
        let mut digit = false;
        let mut letter = false;
        for f in &object.properties {
            let copied = f.node.grounded.is_some();
            match f.node.form {
                Some(Form::Date) | Some(Form::Period) if copied => digit = true,
                _ => {}
            }
            let (d, l) = node_needs(&f.node, depth + 1);
            if copied && d && !f.node.is_nullable() {
                digit = true;
            }
            letter |= l && !f.node.is_nullable();
        }
        return (digit, letter || !digit);
    }
    if node.is_numeric() {
        return (true, false);
    }
    match node.form {
        Some(Form::Date) | Some(Form::Period) => (true, false),
        _ => (false, true),
    }
}

/// A question about one passage made from the fields' doc comments: "Does this text give
/// <first clause of the doc comment>?" for one field, the clauses joined for several (the
/// contract's description when the group is the whole contract); a field without a doc comment
/// by its name.
fn question_from_docs(spec: &ContractSpec, fields: &[&crate::ir::FieldSpec]) -> String {
    let clauses: Vec<String> = fields
        .iter()
        .map(|f| {
            f.description()
                .and_then(first_clause)
                .unwrap_or_else(|| format!("the {}", f.name.replace('_', " ")))
        })
        .collect();
    let whole = spec
        .object()
        .is_some_and(|o| o.properties.len() == fields.len() && fields.len() > 1);
    let what = match spec.description().and_then(first_clause) {
        Some(d) if whole => d,
        _ => join_and(&clauses),
    };
    format!("does this text give {what}?")
}

fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The first clause of a doc comment, as the object of "does this text give ...": cut at the
/// first sentence end, `;`, parenthesis or copy instruction (`, as written`, `, copied`), the
/// final punctuation dropped, the first letter lowered unless the first word is an acronym.
pub fn first_clause(doc: &str) -> Option<String> {
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut end = doc.len();
    for stop in [". ", "; ", " (", ", as ", ", copied", ": "] {
        if let Some(i) = doc.find(stop) {
            end = end.min(i);
        }
    }
    let clause = doc[..end]
        .trim()
        .trim_end_matches(|c: char| c.is_ascii_punctuation());
    if clause.is_empty() {
        return None;
    }
    let first_word = clause.split(' ').next().unwrap_or("");
    let acronym = first_word.len() > 1 && first_word.chars().all(|c| !c.is_lowercase());
    let mut chars = clause.chars();
    let first = chars.next()?;
    Some(if acronym {
        clause.to_owned()
    } else {
        first.to_lowercase().chain(chars).collect()
    })
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The judge's prompt: the passage, then the question, then "Answer yes or no." (the question
/// after the passage: measured far better than before it, `docs/benchmarks.md`).
pub fn judge_prompt(passage: &str, question: &str) -> Messages {
    Messages(vec![Message::user(format!(
        "{}\n\nQuestion: {question} Answer yes or no.",
        passage.trim()
    ))])
}

/// The judge's margin from one prompt's scored [`ANSWERS`]: `log(P(yes) + P(Yes)) -
/// log(P(no) + P(No))` ([`judge::margin`](crate::judge::margin)).
pub fn margin(logprobs: &[f64]) -> f64 {
    crate::judge::margin(logprobs, &ANSWERS, &["yes", "Yes"], &["no", "No"])
}

/// Lower-cased words of at least three letters, a plural or verb ending taken off: what the
/// lexical pre-ranking compares.
fn stems(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| {
            let w = w.to_lowercase();
            let mut s = w.as_str();
            for suffix in ["ing", "ed", "es", "s"] {
                if s.len() > suffix.len() + 3 {
                    if let Some(t) = s.strip_suffix(suffix) {
                        s = t;
                        break;
                    }
                }
            }
            s.to_owned()
        })
        .collect()
}

/// Words too common in questions to tell passages apart.
const STOP: [&str; 24] = [
    "the", "this", "that", "doe", "does", "text", "give", "and", "for", "with", "which", "what",
    "whose", "from", "are", "was", "its", "any", "has", "have", "not", "who", "when", "how",
];

/// Each of `candidates` (passage indices) with the words it shares with `query`, weighted by
/// their inverse document frequency over the candidates, in the order given.
fn lexical_scores(candidates: &[usize], passages: &[Passage], query: &str) -> Vec<(usize, f64)> {
    let q: Vec<String> = stems(query)
        .into_iter()
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect();
    let docs: Vec<Vec<String>> = candidates
        .iter()
        .map(|&i| stems(&passages[i].text))
        .collect();
    let n = docs.len().max(1) as f64;
    let idf = |w: &str| {
        let df = docs.iter().filter(|d| d.iter().any(|x| x == w)).count() as f64;
        ((n + 1.0) / (df + 0.5)).ln()
    };
    let weights: HashMap<&str, f64> = q.iter().map(|w| (w.as_str(), idf(w))).collect();
    candidates
        .iter()
        .zip(&docs)
        .map(|(&i, d)| {
            let s: f64 = weights
                .iter()
                .filter(|(w, _)| d.iter().any(|x| x == *w))
                .map(|(_, v)| v)
                .sum();
            (i, s)
        })
        .collect()
}

/// Whether passage text could hold values with `needs`.
fn could_hold(text: &str, needs: Needs) -> bool {
    (!needs.digit || text.chars().any(|c| c.is_ascii_digit()))
        && (!needs.letter || text.chars().any(char::is_alphabetic))
}

/// One group's judged passages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// Indices into the passages, best first.
    pub order: Vec<usize>,
    /// The margin of each judged passage, by passage index.
    pub margins: BTreeMap<usize, f64>,
    /// Passages that could hold the group's values (before the cap on those judged).
    pub candidates: usize,
    /// How the passages were judged.
    pub judge: Judge,
    /// For a group filled by its values alone ([`ValueCandidates::direct`]): the group's JSON
    /// object for each value, best first, with its margin and the lines it is written on.
    pub direct: Vec<(Map<String, Value>, f64, Vec<usize>)>,
}

/// What [`judge_plan`] gives.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgePlan {
    /// The prompts to score.
    pub request: ScoreRequest,
    /// For each prompt, the (group, passage) pairs it answers.
    pub owners: Vec<Vec<(usize, usize)>>,
    /// For each group, how many passages could hold its values.
    pub counts: Vec<usize>,
    /// For each group, each judged passage's share of the words of the group's question
    /// (IDF-weighted), from 0 to 1 (the passage sharing most); all 0 when none shares a word.
    pub lexical: Vec<BTreeMap<usize, f64>>,
}

/// The prompts of one [`ScoreRequest`] judging `passages` for every group: which passages each
/// group judges (candidates that could hold its values, capped at `max_judged` by the words
/// they share with the question), and for each prompt, the (group, passage) pairs it answers
/// (a passage's text asked the same question twice is asked once).
pub fn judge_plan(groups: &[FieldGroup], passages: &[Passage], max_judged: usize) -> JudgePlan {
    let mut prompts = Vec::new();
    let mut owners: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut seen: HashMap<(usize, String), usize> = HashMap::new();
    let mut counts = Vec::new();
    let mut lexical = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let candidates: Vec<usize> = (0..passages.len())
            .filter(|&i| could_hold(&passages[i].text, group.needs))
            .collect();
        counts.push(candidates.len());
        let mut scores = lexical_scores(&candidates, passages, &group.question);
        if scores.len() > max_judged {
            // The best by shared words (a stable sort: ties in document order), judged in
            // document order.
            scores.sort_by(|a, b| b.1.total_cmp(&a.1));
            scores.truncate(max_judged);
            scores.sort_unstable_by_key(|&(i, _)| i);
        }
        let top = scores.iter().map(|&(_, s)| s).fold(0.0, f64::max);
        lexical.push(
            scores
                .iter()
                .map(|&(i, s)| (i, if top > 0.0 { s / top } else { 0.0 }))
                .collect(),
        );
        let mut judged: Vec<usize> = scores.iter().map(|&(i, _)| i).collect();
        judged.dedup();
        for p in judged {
            let key = (g, passages[p].text.trim().to_owned());
            match seen.get(&key) {
                Some(&at) => owners[at].push((g, p)),
                None => {
                    seen.insert(key, prompts.len());
                    prompts.push(judge_prompt(&passages[p].text, &group.question));
                    owners.push(vec![(g, p)]);
                }
            }
        }
    }
    JudgePlan {
        request: ScoreRequest {
            prompts,
            answers: ANSWERS.iter().map(|a| (*a).to_owned()).collect(),
        },
        owners,
        counts,
        lexical,
    }
}

/// Each group's passages ranked by the judge's margins (`response` answers the request
/// `plan` made), each margin plus `lexical_weight` times the passage's share of the
/// question's words ([`JudgePlan::lexical`]): a tie-break worth up to `lexical_weight` nats
/// where the model barely separates the passages (see [`Selection::lexical_weight`]). The
/// recorded margins are the model's own. Equal scores keep document order. A margin that is
/// not a number is an error naming the prompt.
pub fn rank(
    plan: &JudgePlan,
    response: &ScoreResponse,
    lexical_weight: f64,
) -> Result<Vec<Ranked>, String> {
    let (owners, counts) = (&plan.owners, &plan.counts);
    let groups = counts.len();
    if response.logprobs.len() != owners.len() {
        return Err(format!(
            "the backend scored {} prompts of {}",
            response.logprobs.len(),
            owners.len()
        ));
    }
    let mut out: Vec<Ranked> = (0..groups)
        .map(|g| Ranked {
            order: Vec::new(),
            margins: BTreeMap::new(),
            candidates: counts.get(g).copied().unwrap_or(0),
            judge: Judge::Question,
            direct: Vec::new(),
        })
        .collect();
    for (prompt, owned) in owners.iter().enumerate() {
        let m = margin(&response.logprobs[prompt]);
        if m.is_nan() {
            return Err(format!(
                "the judge's margin for prompt {prompt} is not a number"
            ));
        }
        for &(g, p) in owned {
            if let Some(r) = out.get_mut(g) {
                r.margins.insert(p, m);
            }
        }
    }
    for (g, r) in out.iter_mut().enumerate() {
        let lexical = plan.lexical.get(g);
        let mut order: Vec<(usize, f64)> = r
            .margins
            .iter()
            .map(|(&p, &m)| {
                let shared = lexical.and_then(|l| l.get(&p)).copied().unwrap_or(0.0);
                (p, m + lexical_weight * shared)
            })
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        r.order = order.into_iter().map(|(p, _)| p).collect();
    }
    Ok(out)
}

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
/// fractional number, not those written only inside a date or a period), a string's the
/// document's lines, their [`line_values`] and each line joined to the next.
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
    // inside dates and periods (`2025` of `the second quarter of 2025`), as the grounded
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
    /// document writes it ("The total amount paid is 60.30."), then "… is not stated." when
    /// the field may be null.
    pub fn sentences(&self) -> Vec<String> {
        let subject = capitalise(&self.clause);
        let mut out: Vec<String> = self
            .values
            .iter()
            .map(|v| {
                let v = v.trim_end_matches([',', '}']);
                let text = serde_json::from_str::<String>(v).unwrap_or_else(|_| v.to_owned());
                format!("{subject} is {text}.")
            })
            .collect();
        if self.null.is_some() {
            out.push(format!("{subject} is not stated."));
        }
        out
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
        let words = match prompt {
            ValuePrompt::Auto => self.numbers,
            ValuePrompt::Question => true,
            ValuePrompt::Contract => false,
        };
        match words {
            true => ScoreRequest {
                prompts: vec![self.question(source)],
                answers: self.sentences(),
            },
            false => ScoreRequest {
                prompts: vec![parts.messages_for_excerpt(source)],
                answers: self.answers(),
            },
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

/// What a model is shown for one try of a group: the passages' lines (and pieces of long
/// lines), for [`Source::excerpt`].
pub fn shown(passages: &[&Passage]) -> Vec<(Range<usize>, Option<Range<usize>>)> {
    passages
        .iter()
        .map(|p| (p.lines.clone(), p.chars.clone()))
        .collect()
}

/// One group's part of an [`Extraction`](crate::Extraction): how its evidence was chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupRecord {
    /// The group's name.
    pub group: String,
    /// Its fields.
    pub fields: Vec<String>,
    /// The question asked of the passages.
    pub question: String,
    /// How its passages were judged.
    pub judge: Judge,
    /// Passages that could hold its values.
    pub candidates: usize,
    /// Passages judged.
    pub judged: usize,
    /// The best-judged passages (at most 5), best first: lines `[first, last]` and margin.
    pub best: Vec<RankedPassage>,
    /// The passages each try showed the model, in order: lines `[first, last]`.
    pub tries: Vec<Vec<[usize; 2]>>,
    /// How the group ended.
    pub outcome: Outcome,
}

/// A judged passage in a [`GroupRecord`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedPassage {
    /// Its first and last line (1-based).
    pub lines: [usize; 2],
    /// `log P(yes) - log P(no)` ([`Judge::Question`]), or its best value's log-likelihood
    /// minus `null`'s ([`Judge::Values`]).
    pub margin: f64,
}

/// How a group of a selected extraction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Filled from the last passage tried.
    Filled,
    /// No passage scored above the margin: not stated, left null.
    NotStated,
    /// No passage could hold its values: left null.
    NoCandidate,
    /// Every passage tried was refused: left null.
    Refused,
    /// Every passage tried was refused and the fields cannot be null: the last reply is kept,
    /// with its violations.
    Failed,
}

/// How an [`Extraction`](crate::Extraction)'s evidence was selected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectionRecord {
    /// Passages the document was cut into.
    pub passages: usize,
    /// Prompts the judge scored.
    pub judged: usize,
    /// Forward calls of the judging (a local backend).
    pub judge_forward_calls: Option<u32>,
    /// Wall time of the judging, in milliseconds.
    pub judge_ms: f64,
    /// Each group.
    pub groups: Vec<GroupRecord>,
}

/// Why selection did not run for an extraction that could have used it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The reason (the backend does not score answers, the document has no passage).
    pub reason: String,
}

/// The JSON object of the whole contract from each group's values: the fields in the
/// contract's order, a group without values giving null (an empty list for a list field).
pub fn merge(
    spec: &ContractSpec,
    values: &[Option<Map<String, Value>>],
    groups: &[FieldGroup],
) -> Value {
    let mut out = Map::new();
    let Some(object) = spec.object() else {
        return Value::Object(out);
    };
    for f in &object.properties {
        let g = groups.iter().position(|g| g.fields.contains(&f.name));
        let v = g
            .and_then(|g| values.get(g)?.as_ref()?.get(&f.name).cloned())
            .unwrap_or_else(|| {
                if is_list(&f.node) && !f.node.is_nullable() {
                    Value::Array(Vec::new())
                } else {
                    Value::Null
                }
            });
        out.insert(f.name.clone(), v);
    }
    Value::Object(out)
}

/// The group a violation at JSON pointer `path` belongs to (by its first segment), if any.
pub fn group_of_path(groups: &[FieldGroup], path: &str) -> Option<usize> {
    let first = path.trim_start_matches('/').split('/').next()?;
    let first = first.replace("~1", "/").replace("~0", "~");
    groups.iter().position(|g| g.fields.contains(&first))
}

/// Items of list values merged from several replies in order, repeats (the same JSON value,
/// strings compared with whitespace collapsed and case folded) left out.
pub fn merge_lists(parts: &[Map<String, Value>], fields: &[String]) -> Map<String, Value> {
    let mut out = Map::new();
    for f in fields {
        let mut items: Vec<Value> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        let mut scalar: Option<Value> = None;
        for part in parts {
            match part.get(f) {
                Some(Value::Array(xs)) => {
                    for x in xs {
                        let key = item_key(x);
                        if !keys.contains(&key) {
                            keys.push(key);
                            items.push(x.clone());
                        }
                    }
                }
                Some(Value::Null) | None => {}
                Some(other) => {
                    if scalar.is_none() {
                        scalar = Some(other.clone());
                    }
                }
            }
        }
        let value = match scalar {
            Some(s) if items.is_empty() => s,
            _ => Value::Array(items),
        };
        out.insert(f.clone(), value);
    }
    out
}

/// What two list items are compared by: a string's words, case folded; any other value's JSON
/// text with every string so normalised (an evidenced item by its value alone).
pub(crate) fn item_key(v: &Value) -> String {
    let v = match v {
        Value::Object(m) if m.contains_key("value") && m.contains_key("evidence") => &m["value"],
        other => other,
    };
    match v {
        Value::String(s) => crate::source::normalize(s),
        other => {
            let mut s = String::new();
            let _ = write!(s, "{}", normalized_json(other));
            s
        }
    }
}

fn normalized_json(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(crate::source::normalize(s)),
        Value::Array(xs) => Value::Array(xs.iter().map(normalized_json).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normalized_json(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Contract;

    /// A receipt.
    #[derive(crate::Contract, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    #[contract(rule = "low <= high")]
    struct Receipt {
        /// The name of the shop that issued the receipt, as printed.
        #[contract(grounded)]
        company: Option<String>,
        /// The total amount paid.
        #[contract(grounded)]
        total: Option<f64>,
        #[contract(grounded)]
        low: Option<f64>,
        #[contract(grounded)]
        high: Option<f64>,
        /// Every item bought.
        #[contract(grounded, group = "items")]
        items: Vec<String>,
        #[contract(
            grounded,
            group = "items",
            question = "Does this text list what was bought?"
        )]
        counts: Vec<u32>,
    }

    #[test]
    fn a_line_offers_its_value_after_a_label_and_before_a_code() {
        let values = |line: &str| -> Vec<String> {
            line_values(line)
                .into_iter()
                .map(|r| line[r].to_owned())
                .collect()
        };
        // A name and its code are two values, never one.
        assert_eq!(
            values("  SYL ROASTED DELIGHTS SDN. BHD. (1072218-K) "),
            ["SYL ROASTED DELIGHTS SDN. BHD.", "1072218-K"]
        );
        assert_eq!(
            values("Company: ACME TRADING (M) SDN BHD <484297-M>"),
            [
                "Company: ACME TRADING (M) SDN BHD",
                "484297-M",
                "ACME TRADING (M) SDN BHD"
            ]
        );
        assert_eq!(
            values("BR NO.: (124525-H)"),
            ["BR NO.: (124525-H)", "(124525-H)"]
        );
        // A name's own brackets, a time, a long label, a bare code: the line alone.
        assert_eq!(
            values("POPULAR BOOK CO. (M) SDN BHD"),
            ["POPULAR BOOK CO. (M) SDN BHD"]
        );
        assert_eq!(values("UNIQLO (MALAYSIA) 2"), ["UNIQLO (MALAYSIA) 2"]);
        assert_eq!(values("Time 20:49:59"), ["Time 20:49:59"]);
        assert_eq!(
            values("the parties agree as follows: nothing"),
            ["the parties agree as follows: nothing"]
        );
        assert_eq!(values("(1072218-K)"), ["(1072218-K)"]);
        assert_eq!(
            values("GST ID: 000115154944"),
            ["GST ID: 000115154944", "000115154944"]
        );
        assert!(values("   ").is_empty());
        assert!(values(" -- ").is_empty());
    }

    #[test]
    fn fields_are_grouped_by_rules_and_group_names() {
        let groups = field_groups(Receipt::contract_spec(), &BTreeMap::new());
        let names: Vec<Vec<&str>> = groups
            .iter()
            .map(|g| g.fields.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            names,
            [
                vec!["company"],
                vec!["total"],
                vec!["low", "high"],
                vec!["items", "counts"]
            ]
        );
        assert_eq!(
            groups[0].question,
            "Does this text give the name of the shop that issued the receipt?"
        );
        assert_eq!(
            groups[1].question,
            "Does this text give the total amount paid?"
        );
        assert_eq!(
            groups[2].question,
            "Does this text give the low and the high?"
        );
        assert_eq!(groups[3].question, "Does this text list what was bought?");
        assert_eq!(groups[3].name, "items");
        assert!(groups[3].list && groups[3].optional);
        assert!(groups[1].needs.digit && !groups[1].needs.letter);
        assert!(!groups[0].needs.digit && groups[0].needs.letter);
        let mut overrides = BTreeMap::new();
        overrides.insert("high".to_owned(), "does this give a range?".to_owned());
        let groups = field_groups(Receipt::contract_spec(), &overrides);
        assert_eq!(groups[2].question, "Does this give a range?");
    }

    #[test]
    fn first_clauses_make_questions() {
        assert_eq!(
            first_clause("The date of the purchase.").as_deref(),
            Some("the date of the purchase")
        );
        assert_eq!(
            first_clause("The period (`Q3 2024`); null when none.").as_deref(),
            Some("the period")
        );
        assert_eq!(
            first_clause("ISO 4217 currency code").as_deref(),
            Some("ISO 4217 currency code")
        );
        assert_eq!(first_clause(" . "), None);
    }

    #[test]
    fn margins_and_merging() {
        let m = margin(&[-0.5, -5.0, -1.0, -6.0]);
        let want = (f64::exp(-0.5) + f64::exp(-5.0)).ln() - (f64::exp(-1.0) + f64::exp(-6.0)).ln();
        assert!((m - want).abs() < 1e-12);
        assert_eq!(
            margin(&[]),
            0.0,
            "no answers scored: no evidence either way"
        );
        let a: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"items": ["Tea", "Milk"], "counts": [1]}))
                .unwrap();
        let b: Map<String, Value> = serde_json::from_value(
            serde_json::json!({"items": ["tea ", "Bread"], "counts": [1, 2]}),
        )
        .unwrap();
        let m = merge_lists(&[a, b], &["items".into(), "counts".into()]);
        assert_eq!(m["items"], serde_json::json!(["Tea", "Milk", "Bread"]));
        assert_eq!(m["counts"], serde_json::json!([1, 2]));
    }

    /// An agreement, judged by question only.
    #[derive(crate::Contract, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Agreement {
        /// The US state whose law governs the agreement.
        #[contract(grounded)]
        jurisdiction: Option<String>,
    }

    /// Scored answers (`yes`, `Yes`, `no`, `No`) giving each prompt the margin in `margins`.
    fn answered(margins: &[f64]) -> ScoreResponse {
        ScoreResponse {
            logprobs: margins
                .iter()
                .map(|m| vec![*m, f64::NEG_INFINITY, 0.0, f64::NEG_INFINITY])
                .collect(),
            exact: true,
            forward_calls: None,
        }
    }

    #[test]
    fn shared_words_break_what_the_model_barely_separates() {
        let groups = field_groups(Agreement::contract_spec(), &BTreeMap::new());
        let source = Source::from_text(
            "CONFIDENTIALITY AGREEMENT.\n\
             The Recipient shall keep the Information secret.\n\
             This Agreement is governed by the law of the State of Delaware.",
        );
        let passages = Cutter::default().lines(&source);
        assert_eq!(passages.len(), 3);
        let plan = judge_plan(&groups, &passages, 96);
        assert_eq!(plan.request.prompts.len(), 3);
        let shares = &plan.lexical[0];
        assert_eq!(shares.get(&2), Some(&1.0), "{shares:?}");
        assert!(shares[&1] < shares[&2], "{shares:?}");
        // The model barely separates the passages (a tenth of a nat, the wrong way): the
        // governing-law line, which shares the question's words, ranks first.
        let flat = answered(&[-0.1, -0.2, -0.2]);
        let r = rank(&plan, &flat, 1.0).unwrap();
        assert_eq!(r[0].order[0], 2, "{:?}", r[0]);
        assert_eq!(
            r[0].margins[&2], -0.2,
            "the record keeps the model's margin"
        );
        // Without the words, the model's order.
        let r = rank(&plan, &flat, 0.0).unwrap();
        assert_eq!(r[0].order, [0, 1, 2]);
        // A model that separates the passages by nats decides.
        let sure = answered(&[3.0, -2.0, -2.0]);
        let r = rank(&plan, &sure, 1.0).unwrap();
        assert_eq!(r[0].order[0], 0);
    }

    #[test]
    fn violations_go_to_their_group() {
        let groups = field_groups(Receipt::contract_spec(), &BTreeMap::new());
        assert_eq!(group_of_path(&groups, "/high"), Some(2));
        assert_eq!(group_of_path(&groups, "/items/3"), Some(3));
        assert_eq!(group_of_path(&groups, ""), None);
        let merged = merge(
            Receipt::contract_spec(),
            &[
                None,
                Some(serde_json::from_value(serde_json::json!({"total": 9.5})).unwrap()),
            ],
            &groups,
        );
        assert_eq!(
            merged,
            serde_json::json!({"company": null, "total": 9.5, "low": null, "high": null, "items": [], "counts": []})
        );
    }
}
