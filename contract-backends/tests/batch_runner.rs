//! `run_batch` with the scripted backend and a slow test backend: rows, failures, resume,
//! interruption, bad inputs and outputs.

#![cfg(feature = "batch")]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use contract_backends::batch::{
    default_row, is_error_row, read_jsonl_docs, run_batch, run_batch_until, BatchError,
    BatchOptions, Doc,
};
use contract_backends::ScriptedBackend;
use contract_core::extract::{Backend, BackendError, Request, Response};
use contract_core::Extractor;
use examples::Guidance;
use serde_json::{json, Value};

const GOOD: &str = r#"{"quarter": 2, "year": 2024, "low": 10, "high": 12}"#;

fn docs(n: usize) -> Vec<Doc> {
    (0..n)
        .map(|i| Doc::new(format!("d{i}"), format!("document {i}")))
        .collect()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("contract-batch-runner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect()
}

fn quiet() -> BatchOptions {
    BatchOptions::default().progress(false)
}

#[tokio::test(flavor = "current_thread")]
async fn scripted_backend_in_order_with_failures() {
    // Concurrency 1: documents take the script in order. d1's two attempts are both invalid;
    // d3 meets a backend error.
    let backend = ScriptedBackend::from_script([
        Ok(Response::text(GOOD)),
        Ok(Response::text("no json here")),
        Ok(Response::text(r#"{"quarter": 9}"#)),
        Ok(Response::text(GOOD)),
        Err(BackendError::Timeout {
            after_ms: 5,
            attempts: 1,
            elapsed_ms: 5,
        }),
        Ok(Response::text(GOOD)),
    ]);
    let extractor = Extractor::<Guidance, _>::new(backend).max_attempts(2);
    let out = temp("scripted.jsonl");
    let options = quiet().concurrency(1).output(&out);
    let (rows, summary) = run_batch(&extractor, docs(5), &options, default_row)
        .await
        .expect("batch");
    assert_eq!(extractor.backend().remaining(), 0);
    assert_eq!(
        (summary.total, summary.done, summary.failed, summary.skipped),
        (5, 3, 2, 0)
    );
    assert!(!summary.interrupted);
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["d0", "d1", "d2", "d3", "d4"]);
    assert_eq!(rows[1]["error_kind"], "invalid");
    assert!(
        rows[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("after 2 attempts")),
        "{}",
        rows[1]["error"]
    );
    assert_eq!(
        rows[1]["record"]["attempts"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(rows[3]["error_kind"], "timeout");
    assert_eq!(
        rows[3]["error"],
        "backend: backend timed out after 5 ms, 1 attempt over 5 ms"
    );
    assert_eq!(
        rows[0]["value"],
        json!({"quarter": 2, "year": 2024, "low": 10.0, "high": 12.0})
    );
    assert_eq!(lines(&out), rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_scripted_batch_and_a_custom_row() {
    let backend = ScriptedBackend::new(std::iter::repeat_n(GOOD, 40));
    let extractor = Extractor::<Guidance, _>::new(backend);
    let options = quiet().concurrency(7);
    let (rows, summary) = run_batch(
        &extractor,
        docs(40),
        &options,
        |doc, ex| json!({ "len": doc.text.len(), "ok": ex.is_ok() }),
    )
    .await
    .expect("batch");
    assert_eq!((summary.done, summary.failed), (40, 0));
    let ids: HashSet<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), 40);
    // The runner puts the id first into custom rows, and wraps rows that are not objects.
    assert_eq!(
        rows[0]
            .as_object()
            .and_then(|o| o.keys().next())
            .map(String::as_str),
        Some("id")
    );
    let backend = ScriptedBackend::new([GOOD]);
    let extractor = Extractor::<Guidance, _>::new(backend);
    let (rows, _) = run_batch(&extractor, docs(1), &options, |_, _| json!(42))
        .await
        .expect("batch");
    assert_eq!(rows, [json!({"id": "d0", "row": 42})]);
}

#[tokio::test(flavor = "current_thread")]
async fn duplicate_ids_are_refused_before_running() {
    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD, GOOD]));
    let mut input = docs(2);
    input.push(Doc::new("d0", "again"));
    let err = run_batch(&extractor, input, &quiet(), default_row)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BatchError::DuplicateId { id, .. } if id == "d0"),
        "{err}"
    );
    assert!(extractor.backend().requests().is_empty());
}

