//! OpenAI and OpenAI-compatible servers (vLLM, llama.cpp, ...) over HTTP (feature `openai`).
//!
//! [`OpenAiBackend`] sends each [`Request`] to `POST {base}/chat/completions` in one of four
//! [`Mode`]s, the reliability ladder of a remote API, best first:
//!
//! | mode | what the server is told | what enforces the contract |
//! | --- | --- | --- |
//! | [`Mode::StructuredOutputs`] | `response_format: {type: json_schema, json_schema: {strict: true, schema}}` with the contract's [`strict_schema`](contract_core::Contract::strict_schema) | the server's constrained decoder, then validation |
//! | [`Mode::VllmGuidedJson`] | `guided_json: schema` (vLLM's extra body field); for a grounded contract, the schema with every value grounded in the document that a schema can say ([`Grammar::static_grounded_schema`](contract_core::grammar::Grammar::static_grounded_schema): numbers as the `enum` of the document's numbers, whole lines as the `enum` of its lines) | the server's constrained decoder, then validation against the document |
//! | [`Mode::VllmGuidedGrammar`] | `guided_grammar: lark` (vLLM with its llguidance backend): the contract's grammar with every value grounded in the document that can be without the decoded values ([`Grammar::static_grounded_lark`](contract_core::grammar::Grammar::static_grounded_lark)) | the server's constrained decoder, then validation against the document |
//! | [`Mode::JsonObjectSchema`] | `response_format: {type: json_object, schema}` (llama-cpp-python's server), the schema grounded as for `guided_json` | the server's grammar, then validation against the document |
//! | [`Mode::JsonMode`] | `response_format: {type: json_object}` | syntax only, then validation |
//! | [`Mode::PromptOnly`] | nothing: the signature in the system message | validation only |
//!
//! The system message always carries the contract's one-line signature (see
//! [`contract_core::prompt`]), so every mode asks for the same object; the modes differ only in
//! what the server enforces.
//!
//! # Replies
//!
//! The message `content` becomes [`Response::text`] unchanged: a `<think>` trace in it is split
//! off by the extractor's output ladder ([`contract_core::parse`]) and kept in the record. A trace
//! the server returns in a separate field (`reasoning_content` from vLLM and DeepSeek, or
//! `reasoning`) becomes [`Response::reasoning`]. `finish_reason: "length"` becomes
//! [`FinishReason::Length`]; a refusal (`message.refusal`) is an error whose message starts with
//! [`REFUSAL_PREFIX`], never retried.
//!
//! [`FinishReason::Length`]: contract_core::extract::FinishReason::Length
//!
//! # Streaming
//!
//! [`Backend::complete_streaming`] (what [`Extractor::stream`](contract_core::Extractor::stream)
//! calls) sends the same body with `stream: true` and `stream_options: {include_usage: true}`
//! ([`OpenAiBuilder::stream_usage`]), and reads the server-sent events (`data: {chunk}` lines,
//! ended by `data: [DONE]`; the SSE framing is `eventsource-stream`'s, so chunks cut anywhere,
//! comments, keep-alives and empty events read as the unbroken stream). Each
//! `choices[0].delta.content` piece is handed on as it arrives; `delta.reasoning_content` (or
//! `delta.reasoning`), `finish_reason` and the final `usage` chunk make the same [`Response`]
//! the reply would have been unstreamed. A stream that ends before `[DONE]` (a dropped
//! connection), or a chunk that is an `error` object, is an error, never a shorter reply: retried
//! like any transient failure while nothing was handed on, and final once a piece was (the caller
//! has read it as the start of the reply), its message saying how much. A server that ignores
//! `stream` and answers one completion is read as one, its text handed on whole. Dropping the
//! future closes the connection, which is how a server learns to stop generating.
//!
//! # Faults and retries
//!
//! Each HTTP attempt has its own timeout ([`OpenAiBuilder::timeout`]). Transient failures are
//! retried at most [`RetryPolicy::max_retries`] times with exponential backoff and jitter:
//!
//! | failure | error kind | retried |
//! | --- | --- | --- |
//! | 429 | `rate_limited` (after honouring `Retry-After` / `retry-after-ms`) | yes; not `insufficient_quota` (`unavailable`) |
//! | 5xx, 408, 409, 425 | `unavailable` | yes |
//! | no reply in time | `timeout` | yes |
//! | connection refused, reset or closed | `unavailable` | yes |
//! | truncated body, non-JSON body, reply without choices | `protocol` | yes |
//! | 400 naming the context length | `context_length` | no |
//! | other 4xx | `invalid_request` (401, 403, 404: `unavailable`) | no |
//! | refusal | `other` | no |
//!
//! Errors that carry a message end with the number of attempts made (`after 4 attempts`);
//! `timeout` and `rate_limited` carry it as `attempts`, with `elapsed_ms` from the start of the
//! first attempt to the error, waits included (`rate limited, 5 attempts over 3250 ms`).
//!
//! # Why not async-openai's `Client`
//!
//! The request body is built from async-openai's typed
//! [`CreateChatCompletionRequest`], and
//! the base URL, API key and headers come from its
//! [`OpenAIConfig`]. The request itself is sent with
//! reqwest, because async-openai's `Client` retries 429s and 5xx on its own (three times, without
//! jitter, `Retry-After` in seconds only), which would multiply with the bounded retries here,
//! and its errors drop the response headers (`Retry-After`) and the status of non-JSON error
//! bodies, which the fault mapping above needs. Replies are read leniently (servers differ in
//! which fields they send) rather than into async-openai's response type.
//!
//! The body is built in `request`, a reply read in `reply`, a stream in `stream`; this module
//! holds the modes, the builder, and the sending with retries.

