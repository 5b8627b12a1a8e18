//! The output ladder: from a model's raw reply to a contract value, recording how clean the
//! reply was.
//!
//! Levels, best first: `strict` (the reply is exactly one JSON object), `extracted` (one object
//! recovered without changing a character inside it: after a `<think>` trace, in a markdown
//! fence, with prose around it), `repaired` (deterministic syntax repairs only, each recorded),
//! `invalid` (nothing recoverable, with the reason). Strict and extracted are different facts:
//! "produces clean JSON" and "the values are recoverable" are counted separately.
//!
//! Every step is linear in the reply's length and never panics.

mod repair;
pub(crate) mod scan;
pub mod think;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::Contract;
use crate::validate::{Violation, ViolationKind, Violations};
pub use repair::{Repair, RepairKind};
pub use think::{split_reasoning, Split};

/// How a reply was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// The reply is exactly one JSON object (surrounding whitespace allowed).
    Strict,
    /// One object recovered without changing a character inside it.
    Extracted,
    /// One object recovered with recorded syntax repairs.
    Repaired,
    /// Nothing recoverable.
    Invalid,
}

impl Level {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Strict => "strict",
            Level::Extracted => "extracted",
            Level::Repaired => "repaired",
            Level::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a reply is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InvalidReason {
    /// The reply is empty or whitespace (after any reasoning trace).
    Empty,
    /// A reasoning trace that never finishes.
    UnfinishedReasoning,
    /// The answer is JSON, but not an object (an array, `null`, a string, a number).
    NotAnObject,
    /// No object in the reply: prose.
    NoObject,
    /// An object starts, but no repair in [`RepairKind`] makes it JSON.
    Unrecoverable,
    /// The reply is JSON, but it writes a number no 64-bit float holds (`5.7e69848`: JSON
    /// sets no limit on exponents, and a server's JSON grammar may let a model write one).
    NumberOutOfRange,
}

impl InvalidReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidReason::Empty => "empty",
            InvalidReason::UnfinishedReasoning => "unfinished_reasoning",
            InvalidReason::NotAnObject => "not_an_object",
            InvalidReason::NoObject => "no_object",
            InvalidReason::Unrecoverable => "unrecoverable",
            InvalidReason::NumberOutOfRange => "number_out_of_range",
        }
    }
}

/// Why a reply is invalid, with a message for humans and for the retry prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invalid {
    /// Machine-readable reason.
    pub reason: InvalidReason,
    /// What was found.
    pub message: String,
}

/// What the ladder recovered from a reply, before any contract is applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recovered {
    /// How the reply was read.
    pub level: Level,
    /// The recovered object, values as written.
    pub json: Option<Value>,
    /// Every syntax repair, in order (empty unless `level` is `repaired`).
    pub repairs: Vec<Repair>,
    /// The reasoning trace, tags removed.
    pub reasoning: Option<String>,
    /// Why nothing was recovered (only when `level` is `invalid`).
    pub invalid: Option<Invalid>,
}

/// A reply read through the ladder and checked against contract `C`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parsed<C> {
    /// How the reply was read.
    pub level: Level,
    /// The value, when the recovered object fills the contract.
    pub value: Option<C>,
    /// The recovered object, values as written.
    pub json: Option<Value>,
    /// Schema and rule violations, with the same kinds as `from_json`, whatever the level; for an
    /// invalid reply one `json_invalid` violation carrying the reason.
    pub violations: Violations,
    /// Every syntax repair, in order.
    pub repairs: Vec<Repair>,
    /// The reasoning trace, tags removed.
    pub reasoning: Option<String>,
    /// Why nothing was recovered (only when `level` is `invalid`).
    pub invalid: Option<Invalid>,
}

impl<C> Parsed<C> {
    /// Whether the reply filled the contract.
    pub fn is_valid(&self) -> bool {
        self.value.is_some()
    }
}

/// Options of the ladder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// The chat template opened a reasoning trace, so a reply without `</think>` is all
    /// (unfinished) reasoning.
    pub starts_in_reasoning: bool,
    /// Refuse replies that only parse after syntax repairs: their [`Parsed::value`] is `None`
    /// and the violation says which repairs were needed (the level stays
    /// [`Level::Repaired`]). Off by default: the ladder repairs what it safely can.
    pub no_repair: bool,
}

/// The JSON acceptance of the strict level: exactly one RFC 8259 value, surrounding JSON
/// whitespace allowed (serde_json, nesting limited to 128).
pub fn strict_json(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str(text)
}

