//! A scripted OpenAI-compatible server on 127.0.0.1 for the backend and batch tests.
//!
//! Written on raw tokio TCP rather than axum or wiremock because the faults under test live
//! below HTTP: a connection reset before any reply (`SO_LINGER` 0, so the peer sees RST), a body
//! shorter than its `Content-Length`, a reply slower than the client's timeout. Each request is
//! parsed, its shape checked against the mode the test expects (OpenAI strict-schema rules via
//! the independent checker in `contract_tests::openai_rules`), and answered by the script.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub mod anthropic;

/// The request shape a test expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `response_format` json_schema, strict, with a schema that passes the OpenAI rules.
    StructuredOutputs,
    /// `response_format` `{"type": "json_object"}`.
    JsonMode,
    /// No `response_format`, no `guided_json`.
    PromptOnly,
    /// `guided_json` with a schema, no `response_format`.
    VllmGuidedJson,
    /// `response_format` `{"type": "json_object", "schema": ...}` (llama-cpp-python).
    JsonObjectSchema,
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A chat completion with this content.
    Content {
        /// `message.content`.
        content: Option<String>,
        /// `message.reasoning_content`.
        reasoning_content: Option<String>,
        /// `message.refusal`.
        refusal: Option<String>,
        /// `finish_reason`.
        finish_reason: String,
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
    /// Waits, then answers.
    Slow(Duration, Box<Reply>),
    /// Drops the connection with a reset before answering.
    Reset,
    /// A 200 whose body stops halfway through its `Content-Length`.
    Truncated,
    /// A 200 with an HTML body.
    NotJson,
    /// A 200 `text/event-stream` with this text (see [`sse`]), written `chunk` bytes at a time
    /// (each write flushed alone, Nagle off), then closed: a stream without `[DONE]` is one cut
    /// off.
    Stream {
        /// The events.
        text: String,
        /// Bytes per write.
        chunk: usize,
    },
    /// A 200 `text/event-stream` that writes `first`, then holds the connection until `gate`
    /// is released (then writes `rest` and closes) or the client hangs up (recorded in `gate`).
    Held {
        /// Written at once.
        first: String,
        /// Written once the gate opens.
        rest: String,
        /// The test's handle.
        gate: Arc<Gate>,
    },
}

/// What a test and a [`Reply::Held`] stream share.
#[derive(Debug, Default)]
pub struct Gate {
    release: tokio::sync::Notify,
    hung_up: tokio::sync::Notify,
    saw_hang_up: std::sync::atomic::AtomicBool,
}

impl Gate {
    /// Lets the held stream go on.
    pub fn release(&self) {
        self.release.notify_one();
    }

    /// Waits until the client closed the held connection.
    pub async fn hung_up(&self) {
        self.hung_up.notified().await;
    }

