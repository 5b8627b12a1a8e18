//! The study: each mode of the reliability ladder over the same documents, one row per
//! document and mode, and a summary table.
//!
//! | mode | what the model gets | what is accepted |
//! |---|---|---|
//! | `free` | the signature in the prompt, one attempt | strict or extracted JSON that validates |
//! | `retry` | as `free`, up to 3 attempts with the violations fed back | same |
//! | `repair` | as `free` | also JSON the ladder repairs |
//! | `constrained` | the token mask (syntax, ranges, patterns) | as `free` |
//! | `rules` | the mask plus the cross-field rules during decoding | as `free` |
//! | `grounded` | [`GroundedGuidance`]: the quote first, every value copied from inside it; the grounded mask (local) or validation against the release and one retry (any backend) | as `free`, grounding included |
//! | `routed` | as `grounded`, with the library's evidence selection: the model judges every passage of the release with the contract's question (a local model, or a server that returns `logprobs`), the values are copied from the best-judged passage alone, and a passage whose answer the contract's check refuses (the reported quarter) gives way to the next; no guidance when the judge finds none | as `grounded` |
//!
//! The modes differ only in what [`ModeBackend`] forwards to the backend and in the extractor's
//! settings, so any [`Backend`] runs the study: the local model, an OpenAI-compatible server, or
//! a scripted one in tests.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::{Arc, Mutex};

use contract_core::extract::{
    Backend, BackendError, Constraint, Decoding, Extraction, Extractor, Request, Response,
};
use contract_core::grammar::{Grammar, Whitespace};
use contract_core::parse::{parse_output_with, ParseOptions};
use contract_core::prompt::{system_message_with, Instructions, PromptParts};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use contract_core::extract::{ScoreRequest, ScoreResponse};
use contract_core::ground::{Decimal, GroundText, Numerals};
use contract_core::select::Selection;
use contract_core::{Amount, Contract, DocContext, Source};

use super::{
    is_correct, millions, normalize, same_millions, Expected, GroundedGuidance, Guidance,
    ReleaseGuidance,
};

/// A rung of the reliability ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Signature in the prompt, one attempt, validate.
    Free,
    /// Signature in the prompt, up to 3 attempts with feedback.
    Retry,
    /// Signature in the prompt, syntax repairs accepted.
    Repair,
    /// The contract's token mask, without the cross-field rules.
    Constrained,
    /// The token mask plus the cross-field rules during decoding.
    Rules,
    /// The grounded contract: values copied from the quoted sentence, enforced while decoding
    /// (local) and checked against the release (every backend).
    Grounded,
    /// `grounded` with the library's evidence selection (the passage the model's yes/no
    /// likelihood ranks first).
    Routed,
}

impl Mode {
    /// Every mode, cheapest first.
    pub const ALL: [Mode; 7] = [
        Mode::Free,
        Mode::Retry,
        Mode::Repair,
        Mode::Constrained,
        Mode::Rules,
        Mode::Grounded,
        Mode::Routed,
    ];

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Free => "free",
            Mode::Retry => "retry",
            Mode::Repair => "repair",
            Mode::Constrained => "constrained",
            Mode::Rules => "rules",
            Mode::Grounded => "grounded",
            Mode::Routed => "routed",
        }
    }

    /// Reads a mode name; `all` gives every mode.
    pub fn parse_list(name: &str) -> Result<Vec<Mode>, String> {
        if name == "all" {
            return Ok(Mode::ALL.to_vec());
        }
        name.split(',')
            .map(|n| {
                Mode::ALL
                    .into_iter()
                    .find(|m| m.as_str() == n.trim())
                    .ok_or_else(|| {
                        format!(
                            "unknown mode `{n}`; expected free, retry, repair, constrained, rules, grounded, routed or all"
                        )
                    })
            })
            .collect()
    }

    /// Whether the backend gets the token-mask grammar.
    pub fn masked(self) -> bool {
        matches!(
            self,
            Mode::Constrained | Mode::Rules | Mode::Grounded | Mode::Routed
        )
    }

    /// Whether the mode runs [`GroundedGuidance`] (and keeps the grammar's grounding).
    pub fn grounded(self) -> bool {
        matches!(self, Mode::Grounded | Mode::Routed)
    }

    /// Attempts per document: `retry` 3, `grounded` and `routed` 2 (a reply with a value outside
    /// the release is fed back once; under the local grounded mask none is), the others 1.
    pub fn attempts(self) -> usize {
        match self {
            Mode::Retry => 3,
            Mode::Grounded | Mode::Routed => 2,
            _ => 1,
        }
    }
}

