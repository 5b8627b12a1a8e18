//! `OpenAiBackend` against the scripted server: request shapes per mode, replies (reasoning,
//! refusal, length) and every fault kind with its retries.

#![cfg(all(feature = "openai", feature = "batch"))]

mod support;

use std::time::{Duration, Instant};

use contract_backends::batch::failure_reason;
use contract_backends::openai::{Mode, OpenAIConfig, OpenAiBackend, RetryPolicy, REFUSAL_PREFIX};
use contract_core::extract::{AttemptError, BackendError, FinishReason};
use contract_core::{Extraction, Extractor};
use examples::Guidance;
use serde_json::json;
use support::{check_shape, Expect, MockServer, Reply};

const GOOD: &str = r#"{"quarter": 3, "year": 2025, "low": 7230, "high": 7650}"#;
const DOC: &str = "doc-1: We expect third-quarter 2025 revenue of $7.23 to $7.65 billion.";

fn fast_retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(4),
        max_retry_after: Duration::from_secs(5),
    }
}

fn backend(server: &MockServer, mode: Mode, max_retries: u32) -> OpenAiBackend {
    OpenAiBackend::builder("mock-model")
        .base_url(server.base_url())
        .api_key("test-key")
        .mode(mode)
        .timeout(Duration::from_millis(1500))
        .retry(fast_retry(max_retries))
        .build()
        .expect("backend")
}

async fn extract(server: &MockServer, mode: Mode, max_retries: u32) -> Extraction<Guidance> {
    Extractor::<Guidance, _>::new(backend(server, mode, max_retries))
        .max_attempts(2)
        .max_tokens(200)
        .extract(DOC)
        .await
}

