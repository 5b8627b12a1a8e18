//! A scripted server that speaks Anthropic's Messages API on 127.0.0.1, for the Anthropic
//! backend's tests: `POST /v1/messages`, its headers and body checked, answered with a message,
//! a server-sent event stream written in chunks of any size, an error body or a fault below
//! HTTP (a reset, a stream closed early).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{listen, lock, read_request, reason};

/// The request shape a test expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `output_format` json_schema in Anthropic's subset, with the beta header.
    StructuredOutputs,
    /// One tool, forced by `tool_choice`, no `output_format`.
    ToolUse,
    /// Neither.
    PromptOnly,
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A 200 with this JSON body.
    Message(Value),
    /// A 200 `text/event-stream` with this text, written `chunk` bytes at a time, then closed.
    Stream {
        /// The events.
        text: String,
        /// Bytes per write (each written and flushed alone).
        chunk: usize,
    },
    /// A status with headers and a body.
    Status {
        /// The status code.
        code: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// A 200 with this content type and body, as is.
    Raw {
        /// The content type.
        content_type: String,
        /// The body.
        body: String,
    },
    /// Drops the connection with a reset before answering.
    Reset,
}

/// A content block of a scripted reply.
#[derive(Debug, Clone)]
pub enum Block {
    /// `text`.
    Text(String),
    /// `thinking`.
    Thinking(String),
    /// `tool_use` with this name and input.
    Tool(String, Value),
}

/// A whole message with `blocks` and `stop_reason`.
pub fn message(blocks: &[Block], stop_reason: &str) -> Value {
    let content: Vec<Value> = blocks
        .iter()
        .map(|b| match b {
            Block::Text(t) => json!({"type": "text", "text": t}),
            Block::Thinking(t) => json!({"type": "thinking", "thinking": t, "signature": "sig"}),
            Block::Tool(name, input) => {
                json!({"type": "tool_use", "id": "toolu_1", "name": name, "input": input})
            }
        })
        .collect();
    json!({
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": "mock-claude",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    })
}

/// Pieces of `text` of about `n` characters (on character boundaries).
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// The event stream the API sends for the same message: `message_start`, a `ping`, each block
/// started, its content in deltas of 7 characters, stopped, then `message_delta` and
/// `message_stop`.
pub fn events(blocks: &[Block], stop_reason: &str) -> String {
    let mut out = String::new();
    let mut ev = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message", "role": "assistant", "model": "mock-claude", "content": [], "stop_reason": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    ev("ping", json!({"type": "ping"}));
    for (i, b) in blocks.iter().enumerate() {
        let (start, deltas): (Value, Vec<Value>) = match b {
            Block::Text(t) => (
                json!({"type": "text", "text": ""}),
                pieces(t, 7)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect(),
            ),
            Block::Thinking(t) => (
                json!({"type": "thinking", "thinking": ""}),
                pieces(t, 7)
                    .into_iter()
                    .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                    .chain([json!({"type": "signature_delta", "signature": "sig"})])
                    .collect(),
            ),
            Block::Tool(name, input) => (
                json!({"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}),
                pieces(&input.to_string(), 7)
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
        };
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": start}),
        );
        for d in deltas {
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": d}),
            );
        }
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    );
    ev("message_stop", json!({"type": "message_stop"}));
    out
}

/// An `error` event (`overloaded_error`, `invalid_request_error`, ...).
pub fn error_event(kind: &str, message: &str) -> String {
    format!(
        "event: error\ndata: {}\n\n",
        json!({"type": "error", "error": {"type": kind, "message": message}})
    )
}

impl Reply {
    /// A message whose one text block is `text`, stop reason `end_turn`.
    pub fn text(text: &str) -> Reply {
        Reply::Message(message(&[Block::Text(text.into())], "end_turn"))
    }

    /// The stream of a message with `blocks`, written `chunk` bytes at a time.
    pub fn stream(blocks: &[Block], stop_reason: &str, chunk: usize) -> Reply {
        Reply::Stream {
            text: events(blocks, stop_reason),
            chunk,
        }
    }

    /// An error reply as the API sends it: `{"type": "error", "error": {type, message}}`.
    pub fn error(code: u16, kind: &str, message: &str) -> Reply {
        Reply::Status {
            code,
            headers: Vec::new(),
            body: json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        }
    }

    /// A 429 `rate_limit_error` with `retry-after: value`.
    pub fn rate_limited(retry_after: &str) -> Reply {
        Reply::Status {
            code: 429,
            headers: vec![("retry-after".into(), retry_after.into())],
            body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}}).to_string(),
        }
    }
}

