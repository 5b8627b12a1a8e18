//! Extraction with a runtime contract: the prompt, the attempts with the violations fed back,
//! the ladder, the validator and the grounding checks, and the row each document gets.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use contract_core::extract::{Attempt, AttemptError, Backend, Extractor, Sampling};
use contract_core::ground::{check_reply, Grounds};
use contract_core::parse::{recover_with, Level, ParseOptions};
use contract_core::prompt::{Budget, Tokenizer};
use contract_core::{ContractSpec, DynContract, Source};
use contract_core::{Violation, ViolationKind, Violations};
use serde_json::{json, Map, Value};

use crate::evidence::{grounded_paths, locate, missing_at};

/// A reply read through the ladder and checked against the contract.
#[derive(Debug, Clone)]
pub struct Reading {
    /// How the reply was read.
    pub level: Level,
    /// The recovered JSON, values as written.
    pub json: Option<Value>,
    /// Everything it breaks: the schema, the rules, and the grounding (when a source is known).
    pub violations: Violations,
    /// The syntax repairs the ladder made.
    pub repairs: Vec<String>,
}

impl Reading {
    /// Whether the reply fills the contract.
    pub fn is_valid(&self) -> bool {
        self.json.is_some() && self.violations.is_empty()
    }
}

/// Extracts one runtime contract from documents with the library's extractor
/// ([`Extractor::runtime`]): evidence selection, the grounded mask, retries with the
/// violations fed back, the ladder, the validator and the grounding checks.
pub struct DynExtractor {
    contract: Arc<DynContract>,
    spec: Arc<ContractSpec>,
    max_attempts: usize,
    max_tokens: Option<u32>,
    budget: Option<TokenBudget>,
}

/// A prompt budget and the tokenizer that counts it ([`Extractor::budget`]).
pub type TokenBudget = (Arc<dyn Tokenizer + Send + Sync>, Budget);

impl DynExtractor {
    /// An extractor of `contract`: up to `max_attempts` attempts (the first, then retries with
    /// the violations fed back), `max_tokens` a reply.
    pub fn new(contract: DynContract, max_attempts: usize, max_tokens: Option<u32>) -> Self {
        let spec = Arc::new(contract.root_spec());
        DynExtractor {
            contract: Arc::new(contract),
            spec,
            max_attempts: max_attempts.max(1),
            max_tokens,
            budget: None,
        }
    }

