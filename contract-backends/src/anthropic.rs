//! Anthropic's Messages API over HTTP (feature `anthropic`).
//!
//! [`AnthropicBackend`] sends each [`Request`] to `POST {base}/v1/messages` (headers
//! `x-api-key`, `anthropic-version: 2023-06-01`) in one of three [`Mode`]s, best first:
//!
//! | mode | what the server is told | what enforces the contract |
//! | --- | --- | --- |
//! | [`Mode::StructuredOutputs`] | `output_format: {type: json_schema, schema}` (beta header `anthropic-beta: structured-outputs-2025-11-13`) | the server's constrained decoder, then validation |
//! | [`Mode::ToolUse`] | one tool whose `input_schema` is the schema, forced with `tool_choice: {type: tool, name}`; the tool call's `input` is the reply | the model's tool call, then validation |
//! | [`Mode::PromptOnly`] | nothing: the signature in the system prompt | validation only |
//!
//! The schema is the contract's [strict schema](contract_core::Contract::strict_schema) in
//! Anthropic's smaller subset ([`anthropic_schema`]): numeric bounds, `maxItems` and a
//! `minItems` above 1 are moved into the descriptions in plain words, as the strict schema
//! moves what OpenAI's subset cannot carry. [`AnthropicBackend::output_schema`] gives the schema
//! sent and the list of what was moved. The system messages become the top-level `system`
//! prompt (they hold the contract's one-line signature), the others `messages`.
//!
//! Every reply goes through the extractor like any backend's: parsed by the output ladder,
//! validated against the contract and, for a grounded contract, checked against the document
//! (`not_in_source`), with feedback on retry.
//!
//! # Replies
//!
//! The `text` blocks, joined, become [`Response::text`] (in [`Mode::ToolUse`], the forced tool
//! call's `input` as JSON); `thinking` blocks become [`Response::reasoning`], kept out of the
//! text. `stop_reason: "max_tokens"` becomes [`FinishReason::Length`]; `"refusal"` is an error
//! whose message starts with [`REFUSAL_PREFIX`], never retried.
//!
//! # Streaming
//!
//! With [`AnthropicBuilder::stream`] the request asks for `stream: true` and the server-sent
//! events (`message_start`, `content_block_start`, `content_block_delta` with `text_delta`,
//! `input_json_delta` or `thinking_delta`, `content_block_stop`, `message_delta`,
//! `message_stop`, `ping`) are read into the same [`Response`]; the SSE framing is
//! `eventsource-stream`'s, so chunks cut anywhere, pings and empty events are read as the
//! unbroken stream. A stream that ends before `message_stop` (a dropped connection) is a
//! retried `protocol` error, an `error` event is the error it names (`overloaded_error` retried
//! as `unavailable`, `invalid_request_error` not retried): never a truncated value. A reply
//! that is not a stream (a server that ignored `stream`) is read as a plain message.
//!
//! # Faults and retries
//!
//! As the OpenAI backend's ([`crate::openai`]): each HTTP attempt has its own timeout, and
//! 429 (after `Retry-After`), 529 (overloaded), other 5xx, timeouts, dropped connections and
//! unreadable bodies are retried at most [`RetryPolicy::max_retries`] times with jittered
//! exponential backoff; 400 (`invalid_request`, or `context_length` for `prompt is too long`),
//! 401/403 and refusals are not. Errors count the attempts made.
//!
//! # Scoring
//!
//! The Messages API returns no log-probabilities: [`Backend::score`] answers
//! [`BackendError::Unsupported`], and passage selection falls back to extracting without
//! judging, as for any backend that cannot score.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use contract_core::extract::{
    Backend, BackendError, Constraint, FinishReason, Request, Response, ScoreRequest, ScoreResponse,
};
use contract_core::prompt::Role;
use contract_core::schema::{anthropic_schema, StrictSchema};
use eventsource_stream::Event;
use futures_util::Stream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT};
use reqwest::StatusCode;
use serde_json::{json, Map, Value};

use crate::http::{
    chain, excerpt, is_event_stream, post_json, read_events, reply_json, schema_name,
    status_failure, status_label, transport_failure, with_retries, EventReader, Failure, Relay,
};
pub use crate::http::{parse_retry_after, RetryPolicy, REFUSAL_PREFIX};

/// The API's default base URL (the path `/v1/messages` is appended).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Environment variable with the API key (read when none is given).
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// Environment variable with the base URL (read when none is given).
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";
/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";
/// The `anthropic-beta` header sent in [`Mode::StructuredOutputs`].
pub const STRUCTURED_OUTPUTS_BETA: &str = "structured-outputs-2025-11-13";
/// The `max_tokens` sent when the request sets none (the API requires the field).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// What the server is asked to enforce; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Mode {
    /// `output_format` `json_schema` with the contract's schema in Anthropic's subset.
    #[default]
    StructuredOutputs,
    /// One tool with the schema as its `input_schema`, forced by `tool_choice`; its `input` is
    /// the reply (for models without structured outputs).
    ToolUse,
    /// Nothing but the signature in the system prompt, then validation.
    PromptOnly,
}

