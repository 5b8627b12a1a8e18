//! The extraction loop: prompt, budget, backend, ladder, retry with feedback, and the audit
//! record.
//!
//! [`Extractor::extract`] always returns an [`Extraction`], never an error: a backend failure or
//! a document whose fixed prompt parts do not fit is recorded in [`Extraction::error`], so a batch
//! never loses a document.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::constraint::{Constraint, Decoding};
use crate::contract::Contract;
use crate::ground::{has_grounding, Grounds};
use std::sync::{Mutex, OnceLock};

use serde_json::Map;

pub use crate::chunk::Overflow;
use crate::chunk::{merge_chunks, plan_chunks, Chunk, ChunkPart, ChunkRecord};
use crate::context::{Adjust, DocContext};
use crate::contract::ContractSpec;
use crate::dynamic::values::{adopt_value_types, has_def_refs, normalize_values};
use crate::dynamic::DynContract;
use crate::grammar::{Grammar, Think};
use crate::ground::check_reply;
use crate::parse::{parse_output_by, recover_with, Level, ParseOptions, Repair};
use crate::passage::Passage;
use crate::prompt::Instructions;
use crate::prompt::{
    feedback_message, Budget, BudgetError, Message, Messages, PromptParts, Tokenizer,
};
use crate::read::Conventions;
use crate::select::{
    self, field_groups, group_of_path, judge_plan, rank, value_candidates, FieldGroup, GroupRecord,
    Judge, Outcome, Ranked, RankedPassage, Selection, SelectionRecord, Skipped, ValueCandidates,
    ValuePrompt,
};
use crate::source::Source;
use crate::stream::{emit_field, tied_fields, FieldReader, Shared, Sink};
pub use crate::stream::{ExtractionStream, FieldEvent, StreamEvent};
use crate::validate::Violations;
use crate::validate::{check_value, Violation, ViolationKind};

/// Sampling settings; `None` leaves the backend's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Temperature (0 for greedy).
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    pub top_p: Option<f32>,
    /// Seed for reproducible sampling.
    pub seed: Option<u64>,
}

/// One request to a backend. Each backend takes what it supports from the
/// [`constraint`](Request::constraint): a remote API the strict schema, a local model the
/// grammar; every backend the messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    /// The contract's renderings for backends, shared by every request of the contract.
    pub constraint: Arc<Constraint>,
    /// The messages to send.
    pub messages: Messages,
    /// Most tokens to generate.
    pub max_tokens: Option<u32>,
    /// Sampling settings.
    pub sampling: Sampling,
    /// The document the prompt holds, whole (before any budget cut). A backend that decodes
    /// under a mask grounds the contract's grounded values in it; every reply is checked
    /// against it by the extractor.
    pub source: Option<Source>,
}

impl Request {
    /// A request for `constraint` with `messages`, the backend's token limit and sampling, and no
    /// document.
    pub fn new(constraint: Arc<Constraint>, messages: Messages) -> Request {
        Request {
            constraint,
            messages,
            max_tokens: None,
            sampling: Sampling::default(),
            source: None,
        }
    }

    /// The contract's name.
    pub fn contract(&self) -> &str {
        &self.constraint.name
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// The model ended its answer.
    Stop,
    /// The token limit cut the answer.
    Length,
    /// A content filter stopped it.
    ContentFilter,
    /// Anything else the backend reported.
    Other,
}

/// A backend's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The generated text.
    pub text: String,
    /// A reasoning trace the backend returned separately from `text`.
    pub reasoning: Option<String>,
    /// Why generation stopped.
    pub finish_reason: Option<FinishReason>,
    /// Prompt tokens as the backend counted them.
    pub prompt_tokens: Option<u32>,
    /// Generated tokens.
    pub completion_tokens: Option<u32>,
    /// Forward passes of a local model (prompt processing plus decoding steps).
    pub forward_calls: Option<u32>,
}

impl Response {
    /// A response with only its text (finish reason `stop`).
    pub fn text(text: impl Into<String>) -> Self {
        Response {
            text: text.into(),
            reasoning: None,
            finish_reason: Some(FinishReason::Stop),
            prompt_tokens: None,
            completion_tokens: None,
            forward_calls: None,
        }
    }
}

/// Why a backend gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BackendError {
    /// The backend cannot be reached or is not loaded.
    #[error("backend unavailable: {message}")]
    Unavailable {
        /// Details.
        message: String,
    },
    /// No answer in time.
    #[error(
        "backend timed out after {after_ms} ms, {}",
        attempts_over(*attempts, *elapsed_ms)
    )]
    Timeout {
        /// How long the last attempt waited.
        after_ms: u64,
        /// Attempts made, the first one included (retries happen inside the backend).
        #[serde(default = "one")]
        attempts: u32,
        /// Time from the start of the first attempt to the error, waits between attempts
        /// included, in milliseconds.
        #[serde(default)]
        elapsed_ms: u64,
    },
    /// Too many requests.
    #[error("rate limited, {}", attempts_over(*attempts, *elapsed_ms))]
    RateLimited {
        /// When to try again, if said.
        retry_after_ms: Option<u64>,
        /// Attempts made, the first one included (retries happen inside the backend).
        #[serde(default = "one")]
        attempts: u32,
        /// Time from the start of the first attempt to the error, waits between attempts
        /// included, in milliseconds.
        #[serde(default)]
        elapsed_ms: u64,
    },
    /// The prompt is longer than the model's context.
    #[error("prompt of {prompt_tokens} tokens exceeds the context of {context} tokens")]
    ContextLength {
        /// Prompt tokens.
        prompt_tokens: usize,
        /// The model's context.
        context: usize,
    },
    /// The backend rejected the request (bad schema, unsupported option).
    #[error("invalid request: {message}")]
    InvalidRequest {
        /// Details.
        message: String,
    },
    /// An answer that could not be read (bad HTTP body, decoding failure).
    #[error("protocol error: {message}")]
    Protocol {
        /// Details.
        message: String,
    },
    /// The backend cannot do what was asked (scoring answers on a server that returns no
    /// log-probabilities, a backend without [`Backend::score`]).
    #[error("unsupported: {message}")]
    Unsupported {
        /// What is not supported, and by whom.
        message: String,
    },
    /// Anything else.
    #[error("{message}")]
    Other {
        /// Details.
        message: String,
    },
}

/// `3 attempts over 4512 ms`.
fn attempts_over(attempts: u32, elapsed_ms: u64) -> String {
    let plural = if attempts == 1 { "" } else { "s" };
    format!("{attempts} attempt{plural} over {elapsed_ms} ms")
}

fn one() -> u32 {
    1
}

impl BackendError {
    /// The snake_case kind (`timeout`, `rate_limited`).
    pub fn kind(&self) -> &'static str {
        match self {
            BackendError::Unavailable { .. } => "unavailable",
            BackendError::Timeout { .. } => "timeout",
            BackendError::RateLimited { .. } => "rate_limited",
            BackendError::ContextLength { .. } => "context_length",
            BackendError::InvalidRequest { .. } => "invalid_request",
            BackendError::Protocol { .. } => "protocol",
            BackendError::Unsupported { .. } => "unsupported",
            BackendError::Other { .. } => "other",
        }
    }
}

/// Something that answers a [`Request`]: a local model, a remote API, a script.
///
/// Implement it with `async fn complete(&self, req: &Request) -> Result<Response, BackendError>`;
/// the returned future must be `Send` so extractions can run on a multi-threaded runtime.
pub trait Backend {
    /// Generates an answer to `req`.
    fn complete(
        &self,
        req: &Request,
    ) -> impl Future<Output = Result<Response, BackendError>> + Send;

