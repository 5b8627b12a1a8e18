//! What a backend is: the [`Backend`] trait and its object-safe form [`DynBackend`], the
//! [`Request`] it answers with a [`Response`], the [`ScoreRequest`] it answers with a
//! [`ScoreResponse`], and the [`BackendError`] it fails with.

use std::future::Future;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::constraint::Constraint;
use crate::prompt::Messages;
use crate::source::Source;

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