impl Mode {
    /// The snake_case name (`structured_outputs`, `tool_use`, `prompt_only`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::StructuredOutputs => "structured_outputs",
            Mode::ToolUse => "tool_use",
            Mode::PromptOnly => "prompt_only",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    /// Reads a mode name: `structured_outputs` (or `strict`, `schema`), `tool_use` (or `tool`,
    /// `tools`), `prompt_only` (or `prompt`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "structured_outputs" | "strict" | "schema" => Ok(Mode::StructuredOutputs),
            "tool_use" | "tool" | "tools" => Ok(Mode::ToolUse),
            "prompt_only" | "prompt" => Ok(Mode::PromptOnly),
            other => Err(format!(
                "unknown mode `{other}` (expected `structured_outputs`, `tool_use` or \
                 `prompt_only`)"
            )),
        }
    }
}

/// Builds an [`AnthropicBackend`].
#[derive(Debug, Clone)]
pub struct AnthropicBuilder {
    model: String,
    base_url: Option<String>,
    api_key: Option<String>,
    mode: Mode,
    stream: bool,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    max_tokens: u32,
}

impl AnthropicBuilder {
    /// The base URL, without `/v1/messages` (`http://127.0.0.1:8080`; a trailing `/v1` is
    /// accepted); default: `ANTHROPIC_BASE_URL`, else [`DEFAULT_BASE_URL`].
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The API key (`x-api-key`); default: `ANTHROPIC_API_KEY`, else none.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// What the server is asked to enforce (default [`Mode::StructuredOutputs`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Whether to ask for a streamed reply (`stream: true`, server-sent events) and read it
    /// event by event into the same [`Response`] (default false).
    pub fn stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    crate::http::http_builder_methods!();