    /// Generates an answer to `req` as [`Backend::complete`] does, handing each piece of its
    /// text to `on_text` as it is generated; the pieces, concatenated, are the final
    /// [`Response::text`], and the final response is the one `complete` returns.
    ///
    /// The default calls `complete` and hands the whole text once: a backend that cannot
    /// stream keeps it, and a stream over it emits its fields when the reply is whole.
    fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> impl Future<Output = Result<Response, BackendError>> + Send {
        let complete = self.complete(req);
        async move {
            let response = complete.await?;
            on_text(&response.text);
            Ok(response)
        }
    }

    /// Scores short answers after each of several prompts: for every prompt of `req`, the
    /// log-probability the model gives each of [`ScoreRequest::answers`] as the start of its
    /// reply. This is how passages are judged (a yes/no question per passage, ranked by
    /// `log P(yes) - log P(no)`); a backend answers all prompts of one request together, in as
    /// few forward calls as it can.
    ///
    /// The default answers [`BackendError::Unsupported`]: a backend that cannot score (a server
    /// without log-probabilities, a scripted test backend) keeps it, and callers fall back to
    /// extracting without judging.
    fn score(
        &self,
        req: &ScoreRequest,
    ) -> impl Future<Output = Result<ScoreResponse, BackendError>> + Send {
        let _ = req;
        std::future::ready(Err(BackendError::Unsupported {
            message: "this backend does not score answers".into(),
        }))
    }
}

/// A batch of prompts whose answers a [`Backend::score`] call scores.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScoreRequest {
    /// The prompts, each a full conversation that ends with the user's question (the answer is
    /// the assistant's reply).
    pub prompts: Vec<Messages>,
    /// The answers to score after every prompt, as the assistant would start its reply (`yes`,
    /// `Yes`, `no`, `No`).
    pub answers: Vec<String>,
}

/// What [`Backend::score`] answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreResponse {
    /// For each prompt, in order, the natural-log probability of each answer, in the order of
    /// [`ScoreRequest::answers`].
    pub logprobs: Vec<Vec<f64>>,
    /// Whether every log-probability is the model's own over the whole answer: always for a
    /// local model. A server returns only its most likely first tokens: an answer is the listed
    /// token that is its text (whitespace trimmed, spellings summed:
    /// [`judge::answers_from_top`](crate::judge::answers_from_top)), and an answer missing from
    /// them is counted at the least likely one listed (an upper bound); this is false when that
    /// happened to any answer of any prompt.
    pub exact: bool,
    /// Forward passes of a local model for the whole request.
    pub forward_calls: Option<u32>,
}

impl<B: Backend + Sync> Backend for &B {
    fn complete(
        &self,
        req: &Request,
    ) -> impl Future<Output = Result<Response, BackendError>> + Send {
        (**self).complete(req)
    }

    fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> impl Future<Output = Result<Response, BackendError>> + Send {
        (**self).complete_streaming(req, on_text)
    }

    fn score(
        &self,
        req: &ScoreRequest,
    ) -> impl Future<Output = Result<ScoreResponse, BackendError>> + Send {
        (**self).score(req)
    }
}

impl<B: Backend + Send + Sync> Backend for Arc<B> {
    fn complete(
        &self,
        req: &Request,
    ) -> impl Future<Output = Result<Response, BackendError>> + Send {
        (**self).complete(req)
    }

    fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> impl Future<Output = Result<Response, BackendError>> + Send {
        (**self).complete_streaming(req, on_text)
    }

    fn score(
        &self,
        req: &ScoreRequest,
    ) -> impl Future<Output = Result<ScoreResponse, BackendError>> + Send {
        (**self).score(req)
    }
}

/// A boxed, `Send` future, what [`DynBackend::complete_boxed`] returns.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe form of [`Backend`], so that an application can choose a backend at run
/// time: every `Backend + Send + Sync` is one, and `Box<dyn DynBackend>`, `Arc<dyn DynBackend>`
/// and `&dyn DynBackend` are [`Backend`]s (each call boxes its future once).
///
/// ```
/// use contract_core::extract::{Backend, DynBackend};
/// fn pick(remote: bool) -> Box<dyn DynBackend> {
///     # struct Local; struct Remote;
///     # impl Backend for Local { async fn complete(&self, _: &contract_core::extract::Request) -> Result<contract_core::extract::Response, contract_core::extract::BackendError> { unimplemented!() } }
///     # impl Backend for Remote { async fn complete(&self, _: &contract_core::extract::Request) -> Result<contract_core::extract::Response, contract_core::extract::BackendError> { unimplemented!() } }
///     if remote { Box::new(Remote) } else { Box::new(Local) }
/// }
/// fn takes_a_backend(_: impl Backend) {}
/// takes_a_backend(pick(true));
/// ```
pub trait DynBackend: Send + Sync {
    /// [`Backend::complete`], its future boxed.
    fn complete_boxed<'a>(
        &'a self,
        req: &'a Request,
    ) -> BoxFuture<'a, Result<Response, BackendError>>;

    /// [`Backend::complete_streaming`], its future boxed.
    fn complete_streaming_boxed<'a>(
        &'a self,
        req: &'a Request,
        on_text: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<Response, BackendError>>;

    /// [`Backend::score`], its future boxed.
    fn score_boxed<'a>(
        &'a self,
        req: &'a ScoreRequest,
    ) -> BoxFuture<'a, Result<ScoreResponse, BackendError>>;
}

impl<B: Backend + Send + Sync> DynBackend for B {
    fn complete_boxed<'a>(
        &'a self,
        req: &'a Request,
    ) -> BoxFuture<'a, Result<Response, BackendError>> {
        Box::pin(self.complete(req))
    }

    fn complete_streaming_boxed<'a>(
        &'a self,
        req: &'a Request,
        on_text: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<Response, BackendError>> {
        Box::pin(self.complete_streaming(req, on_text))
    }

    fn score_boxed<'a>(
        &'a self,
        req: &'a ScoreRequest,
    ) -> BoxFuture<'a, Result<ScoreResponse, BackendError>> {
        Box::pin(self.score(req))
    }
}

impl Backend for dyn DynBackend {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        self.complete_boxed(req).await
    }

    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        self.complete_streaming_boxed(req, on_text).await
    }

    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        self.score_boxed(req).await
    }
}

impl Backend for Box<dyn DynBackend> {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        (**self).complete_boxed(req).await
    }

    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        (**self).complete_streaming_boxed(req, on_text).await
    }

    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        (**self).score_boxed(req).await
    }
}

impl Backend for Arc<dyn DynBackend> {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        (**self).complete_boxed(req).await
    }

    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        (**self).complete_streaming_boxed(req, on_text).await
    }

    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        (**self).score_boxed(req).await
    }
}

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
    /// How the evidence was selected, when it was ([`Selection`]): every group's question, the
    /// best passages and their scores, the passages each try showed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionRecord>,
    /// Why a contract that selects evidence was extracted from the whole document instead (a
    /// backend that cannot score answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection_skipped: Option<Skipped>,
    /// How a document longer than the budget was read in chunks, when it was
    /// ([`Overflow::Chunks`]): each chunk's lines and outcome, each list's merge and
    /// completeness, the fields chunks disagreed on.
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

