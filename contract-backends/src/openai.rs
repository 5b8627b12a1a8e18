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

use std::time::Duration;

use async_openai::config::Config;
/// async-openai's client configuration, for [`OpenAiBuilder::config`].
pub use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, ResponseFormat, ResponseFormatJsonSchema,
};
use contract_core::extract::{
    Backend, BackendError, Decoding, FinishReason, Request, Response, ScoreRequest, ScoreResponse,
};
use contract_core::prompt::Role;
use eventsource_stream::Event;
use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use serde_json::Value;

use crate::http::{
    api_error, chain, excerpt, is_event_stream, post_json, read_events, reply_json, schema_name,
    transport_failure, with_retries, EventReader, Failure, Relay,
};
pub use crate::http::{parse_retry_after, RetryPolicy, REFUSAL_PREFIX};

/// The API's default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Environment variable with the API key (read when none is given).
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";
/// Environment variable with the base URL (read when none is given).
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// What the server is asked to enforce; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Mode {
    /// `response_format` `json_schema` with `strict: true` and the contract's strict schema.
    #[default]
    StructuredOutputs,
    /// `response_format` `json_object`, then validation.
    JsonMode,
    /// No `response_format`: the signature in the prompt, then validation.
    PromptOnly,
    /// vLLM's `guided_json` extra body field with the contract's strict schema.
    VllmGuidedJson,
    /// `response_format` `{type: json_object, schema}` with the contract's strict schema: how
    /// llama-cpp-python's server (which refuses the `json_schema` type) constrains to a schema.
    JsonObjectSchema,
    /// vLLM's `guided_grammar` extra body field with the contract's grammar in llguidance's
    /// Lark syntax (vLLM started with `--guided-decoding-backend guidance`): grounded strings as
    /// substring terminals over the request's document, grounded numbers as the numbers it
    /// writes. Values grounded in another field are grounded in the whole document there (a
    /// server cannot compose the grammar per field); the extractor checks them after decoding.
    ///
    /// The one mode that carries think-then-fill
    /// ([`Constraint::think`](contract_core::Constraint::think)): the grammar sent opens with
    /// the bounded reasoning block ([`Think::wrap_lark`](contract_core::grammar::Think::wrap_lark)).
    /// In every other mode what the server enforces has no room for a trace (a JSON Schema
    /// starts at `{`), so the request goes as without it: the prompt still asks for the trace,
    /// and a server that enforces a schema holds the reply to the JSON alone.
    VllmGuidedGrammar,
}

impl Mode {
    /// The snake_case name (`structured_outputs`, `json_mode`, `prompt_only`, `vllm_guided_json`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::StructuredOutputs => "structured_outputs",
            Mode::JsonMode => "json_mode",
            Mode::PromptOnly => "prompt_only",
            Mode::VllmGuidedJson => "vllm_guided_json",
            Mode::JsonObjectSchema => "json_object_schema",
            Mode::VllmGuidedGrammar => "vllm_guided_grammar",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    /// Reads a mode name: `structured_outputs` (or `strict`, `schema`), `json_mode` (or `json`),
    /// `prompt_only` (or `prompt`), `vllm_guided_json` (or `vllm`, `guided_json`),
    /// `json_object_schema` (or `llama_cpp`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "structured_outputs" | "strict" | "schema" => Ok(Mode::StructuredOutputs),
            "json_mode" | "json" | "json_object" => Ok(Mode::JsonMode),
            "prompt_only" | "prompt" => Ok(Mode::PromptOnly),
            "vllm_guided_json" | "vllm" | "guided_json" => Ok(Mode::VllmGuidedJson),
            "json_object_schema" | "llama_cpp" | "llamacpp" => Ok(Mode::JsonObjectSchema),
            "vllm_guided_grammar" | "guided_grammar" | "lark" => Ok(Mode::VllmGuidedGrammar),
            other => Err(format!(
                "unknown mode `{other}` (expected `structured_outputs`, `json_mode`, \
                 `prompt_only`, `vllm_guided_json`, `vllm_guided_grammar` or `json_object_schema`)"
            )),
        }
    }
}