    /// The `max_tokens` sent when a request sets none (default [`DEFAULT_MAX_TOKENS`]; 0 counts
    /// as 1).
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n.max(1);
        self
    }

    /// The backend; fails when the HTTP client cannot be built (TLS setup) or the API key
    /// cannot be a header value.
    pub fn build(self) -> Result<AnthropicBackend, BackendError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let base_url = self
            .base_url
            .filter(|u| !u.trim().is_empty())
            .or_else(|| env(BASE_URL_ENV))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let base_url = base_url.trim().trim_end_matches('/');
        let base_url = base_url.strip_suffix("/v1").unwrap_or(base_url).to_owned();
        let invalid = |what: &str, e: &dyn std::error::Error| BackendError::InvalidRequest {
            message: format!("{what} cannot be an HTTP header value: {}", chain(e)),
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = self.api_key.or_else(|| env(API_KEY_ENV)) {
            let mut value =
                HeaderValue::from_str(key.trim()).map_err(|e| invalid("the API key", &e))?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        if self.mode == Mode::StructuredOutputs {
            headers.insert(
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(STRUCTURED_OUTPUTS_BETA),
            );
        }
        if self.stream {
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .build()
            .map_err(|e| BackendError::Unavailable {
                message: format!("cannot build the HTTP client: {}", chain(&e)),
            })?;
        Ok(AnthropicBackend {
            http,
            url: format!("{base_url}/v1/messages"),
            headers,
            base_url,
            model: self.model,
            mode: self.mode,
            stream: self.stream,
            timeout: self.timeout,
            retry: self.retry,
            max_tokens: self.max_tokens,
            schemas: Arc::default(),
        })
    }
}

/// The last contract's schema in Anthropic's subset, rendered once for all its requests.
type SchemaCache = Arc<Mutex<Option<(Arc<Constraint>, Arc<StrictSchema>)>>>;

/// A Messages API backend for Anthropic's models; see the [module docs](self).
///
/// ```no_run
/// use std::time::Duration;
/// use contract_backends::anthropic::{AnthropicBackend, Mode};
/// let backend = AnthropicBackend::builder("claude-sonnet-4-5")   // key from ANTHROPIC_API_KEY
///     .mode(Mode::StructuredOutputs)
///     .stream(true)
///     .timeout(Duration::from_secs(60))
///     .max_retries(4)
///     .build()?;
/// # Ok::<(), contract_core::BackendError>(())
/// ```
#[derive(Debug, Clone)]
pub struct AnthropicBackend {
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
    base_url: String,
    model: String,
    mode: Mode,
    stream: bool,
    timeout: Duration,
    retry: RetryPolicy,
    max_tokens: u32,
    schemas: SchemaCache,
}

impl AnthropicBackend {
    /// A builder for `model` with the defaults (structured outputs, not streamed, 120 s
    /// timeout, 4 retries, `max_tokens` 4096 when a request sets none).
    pub fn builder(model: impl Into<String>) -> AnthropicBuilder {
        AnthropicBuilder {
            model: model.into(),
            base_url: None,
            api_key: None,
            mode: Mode::default(),
            stream: false,
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            max_tokens: DEFAULT_MAX_TOKENS,
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

    /// Whether replies are streamed.
    pub fn streams(&self) -> bool {
        self.stream
    }

    /// The base URL, without a trailing slash or `/v1`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// The schema sent for `req`'s contract (in [`Mode::StructuredOutputs`] and
    /// [`Mode::ToolUse`]): its strict schema in Anthropic's subset, with
    /// [`moved`](StrictSchema::moved) listing what the subset could not carry and where it
    /// went (beyond what the strict schema itself had moved: for the whole list from the
    /// draft schema, call [`anthropic_schema`] on the contract's
    /// [`json_schema`](contract_core::Contract::json_schema)).
    ///
    /// Fails with [`BackendError::InvalidRequest`] when the contract has no strict schema.
    pub fn output_schema(&self, req: &Request) -> Result<Arc<StrictSchema>, BackendError> {
        let mut cache = self.schemas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((constraint, schema)) = cache.as_ref() {
            if Arc::ptr_eq(constraint, &req.constraint) {
                return Ok(schema.clone());
            }
        }
        let strict =
            req.constraint
                .strict_schema
                .as_ref()
                .ok_or_else(|| BackendError::InvalidRequest {
                    message: format!(
                        "mode `{}` needs a schema and contract `{}` has no strict schema (use \
                         prompt_only)",
                        self.mode.as_str(),
                        req.contract()
                    ),
                })?;
        let schema =
            Arc::new(
                anthropic_schema(strict).map_err(|e| BackendError::InvalidRequest {
                    message: format!(
                        "contract `{}` has no schema in Anthropic's subset: {e}",
                        req.contract()
                    ),
                })?,
            );
        *cache = Some((req.constraint.clone(), schema.clone()));
        Ok(schema)
    }

    /// The JSON body sent for `req` (useful to inspect what a mode sends).
    ///
    /// Fails with [`BackendError::InvalidRequest`] when the mode needs a schema and the
    /// contract has none, or the request has no user message.
    pub fn request_body(&self, req: &Request) -> Result<Value, BackendError> {
        self.body(req, self.stream)
    }

    /// [`AnthropicBackend::request_body`], asking for a streamed reply when `stream`.
    fn body(&self, req: &Request, stream: bool) -> Result<Value, BackendError> {
        let mut system: Vec<&str> = Vec::new();
        let mut messages: Vec<Value> = Vec::new();
        for m in req.messages.iter() {
            match m.role {
                Role::System => system.push(&m.content),
                Role::User => messages.push(json!({"role": "user", "content": m.content})),
                Role::Assistant => {
                    messages.push(json!({"role": "assistant", "content": m.content}))
                }
            }
        }
        if !messages.iter().any(|m| m["role"] == "user") {
            return Err(BackendError::InvalidRequest {
                message: format!(
                    "the request for `{}` has no user message; the Messages API needs one",
                    req.contract()
                ),
            });
        }
        let mut body = Map::new();
        body.insert("model".into(), self.model.clone().into());
        body.insert(
            "max_tokens".into(),
            req.max_tokens.unwrap_or(self.max_tokens).into(),
        );
        if !system.is_empty() {
            body.insert("system".into(), system.join("\n\n").into());
        }
        body.insert("messages".into(), messages.into());
        if let Some(t) = req.sampling.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = req.sampling.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if stream {
            body.insert("stream".into(), true.into());
        }
        match self.mode {
            Mode::StructuredOutputs => {
                let schema = self.output_schema(req)?;
                body.insert(
                    "output_format".into(),
                    json!({"type": "json_schema", "schema": schema.schema}),
                );
            }
            Mode::ToolUse => {
                let schema = self.output_schema(req)?;
                let name = schema_name(req.contract());
                body.insert(
                    "tools".into(),
                    json!([{
                        "name": name,
                        "description": format!(
                            "Records the `{}` answer read from the document; its input is the \
                             answer.",
                            req.contract()
                        ),
                        "input_schema": schema.schema,
                    }]),
                );
                body.insert("tool_choice".into(), json!({"type": "tool", "name": name}));
            }
            Mode::PromptOnly => {}
        }
        Ok(Value::Object(body))
    }

    /// One attempt; a streamed reply's answer text is handed on through `relay` as it arrives
    /// (a failure after a piece was handed on is not retried, see [`Relay::guard`]).
    async fn attempt(
        &self,
        body: &[u8],
        tool: &str,
        stream: bool,
        relay: &Relay<'_>,
    ) -> Result<Response, Failure> {
        self.try_attempt(body, tool, stream, relay)
            .await
            .map_err(|f| relay.guard(f))
    }

    async fn try_attempt(
        &self,
        body: &[u8],
        tool: &str,
        stream: bool,
        relay: &Relay<'_>,
    ) -> Result<Response, Failure> {
        let transport = |e: reqwest::Error| transport_failure(&e, self.timeout, &self.url);
        let mut request = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body.to_vec());
        if stream && !self.stream {
            // Asked to stream by `complete_streaming` (a streaming backend's headers have it).
            request = request.header(ACCEPT, "text/event-stream");
        }
        let reply = post_json(request, self.timeout, &self.url).await?;
        let message = if is_event_stream(&reply) {
            read_stream(reply.bytes_stream(), self.mode, tool, relay, transport).await?
        } else {
            let bytes = reply.bytes().await.map_err(transport)?;
            read_message(&reply_json(&bytes)?)?
        };
        let response = message.into_response(self.mode, tool)?;
        relay.finish(&response.text);
        Ok(response)
    }

    /// Sends `req` (streamed when `stream`), retrying per the [`RetryPolicy`].
    async fn send(
        &self,
        req: &Request,
        stream: bool,
        relay: &Relay<'_>,
    ) -> Result<Response, BackendError> {
        let body = self.body(req, stream)?;
        let body = serde_json::to_vec(&body).map_err(|e| BackendError::InvalidRequest {
            message: format!("cannot serialise the request: {e}"),
        })?;
        let tool = schema_name(req.contract());
        with_retries(&self.retry, || self.attempt(&body, &tool, stream, relay)).await
    }
}

impl Backend for AnthropicBackend {
    /// Sends `req`, retrying transient failures per the [`RetryPolicy`].
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        self.send(req, self.stream, &Relay::silent()).await
    }

    /// Sends `req` with `stream: true` (whatever [`AnthropicBuilder::stream`] says) and hands
    /// the answer on as it arrives: each `text_delta` (in [`Mode::ToolUse`], each
    /// `input_json_delta` of the forced tool's call), so the pieces make [`Response::text`];
    /// thinking is not handed on (it is [`Response::reasoning`]). A server that answers with one
    /// message hands its text on once. Transient failures are retried per the [`RetryPolicy`]
    /// only while nothing was handed on; a stream cut after that is an error (its message says
    /// how much was handed on), never a shorter reply. Dropping the future closes the
    /// connection.
    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        self.send(req, true, &Relay::new(on_text)).await
    }

    /// Always [`BackendError::Unsupported`]: the Messages API returns no log-probabilities.
    async fn score(&self, _req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        Err(BackendError::Unsupported {
            message: "Anthropic's Messages API returns no log-probabilities, so it cannot score \
                      answers"
                .into(),
        })
    }
}