/// One request the server got.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request line.
    pub line: String,
    /// Headers, names lowercase.
    pub headers: HashMap<String, String>,
    /// The JSON body (`Null` when it is not JSON).
    pub body: Value,
}

type Script = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

struct State {
    expect: Expect,
    script: Box<Script>,
    seen: Mutex<Vec<Seen>>,
    shape_errors: Mutex<Vec<String>>,
}

/// The running server; it stops when dropped.
pub struct AnthropicServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AnthropicServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Keywords Anthropic's structured outputs refuse.
const REFUSED: [&str; 12] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
    "patternProperties",
    "minProperties",
    "maxProperties",
];

/// The formats Anthropic's structured outputs know.
const FORMATS: [&str; 10] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Every way `schema` breaks Anthropic's subset (written from its documented limitations, not
/// from the backend's code).
pub fn schema_errors(schema: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        if !schema.is_boolean() {
            errors.push(format!("{path}: a schema must be an object"));
        }
        return;
    };
    for k in REFUSED {
        if map.contains_key(k) {
            errors.push(format!("{path}: `{k}` is not supported"));
        }
    }
    if let Some(n) = map.get("minItems") {
        if n.as_u64().is_none_or(|n| n > 1) {
            errors.push(format!("{path}: `minItems` must be 0 or 1, not {n}"));
        }
    }
    if let Some(f) = map.get("format") {
        if !f.as_str().is_some_and(|f| FORMATS.contains(&f)) {
            errors.push(format!("{path}: format {f} is not supported"));
        }
    }
    let is_object = map.contains_key("properties")
        || match map.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
            _ => false,
        };
    if is_object && map.get("additionalProperties") != Some(&Value::Bool(false)) {
        errors.push(format!(
            "{path}: objects need `additionalProperties: false`"
        ));
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (k, v) in props {
            schema_errors(v, &format!("{path}/properties/{k}"), errors);
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.get(key) {
            for (k, v) in defs {
                schema_errors(v, &format!("{path}/{key}/{k}"), errors);
            }
        }
    }
    if let Some(items) = map.get("items") {
        schema_errors(items, &format!("{path}/items"), errors);
    }
    for key in ["anyOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get(key) {
            for (i, b) in branches.iter().enumerate() {
                schema_errors(b, &format!("{path}/{key}/{i}"), errors);
            }
        }
    }
}

/// Every problem of a request against the Messages API and the shape `expect` asks for.
pub fn check_request(expect: Expect, seen: &Seen) -> Vec<String> {
    let mut errors = Vec::new();
    if !seen.line.starts_with("POST /v1/messages ") {
        errors.push(format!("unexpected request line `{}`", seen.line));
    }
    let header = |k: &str| seen.headers.get(k).map(String::as_str);
    if header("anthropic-version") != Some("2023-06-01") {
        errors.push("`anthropic-version: 2023-06-01` is required".into());
    }
    if header("x-api-key").is_none_or(str::is_empty) {
        errors.push("`x-api-key` is required".into());
    }
    if !header("content-type").is_some_and(|v| v.starts_with("application/json")) {
        errors.push("the content type must be application/json".into());
    }
    let body = &seen.body;
    let Some(obj) = body.as_object() else {
        errors.push("the body is not a JSON object".into());
        return errors;
    };
    if obj
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errors.push("`model` must be a non-empty string".into());
    }
    if obj
        .get("max_tokens")
        .and_then(Value::as_u64)
        .is_none_or(|n| n == 0)
    {
        errors.push("`max_tokens` is required and positive".into());
    }
    if obj.get("system").is_some_and(|s| !s.is_string()) {
        errors.push("`system` must be a string".into());
    }
    match obj.get("messages").and_then(Value::as_array) {
        Some(ms) if !ms.is_empty() => {
            for (i, m) in ms.iter().enumerate() {
                let role_ok = m["role"] == "user" || m["role"] == "assistant";
                if !role_ok || !m["content"].is_string() {
                    errors.push(format!(
                        "messages[{i}]: role user or assistant, string content: {m}"
                    ));
                }
            }
            if ms[0]["role"] != "user" {
                errors.push("the first message must be the user's".into());
            }
        }
        _ => errors.push("`messages` must be a non-empty array".into()),
    }
    let beta = header("anthropic-beta").unwrap_or_default();
    let output = obj.get("output_format");
    let tools = obj.get("tools");
    match expect {
        Expect::StructuredOutputs => {
            if !beta.contains("structured-outputs-2025-11-13") {
                errors.push("structured outputs need the beta header".into());
            }
            if tools.is_some() {
                errors.push("unexpected `tools`".into());
            }
            match output {
                Some(o) if o["type"] == "json_schema" => match o.get("schema") {
                    Some(s) => schema_errors(s, "output_format.schema", &mut errors),
                    None => errors.push("output_format.schema is missing".into()),
                },
                other => errors.push(format!(
                    "expected a json_schema output_format, got {other:?}"
                )),
            }
        }
        Expect::ToolUse => {
            if output.is_some() {
                errors.push("unexpected `output_format`".into());
            }
            match tools.and_then(Value::as_array).map(Vec::as_slice) {
                Some([tool]) => {
                    let name = tool["name"].as_str().unwrap_or_default();
                    let name_ok = (1..=64).contains(&name.len())
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if !name_ok {
                        errors.push(format!("bad tool name `{name}`"));
                    }
                    if obj.get("tool_choice") != Some(&json!({"type": "tool", "name": name})) {
                        errors.push("`tool_choice` must force the tool".into());
                    }
                    match tool.get("input_schema") {
                        Some(s) if s["type"] == "object" => {
                            schema_errors(s, "input_schema", &mut errors)
                        }
                        other => errors.push(format!("bad input_schema {other:?}")),
                    }
                }
                other => errors.push(format!("expected one tool, got {other:?}")),
            }
        }
        Expect::PromptOnly => {
            if output.is_some() || tools.is_some() {
                errors.push("prompt-only requests carry no output_format or tools".into());
            }
        }
    }
    errors
}