/// A constraint and its edit for a mode.
type Edited = (Arc<Constraint>, Arc<Constraint>);

/// Wraps a backend and edits each request for a [`Mode`]: the free modes get no grammar,
/// `constrained` gets the grammar without its cross-field rules, `rules` gets it whole; a
/// whitespace layout, when given, replaces the grammar's.
#[derive(Debug, Clone)]
pub struct ModeBackend<B> {
    inner: B,
    mode: Mode,
    whitespace: Option<Whitespace>,
    /// The last constraint edited, and its edit.
    last: Arc<Mutex<Option<Edited>>>,
}

impl<B> ModeBackend<B> {
    /// `inner` in `mode`.
    pub fn new(inner: B, mode: Mode) -> Self {
        ModeBackend {
            inner,
            mode,
            whitespace: None,
            last: Arc::default(),
        }
    }

    /// Forces the grammar's whitespace layout.
    pub fn whitespace(mut self, whitespace: Option<Whitespace>) -> Self {
        self.whitespace = whitespace;
        self.last = Arc::default();
        self
    }

    /// The request `inner` receives.
    pub fn edit(&self, req: &Request) -> Result<Request, BackendError> {
        let mut req = req.clone();
        req.constraint = self.edited(&req.constraint)?;
        Ok(req)
    }

    /// `constraint` edited for the mode, once per constraint: later requests of the contract
    /// share the edited one (and the local backend's compiled mask with it).
    fn edited(&self, constraint: &Arc<Constraint>) -> Result<Arc<Constraint>, BackendError> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((original, edited)) = last.as_ref() {
            if Arc::ptr_eq(original, constraint) {
                return Ok(edited.clone());
            }
        }
        let decoding = match &constraint.decoding {
            _ if !self.mode.masked() => None,
            None => None,
            Some(Decoding::JsonSchema(_)) => {
                return Err(BackendError::InvalidRequest {
                    message: format!(
                        "the request for `{}` has a plain JSON Schema, not a contract grammar",
                        constraint.name
                    ),
                })
            }
            Some(Decoding::Grammar(grammar)) => {
                let mut grammar = Grammar::clone(grammar);
                if self.mode == Mode::Constrained {
                    for object in &mut grammar.objects {
                        object.rules.clear();
                    }
                }
                if !self.mode.grounded() {
                    grammar = grammar.without_grounding();
                }
                if let Some(ws) = self.whitespace {
                    grammar = grammar.with_whitespace(ws);
                }
                Some(Decoding::Grammar(Arc::new(grammar)))
            }
        };
        let edited = Arc::new(constraint.with_decoding(decoding));
        *last = Some((constraint.clone(), edited.clone()));
        Ok(edited)
    }
}

impl<B: Backend + Sync> Backend for ModeBackend<B> {
    fn score(
        &self,
        req: &ScoreRequest,
    ) -> impl Future<Output = Result<ScoreResponse, BackendError>> + Send {
        self.inner.score(req)
    }

    fn complete(
        &self,
        req: &Request,
    ) -> impl Future<Output = Result<Response, BackendError>> + Send {
        let edited = self.edit(req);
        async move { self.inner.complete(&edited?).await }
    }
}

/// One document to extract from, with its ground truth when known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyDoc {
    /// Stable id.
    pub id: String,
    /// The text.
    pub text: String,
    /// The expected guidance: `Some(None)` means "no guidance"; `None` means unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth: Option<Option<Expected>>,
}