    /// Fits every prompt into `budget`: a longer document is read in overlapping chunks
    /// ([`Extractor::budget`]).
    pub fn with_budget(mut self, budget: TokenBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The library's extractor of this contract on `backend`, greedy, with the grounding
    /// check the library does not make itself (values behind a `$ref` or nested in a runtime
    /// schema's objects and lists) added: each reply's values held to the text the model was
    /// shown for it ([`Extractor::check_shown`]), a chunk's under a budget, as the library
    /// holds its own grounded values.
    pub fn extractor<B: Backend>(&self, backend: B) -> Extractor<Value, B> {
        let (contract, spec) = (self.contract.clone(), self.spec.clone());
        let mut ex = Extractor::runtime(backend, &self.contract)
            .max_attempts(self.max_attempts)
            .sampling(Sampling {
                temperature: Some(0.0),
                ..Sampling::default()
            })
            .check_shown(move |json, shown| {
                deeper_grounding(&contract, json, shown, || {
                    root_grounding(&spec, json, &json.to_string(), shown)
                })
            });
        if let Some(n) = self.max_tokens {
            ex = ex.max_tokens(n);
        }
        if let Some((tokenizer, budget)) = &self.budget {
            ex = ex.budget(tokenizer.clone(), *budget);
        }
        ex
    }

    /// Reads `raw` through the ladder and checks it: the schema (`x-rules` included) and, when
    /// the document `text` is given, the grounded values against it: the library's check for
    /// the root's fields (`x-grounded` `source`, `line`, `in`), and for a grounded value deeper
    /// in (a list item, a nested object, a `$ref`) that the document writes it.
    pub fn read(&self, raw: &str, text: Option<&str>) -> Reading {
        let rec = recover_with(raw, ParseOptions::default());
        let mut violations = Violations::new();
        match &rec.json {
            Some(json) => {
                if let Err(v) = self.contract.validate(json) {
                    violations.0.extend(v.0);
                }
                if let Some(text) = text {
                    let source = Source::from_text(text);
                    let root = root_grounding(&self.spec, json, raw, &source);
                    let deeper = deeper_grounding(&self.contract, json, &source, || root.clone());
                    violations.0.extend(root.0);
                    violations.0.extend(deeper.0);
                }
            }
            None => {
                let message = rec.invalid.as_ref().map_or_else(
                    || "no JSON object in the reply".to_owned(),
                    |i| format!("{}: {}", i.reason.as_str(), i.message),
                );
                violations
                    .0
                    .push(Violation::new("", ViolationKind::JsonInvalid, message));
            }
        }
        Reading {
            level: rec.level,
            json: rec.json,
            violations,
            repairs: rec
                .repairs
                .iter()
                .map(|r| r.kind.as_str().to_owned())
                .collect(),
        }
    }

    /// Extracts the contract from document `text` (id `id`) with `extractor` (made by
    /// [`DynExtractor::extractor`]): always a row, never an error (a backend failure is the
    /// row's `error`).
    pub async fn extract_with<B: Backend>(
        &self,
        extractor: &Extractor<Value, B>,
        id: &str,
        text: &str,
    ) -> Value {
        let started = Instant::now();
        let out = extractor.extract(text).await;
        let tries: Vec<Value> = out.attempts.iter().map(attempt_json).collect();
        let error = out.error.as_ref().map(|e| match e {
            AttemptError::Backend { error } => (error.kind().to_owned(), error.to_string()),
            AttemptError::Budget { error } => ("budget".to_owned(), error.to_string()),
        });
        let reading = (out.error.is_none() || out.json.is_some()).then(|| Reading {
            level: out.level,
            json: out.json.clone(),
            violations: out.violations.clone(),
            repairs: out
                .repairs
                .iter()
                .map(|r| r.kind.as_str().to_owned())
                .collect(),
        });
        let mut row = self.row(id, Some(text), reading.as_ref(), error);
        if let Value::Object(map) = &mut row {
            // The library's verdict is the row's: no value (a group the backend did not
            // answer, say) is not ok, even when the JSON it kept breaks nothing.
            if out.value.is_none() && map.get("ok") == Some(&Value::Bool(true)) {
                let outcome = if out.error.is_some() {
                    "error"
                } else {
                    "invalid"
                };
                map.insert("ok".into(), Value::Bool(false));
                map.insert("outcome".into(), json!(outcome));
                map.insert("value".into(), Value::Null);
            }
            // The value as the library read it: value types normalised (`iso`, `code`).
            if let Some(value) = &out.value {
                map.insert("value".into(), value.clone());
            }
            map.insert("retried".into(), Value::Bool(tries.len() > 1));
            map.insert("attempts".into(), Value::Array(tries));
            map.insert(
                "forward_calls".into(),
                json!(
                    out.attempts
                        .iter()
                        .filter_map(|a| a.forward_calls.map(u64::from))
                        .sum::<u64>()
                        + out
                            .selection
                            .as_ref()
                            .and_then(|s| s.judge_forward_calls)
                            .map_or(0, u64::from)
                ),
            );
            if let Some(selection) = &out.selection {
                map.insert(
                    "selection".into(),
                    serde_json::to_value(selection).unwrap_or(Value::Null),
                );
            }
            if let Some(chunks) = &out.chunks {
                map.insert(
                    "chunks".into(),
                    serde_json::to_value(chunks).unwrap_or(Value::Null),
                );
            }
            map.insert("ms".into(), json!(ms(started)));
        }
        row
    }

    /// [`DynExtractor::extract_with`] on an extractor made for this one document.
    pub async fn extract<B: Backend>(&self, backend: B, id: &str, text: &str) -> Value {
        self.extract_with(&self.extractor(backend), id, text).await
    }

    /// The row of document `id`: its outcome, value, level, violations, where each value is
    /// written in `text` (when known) and the values it does not write.
    pub fn row(
        &self,
        id: &str,
        text: Option<&str>,
        reading: Option<&Reading>,
        error: Option<(String, String)>,
    ) -> Value {
        let valid = reading.is_some_and(Reading::is_valid);
        let value = reading
            .filter(|_| valid)
            .and_then(|r| r.json.clone())
            .unwrap_or(Value::Null);
        let outcome = match (reading, valid) {
            (None, _) => "error",
            (Some(_), false) => "invalid",
            (Some(_), true) if is_empty(&value) => "empty",
            (Some(_), true) => "valid",
        };
        let shown = reading.and_then(|r| r.json.as_ref());
        let (evidence, not_in_source) = match (text, shown) {
            (Some(text), Some(json)) => {
                let grounded: HashSet<String> = grounded_paths(self.contract.schema(), json);
                let (found, missing) = locate(text, json, &grounded);
                (json!(found), json!(missing))
            }
            _ => (json!([]), json!([])),
        };
        let (error_kind, error_message) = match (&error, reading) {
            (Some((kind, message)), _) => (json!(kind), json!(message)),
            (None, Some(r)) if !valid => (
                json!("invalid"),
                json!(format!(
                    "the reply does not fill the contract (read as {}): {}",
                    r.level.as_str(),
                    r.violations
                )),
            ),
            _ => (Value::Null, Value::Null),
        };
        let mut map = Map::new();
        map.insert("id".into(), json!(id));
        map.insert("outcome".into(), json!(outcome));
        map.insert("ok".into(), json!(valid));
        map.insert("value".into(), value);
        map.insert(
            "level".into(),
            json!(reading.map_or(Level::Invalid, |r| r.level).as_str()),
        );
        map.insert("json".into(), shown.cloned().unwrap_or(Value::Null));
        map.insert(
            "violations".into(),
            reading.map_or(json!([]), |r| violations_json(&r.violations)),
        );
        map.insert(
            "repairs".into(),
            reading.map_or(json!([]), |r| json!(r.repairs)),
        );
        map.insert("not_in_source".into(), not_in_source);
        map.insert("evidence".into(), evidence);
        map.insert("error".into(), error_message);
        map.insert("error_kind".into(), error_kind);
        Value::Object(map)
    }
}

/// Whether `value` holds nothing: every leaf `null`, every list and object empty.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.values().all(is_empty),
        Value::Array(a) => a.iter().all(is_empty),
        _ => false,
    }
}

