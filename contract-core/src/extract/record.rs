//! The audit record of an extraction: [`Extraction`], its [`Attempt`]s and [`Timings`], why an
//! attempt got no reply ([`AttemptError`]), and the helpers that fill them.

use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::{BackendError, FinishReason};
use crate::chunk::ChunkRecord;
use crate::ir::ContractSpec;
use crate::parse::{Level, Repair};
use crate::prompt::BudgetError;
use crate::select::{SelectionRecord, Skipped};
use crate::validate::Violations;

/// Why an attempt produced no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum AttemptError {
    /// The backend failed.
    #[error("backend: {error}")]
    Backend {
        /// The backend's error.
        error: BackendError,
    },
    /// The prompt could not be fitted into the budget.
    #[error("budget: {error}")]
    Budget {
        /// The budget error.
        error: BudgetError,
    },
}

/// One attempt of an extraction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    /// The model's raw reply, as received.
    pub raw: Option<String>,
    /// The reasoning trace (from the reply or returned separately by the backend).
    pub reasoning: Option<String>,
    /// How the reply was read.
    pub level: Option<Level>,
    /// The recovered object.
    pub json: Option<Value>,
    /// What the reply broke.
    pub violations: Violations,
    /// Syntax repairs.
    pub repairs: Vec<Repair>,
    /// Why generation stopped.
    pub finish_reason: Option<FinishReason>,
    /// Prompt tokens: the tokenizer's count under a budget, else the backend's.
    pub prompt_tokens: Option<usize>,
    /// Generated tokens, as the backend counted them.
    pub completion_tokens: Option<u32>,
    /// Forward passes, for local backends.
    pub forward_calls: Option<u32>,
    /// Document tokens dropped to fit the budget.
    pub dropped_tokens: usize,
    /// Document lines not kept in full.
    pub dropped_lines: usize,
    /// Wall time of the attempt (prompt fitting, backend call and parsing), in milliseconds.
    pub ms: f64,
    /// Why the attempt has no reply.
    pub error: Option<AttemptError>,
    /// With evidence selection: the group of fields the attempt asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// With evidence selection: the lines (`[first, last]`) of the passages the model was
    /// shown.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<[usize; 2]>,
}

/// Wall times of an extraction, in milliseconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Timings {
    /// Each attempt.
    pub attempts_ms: Vec<f64>,
    /// The whole extraction.
    pub total_ms: f64,
}

/// The audit record of one extraction; one JSON line with [`Extraction::to_json_line`].
///
/// The top-level fields describe the last attempt that got a reply (the answer reported);
/// `attempts` keeps every attempt, raw replies included.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Extraction<C> {
    /// The contract's name.
    pub contract: String,
    /// The value, when a reply filled the contract.
    pub value: Option<C>,
    /// How the reported reply was read (`invalid` when no reply came).
    pub level: Level,
    /// The recovered object, values as written.
    pub json: Option<Value>,
    /// What the reported reply broke.
    pub violations: Violations,
    /// Syntax repairs of the reported reply.
    pub repairs: Vec<Repair>,
    /// The reasoning trace of the reported reply.
    pub reasoning: Option<String>,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// Prompt tokens of the first attempt (the document prompt, before any feedback).
    pub prompt_tokens: Option<usize>,
    /// Document tokens dropped to fit the budget (in the last attempt).
    pub dropped_tokens: usize,
    /// Document lines not kept in full (in the last attempt).
    pub dropped_lines: usize,
    /// Wall times.
    pub timings: Timings,
    /// Why the last attempt got no reply, when it did not.
    pub error: Option<AttemptError>,
    /// How the evidence was selected, when it was ([`Selection`](crate::select::Selection)):
    /// every group's question, the best passages and their scores, the passages each try
    /// showed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionRecord>,
    /// Why a contract that selects evidence was extracted from the whole document instead (a
    /// backend that cannot score answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection_skipped: Option<Skipped>,
    /// How a document longer than the budget was read in chunks, when it was
    /// ([`Overflow::Chunks`](crate::chunk::Overflow::Chunks)): each chunk's lines and outcome,
    /// each list's merge and completeness, the fields chunks disagreed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<ChunkRecord>,
}

impl<C> Extraction<C> {
    /// Whether a value was extracted.
    pub fn is_ok(&self) -> bool {
        self.value.is_some()
    }

    /// How many attempts were made.
    pub fn attempt_count(&self) -> usize {
        self.attempts.len()
    }
}

impl<C: Serialize> Extraction<C> {
    /// The record as one line of JSON.
    pub fn to_json_line(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

impl Attempt {
    pub(super) fn empty() -> Attempt {
        Attempt {
            raw: None,
            reasoning: None,
            level: None,
            json: None,
            violations: Violations::new(),
            repairs: Vec::new(),
            finish_reason: None,
            prompt_tokens: None,
            completion_tokens: None,
            forward_calls: None,
            dropped_tokens: 0,
            dropped_lines: 0,
            ms: 0.0,
            error: None,
            group: None,
            lines: Vec::new(),
        }
    }
}

impl<C> Extraction<C> {
    pub(super) fn empty(spec: &ContractSpec) -> Extraction<C> {
        Extraction {
            contract: spec.name.clone(),
            value: None,
            level: Level::Invalid,
            json: None,
            violations: Violations::new(),
            repairs: Vec::new(),
            reasoning: None,
            attempts: Vec::new(),
            prompt_tokens: None,
            dropped_tokens: 0,
            dropped_lines: 0,
            timings: Timings::default(),
            error: None,
            selection: None,
            selection_skipped: None,
            chunks: None,
        }
    }
}

/// The repairs of the attempts whose replies were accepted (no violation).
pub(super) fn accepted_repairs(attempts: &[Attempt]) -> Vec<Repair> {
    attempts
        .iter()
        .filter(|a| a.violations.is_empty())
        .flat_map(|a| a.repairs.iter().cloned())
        .collect()
}

pub(super) fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

pub(super) fn finish_attempt<C>(out: &mut Extraction<C>, mut attempt: Attempt, t0: Instant) {
    attempt.ms = ms(t0);
    if out.attempts.is_empty() {
        out.prompt_tokens = attempt.prompt_tokens;
    }
    out.dropped_tokens = attempt.dropped_tokens;
    out.dropped_lines = attempt.dropped_lines;
    out.timings.attempts_ms.push(attempt.ms);
    out.attempts.push(attempt);
}