fn backend_error(ex: &Extraction<Guidance>) -> BackendError {
    match &ex.error {
        Some(AttemptError::Backend { error }) => error.clone(),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_sends_its_shape() {
    for (mode, expect) in [
        (Mode::StructuredOutputs, Expect::StructuredOutputs),
        (Mode::JsonMode, Expect::JsonMode),
        (Mode::PromptOnly, Expect::PromptOnly),
        (Mode::VllmGuidedJson, Expect::VllmGuidedJson),
        (Mode::JsonObjectSchema, Expect::JsonObjectSchema),
    ] {
        let server = MockServer::start(expect, |_, _| Reply::ok(GOOD)).await;
        let ex = extract(&server, mode, 0).await;
        assert_eq!(server.shape_errors(), Vec::<String>::new(), "{mode:?}");
        assert!(ex.is_ok(), "{mode:?}: {:?}", ex.error);
        assert_eq!(ex.value.as_ref().and_then(|g| g.quarter), Some(3));
        let seen = server.seen();
        assert_eq!(seen.len(), 1);
        let body = &seen[0].body;
        assert_eq!(body["model"], "mock-model");
        assert_eq!(body["max_tokens"], 200);
        assert_eq!(
            seen[0].headers.get("authorization").map(String::as_str),
            Some("Bearer test-key")
        );
        // The signature is in the system message in every mode.
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        assert!(system.contains(
            &<Guidance as contract_core::Contract>::signature()
                .trim_end()
                .to_string()
        ));
        match mode {
            Mode::StructuredOutputs => {
                assert_eq!(body["response_format"]["json_schema"]["name"], "Guidance");
                assert_eq!(
                    body["response_format"]["json_schema"]["schema"],
                    <Guidance as contract_core::Contract>::strict_schema()
                );
            }
            Mode::VllmGuidedJson => assert_eq!(
                body["guided_json"],
                <Guidance as contract_core::Contract>::strict_schema()
            ),
            Mode::JsonObjectSchema => assert_eq!(
                body["response_format"]["schema"],
                <Guidance as contract_core::Contract>::strict_schema()
            ),
            _ => {}
        }
    }
}

#[test]
fn the_shape_checker_catches_bad_requests() {
    let good_schema = <Guidance as contract_core::Contract>::strict_schema();
    let body = |rf: serde_json::Value| json!({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "response_format": rf});
    let ok = body(
        json!({"type": "json_schema", "json_schema": {"name": "G", "strict": true, "schema": good_schema}}),
    );
    assert!(check_shape(Expect::StructuredOutputs, &ok).is_empty());
    // Not strict, a bad name, and a schema keyword outside the strict subset.
    let mut loose = good_schema.clone();
    loose["properties"]["quarter"]["minLength"] = json!(1);
    let bad = body(
        json!({"type": "json_schema", "json_schema": {"name": "a b", "strict": false, "schema": loose}}),
    );
    let errors = check_shape(Expect::StructuredOutputs, &bad);
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(!check_shape(Expect::JsonMode, &ok).is_empty());
    assert!(!check_shape(Expect::PromptOnly, &ok).is_empty());
    assert!(!check_shape(Expect::VllmGuidedJson, &ok).is_empty());
    assert!(!check_shape(Expect::JsonObjectSchema, &ok).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_without_strict_schema_is_refused_in_structured_mode() {
    let server = MockServer::start(Expect::StructuredOutputs, |_, _| Reply::ok(GOOD)).await;
    let backend = backend(&server, Mode::StructuredOutputs, 0);
    let mut req = contract_core::Request::new(
        std::sync::Arc::new(contract_core::Constraint::unconstrained("Loose")),
        contract_core::prompt::Messages::for_contract::<Guidance>(DOC),
    );
    let err = contract_core::Backend::complete(&backend, &req)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "invalid_request");
    assert!(err.to_string().contains("json_mode"), "{err}");
    assert_eq!(server.request_count(), 0);
    req.constraint = std::sync::Arc::new(contract_core::Constraint {
        strict_schema: Some(<Guidance as contract_core::Contract>::strict_schema()),
        ..contract_core::Constraint::unconstrained("Loose")
    });
    assert!(contract_core::Backend::complete(&backend, &req)
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_in_content_and_in_its_own_field_ends_in_the_record() {
    let server = MockServer::start(Expect::JsonMode, |_, _| {
        Reply::ok(format!(
            "<think>The release says $7.23-7.65 billion.</think>\n{GOOD}"
        ))
    })
    .await;
    let ex = extract(&server, Mode::JsonMode, 0).await;
    assert!(ex.is_ok(), "{:?}", ex.violations);
    assert_eq!(
        ex.reasoning.as_deref(),
        Some("The release says $7.23-7.65 billion.")
    );
    assert!(ex.attempts[0]
        .raw
        .as_deref()
        .is_some_and(|r| r.starts_with("<think>")));

    let server = MockServer::start(Expect::JsonMode, |_, _| Reply::Content {
        content: Some(GOOD.into()),
        reasoning_content: Some("Quarter three, range in millions.".into()),
        refusal: None,
        finish_reason: "stop".into(),
    })
    .await;
    let ex = extract(&server, Mode::JsonMode, 0).await;
    assert!(ex.is_ok());
    assert_eq!(
        ex.reasoning.as_deref(),
        Some("Quarter three, range in millions.")
    );
    let line = ex.to_json_line().expect("json line");
    assert!(line.contains("Quarter three, range in millions."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_is_reported_and_not_retried() {
    let server = MockServer::start(Expect::StructuredOutputs, |_, _| Reply::Content {
        content: None,
        reasoning_content: None,
        refusal: Some("I can't help with that.".into()),
        finish_reason: "stop".into(),
    })
    .await;
    let ex = extract(&server, Mode::StructuredOutputs, 3).await;
    let err = backend_error(&ex);
    assert_eq!(err.kind(), "other");
    assert!(err.to_string().starts_with(REFUSAL_PREFIX), "{err}");
    assert!(err.to_string().contains("I can't help with that."));
    assert_eq!(server.request_count(), 1);
    let reason = failure_reason(&ex).expect("a failure");
    assert_eq!(reason.kind, "other");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn length_is_reported_as_such() {
    let server = MockServer::start(Expect::JsonMode, |_, _| Reply::Content {
        content: Some(r#"{"quarter": 3, "year": 20"#.into()),
        reasoning_content: None,
        refusal: None,
        finish_reason: "length".into(),
    })
    .await;
    let ex = extract(&server, Mode::JsonMode, 3).await;
    assert!(!ex.is_ok());
    assert!(ex.error.is_none());
    assert_eq!(ex.attempts.len(), 2);
    assert!(ex
        .attempts
        .iter()
        .all(|a| a.finish_reason == Some(FinishReason::Length)));
    assert_eq!(
        server.request_count(),
        2,
        "length is not an HTTP fault: no backend retry"
    );
    let reason = failure_reason(&ex).expect("a failure");
    assert_eq!(reason.kind, "length");
    assert!(reason.message.contains("token limit"), "{}", reason.message);
}

/// Runs one extraction against a server that answers `fault` to the first `times` requests and
/// `GOOD` afterwards; returns the extraction and the request count.
async fn with_fault(fault: Reply, times: usize, max_retries: u32) -> (Extraction<Guidance>, usize) {
    let server = MockServer::start(Expect::StructuredOutputs, move |_, n| {
        if n < times {
            fault.clone()
        } else {
            Reply::ok(GOOD)
        }
    })
    .await;
    let ex = extract(&server, Mode::StructuredOutputs, max_retries).await;
    assert!(server.shape_errors().is_empty());
    (ex, server.request_count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_faults_are_retried_until_they_pass() {
    let faults = [
        ("429 seconds", Reply::rate_limited("0")),
        (
            "429 http date",
            Reply::rate_limited("Wed, 21 Oct 2015 07:28:00 GMT"),
        ),
        ("500", Reply::status(500, "internal error")),
        ("503", Reply::status(503, "overloaded")),
        (
            "timeout",
            Reply::Slow(Duration::from_secs(4), Box::new(Reply::ok(GOOD))),
        ),
        ("reset", Reply::Reset),
        ("truncated", Reply::Truncated),
        ("not json", Reply::NotJson),
    ];
    for (name, fault) in faults {
        let (ex, requests) = with_fault(fault, 2, 2).await;
        assert!(ex.is_ok(), "{name}: {:?}", ex.error);
        assert_eq!(requests, 3, "{name}: two faults then the answer");
        assert_eq!(
            ex.attempts.len(),
            1,
            "{name}: retries happen below the extractor"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_faults_end_in_a_clear_error() {
    let cases: [(&str, Reply, &str, Option<&str>); 7] = [
        ("429", Reply::rate_limited("0"), "rate_limited", None),
        (
            "503",
            Reply::status(503, "overloaded"),
            "unavailable",
            Some("HTTP 503 Service Unavailable: overloaded (after 3 attempts)"),
        ),
        (
            "timeout",
            Reply::Slow(Duration::from_secs(4), Box::new(Reply::ok(GOOD))),
            "timeout",
            Some("timed out after 1500 ms"),
        ),
        (
            "reset",
            Reply::Reset,
            "unavailable",
            Some("(after 3 attempts)"),
        ),
        ("truncated", Reply::Truncated, "protocol", Some("cut off")),
        ("not json", Reply::NotJson, "protocol", Some("not JSON")),
        (
            "400",
            Reply::status(400, "Invalid schema for response_format"),
            "invalid_request",
            Some("(after 1 attempt)"),
        ),
    ];
    for (name, fault, kind, text) in cases {
        let started = Instant::now();
        let (ex, requests) = with_fault(fault, usize::MAX, 2).await;
        let waited = started.elapsed().as_millis();
        let err = backend_error(&ex);
        match err {
            BackendError::RateLimited {
                attempts,
                elapsed_ms,
                ..
            } => {
                assert_eq!(attempts as usize, requests, "{name}");
                assert!(u128::from(elapsed_ms) <= waited, "{name}: {err}");
                let shown = format!("rate limited, 3 attempts over {elapsed_ms} ms");
                assert!(err.to_string().contains(&shown), "{name}: {err}");
            }
            BackendError::Timeout {
                after_ms,
                attempts,
                elapsed_ms,
            } => {
                assert_eq!((after_ms, attempts as usize), (1500, requests), "{name}");
                // Every attempt waited its whole timeout, and the error came within the run.
                assert!(elapsed_ms >= 3 * after_ms, "{name}: {err}");
                assert!(u128::from(elapsed_ms) <= waited, "{name}: {err}");
                let shown = format!("timed out after 1500 ms, 3 attempts over {elapsed_ms} ms");
                assert!(err.to_string().contains(&shown), "{name}: {err}");
            }
            _ => {}
        }
        eprintln!("{name}: {err}");
        assert_eq!(err.kind(), kind, "{name}: {err}");
        if let Some(text) = text {
            assert!(err.to_string().contains(text), "{name}: {err}");
        }
        let expected = if kind == "invalid_request" { 1 } else { 3 };
        assert_eq!(requests, expected, "{name}");
        let reason = failure_reason(&ex).expect("a failure");
        assert_eq!(reason.kind, kind);
        assert!(
            reason.message.starts_with(&format!("backend: {err}")),
            "{}",
            reason.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured() {
    let server = MockServer::start(Expect::StructuredOutputs, |_, n| {
        if n == 0 {
            Reply::rate_limited("1")
        } else {
            Reply::ok(GOOD)
        }
    })
    .await;
    let ex = extract(&server, Mode::StructuredOutputs, 2).await;
    assert!(ex.is_ok());
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(
        gap >= Duration::from_millis(1000),
        "retried after {gap:?}, before Retry-After: 1"
    );

    // A wait beyond `max_retry_after` ends the retries at once, with the wait reported.
    let server = MockServer::start(Expect::StructuredOutputs, |_, _| {
        Reply::rate_limited("3600")
    })
    .await;
    let ex = extract(&server, Mode::StructuredOutputs, 5).await;
    let err = backend_error(&ex);
    assert!(
        matches!(
            err,
            BackendError::RateLimited {
                retry_after_ms: Some(3_600_000),
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_rate_limit_reports_its_attempts_and_time() {
    let server =
        MockServer::start(Expect::StructuredOutputs, |_, _| Reply::rate_limited("1")).await;
    let started = Instant::now();
    let ex = extract(&server, Mode::StructuredOutputs, 2).await;
    let waited = started.elapsed().as_millis();
    let err = backend_error(&ex);
    let BackendError::RateLimited {
        retry_after_ms,
        attempts,
        elapsed_ms,
    } = err
    else {
        panic!("expected rate_limited, got {err:?}");
    };
    assert_eq!(server.request_count(), 3);
    assert_eq!((retry_after_ms, attempts), (Some(1000), 3));
    // Two waits of at least the `Retry-After: 1` the server asked for, within the run.
    assert!(elapsed_ms >= 2_000, "{err}");
    assert!(u128::from(elapsed_ms) <= waited, "{err}");
    assert_eq!(
        err.to_string(),
        format!("rate limited, 3 attempts over {elapsed_ms} ms")
    );
    let reason = failure_reason(&ex).expect("a failure");
    let shown = format!("3 attempts over {elapsed_ms} ms (the server asked to wait 1000 ms)");
    assert!(reason.message.ends_with(&shown), "{}", reason.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_length_and_quota_are_not_retried() {
    let ctx = Reply::Status {
        code: 400,
        headers: Vec::new(),
        body: json!({"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2900 in the messages, 100 in the completion).", "type": "BadRequestError", "code": 400}}).to_string(),
    };
    let (ex, requests) = with_fault(ctx, usize::MAX, 3).await;
    assert_eq!(
        backend_error(&ex),
        BackendError::ContextLength {
            prompt_tokens: 3000,
            context: 2048
        }
    );
    assert_eq!(requests, 1);

    let quota = Reply::Status {
        code: 429,
        headers: Vec::new(),
        body: json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}).to_string(),
    };
    let (ex, requests) = with_fault(quota, usize::MAX, 3).await;
    let err = backend_error(&ex);
    assert_eq!(err.kind(), "unavailable");
    assert!(err.to_string().contains("insufficient quota"), "{err}");
    assert_eq!(requests, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_unavailable() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let backend = OpenAiBackend::builder("m")
        .base_url(format!("http://{addr}/v1"))
        .retry(fast_retry(1))
        .build()
        .expect("backend");
    let ex = Extractor::<Guidance, _>::new(backend).extract(DOC).await;
    let err = backend_error(&ex);
    assert_eq!(err.kind(), "unavailable");
    assert!(err.to_string().contains("cannot connect"), "{err}");
    assert!(err.to_string().contains("(after 2 attempts)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_openai_config_supplies_key_and_headers() {
    let server = MockServer::start(Expect::JsonMode, |_, _| Reply::ok(GOOD)).await;
    let config = OpenAIConfig::new()
        .with_api_base(server.base_url())
        .with_api_key("cfg-key")
        .with_org_id("org-1");
    let backend = OpenAiBackend::builder("m")
        .config(config)
        .mode(Mode::JsonMode)
        .build()
        .expect("backend");
    assert_eq!(backend.base_url(), server.base_url());
    let ex = Extractor::<Guidance, _>::new(backend).extract(DOC).await;
    assert!(ex.is_ok());
    let headers = &server.seen()[0].headers;
    assert_eq!(
        headers.get("authorization").map(String::as_str),
        Some("Bearer cfg-key")
    );
    assert_eq!(
        headers.get("openai-organization").map(String::as_str),
        Some("org-1")
    );

    // No key at all: no Authorization header (local servers need none).
    let server = MockServer::start(Expect::JsonMode, |_, _| Reply::ok(GOOD)).await;
    let backend = OpenAiBackend::builder("m")
        .config(OpenAIConfig::new().with_api_key(""))
        .base_url(server.base_url())
        .mode(Mode::JsonMode)
        .build()
        .expect("backend");
    assert!(Extractor::<Guidance, _>::new(backend)
        .extract(DOC)
        .await
        .is_ok());
    assert!(!server.seen()[0].headers.contains_key("authorization"));
}

/// `first_token_logprobs`: one token, `logprobs` with `top_logprobs`, no response format; a 503
/// is retried; the list comes back most likely first; a reply without log-probabilities is a
/// protocol error that is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_token_logprobs_asks_for_one_token_and_reads_the_top_list() {
    let with_logprobs = json!({
        "id": "x", "object": "chat.completion", "created": 0, "model": "mock-model",
        "choices": [{"index": 0, "finish_reason": "length",
            "message": {"role": "assistant", "content": "Yes"},
            "logprobs": {"content": [{"token": "Yes", "logprob": -0.6, "top_logprobs": [
                {"token": "No", "logprob": -0.9}, {"token": "Yes", "logprob": -0.6},
                {"token": " yes", "logprob": -5.1}]}]}}]
    })
    .to_string();
    let server = MockServer::start(Expect::PromptOnly, move |_, i| match i {
        0 => Reply::Status {
            code: 503,
            headers: vec![],
            body: "busy".into(),
        },
        1 => Reply::Status {
            code: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: with_logprobs.clone(),
        },
        _ => Reply::ok("Yes"),
    })
    .await;
    let backend = backend(&server, Mode::JsonObjectSchema, 2);
    let msgs = contract_core::prompt::Messages(vec![
        contract_core::prompt::Message::system("You judge sentences."),
        contract_core::prompt::Message::user("Is this guidance? Answer yes or no."),
    ]);
    let top = backend
        .first_token_logprobs(&msgs, 20)
        .await
        .expect("the second try answers");
    assert_eq!(
        top,
        vec![
            ("Yes".to_string(), -0.6),
            ("No".to_string(), -0.9),
            (" yes".to_string(), -5.1)
        ]
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "the 503 was retried once");
    let body = &seen[1].body;
    assert_eq!(body["logprobs"], true);
    assert_eq!(body["top_logprobs"], 20);
    assert_eq!(body["max_tokens"], 1);
    assert!(
        body.get("response_format").is_none(),
        "no response format, whatever the backend's mode: {body}"
    );
    assert_eq!(server.shape_errors(), Vec::<String>::new());
    // A plain completion has no log-probabilities: an error at once, not retried.
    let err = backend
        .first_token_logprobs(&msgs, 20)
        .await
        .expect_err("no logprobs");
    assert_eq!(err.kind(), "protocol", "{err}");
    assert!(err.to_string().contains("logprobs"), "{err}");
    assert_eq!(server.seen().len(), 3);
}

/// A reply with `top` as the first token's `top_logprobs`.
fn logprobs_reply(top: &[(&str, f64)]) -> Reply {
    let list: Vec<serde_json::Value> = top
        .iter()
        .map(|(t, l)| json!({"token": t, "logprob": l}))
        .collect();
    Reply::Status {
        code: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: json!({
            "id": "x", "object": "chat.completion", "created": 0, "model": "mock-model",
            "choices": [{"index": 0, "finish_reason": "length",
                "message": {"role": "assistant", "content": top[0].0},
                "logprobs": {"content": [{"token": top[0].0, "logprob": top[0].1,
                    "top_logprobs": list}]}}]
        })
        .to_string(),
    }
}

/// `Backend::score`: one logprobs request per prompt (a 503 retried), each answer read from its
/// prompt's top list (spellings trimmed and summed, an unlisted answer at the least listed
/// log-probability, then `exact` is false); a server without log-probabilities is `unsupported`
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn score_reads_each_answer_from_its_prompts_top_list() {
    use contract_core::prompt::{Message, Messages};
    use contract_core::{Backend, ScoreRequest};
    let server = MockServer::start(Expect::PromptOnly, |seen, i| {
        match (seen.key.as_str(), i) {
            ("doc-1", 0) => Reply::status(503, "busy"),
            ("doc-1", _) => logprobs_reply(&[("Yes", -0.2), ("No", -2.0), (" yes", -4.0)]),
            ("doc-2", _) => logprobs_reply(&[("No", -0.1), ("Yes", -3.0), ("The", -5.0)]),
            // `no` in neither spelling.
            _ => logprobs_reply(&[("yes", -0.3), ("Yes", -1.5), ("Sure", -6.0)]),
        }
    })
    .await;
    let backend = backend(&server, Mode::StructuredOutputs, 2);
    let req = ScoreRequest {
        prompts: ["doc-1 total?", "doc-2 total?", "doc-3 total?"]
            .iter()
            .map(|p| Messages(vec![Message::system("You judge lines."), Message::user(*p)]))
            .collect(),
        answers: vec!["yes".into(), "No".into()],
    };
    let resp = backend.score(&req).await.expect("scored");
    assert_eq!(server.shape_errors(), Vec::<String>::new());
    assert_eq!(server.request_count(), 4, "three prompts, one retried");
    for seen in server.seen() {
        assert_eq!(seen.body["logprobs"], true);
        assert_eq!(seen.body["top_logprobs"], 20);
        assert_eq!(seen.body["max_tokens"], 1);
        assert!(seen.body.get("response_format").is_none(), "{}", seen.body);
    }
    assert_eq!(resp.forward_calls, None);
    assert!(!resp.exact, "`No` is not listed for doc-3");
    let near = |a: f64, b: f64| (a - b).abs() < 1e-12;
    let lp = &resp.logprobs;
    assert_eq!(lp.len(), 3);
    // `yes` is the token ` yes` for doc-1 (trimmed); `Yes` is another answer.
    assert!(near(lp[0][0], -4.0) && near(lp[0][1], -2.0), "{lp:?}");
    // doc-2 has no `yes`: the least listed.
    assert!(near(lp[1][0], -5.0) && near(lp[1][1], -0.1), "{lp:?}");
    assert!(near(lp[2][0], -0.3) && near(lp[2][1], -6.0), "{lp:?}");

    // Every answer listed: exact.
    let one = ScoreRequest {
        prompts: req.prompts[..2].to_vec(),
        answers: vec!["Yes".into(), "No".into()],
    };
    assert!(backend.score(&one).await.expect("scored").exact);

    // A server without log-probabilities cannot score: `unsupported`, not retried.
    let plain = MockServer::start(Expect::PromptOnly, |_, _| Reply::ok("Yes")).await;
    let backend = self::backend(&plain, Mode::JsonMode, 3);
    let single = ScoreRequest {
        prompts: req.prompts[..1].to_vec(),
        answers: req.answers.clone(),
    };
    let err = backend.score(&single).await.expect_err("no logprobs");
    assert_eq!(err.kind(), "unsupported", "{err}");
    assert!(err.to_string().contains("log-probabilities"), "{err}");
    assert_eq!(plain.request_count(), 1);
    // No prompts: no request, nothing scored.
    let none = ScoreRequest {
        prompts: Vec::new(),
        answers: req.answers.clone(),
    };
    assert!(backend
        .score(&none)
        .await
        .expect("empty")
        .logprobs
        .is_empty());
}
