//! 1,000 documents through `OpenAiBackend` and `run_batch` with 20% injected faults of every
//! kind: every id gets exactly one row, every failure its reason, and a resumed run does only
//! what is missing.

#![cfg(all(feature = "openai", feature = "batch"))]

mod support;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use contract_backends::batch::{default_row, run_batch, BatchOptions, Doc};
use contract_backends::openai::{Mode, OpenAiBackend, RetryPolicy};
use contract_core::Extractor;
use examples::Guidance;
use serde_json::Value;
use support::{Expect, MockServer, Reply};

const DOCS: usize = 1000;
const MAX_RETRIES: u32 = 2;
const MAX_ATTEMPTS: usize = 2;

/// The fault script: documents with `i % 5 == 0` (20%) get fault kind `(i / 5) % 10`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Clean,
    RateLimitedOnce,
    ServerErrorOnce,
    Unavailable,
    SlowOnce,
    ResetOnce,
    TruncatedOnce,
    NotJsonOnce,
    Refusal,
    Length,
    RateLimited,
}

fn kind(i: usize) -> Kind {
    if !i.is_multiple_of(5) {
        return Kind::Clean;
    }
    match (i / 5) % 10 {
        0 => Kind::RateLimitedOnce,
        1 => Kind::ServerErrorOnce,
        2 => Kind::Unavailable,
        3 => Kind::SlowOnce,
        4 => Kind::ResetOnce,
        5 => Kind::TruncatedOnce,
        6 => Kind::NotJsonOnce,
        7 => Kind::Refusal,
        8 => Kind::Length,
        _ => Kind::RateLimited,
    }
}

/// Requests the server sees for document `i`, and the failure kind of its row (`None`: ok).
fn expected(i: usize) -> (usize, Option<&'static str>) {
    let all = 1 + MAX_RETRIES as usize;
    match kind(i) {
        Kind::Clean => (1, None),
        Kind::RateLimitedOnce
        | Kind::ServerErrorOnce
        | Kind::SlowOnce
        | Kind::ResetOnce
        | Kind::TruncatedOnce
        | Kind::NotJsonOnce => (2, None),
        Kind::Unavailable => (all, Some("unavailable")),
        Kind::Refusal => (1, Some("other")),
        Kind::Length => (MAX_ATTEMPTS, Some("length")),
        Kind::RateLimited => (all, Some("rate_limited")),
    }
}

fn good(i: usize) -> String {
    format!(
        r#"{{"quarter": {}, "year": 2025, "low": {}, "high": {}}}"#,
        i % 4 + 1,
        i + 1,
        i + 2
    )
}

fn script(seen: &support::Seen, n: usize) -> Reply {
    let i: usize = seen
        .key
        .trim_start_matches("doc-")
        .parse()
        .unwrap_or(usize::MAX);
    let once = |fault: Reply| if n == 0 { fault } else { Reply::ok(good(i)) };
    match kind(i) {
        Kind::Clean => Reply::ok(good(i)),
        Kind::RateLimitedOnce => once(Reply::rate_limited("0")),
        Kind::ServerErrorOnce => once(Reply::status(500, "internal error")),
        Kind::Unavailable => Reply::status(503, "overloaded"),
        Kind::SlowOnce => once(Reply::Slow(
            Duration::from_secs(6),
            Box::new(Reply::ok(good(i))),
        )),
        Kind::ResetOnce => once(Reply::Reset),
        Kind::TruncatedOnce => once(Reply::Truncated),
        Kind::NotJsonOnce => once(Reply::NotJson),
        Kind::Refusal => Reply::Content {
            content: None,
            reasoning_content: None,
            refusal: Some("I can't help with that.".into()),
            finish_reason: "stop".into(),
        },
        Kind::Length => Reply::Content {
            content: Some(r#"{"quarter": 1, "ye"#.into()),
            reasoning_content: None,
            refusal: None,
            finish_reason: "length".into(),
        },
        Kind::RateLimited => Reply::rate_limited("Thu, 01 Jan 1970 00:00:00 GMT"),
    }
}

fn docs() -> Vec<Doc> {
    (0..DOCS)
        .map(|i| {
            Doc::new(
                format!("doc-{i:04}"),
                format!(
                    "doc-{i:04}: we expect revenue of ${} to ${} million next quarter.",
                    i + 1,
                    i + 2
                ),
            )
        })
        .collect()
}

fn index(id: &str) -> usize {
    id.trim_start_matches("doc-").parse().expect("doc id")
}

fn extractor(server: &MockServer) -> Extractor<Guidance, OpenAiBackend> {
    let backend = OpenAiBackend::builder("mock-model")
        .base_url(server.base_url())
        .mode(Mode::StructuredOutputs)
        .timeout(Duration::from_secs(3))
        .retry(RetryPolicy {
            max_retries: MAX_RETRIES,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            max_retry_after: Duration::from_secs(5),
        })
        .build()
        .expect("backend");
    Extractor::new(backend).max_attempts(MAX_ATTEMPTS)
}

fn read_rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .collect()
}

