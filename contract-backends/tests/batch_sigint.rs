//! A real Ctrl-C (SIGINT to this test process): the runner stops starting documents, finishes
//! the ones in flight, writes their rows and reports the interruption. Alone in its test binary,
//! since the signal handler is process-wide.

#![cfg(all(unix, feature = "batch"))]

use std::time::Duration;

use contract_backends::batch::{default_row, run_batch, BatchOptions, Doc};
use contract_core::extract::{Backend, BackendError, Request, Response};
use contract_core::Extractor;
use examples::Guidance;

struct Slow;

impl Backend for Slow {
    async fn complete(&self, _req: &Request) -> Result<Response, BackendError> {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Response::text(
            r#"{"quarter": 1, "year": 2024, "low": 1, "high": 2}"#,
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_finishes_in_flight_documents() {
    let out = std::env::temp_dir().join(format!(
        "contract-batch-sigint-{}.jsonl",
        std::process::id()
    ));
    let docs: Vec<Doc> = (0..300)
        .map(|i| Doc::new(format!("d{i}"), format!("document {i}")))
        .collect();
    let extractor = Extractor::<Guidance, _>::new(Slow);
    let options = BatchOptions::default()
        .concurrency(3)
        .output(&out)
        .progress(false);
    let sent = std::sync::atomic::AtomicBool::new(false);
    let row = |doc: &Doc, ex| {
        if !sent.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let status = std::process::Command::new("kill")
                .args(["-INT", &std::process::id().to_string()])
                .status()
                .expect("run kill");
            assert!(status.success());
        }
        default_row::<Guidance>(doc, ex)
    };
    let (rows, summary) = run_batch(&extractor, docs, &options, row)
        .await
        .expect("batch");
    assert!(summary.interrupted, "{summary:?}");
    assert!(summary.completed() < 300, "{summary:?}");
    assert_eq!(rows.len(), summary.completed());
    let written = std::fs::read_to_string(&out).expect("output");
    assert_eq!(written.lines().count(), rows.len());
    let _ = std::fs::remove_file(&out);
}