/// Reads `raw` through the ladder and checks the object against contract `C`.
pub fn parse_output<C: Contract>(raw: &str) -> Parsed<C> {
    parse_output_with::<C>(raw, ParseOptions::default())
}

/// [`parse_output`] with options.
pub fn parse_output_with<C: Contract>(raw: &str, options: ParseOptions) -> Parsed<C> {
    parse_output_in::<C>(raw, options, &crate::DocContext::none())
}

/// [`parse_output_with`], the value normalised and checked against `cx`'s document
/// ([`Contract::from_value_in`]).
pub fn parse_output_in<C: Contract>(
    raw: &str,
    options: ParseOptions,
    cx: &crate::DocContext<'_>,
) -> Parsed<C> {
    parse_output_by(raw, options, |json| C::from_value_in(json, cx))
}

/// [`parse_output_with`], the recovered object turned into a value by `read` (a runtime
/// contract's validator, say) instead of a derived contract's [`Contract::from_value_in`].
pub fn parse_output_by<T>(
    raw: &str,
    options: ParseOptions,
    read: impl FnOnce(&Value) -> Result<T, Violations>,
) -> Parsed<T> {
    let rec = recover_with(raw, options);
    let (value, violations) = match (&rec.json, &rec.invalid) {
        (Some(_), _) if options.no_repair && rec.level == Level::Repaired => {
            let repairs: Vec<&str> = rec.repairs.iter().map(|r| r.kind.as_str()).collect();
            (
                None,
                Violations::one(Violation::new(
                    "",
                    ViolationKind::JsonInvalid,
                    format!(
                        "the reply is not valid JSON (it needs repairs: {}) and repair is off",
                        repairs.join(", ")
                    ),
                )),
            )
        }
        (Some(json), _) => match read(json) {
            Ok(v) => (Some(v), Violations::new()),
            Err(violations) => (None, violations),
        },
        (None, invalid) => {
            let message = invalid.as_ref().map_or_else(
                || "no JSON object in the reply".to_owned(),
                |i| format!("{}: {}", i.reason.as_str(), i.message),
            );
            (
                None,
                Violations::one(Violation::new("", ViolationKind::JsonInvalid, message)),
            )
        }
    };
    Parsed {
        level: rec.level,
        value,
        json: rec.json,
        violations,
        repairs: rec.repairs,
        reasoning: rec.reasoning,
        invalid: rec.invalid,
    }
}

/// Reads `raw` through the ladder without a contract.
pub fn recover(raw: &str) -> Recovered {
    recover_with(raw, ParseOptions::default())
}

/// [`recover`] with options.
pub fn recover_with(raw: &str, options: ParseOptions) -> Recovered {
    Ladder::default().run(raw, options)
}

/// Units of work (bytes examined) the ladder spends on `raw`: a deterministic measure for
/// checking that parsing is linear in the reply's length.
#[doc(hidden)]
pub fn work_units(raw: &str) -> usize {
    let mut ladder = Ladder::default();
    ladder.run(raw, ParseOptions::default());
    ladder.work
}

#[derive(Default)]
struct Ladder {
    work: usize,
}