mod client;
mod reply;
mod request;
mod stream;

use std::time::Duration;

use async_openai::config::Config;
/// async-openai's client configuration, for [`OpenAiBuilder::config`].
pub use async_openai::config::OpenAIConfig;
use async_openai::types::chat::CreateChatCompletionRequest;
use contract_core::extract::{
    Backend, BackendError, Request, Response, ScoreRequest, ScoreResponse,
};
use reqwest::header::AUTHORIZATION;

use crate::http::{chain, post_json, transport_failure, with_retries, Failure, Relay};
pub use crate::http::{parse_retry_after, RetryPolicy, REFUSAL_PREFIX};
pub use client::{MaxTokensField, Mode, OpenAiBackend};
use reply::{parse_reply, parse_top_logprobs, parse_top_logprobs_to_score, TopList};
use request::chat_messages;

/// The API's default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Environment variable with the API key (read when none is given).
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";
/// Environment variable with the base URL (read when none is given).
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// Builds an [`OpenAiBackend`].
#[derive(Debug, Clone)]
pub struct OpenAiBuilder {
    model: String,
    base_url: Option<String>,
    api_key: Option<String>,
    config: Option<OpenAIConfig>,
    mode: Mode,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    max_tokens_field: MaxTokensField,
    score_concurrency: usize,
    stream_usage: bool,
}