/// Violations as JSON: `[{"path", "kind", "message"}]`.
pub fn violations_json(violations: &Violations) -> Value {
    Value::Array(
        violations
            .iter()
            .map(|v| json!({"path": v.path, "kind": v.kind.as_str(), "message": v.message}))
            .collect(),
    )
}

/// One attempt of the library's record as the row shows it.
fn attempt_json(a: &Attempt) -> Value {
    let mut m = Map::new();
    if let Some(group) = &a.group {
        m.insert("group".into(), json!(group));
    }
    match &a.error {
        Some(AttemptError::Backend { error }) => {
            m.insert("error".into(), json!(error.to_string()));
            m.insert("error_kind".into(), json!(error.kind()));
        }
        Some(AttemptError::Budget { error }) => {
            m.insert("error".into(), json!(error.to_string()));
            m.insert("error_kind".into(), json!("budget"));
        }
        None => {
            m.insert("raw".into(), json!(a.raw));
            m.insert("level".into(), json!(a.level.map(Level::as_str)));
            m.insert("violations".into(), violations_json(&a.violations));
            m.insert(
                "repairs".into(),
                json!(a
                    .repairs
                    .iter()
                    .map(|r| r.kind.as_str())
                    .collect::<Vec<_>>()),
            );
            m.insert("finish_reason".into(), json!(a.finish_reason));
            m.insert("completion_tokens".into(), json!(a.completion_tokens));
        }
    }
    m.insert("ms".into(), json!(a.ms));
    Value::Object(m)
}

/// The library's own grounding check of `json` (a reply recovered from `raw`) against
/// `source`: the root's fields ([`check_reply`]).
fn root_grounding(spec: &ContractSpec, json: &Value, raw: &str, source: &Source) -> Violations {
    check_reply(spec, json, raw, &Grounds::new(source))
}

/// The grounded values of `json` the document `source` does not write, among those the
/// library's own check ([`root_grounding`], the root's fields) does not flag: a list item, a
/// value in a nested object, a value behind a `$ref`. `root` gives the library's violations
/// of `json`; it runs only when some grounded value is missing (a reply whose grounded values
/// are all written, the usual case, needs no second look).
fn deeper_grounding(
    contract: &DynContract,
    json: &Value,
    source: &Source,
    root: impl FnOnce() -> Violations,
) -> Violations {
    let mut out = Violations::new();
    let grounded = grounded_paths(contract.schema(), json);
    if grounded.is_empty() {
        return out;
    }
    let missing = missing_at(&source.text(), json, &grounded);
    if missing.is_empty() {
        return out;
    }
    let flagged: HashSet<String> = root().0.into_iter().map(|v| v.path).collect();
    for path in missing {
        if !flagged.contains(&path) {
            let value = json.pointer(&path).cloned().unwrap_or(Value::Null);
            out.0.push(Violation::new(
                path,
                ViolationKind::NotInSource,
                format!("{value} is not in the document: copy it exactly as written"),
            ));
        }
    }
    out
}