    /// Whether the client closed the held connection.
    pub fn saw_hang_up(&self) -> bool {
        self.saw_hang_up.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A streamed completion as OpenAI sends it: a role chunk, `reasoning` (if any) then `content`
/// in deltas of `piece` characters, a chunk with `finish_reason`, a usage chunk (when `usage`),
/// then `data: [DONE]`.
pub fn sse(
    content: &str,
    reasoning: Option<&str>,
    finish: &str,
    usage: bool,
    piece: usize,
) -> String {
    let mut out = String::new();
    let mut chunk = |delta: Value, finish: Option<&str>| {
        let c = json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        out.push_str(&format!("data: {c}\n\n"));
    };
    chunk(json!({"role": "assistant", "content": ""}), None);
    let pieces = |text: &str| -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        chars
            .chunks(piece.max(1))
            .map(|c| c.iter().collect())
            .collect()
    };
    for p in pieces(reasoning.unwrap_or_default()) {
        chunk(json!({"reasoning_content": p}), None);
    }
    for p in pieces(content) {
        chunk(json!({"content": p}), None);
    }
    chunk(json!({}), Some(finish));
    if usage {
        let c = json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        });
        out.push_str(&format!("data: {c}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

impl Reply {
    /// A completion with `content`, finish reason `stop`.
    pub fn ok(content: impl Into<String>) -> Reply {
        Reply::Content {
            content: Some(content.into()),
            reasoning_content: None,
            refusal: None,
            finish_reason: "stop".into(),
        }
    }

    /// A status with a JSON error body.
    pub fn status(code: u16, message: &str) -> Reply {
        Reply::Status {
            code,
            headers: Vec::new(),
            body: json!({"error": {"message": message, "type": "server_error", "code": null}})
                .to_string(),
        }
    }

    /// The stream of a completion with `content` (deltas of 5 characters, usage included),
    /// written `chunk` bytes at a time.
    pub fn stream(content: &str, chunk: usize) -> Reply {
        Reply::Stream {
            text: sse(content, None, "stop", true, 5),
            chunk,
        }
    }

    /// A 429 with `Retry-After: value`.
    pub fn rate_limited(retry_after: &str) -> Reply {
        Reply::Status {
            code: 429,
            headers: vec![("Retry-After".into(), retry_after.into())],
            body: json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})
                .to_string(),
        }
    }
}

/// One request the server got.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request line (`POST /v1/chat/completions HTTP/1.1`).
    pub line: String,
    /// Headers, names lowercase.
    pub headers: HashMap<String, String>,
    /// The JSON body (`Null` when it is not JSON).
    pub body: Value,
    /// The script key ([`doc_key`]).
    pub key: String,
    /// When it arrived.
    pub at: Instant,
}

type Script = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

struct State {
    expect: Expect,
    script: Box<Script>,
    seen: Mutex<Vec<Seen>>,
    counts: Mutex<HashMap<String, usize>>,
    shape_errors: Mutex<Vec<String>>,
}