/// Runs contract `C` over documents with backend `B`.
///
/// ```ignore
/// let extraction = Extractor::<Guidance, _>::new(backend).max_attempts(2).extract(&doc).await;
/// ```
pub struct Extractor<C, B> {
    backend: B,
    /// The contract's spec: a derived contract's, or a runtime contract's root.
    spec: Arc<ContractSpec>,
    /// The contract's own constraint, grounded ([`Extractor::grounding`] derives the one used).
    base: Arc<Constraint>,
    /// How a recovered object becomes the value.
    read: Read<C>,
    /// The user's checks, run on every value read.
    checks: Vec<Check>,
    /// The user's grounding checks, run on every reply against the text it was asked from.
    shown_checks: Vec<ShownCheck>,
    max_attempts: usize,
    budget: Option<(Arc<dyn Tokenizer + Send + Sync>, Budget)>,
    overflow: Overflow,
    max_tokens: Option<u32>,
    sampling: Sampling,
    options: ParseOptions,
    parts: PromptParts,
    constraint: Arc<Constraint>,
    grounding: bool,
    selection: Selection,
    plans: OnceLock<Vec<GroupPlan>>,
    adjust: Option<Adjust>,
    think: Option<Think>,
}

/// How an [`Extractor`] turns a recovered object into its value: a derived contract's
/// [`Contract::from_value_in`], or a runtime contract's validator.
type Read<C> = Arc<dyn Fn(&Value, &DocContext<'_>) -> Result<C, Violations> + Send + Sync>;

/// A check an application adds ([`Extractor::check`]): the violations of a value, seeing the
/// document.
type Check = Arc<dyn Fn(&Value, &DocContext<'_>) -> Violations + Send + Sync>;

/// A grounding check an application adds ([`Extractor::check_shown`]): the violations of a
/// reply, seeing the text the model was shown for it.
type ShownCheck = Arc<dyn Fn(&Value, &Source) -> Violations + Send + Sync>;

/// One group of fields as the extractor asks for it under selection.
struct GroupPlan {
    group: FieldGroup,
    spec: ContractSpec,
    constraint: Arc<Constraint>,
    parts: PromptParts,
}

/// What one try of a group gave.
struct GroupTry {
    /// Its attempts (the first, then those with feedback).
    attempts: Vec<Attempt>,
    value: Option<Map<String, Value>>,
    level: Level,
    backend_error: bool,
}

impl<C: Contract, B: Backend> Extractor<C, B> {
    /// An extractor with the default prompt, 2 attempts and no budget.
    pub fn new(backend: B) -> Self {
        Extractor::with_target(
            backend,
            Arc::new(C::contract_spec().clone()),
            Constraint::of::<C>(),
            PromptParts::for_contract::<C>(),
            Arc::new(|json: &Value, cx: &DocContext<'_>| C::from_value_in(json, cx)),
        )
    }
}

impl<B: Backend> Extractor<Value, B> {
    /// An extractor of a runtime contract (a JSON Schema read at run time, [`DynContract`]):
    /// the same loop as a derived contract's (evidence selection, the grounded mask, budgets
    /// and chunks, retries with feedback, the audit record), the value the reply's JSON once
    /// the contract's validator (its keywords and `x-rules`) and the grounding checks pass.
    ///
    /// A root property whose `$ref` names one of the library's value types (`#/$defs/Amount`,
    /// `DateValue`, `Period`, `DurationValue`; directly, nullable through `anyOf` with `null`,
    /// or as a list's items) is that type, as in a derived contract: decoded under its shape,
    /// normalised when read (the ISO date, the currency's code, the scale), its violations at
    /// the property's pointer; the definition's body is not used (`"$defs": {"Amount": {}}`).
    ///
    /// A schema whose root fields are grounded (`x-grounded`) and that has no other definitions
    /// decodes under the grounded grammar, as a derived contract does, and selects evidence by
    /// default; a schema with other definitions decodes under its JSON Schema and reads the
    /// whole document (the grammar and the selection follow a contract's nesting, not a
    /// schema's definitions), and grounded values behind such a `$ref` are not checked by the
    /// extractor: add an [`Extractor::check_shown`] for them (it sees the text each reply was
    /// asked from, a chunk's under a budget).
    pub fn runtime(backend: B, contract: &DynContract) -> Self {
        let mut spec = contract.root_spec();
        let values = adopt_value_types(&mut spec);
        let flat = !has_def_refs(&spec.node);
        let mut constraint = Constraint::from_dyn(contract);
        if flat && spec.object().is_some() && has_grounding(&spec) {
            constraint =
                constraint.with_decoding(Some(Decoding::Grammar(Arc::new(Grammar::of(&spec)))));
        }
        // A schema that names value types is shown as the derived contract it reads as (the
        // types' shapes in its signature); any other, in the runtime signature's words.
        let parts = if values.is_empty() {
            PromptParts::for_runtime(contract)
        } else {
            PromptParts::for_spec(&spec, Instructions::SignatureAndFields)
        };
        let validator = Arc::new(contract.clone());
        let read: Read<Value> = Arc::new(move |json: &Value, cx: &DocContext<'_>| {
            validator.validate(json)?;
            let mut value = json.clone();
            let violations = normalize_values(&values, &mut value, cx);
            if violations.is_empty() {
                Ok(value)
            } else {
                Err(violations)
            }
        });
        let extractor =
            Extractor::with_target(backend, Arc::new(spec), Arc::new(constraint), parts, read);
        if flat {
            extractor
        } else {
            extractor.selection(Selection::off())
        }
    }
}

impl<C, B: Backend> Extractor<C, B> {
    fn with_target(
        backend: B,
        spec: Arc<ContractSpec>,
        base: Arc<Constraint>,
        parts: PromptParts,
        read: Read<C>,
    ) -> Self {
        Extractor {
            backend,
            constraint: base.clone(),
            spec,
            base,
            read,
            checks: Vec::new(),
            shown_checks: Vec::new(),
            max_attempts: 2,
            budget: None,
            overflow: Overflow::default(),
            max_tokens: None,
            sampling: Sampling::default(),
            options: ParseOptions::default(),
            parts,
            grounding: true,
            selection: Selection::default(),
            plans: OnceLock::new(),
            adjust: None,
            think: None,
        }
    }

    /// The contract's spec (a runtime contract's root).
    pub fn spec(&self) -> &ContractSpec {
        &self.spec
    }

    /// Adds a check every value must pass, seeing the document ([`DocContext::source`]): a
    /// rule the contract cannot state (a total that must equal a sum the document prints, a
    /// value that must sit in a named section). Its violations refuse the reply like the
    /// contract's own: fed back on a retry, or under evidence selection the next passage
    /// tried for the fields they name.
    pub fn check(
        mut self,
        check: impl Fn(&Value, &DocContext<'_>) -> Violations + Send + Sync + 'static,
    ) -> Self {
        self.checks.push(Arc::new(check));
        self
    }

    /// Adds a grounding check the contract cannot state, run on every reply against the text
    /// the model was shown for it (not the whole document): the document, or the head kept
    /// under a [budget](Extractor::budget), each chunk of a document read in chunks, a
    /// group's passages under evidence selection (the reply then holds the group's fields
    /// only). What the library grounds itself (a derived contract's grounded values, a runtime
    /// contract's root fields) it holds to that text; this is for the values it does not
    /// reach, such as a runtime schema's grounded values behind a `$ref`. Its violations
    /// refuse that reply as the library's own grounding does: fed back on a retry, the chunk
    /// or the group left unfilled when none passes. It does not run with grounding off
    /// ([`Extractor::grounding`]).
    pub fn check_shown(
        mut self,
        check: impl Fn(&Value, &Source) -> Violations + Send + Sync + 'static,
    ) -> Self {
        self.shown_checks.push(Arc::new(check));
        self
    }

    /// The violations of the added grounding checks ([`Extractor::check_shown`]) of `json`
    /// against `shown`; none with grounding off.
    fn check_shown_text(&self, json: &Value, shown: &Source) -> Violations {
        let mut out = Violations::new();
        if self.grounding {
            for check in &self.shown_checks {
                out.0.extend(check(json, shown).0);
            }
        }
        out
    }

    /// Reads `json` into the value: the contract's reading, then the added checks.
    fn read_value(&self, json: &Value, cx: &DocContext<'_>) -> Result<C, Violations> {
        let read = (self.read)(json, cx);
        let mut added = Violations::new();
        for check in &self.checks {
            added.0.extend(check(json, cx).0);
        }
        match read {
            Ok(value) if added.is_empty() => Ok(value),
            Ok(_) => Err(added),
            Err(mut violations) => {
                violations.0.extend(added.0);
                Err(violations)
            }
        }
    }

    /// Think, then fill (off by default): every reply opens with a reasoning block of at most
    /// `think.max_tokens` tokens (`<think> .. </think>`), then the contract. The prompt asks for
    /// the block ([`PromptParts::with_think`]); the request's constraint carries it
    /// ([`Constraint::think`]), so a backend that decodes under a grammar holds the block to its
    /// cap and what follows to the contract's grammar, groundings and rules as always (the local
    /// backend; an OpenAI-compatible server in its grammar mode). The trace's tokens come on top
    /// of [`Extractor::max_tokens`]. The record keeps the trace apart from the value
    /// ([`Extraction::reasoning`], [`Attempt::reasoning`]); a reply read after a trace is at the
    /// `extracted` level, never `strict`.
    pub fn think(mut self, think: Think) -> Self {
        self.think = Some(think);
        self.constraint = Arc::new(self.constraint.with_think(self.think));
        self.parts = self.parts.with_think(think);
        self.plans = OnceLock::new();
        self
    }

    /// How evidence is selected ([`Selection`]; on by default for a contract with grounded
    /// values, when the backend scores answers). `Selection::off()` reads the whole document.
    pub fn selection(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self.plans = OnceLock::new();
        self
    }

    /// Changes the conventions detected in each document before values are read
    /// ([`DocContext::conventions`]): what you know of your documents that one document may not
    /// tell. Receipts from a country that writes the day first:
    /// `.conventions(|c| c.with_date_order(DateOrder::DayFirst))` (a receipt whose only date is
    /// `04/05/2018` is otherwise ambiguous, a violation).
    pub fn conventions(
        mut self,
        adjust: impl Fn(Conventions) -> Conventions + Send + Sync + 'static,
    ) -> Self {
        self.adjust = Some(Arc::new(adjust));
        self
    }

    /// Whether grounded values are held to the document (default `true`): `false` decodes
    /// with the contract's grammar without its groundings and does not check replies against
    /// the document, without a second copy of the contract.
    pub fn grounding(mut self, on: bool) -> Self {
        self.grounding = on;
        self.constraint = if on {
            self.base.clone()
        } else {
            Arc::new(ungrounded(&self.base))
        };
        if self.think.is_some() {
            self.constraint = Arc::new(self.constraint.with_think(self.think));
        }
        self.plans = OnceLock::new();
        self
    }

    /// At most `n` attempts (at least 1): the first, then retries with feedback.
    pub fn max_attempts(mut self, n: usize) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Fits every prompt into `budget` tokens of `tokenizer`. A document too long for it is
    /// read in overlapping chunks and the replies merged (the default [`Overflow`]), or cut to
    /// the head that fits ([`Overflow::Cut`]); never silently.
    pub fn budget(mut self, tokenizer: Arc<dyn Tokenizer + Send + Sync>, budget: Budget) -> Self {
        self.budget = Some((tokenizer, budget));
        self
    }

    /// What is done with a document longer than the [budget](Extractor::budget) (default:
    /// [`Overflow::Chunks`] with 4 lines of overlap; see [`crate::chunk`]). The record's
    /// [`Extraction::chunks`] tells how it was read.
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// Most tokens to generate per attempt.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Sampling settings.
    pub fn sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }

    /// Replaces the final question.
    pub fn question(mut self, question: impl Into<String>) -> Self {
        self.parts = self.parts.with_question(question);
        if let Some(think) = self.think {
            self.parts = self.parts.with_think(think);
        }
        self
    }

    /// Replaces the instructions (the system message; by default
    /// [`system_message`](crate::prompt::system_message)). The document and the final question
    /// still go in the user message.
    pub fn instructions(mut self, system: impl Into<String>) -> Self {
        self.parts = self.parts.with_system(system);
        if let Some(think) = self.think {
            self.parts = self.parts.with_think(think);
        }
        self
    }

    /// Ladder options (a template that opens the reasoning trace).
    pub fn parse_options(mut self, options: ParseOptions) -> Self {
        self.options = options;
        self
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Extracts `C` from `document`. Never fails: errors are recorded in the result.
    pub async fn extract(&self, document: &str) -> Extraction<C> {
        self.extract_in(document, Source::from_text(document)).await
    }

    /// Extracts `C` from `document`, grounded values checked against `source` (what the
    /// request's [`Request::source`] carries): `document`'s own [`Source`] with settings such
    /// as [`Source::with_numerals`], or the whole document a passage was cut from.
    pub async fn extract_in(&self, document: &str, source: Source) -> Extraction<C> {
        self.run(document, source, None).await
    }

    /// [`Extractor::extract`], each field handed to `on_field` as [`Extractor::stream`] would
    /// emit it (closed, checked, in the same order), for a caller that wants the record at the
    /// end and the fields on the way without polling a stream (the batch runner's progress per
    /// field, `contract_backends::batch::run_batch_streaming`). The record is the one
    /// `extract` returns.
    pub async fn extract_observed(
        &self,
        document: &str,
        on_field: &(dyn Fn(FieldEvent) + Send + Sync),
    ) -> Extraction<C> {
        self.run(document, Source::from_text(document), Some(on_field))
            .await
    }

    /// Streams the extraction of `C` from `document`: each root field as soon as its value is
    /// closed in a reply and checked, then the record [`Extractor::extract`] returns
    /// ([`StreamEvent::Done`], always the last event).
    ///
    /// A field is emitted ([`StreamEvent::Field`]) once its value is closed and passes the
    /// field's own constraints and, with grounding on, its grounding in the text the request
    /// showed. Fields tied by a cross-field rule or by a grounding in another field
    /// (`grounded(in = quote)`) are emitted together, once all of them are closed and the rule
    /// holds on them. The contract's reading of the whole value (its normalisation, its
    /// custom checks) and the checks added with [`Extractor::check`] and
    /// [`Extractor::check_shown`] run on the whole reply: the `Done` record is what holds.
    ///
    /// Each attempt streams its own fields: a retry with feedback emits its fields again,
    /// with its attempt number ([`FieldEvent::attempt`]); an application keeps the last value
    /// per path. With evidence selection each group's fields are emitted when the group's
    /// try is accepted, and emitted again when a rule of the whole contract sends the group
    /// to its next passage (as `null` when the group ends refused). A document read in
    /// chunks emits the merged value's fields once the merged value is checked, before
    /// `Done`.
    ///
    /// A list field streams item by item: each item is emitted as soon as it is closed in
    /// the reply and passes its own checks (the item type's constraints, its grounding: an
    /// `Evidenced` item's value in the lines its spans cite), as a [`FieldEvent`] with
    /// [`FieldEvent::item`] set and the item's pointer (`/items/2`); the whole list follows
    /// as a field event when it closes and passes the list's own checks. An item that fails
    /// is not emitted (its index is skipped; the violation is in the `Done` record). Where a
    /// group or a chunked document's merged value is emitted whole, its lists' items are
    /// emitted just before the list.
    ///
    /// Nothing is spawned: the extraction runs as the stream is polled, and dropping the
    /// stream drops the extraction and the backend's request with it. A backend that does
    /// not stream ([`Backend::complete_streaming`]'s default) emits a reply's fields when
    /// the reply is whole.
    pub fn stream<'a>(&'a self, document: &'a str) -> ExtractionStream<'a, C>
    where
        C: Send + 'a,
        B: Sync,
    {
        self.stream_in(document, Source::from_text(document))
    }

    /// [`Extractor::stream`], grounded values checked against `source` (as
    /// [`Extractor::extract_in`]).
    pub fn stream_in<'a>(&'a self, document: &'a str, source: Source) -> ExtractionStream<'a, C>
    where
        C: Send + 'a,
        B: Sync,
    {
        let shared = Arc::new(Shared::default());
        let queue = shared.clone();
        let running = Box::pin(async move {
            let sink = move |event: FieldEvent| queue.push(event);
            self.run(document, source, Some(&sink)).await
        });
        ExtractionStream::new(running, shared)
    }

    /// The extraction, its fields handed to `sink` as they are checked.
    async fn run(&self, document: &str, source: Source, sink: Option<&Sink<'_>>) -> Extraction<C> {
        let started = Instant::now();
        let spec: &ContractSpec = &self.spec;
        let grounded = has_grounding(spec);
        let ties = if sink.is_some() {
            tied_fields(spec)
        } else {
            Vec::new()
        };
        let mut skipped = None;
        if grounded && self.selection.is_on() {
            match self.extract_selected(&source, started, sink).await {
                Ok(out) => return out,
                Err(reason) => skipped = Some(Skipped { reason }),
            }
        }
        // The first attempt's fit, computed once: it also says whether the document overflows.
        let mut first_fit = self.budget.as_ref().map(|(tok, budget)| {
            self.parts
                .fit_messages(document, &[], *budget, tok.as_ref())
        });
        if let (Some((tok, budget)), Overflow::Chunks { overlap_lines }) =
            (&self.budget, self.overflow)
        {
            if matches!(&first_fit, Some(Ok(f)) if f.trimmed) {
                if let Some(mut out) = self
                    .extract_chunked(
                        document,
                        &source,
                        tok.as_ref(),
                        *budget,
                        overlap_lines,
                        sink,
                    )
                    .await
                {
                    out.selection_skipped = skipped;
                    out.timings.total_ms = ms(started);
                    return out;
                }
            }
        }
        let cx = DocContext::of(&source).adjusted(self.adjust.clone());

        let mut out = Extraction::empty(spec);
        out.selection_skipped = skipped;
        let mut feedback: Vec<Message> = Vec::new();

        for _ in 0..self.max_attempts {
            let t0 = Instant::now();
            let mut attempt = Attempt::empty();
            // The text the prompt shows: the whole source, or the head kept under the budget
            // (grounded values are held to it, so none comes from text the model never saw).
            let mut shown = source.clone();

            let messages = match &self.budget {
                None => {
                    let mut m = self.parts.messages(document);
                    m.0.extend(feedback.iter().cloned());
                    Ok(m)
                }
                Some((tok, budget)) => first_fit
                    .take()
                    .filter(|_| feedback.is_empty())
                    .unwrap_or_else(|| {
                        self.parts
                            .fit_messages(document, &feedback, *budget, tok.as_ref())
                    })
                    .map(|f| {
                        attempt.prompt_tokens = Some(f.prompt_tokens);
                        attempt.dropped_tokens = f.dropped_tokens;
                        attempt.dropped_lines = f.dropped_lines;
                        if f.trimmed {
                            shown = Source::from_text(document)
                                .with_numerals(source.numerals())
                                .excerpt(&f.shown);
                        }
                        f.messages
                    }),
            };
            let messages = match messages {
                Ok(m) => m,
                Err(error) => {
                    attempt.error = Some(AttemptError::Budget { error });
                    out.error = attempt.error.clone();
                    finish_attempt(&mut out, attempt, t0);
                    break;
                }
            };

            let request = Request {
                constraint: self.constraint.clone(),
                messages,
                max_tokens: self.max_tokens,
                sampling: self.sampling,
                source: Some(shown.clone()),
            };
            let grounds = (grounded && self.grounding).then(|| Grounds::new(&shown));
            let response = match sink {
                None => self.backend.complete(&request).await,
                Some(sink) => {
                    let reader = Mutex::new(FieldReader::new(
                        spec,
                        &ties,
                        grounds.as_ref(),
                        out.attempts.len() + 1,
                        None,
                    ));
                    let on_text = |piece: &str| {
                        if let Ok(mut reader) = reader.lock() {
                            reader.push(piece, sink);
                        }
                    };
                    self.backend.complete_streaming(&request, &on_text).await
                }
            };
            let response = match response {
                Ok(r) => r,
                Err(error) => {
                    attempt.error = Some(AttemptError::Backend { error });
                    out.error = attempt.error.clone();
                    finish_attempt(&mut out, attempt, t0);
                    break;
                }
            };

            let mut parsed = parse_output_by(&response.text, self.options, |json| {
                self.read_value(json, &cx)
            });
            if let Some(json) = &parsed.json {
                let mut off = match &grounds {
                    Some(grounds) => check_reply(spec, json, &response.text, grounds),
                    None => Violations::new(),
                };
                off.0.extend(self.check_shown_text(json, &shown).0);
                if !off.is_empty() {
                    parsed.value = None;
                    parsed.violations.0.extend(off.0);
                }
            }
            let valid = parsed.value.is_some();
            attempt.raw = Some(response.text.clone());
            attempt.reasoning = parsed
                .reasoning
                .clone()
                .or_else(|| response.reasoning.clone());
            attempt.level = Some(parsed.level);
            attempt.json = parsed.json.clone();
            attempt.violations = parsed.violations.clone();
            attempt.repairs = parsed.repairs.clone();
            attempt.finish_reason = response.finish_reason;
            if attempt.prompt_tokens.is_none() {
                attempt.prompt_tokens = response.prompt_tokens.map(|n| n as usize);
            }
            attempt.completion_tokens = response.completion_tokens;
            attempt.forward_calls = response.forward_calls;

            out.value = parsed.value;
            out.level = parsed.level;
            out.json = parsed.json;
            out.violations = parsed.violations;
            out.repairs = parsed.repairs;
            out.reasoning = attempt.reasoning.clone();
            out.error = None;
            finish_attempt(&mut out, attempt, t0);
            if valid {
                break;
            }
            feedback.push(Message::assistant(response.text));
            feedback.push(Message::user(feedback_message(&out.violations)));
        }

        out.timings.total_ms = ms(started);
        out
    }
}

impl Attempt {
    fn empty() -> Attempt {
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
    fn empty(spec: &ContractSpec) -> Extraction<C> {
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

/// `constraint` decoding with its grammar's groundings removed.
fn ungrounded(constraint: &Constraint) -> Constraint {
    let decoding = constraint
        .grammar()
        .map(|g| Decoding::Grammar(Arc::new(Grammar::clone(g).without_grounding())));
    match decoding {
        Some(d) => constraint.with_decoding(Some(d)),
        None => constraint.clone(),
    }
}

/// A group's state while its evidence is tried.
struct GroupState {
    /// The next rank to try.
    next: usize,
    /// Whether the group waits for a try.
    pending: bool,
    /// The accepted values.
    value: Option<Map<String, Value>>,
    level: Level,
    outcome: Outcome,
    tries: Vec<Vec<[usize; 2]>>,
}

impl<C, B: Backend> Extractor<C, B> {
    /// The groups' plans, built on first use.
    fn plans(&self) -> &[GroupPlan] {
        self.plans.get_or_init(|| {
            let spec: &ContractSpec = &self.spec;
            field_groups(spec, &self.selection.questions)
                .into_iter()
                .map(|group| {
                    let names: Vec<&str> = group.fields.iter().map(String::as_str).collect();
                    let part = spec.subset(&names);
                    let mut constraint = Constraint::for_spec(&part);
                    if !self.grounding {
                        constraint = ungrounded(&constraint);
                    }
                    let mut parts = PromptParts::for_spec(&part, Instructions::SignatureAndFields);
                    if let Some(think) = self.think {
                        parts = parts.with_think(think);
                    }
                    GroupPlan {
                        group,
                        spec: part,
                        constraint: Arc::new(constraint.with_think(self.think)),
                        parts,
                    }
                })
                .collect()
        })
    }

    /// The passages of rank `r` onwards a try shows: one passage, or for a list group its
    /// stated passages (above the margin), at most `list_passages` of them, in document order.
    fn try_passages<'p>(
        &self,
        group: &FieldGroup,
        ranked: &Ranked,
        passages: &'p [Passage],
        r: usize,
    ) -> Vec<&'p Passage> {
        if group.list {
            let n = self.selection.list_passages;
            let stated: Vec<usize> = ranked
                .order
                .iter()
                .copied()
                .filter(|p| {
                    ranked
                        .margins
                        .get(p)
                        .is_some_and(|m| *m > self.selection.floor(ranked.judge))
                })
                .collect();
            let mut chunk: Vec<usize> = stated.iter().copied().skip(r * n).take(n).collect();
            chunk.sort_unstable();
            chunk.iter().filter_map(|&p| passages.get(p)).collect()
        } else {
            // An optional group tries only passages judged to state it.
            ranked
                .order
                .get(r)
                .filter(|p| {
                    !group.optional
                        || ranked
                            .margins
                            .get(p)
                            .is_some_and(|m| *m > self.selection.floor(ranked.judge))
                })
                .and_then(|&p| passages.get(p))
                .into_iter()
                .collect()
        }
    }

    /// Whether rank `r` of a group has a try: a value of its own ([`Ranked::direct`]) or
    /// passages to show.
    fn has_try(&self, group: &FieldGroup, ranked: &Ranked, passages: &[Passage], r: usize) -> bool {
        if ranked.direct.is_empty() {
            !self.try_passages(group, ranked, passages, r).is_empty()
        } else {
            self.direct_value(group, ranked, r).is_some()
        }
    }

    /// The value of rank `r` of a group filled by its values alone (an optional group only
    /// while the value is more likely than `null` by the margin).
    fn direct_value(
        &self,
        group: &FieldGroup,
        ranked: &Ranked,
        r: usize,
    ) -> Option<(Map<String, Value>, Vec<usize>)> {
        let (map, margin, lines) = ranked.direct.get(r)?;
        (!group.optional || *margin > self.selection.floor(ranked.judge))
            .then(|| (map.clone(), lines.clone()))
    }

    /// A try of a group filled by a value the judge scored best ([`Judge::Values`]): no
    /// generation; the value is checked as a reply would be, against the whole document.
    fn try_value(
        &self,
        plan: &GroupPlan,
        map: Map<String, Value>,
        lines: Vec<usize>,
        source: &Source,
    ) -> GroupTry {
        let t0 = Instant::now();
        let json = Value::Object(map);
        let raw = json.to_string();
        let mut violations = Violations::new();
        check_value(&plan.spec, &json, "", &mut violations);
        if self.grounding {
            violations
                .0
                .extend(check_reply(&plan.spec, &json, &raw, &Grounds::new(source)).0);
        }
        let value = match &json {
            Value::Object(map) if violations.is_empty() => Some(map.clone()),
            _ => None,
        };
        let mut attempt = Attempt::empty();
        attempt.raw = Some(raw);
        attempt.level = Some(Level::Strict);
        attempt.json = Some(json);
        attempt.violations = violations;
        attempt.group = Some(plan.group.name.clone());
        attempt.lines = lines.iter().map(|&l| [l, l]).collect();
        attempt.forward_calls = Some(0);
        attempt.ms = ms(t0);
        GroupTry {
            attempts: vec![attempt],
            value,
            level: Level::Strict,
            backend_error: false,
        }
    }

    /// One try of one group: the passages shown alone, the group's part of the contract asked
    /// for under a mask grounded in them, the reply read and checked against them; a refused
    /// reply is fed back on the same passage up to [`Extractor::max_attempts`] attempts (a
    /// server without a mask can copy a value wrong).
    async fn try_group(&self, plan: &GroupPlan, shown: &[&Passage], source: &Source) -> GroupTry {
        let mut tried = self
            .try_shown(
                &plan.spec,
                &plan.constraint,
                &plan.parts,
                &select::shown(shown),
                source,
            )
            .await;
        for attempt in &mut tried.attempts {
            attempt.group = Some(plan.group.name.clone());
        }
        tried
    }

    /// One try of the part `spec` of the contract over the parts `keep` of `source` (as
    /// [`Source::excerpt`] takes them) shown alone: asked for under a mask grounded in them, the
    /// reply read and checked against them, a refused reply fed back up to
    /// [`Extractor::max_attempts`] attempts while the prompt with the feedback fits the budget.
    async fn try_shown(
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
    fn fits_budget(&self, messages: &Messages) -> bool {
        let Some((tok, budget)) = &self.budget else {
            return true;
        };
        let contents: Vec<&str> = messages.0.iter().map(|m| m.content.as_str()).collect();
        budget.tokens(&contents, tok.as_ref()) <= budget.max_tokens
    }

    /// A document longer than the budget read in chunks ([`crate::chunk`]): each chunk asked
    /// for the whole contract under a mask grounded in it alone (a local backend decodes
    /// several at once), the replies merged, the merged value read and checked against the
    /// document. `None` when the document has no chunk to read (only blank lines): the
    /// caller cuts it instead.
    async fn extract_chunked(
        &self,
        document: &str,
        source: &Source,
        tok: &(dyn Tokenizer + Send + Sync),
        budget: Budget,
        overlap_lines: usize,
        sink: Option<&Sink<'_>>,
    ) -> Option<Extraction<C>> {
        /// Chunks decoded at once.
        const AT_ONCE: usize = 8;
        let spec: &ContractSpec = &self.spec;
        let mut out = Extraction::empty(spec);
        let doc = Source::from_text(document).with_numerals(source.numerals());
        // With retries, a quarter of the budget is left for a retry's reply and feedback.
        let planned = if self.max_attempts > 1 {
            Budget {
                max_tokens: budget.max_tokens - budget.max_tokens / 4,
                ..budget
            }
        } else {
            budget
        };
        let chunks: Vec<Chunk> = match plan_chunks(&self.parts, &doc, planned, tok, overlap_lines) {
            Ok(c) => c,
            Err(error) => {
                let mut attempt = Attempt::empty();
                attempt.error = Some(AttemptError::Budget { error });
                out.error = attempt.error.clone();
                out.attempts.push(attempt);
                return Some(out);
            }
        };
        if chunks.is_empty() {
            return None;
        }
        let keeps: Vec<[_; 1]> = chunks.iter().map(|c| [c.keep()]).collect();
        // In waves (a local backend decodes a wave as one batch); a sliding window over a
        // stream would be tighter, but its future is not `Send` (a higher-ranked closure).
        let mut tries: Vec<GroupTry> = Vec::with_capacity(chunks.len());
        for wave in keeps.chunks(AT_ONCE) {
            let results = futures_util::future::join_all(
                wave.iter()
                    .map(|keep| self.try_shown(spec, &self.constraint, &self.parts, keep, &doc)),
            )
            .await;
            tries.extend(results);
        }
        let values: Vec<Option<Map<String, Value>>> =
            tries.iter().map(|t| t.value.clone()).collect();
        let (merged, lists, conflicts) = merge_chunks(spec, &doc, &chunks, &values);
        let mut parts = Vec::with_capacity(chunks.len());
        let mut backend_failed = None;
        let mut unanswered: Option<AttemptError> = None;
        let mut level = Level::Strict;
        for (chunk, tried) in chunks.iter().zip(tries) {
            parts.push(ChunkPart {
                lines: chunk.first_last(),
                chars: chunk.chars.clone().map(|c| [c.start, c.end]),
                filled: tried.value.is_some(),
                attempts: tried.attempts.len(),
            });
            if tried.value.is_some() {
                level = level.max(tried.level);
            }
            // A chunk the backend did not answer (its last attempt an error, no value) is text
            // nobody read: the extraction is an error, as a group the backend did not answer
            // is under selection, not a value whose fields from that chunk look unstated.
            if tried.value.is_none() {
                if let Some(e) = tried.attempts.last().and_then(|a| a.error.clone()) {
                    unanswered.get_or_insert(e);
                }
            }
            for attempt in tried.attempts {
                if let Some(e) = &attempt.error {
                    backend_failed = Some(e.clone());
                }
                if out.prompt_tokens.is_none() {
                    out.prompt_tokens = attempt.prompt_tokens;
                }
                out.timings.attempts_ms.push(attempt.ms);
                out.attempts.push(attempt);
            }
        }
        let filled = parts.iter().filter(|p| p.filled).count();
        out.level = if filled == 0 || unanswered.is_some() {
            Level::Invalid
        } else {
            level
        };
        if let (Some(error), true) = (unanswered, filled > 0) {
            // What the other chunks gave is kept for inspection, not as the value.
            out.error = Some(error);
            out.json = Some(merged);
        } else if filled == 0 {
            out.error = backend_failed;
            out.violations = out
                .attempts
                .last()
                .map(|a| a.violations.clone())
                .unwrap_or_default();
        } else {
            let cx = DocContext::of(source).adjusted(self.adjust.clone());
            let mut violations = Violations::new();
            if self.grounding && has_grounding(spec) {
                let raw = merged.to_string();
                violations
                    .0
                    .extend(check_reply(spec, &merged, &raw, &Grounds::new(&doc)).0);
            }
            match self.read_value(&merged, &cx) {
                Ok(value) if violations.is_empty() => {
                    out.value = Some(value);
                    if let (Some(sink), Value::Object(map)) = (sink, &merged) {
                        for (name, value) in map {
                            emit_field(sink, spec, name, value.clone(), out.attempts.len(), None);
                        }
                    }
                }
                Ok(_) => {}
                Err(v) => violations.0.extend(v.0),
            }
            out.violations = violations;
            out.json = Some(merged);
        }
        out.repairs = accepted_repairs(&out.attempts);
        out.chunks = Some(ChunkRecord {
            overlap_lines,
            chunks: parts,
            lists,
            conflicts,
        });
        Some(out)
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

    /// The extraction with evidence selection ([`select`]); `Err` with the reason when it
    /// cannot run (the backend does not score answers, the document has no passage), and the
    /// caller reads the whole document instead.
    async fn extract_selected(
        &self,
        source: &Source,
        started: Instant,
        sink: Option<&Sink<'_>>,
    ) -> Result<Extraction<C>, String> {
        let spec: &ContractSpec = &self.spec;
        let plans = self.plans();
        let groups: Vec<FieldGroup> = plans.iter().map(|p| p.group.clone()).collect();
        if groups.is_empty() {
            return Err("the contract has no fields to select evidence for".into());
        }
        let passages = self.selection.cut(source);
        if passages.is_empty() {
            return Err("the document has no passage".into());
        }
        // Groups whose values can be enumerated are judged by their values over the whole
        // document; the others by a question about each passage.
        let shown_whole = self.selection.judge == Judge::Values
            && source.char_count() <= self.selection.max_shown_chars;
        // Under a budget, only a document whose whole prompt fits it is shown whole.
        let fits_whole = |parts: &PromptParts| {
            self.budget.is_none() || self.fits_budget(&parts.messages_for_excerpt(source))
        };
        let candidates: Vec<Option<ValueCandidates>> = plans
            .iter()
            .map(|plan| {
                (shown_whole && fits_whole(&plan.parts))
                    .then(|| {
                        value_candidates(
                            &plan.spec,
                            &plan.group,
                            source,
                            self.selection.max_value_line_chars,
                            self.selection.max_values,
                        )
                    })
                    .flatten()
            })
            .collect();
        let asked: Vec<usize> = (0..groups.len())
            .filter(|&g| candidates[g].is_none())
            .collect();
        let asked_groups: Vec<FieldGroup> = asked.iter().map(|&g| groups[g].clone()).collect();
        let mut plan = judge_plan(&asked_groups, &passages, self.selection.max_judged);
        let request = std::mem::take(&mut plan.request);
        let t0 = Instant::now();
        let score = |request: ScoreRequest| async move {
            if request.prompts.is_empty() {
                return Ok(ScoreResponse {
                    logprobs: Vec::new(),
                    exact: true,
                    forward_calls: Some(0),
                });
            }
            self.backend.score(&request).await.map_err(|e| match e {
                BackendError::Unsupported { message } => message,
                other => format!("judging the passages failed: {other}"),
            })
        };
        let scored = score(request).await?;
        let mut forward_calls = scored.forward_calls;
        let mut judged_prompts = plan.owners.len();
        let asked_ranked = rank(&plan, &scored, self.selection.lexical_weight)?;
        let mut ranked: Vec<Option<Ranked>> = vec![None; groups.len()];
        for (&g, r) in asked.iter().zip(asked_ranked) {
            ranked[g] = Some(r);
        }
        for (g, c) in candidates.iter().enumerate() {
            let Some(c) = c else { continue };
            let request = c.request(self.selection.value_prompt, &plans[g].parts, source);
            let response = score(request).await?;
            judged_prompts += 1;
            forward_calls = match (forward_calls, response.forward_calls) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            let logprobs = response
                .logprobs
                .first()
                .ok_or_else(|| "the backend scored no prompt for the values".to_owned())?;
            ranked[g] = Some(c.rank(&passages, logprobs));
        }
        let judge_ms = ms(t0);
        let ranked: Vec<Ranked> = ranked.into_iter().flatten().collect();
        if ranked.len() != groups.len() {
            return Err("a group was not judged".into());
        }
        let mut states: Vec<GroupState> = groups
            .iter()
            .zip(&ranked)
            .map(|(g, r)| {
                let best = r.order.first().and_then(|p| r.margins.get(p)).copied();
                let (pending, outcome) = match best {
                    None => (false, Outcome::NoCandidate),
                    Some(m) if g.optional && m <= self.selection.floor(r.judge) => {
                        (false, Outcome::NotStated)
                    }
                    Some(_) => (true, Outcome::Filled),
                };
                GroupState {
                    next: 0,
                    pending,
                    value: None,
                    level: Level::Strict,
                    outcome,
                    tries: Vec::new(),
                }
            })
            .collect();

        let mut out = Extraction::empty(spec);
        out.prompt_tokens = None;
        let cx = DocContext::of(source).adjusted(self.adjust.clone());
        let tries = self.selection.tries;
        let mut backend_failed: Option<AttemptError> = None;
        loop {
            // Every pending group's next try, together (a local backend decodes them as one
            // batch).
            let pending: Vec<(usize, Vec<&Passage>)> = states
                .iter()
                .enumerate()
                .filter(|(_, s)| s.pending)
                .map(|(g, s)| {
                    (
                        g,
                        self.try_passages(&groups[g], &ranked[g], &passages, s.next),
                    )
                })
                .collect();
            if !pending.is_empty() {
                let results =
                    futures_util::future::join_all(pending.iter().map(|(g, shown)| async {
                        match self.direct_value(&groups[*g], &ranked[*g], states[*g].next) {
                            Some((map, lines)) => self.try_value(&plans[*g], map, lines, source),
                            None => self.try_group(&plans[*g], shown, source).await,
                        }
                    }))
                    .await;
                for ((g, shown), result) in pending.iter().zip(results) {
                    let state = &mut states[*g];
                    state.tries.push(
                        result
                            .attempts
                            .first()
                            .map(|a| a.lines.clone())
                            .unwrap_or_default(),
                    );
                    for attempt in result.attempts {
                        if out.prompt_tokens.is_none() {
                            out.prompt_tokens = attempt.prompt_tokens;
                        }
                        out.timings.attempts_ms.push(attempt.ms);
                        if let Some(e) = &attempt.error {
                            backend_failed = Some(e.clone());
                        }
                        out.attempts.push(attempt);
                    }
                    state.next += 1;
                    let more = state.next < tries
                        && self.has_try(&groups[*g], &ranked[*g], &passages, state.next)
                        && !result.backend_error;
                    match result.value {
                        Some(v) => {
                            if let Some(sink) = sink {
                                emit_group(sink, spec, &groups[*g], &v, out.attempts.len());
                            }
                            state.value = Some(v);
                            state.level = result.level;
                            state.pending = false;
                            state.outcome = Outcome::Filled;
                        }
                        None if more => state.pending = true,
                        None => {
                            state.pending = false;
                            state.value = None;
                            state.outcome = if groups[*g].optional && !result.backend_error {
                                Outcome::Refused
                            } else {
                                Outcome::Failed
                            };
                        }
                    }
                    let _ = shown;
                }
                if states.iter().any(|s| s.pending) {
                    continue;
                }
            }
            // Every group settled: the whole contract read back, normalised and checked
            // against the document.
            let values: Vec<Option<Map<String, Value>>> =
                states.iter().map(|s| s.value.clone()).collect();
            let merged = select::merge(spec, &values, &groups);
            match self.read_value(&merged, &cx) {
                Ok(value) => {
                    out.value = Some(value);
                    out.violations = Violations::new();
                    out.json = Some(merged);
                    break;
                }
                Err(violations) => {
                    // The groups the violations belong to try their next passage.
                    let mut moved = false;
                    let mut blamed: Vec<usize> = violations
                        .iter()
                        .filter_map(|v| group_of_path(&groups, &v.path))
                        .collect();
                    if blamed.is_empty() {
                        // A violation of the whole object: every filled group is a suspect.
                        blamed = (0..groups.len())
                            .filter(|&g| states[g].value.is_some())
                            .collect();
                    }
                    blamed.sort_unstable();
                    blamed.dedup();
                    for g in blamed {
                        let state = &mut states[g];
                        if state.value.is_none() {
                            continue;
                        }
                        let more = state.next < tries
                            && self.has_try(&groups[g], &ranked[g], &passages, state.next);
                        if let Some(last) = out
                            .attempts
                            .iter_mut()
                            .rev()
                            .find(|a| a.group.as_deref() == Some(groups[g].name.as_str()))
                        {
                            last.violations.0.extend(
                                violations
                                    .iter()
                                    .filter(|v| group_of_path(&groups, &v.path) == Some(g))
                                    .cloned(),
                            );
                        }
                        if more {
                            state.value = None;
                            state.pending = true;
                            moved = true;
                        } else if groups[g].optional {
                            state.value = None;
                            state.outcome = Outcome::Refused;
                            moved = true;
                            if let Some(sink) = sink {
                                emit_group(sink, spec, &groups[g], &Map::new(), out.attempts.len());
                            }
                        }
                    }
                    if !moved {
                        out.violations = violations;
                        out.json = Some(merged);
                        break;
                    }
                }
            }
        }
        out.level = states
            .iter()
            .filter(|s| s.value.is_some())
            .map(|s| s.level)
            .max()
            .unwrap_or(Level::Strict);
        if let Some(error) = backend_failed {
            // A group the backend did not answer is not a value the document leaves out: no
            // value, the backend's error (the record keeps what the other groups gave).
            out.value = None;
            out.error = Some(error);
        }
        out.repairs = accepted_repairs(&out.attempts);
        out.selection = Some(SelectionRecord {
            passages: passages.len(),
            judged: judged_prompts,
            judge_forward_calls: forward_calls,
            judge_ms,
            groups: groups
                .iter()
                .zip(&ranked)
                .zip(&states)
                .enumerate()
                .map(|(i, ((g, r), s))| GroupRecord {
                    group: g.name.clone(),
                    fields: g.fields.clone(),
                    question: match (&candidates[i], self.selection.value_prompt) {
                        (Some(c), ValuePrompt::Question) if r.judge == Judge::Values => {
                            format!("what is {}?", c.clause)
                        }
                        (Some(c), ValuePrompt::Auto) if r.judge == Judge::Values && c.numbers => {
                            format!("what is {}?", c.clause)
                        }
                        _ => g.question.clone(),
                    },
                    judge: r.judge,
                    candidates: r.candidates,
                    judged: r.margins.len(),
                    best: r
                        .order
                        .iter()
                        .take(5)
                        .filter_map(|&p| {
                            let passage = passages.get(p)?;
                            Some(RankedPassage {
                                lines: [
                                    passage.lines.start,
                                    passage.lines.end.saturating_sub(1).max(passage.lines.start),
                                ],
                                margin: *r.margins.get(&p)?,
                            })
                        })
                        .collect(),
                    tries: s.tries.clone(),
                    outcome: s.outcome,
                })
                .collect(),
        });
        out.timings.total_ms = ms(started);
        Ok(out)
    }
}

/// Emits a settled group's fields (`null` for a field the value lacks), a list field's items
/// before the list.
fn emit_group(
    sink: &Sink<'_>,
    spec: &ContractSpec,
    group: &FieldGroup,
    value: &Map<String, Value>,
    attempt: usize,
) {
    for name in &group.fields {
        emit_field(
            sink,
            spec,
            name,
            value.get(name).cloned().unwrap_or(Value::Null),
            attempt,
            Some(group.name.clone()),
        );
    }
}

/// The repairs of the attempts whose replies were accepted (no violation).
fn accepted_repairs(attempts: &[Attempt]) -> Vec<Repair> {
    attempts
        .iter()
        .filter(|a| a.violations.is_empty())
        .flat_map(|a| a.repairs.iter().cloned())
        .collect()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

fn finish_attempt<C>(out: &mut Extraction<C>, mut attempt: Attempt, t0: Instant) {
    attempt.ms = ms(t0);
    if out.attempts.is_empty() {
        out.prompt_tokens = attempt.prompt_tokens;
    }
    out.dropped_tokens = attempt.dropped_tokens;
    out.dropped_lines = attempt.dropped_lines;
    out.timings.attempts_ms.push(attempt.ms);
    out.attempts.push(attempt);
}