/// One content block of a reply.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    /// `text`.
    Text(String),
    /// `tool_use`: the tool's name and its input as JSON text (whole, or the streamed pieces).
    Tool { name: String, input: String },
    /// `thinking`.
    Thinking(String),
    /// Anything else (`redacted_thinking`, server tools): not part of the answer.
    Other,
}

/// A reply, read from one JSON message or from a stream of events.
#[derive(Debug, Default, Clone, PartialEq)]
struct Message {
    blocks: Vec<Block>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

/// A retried `protocol` failure.
fn protocol(message: String) -> Failure {
    Failure::retry(BackendError::Protocol { message }, None)
}

/// `value`'s field `key` as a string; `Ok(None)` when absent or null, an error for another type.
fn opt_str<'a>(value: &'a Value, key: &str, what: &str) -> Result<Option<&'a str>, Failure> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(protocol(format!(
            "{what}'s `{key}` is not a string: {}",
            excerpt(&other.to_string(), 80)
        ))),
    }
}

/// `value`'s field `key`, a string that must be there.
fn req_str<'a>(value: &'a Value, key: &str, what: &str) -> Result<&'a str, Failure> {
    opt_str(value, key, what)?.ok_or_else(|| protocol(format!("{what} has no `{key}`")))
}

impl Message {
    /// Token counts from a `usage` object (input tokens with the cached ones).
    fn read_usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else { return };
        let n = |k: &str| usage.get(k).and_then(Value::as_u64);
        if let Some(input) = n("input_tokens") {
            let cached = n("cache_creation_input_tokens").unwrap_or(0)
                + n("cache_read_input_tokens").unwrap_or(0);
            self.input_tokens = Some(input.saturating_add(cached));
        }
        if let Some(output) = n("output_tokens") {
            self.output_tokens = Some(output);
        }
    }

    /// The [`Response`] this reply means in `mode` (`tool`: the forced tool's name).
    fn into_response(self, mode: Mode, tool: &str) -> Result<Response, Failure> {
        let text: String = self
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        if self.stop_reason.as_deref() == Some("refusal") {
            let said = if text.trim().is_empty() {
                "(no explanation given)".to_owned()
            } else {
                excerpt(&text, 500)
            };
            return Err(Failure::fatal(BackendError::Other {
                message: format!("{REFUSAL_PREFIX}: {said}"),
            }));
        }
        let reasoning: Vec<&str> = self
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Thinking(t) if !t.trim().is_empty() => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let called = self.blocks.iter().find_map(|b| match b {
            Block::Tool { name, input } if name == tool => Some(input.as_str()),
            _ => None,
        });
        let text = match (mode, called) {
            (Mode::ToolUse, Some(input)) if input.trim().is_empty() => "{}".to_owned(),
            (Mode::ToolUse, Some(input)) => input.to_owned(),
            _ => text,
        };
        let finish_reason = self.stop_reason.as_deref().map(|s| match s {
            "end_turn" | "stop_sequence" | "tool_use" => FinishReason::Stop,
            "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
            _ => FinishReason::Other,
        });
        let tokens = |n: Option<u64>| n.map(|n| n.try_into().unwrap_or(u32::MAX));
        Ok(Response {
            text,
            reasoning: (!reasoning.is_empty()).then(|| reasoning.join("\n")),
            finish_reason,
            prompt_tokens: tokens(self.input_tokens),
            completion_tokens: tokens(self.output_tokens),
            forward_calls: None,
        })
    }
}

