//! `OpenAiBackend::complete_streaming` and `Extractor::stream` against the scripted server
//! speaking chat-completion server-sent events: the pieces make the reply, the streamed record
//! is `extract`'s, fields arrive before the reply is whole, cut streams end in clear errors,
//! noisy framing and 1-byte writes read like clean streams, grounded values outside the source
//! are never emitted, a 429 before the stream is retried, and dropping the stream hangs up.

#![cfg(feature = "openai")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use contract_backends::openai::{Mode, OpenAiBackend, RetryPolicy};
use contract_core::extract::{
    AttemptError, Backend, BackendError, FieldEvent, Request, Response, StreamEvent,
};
use contract_core::prompt::Messages;
use contract_core::select::Selection;
use contract_core::{Constraint, Contract, Extraction, Extractor, ViolationKind};
use examples::Guidance;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use support::{sse, Expect, Gate, MockServer, Reply, Seen};

const GOOD: &str = r#"{"quarter": 3, "year": 2025, "low": 7230, "high": 7650}"#;
const TRACE: &str = "Third quarter; billions, so 7230 to 7650 millions.";
const DOC: &str = "doc-1: We expect third-quarter 2025 revenue of $7.23 to $7.65 billion.";
/// The longest a test waits for something that must happen (a hang-up, a first event): a
/// bound that turns a hang into a failure, not a measurement.
const PATIENCE: Duration = Duration::from_secs(30);

fn backend(server: &MockServer, max_retries: u32) -> OpenAiBackend {
    OpenAiBackend::builder("mock-model")
        .base_url(server.base_url())
        .api_key("test-key")
        .mode(Mode::StructuredOutputs)
        .timeout(Duration::from_secs(10))
        .retry(RetryPolicy {
            max_retries,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            max_retry_after: Duration::from_secs(5),
        })
        .build()
        .expect("backend")
}

fn extractor(server: &MockServer, max_retries: u32) -> Extractor<Guidance, OpenAiBackend> {
    Extractor::<Guidance, _>::new(backend(server, max_retries))
        .selection(Selection::off())
        .max_attempts(1)
        .max_tokens(200)
}

fn request() -> Request {
    Request::new(
        Constraint::of::<Guidance>(),
        Messages::for_contract::<Guidance>(DOC),
    )
}

fn is_stream(seen: &Seen) -> bool {
    seen.body["stream"] == Value::Bool(true)
}

/// `complete_streaming`'s response and the pieces it handed on.
async fn streamed(
    backend: &OpenAiBackend,
    req: &Request,
) -> (Result<Response, BackendError>, Vec<String>) {
    let pieces = Mutex::new(Vec::new());
    let on_text = |p: &str| pieces.lock().unwrap().push(p.to_owned());
    let r = backend.complete_streaming(req, &on_text).await;
    (r, pieces.into_inner().unwrap())
}

/// Every event of `extractor.stream(doc)`: the fields, then the record (checked to be last).
async fn run_stream<C: Contract + Send>(
    extractor: &Extractor<C, OpenAiBackend>,
    doc: &str,
) -> (Vec<FieldEvent>, Extraction<C>) {
    let mut stream = extractor.stream(doc);
    let mut fields = Vec::new();
    let mut done = None;
    while let Some(event) = stream.next().await {
        assert!(done.is_none(), "an event after Done");
        match event {
            StreamEvent::Field(f) => fields.push(f),
            StreamEvent::Done(out) => done = Some(out),
        }
    }
    (fields, done.expect("a Done event"))
}

/// A record as JSON without its timings (which differ between any two runs).
fn comparable<C: Serialize>(ex: &Extraction<C>) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|k, _| k != "timings" && k != "ms" && !k.ends_with("_ms"));
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(ex).expect("a record serialises");
    strip(&mut v);
    v
}

fn backend_error<C>(ex: &Extraction<C>) -> BackendError {
    match &ex.error {
        Some(AttemptError::Backend { error }) => error.clone(),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

/// `data:` events for content `pieces` (no role chunk, no end).
fn content(pieces: &[&str]) -> String {
    pieces
        .iter()
        .map(|p| {
            let c = json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]});
            format!("data: {c}\n\n")
        })
        .collect()
}