/// The request's grammar in llguidance's Lark syntax: grounded in the request's document when the
/// contract grounds values, else the plain JSON grammar (`start: %json {..}`).
fn lark_grammar(req: &Request) -> Result<String, BackendError> {
    let lark = contract_lark(req)?;
    match req.constraint.think {
        // Think, then fill: the reasoning block in front of the contract's grammar.
        Some(think) => think
            .wrap_lark(&lark)
            .ok_or_else(|| BackendError::InvalidRequest {
                message: "the contract's grammar has no start rule to put a reasoning block before"
                    .into(),
            }),
        None => Ok(lark),
    }
}

/// [`lark_grammar`] without a reasoning block.
fn contract_lark(req: &Request) -> Result<String, BackendError> {
    let invalid = |message: String| BackendError::InvalidRequest { message };
    let grammar = match &req.constraint.decoding {
        Some(Decoding::Grammar(g)) => g,
        // A plain JSON Schema (a runtime contract): llguidance's JSON compiler.
        Some(Decoding::JsonSchema(schema)) => return Ok(format!("start: %json {schema}")),
        None => {
            return Err(invalid(format!(
                "mode `vllm_guided_grammar` needs the contract's grammar, the request for `{}` \
                 has none",
                req.contract()
            )))
        }
    };
    match &req.source {
        Some(source) if grammar.is_grounded() => grammar
            .static_grounded_lark(&contract_core::ground::Grounds::new(source))
            .map_err(|e| invalid(e.to_string())),
        _ => Ok(grammar.lark()),
    }
}

/// The contract's JSON Schema with its values grounded in the request's document, as far as a
/// schema can say it ([`Grammar::static_grounded_schema`](contract_core::grammar::Grammar::static_grounded_schema)):
/// `None` when the request has no document, no contract grammar, or nothing grounded.
fn grounded_schema(req: &Request) -> Option<Value> {
    let source = req.source.as_ref()?;
    let grammar = req.constraint.grammar()?;
    grammar
        .is_grounded()
        .then(|| grammar.static_grounded_schema(&contract_core::ground::Grounds::new(source)))
}

/// The chat messages in async-openai's request types.
fn chat_messages(messages: &contract_core::prompt::Messages) -> Vec<ChatCompletionRequestMessage> {
    messages
        .iter()
        .map(|m| match m.role {
            Role::System => ChatCompletionRequestMessage::System(
                ChatCompletionRequestSystemMessage::from(m.content.as_str()),
            ),
            Role::User => ChatCompletionRequestMessage::User(
                ChatCompletionRequestUserMessage::from(m.content.as_str()),
            ),
            Role::Assistant => {
                ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                    content: Some(m.content.as_str().into()),
                    ..Default::default()
                })
            }
        })
        .collect()
}

/// Which body field carries [`Request::max_tokens`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MaxTokensField {
    /// `max_tokens`: understood by OpenAI's non-reasoning models, vLLM and llama.cpp.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: required by OpenAI's reasoning models.
    MaxCompletionTokens,
}

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