/// A content block as a whole message (or a `content_block_start`) carries it.
fn read_block(block: &Value, what: &str) -> Result<Block, Failure> {
    if !block.is_object() {
        return Err(protocol(format!(
            "{what} is not an object: {}",
            excerpt(&block.to_string(), 80)
        )));
    }
    Ok(match req_str(block, "type", what)? {
        "text" => Block::Text(req_str(block, "text", what)?.to_owned()),
        "thinking" => Block::Thinking(req_str(block, "thinking", what)?.to_owned()),
        "tool_use" => {
            let name = req_str(block, "name", what)?.to_owned();
            let input = match block.get("input") {
                None | Some(Value::Null) => String::new(),
                // A stream starts the block with `{}` and sends the input as deltas.
                Some(Value::Object(m)) if m.is_empty() => String::new(),
                Some(v @ Value::Object(_)) => v.to_string(),
                Some(other) => {
                    return Err(protocol(format!(
                        "{what}'s tool input is not an object: {}",
                        excerpt(&other.to_string(), 80)
                    )))
                }
            };
            Block::Tool { name, input }
        }
        _ => Block::Other,
    })
}

/// A whole (not streamed) reply.
fn read_message(value: &Value) -> Result<Message, Failure> {
    if !value.is_object() {
        return Err(protocol(format!(
            "the reply is not a message object: {}",
            excerpt(&value.to_string(), 80)
        )));
    }
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(error_event(value));
    }
    let content = match value.get("content") {
        Some(Value::Array(blocks)) => blocks,
        None | Some(Value::Null) => {
            return Err(protocol(format!(
                "the reply has no `content` list: {}",
                excerpt(&value.to_string(), 120)
            )))
        }
        Some(other) => {
            return Err(protocol(format!(
                "the reply's `content` is not a list: {}",
                excerpt(&other.to_string(), 80)
            )))
        }
    };
    let mut message = Message {
        blocks: content
            .iter()
            .enumerate()
            .map(|(i, b)| read_block(b, &format!("content[{i}]")))
            .collect::<Result<_, _>>()?,
        stop_reason: opt_str(value, "stop_reason", "the reply")?.map(str::to_owned),
        ..Message::default()
    };
    message.read_usage(value.get("usage"));
    Ok(message)
}

/// The failure an error reply or `error` event names (`{"type": "error", "error": {"type":
/// "overloaded_error", "message": "Overloaded"}}`), mapped as the HTTP status Anthropic sends
/// with that error type would be.
fn error_event(value: &Value) -> Failure {
    let kind = value
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or("unknown_error");
    let status = match kind {
        "invalid_request_error" => StatusCode::BAD_REQUEST,
        "authentication_error" => StatusCode::UNAUTHORIZED,
        "permission_error" => StatusCode::FORBIDDEN,
        "not_found_error" => StatusCode::NOT_FOUND,
        "request_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
        "rate_limit_error" => StatusCode::TOO_MANY_REQUESTS,
        "overloaded_error" => StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        // `api_error`, `timeout_error` and types not known yet: a server-side fault.
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut failure = status_failure(status, None, value.to_string().as_bytes());
    // Said as the error it is, not as the HTTP status it stands for.
    let label = |m: String| {
        let m = m.replacen(&status_label(status), &format!("`{kind}`"), 1);
        format!("the server sent an error in place of a reply: {m}")
    };
    failure.error = match failure.error {
        BackendError::Unavailable { message } => BackendError::Unavailable {
            message: label(message),
        },
        BackendError::InvalidRequest { message } => BackendError::InvalidRequest {
            message: label(message),
        },
        other => other,
    };
    failure
}

/// A streamed reply being put together, event by event.
#[derive(Debug, Default)]
struct Assembly {
    message: Message,
    /// Which blocks were started (a delta for another index is a protocol error).
    started: Vec<bool>,
    events: usize,
    /// In [`Mode::ToolUse`], the forced tool's name: its call's input is the answer handed on;
    /// otherwise the text blocks are.
    tool: Option<String>,
    /// The last content block whose text was handed on.
    handing: Option<usize>,
    /// Set when a block's text came after a later block's: nothing more is handed on until the
    /// end (where the relay hands what it can).
    out_of_order: bool,
}

/// The most content blocks a streamed reply may open (an index beyond it is not believed).
const MAX_BLOCKS: usize = 4096;

impl Assembly {
    /// An assembly for a reply in `mode` whose forced tool (in [`Mode::ToolUse`]) is `tool`.
    fn new(mode: Mode, tool: &str) -> Self {
        Assembly {
            tool: (mode == Mode::ToolUse).then(|| tool.to_owned()),
            ..Assembly::default()
        }
    }

    /// Hands `piece` of block `index` on when the block is part of the answer and comes in
    /// order: the answer is the text blocks joined in block order, or the first call of the
    /// forced tool.
    fn hand(&mut self, index: usize, piece: &str, relay: &Relay<'_>) {
        if self.out_of_order {
            return;
        }
        let answer = match (&self.tool, self.message.blocks.get(index)) {
            (None, Some(Block::Text(_))) => true,
            (Some(tool), Some(Block::Tool { name, .. })) => {
                name == tool && self.handing.is_none_or(|h| h == index)
            }
            _ => false,
        };
        if !answer {
            return;
        }
        if self.handing.is_some_and(|h| index < h) {
            self.out_of_order = true;
            return;
        }
        self.handing = Some(index);
        relay.piece(piece);
    }

    fn index(&self, data: &Value) -> Result<usize, Failure> {
        data.get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < MAX_BLOCKS)
            .ok_or_else(|| {
                protocol(format!(
                    "event {} has no usable content block `index`: {}",
                    self.events,
                    excerpt(&data.to_string(), 80)
                ))
            })
    }
}

