//! One try over the text a prompt shows alone (a group's passages, a chunk of a long
//! document): the request, the reply read and checked against that text, a refused reply fed
//! back while the prompt fits the budget.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use super::record::{ms, Attempt, AttemptError};
use super::{Backend, Extractor, Request};
use crate::constraint::Constraint;
use crate::ground::{check_reply, Grounds};
use crate::ir::ContractSpec;
use crate::parse::{recover_with, Level};
use crate::prompt::{feedback_message, Message, Messages, PromptParts};
use crate::source::Source;
use crate::validate::{check_value, Violation, ViolationKind, Violations};

/// What one try of a group gave.
pub(super) struct GroupTry {
    /// Its attempts (the first, then those with feedback).
    pub(super) attempts: Vec<Attempt>,
    pub(super) value: Option<Map<String, Value>>,
    pub(super) level: Level,
    pub(super) backend_error: bool,
}

impl<C, B: Backend> Extractor<C, B> {
    /// One try of the part `spec` of the contract over the parts `keep` of `source` (as
    /// [`Source::excerpt`] takes them) shown alone: asked for under a mask grounded in them, the
    /// reply read and checked against them, a refused reply fed back up to
    /// [`Extractor::max_attempts`] attempts while the prompt with the feedback fits the budget.
    pub(super) async fn try_shown(
        &self,
        spec: &ContractSpec,
        constraint: &Arc<Constraint>,
        parts: &PromptParts,
        keep: &[(std::ops::Range<usize>, Option<std::ops::Range<usize>>)],
        source: &Source,
    ) -> GroupTry {
        let excerpt = source.excerpt(keep);
        let lines: Vec<[usize; 2]> = keep
            .iter()
            .map(|(r, _)| [r.start, r.end.saturating_sub(1).max(r.start)])
            .collect();
        let mut messages = parts.messages_for_excerpt(&excerpt);
        let mut attempts = Vec::new();
        loop {
            let request = Request {
                constraint: constraint.clone(),
                messages: messages.clone(),
                max_tokens: self.max_tokens,
                sampling: self.sampling,
                source: Some(excerpt.clone()),
            };
            let (mut attempt, value, level, backend_error) =
                self.try_once(spec, &request, &excerpt).await;
            attempt.lines = lines.clone();
            let mut done =
                value.is_some() || backend_error || attempts.len() + 1 >= self.max_attempts;
            if !done {
                if let Some(raw) = &attempt.raw {
                    let mut next = messages.clone();
                    next.push(Message::assistant(raw.clone()));
                    next.push(Message::user(feedback_message(&attempt.violations)));
                    // A retry whose prompt would not fit the budget is not sent.
                    if self.fits_budget(&next) {
                        messages = next;
                    } else {
                        done = true;
                    }
                }
            }
            attempts.push(attempt);
            if done {
                return GroupTry {
                    attempts,
                    value,
                    level,
                    backend_error,
                };
            }
        }
    }

    /// Whether `messages` fit the budget (always, without one).
    pub(super) fn fits_budget(&self, messages: &Messages) -> bool {
        let Some((tok, budget)) = &self.budget else {
            return true;
        };
        let contents: Vec<&str> = messages.0.iter().map(|m| m.content.as_str()).collect();
        budget.tokens(&contents, tok.as_ref()) <= budget.max_tokens
    }

    /// One request of a group's try: the reply read and checked against the excerpt.
    async fn try_once(
        &self,
        spec: &ContractSpec,
        request: &Request,
        excerpt: &Source,
    ) -> (Attempt, Option<Map<String, Value>>, Level, bool) {
        let t0 = Instant::now();
        let mut attempt = Attempt::empty();
        let response = match self.backend.complete(request).await {
            Ok(r) => r,
            Err(error) => {
                attempt.error = Some(AttemptError::Backend { error });
                attempt.ms = ms(t0);
                return (attempt, None, Level::Invalid, true);
            }
        };
        let rec = recover_with(&response.text, self.options);
        let mut violations = Violations::new();
        let value = match (&rec.json, rec.level) {
            (Some(_), Level::Repaired) if self.options.no_repair => {
                violations.push(Violation::new(
                    "",
                    ViolationKind::JsonInvalid,
                    "the reply is not valid JSON (it needs repairs) and repair is off",
                ));
                None
            }
            (Some(json), _) => {
                check_value(spec, json, "", &mut violations);
                if self.grounding {
                    violations
                        .0
                        .extend(check_reply(spec, json, &response.text, &Grounds::new(excerpt)).0);
                }
                violations.0.extend(self.check_shown_text(json, excerpt).0);
                match json {
                    Value::Object(map) if violations.is_empty() => Some(map.clone()),
                    Value::Object(_) => None,
                    _ => {
                        violations.push(Violation::new(
                            "",
                            ViolationKind::TypeMismatch,
                            "the reply is not a JSON object",
                        ));
                        None
                    }
                }
            }
            (None, _) => {
                let message = rec.invalid.as_ref().map_or_else(
                    || "no JSON object in the reply".to_owned(),
                    |i| format!("{}: {}", i.reason.as_str(), i.message),
                );
                violations.push(Violation::new("", ViolationKind::JsonInvalid, message));
                None
            }
        };
        attempt.raw = Some(response.text.clone());
        attempt.reasoning = rec.reasoning.clone().or(response.reasoning);
        attempt.level = Some(rec.level);
        attempt.json = rec.json.clone();
        attempt.violations = violations;
        attempt.repairs = rec.repairs.clone();
        attempt.finish_reason = response.finish_reason;
        attempt.prompt_tokens = response.prompt_tokens.map(|n| n as usize);
        attempt.completion_tokens = response.completion_tokens;
        attempt.forward_calls = response.forward_calls;
        attempt.ms = ms(t0);
        (attempt, value, rec.level, false)
    }
}