/// A chat-completions backend for OpenAI and OpenAI-compatible servers; see the
/// [module docs](self).
///
/// ```no_run
/// use std::time::Duration;
/// use contract_backends::openai::{Mode, OpenAiBackend};
/// let backend = OpenAiBackend::builder("gpt-4o-mini")   // key from OPENAI_API_KEY
///     .mode(Mode::StructuredOutputs)
///     .timeout(Duration::from_secs(60))
///     .max_retries(4)
///     .build()?;
/// let local = OpenAiBackend::builder("smollm2")
///     .base_url("http://127.0.0.1:8000/v1")
///     .mode(Mode::JsonMode)
///     .build()?;
/// # Ok::<(), contract_core::BackendError>(())
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiBackend {
    http: reqwest::Client,
    url: String,
    query: Vec<(String, String)>,
    headers: reqwest::header::HeaderMap,
    base_url: String,
    model: String,
    mode: Mode,
    timeout: Duration,
    retry: RetryPolicy,
    max_tokens_field: MaxTokensField,
    score_concurrency: usize,
    stream_usage: bool,
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

    /// The JSON body sent for `req` (useful to inspect what a mode sends).
    ///
    /// Fails with [`BackendError::InvalidRequest`] when the mode needs a strict schema and the
    /// contract has none.
    pub fn request_body(&self, req: &Request) -> Result<Value, BackendError> {
        let messages = chat_messages(&req.messages);
        let strict_schema = || {
            req.constraint
                .strict_schema
                .clone()
                .ok_or_else(|| BackendError::InvalidRequest {
                    message: format!(
                        "mode `{}` needs a strict schema and contract `{}` has none \
                     (use json_mode or prompt_only)",
                        self.mode.as_str(),
                        req.contract()
                    ),
                })
        };
        let response_format = match self.mode {
            Mode::StructuredOutputs => Some(ResponseFormat::JsonSchema {
                json_schema: ResponseFormatJsonSchema {
                    description: None,
                    name: schema_name(req.contract()),
                    schema: strict_schema()?,
                    strict: Some(true),
                },
            }),
            Mode::JsonMode | Mode::JsonObjectSchema => Some(ResponseFormat::JsonObject),
            Mode::PromptOnly | Mode::VllmGuidedJson | Mode::VllmGuidedGrammar => None,
        };
        // A reasoning block's tokens come on top of the answer's limit.
        let max_tokens = req.max_tokens.map(|n| req.constraint.generation_limit(n));
        #[allow(deprecated)] // `max_tokens` and `seed` are still what compatible servers read
        let typed = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages,
            response_format,
            temperature: req.sampling.temperature,
            top_p: req.sampling.top_p,
            seed: req.sampling.seed.map(|s| (s & i64::MAX as u64) as i64),
            max_tokens: max_tokens.filter(|_| self.max_tokens_field == MaxTokensField::MaxTokens),
            max_completion_tokens: max_tokens
                .filter(|_| self.max_tokens_field == MaxTokensField::MaxCompletionTokens),
            ..Default::default()
        };
        let mut body = serde_json::to_value(&typed).map_err(|e| BackendError::InvalidRequest {
            message: format!("cannot serialise the request: {e}"),
        })?;
        // The schema a server compiles into its own grammar: grounded in the document where the
        // request has one and a schema can say it, else the strict schema.
        let server_schema = || match grounded_schema(req) {
            Some(schema) => Ok(schema),
            None => strict_schema(),
        };
        match (self.mode, &mut body) {
            (Mode::VllmGuidedJson, Value::Object(map)) => {
                map.insert("guided_json".to_owned(), server_schema()?);
            }
            (Mode::JsonObjectSchema, Value::Object(map)) => {
                if let Some(Value::Object(rf)) = map.get_mut("response_format") {
                    rf.insert("schema".to_owned(), server_schema()?);
                }
            }
            (Mode::VllmGuidedGrammar, Value::Object(map)) => {
                map.insert(
                    "guided_grammar".to_owned(),
                    Value::String(lark_grammar(req)?),
                );
            }
            _ => {}
        }
        Ok(body)
    }

    /// The JSON body sent for `req` by [`Backend::complete_streaming`]:
    /// [`request_body`](Self::request_body) with `stream: true` and, unless turned off with
    /// [`OpenAiBuilder::stream_usage`], `stream_options: {include_usage: true}`.
    pub fn streaming_body(&self, req: &Request) -> Result<Value, BackendError> {
        let mut body = self.request_body(req)?;
        if let Value::Object(map) = &mut body {
            map.insert("stream".to_owned(), Value::Bool(true));
            if self.stream_usage {
                map.insert(
                    "stream_options".to_owned(),
                    serde_json::json!({"include_usage": true}),
                );
            }
        }
        Ok(body)
    }

    /// One streamed attempt: the reply's content handed on through `relay` as it arrives; a
    /// failure after a piece was handed on is final ([`Relay::guard`]).
    async fn attempt_streaming(&self, body: &[u8], relay: &Relay<'_>) -> Result<Response, Failure> {
        let transport = |e: reqwest::Error| transport_failure(&e, self.timeout, &self.url);
        let read = async {
            let request = self
                .http
                .post(&self.url)
                .query(&self.query)
                .headers(self.headers.clone())
                .header(ACCEPT, "text/event-stream")
                .body(body.to_vec());
            let reply = post_json(request, self.timeout, &self.url).await?;
            let response = if is_event_stream(&reply) {
                let mut chunks = Chunks::default();
                read_events(reply.bytes_stream(), &mut chunks, relay, transport).await?;
                chunks.into_response()?
            } else {
                // A server that ignored `stream`: one completion.
                let bytes = reply.bytes().await.map_err(transport)?;
                parse_reply(&bytes)?
            };
            relay.finish(&response.text);
            Ok::<_, Failure>(response)
        };
        read.await.map_err(|f| relay.guard(f))
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

#[derive(Debug, Deserialize)]
struct Reply {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ReplyMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// Text from a content value: a string, or an array of `{type: text, text}` parts.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::Null => Some(String::new()),
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        ),
        _ => None,
    }
}

fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// A first token's most likely alternatives: `(token, logprob)`, most likely first.
type TopList = Vec<(String, f64)>;

/// The first generated token's `top_logprobs` (`choices[0].logprobs.content[0]`), most likely
/// first; a reply without them is a `protocol` error.
fn parse_top_logprobs(body: &[u8]) -> Result<Vec<(String, f64)>, Failure> {
    read_top_logprobs(body, |reply| BackendError::Protocol {
        message: format!(
            "the reply has no `choices[0].logprobs.content[0].top_logprobs` (does the server \
             support `logprobs`?): `{reply}`"
        ),
    })
}

/// [`parse_top_logprobs`] for [`Backend::score`]: a reply without them says the server cannot
/// score (`unsupported`).
fn parse_top_logprobs_to_score(body: &[u8]) -> Result<Vec<(String, f64)>, Failure> {
    read_top_logprobs(body, |reply| BackendError::Unsupported {
        message: format!(
            "the server returns no log-probabilities (no \
             `choices[0].logprobs.content[0].top_logprobs` in its reply to `logprobs: true`), so \
             it cannot score answers: `{reply}`"
        ),
    })
}

/// The top list of a reply; `missing(excerpt of the reply)` is the error (not retried) when
/// the reply has none.
fn read_top_logprobs(
    body: &[u8],
    missing: impl FnOnce(String) -> BackendError,
) -> Result<Vec<(String, f64)>, Failure> {
    let value = reply_json(body)?;
    let first = value
        .pointer("/choices/0/logprobs/content/0/top_logprobs")
        .and_then(Value::as_array)
        .ok_or_else(|| Failure::fatal(missing(excerpt(&value.to_string(), 200))))?;
    let mut out: Vec<(String, f64)> = first
        .iter()
        .filter_map(|t| {
            let token = t.get("token")?.as_str()?.to_owned();
            let logprob = t.get("logprob")?.as_f64().filter(|l| !l.is_nan())?;
            Some((token, logprob))
        })
        .collect();
    if out.is_empty() {
        return Err(Failure::retry(
            BackendError::Protocol {
                message: "the reply's top_logprobs list is empty".into(),
            },
            None,
        ));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(out)
}

fn parse_reply(body: &[u8]) -> Result<Response, Failure> {
    let value = reply_json(body)?;
    if value.get("error").is_some_and(|e| !e.is_null()) && value.get("choices").is_none() {
        let error = api_error(body);
        return Err(Failure::retry(
            BackendError::Protocol {
                message: format!("the server replied with an error: {}", error.message),
            },
            None,
        ));
    }
    let reply: Reply = serde_json::from_value(value).map_err(|e| {
        Failure::retry(
            BackendError::Protocol {
                message: format!("the reply is not a chat completion: {e}"),
            },
            None,
        )
    })?;
    let usage = reply.usage;
    let choice = reply.choices.into_iter().next().ok_or_else(|| {
        Failure::retry(
            BackendError::Protocol {
                message: "the reply has no choices".to_owned(),
            },
            None,
        )
    })?;
    let message = choice.message.unwrap_or_default();
    if let Some(refusal) = message.refusal.filter(|r| !r.trim().is_empty()) {
        return Err(Failure::fatal(BackendError::Other {
            message: format!("{REFUSAL_PREFIX}: {}", excerpt(&refusal, 500)),
        }));
    }
    let text = match &message.content {
        None => String::new(),
        Some(c) => content_text(c).ok_or_else(|| {
            Failure::retry(
                BackendError::Protocol {
                    message: format!(
                        "the message content is neither text nor text parts: {}",
                        excerpt(&c.to_string(), 80)
                    ),
                },
                None,
            )
        })?,
    };
    let reasoning = message
        .reasoning_content
        .or_else(|| match message.reasoning {
            Some(Value::String(s)) => Some(s),
            Some(Value::Object(o)) => o.get("content").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
        .filter(|r| !r.trim().is_empty());
    let tokens = |n: Option<u64>| n.map(|n| n.try_into().unwrap_or(u32::MAX));
    Ok(Response {
        text,
        reasoning,
        finish_reason: choice.finish_reason.as_deref().map(finish_reason),
        prompt_tokens: tokens(usage.as_ref().and_then(|u| u.prompt_tokens)),
        completion_tokens: tokens(usage.as_ref().and_then(|u| u.completion_tokens)),
        forward_calls: None,
    })
}

/// A streamed completion being put together, chunk by chunk (`chat.completion.chunk` objects,
/// read leniently as replies are).
#[derive(Debug, Default)]
struct Chunks {
    text: String,
    reasoning: String,
    refusal: String,
    finish_reason: Option<String>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    events: usize,
}

/// A retried `protocol` failure.
fn protocol(message: String) -> Failure {
    Failure::retry(BackendError::Protocol { message }, None)
}

impl EventReader for Chunks {
    const END: &'static str = "data: [DONE]";

    fn feed(&mut self, event: &Event, relay: &Relay<'_>) -> Result<bool, Failure> {
        let data = event.data.trim();
        // Keep-alives and empty events.
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        self.events += 1;
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            protocol(format!(
                "chunk {} of the stream is not JSON ({e}): `{}`",
                self.events,
                excerpt(data, 80)
            ))
        })?;
        if !chunk.is_object() {
            return Err(protocol(format!(
                "chunk {} of the stream is not an object: `{}`",
                self.events,
                excerpt(data, 80)
            )));
        }
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            let error = api_error(data.as_bytes());
            return Err(protocol(format!(
                "the server sent an error mid-stream: {}",
                excerpt(&error.message, 300)
            )));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| usage.get(k).and_then(Value::as_u64);
            self.prompt_tokens = n("prompt_tokens").or(self.prompt_tokens);
            self.completion_tokens = n("completion_tokens").or(self.completion_tokens);
        }
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => return Ok(false),
            Some(Value::Array(choices)) => choices,
            Some(other) => {
                return Err(protocol(format!(
                    "chunk {}'s `choices` is not a list: {}",
                    self.events,
                    excerpt(&other.to_string(), 80)
                )))
            }
        };
        // The first choice (`n` is never asked for): index 0, or no index at all.
        let Some(choice) = choices
            .iter()
            .find(|c| c.get("index").is_none_or(|i| i.as_u64() == Some(0)))
        else {
            return Ok(false);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta").filter(|d| !d.is_null()) else {
            return Ok(false);
        };
        let text = |key: &str| -> Result<Option<String>, Failure> {
            match delta.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => content_text(v).map(Some).ok_or_else(|| {
                    protocol(format!(
                        "chunk {}'s `delta.{key}` is neither text nor text parts: {}",
                        self.events,
                        excerpt(&v.to_string(), 80)
                    ))
                }),
            }
        };
        if let Some(piece) = text("content")? {
            self.text.push_str(&piece);
            relay.piece(&piece);
        }
        if let Some(piece) = text("reasoning_content")? {
            self.reasoning.push_str(&piece);
        } else if let Some(Value::String(piece)) = delta.get("reasoning") {
            self.reasoning.push_str(piece);
        }
        if let Some(piece) = text("refusal")? {
            self.refusal.push_str(&piece);
        }
        Ok(false)
    }

    fn so_far(&self) -> String {
        format!(
            "{} chunks, {} characters of reply",
            self.events,
            self.text.chars().count()
        )
    }
}