impl EventReader for Assembly {
    const END: &'static str = "message_stop";

    /// Reads one event; `true` when it was `message_stop`.
    fn feed(&mut self, event: &Event, relay: &Relay<'_>) -> Result<bool, Failure> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        self.events += 1;
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            protocol(format!(
                "event {} (`{}`) carries data that is not JSON ({e}): `{}`",
                self.events,
                event.event,
                excerpt(&event.data, 80)
            ))
        })?;
        let kind = match data.get("type").and_then(Value::as_str) {
            Some(kind) => kind,
            None => event.event.as_str(),
        };
        match kind {
            "message_start" => self.message.read_usage(data.pointer("/message/usage")),
            "content_block_start" => {
                let index = self.index(&data)?;
                let block = read_block(
                    data.get("content_block").unwrap_or(&Value::Null),
                    &format!("content block {index}"),
                )?;
                if index >= self.started.len() {
                    self.started.resize(index + 1, false);
                    self.message.blocks.resize(index + 1, Block::Other);
                }
                if self.started[index] {
                    return Err(protocol(format!("content block {index} started twice")));
                }
                self.started[index] = true;
                let first = match &block {
                    Block::Text(t) | Block::Tool { input: t, .. } => t.clone(),
                    _ => String::new(),
                };
                self.message.blocks[index] = block;
                self.hand(index, &first, relay);
            }
            "content_block_delta" => {
                let index = self.index(&data)?;
                if !self.started.get(index).copied().unwrap_or(false) {
                    return Err(protocol(format!(
                        "a delta for content block {index}, which was never started"
                    )));
                }
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let what = format!("the delta of content block {index}");
                let block = &mut self.message.blocks[index];
                match (req_str(delta, "type", &what)?, block) {
                    ("text_delta", Block::Text(text)) => {
                        let piece = req_str(delta, "text", &what)?;
                        text.push_str(piece);
                        self.hand(index, piece, relay);
                    }
                    ("input_json_delta", Block::Tool { input, .. }) => {
                        let piece = req_str(delta, "partial_json", &what)?;
                        input.push_str(piece);
                        self.hand(index, piece, relay);
                    }
                    ("thinking_delta", Block::Thinking(text)) => {
                        text.push_str(req_str(delta, "thinking", &what)?)
                    }
                    (kind @ ("text_delta" | "input_json_delta" | "thinking_delta"), block) => {
                        return Err(protocol(format!(
                            "a `{kind}` for content block {index}, which is {}",
                            match block {
                                Block::Text(_) => "text",
                                Block::Tool { .. } => "a tool call",
                                Block::Thinking(_) => "thinking",
                                Block::Other => "of another type",
                            }
                        )))
                    }
                    // `signature_delta`, `citations_delta`, types not known yet.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = opt_str(
                    data.get("delta").unwrap_or(&Value::Null),
                    "stop_reason",
                    "message_delta",
                )? {
                    self.message.stop_reason = Some(reason.to_owned());
                }
                self.message.read_usage(data.get("usage"));
            }
            "message_stop" => return Ok(true),
            "error" => return Err(error_event(&data)),
            // `ping`, `content_block_stop`, event types not known yet.
            _ => {}
        }
        Ok(false)
    }

    /// What was read when a stream ended early, for the error.
    fn so_far(&self) -> String {
        let chars: usize = self
            .message
            .blocks
            .iter()
            .map(|b| match b {
                Block::Text(t) | Block::Thinking(t) | Block::Tool { input: t, .. } => {
                    t.chars().count()
                }
                Block::Other => 0,
            })
            .sum();
        format!("{} events, {chars} characters of reply", self.events)
    }
}