/// The running server; it stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Locks `m`, through poisoning.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key a script sees: the first `doc-<digits>` in the last user message, else that message.
pub fn doc_key(body: &Value) -> String {
    let user = body["messages"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    match user.find("doc-") {
        Some(i) => {
            let digits: String = user[i + 4..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            format!("doc-{digits}")
        }
        None => user.to_owned(),
    }
}

/// Checks a request body against the shape `expect` asks for; every problem found.
pub fn check_shape(expect: Expect, body: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(obj) = body.as_object() else {
        return vec!["the body is not a JSON object".into()];
    };
    if obj
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errors.push("`model` must be a non-empty string".into());
    }
    match obj.get("messages").and_then(Value::as_array) {
        Some(ms) if !ms.is_empty() => {
            for (i, m) in ms.iter().enumerate() {
                let role_ok = m["role"]
                    .as_str()
                    .is_some_and(|r| ["system", "user", "assistant", "developer"].contains(&r));
                if !role_ok || !m["content"].is_string() {
                    errors.push(format!(
                        "messages[{i}] needs a known role and string content: {m}"
                    ));
                }
            }
            if ms[0]["role"] != "system" {
                errors.push("the first message must be the system message".into());
            }
        }
        _ => errors.push("`messages` must be a non-empty array".into()),
    }
    match obj.get("stream") {
        None | Some(Value::Bool(false)) => {
            if obj.contains_key("stream_options") {
                errors.push("`stream_options` is only allowed with `stream: true`".into());
            }
        }
        Some(Value::Bool(true)) => match obj.get("stream_options") {
            None => {}
            Some(o) if o.get("include_usage").is_none_or(Value::is_boolean) => {}
            Some(o) => errors.push(format!("bad `stream_options`: {o}")),
        },
        Some(other) => errors.push(format!("`stream` must be a boolean, not {other}")),
    }
    let rf = obj.get("response_format");
    let guided = obj.get("guided_json");
    let check_schema = |errors: &mut Vec<String>, what: &str, schema: Option<&Value>| match schema {
        Some(s) => {
            if let Err(es) = contract_tests::openai_rules::check(s) {
                errors.extend(es.into_iter().map(|e| format!("{what}: {e}")));
            }
        }
        None => errors.push(format!("{what} is missing")),
    };
    match expect {
        Expect::StructuredOutputs => {
            if guided.is_some() {
                errors.push("unexpected `guided_json`".into());
            }
            match rf {
                Some(rf) if rf["type"] == "json_schema" => {
                    let js = &rf["json_schema"];
                    let name_ok = js["name"].as_str().is_some_and(|n| {
                        (1..=64).contains(&n.len())
                            && n.chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    });
                    if !name_ok {
                        errors.push(format!("bad json_schema.name: {}", js["name"]));
                    }
                    if js["strict"] != Value::Bool(true) {
                        errors.push("json_schema.strict must be true".into());
                    }
                    check_schema(&mut errors, "json_schema.schema", js.get("schema"));
                }
                other => errors.push(format!(
                    "expected a json_schema response_format, got {other:?}"
                )),
            }
        }
        Expect::JsonMode => {
            if rf != Some(&json!({"type": "json_object"})) {
                errors.push(format!("expected response_format json_object, got {rf:?}"));
            }
            if guided.is_some() {
                errors.push("unexpected `guided_json`".into());
            }
        }
        Expect::PromptOnly => {
            if rf.is_some() || guided.is_some() {
                errors.push("prompt-only requests carry no response_format or guided_json".into());
            }
        }
        Expect::JsonObjectSchema => {
            if rf.and_then(|r| r["type"].as_str()) != Some("json_object") {
                errors.push(format!("expected response_format json_object, got {rf:?}"));
            }
            if guided.is_some() {
                errors.push("unexpected `guided_json`".into());
            }
            check_schema(
                &mut errors,
                "response_format.schema",
                rf.and_then(|r| r.get("schema")),
            );
        }
        Expect::VllmGuidedJson => {
            if rf.is_some() {
                errors.push("unexpected `response_format` with guided_json".into());
            }
            check_schema(&mut errors, "guided_json", guided);
        }
    }
    errors
}

impl MockServer {
    /// Starts a server expecting `expect`-shaped requests, answering with `script(request, n)`,
    /// where `n` counts earlier requests with the same [`doc_key`].
    pub async fn start(
        expect: Expect,
        script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static,
    ) -> MockServer {
        let state = Arc::new(State {
            expect,
            script: Box::new(script),
            seen: Mutex::new(Vec::new()),
            counts: Mutex::new(HashMap::new()),
            shape_errors: Mutex::new(Vec::new()),
        });
        let (addr, task) = listen(state.clone(), serve).await;
        MockServer { addr, state, task }
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.state.seen).clone()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        lock(&self.state.seen).len()
    }

    /// Requests per key.
    pub fn counts(&self) -> HashMap<String, usize> {
        lock(&self.state.counts).clone()
    }

    /// Shape problems found in the requests.
    pub fn shape_errors(&self) -> Vec<String> {
        lock(&self.state.shape_errors).clone()
    }
}

/// Listens on a free port of 127.0.0.1 and serves each connection on its own task with
/// `serve(connection, state)`; the accept loop runs until the returned task is aborted.
pub async fn listen<S, Fut>(
    state: Arc<S>,
    serve: fn(TcpStream, Arc<S>) -> Fut,
) -> (SocketAddr, tokio::task::JoinHandle<()>)
where
    S: Send + Sync + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let _ = serve(stream, state).await;
            });
        }
    });
    (addr, task)
}

/// Reads one HTTP request: its request line, headers (names lowercase) and body; `None` when the
/// peer closed the connection first.
pub async fn read_request(
    stream: &mut TcpStream,
) -> std::io::Result<Option<(String, HashMap<String, String>, Vec<u8>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default().to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some((line, headers, body)))
}

fn completion(body: &Value, reply: &Reply) -> String {
    let Reply::Content {
        content,
        reasoning_content,
        refusal,
        finish_reason,
    } = reply
    else {
        unreachable!()
    };
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": content,
                "refusal": refusal,
                "reasoning_content": reasoning_content,
            },
            "finish_reason": finish_reason,
        }],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    })
    .to_string()
}