impl Chunks {
    /// The response the whole stream makes, as [`parse_reply`] reads the same completion.
    fn into_response(self) -> Result<Response, Failure> {
        if !self.refusal.trim().is_empty() {
            return Err(Failure::fatal(BackendError::Other {
                message: format!("{REFUSAL_PREFIX}: {}", excerpt(&self.refusal, 500)),
            }));
        }
        let tokens = |n: Option<u64>| n.map(|n| n.try_into().unwrap_or(u32::MAX));
        Ok(Response {
            text: self.text,
            reasoning: Some(self.reasoning).filter(|r| !r.trim().is_empty()),
            finish_reason: self.finish_reason.as_deref().map(finish_reason),
            prompt_tokens: tokens(self.prompt_tokens),
            completion_tokens: tokens(self.completion_tokens),
            forward_calls: None,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies() {
        let ok = br#"{"choices":[{"message":{"role":"assistant","content":"{}","reasoning_content":"hmm"},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":3}}"#;
        let r = parse_reply(ok).unwrap();
        assert_eq!(r.text, "{}");
        assert_eq!(r.reasoning.as_deref(), Some("hmm"));
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (Some(12), Some(3)));
        let parts = br#"{"choices":[{"message":{"content":[{"type":"text","text":"{"},{"type":"text","text":"}"}],"reasoning":"r"},"finish_reason":"stop"}]}"#;
        let r = parse_reply(parts).unwrap();
        assert_eq!((r.text.as_str(), r.reasoning.as_deref()), ("{}", Some("r")));
        let refusal = br#"{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}"#;
        let f = parse_reply(refusal).unwrap_err();
        assert!(!f.retryable);
        assert!(
            f.error.to_string().starts_with(REFUSAL_PREFIX),
            "{}",
            f.error
        );
        for bad in [
            &b"{\"choices\":[{\"message\":{\"content\":\"{}\"}"[..],
            b"<html>oops</html>",
            b"{\"choices\":[]}",
        ] {
            let f = parse_reply(bad).unwrap_err();
            assert!(f.retryable);
            assert_eq!(f.error.kind(), "protocol");
        }
    }

    /// A stream of `chunks` as `data:` events, ended by `[DONE]` when `done`.
    fn sse(chunks: &[Value], done: bool) -> String {
        let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        if done {
            s.push_str("data: [DONE]\n\n");
        }
        s
    }

    /// `text` read in byte chunks of `size`, and the pieces handed on.
    fn read_sse(text: &str, size: usize) -> (Result<Response, Failure>, Vec<String>) {
        let pieces = std::sync::Mutex::new(Vec::new());
        let on_text = |p: &str| pieces.lock().unwrap().push(p.to_owned());
        let relay = Relay::new(&on_text);
        let stream = futures_util::stream::iter(
            text.as_bytes()
                .chunks(size)
                .map(|c| Ok::<_, std::convert::Infallible>(c.to_vec()))
                .collect::<Vec<_>>(),
        );
        let mut chunks = Chunks::default();
        let read = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(read_events(stream, &mut chunks, &relay, |e| match e {}))
            .and_then(|()| chunks.into_response());
        (read, pieces.into_inner().unwrap())
    }

    /// What a server streams for content `{"city": "Zürich", "n": 3}` with a reasoning trace.
    fn streamed() -> Vec<Value> {
        let mut out = vec![
            serde_json::json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}),
        ];
        for r in ["Zürich is ", "the city."] {
            out.push(serde_json::json!({"choices": [{"index": 0, "delta": {"reasoning_content": r}, "finish_reason": null}]}));
        }
        for piece in ["{\"city\": \"Z", "ürich\", ", "\"n\": 3}"] {
            out.push(serde_json::json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]}));
        }
        out.push(
            serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        out.push(serde_json::json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}));
        out
    }

    #[test]
    fn a_stream_reads_like_the_whole_reply_cut_anywhere() {
        let whole = parse_reply(br#"{"choices":[{"message":{"content":"{\"city\": \"Z\u00fcrich\", \"n\": 3}","reasoning_content":"Z\u00fcrich is the city."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3}}"#).unwrap();
        let text = sse(&streamed(), true);
        for size in [1, 2, 3, 7, 64, usize::MAX] {
            let (r, pieces) = read_sse(&text, size);
            assert_eq!(r.expect("read"), whole, "chunks of {size}");
            assert_eq!(
                pieces,
                ["{\"city\": \"Z", "ürich\", ", "\"n\": 3}"],
                "{size}"
            );
        }
        // Comments, empty events, an event whose JSON spans two `data:` lines, a repeated
        // role chunk, an empty content delta, CRLF and a second `[DONE]` change nothing.
        let chunks = streamed();
        let mut noisy = String::from(": keep-alive\r\n\r\ndata:\r\n\r\n");
        noisy.push_str(&sse(&chunks[..1], false).replace('\n', "\r\n"));
        noisy.push_str(&sse(&chunks[..1], false));
        noisy.push_str(&sse(
            &[serde_json::json!({"choices": [{"index": 0, "delta": {"content": ""}}]})],
            false,
        ));
        for c in &chunks[1..] {
            let c = c.to_string();
            // Split after the opening brace, where the joining newline is whitespace.
            let (a, b) = c.split_at(1);
            noisy.push_str(&format!("data: {a}\ndata: {b}\n\n: ping\n\ndata: \n\n"));
        }
        noisy.push_str("data: [DONE]\n\ndata: [DONE]\n\n");
        for size in [1, 5, usize::MAX] {
            let (r, pieces) = read_sse(&noisy, size);
            assert_eq!(r.expect("noisy"), whole, "noisy, chunks of {size}");
            assert_eq!(pieces.concat(), whole.text);
        }
        // `finish_reason: length`, no usage chunk (a server not asked for it).
        let mut short = streamed();
        short.pop();
        short.pop();
        short.push(
            serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        );
        let r = read_sse(&sse(&short, true), 4).0.expect("length");
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (None, None));
    }

    #[test]
    fn a_broken_stream_is_an_error_never_a_value() {
        let text = sse(&streamed(), true);
        let done = text.find("data: [DONE]").unwrap();
        let in_value = text.find("ürich").unwrap();
        for end in [0, 10, in_value, text.len() / 2, done, done + 8] {
            let (r, _) = read_sse(&text[..end], 3);
            let f = r.expect_err("cut");
            assert_eq!(f.error.kind(), "protocol", "{end}");
            assert!(
                f.error.to_string().contains("before `data: [DONE]`"),
                "{end}: {}",
                f.error
            );
        }
        let error = format!(
            "{}data: {}\n\n",
            &text[..text[..in_value].rfind("data:").unwrap()],
            serde_json::json!({"error": {"message": "the model crashed", "type": "server_error"}})
        );
        let (r, _) = read_sse(&error, 2);
        assert!(r
            .expect_err("error chunk")
            .error
            .to_string()
            .contains("the model crashed"),);
        for bad in [
            "data: {\"choices\": \n\n",
            "data: [1, 2]\n\n",
            "data: {\"choices\": 5}\n\n",
        ] {
            let (r, _) = read_sse(bad, 1);
            assert_eq!(r.expect_err(bad).error.kind(), "protocol", "{bad}");
        }
        let refusal = sse(
            &[
                serde_json::json!({"choices": [{"index": 0, "delta": {"refusal": "I can't."}, "finish_reason": "stop"}]}),
            ],
            true,
        );
        let f = read_sse(&refusal, 3).0.expect_err("refusal");
        assert!(!f.retryable);
        assert!(f.error.to_string().starts_with(REFUSAL_PREFIX));
    }

    #[test]
    fn names_and_modes() {
        assert_eq!(schema_name("Guidance"), "Guidance");
        assert_eq!(schema_name("a b.c"), "a_b_c");
        assert_eq!(schema_name(""), "contract");
        assert_eq!("json".parse::<Mode>(), Ok(Mode::JsonMode));
        assert_eq!("vllm-guided-json".parse::<Mode>(), Ok(Mode::VllmGuidedJson));
        assert_eq!("llama_cpp".parse::<Mode>(), Ok(Mode::JsonObjectSchema));
        assert!("x".parse::<Mode>().is_err());
        assert_eq!("lark".parse::<Mode>(), Ok(Mode::VllmGuidedGrammar));
    }

    #[test]
    fn schema_modes_send_the_grounded_schema() {
        use examples::filings::GroundedGuidance;
        let doc = "Acme Reports Second Quarter 2024 Results\n\
                   For the third quarter of 2024, Acme expects revenue of $4,065 to $4,140 million.";
        let mut req = Request::new(
            contract_core::Constraint::of::<GroundedGuidance>(),
            contract_core::prompt::Messages::for_contract::<GroundedGuidance>(doc),
        );
        req.source = Some(contract_core::Source::from_text(doc));
        let backend = |mode| {
            OpenAiBackend::builder("m")
                .mode(mode)
                .base_url("http://127.0.0.1:9")
                .build()
                .expect("backend")
        };
        let llama = backend(Mode::JsonObjectSchema)
            .request_body(&req)
            .expect("body");
        let vllm = backend(Mode::VllmGuidedJson)
            .request_body(&req)
            .expect("body");
        for schema in [&llama["response_format"]["schema"], &vllm["guided_json"]] {
            let text = schema.to_string();
            assert!(
                text.contains("[2024,4065,4140]"),
                "the release's numbers: {text}"
            );
            assert!(
                text.contains("For the third quarter of 2024, Acme expects revenue of $4,065 to $4,140 million."),
                "{text}"
            );
        }
        // Without a document: the strict schema, as before.
        req.source = None;
        let llama = backend(Mode::JsonObjectSchema)
            .request_body(&req)
            .expect("body");
        assert_eq!(
            Some(&llama["response_format"]["schema"]),
            req.constraint.strict_schema.as_ref()
        );
    }

    #[test]
    fn guided_grammar_grounds_values_in_the_document() {
        use examples::filings::GroundedGuidance;
        let doc = "Acme Reports Second Quarter 2024 Results\n\
                   For the third quarter of 2024, Acme expects revenue of $4,065 to $4,140 million.";
        let backend = OpenAiBackend::builder("m")
            .mode(Mode::VllmGuidedGrammar)
            .base_url("http://127.0.0.1:9")
            .build()
            .expect("backend");
        let constraint = contract_core::Constraint::of::<GroundedGuidance>();
        let mut req = Request::new(
            std::sync::Arc::new(contract_core::Constraint {
                strict_schema: None,
                ..(*constraint).clone()
            }),
            contract_core::prompt::Messages::for_contract::<GroundedGuidance>(doc),
        );
        req.source = Some(contract_core::Source::from_text(doc));
        let body = backend.request_body(&req).expect("body");
        let lark = body["guided_grammar"].as_str().unwrap_or_default();
        // The quote is one of the document's lines; the numbers are the document's.
        assert!(
            lark.contains("expects revenue of $4,065 to $4,140 million."),
            "{lark}"
        );
        assert!(
            lark.contains("\"4065\"") && lark.contains("\"4140\""),
            "{lark}"
        );
        assert!(body.get("response_format").is_none());
        // Without a document the grammar is the plain JSON one.
        req.source = None;
        let body = backend.request_body(&req).expect("body");
        let lark = body["guided_grammar"].as_str().unwrap_or_default();
        assert!(lark.starts_with("start: %json"), "{lark}");
        // Without a grammar the request is refused before anything is sent.
        req.constraint = std::sync::Arc::new(req.constraint.with_decoding(None));
        let err = backend.request_body(&req).expect_err("no grammar");
        assert_eq!(err.kind(), "invalid_request");
    }
}