#[test]
fn reading_documents() {
    let path = temp("docs.jsonl");
    std::fs::write(
        &path,
        "{\"id\": \"a\", \"text\": \"one\"}\n\n{\"id\": \"b\", \"text\": \"two\", \"extra\": 1}\n",
    )
    .expect("write");
    let docs = read_jsonl_docs(&path).expect("docs");
    assert_eq!(docs, [Doc::new("a", "one"), Doc::new("b", "two")]);

    std::fs::write(
        &path,
        "{\"id\": \"a\", \"text\": \"one\"}\n{\"id\": \"b\"}\n",
    )
    .expect("write");
    let err = read_jsonl_docs(&path).unwrap_err();
    assert!(matches!(err, BatchError::BadInput { line: 2, .. }), "{err}");
    assert!(
        err.to_string().contains(":2: ") && err.to_string().contains("text"),
        "{err}"
    );

    std::fs::write(&path, "{\"id\": \"a\", \"text\": \"1\"}\n{\"id\": \"b\", \"text\": \"2\"}\n{\"id\": \"a\", \"text\": \"3\"}\n")
        .expect("write");
    let err = read_jsonl_docs(&path).unwrap_err();
    assert_eq!(err.to_string(), "duplicate document id `a` (lines 1 and 3)");

    let err = read_jsonl_docs(&temp("absent.jsonl")).unwrap_err();
    assert!(matches!(err, BatchError::Io { .. }));
}

#[tokio::test(flavor = "current_thread")]
async fn resume_skips_done_ids_cuts_a_torn_line_and_refuses_a_corrupt_one() {
    let out = temp("resume.jsonl");
    std::fs::write(
        &out,
        "{\"id\": \"d0\", \"ok\": true}\n{\"id\": \"d2\", \"ok\": false}\n{\"id\": \"d3\", \"o",
    )
    .expect("write");
    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD, GOOD, GOOD]));
    let options = quiet().concurrency(1).output(&out).resume(true);
    let (rows, summary) = run_batch(&extractor, docs(5), &options, default_row)
        .await
        .expect("resume");
    assert_eq!(summary.skipped, 2);
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["d1", "d3", "d4"]);
    let all: Vec<String> = lines(&out)
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(all, ["d0", "d2", "d1", "d3", "d4"]);

    // Without resume the output starts over.
    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD]));
    let options = quiet().output(&out);
    run_batch(&extractor, docs(1), &options, default_row)
        .await
        .expect("fresh");
    assert_eq!(lines(&out).len(), 1);

    // A corrupt row that is not the last one is not guessed at.
    std::fs::write(&out, "{\"id\": \"d0\"}\nnot json\n{\"id\": \"d1\"}\n").expect("write");
    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD]));
    let options = quiet().output(&out).resume(true);
    let err = run_batch(&extractor, docs(3), &options, default_row)
        .await
        .unwrap_err();
    assert!(
        matches!(err, BatchError::BadOutput { line: 2, .. }),
        "{err}"
    );
    assert!(extractor.backend().requests().is_empty());
}

/// Answers every request after a short sleep, so a stop can arrive while documents are in flight.
struct Slow;

