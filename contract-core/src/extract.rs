//! The extraction loop: prompt, budget, backend, ladder, retry with feedback, and the audit
//! record.
//!
//! [`Extractor::extract`] always returns an [`Extraction`], never an error: a backend failure or
//! a document whose fixed prompt parts do not fit is recorded in [`Extraction::error`], so a batch
//! never loses a document.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::constraint::{Constraint, Decoding};
use crate::contract::Contract;
use crate::ground::{check_reply, has_grounding, Grounds};
use crate::parse::{parse_output_with, Level, ParseOptions, Repair};
use crate::prompt::{
    feedback_message, Budget, BudgetError, Message, Messages, PromptParts, Tokenizer,
};
use crate::source::Source;
use crate::validate::Violations;

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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        self.score_boxed(req).await
    }
}

impl Backend for Box<dyn DynBackend> {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        (**self).complete_boxed(req).await
    }

    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        (**self).score_boxed(req).await
    }
}

impl Backend for Arc<dyn DynBackend> {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        (**self).complete_boxed(req).await
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
    max_attempts: usize,
    budget: Option<(Arc<dyn Tokenizer + Send + Sync>, Budget)>,
    max_tokens: Option<u32>,
    sampling: Sampling,
    options: ParseOptions,
    parts: PromptParts,
    constraint: Arc<Constraint>,
    _contract: PhantomData<fn() -> C>,
}

impl<C: Contract, B: Backend> Extractor<C, B> {
    /// An extractor with the default prompt, 2 attempts and no budget.
    pub fn new(backend: B) -> Self {
        Extractor {
            backend,
            max_attempts: 2,
            budget: None,
            max_tokens: None,
            sampling: Sampling::default(),
            options: ParseOptions::default(),
            parts: PromptParts::for_contract::<C>(),
            constraint: Constraint::of::<C>(),
            _contract: PhantomData,
        }
    }

    /// At most `n` attempts (at least 1): the first, then retries with feedback.
    pub fn max_attempts(mut self, n: usize) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Fits every prompt into `budget` tokens of `tokenizer`; only the document is cut.
    pub fn budget(mut self, tokenizer: Arc<dyn Tokenizer + Send + Sync>, budget: Budget) -> Self {
        self.budget = Some((tokenizer, budget));
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
        self
    }

    /// Replaces the instructions (the system message; by default
    /// [`system_message`](crate::prompt::system_message)). The document and the final question
    /// still go in the user message.
    pub fn instructions(mut self, system: impl Into<String>) -> Self {
        self.parts = self.parts.with_system(system);
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
        let started = Instant::now();
        let spec = C::contract_spec();
        let grounded = has_grounding(spec);
        let grounds = grounded.then(|| Grounds::new(&source));

        let mut out = Extraction {
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
        };
        let mut feedback: Vec<Message> = Vec::new();

        for _ in 0..self.max_attempts {
            let t0 = Instant::now();
            let mut attempt = Attempt {
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
            };

            let messages = match &self.budget {
                None => {
                    let mut m = self.parts.messages(document);
                    m.0.extend(feedback.iter().cloned());
                    Ok(m)
                }
                Some((tok, budget)) => self
                    .parts
                    .fit_messages(document, &feedback, *budget, tok.as_ref())
                    .map(|f| {
                        attempt.prompt_tokens = Some(f.prompt_tokens);
                        attempt.dropped_tokens = f.dropped_tokens;
                        attempt.dropped_lines = f.dropped_lines;
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
                source: Some(source.clone()),
            };
            let response = match self.backend.complete(&request).await {
                Ok(r) => r,
                Err(error) => {
                    attempt.error = Some(AttemptError::Backend { error });
                    out.error = attempt.error.clone();
                    finish_attempt(&mut out, attempt, t0);
                    break;
                }
            };

            let mut parsed = parse_output_with::<C>(&response.text, self.options);
            if let (Some(grounds), Some(json)) = (&grounds, &parsed.json) {
                let off = check_reply(spec, json, &response.text, grounds);
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