impl OpenAiBuilder {
    /// The base URL (`http://127.0.0.1:8000/v1`); default: `OPENAI_BASE_URL`, else
    /// [`DEFAULT_BASE_URL`].
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The API key; default: `OPENAI_API_KEY`, else none (no `Authorization` header, as local
    /// servers expect).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// An async-openai configuration (organisation, project, custom headers, its own base URL
    /// and key, which the environment then does not override); `base_url` and `api_key` given
    /// to this builder override its own.
    pub fn config(mut self, config: OpenAIConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// What the server is asked to enforce (default [`Mode::StructuredOutputs`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    crate::http::http_builder_methods!();

    /// Which body field carries the token limit (default `max_tokens`).
    pub fn max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
    }

    /// Whether a streamed request asks for the token counts (`stream_options: {include_usage:
    /// true}`, default true); turn it off for a server that refuses `stream_options`.
    pub fn stream_usage(mut self, on: bool) -> Self {
        self.stream_usage = on;
        self
    }

    /// Most requests [`Backend::score`] has in flight at once, one per prompt (default 8; 0
    /// counts as 1).
    pub fn score_concurrency(mut self, n: usize) -> Self {
        self.score_concurrency = n.max(1);
        self
    }

    /// The backend; fails only when the HTTP client cannot be built (TLS setup).
    pub fn build(self) -> Result<OpenAiBackend, BackendError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        // A given configuration keeps its own base URL and key; the environment fills in only
        // for the default one.
        let (mut config, env_url, env_key) = match self.config {
            Some(c) => (c, None, None),
            None => (OpenAIConfig::default(), env(BASE_URL_ENV), env(API_KEY_ENV)),
        };
        let base_url = self
            .base_url
            .or(env_url)
            .unwrap_or_else(|| config.api_base().to_owned());
        let base_url = if base_url.trim().is_empty() {
            DEFAULT_BASE_URL.to_owned()
        } else {
            base_url.trim().trim_end_matches('/').to_owned()
        };
        config = config.with_api_base(base_url.clone());
        if let Some(key) = self.api_key.or(env_key) {
            config = config.with_api_key(key);
        }
        let mut headers = config.headers();
        if headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == "Bearer")
        {
            headers.remove(AUTHORIZATION);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .build()
            .map_err(|e| BackendError::Unavailable {
                message: format!("cannot build the HTTP client: {}", chain(&e)),
            })?;
        Ok(OpenAiBackend {
            url: config.url("/chat/completions"),
            query: config
                .query()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            http,
            headers,
            base_url,
            model: self.model,
            mode: self.mode,
            timeout: self.timeout,
            retry: self.retry,
            max_tokens_field: self.max_tokens_field,
            score_concurrency: self.score_concurrency,
            stream_usage: self.stream_usage,
        })
    }
}

impl OpenAiBackend {
    /// A builder for `model` with the defaults (structured outputs, 120 s timeout, 4 retries).
    pub fn builder(model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            model: model.into(),
            base_url: None,
            api_key: None,
            config: None,
            mode: Mode::default(),
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            max_tokens_field: MaxTokensField::default(),
            score_concurrency: 8,
            stream_usage: true,
        }
    }

    /// A backend for `model` with the defaults and the base URL and key from the environment.
    pub fn new(model: impl Into<String>) -> Result<Self, BackendError> {
        Self::builder(model).build()
    }

    /// The model name sent with each request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    async fn attempt<T>(
        &self,
        body: &[u8],
        parse: fn(&[u8]) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let request = self
            .http
            .post(&self.url)
            .query(&self.query)
            .headers(self.headers.clone())
            .body(body.to_vec());
        let reply = post_json(request, self.timeout, &self.url).await?;
        let bytes = reply
            .bytes()
            .await
            .map_err(|e| transport_failure(&e, self.timeout, &self.url))?;
        parse(&bytes)
    }

    /// Sends `body`, retrying transient failures per the [`RetryPolicy`], and reads the reply
    /// with `parse`.
    async fn send<T>(
        &self,
        body: &[u8],
        parse: fn(&[u8]) -> Result<T, Failure>,
    ) -> Result<T, BackendError> {
        with_retries(&self.retry, || self.attempt(body, parse)).await
    }

    /// The `top` most likely first tokens of the reply to `messages`, with their natural-log
    /// probabilities, most likely first: one request with `logprobs: true`, `top_logprobs`
    /// and one token to generate, at temperature 0, with no response format (what scores a
    /// short answer such as yes / no on a server; OpenAI allows `top` up to 20). Retried like
    /// [`Backend::complete`]; a reply without log-probabilities is a `protocol` error.
    pub async fn first_token_logprobs(
        &self,
        messages: &contract_core::prompt::Messages,
        top: u8,
    ) -> Result<Vec<(String, f64)>, BackendError> {
        self.top_logprobs(messages, top, parse_top_logprobs).await
    }

    /// [`OpenAiBackend::first_token_logprobs`], the reply read with `parse`.
    async fn top_logprobs(
        &self,
        messages: &contract_core::prompt::Messages,
        top: u8,
        parse: fn(&[u8]) -> Result<TopList, Failure>,
    ) -> Result<Vec<(String, f64)>, BackendError> {
        #[allow(deprecated)] // `max_tokens` is still what compatible servers read
        let typed = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: chat_messages(messages),
            logprobs: Some(true),
            top_logprobs: Some(top),
            temperature: Some(0.0),
            max_tokens: (self.max_tokens_field == MaxTokensField::MaxTokens).then_some(1),
            max_completion_tokens: (self.max_tokens_field == MaxTokensField::MaxCompletionTokens)
                .then_some(1),
            ..Default::default()
        };
        let body = serde_json::to_vec(&typed).map_err(|e| BackendError::InvalidRequest {
            message: format!("cannot serialise the request: {e}"),
        })?;
        self.send(&body, parse).await
    }
}