/// The reason phrase for the status codes the scripts use.
pub fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

async fn write_reply(stream: &mut TcpStream, body: &Value, reply: Reply) -> std::io::Result<()> {
    let (code, headers, payload) = match reply {
        Reply::Slow(wait, inner) => {
            tokio::time::sleep(wait).await;
            return Box::pin(write_reply(stream, body, *inner)).await;
        }
        Reply::Reset => {
            stream.set_zero_linger()?;
            return Ok(());
        }
        Reply::Truncated => {
            let full = completion(body, &Reply::ok("{\"quarter\": 1}"));
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                full.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&full.as_bytes()[..full.len() / 2]).await?;
            stream.flush().await?;
            // A clean close (FIN), so the client reads the headers and half the body first.
            return stream.shutdown().await;
        }
        Reply::Stream { text, chunk } => {
            stream.set_nodelay(true)?;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n")
                .await?;
            stream.flush().await?;
            // No length: the stream ends when the connection closes.
            for piece in text.as_bytes().chunks(chunk.max(1)) {
                stream.write_all(piece).await?;
                stream.flush().await?;
                tokio::task::yield_now().await;
            }
            return stream.shutdown().await;
        }
        Reply::Held { first, rest, gate } => {
            stream.set_nodelay(true)?;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                .await?;
            stream.write_all(first.as_bytes()).await?;
            stream.flush().await?;
            let mut buf = [0u8; 256];
            loop {
                tokio::select! {
                    () = gate.release.notified() => {
                        stream.write_all(rest.as_bytes()).await?;
                        stream.flush().await?;
                        return stream.shutdown().await;
                    }
                    read = stream.read(&mut buf) => {
                        // The client sends nothing more: a read that ends is its hang-up.
                        if matches!(read, Ok(0) | Err(_)) {
                            gate.saw_hang_up.store(true, std::sync::atomic::Ordering::SeqCst);
                            gate.hung_up.notify_one();
                            return Ok(());
                        }
                    }
                }
            }
        }
        Reply::NotJson => (
            200,
            vec![("Content-Type".to_owned(), "text/html".to_owned())],
            "<html><body>502 Bad Gateway</body></html>".to_owned(),
        ),
        r @ Reply::Content { .. } => (
            200,
            vec![("Content-Type".to_owned(), "application/json".to_owned())],
            completion(body, &r),
        ),
        Reply::Status {
            code,
            mut headers,
            body,
        } => {
            headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
            (code, headers, body)
        }
    };
    let mut head = format!("HTTP/1.1 {code} {}\r\n", reason(code));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        payload.len()
    ));
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(payload.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}

async fn serve(mut stream: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    let Some((line, headers, raw)) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let mut errors = Vec::new();
    if !line.starts_with("POST /v1/chat/completions ") {
        errors.push(format!("unexpected request line `{line}`"));
    }
    if !headers
        .get("content-type")
        .is_some_and(|v| v.starts_with("application/json"))
    {
        errors.push("the content type must be application/json".into());
    }
    errors.extend(check_shape(state.expect, &body));
    let key = doc_key(&body);
    let seen = Seen {
        line,
        headers,
        body: body.clone(),
        key: key.clone(),
        at: Instant::now(),
    };
    let n = {
        let mut counts = lock(&state.counts);
        let c = counts.entry(key).or_insert(0);
        *c += 1;
        *c - 1
    };
    let reply = if errors.is_empty() {
        (state.script)(&seen, n)
    } else {
        lock(&state.shape_errors).extend(errors.iter().cloned());
        Reply::Status {
            code: 400,
            headers: Vec::new(),
            body: json!({"error": {"message": errors.join("; "), "type": "invalid_request_error"}})
                .to_string(),
        }
    };
    lock(&state.seen).push(seen);
    write_reply(&mut stream, &body, reply).await
}
