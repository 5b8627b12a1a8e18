//! `AnthropicBackend` against a scripted server that speaks the Messages API: the request per
//! mode (schema in Anthropic's subset, what moved, system prompt, headers), replies whole and
//! streamed (cut into 1-byte chunks, pings, empty events, error events, streams closed early),
//! refusals, truncation, grounding on receipt, hostile bodies and every retried fault.

#![cfg(feature = "anthropic")]

mod support;

use std::time::Duration;

use contract_backends::anthropic::{AnthropicBackend, Mode, RetryPolicy, REFUSAL_PREFIX};
use contract_core::extract::{AttemptError, BackendError, FinishReason};
use contract_core::{Contract, Extraction, Extractor, ViolationKind};
use examples::Guidance;
use serde::{Deserialize, Serialize};
use serde_json::json;
use support::anthropic::{error_event, events, AnthropicServer, Block, Expect, Reply};

const GOOD: &str = r#"{"quarter": 3, "year": 2025, "low": 7230, "high": 7650}"#;
const DOC: &str = "doc-1: We expect third-quarter 2025 revenue of $7.23 to $7.65 billion.";

fn backend(server: &AnthropicServer, mode: Mode, stream: bool, retries: u32) -> AnthropicBackend {
    AnthropicBackend::builder("mock-claude")
        .base_url(server.base_url())
        .api_key("test-key")
        .mode(mode)
        .stream(stream)
        .timeout(Duration::from_millis(2000))
        .retry(RetryPolicy {
            max_retries: retries,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            max_retry_after: Duration::from_secs(5),
        })
        .build()
        .expect("backend")
}

async fn extract(backend: AnthropicBackend) -> Extraction<Guidance> {
    Extractor::<Guidance, _>::new(backend)
        .max_attempts(2)
        .max_tokens(200)
        .extract(DOC)
        .await
}