impl AnthropicServer {
    /// Starts a server expecting `expect`-shaped requests, answering `script(request, n)`,
    /// where `n` counts the requests before this one.
    pub async fn start(
        expect: Expect,
        script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static,
    ) -> AnthropicServer {
        let state = Arc::new(State {
            expect,
            script: Box::new(script),
            seen: Mutex::new(Vec::new()),
            shape_errors: Mutex::new(Vec::new()),
        });
        let (addr, task) = listen(state.clone(), serve).await;
        AnthropicServer { addr, state, task }
    }

    /// The base URL (`http://127.0.0.1:PORT`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.state.seen).clone()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        lock(&self.state.seen).len()
    }

    /// Shape problems found in the requests.
    pub fn shape_errors(&self) -> Vec<String> {
        lock(&self.state.shape_errors).clone()
    }
}

async fn write_head(
    stream: &mut TcpStream,
    code: u16,
    headers: &[(String, String)],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {code} {}\r\n", reason(code));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("Connection: close\r\n");
    stream.write_all(head.as_bytes()).await
}

async fn write_reply(stream: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    let (code, mut headers, body) = match reply {
        Reply::Reset => {
            stream.set_zero_linger()?;
            return Ok(());
        }
        Reply::Stream { text, chunk } => {
            stream.set_nodelay(true)?;
            let headers = [
                ("Content-Type".to_owned(), "text/event-stream".to_owned()),
                ("Cache-Control".to_owned(), "no-cache".to_owned()),
            ];
            write_head(stream, 200, &headers).await?;
            stream.write_all(b"\r\n").await?;
            stream.flush().await?;
            // No length: the stream ends when the connection closes.
            for piece in text.as_bytes().chunks(chunk.max(1)) {
                stream.write_all(piece).await?;
                stream.flush().await?;
                tokio::task::yield_now().await;
            }
            return stream.shutdown().await;
        }
        Reply::Message(v) => (200, Vec::new(), v.to_string()),
        Reply::Raw { content_type, body } => {
            (200, vec![("Content-Type".to_owned(), content_type)], body)
        }
        Reply::Status {
            code,
            headers,
            body,
        } => (code, headers, body),
    };
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
    }
    headers.push(("Content-Length".to_owned(), body.len().to_string()));
    write_head(stream, code, &headers).await?;
    stream.write_all(b"\r\n").await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}

async fn serve(mut stream: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    let Some((line, headers, raw)) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let seen = Seen {
        line,
        headers,
        body: serde_json::from_slice(&raw).unwrap_or(Value::Null),
    };
    let errors = check_request(state.expect, &seen);
    let n = {
        let mut all = lock(&state.seen);
        all.push(seen.clone());
        all.len() - 1
    };
    let reply = if errors.is_empty() {
        (state.script)(&seen, n)
    } else {
        lock(&state.shape_errors).extend(errors.iter().cloned());
        Reply::error(400, "invalid_request_error", &errors.join("; "))
    };
    write_reply(&mut stream, reply).await
}