fn check_row(row: &Value) {
    let id = row["id"].as_str().expect("id");
    let (_, failure) = expected(index(id));
    match failure {
        None => {
            assert_eq!(row["ok"], true, "{id}: {}", row["error"]);
            assert!(row["error"].is_null());
            assert_eq!(row["value"]["high"].as_f64(), Some((index(id) + 2) as f64));
        }
        Some(kind) => {
            assert_eq!(row["ok"], false, "{id}");
            assert_eq!(row["error_kind"], kind, "{id}: {}", row["error"]);
            let message = row["error"].as_str().expect("a reason");
            assert!(!message.is_empty(), "{id}");
            assert!(row["value"].is_null());
            assert_eq!(row["record"]["contract"], "Guidance");
            if kind == "rate_limited" {
                // The retry loop's count and time reach the row and its record.
                let all = 1 + MAX_RETRIES;
                let error = &row["record"]["error"]["error"];
                assert_eq!(error["attempts"], all, "{id}: {error}");
                let elapsed = error["elapsed_ms"].as_u64().expect("elapsed_ms");
                assert!(
                    message.contains(&format!("rate limited, {all} attempts over {elapsed} ms")),
                    "{id}: {message}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_documents_with_faults_lose_nothing_and_resume() {
    let dir = std::env::temp_dir().join(format!("contract-batch-openai-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("rows.jsonl");
    let options = BatchOptions::default()
        .concurrency(16)
        .output(&out)
        .resume(true)
        .progress(false)
        .label("mock");

    // The first run.
    let server = MockServer::start(Expect::StructuredOutputs, script).await;
    let ex = extractor(&server);
    let (rows, summary) = run_batch(&ex, docs(), &options, default_row)
        .await
        .expect("batch");
    assert_eq!(server.shape_errors(), Vec::<String>::new());

    let expected_failed = (0..DOCS).filter(|&i| expected(i).1.is_some()).count();
    assert_eq!(expected_failed, 80);
    assert_eq!(summary.total, DOCS);
    assert_eq!(summary.skipped, 0);
    assert_eq!(
        (summary.done, summary.failed),
        (DOCS - expected_failed, expected_failed)
    );
    assert!(!summary.interrupted);
    assert_eq!(rows.len(), DOCS);

    let written = read_rows(&out);
    assert_eq!(written, rows, "rows are written as they are returned");
    let ids: HashSet<&str> = written.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), DOCS, "every id exactly once");
    written.iter().for_each(check_row);
    let by_kind = written
        .iter()
        .fold(HashMap::<String, usize>::new(), |mut m, r| {
            *m.entry(r["error_kind"].as_str().unwrap_or("ok").to_owned())
                .or_default() += 1;
            m
        });
    assert_eq!(
        by_kind,
        HashMap::from([
            ("ok".to_owned(), 920),
            ("unavailable".to_owned(), 20),
            ("other".to_owned(), 20),
            ("length".to_owned(), 20),
            ("rate_limited".to_owned(), 20),
        ])
    );

    // Requests per document follow from the script: transient faults cost one retry each.
    let counts = server.counts();
    for i in 0..DOCS {
        let key = format!("doc-{i:04}");
        assert_eq!(
            counts.get(&key).copied(),
            Some(expected(i).0),
            "{key} ({:?})",
            kind(i)
        );
    }
    let total_requests: usize = (0..DOCS).map(|i| expected(i).0).sum();
    assert_eq!(server.request_count(), total_requests);
    assert_eq!(total_requests, 1220);
    drop(server);

    // Lose every 7th row and cut the last line in half, as a crash would.
    let text = std::fs::read_to_string(&out).expect("output");
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = String::new();
    let mut missing = HashSet::new();
    for (n, line) in lines.iter().enumerate() {
        let id = serde_json::from_str::<Value>(line).expect("row")["id"]
            .as_str()
            .expect("id")
            .to_owned();
        if n == lines.len() - 1 {
            kept.push_str(&line[..line.len() / 2]);
            missing.insert(id);
        } else if n % 7 == 3 {
            missing.insert(id);
        } else {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    std::fs::write(&out, kept).expect("rewrite output");

    // The resumed run does only the missing documents.
    let server = MockServer::start(Expect::StructuredOutputs, script).await;
    let ex = extractor(&server);
    let (rows, summary) = run_batch(&ex, docs(), &options, default_row)
        .await
        .expect("resume");
    assert_eq!(summary.skipped, DOCS - missing.len());
    assert_eq!(summary.completed(), missing.len());
    assert_eq!(rows.len(), missing.len());
    let redone: HashSet<String> = rows
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(redone, missing);
    let expected_requests: usize = missing.iter().map(|id| expected(index(id)).0).sum();
    assert_eq!(server.request_count(), expected_requests);
    let counts = server.counts();
    assert!(
        counts.keys().all(|k| missing.contains(k)),
        "only missing documents were requested"
    );

    let written = read_rows(&out);
    assert_eq!(written.len(), DOCS);
    let ids: HashSet<&str> = written.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), DOCS, "every id exactly once after resuming");
    written.iter().for_each(check_row);

    // A third run has nothing left to do.
    let (rows, summary) = run_batch(&ex, docs(), &options, default_row)
        .await
        .expect("no-op");
    assert!(rows.is_empty());
    assert_eq!((summary.skipped, summary.completed()), (DOCS, 0));
    assert_eq!(server.request_count(), expected_requests);
    let _ = std::fs::remove_dir_all(&dir);
}