/// The first number literal of `text` that no f64 holds, when `text` is JSON as written but
/// serde_json refuses it for that reason alone (its syntax check, `IgnoredAny`, accepts it).
fn out_of_range_number(text: &str) -> Option<String> {
    let err = serde_json::from_str::<Value>(text).err()?;
    if !err.to_string().starts_with("number out of range") {
        return None;
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    // The error's position is the literal's last character: walk back over number characters.
    let line = text.lines().nth(err.line().checked_sub(1)?)?;
    let end = line
        .char_indices()
        .nth(err.column().checked_sub(1)?)
        .map_or(line.len(), |(i, c)| i + c.len_utf8());
    let head = &line[..end];
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
        .map_or(0, |i| i + 1);
    let literal = head[start..].trim();
    Some(if literal.is_empty() { "?" } else { literal }.to_owned())
}

fn invalid(
    reason: InvalidReason,
    message: impl Into<String>,
    reasoning: Option<String>,
) -> Recovered {
    Recovered {
        level: Level::Invalid,
        json: None,
        repairs: Vec::new(),
        reasoning,
        invalid: Some(Invalid {
            reason,
            message: message.into(),
        }),
    }
}

impl Ladder {
    fn strict(&mut self, text: &str) -> Option<Value> {
        self.work += text.len();
        strict_json(text).ok()
    }

    fn run(&mut self, raw: &str, options: ParseOptions) -> Recovered {
        // Strict first: a reply that is one object is the answer, even with `</think>` inside
        // one of its strings.
        let split = split_reasoning(raw, options.starts_in_reasoning);
        if split.reasoning.is_none() || raw.trim_start().starts_with('{') {
            match self.strict(raw) {
                Some(json @ Value::Object(_)) => {
                    return Recovered {
                        level: Level::Strict,
                        json: Some(json),
                        repairs: Vec::new(),
                        reasoning: None,
                        invalid: None,
                    }
                }
                Some(other) => {
                    return invalid(
                        InvalidReason::NotAnObject,
                        format!("the reply is {}", json_kind(&other)),
                        None,
                    )
                }
                None => {
                    if let Some(literal) = out_of_range_number(raw) {
                        return invalid(
                            InvalidReason::NumberOutOfRange,
                            format!(
                                "the reply is JSON, but the number `{literal}` is outside what a \
                                 64-bit float holds; write it as the document does"
                            ),
                            None,
                        );
                    }
                }
            }
        }
        let reasoning = split.reasoning.map(str::to_owned);
        if split.unfinished {
            return invalid(
                InvalidReason::UnfinishedReasoning,
                "the reasoning trace never ends (no `</think>`)",
                reasoning,
            );
        }
        let content = split.content.unwrap_or("");
        if content.trim().is_empty() {
            let message = if reasoning.is_some() {
                "nothing after the reasoning trace"
            } else {
                "the reply is empty"
            };
            return invalid(InvalidReason::Empty, message, reasoning);
        }
        let base = split.content_offset;

        if let Some(kind) = self.array_answer(content) {
            return invalid(
                InvalidReason::NotAnObject,
                format!("the answer is {kind}"),
                reasoning,
            );
        }

        // Extracted: the last balanced object that is JSON as written.
        self.work += content.len();
        let spans = scan::outermost_objects(content);
        for &(start, end) in spans.iter().rev() {
            if let Some(json) = self.strict(&content[start..end]) {
                return Recovered {
                    level: Level::Extracted,
                    json: Some(json),
                    repairs: Vec::new(),
                    reasoning,
                    invalid: None,
                };
            }
        }

        // Repaired: read objects left to right, keep the last that reads; an attempt that fails
        // resumes after the point of failure, so the whole pass stays linear.
        let mut best: Option<(usize, repair::Repaired)> = None;
        let mut first_failure: Option<repair::Failure> = None;
        let mut from = 0;
        while let Some(i) = content.get(from..).and_then(|rest| rest.find('{')) {
            let start = from + i;
            if !self.plausible_start(content, start) {
                from = start + 1;
                continue;
            }
            match repair::repair_object(content, start, base) {
                Ok(done) => {
                    self.work += done.end - start;
                    from = done.end.max(start + 1);
                    best = Some((start, done));
                }
                Err(failure) => {
                    self.work += failure.at.saturating_sub(start) + 1;
                    from = failure.at.max(start + 1);
                    first_failure.get_or_insert(failure);
                }
            }
        }
        if let Some((start, done)) = best {
            if done.repairs.is_empty() {
                if let Some(json) = self.strict(&content[start..done.end]) {
                    return Recovered {
                        level: Level::Extracted,
                        json: Some(json),
                        repairs: Vec::new(),
                        reasoning,
                        invalid: None,
                    };
                }
            }
            self.work += done.text.len();
            match strict_json(&done.text) {
                Ok(json @ Value::Object(_)) => {
                    return Recovered {
                        level: Level::Repaired,
                        json: Some(json),
                        repairs: done.repairs,
                        reasoning,
                        invalid: None,
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    return invalid(
                        InvalidReason::Unrecoverable,
                        format!("the repaired object is not JSON: {e}"),
                        reasoning,
                    )
                }
            }
        }

        if let Some(f) = first_failure {
            return invalid(
                InvalidReason::Unrecoverable,
                format!("{} at byte {}", f.why, base + f.at),
                reasoning,
            );
        }
        let trimmed = fence_body(content).unwrap_or(content).trim();
        match self.strict(trimmed) {
            Some(other) => invalid(
                InvalidReason::NotAnObject,
                format!("the answer is {}", json_kind(&other)),
                reasoning,
            ),
            None => invalid(
                InvalidReason::NoObject,
                "no JSON object in the reply",
                reasoning,
            ),
        }
    }

    /// After `{`, a key, `}` or a comment must follow (whitespace skipped).
    fn plausible_start(&mut self, content: &str, start: usize) -> bool {
        let rest = content.get(start + 1..).unwrap_or("");
        let skipped = rest.trim_start_matches([' ', '\t', '\n', '\r']);
        self.work += rest.len() - skipped.len() + 1;
        match skipped.bytes().next() {
            None => true,
            Some(c) => {
                matches!(c, b'"' | b'\'' | b'}' | b'/')
                    || c.is_ascii_alphabetic()
                    || c == b'_'
                    || c == b'$'
            }
        }
    }

    /// `Some(kind)` when the answer (or its first fenced block) is a JSON array.
    fn array_answer(&mut self, content: &str) -> Option<&'static str> {
        let body = fence_body(content).unwrap_or(content).trim_start();
        let rest = body.strip_prefix('[')?.trim_start();
        self.work += body.len() - rest.len();
        match rest.bytes().next() {
            Some(b'{' | b'[' | b']' | b'"' | b'-' | b'0'..=b'9') | None => Some("an array"),
            _ => None,
        }
    }
}

/// The text inside the first markdown fence (after the ```lang line), up to the closing fence or
/// the end.
fn fence_body(content: &str) -> Option<&str> {
    let open = content.find("```")?;
    let after = &content[open + 3..];
    let body = &after[after.find('\n').map_or(after.len(), |i| i + 1)..];
    Some(body.find("```").map_or(body, |i| &body[..i]))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "`null`",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod number_range_tests {
    use super::*;

    #[test]
    fn a_number_no_float_holds_is_named_not_called_prose() {
        let raw = r#"{"period": "Q3 2024", "low": 5.7e69848, "high": 12}"#;
        let rec = recover(raw);
        assert_eq!(rec.level, Level::Invalid);
        let invalid = rec.invalid.expect("invalid");
        assert_eq!(invalid.reason, InvalidReason::NumberOutOfRange);
        assert_eq!(invalid.reason.as_str(), "number_out_of_range");
        assert!(
            invalid.message.contains("`5.7e69848`"),
            "{}",
            invalid.message
        );
        // Over two lines, negative.
        let rec = recover("{\n  \"low\": -1e400,\n  \"high\": 1}");
        let invalid = rec.invalid.expect("invalid");
        assert_eq!(invalid.reason, InvalidReason::NumberOutOfRange);
        assert!(invalid.message.contains("`-1e400`"), "{}", invalid.message);
        // Large but representable, and broken JSON, are read as before.
        assert_eq!(recover(r#"{"low": 1e300}"#).level, Level::Strict);
        let broken = recover(r#"{"low": 1e400,"#);
        assert_ne!(
            broken.invalid.map(|i| i.reason),
            Some(InvalidReason::NumberOutOfRange)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_repair_refuses_repaired_replies_only() {
        let off = ParseOptions {
            no_repair: true,
            ..ParseOptions::default()
        };
        let repaired = "{'value': 1.5, 'currency': 'USD', 'unit': null}";
        let on = parse_output::<crate::Amount>(repaired);
        assert_eq!(on.level, Level::Repaired);
        assert!(on.value.is_some());
        let refused = parse_output_with::<crate::Amount>(repaired, off);
        assert_eq!(refused.level, Level::Repaired);
        assert!(refused.value.is_none());
        assert!(
            refused.violations.to_string().contains("single_quotes"),
            "{}",
            refused.violations
        );
        let strict = r#"{"value": 1.5, "currency": "USD", "unit": null}"#;
        assert!(parse_output_with::<crate::Amount>(strict, off)
            .value
            .is_some());
    }

    fn level(raw: &str) -> Level {
        recover(raw).level
    }

    #[test]
    fn levels() {
        assert_eq!(level(" {\"a\": 1}\n"), Level::Strict);
        assert_eq!(level("{\"a\": \"</think>\"}"), Level::Strict);
        assert_eq!(
            level("Here:\n```json\n{\"a\": 1}\n```\nDone."),
            Level::Extracted
        );
        assert_eq!(
            level("<think>maybe {\"a\": 0}? {</think>\n{\"a\": 1}"),
            Level::Extracted
        );
        assert_eq!(
            level("thinking {\"a\": 0}</think>{\"a\": 1}"),
            Level::Extracted
        );
        assert_eq!(level("{'a': 1}"), Level::Repaired);
        assert_eq!(level("[{\"a\": 1}]"), Level::Invalid);
        assert_eq!(level("```json\n[{\"a\": 1}]\n```"), Level::Invalid);
        assert_eq!(level("null"), Level::Invalid);
        assert_eq!(level("I could not find it."), Level::Invalid);
        assert_eq!(level("<think>still going {\"a\": 1}"), Level::Invalid);
        assert_eq!(level(""), Level::Invalid);
    }

    #[test]
    fn last_complete_object_wins() {
        let r = recover("draft {\"a\": 1} final {\"a\": 2} then {\"a\": 3");
        assert_eq!(r.level, Level::Extracted);
        assert_eq!(r.json, Some(serde_json::json!({"a": 2})));
        let r = recover("<think>{\"a\": 9}</think> {\"a\": 1} {\"a\": 2}");
        assert_eq!(r.json, Some(serde_json::json!({"a": 2})));
        assert_eq!(r.reasoning.as_deref(), Some("{\"a\": 9}"));
    }

    #[test]
    fn truncated_outer_object_is_repaired_whole() {
        let r = recover("{\"a\": {\"b\": 2}");
        assert_eq!(r.level, Level::Repaired);
        assert_eq!(r.json, Some(serde_json::json!({"a": {"b": 2}})));
    }

    #[test]
    fn a_list_item_the_reply_was_cut_inside_is_dropped() {
        // A reply stopped by its token limit inside a list's last item: the whole items are
        // kept, the half-written one (`Bet` of `Beta Ltd`) is not a value.
        let r = recover("{\"parties\": [\"Acme Inc\", \"Bet");
        assert_eq!(r.level, Level::Repaired);
        assert_eq!(r.json, Some(serde_json::json!({"parties": ["Acme Inc"]})));
        let r = recover("{\"items\": [{\"name\": \"pen\", \"qty\": 2}, {\"name\": \"ink\", \"q");
        assert_eq!(
            r.json,
            Some(serde_json::json!({"items": [{"name": "pen", "qty": 2}]}))
        );
        // A member's string is closed, as before: a scalar has no whole part to fall back on.
        let r = recover("{\"company\": \"Acme");
        assert_eq!(r.json, Some(serde_json::json!({"company": "Acme"})));
    }

    #[test]
    fn object_inside_prose_braces() {
        let r = recover("Use {curly braces: {\"a\": 1}");
        assert_eq!(r.level, Level::Extracted);
        assert_eq!(r.json, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn repairs_are_recorded_with_offsets() {
        let raw = "<think>x</think>{\"a\": 1,}";
        let r = recover(raw);
        assert_eq!(r.level, Level::Repaired);
        assert_eq!(r.repairs.len(), 1);
        assert_eq!(r.repairs[0].kind, RepairKind::TrailingComma);
        assert_eq!(&raw[r.repairs[0].offset..r.repairs[0].offset + 1], ",");
    }

    #[test]
    fn reasons() {
        let reason = |raw: &str| recover(raw).invalid.map(|i| i.reason);
        assert_eq!(reason("[1, 2]"), Some(InvalidReason::NotAnObject));
        assert_eq!(reason("nothing here"), Some(InvalidReason::NoObject));
        assert_eq!(
            reason("{\"low\": 7,230}"),
            Some(InvalidReason::Unrecoverable)
        );
        assert_eq!(
            reason("<think>hmm"),
            Some(InvalidReason::UnfinishedReasoning)
        );
        assert_eq!(reason("  "), Some(InvalidReason::Empty));
        assert_eq!(
            reason("```json\nnull\n```"),
            Some(InvalidReason::NotAnObject)
        );
    }

    /// Work grows linearly: a 100x longer pathological input costs at most ~100x the work.
    #[test]
    fn linear_work() {
        for unit in [
            "{", "{\"a\":", "{\"a\":[", "[{", "{\"", "{a:{", "\"{", "{}", "{'a':'", "/*{",
        ] {
            let small = work_units(&unit.repeat(10_000 / unit.len()));
            let large = work_units(&unit.repeat(1_000_000 / unit.len()));
            let ratio = large as f64 / small.max(1) as f64;
            assert!(
                ratio < 150.0,
                "{unit:?}: work {small} -> {large} (x{ratio:.1})"
            );
        }
    }
}