/// Reads a server-sent event stream of byte chunks (cut anywhere) into a [`Message`] of a reply
/// in `mode` (`tool`: the forced tool's name), handing the answer's text on through `relay`;
/// `transport` maps an error of the underlying stream.
async fn read_stream<S, B, E>(
    stream: S,
    mode: Mode,
    tool: &str,
    relay: &Relay<'_>,
    transport: impl Fn(E) -> Failure,
) -> Result<Message, Failure>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    let mut assembly = Assembly::new(mode, tool);
    read_events(stream, &mut assembly, relay, transport).await?;
    Ok(assembly.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    fn chunks(text: &str, size: usize) -> Vec<Result<Vec<u8>, Infallible>> {
        text.as_bytes()
            .chunks(size)
            .map(|c| Ok(c.to_vec()))
            .collect()
    }

    fn read(text: &str, size: usize) -> Result<Message, Failure> {
        let stream = futures_util::stream::iter(chunks(text, size));
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(read_stream(
                stream,
                Mode::StructuredOutputs,
                "C",
                &Relay::silent(),
                |e: Infallible| match e {},
            ))
    }

    /// The pieces a streamed reply in `mode` hands on, read in chunks of `size`, and the text
    /// of its response.
    fn handed(text: &str, size: usize, mode: Mode) -> (Vec<String>, Result<String, Failure>) {
        let pieces = Mutex::new(Vec::new());
        let on_text = |p: &str| pieces.lock().unwrap().push(p.to_owned());
        let relay = Relay::new(&on_text);
        let stream = futures_util::stream::iter(chunks(text, size));
        let message = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(read_stream(
                stream,
                mode,
                "C",
                &relay,
                |e: Infallible| match e {},
            ));
        let text = message.and_then(|m| m.into_response(mode, "C")).map(|r| {
            relay.finish(&r.text);
            r.text
        });
        (pieces.into_inner().unwrap(), text)
    }

    /// A streamed reply: thinking, then text in pieces (one with a character of two bytes).
    fn events(stop: &str) -> String {
        let mut s = String::new();
        let mut ev = |name: &str, data: Value| {
            s.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        };
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 42, "output_tokens": 1}}}),
        );
        ev("ping", json!({"type": "ping"}));
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        );
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Q3, in "}}),
        );
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "abc"}}),
        );
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "millions."}}),
        );
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        );
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        );
        for piece in ["{\"city\": \"Z", "ürich\", ", "\"n\": 3}"] {
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": piece}}),
            );
        }
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        );
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 17}}),
        );
        ev("message_stop", json!({"type": "message_stop"}));
        s
    }

    #[test]
    fn a_stream_reads_the_same_cut_anywhere() {
        let text = events("end_turn");
        let whole = read(&text, usize::MAX).expect("whole");
        let r = whole
            .clone()
            .into_response(Mode::StructuredOutputs, "C")
            .unwrap();
        assert_eq!(r.text, "{\"city\": \"Zürich\", \"n\": 3}");
        assert_eq!(r.reasoning.as_deref(), Some("Q3, in millions."));
        assert_eq!(r.finish_reason, Some(FinishReason::Stop));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (Some(42), Some(17)));
        for size in [1, 2, 3, 7, 64] {
            assert_eq!(read(&text, size).expect("cut"), whole, "chunks of {size}");
        }
        // CRLF line ends, extra pings and empty data lines change nothing.
        let noisy = text
            .replace(
                "event: ping\n",
                "event: ping\ndata: {\"type\": \"ping\"}\n\nevent: ping\n",
            )
            .replace(
                "event: content_block_stop\n",
                "data:\n\nevent: content_block_stop\n",
            )
            .replace('\n', "\r\n");
        assert_eq!(read(&noisy, 1).expect("noisy"), whole);
        let r = read(&events("max_tokens"), 5)
            .unwrap()
            .into_response(Mode::StructuredOutputs, "C")
            .unwrap();
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
    }

    #[test]
    fn the_answer_is_handed_on_delta_by_delta() {
        let text = events("end_turn");
        for size in [1, 5, usize::MAX] {
            let (pieces, whole) = handed(&text, size, Mode::StructuredOutputs);
            // The text deltas as they came, the thinking not among them.
            assert_eq!(
                pieces,
                ["{\"city\": \"Z", "ürich\", ", "\"n\": 3}"],
                "{size}"
            );
            assert_eq!(pieces.concat(), whole.expect("whole"));
        }
        // A forced tool call: its input deltas are the answer, a text block is not.
        let mut tool = String::new();
        for (name, data) in [
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Calling."}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "C", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"n\":"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": " 3}"}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ] {
            tool.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        }
        let (pieces, whole) = handed(&tool, 4, Mode::ToolUse);
        assert_eq!(pieces, ["{\"n\":", " 3}"]);
        assert_eq!(whole.expect("tool input"), "{\"n\": 3}");
        // The same stream outside tool mode: the text block is the answer.
        let (pieces, whole) = handed(&tool, 4, Mode::StructuredOutputs);
        assert_eq!(pieces, ["Calling."]);
        assert_eq!(whole.expect("text"), "Calling.");
        // A stream cut after pieces went out: an error that is no longer retried.
        let cut = &text[..text.find("event: message_delta").unwrap()];
        let pieces = Mutex::new(0usize);
        let on_text = |_: &str| *pieces.lock().unwrap() += 1;
        let relay = Relay::new(&on_text);
        let failure = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(read_stream(
                futures_util::stream::iter(chunks(cut, 3)),
                Mode::StructuredOutputs,
                "C",
                &relay,
                |e: Infallible| match e {},
            ))
            .expect_err("cut");
        assert!(failure.retryable, "read_stream itself says retryable");
        let guarded = relay.guard(failure);
        assert!(!guarded.retryable);
        assert!(
            guarded.error.to_string().contains("already handed on"),
            "{}",
            guarded.error
        );
    }

    #[test]
    fn a_broken_stream_is_an_error_never_a_value() {
        let text = events("end_turn");
        // Cut before `message_stop` (at every event boundary and inside events).
        let stop = text.find("event: message_stop").unwrap();
        for end in [0, 10, text.len() / 2, stop, stop + 25, text.len() - 1] {
            let f = read(&text[..end], 3).expect_err("cut");
            assert!(f.retryable, "{end}");
            assert_eq!(f.error.kind(), "protocol", "{end}");
            assert!(
                f.error.to_string().contains("before `message_stop`"),
                "{}",
                f.error
            );
        }
        // An error event mid-stream.
        let mid = text
            .match_indices("event: content_block_delta")
            .nth(3)
            .map(|(i, _)| i)
            .expect("a fourth delta");
        let overloaded = format!(
            "{}event: error\ndata: {}\n\n",
            &text[..mid],
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        );
        let f = read(&overloaded, 4).expect_err("error event");
        assert!(f.retryable);
        assert_eq!(f.error.kind(), "unavailable");
        assert!(
            f.error.to_string().contains("overloaded_error"),
            "{}",
            f.error
        );
        let bad = format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad schema"}})
        );
        let f = read(&bad, 1).expect_err("invalid");
        assert!(!f.retryable);
        assert_eq!(f.error.kind(), "invalid_request");
        assert!(f.error.to_string().contains("bad schema"));
        // Hostile events.
        for (name, data) in [
            ("not json", "{\"type\": \"content_block_delta\", ".to_owned()),
            (
                "delta before start",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}).to_string(),
            ),
            (
                "wrong type",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": 5}}).to_string(),
            ),
            (
                "huge index",
                json!({"type": "content_block_start", "index": 1u64 << 40, "content_block": {"type": "text", "text": ""}}).to_string(),
            ),
        ] {
            let f = read(&format!("data: {data}\n\n"), 2).expect_err(name);
            assert_eq!(f.error.kind(), "protocol", "{name}: {}", f.error);
        }
        let twice = format!(
            "data: {0}\n\ndata: {0}\n\n",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        );
        assert!(read(&twice, 3).is_err());
        let mismatched = format!(
            "data: {}\n\ndata: {}\n\n",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}})
        );
        assert!(read(&mismatched, 3)
            .expect_err("mismatch")
            .error
            .to_string()
            .contains("input_json_delta"));
    }

    #[test]
    fn messages_and_hostile_bodies() {
        let ok = json!({"id": "m", "type": "message", "role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "{\"a\":"},
            {"type": "text", "text": " 1}"},
            {"type": "tool_use", "id": "t", "name": "C", "input": {"a": 2}}
        ], "stop_reason": "end_turn", "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3}});
        let m = read_message(&ok).unwrap();
        let r = m
            .clone()
            .into_response(Mode::StructuredOutputs, "C")
            .unwrap();
        assert_eq!(r.text, "{\"a\": 1}");
        assert_eq!(r.reasoning.as_deref(), Some("hmm"));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (Some(15), Some(3)));
        assert_eq!(
            m.clone().into_response(Mode::ToolUse, "C").unwrap().text,
            "{\"a\":2}"
        );
        // Another tool's call is not the answer.
        assert_eq!(
            m.into_response(Mode::ToolUse, "D").unwrap().text,
            "{\"a\": 1}"
        );
        let refusal = json!({"content": [{"type": "text", "text": "I can't help."}], "stop_reason": "refusal"});
        let f = read_message(&refusal)
            .unwrap()
            .into_response(Mode::StructuredOutputs, "C")
            .unwrap_err();
        assert!(!f.retryable);
        assert!(
            f.error.to_string().starts_with(REFUSAL_PREFIX),
            "{}",
            f.error
        );
        for (name, bad) in [
            ("array", json!([1, 2])),
            (
                "no content",
                json!({"type": "message", "stop_reason": "end_turn"}),
            ),
            ("content a string", json!({"content": "hi"})),
            ("block without type", json!({"content": [{"text": "x"}]})),
            (
                "text a number",
                json!({"content": [{"type": "text", "text": 5}]}),
            ),
            (
                "tool input a string",
                json!({"content": [{"type": "tool_use", "name": "C", "input": "x"}]}),
            ),
            (
                "stop reason a number",
                json!({"content": [], "stop_reason": 3}),
            ),
        ] {
            let f = read_message(&bad).expect_err(name);
            assert_eq!(f.error.kind(), "protocol", "{name}");
            assert!(f.retryable, "{name}");
        }
        let err =
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}});
        assert_eq!(read_message(&err).unwrap_err().error.kind(), "rate_limited");
    }

    #[test]
    fn modes_by_name() {
        assert_eq!("tool".parse::<Mode>(), Ok(Mode::ToolUse));
        assert_eq!(
            "structured-outputs".parse::<Mode>(),
            Ok(Mode::StructuredOutputs)
        );
        assert_eq!("prompt".parse::<Mode>(), Ok(Mode::PromptOnly));
        assert!("json".parse::<Mode>().is_err());
    }
}