fn ms(t0: Instant) -> f64 {
    (t0.elapsed().as_secs_f64() * 1e5).round() / 100.0
}

/// Runs `f` to its end on a current-thread runtime (the tests' extractions).
#[cfg(test)]
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
        .block_on(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract_backends::ScriptedBackend;
    use contract_core::extract::Decoding;

    fn contract() -> DynContract {
        DynContract::from_schema(json!({
            "title": "Invoice",
            "type": "object",
            "properties": {
                "company": {"type": "string", "x-grounded": "source", "description": "Who bills."},
                "total": {"type": ["number", "null"], "minimum": 0}
            },
            "required": ["company", "total"],
            "additionalProperties": false
        }))
        .unwrap_or_else(|e| panic!("schema: {e}"))
    }

    #[test]
    fn a_refused_reply_is_fed_back_and_the_retry_kept() {
        let ex = DynExtractor::new(contract(), 2, None);
        let backend = ScriptedBackend::new([
            r#"{"company": "Globex", "total": 5}"#,
            r#"{"company": "Acme Corp", "total": 12.5}"#,
        ]);
        let text = "Invoice from Acme Corp\nTotal due: 12.50 EUR";
        let row = block_on(ex.extract(&backend, "d1", text));
        assert_eq!(row["outcome"], "valid", "{row:#}");
        assert_eq!(row["retried"], true);
        assert_eq!(row["value"], json!({"company": "Acme Corp", "total": 12.5}));
        let first = &row["attempts"][0]["violations"][0];
        assert_eq!(first["kind"], "not_in_source", "{row:#}");
        // The grounded fields decode under the grounded grammar, as a derived contract's do.
        assert!(backend.requests()[0].constraint.grammar().is_some());
        let second_prompt = &backend.requests()[1].messages;
        assert!(second_prompt
            .iter()
            .any(|m| m.content.contains("did not fill the contract")));
        let ev = row["evidence"].as_array().cloned().unwrap_or_default();
        assert_eq!(ev.len(), 2, "{row:#}");
        assert_eq!(ev[0]["written"], "Acme Corp");
        assert_eq!(ev[0]["grounded"], true);
        assert_eq!(ev[1]["written"], "12.50");
    }

    #[test]
    fn a_backend_error_is_a_row_with_its_reason() {
        let ex = DynExtractor::new(contract(), 2, None);
        let backend = ScriptedBackend::new(Vec::<String>::new());
        let row = block_on(ex.extract(&backend, "d1", "text"));
        assert_eq!(row["outcome"], "error");
        assert_eq!(row["error_kind"], "unavailable");
        assert_eq!(row["value"], Value::Null);
    }

    #[test]
    fn an_all_null_value_is_empty() {
        let ex = DynExtractor::new(
            DynContract::from_schema(json!({
                "type": "object",
                "properties": {"a": {"type": ["string", "null"]}},
                "required": ["a"]
            }))
            .unwrap_or_else(|e| panic!("schema: {e}")),
            1,
            None,
        );
        let backend = ScriptedBackend::new([r#"{"a": null}"#]);
        let row = block_on(ex.extract(&backend, "x", "t"));
        assert_eq!(row["outcome"], "empty", "{row:#}");
        // Nothing grounded: the schema's own grammar.
        assert!(matches!(
            backend.requests()[0].constraint.decoding,
            Some(Decoding::JsonSchema(_))
        ));
        assert_eq!(row["ok"], true);
    }
}

#[cfg(test)]
mod decoding {
    use super::*;
    use contract_backends::ScriptedBackend;
    use contract_core::extract::Decoding;

    /// [`DynContract::decodes_grounded`], [`DynContract::decodes_typed`] and
    /// [`DynContract::rules_in_mask`] (what the `x-rules` note is written from) say what the
    /// extractor decodes with: the grounded grammar or the typed one, its rules carried, the
    /// JSON Schema with the rules held over it, or the JSON Schema alone.
    #[test]
    fn decodes_grounded_is_what_the_extractor_sends() {
        let field = |grounded: bool| {
            let mut f = json!({"type": ["number", "null"]});
            if grounded {
                f["x-grounded"] = json!("source");
            }
            f
        };
        let flat = |grounded: bool| {
            json!({"type": "object", "x-rules": ["low <= high"], "required": ["low", "high"],
                   "properties": {"low": field(grounded), "high": field(grounded)}})
        };
        let mut with_def = flat(true);
        with_def["properties"]["who"] = json!({"$ref": "#/$defs/who"});
        with_def["$defs"] = json!({"who": {"type": "string", "x-grounded": "source"}});
        let mut with_value = flat(true);
        with_value["properties"]["paid"] = json!({"$ref": "#/$defs/Amount"});
        with_value["$defs"] = json!({"Amount": {}});
        // An optional property the typed grammar would have to write: the JSON Schema, the
        // rules held over it (a rule's optional field may still be written).
        let mut optional = flat(false);
        optional["required"] = json!(["low"]);
        // An optional property beside the rules' required fields: the JSON Schema, the rules
        // held over it.
        let mut beside = flat(false);
        beside["properties"]["note"] = json!({"type": ["string", "integer"]});
        // (schema, grounded, typed, rules in the mask)
        let cases = [
            (flat(true), true, true, true),
            (flat(false), false, true, true),
            (optional, false, false, true),
            (beside, false, false, true),
            (with_def, false, false, false),
            (with_value, true, true, true),
        ];
        for (schema, grounded, typed, in_mask) in cases {
            let contract =
                DynContract::from_schema(schema.clone()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(contract.decodes_grounded(), grounded, "{schema}");
            assert_eq!(contract.decodes_typed(), typed, "{schema}");
            assert_eq!(contract.rules_in_mask(), in_mask, "{schema}");
            let ex = DynExtractor::new(contract, 1, None);
            let backend = ScriptedBackend::new([r#"{"low": 1, "high": 2}"#]);
            let _ = block_on(ex.extract(&backend, "d", "low 1\nhigh 2"));
            let requests = backend.requests();
            let sent = requests
                .iter()
                .rev()
                .find_map(|r| r.constraint.decoding.clone())
                .unwrap_or_else(|| panic!("no constrained request: {schema}"));
            match sent {
                Decoding::Grammar(g) => {
                    assert!(in_mask, "{schema}");
                    assert!(g.has_rules(), "the grammar carries the rules: {schema}");
                    // Typed, the grammar's own schema; else the schema's own JSON Schema.
                    assert_eq!(g.mask_schema.is_none(), typed, "{schema}");
                }
                Decoding::JsonSchema(_) => assert!(!in_mask, "{schema}"),
            }
        }
    }
}

#[cfg(test)]
mod grounding_reach {
    use super::*;

    fn not_in_source(schema: Value, reply: &str) -> Vec<String> {
        let ex = DynExtractor::new(
            DynContract::from_schema(schema).unwrap_or_else(|e| panic!("{e}")),
            1,
            None,
        );
        ex.read(reply, Some("Ann  Smith paid 12.00 EUR"))
            .violations
            .iter()
            .filter(|v| v.kind == ViolationKind::NotInSource)
            .map(|v| v.path.clone())
            .collect()
    }

    /// The library's root check runs only when a grounded value is missing, and what it flags
    /// is not reported again.
    #[test]
    fn the_root_check_runs_only_when_a_grounded_value_is_missing() {
        let contract = DynContract::from_schema(json!({"type": "object", "properties": {
            "who": {"type": "string", "x-grounded": "source"},
            "party": {"type": "object", "properties": {
                "name": {"type": "string", "x-grounded": "source"}}}}}))
        .unwrap_or_else(|e| panic!("{e}"));
        let spec = contract.root_spec();
        let source = Source::from_text("Ann  Smith paid 12.00 EUR");
        let calls = std::cell::Cell::new(0);
        let deeper = |json: Value| -> Vec<String> {
            deeper_grounding(&contract, &json, &source, || {
                calls.set(calls.get() + 1);
                root_grounding(&spec, &json, &json.to_string(), &source)
            })
            .iter()
            .map(|v| v.path.clone())
            .collect()
        };
        let written = deeper(json!({"who": "Ann Smith", "party": {"name": "Ann Smith"}}));
        assert!(written.is_empty());
        assert_eq!(calls.get(), 0, "nothing missing: no root check");
        let nested = deeper(json!({"who": "Ann Smith", "party": {"name": "Bob"}}));
        assert_eq!(nested, ["/party/name"]);
        assert_eq!(calls.get(), 1);
        // The root's field is the library's to flag: not reported twice.
        let root = deeper(json!({"who": "Bob", "party": {"name": "Ann Smith"}}));
        assert!(root.is_empty(), "{root:?}");
        assert_eq!(calls.get(), 2);
        let read = DynExtractor::new(contract.clone(), 1, None).read(
            r#"{"who": "Bob", "party": {"name": "Bob"}}"#,
            Some("Ann  Smith paid"),
        );
        let paths: Vec<&str> = read.violations.iter().map(|v| v.path.as_str()).collect();
        assert_eq!(paths, ["/who", "/party/name"], "each once");
    }

    #[test]
    fn grounded_values_are_checked_at_every_depth() {
        let cases = [
            json!({"type": "object", "properties": {"who": {"type": "string", "x-grounded": "source"}}}),
            json!({"type": "object", "properties": {"party": {"type": "object", "properties": {
                "who": {"type": "string", "x-grounded": "source"}}}}}),
            json!({"type": "object", "properties": {"who": {"type": "array", "items": {
                "type": "string", "x-grounded": "source"}}}}),
            json!({"type": "object", "properties": {"who": {"$ref": "#/$defs/n"}},
                   "$defs": {"n": {"type": "string", "x-grounded": "source"}}}),
        ];
        let replies = [
            (r#"{"who": "Bob"}"#, r#"{"who": "Ann Smith"}"#, "/who"),
            (
                r#"{"party": {"who": "Bob"}}"#,
                r#"{"party": {"who": "Ann Smith"}}"#,
                "/party/who",
            ),
            (
                r#"{"who": ["Ann Smith", "Bob"]}"#,
                r#"{"who": ["Ann Smith", "EUR"]}"#,
                "/who/1",
            ),
            (r#"{"who": "Bob"}"#, r#"{"who": "Ann Smith"}"#, "/who"),
        ];
        for (schema, (bad, good, path)) in cases.into_iter().zip(replies) {
            assert_eq!(not_in_source(schema.clone(), bad), [path], "{schema}");
            assert!(not_in_source(schema.clone(), good).is_empty(), "{schema}");
        }
        // A number is grounded where the document writes the same number.
        let total = json!({"type": "object", "properties": {"t": {"type": "number", "x-grounded": "source"}}});
        assert!(not_in_source(total.clone(), r#"{"t": 12}"#).is_empty());
        assert_eq!(not_in_source(total, r#"{"t": 13}"#), ["/t"]);
        // Ungrounded values are not held to the document.
        let free = json!({"type": "object", "properties": {"who": {"type": "string"}}});
        assert!(not_in_source(free, r#"{"who": "Bob"}"#).is_empty());
    }
}

#[cfg(test)]
mod chunk_grounding {
    use super::*;
    use contract_core::extract::{BackendError, Overflow, Request, Response};
    use contract_core::prompt::Budget;

    /// One token per whitespace-separated word and per line break.
    struct Words;

    impl Tokenizer for Words {
        fn encode(&self, text: &str) -> Vec<u32> {
            vec![0; text.split_whitespace().count() + text.matches('\n').count()]
        }
        fn decode(&self, _: &[u32]) -> String {
            String::new()
        }
    }

    /// The treasurer, named on the document's last line only.
    const TREASURER: &str = "Zed Quill";

    /// A reader that copies from the text its request shows (the members named there, the
    /// treasurer when shown), except that its first reply to the chunk that shows line 1 also
    /// gives the treasurer, from the last line, which that chunk does not show: a value the
    /// document writes, but not where the model was looking.
    struct Reader {
        requests: std::sync::Mutex<Vec<Request>>,
    }

    impl Backend for Reader {
        async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
            let shown = req.source.as_ref().map(Source::text).unwrap_or_default();
            let retry = req.messages.0.len() > 2;
            let first_chunk = shown.lines().next().is_some_and(|l| !l.is_empty());
            let mut members: Vec<&str> = shown
                .lines()
                .filter_map(|l| l.strip_prefix("Member: "))
                .collect();
            let mut treasurer = shown.lines().find_map(|l| l.strip_prefix("Treasurer: "));
            if first_chunk && !retry {
                members.push(TREASURER);
                treasurer = Some(TREASURER);
            }
            self.requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(req.clone());
            Ok(Response::text(
                json!({"members": members, "treasurer": treasurer}).to_string(),
            ))
        }
    }

    /// A roster whose grounded values all sit behind a `$ref`: the library's extractor does
    /// not reach them, the command line's check does.
    fn roster() -> DynContract {
        DynContract::from_schema(json!({
            "title": "Roster",
            "type": "object",
            "properties": {
                "members": {"type": "array", "items": {"$ref": "#/$defs/name"},
                            "description": "Every member the text names."},
                "treasurer": {"$ref": "#/$defs/maybe_name",
                              "description": "The treasurer, when named."}
            },
            "required": ["members", "treasurer"],
            "additionalProperties": false,
            "$defs": {
                "name": {"type": "string", "x-grounded": "source"},
                "maybe_name": {"type": ["string", "null"], "x-grounded": "source"}
            }
        }))
        .unwrap_or_else(|e| panic!("schema: {e}"))
    }

    /// Under a budget a long document is read in chunks, and a grounded value behind a `$ref`
    /// is held to the chunk the model was shown, as the library holds its own grounded values:
    /// one the document writes only outside that chunk is refused (fed back, the retry kept),
    /// one inside it is kept.
    #[test]
    fn a_grounded_value_behind_a_ref_is_held_to_the_chunk_shown() {
        let names: Vec<String> = (1..=24).map(|i| format!("Member{i} Surname{i}")).collect();
        let mut lines: Vec<String> = names.iter().map(|n| format!("Member: {n}")).collect();
        lines.push(format!("Treasurer: {TREASURER}"));
        let text = lines.join("\n");
        let contract = roster();
        // The prompt without a document, and room for about eight lines of it in the three
        // quarters of the budget a chunk is planned in (the rest is a retry's).
        let parts = contract_core::prompt::PromptParts::for_runtime(&contract);
        let empty = parts.messages("");
        let fixed: usize = empty.0.iter().map(|m| Words.encode(&m.content).len()).sum();
        let budget = Budget::new((fixed + 40) * 4 / 3);
        let ex = DynExtractor::new(contract, 2, None).with_budget((Arc::new(Words), budget));
        let reader = Reader {
            requests: std::sync::Mutex::new(Vec::new()),
        };
        let row = block_on(ex.extract(&reader, "roster", &text));
        let chunks = row["chunks"]["chunks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(chunks.len() >= 3, "read in chunks: {row:#}");
        assert_eq!(chunks[0]["lines"][0], 1, "{row:#}");
        let first_last = chunks[0]["lines"][1].as_u64().unwrap_or(u64::MAX);
        assert!(
            first_last < lines.len() as u64,
            "the first chunk does not show the last line: {row:#}"
        );

        // The first chunk's first reply gave the treasurer it was not shown: refused, at both
        // paths, and fed back.
        let first = &row["attempts"][0];
        let refused: Vec<&str> = first["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["kind"] == "not_in_source")
            .filter_map(|v| v["path"].as_str())
            .collect();
        let invented_at = format!("/members/{first_last}");
        assert_eq!(
            refused,
            [invented_at.as_str(), "/treasurer"],
            "the values from text the first chunk did not show: {row:#}"
        );
        assert_eq!(chunks[0]["attempts"], 2, "{row:#}");
        // The chunk that shows the treasurer's line gave him at once, and he is kept.
        let last = chunks.last().cloned().unwrap_or(Value::Null);
        assert_eq!(last["attempts"], 1, "{row:#}");
        assert_eq!(last["filled"], true, "{row:#}");
        assert_eq!(row["outcome"], "valid", "{row:#}");
        assert_eq!(row["value"]["treasurer"], TREASURER, "{row:#}");
        // The members are the document's, in order, without the one invented.
        assert_eq!(row["value"]["members"], json!(names), "{row:#}");
    }

    /// A document cut to the head that fits ([`Overflow::Cut`]) is held to that head too.
    #[test]
    fn a_grounded_value_behind_a_ref_is_held_to_the_head_kept() {
        let names: Vec<String> = (1..=24).map(|i| format!("Member{i} Surname{i}")).collect();
        let mut lines: Vec<String> = names.iter().map(|n| format!("Member: {n}")).collect();
        lines.push(format!("Treasurer: {TREASURER}"));
        let text = lines.join("\n");
        let contract = roster();
        let parts = contract_core::prompt::PromptParts::for_runtime(&contract);
        let fixed: usize = parts
            .messages("")
            .0
            .iter()
            .map(|m| Words.encode(&m.content).len())
            .sum();
        let budget = Budget::new(fixed + 80);
        let dx = DynExtractor::new(contract, 2, None).with_budget((Arc::new(Words), budget));
        let reader = Reader {
            requests: std::sync::Mutex::new(Vec::new()),
        };
        let ex = dx.extractor(&reader).overflow(Overflow::Cut);
        let row = block_on(dx.extract_with(&ex, "roster", &text));
        // The lines each request showed: the head that fits, shorter on the retry (its
        // feedback takes room).
        let requests = reader
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        let heads: Vec<String> = requests
            .iter()
            .map(|r| r.source.as_ref().map(Source::text).unwrap_or_default())
            .collect();
        assert_eq!(heads.len(), 2, "{row:#}");
        let kept: Vec<usize> = heads
            .iter()
            .map(|h| h.lines().filter(|l| !l.is_empty()).count())
            .collect();
        assert!(kept[1] > 0 && !heads[0].contains(TREASURER), "{heads:?}");
        let refused: Vec<&str> = row["attempts"][0]["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["kind"] == "not_in_source")
            .filter_map(|v| v["path"].as_str())
            .collect();
        let invented_at = format!("/members/{}", kept[0]);
        assert_eq!(refused, [invented_at.as_str(), "/treasurer"], "{row:#}");
        assert_eq!(row["outcome"], "valid", "{row:#}");
        assert_eq!(row["retried"], true, "{row:#}");
        assert_eq!(row["value"]["treasurer"], Value::Null, "{row:#}");
        assert_eq!(row["value"]["members"], json!(names[..kept[1]]), "{row:#}");
    }
}

#[cfg(test)]
mod selected_grounding {
    use super::*;
    use contract_backends::ScriptedBackend;

    /// The question judge's margins: the passage naming Ann Smith answers the question, no
    /// other does.
    fn scorer(prompt: &str, answer: &str) -> f64 {
        match answer {
            "yes" | "Yes" if prompt.contains("Ann Smith") => -0.1,
            "yes" | "Yes" => -6.0,
            _ => -1.5,
        }
    }

    /// Under evidence selection a group is shown its best passages only, and the added check
    /// holds a value deeper in (a list item) to that text, as the library holds its own: a name
    /// the document writes elsewhere, in a passage the model was not shown, is refused and fed
    /// back; read against the whole document, the same reply has nothing to flag.
    #[test]
    fn a_list_item_is_held_to_the_passages_its_group_was_shown() {
        let contract = DynContract::from_schema(json!({
            "title": "Signatures",
            "type": "object",
            "properties": {"who": {
                "type": "array",
                "items": {"type": "string", "x-grounded": "source"},
                "x-grounded": "source",
                "description": "The people who signed the agreement."
            }},
            "required": ["who"],
            "additionalProperties": false
        }))
        .unwrap_or_else(|e| panic!("schema: {e}"));
        assert!(contract.decodes_grounded());
        // Bob Jones's passage lies past the first 1,000 characters: a list's first try is shown
        // the document's opening too (`Selection::opening_chars`), and this is about the rest.
        let filler: String = (1..=60)
            .map(|n| format!("Item {n} was noted.\n\n"))
            .collect();
        let text = format!(
            "Ann Smith signed the agreement for Acme.\n\nThe weather was fine.\n\n\
             Lunch came at noon.\n\nThe room was booked.\n\nThe lights were dim.\n\n\
             {filler}Bob Jones read the minutes aloud."
        );
        let text = text.as_str();
        let ex = DynExtractor::new(contract, 3, None);
        let both = r#"{"who": ["Ann Smith", "Bob Jones"]}"#;
        let backend = ScriptedBackend::new([both, r#"{"who": ["Ann Smith"]}"#]).with_scorer(scorer);
        let row = block_on(ex.extract(&backend, "d1", text));
        assert_eq!(row["outcome"], "valid", "{row:#}");
        assert_eq!(row["value"], json!({"who": ["Ann Smith"]}), "{row:#}");
        assert!(
            !backend.score_requests().is_empty(),
            "the passages were judged"
        );
        // The first reply was generated from Ann Smith's passage (and the next best ones, not
        // Bob Jones's), and its second item refused as not in the text shown.
        let requests = backend.requests();
        let shown = requests[0]
            .source
            .as_ref()
            .map(Source::text)
            .unwrap_or_default();
        assert!(shown.contains("Ann Smith"), "{shown}");
        assert!(!shown.contains("Bob Jones"), "{shown}");
        let first = row["attempts"][0]["violations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            first
                .iter()
                .any(|v| v["path"] == "/who/1" && v["kind"] == "not_in_source"),
            "{row:#}"
        );
        // Against the whole document the same reply is grounded.
        let read = ex.read(both, Some(text));
        assert!(read.violations.is_empty(), "{:?}", read.violations);
    }
}