impl Backend for Slow {
    async fn complete(&self, _req: &Request) -> Result<Response, BackendError> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok(Response::text(GOOD))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_finishes_in_flight_documents_and_a_resume_does_the_rest() {
    let out = temp("stop.jsonl");
    let extractor = Extractor::<Guidance, _>::new(Slow);
    let options = quiet().concurrency(4).output(&out).resume(true);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let tx = Mutex::new(Some(tx));
    let written = Mutex::new(0usize);
    let row = |doc: &Doc, ex| {
        let mut n = written.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        if *n == 5 {
            if let Some(tx) = tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = tx.send(());
            }
        }
        default_row::<Guidance>(doc, ex)
    };
    let stop = async {
        let _ = rx.await;
    };
    let (rows, summary) = run_batch_until(&extractor, docs(100), &options, row, stop)
        .await
        .expect("batch");
    assert!(summary.interrupted);
    // The fifth row stops new documents; at most `concurrency` were still in flight.
    assert!((5..=9).contains(&summary.completed()), "{summary:?}");
    assert_eq!(rows.len(), summary.completed());
    assert_eq!(lines(&out), rows, "every finished document was written");
    assert_eq!(summary.remaining(), 100 - rows.len());

    let (rest, summary) = run_batch(&extractor, docs(100), &options, default_row)
        .await
        .expect("resume");
    assert!(!summary.interrupted);
    assert_eq!(rest.len(), 100 - rows.len());
    let ids: HashSet<String> = lines(&out)
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(ids.len(), 100);
    assert_eq!(lines(&out).len(), 100);
}

#[tokio::test(flavor = "current_thread")]
async fn a_streaming_batch_hands_on_every_field_and_writes_the_same_rows() {
    use contract_backends::batch::run_batch_streaming;
    use contract_core::extract::FieldEvent;
    // d1's first reply breaks the contract (quarter 9), its retry fills it: its fields come
    // twice, the retry's with attempt 2; d2 has no valid reply at all.
    let script = || {
        [
            Ok(Response::text(GOOD)),
            Ok(Response::text(
                r#"{"quarter": 9, "year": 2024, "low": 10, "high": 12}"#,
            )),
            Ok(Response::text(GOOD)),
            Ok(Response::text("no json here")),
            Ok(Response::text("nor here")),
        ]
    };
    let options = quiet().concurrency(1);
    let seen: Mutex<Vec<(String, FieldEvent)>> = Mutex::new(Vec::new());
    let on_field = |doc: &Doc, event: &FieldEvent| {
        seen.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((doc.id.clone(), event.clone()));
    };
    let backend = ScriptedBackend::from_script(script());
    let extractor = Extractor::<Guidance, _>::new(&backend);
    let (streamed, summary) =
        run_batch_streaming(&extractor, docs(3), &options, default_row, &on_field)
            .await
            .expect("a batch");
    assert_eq!((summary.done, summary.failed), (2, 1));
    let seen = seen.into_inner().unwrap_or_else(|e| e.into_inner());
    let of = |id: &str| -> Vec<(String, usize)> {
        seen.iter()
            .filter(|(d, _)| d == id)
            .map(|(_, e)| (e.path.clone(), e.attempt))
            .collect()
    };
    let fields = ["/quarter", "/year", "/low", "/high"];
    // d0: each field once, from the first attempt (low and high together, once the rule
    // holds on both).
    let mut d0 = of("d0");
    d0.sort();
    let mut want = fields.map(|f| (f.to_owned(), 1)).to_vec();
    want.sort();
    assert_eq!(d0, want, "{seen:?}");
    // d1: the refused quarter is never handed on; the retry's fields are, with attempt 2.
    let d1 = of("d1");
    assert!(d1.iter().all(|(p, a)| p != "/quarter" || *a == 2), "{d1:?}");
    assert!(
        fields.iter().all(|f| d1.contains(&((*f).to_owned(), 2))),
        "{d1:?}"
    );
    assert!(seen
        .iter()
        .all(|(_, e)| !(e.path == "/quarter" && e.value == json!(9))));
    // d2: nothing to hand on.
    assert!(of("d2").is_empty());
    // The rows are run_batch's (timings aside).
    let backend = ScriptedBackend::from_script(script());
    let extractor = Extractor::<Guidance, _>::new(&backend);
    let (plain, _) = run_batch(&extractor, docs(3), &options, default_row)
        .await
        .expect("a batch");
    let strip = |rows: &[Value]| -> Vec<Value> {
        rows.iter()
            .map(
                |r| json!({"id": r["id"], "ok": r["ok"], "value": r["value"], "error": r["error"]}),
            )
            .collect()
    };
    assert_eq!(strip(&streamed), strip(&plain));
}