fn backend_error<C>(ex: &Extraction<C>) -> BackendError {
    match &ex.error {
        Some(AttemptError::Backend { error }) => error.clone(),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

fn quarter(ex: &Extraction<Guidance>) -> Option<u8> {
    ex.value.as_ref().and_then(|g| g.quarter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_sends_its_shape() {
    let tool = |_: &_, _| {
        Reply::Message(support::anthropic::message(
            &[Block::Tool(
                "Guidance".into(),
                serde_json::from_str(GOOD).unwrap(),
            )],
            "tool_use",
        ))
    };
    for (mode, expect) in [
        (Mode::StructuredOutputs, Expect::StructuredOutputs),
        (Mode::ToolUse, Expect::ToolUse),
        (Mode::PromptOnly, Expect::PromptOnly),
    ] {
        let server = if mode == Mode::ToolUse {
            AnthropicServer::start(expect, tool).await
        } else {
            AnthropicServer::start(expect, |_, _| Reply::text(GOOD)).await
        };
        let ex = extract(backend(&server, mode, false, 0)).await;
        assert_eq!(server.shape_errors(), Vec::<String>::new(), "{mode:?}");
        assert!(ex.is_ok(), "{mode:?}: {:?} {:?}", ex.error, ex.violations);
        assert_eq!(quarter(&ex), Some(3), "{mode:?}");
        let seen = server.seen();
        assert_eq!(seen.len(), 1);
        let (body, headers) = (&seen[0].body, &seen[0].headers);
        assert_eq!(body["model"], "mock-claude");
        assert_eq!(body["max_tokens"], 200);
        assert_eq!(
            headers.get("x-api-key").map(String::as_str),
            Some("test-key")
        );
        assert_eq!(
            headers.get("anthropic-version").map(String::as_str),
            Some("2023-06-01")
        );
        assert_eq!(
            headers.contains_key("anthropic-beta"),
            mode == Mode::StructuredOutputs,
            "{mode:?}"
        );
        assert!(body.get("stream").is_none());
        // The signature is in the top-level system prompt, not among the messages.
        let system = body["system"].as_str().unwrap_or_default();
        assert!(
            system.contains(Guidance::signature().trim_end()),
            "{system}"
        );
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .map(|ms| ms.iter().filter_map(|m| m["role"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(roles, ["user"]);
        assert!(body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains(DOC));
        // The schema sent: the strict schema with the bounds moved into descriptions.
        let expected = contract_core::schema::anthropic_schema(&Guidance::strict_schema())
            .expect("anthropic schema");
        let sent = match mode {
            Mode::StructuredOutputs => Some(&body["output_format"]["schema"]),
            Mode::ToolUse => {
                assert_eq!(
                    body["tool_choice"],
                    json!({"type": "tool", "name": "Guidance"})
                );
                Some(&body["tools"][0]["input_schema"])
            }
            _ => None,
        };
        if let Some(sent) = sent {
            assert_eq!(sent, &expected.schema, "{mode:?}");
            let quarter = &sent["properties"]["quarter"];
            assert!(quarter.get("minimum").is_none(), "{quarter}");
            assert!(
                quarter.to_string().contains("From 1 to 4."),
                "the range is said in words: {quarter}"
            );
        }
    }
}

#[test]
fn the_moved_keywords_are_listed() {
    let backend = AnthropicBackend::builder("m")
        .base_url("http://127.0.0.1:9")
        .api_key("k")
        .build()
        .expect("backend");
    let req = contract_core::Request::new(
        contract_core::Constraint::of::<Guidance>(),
        contract_core::prompt::Messages::for_contract::<Guidance>(DOC),
    );
    let schema = backend.output_schema(&req).expect("schema");
    let moved: Vec<(&str, &str, &str)> = schema
        .moved
        .iter()
        .map(|m| (m.path.as_str(), m.keyword.as_str(), m.into.as_str()))
        .collect();
    for expected in [
        ("/properties/quarter", "minimum", "description"),
        ("/properties/quarter", "maximum", "description"),
        ("/properties/year", "minimum", "description"),
        ("/properties/low", "exclusiveMinimum", "description"),
        ("/properties/high", "exclusiveMinimum", "description"),
    ] {
        assert!(moved.contains(&expected), "{expected:?} not in {moved:?}");
    }
    // The same rendering is reused for every request of the contract.
    assert!(std::sync::Arc::ptr_eq(
        &schema,
        &backend.output_schema(&req).expect("again")
    ));
    // The body carries it; a contract without a strict schema is refused before sending.
    let body = backend.request_body(&req).expect("body");
    assert_eq!(body["output_format"]["schema"], schema.schema);
    let loose = contract_core::Request::new(
        std::sync::Arc::new(contract_core::Constraint::unconstrained("Loose")),
        contract_core::prompt::Messages::for_contract::<Guidance>(DOC),
    );
    let err = backend.request_body(&loose).expect_err("no schema");
    assert_eq!(err.kind(), "invalid_request");
    assert!(err.to_string().contains("prompt_only"), "{err}");
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

async fn extract_lease(reply: &'static str, stream: bool) -> Extraction<Lease> {
    let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, _| {
        if stream {
            Reply::stream(&[Block::Text(reply.into())], "end_turn", 3)
        } else {
            Reply::text(reply)
        }
    })
    .await;
    let ex = Extractor::<Lease, _>::new(backend(&server, Mode::StructuredOutputs, stream, 0))
        .max_attempts(1)
        .extract(LEASE)
        .await;
    assert!(
        server.shape_errors().is_empty(),
        "{:?}",
        server.shape_errors()
    );
    ex
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_outside_the_source_is_refused_on_receipt() {
    for stream in [false, true] {
        let ex = extract_lease(r#"{"tenant": "Blue Fin Foods Ltd", "rent": 4200}"#, stream).await;
        assert!(ex.is_ok(), "{:?} {:?}", ex.error, ex.violations);
        assert_eq!(ex.value.as_ref().and_then(|l| l.rent), Some(4200));
        // The backend cannot score, so the extractor read the whole document instead of
        // judging passages, and said why.
        let skipped = ex.selection_skipped.as_ref().map(|s| s.reason.as_str());
        assert!(
            skipped.is_some_and(|r| r.contains("log-probabilities")),
            "{skipped:?}"
        );

        for invented in [
            r#"{"tenant": "Red Herring Inc", "rent": 4200}"#,
            r#"{"tenant": "Blue Fin Foods Ltd", "rent": 9999}"#,
        ] {
            let ex = extract_lease(invented, stream).await;
            assert!(ex.value.is_none(), "{invented}: accepted");
            assert!(
                ex.violations.has_kind(ViolationKind::NotInSource),
                "{invented}: {:?}",
                ex.violations
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_replies_read_like_whole_ones() {
    let blocks = [
        Block::Thinking(
            "Third quarter; the range is in billions, so 7230 to 7650 millions.".into(),
        ),
        Block::Text(GOOD.into()),
    ];
    let plain = events(&blocks, "end_turn");
    let noisy = plain
        .replace(
            "event: content_block_stop",
            "event: ping\ndata: {\"type\": \"ping\"}\n\ndata:\n\n: keep-alive\n\nevent: content_block_stop",
        )
        .replace('\n', "\r\n");
    for (name, text, chunk) in [
        ("whole", plain.clone(), usize::MAX),
        ("1-byte chunks", plain.clone(), 1),
        (
            "pings, comments, empty events, CRLF, 1-byte chunks",
            noisy,
            1,
        ),
    ] {
        let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, _| Reply::Stream {
            text: text.clone(),
            chunk,
        })
        .await;
        let ex = extract(backend(&server, Mode::StructuredOutputs, true, 0)).await;
        assert!(ex.is_ok(), "{name}: {:?} {:?}", ex.error, ex.violations);
        assert_eq!(quarter(&ex), Some(3), "{name}");
        assert_eq!(
            ex.value.as_ref().and_then(|g| g.high),
            Some(7650.0),
            "{name}"
        );
        assert_eq!(
            ex.reasoning.as_deref(),
            Some("Third quarter; the range is in billions, so 7230 to 7650 millions."),
            "{name}: the thinking is kept apart from the value"
        );
        let seen = server.seen();
        assert_eq!(seen[0].body["stream"], true, "{name}");
        assert_eq!(
            seen[0].headers.get("accept").map(String::as_str),
            Some("text/event-stream")
        );
        assert_eq!(server.request_count(), 1, "{name}");
    }

    // A forced tool call, streamed as `input_json_delta` pieces.
    let server = AnthropicServer::start(Expect::ToolUse, |_, _| {
        Reply::stream(
            &[Block::Tool(
                "Guidance".into(),
                serde_json::from_str(GOOD).unwrap(),
            )],
            "tool_use",
            2,
        )
    })
    .await;
    let ex = extract(backend(&server, Mode::ToolUse, true, 0)).await;
    assert!(ex.is_ok(), "{:?} {:?}", ex.error, ex.violations);
    assert_eq!(ex.value.as_ref().and_then(|g| g.low), Some(7230.0));

    // A server that ignores `stream` and answers one message is read all the same.
    let server = AnthropicServer::start(Expect::StructuredOutputs, |_, _| Reply::text(GOOD)).await;
    let ex = extract(backend(&server, Mode::StructuredOutputs, true, 0)).await;
    assert_eq!(quarter(&ex), Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_streams_are_retried_and_end_in_clear_errors() {
    let whole = events(&[Block::Text(GOOD.into())], "end_turn");
    let stop = whole.find("event: message_delta").expect("message_delta");
    let mid_value = whole.find("\"year").expect("a delta inside the value");
    // Cut inside the value and just before the stop: closed cleanly, no `message_stop`.
    let cut_in_value = whole[..whole[..mid_value].rfind("event:").unwrap()].to_owned();
    let cut_at_stop = whole[..stop].to_owned();
    let overloaded = format!(
        "{cut_in_value}{}",
        error_event("overloaded_error", "Overloaded")
    );
    let invalid = format!(
        "{cut_in_value}{}",
        error_event("invalid_request_error", "output_format.schema: bad")
    );
    for (name, broken, kind, text, requests) in [
        (
            "closed in the value",
            cut_in_value.clone(),
            "protocol",
            "before `message_stop`",
            3,
        ),
        (
            "closed before the stop",
            cut_at_stop,
            "protocol",
            "before `message_stop`",
            3,
        ),
        (
            "overloaded mid-stream",
            overloaded,
            "unavailable",
            "overloaded_error",
            3,
        ),
        (
            "invalid mid-stream",
            invalid,
            "invalid_request",
            "output_format.schema: bad",
            1,
        ),
    ] {
        // Persistent: a clear error, and no value from the partial text.
        let b = broken.clone();
        let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, _| Reply::Stream {
            text: b.clone(),
            chunk: 5,
        })
        .await;
        let ex = Extractor::<Guidance, _>::new(backend(&server, Mode::StructuredOutputs, true, 2))
            .max_attempts(1)
            .extract(DOC)
            .await;
        let err = backend_error(&ex);
        assert_eq!(err.kind(), kind, "{name}: {err}");
        assert!(err.to_string().contains(text), "{name}: {err}");
        assert!(ex.value.is_none(), "{name}");
        assert!(
            ex.attempts.iter().all(|a| a.raw.is_none()),
            "{name}: nothing was parsed"
        );
        assert_eq!(server.request_count(), requests, "{name}");

        // Transient: retried, then the whole reply.
        if requests > 1 {
            let whole = whole.clone();
            let server =
                AnthropicServer::start(Expect::StructuredOutputs, move |_, n| Reply::Stream {
                    text: if n == 0 {
                        broken.clone()
                    } else {
                        whole.clone()
                    },
                    chunk: 5,
                })
                .await;
            let ex = extract(backend(&server, Mode::StructuredOutputs, true, 2)).await;
            assert!(ex.is_ok(), "{name}: {:?}", ex.error);
            assert_eq!(quarter(&ex), Some(3), "{name}");
            assert_eq!(server.request_count(), 2, "{name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_faults_are_retried() {
    for (name, fault) in [
        ("429", Reply::rate_limited("0")),
        ("529", Reply::error(529, "overloaded_error", "Overloaded")),
        (
            "500",
            Reply::error(500, "api_error", "Internal server error"),
        ),
        ("reset", Reply::Reset),
        (
            "not json",
            Reply::Raw {
                content_type: "text/html".into(),
                body: "<html>502 Bad Gateway</html>".into(),
            },
        ),
    ] {
        let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, n| {
            if n < 2 {
                fault.clone()
            } else {
                Reply::text(GOOD)
            }
        })
        .await;
        let ex = extract(backend(&server, Mode::StructuredOutputs, false, 2)).await;
        assert!(ex.is_ok(), "{name}: {:?}", ex.error);
        assert_eq!(
            server.request_count(),
            3,
            "{name}: two faults, then the answer"
        );
        assert_eq!(ex.attempts.len(), 1, "{name}: retried below the extractor");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_faults_end_in_clear_errors() {
    for (name, fault, kind, text, requests) in [
        (
            "429",
            Reply::rate_limited("0"),
            "rate_limited",
            "rate limited, 3 attempts",
            3,
        ),
        (
            "529",
            Reply::error(529, "overloaded_error", "Overloaded"),
            "unavailable",
            "HTTP 529 Overloaded: Overloaded (after 3 attempts)",
            3,
        ),
        (
            "400",
            Reply::error(400, "invalid_request_error", "max_tokens: field required"),
            "invalid_request",
            "max_tokens: field required (after 1 attempt)",
            1,
        ),
        (
            "400 too long",
            Reply::error(
                400,
                "invalid_request_error",
                "prompt is too long: 210012 tokens > 200000 maximum",
            ),
            "context_length",
            "210012 tokens exceeds the context of 200000",
            1,
        ),
        (
            "401",
            Reply::error(401, "authentication_error", "invalid x-api-key"),
            "unavailable",
            "not authorised",
            1,
        ),
        // A wait beyond `max_retry_after` ends the retries at once, the wait reported.
        (
            "429 for an hour",
            Reply::rate_limited("3600"),
            "rate_limited",
            "1 attempt",
            1,
        ),
    ] {
        let server =
            AnthropicServer::start(Expect::StructuredOutputs, move |_, _| fault.clone()).await;
        let ex = extract(backend(&server, Mode::StructuredOutputs, false, 2)).await;
        let err = backend_error(&ex);
        assert_eq!(err.kind(), kind, "{name}: {err}");
        assert!(err.to_string().contains(text), "{name}: {err}");
        assert_eq!(server.request_count(), requests, "{name}");
        if name == "429 for an hour" {
            assert!(
                matches!(
                    err,
                    BackendError::RateLimited {
                        retry_after_ms: Some(3_600_000),
                        ..
                    }
                ),
                "{err:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bodies_give_clear_errors() {
    for (name, body, text) in [
        ("not json", "{\"content\": [".to_owned(), "not JSON"),
        (
            "no content",
            json!({"type": "message", "stop_reason": "end_turn"}).to_string(),
            "no `content`",
        ),
        (
            "content a number",
            json!({"content": 7}).to_string(),
            "not a list",
        ),
        (
            "text a list",
            json!({"content": [{"type": "text", "text": ["x"]}]}).to_string(),
            "not a string",
        ),
        (
            "block a string",
            json!({"content": ["hi"]}).to_string(),
            "not an object",
        ),
        ("a json array", "[1, 2, 3]".to_owned(), "not a message"),
    ] {
        let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, _| Reply::Raw {
            content_type: "application/json".into(),
            body: body.clone(),
        })
        .await;
        let ex = extract(backend(&server, Mode::StructuredOutputs, false, 1)).await;
        let err = backend_error(&ex);
        assert_eq!(err.kind(), "protocol", "{name}: {err}");
        assert!(err.to_string().contains(text), "{name}: {err}");
        assert!(ex.value.is_none(), "{name}");
        assert_eq!(server.request_count(), 2, "{name}: retried once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_is_reported_and_not_retried() {
    for stream in [false, true] {
        let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, _| {
            let blocks = [Block::Text("I can't help with that.".into())];
            if stream {
                Reply::stream(&blocks, "refusal", 4)
            } else {
                Reply::Message(support::anthropic::message(&blocks, "refusal"))
            }
        })
        .await;
        let ex = extract(backend(&server, Mode::StructuredOutputs, stream, 3)).await;
        let err = backend_error(&ex);
        assert_eq!(err.kind(), "other");
        assert!(err.to_string().starts_with(REFUSAL_PREFIX), "{err}");
        assert!(err.to_string().contains("I can't help with that."), "{err}");
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_is_reported_as_length() {
    for stream in [false, true] {
        let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, _| {
            let blocks = [Block::Text(r#"{"quarter": 3, "year": 20"#.into())];
            if stream {
                Reply::stream(&blocks, "max_tokens", 6)
            } else {
                Reply::Message(support::anthropic::message(&blocks, "max_tokens"))
            }
        })
        .await;
        let ex = extract(backend(&server, Mode::StructuredOutputs, stream, 3)).await;
        assert!(!ex.is_ok());
        assert!(ex.error.is_none(), "{:?}", ex.error);
        assert_eq!(ex.attempts.len(), 2);
        assert!(ex
            .attempts
            .iter()
            .all(|a| a.finish_reason == Some(FinishReason::Length)));
        assert_eq!(
            server.request_count(),
            2,
            "not an HTTP fault: no backend retry"
        );
    }
}

/// `complete_streaming`'s response and the pieces it handed on.
async fn streamed(
    backend: &AnthropicBackend,
) -> (
    Result<contract_core::extract::Response, BackendError>,
    Vec<String>,
) {
    use contract_core::extract::Backend;
    let req = contract_core::Request::new(
        contract_core::Constraint::of::<Guidance>(),
        contract_core::prompt::Messages::for_contract::<Guidance>(DOC),
    );
    let pieces = std::sync::Mutex::new(Vec::new());
    let on_text = |p: &str| pieces.lock().unwrap().push(p.to_owned());
    let r = backend.complete_streaming(&req, &on_text).await;
    (r, pieces.into_inner().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_streaming_hands_the_deltas_on_as_they_arrive() {
    let blocks = [
        Block::Thinking("Third quarter, in millions.".into()),
        Block::Text(GOOD.into()),
    ];
    // A backend not built to stream streams when asked to.
    let server = AnthropicServer::start(Expect::StructuredOutputs, move |seen, _| {
        if seen.body["stream"] == true {
            Reply::stream(&blocks, "end_turn", 3)
        } else {
            Reply::Message(support::anthropic::message(&blocks, "end_turn"))
        }
    })
    .await;
    let b = backend(&server, Mode::StructuredOutputs, false, 0);
    let (r, pieces) = streamed(&b).await;
    let r = r.expect("streamed");
    let whole = contract_core::extract::Backend::complete(&b, &{
        contract_core::Request::new(
            contract_core::Constraint::of::<Guidance>(),
            contract_core::prompt::Messages::for_contract::<Guidance>(DOC),
        )
    })
    .await
    .expect("whole");
    assert_eq!(r, whole, "the same response streamed or not");
    assert_eq!(r.reasoning.as_deref(), Some("Third quarter, in millions."));
    // The mock sends the text in deltas of 7 characters; the thinking is not handed on.
    assert_eq!(pieces.len(), GOOD.chars().count().div_ceil(7));
    assert_eq!(pieces.concat(), GOOD);
    let seen = server.seen();
    assert_eq!(seen[0].body["stream"], true);
    assert_eq!(
        seen[0].headers.get("accept").map(String::as_str),
        Some("text/event-stream")
    );
    assert!(
        seen[1].body.get("stream").is_none(),
        "complete does not stream"
    );

    // A forced tool call: the input deltas are the pieces.
    let server = AnthropicServer::start(Expect::ToolUse, |_, _| {
        Reply::stream(
            &[Block::Tool(
                "Guidance".into(),
                serde_json::from_str(GOOD).unwrap(),
            )],
            "tool_use",
            2,
        )
    })
    .await;
    let (r, pieces) = streamed(&backend(&server, Mode::ToolUse, false, 0)).await;
    let text = r.expect("tool").text;
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), text);

    // Cut after text went out: a clear error, not retried; cut before: retried.
    let whole = events(&[Block::Text(GOOD.into())], "end_turn");
    let in_value = whole[..whole.find("\"year").expect("year")]
        .rfind("event:")
        .expect("an event");
    let first_block = whole.find("event: content_block_start").expect("start");
    for (name, cut, requests) in [
        ("after pieces", whole[..in_value].to_owned(), 1),
        ("before any piece", whole[..first_block].to_owned(), 2),
    ] {
        let full = whole.clone();
        let server = AnthropicServer::start(Expect::StructuredOutputs, move |_, n| Reply::Stream {
            text: if n == 0 { cut.clone() } else { full.clone() },
            chunk: 5,
        })
        .await;
        let (r, pieces) = streamed(&backend(&server, Mode::StructuredOutputs, false, 2)).await;
        assert_eq!(server.request_count(), requests, "{name}");
        if requests == 1 {
            let err = r.expect_err(name);
            assert_eq!(err.kind(), "protocol", "{name}");
            assert!(err.to_string().contains("not retried"), "{name}: {err}");
            assert!(!pieces.is_empty() && GOOD.starts_with(&pieces.concat()));
        } else {
            assert_eq!(r.expect(name).text, GOOD);
            assert_eq!(pieces.concat(), GOOD, "{name}");
        }
    }
}