/// What the study's instructions show besides the signature, unless `--prompt` says otherwise.
///
/// Measured on 12 generated releases with SmolLM2-135M in `rules` mode: with the signature
/// alone the model wrote the signature's own `1-60 chars` as the period in 5 of 12 and a right
/// quarter and year in none; with one line per field (whose descriptions give examples of
/// periods as written) no period copied the signature and 3 of 12 named the right quarter.
pub const DEFAULT_INSTRUCTIONS: Instructions = Instructions::SignatureAndFields;

/// The study's prompt texts with `style` instructions.
pub fn prompt_parts(style: Instructions) -> PromptParts {
    PromptParts::for_contract::<ReleaseGuidance>()
        .with_system(system_message_with::<ReleaseGuidance>(style))
}

/// The extractor a mode runs: attempts and the ladder's repair setting (for [`ReleaseGuidance`];
/// `grounded` mode runs [`grounded_extractor`]).
pub fn extractor<B: Backend>(
    backend: B,
    mode: Mode,
    max_tokens: u32,
) -> Extractor<ReleaseGuidance, B> {
    extractor_for(backend, mode, max_tokens)
}

/// The extractor of `grounded` (the whole release, no selection) and `routed` (the library's
/// evidence selection) modes, for [`GroundedGuidance`].
pub fn grounded_extractor<B: Backend>(
    backend: B,
    mode: Mode,
    max_tokens: u32,
) -> Extractor<GroundedGuidance, B> {
    let extractor = extractor_for(backend, mode, max_tokens);
    if mode == Mode::Routed {
        extractor
    } else {
        extractor.selection(Selection::off())
    }
}

fn extractor_for<C: Contract, B: Backend>(
    backend: B,
    mode: Mode,
    max_tokens: u32,
) -> Extractor<C, B> {
    Extractor::new(backend)
        .max_attempts(mode.attempts())
        .max_tokens(max_tokens)
        .parse_options(ParseOptions {
            no_repair: mode != Mode::Repair,
            ..ParseOptions::default()
        })
}

/// A contract the study scores: it reads as guidance ([`Guidance`]) and may carry the sentence
/// its values were copied from.
pub trait StudyContract: Contract + Guidance + Clone {
    /// The sentence the values were copied from, if the contract has one.
    fn quote(&self) -> Option<&str>;
}

impl StudyContract for ReleaseGuidance {
    fn quote(&self) -> Option<&str> {
        None
    }
}

impl StudyContract for GroundedGuidance {
    fn quote(&self) -> Option<&str> {
        self.quote.as_deref()
    }
}

/// How many of the copied values (the quote, the period, each end's number, currency and scale
/// word) a filled contract (as JSON) gives, and how many of them the release does not contain
/// (strings compared with whitespace collapsed, numbers as decimals read with the release's
/// numeral conventions).
pub fn values_not_in_source(copied: &Value, doc: &str) -> (usize, usize) {
    let text = GroundText::new(doc, "the release", Numerals::detect(doc));
    let mut given = 0;
    let mut off = 0;
    let mut string = |v: &Value| {
        if let Some(s) = v.as_str() {
            given += 1;
            off += usize::from(!text.contains_str(s));
        }
    };
    string(&copied["quote"]);
    match &copied["period"] {
        Value::Object(p) => string(p.get("original").unwrap_or(&Value::Null)),
        other => string(other),
    }
    for end in ["low", "high"] {
        string(&copied[end]["currency"]);
        string(&copied[end]["unit"]);
    }
    for end in ["low", "high"] {
        if let Some(n) = copied[end]["value"].as_number() {
            given += 1;
            let number = Decimal::from_json_literal(&n.to_string());
            off += usize::from(!number.is_some_and(|d| text.contains_number(&d)));
        }
    }
    (given, off)
}

struct Scored {
    valid: bool,
    value: Option<Expected>,
    correct: Option<bool>,
    normalize_error: Option<String>,
    parts: Option<Parts>,
    values: usize,
    not_in_source: usize,
}