/// The end of a stream: a `stop` chunk and `[DONE]`.
fn end() -> String {
    let c = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    format!("data: {c}\n\ndata: [DONE]\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pieces_make_the_reply_and_the_streamed_record_is_extracts() {
    // Streamed requests get the stream, the others the same completion whole.
    let server = MockServer::start(Expect::StructuredOutputs, |seen, _| {
        if is_stream(seen) {
            Reply::Stream {
                text: sse(GOOD, Some(TRACE), "stop", true, 4),
                chunk: 7,
            }
        } else {
            Reply::Content {
                content: Some(GOOD.into()),
                reasoning_content: Some(TRACE.into()),
                refusal: None,
                finish_reason: "stop".into(),
            }
        }
    })
    .await;
    let b = backend(&server, 0);
    let req = request();
    let whole = b.complete(&req).await.expect("complete");
    let (r, pieces) = streamed(&b, &req).await;
    let r = r.expect("complete_streaming");
    assert_eq!(
        r, whole,
        "the same response, reasoning, finish reason and usage"
    );
    assert_eq!(r.reasoning.as_deref(), Some(TRACE));
    assert_eq!(
        (r.prompt_tokens, r.completion_tokens),
        (Some(100), Some(20))
    );
    assert!(pieces.len() > 5, "handed on in {} pieces", pieces.len());
    assert_eq!(pieces.concat(), GOOD);

    // What a streamed request says.
    let seen = server.seen();
    assert_eq!(server.shape_errors(), Vec::<String>::new());
    let asked = &seen[1];
    assert!(is_stream(asked));
    assert_eq!(asked.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        asked.headers.get("accept").map(String::as_str),
        Some("text/event-stream")
    );
    assert!(!is_stream(&seen[0]) && seen[0].body.get("stream_options").is_none());
    let quiet = OpenAiBackend::builder("m")
        .base_url(server.base_url())
        .stream_usage(false)
        .build()
        .expect("backend");
    let body = quiet.streaming_body(&req).expect("body");
    assert_eq!(
        (body["stream"].clone(), body.get("stream_options")),
        (json!(true), None)
    );

    // The stream's record is `extract`'s, every non-null field emitted once before it.
    let x = extractor(&server, 0);
    let extracted = x.extract(DOC).await;
    let (fields, done) = run_stream(&x, DOC).await;
    assert!(done.is_ok(), "{:?} {:?}", done.error, done.violations);
    assert_eq!(comparable(&done), comparable(&extracted));
    assert_eq!(done.reasoning.as_deref(), Some(TRACE));
    let Some(Value::Object(json)) = &done.json else {
        panic!("an object: {:?}", done.json)
    };
    for (name, value) in json.iter().filter(|(_, v)| !v.is_null()) {
        let emitted: Vec<&Value> = fields
            .iter()
            .filter(|f| f.path == format!("/{name}"))
            .map(|f| &f.value)
            .collect();
        assert_eq!(emitted, vec![value], "{name}");
    }
    assert_eq!(fields.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_arrive_before_the_reply_is_whole_and_dropping_the_stream_hangs_up() {
    let first = format!(
        "{}{}",
        sse("", None, "stop", false, 5)
            .split("\n\n")
            .next()
            .map(|role| format!("{role}\n\n"))
            .unwrap_or_default(),
        content(&[r#"{"quarter": 3, "#])
    );
    let rest = format!(
        "{}{}",
        content(&[r#""year": 2025, "low": 7230"#, r#", "high": 7650}"#]),
        end()
    );
    for release in [false, true] {
        let gate = Arc::new(Gate::default());
        let (f, r, g) = (first.clone(), rest.clone(), gate.clone());
        let server = MockServer::start(Expect::StructuredOutputs, move |_, _| Reply::Held {
            first: f.clone(),
            rest: r.clone(),
            gate: g.clone(),
        })
        .await;
        let x = extractor(&server, 0);
        let mut stream = x.stream(DOC);
        // The server holds the rest of the reply: the first field comes from the part sent.
        let event = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("a field before the reply is whole");
        match event {
            Some(StreamEvent::Field(f)) => {
                assert_eq!((f.path.as_str(), &f.value), ("/quarter", &json!(3)))
            }
            other => panic!("expected the quarter first, got {other:?}"),
        }
        if release {
            gate.release();
            let mut rest = Vec::new();
            while let Some(event) = stream.next().await {
                rest.push(event);
            }
            match rest.pop() {
                Some(StreamEvent::Done(done)) => {
                    assert!(done.is_ok(), "{:?}", done.error);
                    assert_eq!(done.value.and_then(|g| g.high), Some(7650.0));
                }
                other => panic!("expected Done last, got {other:?}"),
            }
            assert_eq!(rest.len(), 3, "year, then low and high together");
            assert!(!gate.saw_hang_up(), "the reply was read to its end");
        } else {
            // Dropping the stream mid-reply closes the connection.
            drop(stream);
            tokio::time::timeout(PATIENCE, gate.hung_up())
                .await
                .expect("the client hangs up when the stream is dropped");
            assert!(gate.saw_hang_up());
        }
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_value_is_a_clear_error_never_a_value() {
    // Closed inside the year, no `[DONE]`; the quarter went out before the cut.
    let cut = content(&[r#"{"quarter": 3, "#, r#""year": 20"#]);
    let server = MockServer::start(Expect::StructuredOutputs, move |_, _| Reply::Stream {
        text: cut.clone(),
        chunk: 3,
    })
    .await;
    let x = extractor(&server, 3);
    let (fields, done) = run_stream(&x, DOC).await;
    let err = backend_error(&done);
    assert_eq!(err.kind(), "protocol", "{err}");
    let said = err.to_string();
    assert!(said.contains("before `data: [DONE]`"), "{said}");
    assert!(said.contains("not retried"), "{said}");
    assert!(done.value.is_none() && done.json.is_none());
    assert!(
        done.attempts.iter().all(|a| a.raw.is_none()),
        "nothing parsed"
    );
    assert_eq!(
        server.request_count(),
        1,
        "pieces went out: a new attempt would start another reply"
    );
    let paths: Vec<&str> = fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["/quarter"], "the year was never closed");

    // The same cut before any content went out: retried, and the pieces are the reply's once.
    let whole = sse(GOOD, None, "stop", true, 5);
    let role_only = whole[..whole.find("\n\n").unwrap() + 2].to_owned();
    let server = MockServer::start(Expect::StructuredOutputs, move |_, n| Reply::Stream {
        text: if n == 0 {
            role_only.clone()
        } else {
            whole.clone()
        },
        chunk: 4,
    })
    .await;
    let (r, pieces) = streamed(&backend(&server, 3), &request()).await;
    assert_eq!(r.expect("retried").text, GOOD);
    assert_eq!(pieces.concat(), GOOD);
    assert_eq!(server.request_count(), 2);

    // An error chunk after content: a clear error, not retried.
    let failing = format!(
        "{}data: {}\n\n",
        content(&[r#"{"quarter": 3, "#]),
        json!({"error": {"message": "the model crashed", "type": "server_error"}})
    );
    let server = MockServer::start(Expect::StructuredOutputs, move |_, _| Reply::Stream {
        text: failing.clone(),
        chunk: 16,
    })
    .await;
    let (r, _) = streamed(&backend(&server, 3), &request()).await;
    let err = r.expect_err("error chunk");
    assert!(err.to_string().contains("the model crashed"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noisy_framing_and_one_byte_writes_read_like_a_clean_stream() {
    let clean = sse(GOOD, Some(TRACE), "stop", true, 3);
    let mut noisy = String::from(": connected\r\n\r\n");
    for (i, event) in clean.split_terminator("\n\n").enumerate() {
        let data = event.strip_prefix("data: ").expect("a data line");
        // Every event's JSON over two `data:` lines (joined with a newline: still JSON), a
        // keep-alive comment and an empty event between events, CRLF and LF mixed, the role
        // chunk and `[DONE]` twice.
        // Split after the opening brace, where the joining newline is whitespace.
        let (a, b) = data.split_at(1.min(data.len()));
        let framed = if data == "[DONE]" {
            "data: [DONE]\n\n".to_owned()
        } else {
            format!("data: {a}\ndata: {b}\n\n")
        };
        let framed = if i % 2 == 0 {
            framed.replace('\n', "\r\n")
        } else {
            framed
        };
        noisy.push_str(&framed);
        if i == 0 {
            noisy.push_str(&framed);
        }
        noisy.push_str(": keep-alive\n\ndata:\n\n");
    }
    noisy.push_str("data: [DONE]\n\n");
    let script = |text: String, chunk| {
        move |_: &Seen, _: usize| Reply::Stream {
            text: text.clone(),
            chunk,
        }
    };
    let server = MockServer::start(Expect::StructuredOutputs, script(clean, usize::MAX)).await;
    let (want, _) = streamed(&backend(&server, 0), &request()).await;
    let want = want.expect("clean");
    assert_eq!(want.text, GOOD);
    for (name, chunk) in [("1-byte writes", 1), ("5-byte writes", 5)] {
        let server =
            MockServer::start(Expect::StructuredOutputs, script(noisy.clone(), chunk)).await;
        let (r, pieces) = streamed(&backend(&server, 0), &request()).await;
        assert_eq!(r.expect(name), want, "{name}");
        assert_eq!(pieces.concat(), GOOD, "{name}");
        assert_eq!(server.request_count(), 1);
        let (_, done) = run_stream(&extractor(&server, 0), DOC).await;
        assert!(done.is_ok(), "{name}: {:?}", done.error);
        assert_eq!(done.value.and_then(|g| g.low), Some(7230.0), "{name}");
    }
}

/// A lease's tenant and rent, copied from the document.
#[derive(Contract, Debug, Serialize, Deserialize)]
struct Lease {
    /// The tenant's name, copied from the lease.
    #[contract(grounded, len = 1..=80)]
    tenant: Option<String>,
    /// The monthly rent.
    #[contract(grounded, range = 1..=1000000)]
    rent: Option<u32>,
}

const LEASE: &str = "doc-2: This lease is between Acme Rentals and Blue Fin Foods Ltd.\n\
                     The monthly rent is 4200 dollars.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_grounded_value_outside_the_source_is_never_emitted() {
    for (reply, tenant, rent) in [
        (
            r#"{"tenant": "Blue Fin Foods Ltd", "rent": 4200}"#,
            true,
            true,
        ),
        (
            r#"{"tenant": "Red Herring Inc", "rent": 4200}"#,
            false,
            true,
        ),
        (
            r#"{"tenant": "Blue Fin Foods Ltd", "rent": 9999}"#,
            true,
            false,
        ),
    ] {
        let server = MockServer::start(Expect::StructuredOutputs, move |_, _| Reply::Stream {
            text: sse(reply, None, "stop", true, 3),
            chunk: 2,
        })
        .await;
        let x = Extractor::<Lease, _>::new(backend(&server, 0))
            .selection(Selection::off())
            .max_attempts(1);
        let (fields, done) = run_stream(&x, LEASE).await;
        let emitted = |path: &str| {
            fields
                .iter()
                .find(|f| f.path == path)
                .map(|f| f.value.clone())
        };
        assert_eq!(
            emitted("/tenant"),
            tenant.then(|| json!("Blue Fin Foods Ltd")),
            "{reply}"
        );
        assert_eq!(emitted("/rent"), rent.then(|| json!(4200)), "{reply}");
        assert_eq!(done.is_ok(), tenant && rent, "{reply}");
        if !(tenant && rent) {
            assert!(done.value.is_none(), "{reply}");
            assert!(
                done.violations.has_kind(ViolationKind::NotInSource),
                "{reply}: {:?}",
                done.violations
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_before_the_stream_is_retried() {
    let server = MockServer::start(Expect::StructuredOutputs, |_, n| {
        if n == 0 {
            Reply::rate_limited("0")
        } else {
            Reply::stream(GOOD, 3)
        }
    })
    .await;
    let (r, pieces) = streamed(&backend(&server, 2), &request()).await;
    assert_eq!(r.expect("retried").text, GOOD);
    assert_eq!(pieces.concat(), GOOD, "nothing was handed on twice");
    assert_eq!(server.request_count(), 2);

    // Without retries the 429 is the error.
    let server =
        MockServer::start(Expect::StructuredOutputs, |_, _| Reply::rate_limited("0")).await;
    let (r, pieces) = streamed(&backend(&server, 0), &request()).await;
    assert_eq!(r.expect_err("429").kind(), "rate_limited");
    assert!(pieces.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_stream_is_read_whole() {
    let server = MockServer::start(Expect::StructuredOutputs, |_, _| Reply::ok(GOOD)).await;
    let b = backend(&server, 0);
    let (r, pieces) = streamed(&b, &request()).await;
    assert_eq!(
        r.expect("whole"),
        b.complete(&request()).await.expect("complete")
    );
    assert_eq!(pieces, [GOOD]);
}

/// The parties a lease names, each with the line that names it.
#[derive(Contract, Debug, Serialize, Deserialize)]
struct Parties {
    /// Every party named, copied from the line cited.
    #[contract(len = 1..=4)]
    parties: Vec<contract_core::Evidenced<String>>,
    /// The monthly rent.
    #[contract(grounded)]
    rent: Option<u32>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_items_arrive_one_by_one_over_server_sent_events() {
    let item = |party: &str| {
        format!(
            r#"{{"evidence": [{{"start_line": 1, "end_line": 1, "quote": null}}], "value": "{party}"}}"#
        )
    };
    let (acme, blue) = (item("Acme Rentals"), item("Blue Fin Foods Ltd"));
    // The server sends the first item and half the second, then holds the rest; the pieces cut
    // inside both items.
    let sent = format!(r#"{{"parties": [{acme}, {}"#, &blue[..30]);
    let held = format!(r#"{}, {}], "rent": 4200}}"#, &blue[30..], item("Acme"));
    // Pieces of 9 bytes (the text is ASCII).
    let sse_of = |text: &str| -> String {
        let pieces: Vec<&str> = text
            .as_bytes()
            .chunks(9)
            .filter_map(|c| std::str::from_utf8(c).ok())
            .collect();
        content(&pieces)
    };
    let (first, rest) = (sse_of(&sent), format!("{}{}", sse_of(&held), end()));
    let gate = Arc::new(Gate::default());
    let g = gate.clone();
    let server = MockServer::start(Expect::StructuredOutputs, move |_, _| Reply::Held {
        first: first.clone(),
        rest: rest.clone(),
        gate: g.clone(),
    })
    .await;
    let x = Extractor::<Parties, _>::new(backend(&server, 0))
        .selection(Selection::off())
        .max_attempts(1);
    let mut stream = x.stream(LEASE);
    // The first item is closed in what was sent: it comes before the reply is whole, with its
    // span; the second, cut in the middle, does not.
    match tokio::time::timeout(PATIENCE, stream.next()).await {
        Ok(Some(StreamEvent::Field(f))) => {
            assert_eq!((f.path.as_str(), f.item), ("/parties/0", Some(0)));
            assert_eq!(f.value["value"], json!("Acme Rentals"));
            assert_eq!(f.value["evidence"][0]["start_line"], json!(1));
        }
        other => panic!("expected the first item, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(300), stream.next())
            .await
            .is_err(),
        "nothing more until the server sends the rest"
    );
    gate.release();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let Some(StreamEvent::Done(done)) = events.pop() else {
        panic!("Done last")
    };
    let paths: Vec<String> = events
        .iter()
        .map(|e| match e {
            StreamEvent::Field(f) => f.path.clone(),
            StreamEvent::Done(_) => "done".into(),
        })
        .collect();
    assert_eq!(paths, ["/parties/1", "/parties/2", "/parties", "/rent"]);
    assert!(done.is_ok(), "{:?} {:?}", done.error, done.violations);
    let json = done.json.clone().expect("the reply's JSON");
    for e in &events {
        if let StreamEvent::Field(f) = e {
            assert_eq!(Some(&f.value), json.pointer(&f.path), "{}", f.path);
        }
    }
    assert!(!gate.saw_hang_up());
}