#[tokio::test(flavor = "current_thread")]
async fn an_output_with_rows_is_refused_without_overwrite_and_left_as_it_is() {
    let out = temp("overwrite.jsonl");
    let kept = "{\"id\": \"d0\", \"ok\": true}\n";
    std::fs::write(&out, kept).expect("write");
    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD, GOOD]));
    let options = quiet().output(&out).overwrite(false);
    let err = run_batch(&extractor, docs(2), &options, default_row)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BatchError::OutputHasRows { path } if path == &out),
        "{err}"
    );
    assert!(extractor.backend().requests().is_empty());
    assert_eq!(std::fs::read_to_string(&out).expect("output"), kept);
    // An empty output is no loss: it is written.
    std::fs::write(&out, "").expect("write");
    let (rows, _) = run_batch(&extractor, docs(2), &options, default_row)
        .await
        .expect("an empty output");
    assert_eq!(rows.len(), 2);
    // Resuming appends, overwrite or not.
    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD]));
    let (rows, summary) = run_batch(&extractor, docs(3), &options.resume(true), default_row)
        .await
        .expect("resume");
    assert_eq!((rows.len(), summary.skipped), (1, 2));
    assert_eq!(lines(&out).len(), 3);
}

#[tokio::test(flavor = "current_thread")]
async fn retry_errors_runs_the_documents_without_a_reply_again_once_each() {
    let out = temp("retry.jsonl");
    // d1 gets no reply (a timeout), d2 an invalid one (twice): only d1 is an error row.
    let backend = ScriptedBackend::from_script([
        Ok(Response::text(GOOD)),
        Err(BackendError::Timeout {
            after_ms: 5,
            attempts: 1,
            elapsed_ms: 5,
        }),
        Ok(Response::text("no json here")),
        Ok(Response::text("nor here")),
    ]);
    let extractor = Extractor::<Guidance, _>::new(backend).max_attempts(2);
    let options = quiet().concurrency(1).output(&out);
    let (rows, _) = run_batch(&extractor, docs(3), &options, default_row)
        .await
        .expect("batch");
    let errors: Vec<&str> = rows
        .iter()
        .filter(|r| is_error_row(r))
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(errors, ["d1"]);
    // A torn last line (one that happens to end in a newline) is cut off and runs again too.
    let mut text = std::fs::read_to_string(&out).expect("output");
    text.push_str("{\"id\": \"d3\", \"ok\":\n");
    std::fs::write(&out, &text).expect("write");

    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD, GOOD]));
    let options = options.resume(true).retry_errors(is_error_row);
    let (rows, summary) = run_batch(&extractor, docs(4), &options, default_row)
        .await
        .expect("retry");
    assert_eq!(
        (
            summary.skipped,
            summary.retried,
            summary.done,
            summary.failed
        ),
        (2, 1, 2, 0)
    );
    assert_eq!(summary.torn_bytes, "{\"id\": \"d3\", \"ok\":\n".len());
    let mut ran: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    ran.sort();
    assert_eq!(ran, ["d1", "d3"]);
    let all = lines(&out);
    let ids: Vec<&str> = all.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["d0", "d2", "d1", "d3"], "each document once");
    assert!(all.iter().all(|r| !is_error_row(r)));
    assert_eq!(all[1]["error_kind"], "invalid", "an invalid row is kept");
    assert!(!out.with_extension("retry-errors.tmp").exists());

    // Nothing to retry: the file is untouched and nothing runs.
    let extractor = Extractor::<Guidance, _>::new(ScriptedBackend::new([GOOD]));
    let before = std::fs::read(&out).expect("output");
    let (rows, summary) = run_batch(&extractor, docs(4), &options, default_row)
        .await
        .expect("again");
    assert_eq!((rows.len(), summary.skipped, summary.retried), (0, 4, 0));
    assert_eq!(std::fs::read(&out).expect("output"), before);
}