/// Which parts of a filled contract are right, each on its own: a weak model rarely gets the
/// whole answer, and these say how far it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Parts {
    /// The period names the right quarter and year (or is null when there is no guidance).
    pub period: bool,
    /// Both ends, in millions, and the currency are right (or both null when there is none).
    pub amounts: bool,
}

/// Scores the parts of `filled` against `truth` (`None` = no guidance), the period as the
/// library reads it with the release as context.
pub fn score_parts<G: Guidance>(
    filled: &G,
    truth: Option<&Expected>,
    cx: &DocContext<'_>,
) -> Parts {
    let (low, high) = filled.ends();
    match truth {
        None => Parts {
            period: filled.quarter(cx).is_none(),
            amounts: low.is_none() && high.is_none(),
        },
        Some(t) => {
            let period = matches!(filled.quarter(cx), Some(Ok(qy)) if qy == (t.quarter, t.year));
            let end = |a: Option<&Amount>, want: f64| {
                a.is_some_and(|a| {
                    a.currency_code() == Some(t.currency.as_str())
                        && millions(a).is_ok_and(|m| same_millions(m, want))
                })
            };
            Parts {
                period,
                amounts: end(low, t.low) && end(high, t.high),
            }
        }
    }
}

/// Normalises a filled contract and compares it with the truth. A filled contract that cannot
/// be normalised is not valid: its `value` would read as "no guidance".
fn score<C: StudyContract>(doc: &StudyDoc, filled: Option<&C>, copied: Option<&Value>) -> Scored {
    let source = Source::from_text(&doc.text);
    let cx = DocContext::of(&source);
    let (value, normalize_error) = match filled.map(|g| normalize(g, &cx)) {
        Some(Ok(v)) => (v, None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    let valid = filled.is_some() && normalize_error.is_none();
    let (values, not_in_source) = copied
        .map(|c| values_not_in_source(c, &doc.text))
        .unwrap_or((0, 0));
    let correct = doc
        .truth
        .as_ref()
        .map(|t| valid && is_correct(value.as_ref(), t.as_ref()));
    let parts = match (filled, &doc.truth) {
        (Some(f), Some(t)) => Some(score_parts(f, t.as_ref(), &cx)),
        _ => None,
    };
    Scored {
        valid,
        value,
        correct,
        normalize_error,
        parts,
        values,
        not_in_source,
    }
}

/// The evidence a filled contract cites: its quote, or the text of its `line`.
fn evidence(doc: &StudyDoc, json: Option<&Value>) -> Value {
    let Some(json) = json else {
        return Value::Null;
    };
    if let Some(q) = json.get("quote").filter(|q| !q.is_null()) {
        return q.clone();
    }
    json.get("line")
        .and_then(Value::as_u64)
        .and_then(|n| doc.text.lines().nth((n as usize).checked_sub(1)?))
        .map_or(Value::Null, |l| Value::String(l.to_owned()))
}

/// The output row of one document in one mode.
///
/// `value` is the normalised guidance (`{quarter, year, low, high, currency}`, amounts in
/// millions) or null, which means the model said there is none; `valid` says the reply filled
/// the contract (rules and grounding included) *and* the code could normalise it (else `error`
/// says why); `correct` compares `value` with the truth (null when the truth is unknown).
/// `copied` is the contract as the model filled it and `evidence` the sentence it quoted (or the
/// line it cited), so every value can be checked against the release; `not_in_source` counts
/// the copied values the release does not contain, out of `values`.
pub fn row<C: StudyContract>(doc: &StudyDoc, mode: Mode, ex: &Extraction<C>) -> Value {
    let Scored {
        valid,
        value,
        correct,
        normalize_error,
        parts,
        values,
        not_in_source,
    } = score(doc, ex.value.as_ref(), ex.json.as_ref());
    // The judging's forward calls count with the extraction's.
    let judged = ex
        .selection
        .as_ref()
        .map_or(Some(0), |s| s.judge_forward_calls);
    let forward_calls: Option<u32> = ex
        .attempts
        .iter()
        .map(|a| a.forward_calls)
        .chain(std::iter::once(judged))
        .sum::<Option<u32>>();
    let error = ex
        .error
        .as_ref()
        .map(|e| e.to_string())
        .or(normalize_error)
        .or_else(|| (!valid).then(|| ex.violations.to_string()));
    json!({
        "id": doc.id,
        "mode": mode.as_str(),
        "valid": valid,
        "level": ex.level.as_str(),
        "value": value,
        "correct": correct,
        "parts": parts,
        "truth": doc.truth,
        "copied": ex.json,
        "evidence": evidence(doc, ex.json.as_ref()),
        "values": values,
        "not_in_source": not_in_source,
        "raw": ex.attempts.last().and_then(|a| a.raw.clone()),
        "attempts": ex.attempts.len(),
        "forward_calls": forward_calls,
        "seconds": ex.timings.total_ms / 1e3,
        "error": error,
        "selection": ex.selection,
        "selection_skipped": ex.selection_skipped,
    })
}

/// Totals of one mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModeSummary {
    /// The mode.
    pub mode: String,
    /// Documents run.
    pub docs: usize,
    /// Replies that filled the contract.
    pub valid: usize,
    /// Correct values, among documents with a known truth.
    pub correct: usize,
    /// Documents with a known truth.
    pub scored: usize,
    /// Valid replies whose period is right (see [`Parts`]).
    pub period_right: usize,
    /// Valid replies whose amounts and currency are right (see [`Parts`]).
    pub amounts_right: usize,
    /// Copied values (period, numbers, scale words) in filled contracts.
    pub values: usize,
    /// Of those, values the release does not contain.
    pub not_in_source: usize,
    /// Replies at each level: strict, extracted, repaired, invalid.
    pub levels: [usize; 4],
    /// Mean seconds per document.
    pub mean_seconds: f64,
    /// Mean forward calls per document (local backend only).
    pub mean_forward_calls: Option<f64>,
    /// Mean attempts per document.
    pub mean_attempts: f64,
}

/// Sums the rows whose `mode` is `mode` (a [`Mode`] name or another engine's label).
pub fn summarize(mode: &str, rows: &[Value]) -> ModeSummary {
    let rows: Vec<&Value> = rows.iter().filter(|r| r["mode"] == mode).collect();
    let n = rows.len();
    let mut s = ModeSummary {
        mode: mode.to_owned(),
        docs: n,
        ..ModeSummary::default()
    };
    let mut calls = Vec::new();
    for r in &rows {
        s.valid += usize::from(r["valid"] == true);
        if let Some(c) = r["correct"].as_bool() {
            s.scored += 1;
            s.correct += usize::from(c);
        }
        s.period_right += usize::from(r["parts"]["period"] == true);
        s.amounts_right += usize::from(r["parts"]["amounts"] == true);
        s.values += r["values"].as_u64().unwrap_or(0) as usize;
        s.not_in_source += r["not_in_source"].as_u64().unwrap_or(0) as usize;
        let level = match r["level"].as_str() {
            Some("strict") => 0,
            Some("extracted") => 1,
            Some("repaired") => 2,
            _ => 3,
        };
        s.levels[level] += 1;
        s.mean_seconds += r["seconds"].as_f64().unwrap_or(0.0);
        s.mean_attempts += r["attempts"].as_f64().unwrap_or(0.0);
        if let Some(c) = r["forward_calls"].as_f64() {
            calls.push(c);
        }
    }
    if n > 0 {
        s.mean_seconds /= n as f64;
        s.mean_attempts /= n as f64;
    }
    if !calls.is_empty() && calls.len() == n {
        s.mean_forward_calls = Some(calls.iter().sum::<f64>() / n as f64);
    }
    s
}

/// The summary as a Markdown table.
pub fn table(summaries: &[ModeSummary]) -> String {
    let mut t = String::from(
        "| mode | docs | valid | correct | period right | amounts right | values not in source | strict | extracted | repaired | invalid | s/doc | forward calls/doc | attempts/doc |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for s in summaries {
        let correct = if s.scored > 0 {
            format!("{}/{}", s.correct, s.scored)
        } else {
            "n/a".into()
        };
        let calls = s
            .mean_forward_calls
            .map_or_else(|| "n/a".into(), |c| format!("{c:.1}"));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {:.2} | {} | {:.2} |",
            s.mode,
            s.docs,
            s.valid,
            correct,
            s.period_right,
            s.amounts_right,
            s.not_in_source,
            s.values,
            s.levels[0],
            s.levels[1],
            s.levels[2],
            s.levels[3],
            s.mean_seconds,
            calls,
            s.mean_attempts
        );
    }
    t
}