impl Backend for OpenAiBackend {
    /// Sends `req`, retrying transient failures per the [`RetryPolicy`].
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        let body = self.request_body(req)?;
        let body = serde_json::to_vec(&body).map_err(|e| BackendError::InvalidRequest {
            message: format!("cannot serialise the request: {e}"),
        })?;
        self.send(&body, parse_reply).await
    }

    /// Sends `req` with `stream: true` ([`OpenAiBackend::streaming_body`]) and hands each
    /// `delta.content` piece to `on_text` as it arrives; the response is the one
    /// [`Backend::complete`] gives for the same completion (see the [module docs](self)).
    /// Transient failures are retried per the [`RetryPolicy`] only while nothing was handed
    /// on. Dropping the future closes the connection.
    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        let body = self.streaming_body(req)?;
        let body = serde_json::to_vec(&body).map_err(|e| BackendError::InvalidRequest {
            message: format!("cannot serialise the request: {e}"),
        })?;
        let relay = Relay::new(on_text);
        with_retries(&self.retry, || self.attempt_streaming(&body, &relay)).await
    }

    /// Scores the answers after each prompt from the server's log-probabilities: one request
    /// per prompt as [`OpenAiBackend::first_token_logprobs`] sends it (the 20 most likely first
    /// tokens), at most [`OpenAiBuilder::score_concurrency`] in flight, each retried per the
    /// [`RetryPolicy`]. Each answer's log-probability is read from the list with
    /// [`answers_from_top`](contract_core::judge::answers_from_top): the listed tokens that
    /// are the answer (whitespace trimmed) summed, an answer not listed counted at the least
    /// listed log-probability; `exact` is false when that happened for any answer. The first
    /// error ends the whole request; a server that returns no log-probabilities is
    /// [`BackendError::Unsupported`].
    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        // The futures made first: a stream mapping the prompts with a closure is not `Send`
        // for every lifetime, which `Backend::score`'s future must be.
        let requests: Vec<_> = req
            .prompts
            .iter()
            .map(|p| self.top_logprobs(p, SCORE_TOP, parse_top_logprobs_to_score))
            .collect();
        let tops: Vec<Vec<(String, f64)>> = stream::iter(requests)
            .buffered(self.score_concurrency)
            .try_collect()
            .await?;
        let mut exact = true;
        let logprobs = tops
            .iter()
            .map(|top| {
                let (logprobs, listed) = contract_core::judge::answers_from_top(top, &req.answers);
                exact &= listed;
                logprobs
            })
            .collect();
        Ok(ScoreResponse {
            logprobs,
            exact,
            forward_calls: None,
        })
    }
}

/// How many most likely first tokens [`Backend::score`] asks for: OpenAI's most.
const SCORE_TOP: u8 = 20;
