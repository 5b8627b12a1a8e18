//! The CLI on the real tiny model (SmolLM2-135M, the tests' model: fetched into the cache on
//! first use, as the local backend's own tests do; `CONTRACT_MODEL` picks another): a row for
//! every document, every value valid and grounded, and a run killed with SIGKILL mid-batch
//! then resumed gives every document exactly once.

#![cfg(feature = "local")]

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::*;
use contract_core::DynContract;
use serde_json::Value;

fn model() -> String {
    std::env::var("CONTRACT_MODEL")
        .ok()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "smollm2-135m".to_owned())
}

#[test]
fn smollm2_fills_the_invoice_contract_or_says_why_for_every_document() {
    let dir = scratch("tiny_model");
    let out = dir.join("rows.jsonl");
    let model = model();
    let args = [
        "extract",
        "--schema",
        &data("invoice.schema.json"),
        "--input",
        &data("invoices.jsonl"),
        "--output",
        path(&out),
        "--model",
        &model,
        "--concurrency",
        "1",
        "--max-tokens",
        "160",
        "--quiet",
    ];
    // A hostile input line stops the run before the model loads, and loses nothing.
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": [1], \"text\": 2}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut hostile = args.to_vec();
    hostile[4] = path(&bad);
    let run = contract(&hostile);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("bad.jsonl:2"), "{}", run.stderr);
    assert!(!run.stderr.contains("loading"), "{}", run.stderr);
    assert!(!out.exists(), "nothing written");

    // Killed with SIGKILL once the first row is written, then resumed.
    let mut child = Command::new(BIN)
        .args(args)
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for_rows(&mut child, &out, 1);
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    let before = std::fs::read_to_string(&out).unwrap_or_default();
    let whole = before.matches('\n').count();
    assert!(whole < 5, "killed mid-batch ({whole} of 5 rows)");
    let mut resume = args.to_vec();
    resume.push("--resume");
    let run = contract(&resume);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(data("invoice.schema.json")).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let invoice = DynContract::from_schema(schema).unwrap_or_else(|e| panic!("{e}"));
    let docs = docs_by_id(&data("invoices.jsonl"));
    let rows = rows_by_id(&out); // panics on a torn row or an id twice
    assert_eq!(rows.len(), docs.len(), "every document exactly once");
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for (id, row) in &rows {
        let outcome = row["outcome"].as_str().unwrap_or_default().to_owned();
        *outcomes.entry(outcome.clone()).or_default() += 1;
        if row["ok"] == true {
            invoice
                .validate(&row["value"])
                .unwrap_or_else(|v| panic!("{id}: a kept value breaks the schema: {v}"));
            for field in ["seller", "invoice_number", "date"] {
                if let Some(s) = row["value"][field].as_str() {
                    let norm = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
                    assert!(
                        norm(&docs[id]).contains(&norm(s)),
                        "{id}: {field} {s:?} is not in the document"
                    );
                }
            }
        } else {
            assert!(
                row["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{id}: a row without a value says why: {row}"
            );
        }
    }
    eprintln!("SmolLM2 outcomes: {outcomes:?}");

    // The review page of the model's rows: well-formed, each grounded value highlighted where
    // the document writes it.
    let html = dir.join("review.html");
    let run = contract(&[
        "review",
        path(&out),
        "--docs",
        &data("invoices.jsonl"),
        "--html",
        path(&html),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let page = scraper::Html::parse_document(&std::fs::read_to_string(&html).unwrap_or_default());
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    let sel = scraper::Selector::parse("script#data").unwrap_or_else(|e| panic!("{e:?}"));
    let raw: String = page.select(&sel).flat_map(|s| s.text()).collect();
    let embedded: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{e}"));
    for d in embedded["docs"].as_array().into_iter().flatten() {
        let id = d["id"].as_str().unwrap_or_default();
        for v in d["values"].as_array().into_iter().flatten() {
            let (s, e) = (
                v["start"].as_u64().unwrap_or(0) as usize,
                v["end"].as_u64().unwrap_or(0) as usize,
            );
            assert_eq!(docs[id].get(s..e), v["written"].as_str(), "{id}: {v}");
        }
        if rows[id]["ok"] == true {
            for field in ["seller", "invoice_number", "date", "total"] {
                let present = !rows[id]["value"][field].is_null();
                let lit = d["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| v["path"] == format!("/{field}") && v["grounded"] == true)
                    .count();
                assert_eq!(
                    lit,
                    usize::from(present),
                    "{id}/{field}: one highlight per grounded value"
                );
            }
        }
    }
}