/// The row of a reply produced elsewhere (another engine, e.g. llama.cpp), read through the same
/// ladder and scored the same way as [`row`]: `label` takes the place of the mode.
pub fn score_reply(doc: &StudyDoc, label: &str, raw: &str, seconds: f64) -> Value {
    let parsed = parse_output_with::<ReleaseGuidance>(
        raw,
        ParseOptions {
            no_repair: true,
            ..ParseOptions::default()
        },
    );
    let Scored {
        valid,
        value,
        correct,
        normalize_error,
        parts,
        values,
        not_in_source,
    } = score(doc, parsed.value.as_ref(), parsed.json.as_ref());
    let error = normalize_error.or_else(|| (!valid).then(|| parsed.violations.to_string()));
    json!({
        "id": doc.id,
        "mode": label,
        "valid": valid,
        "level": parsed.level.as_str(),
        "value": value,
        "correct": correct,
        "parts": parts,
        "truth": doc.truth,
        "copied": parsed.json,
        "evidence": evidence(doc, parsed.json.as_ref()),
        "values": values,
        "not_in_source": not_in_source,
        "raw": raw,
        "attempts": 1,
        "forward_calls": null,
        "seconds": seconds,
        "error": error,
    })
}

/// The headline of one mode's rows: valid, correct, values not in the release, seconds per
/// document, and the first `wrong` wrong answers with the evidence the model quoted.
pub fn headline(mode: &str, rows: &[Value], wrong: usize) -> String {
    let s = summarize(mode, rows);
    let mut out = String::new();
    let correct = if s.scored > 0 {
        format!("{}/{}", s.correct, s.scored)
    } else {
        "n/a (no truth)".into()
    };
    let _ = writeln!(
        out,
        "{mode}: valid {}/{}, correct {correct}, values not in the release {}/{}, {:.2} s per document",
        s.valid, s.docs, s.not_in_source, s.values, s.mean_seconds
    );
    let shown: Vec<&Value> = rows
        .iter()
        .filter(|r| r["mode"] == mode && r["correct"] == false)
        .take(wrong)
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(out, "first wrong answers:");
    }
    for r in shown {
        let expected = match &r["truth"] {
            Value::Null => "no guidance".to_owned(),
            t => describe(t),
        };
        let got = if r["valid"] == true {
            match &r["value"] {
                Value::Null => "no guidance".to_owned(),
                v => describe(v),
            }
        } else {
            format!(
                "invalid ({})",
                r["error"].as_str().unwrap_or("no reason recorded")
            )
        };
        let _ = writeln!(
            out,
            "  {}: expected {expected}; got {got}",
            r["id"].as_str().unwrap_or("?")
        );
        if let Some(e) = r["evidence"].as_str() {
            let _ = writeln!(out, "      quoted: {e:?}");
        }
        if !r["copied"].is_null() {
            let _ = writeln!(out, "      filled: {}", r["copied"]);
        }
    }
    out
}

fn describe(v: &Value) -> String {
    format!(
        "Q{} {} {} {}-{} million",
        v["quarter"],
        v["year"],
        v["currency"].as_str().unwrap_or("?"),
        v["low"],
        v["high"]
    )
}
