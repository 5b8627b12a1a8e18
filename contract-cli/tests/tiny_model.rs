//! The CLI on the real tiny model (SmolLM2-135M, the tests' model: fetched into the cache on
//! first use, as the local backend's own tests do; `CONTRACT_MODEL` picks another): a row for
//! every document, every value valid and grounded, and a run killed with SIGKILL mid-batch
//! then resumed gives every document exactly once.

#![cfg(feature = "local")]

mod common;

use std::collections::HashMap;

use common::*;
use contract_core::DynContract;
use serde_json::{json, Value};

/// The prompt budget of the chunking test, in the model's tokens: the instructions and a few
/// lines of a document.
const BUDGET: &str = "700";

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
    let on_model = |e: Extract| {
        e.args(&[
            "--model",
            &model,
            "--concurrency",
            "1",
            "--max-tokens",
            "160",
        ])
    };
    let args = on_model(Extract::invoices(&out));
    // A hostile input line stops the run before the model loads, and loses nothing.
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": [1], \"text\": 2}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let run = on_model(Extract::new(&data("invoice.schema.json"), path(&bad), &out)).run();
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("bad.jsonl:2"), "{}", run.stderr);
    assert!(!run.stderr.contains("loading"), "{}", run.stderr);
    assert!(!out.exists(), "nothing written");

    // Killed with SIGKILL once the first row is written, then resumed.
    let mut child = args.command().spawn().unwrap_or_else(|e| panic!("{e}"));
    wait_for_rows(&mut child, &out, 1);
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    let before = std::fs::read_to_string(&out).unwrap_or_default();
    let whole = before.matches('\n').count();
    assert!(whole < 5, "killed mid-batch ({whole} of 5 rows)");
    let run = args.arg("--resume").run();
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
    let run = review(&out, &data("invoices.jsonl"), &html, &[]);
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

/// A long invoice: its header, `items` lines of parts, its total.
fn long_invoice(items: usize) -> String {
    let mut text = String::from("Northwind Traders Ltd\nInvoice NW-5521\nDate: 3 February 2025\n");
    for k in 1..=items {
        text.push_str(&format!(
            "Part {k}: hex bolt M6 x {k}0, zinc plated .... {k}.40\n"
        ));
    }
    text.push_str("Total due: GBP 4,321.00");
    text
}

/// The numbers `text` writes (`4,321.00` is 4321): runs of digits, commas and points.
fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (!cur.is_empty() && (c == ',' || c == '.')) {
            cur.push(c);
        } else if !cur.is_empty() {
            let number = cur.trim_end_matches([',', '.']).replace(',', "");
            out.extend(number.parse::<f64>().ok());
            cur.clear();
        }
    }
    out
}

/// Every string and number leaf of `value`, with its pointer.
fn leaves(value: &Value, at: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, v)| leaves(v, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| leaves(v, format!("{at}/{i}"), out)),
        Value::String(_) | Value::Number(_) => out.push((at, value.clone())),
        _ => {}
    }
}

#[test]
fn a_document_longer_than_the_budget_is_read_in_chunks() {
    let dir = scratch("tiny_budget");
    // Grounded values behind a `$ref` make the extractor read the whole document (no evidence
    // selection), so under `--budget` a long one is read in chunks.
    let schema = dir.join("invoice.schema.json");
    std::fs::write(
        &schema,
        json!({
            "title": "Invoice",
            "type": "object",
            "properties": {
                "seller": {"$ref": "#/$defs/Text",
                           "description": "The company that issued the invoice, as written."}
            },
            "required": ["seller"],
            "additionalProperties": false,
            "$defs": {"Text": {"type": ["string", "null"], "x-grounded": "source"}}
        })
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let short = "ACME Corporation\nInvoice INV-2024-001\nTotal due: EUR 1,250.00";
    let docs = dir.join("docs.jsonl");
    let lines = [
        json!({"id": "long", "text": long_invoice(40)}),
        json!({"id": "short", "text": short}),
    ];
    std::fs::write(&docs, lines.map(|l| format!("{l}\n")).concat())
        .unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join("rows.jsonl");
    let model = model();
    let run = Extract::new(path(&schema), path(&docs), &out)
        .args(&["--model", &model, "--budget", BUDGET, "--concurrency", "2"])
        .args(&["--max-tokens", "96"])
        .run();
    assert_eq!(run.code, 0, "{}", run.stderr);

    let docs = docs_by_id(path(&docs));
    let rows = rows_by_id(&out); // panics on a torn row or an id twice
    assert_eq!(rows.len(), docs.len(), "every document gets a row");
    // The long document is read in chunks that cover it, first line to last.
    let long = &rows["long"];
    let parts = long["chunks"]["chunks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(parts.len() >= 2, "read in chunks: {long:#}");
    let span = |p: &Value, i: usize| p["lines"][i].as_u64().unwrap_or(0);
    assert_eq!(span(&parts[0], 0), 1, "{long:#}");
    let last_line = docs["long"].lines().count() as u64;
    assert_eq!(span(&parts[parts.len() - 1], 1), last_line, "{long:#}");
    for w in parts.windows(2) {
        assert!(
            span(&w[1], 0) <= span(&w[0], 1) + 1,
            "a gap between chunks: {long:#}"
        );
        assert!(span(&w[1], 1) > span(&w[0], 1), "chunks move on: {long:#}");
    }
    for p in &parts {
        assert!(p["attempts"].as_u64().is_some_and(|n| n >= 1), "{p}");
    }
    // The short one fits the budget: read whole, no chunks.
    assert!(rows["short"].get("chunks").is_none(), "{:#}", rows["short"]);
    // No kept value is outside its document; a row without one says why.
    let norm = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    for (id, row) in &rows {
        if row["ok"] == true {
            let mut found = Vec::new();
            leaves(&row["value"], String::new(), &mut found);
            for (at, v) in found {
                match &v {
                    Value::String(s) => assert!(
                        norm(&docs[id]).contains(&norm(s)),
                        "{id}{at}: {s:?} is not in the document"
                    ),
                    Value::Number(n) => {
                        let n = n.as_f64().unwrap_or(f64::NAN);
                        assert!(
                            numbers_in(&docs[id]).contains(&n),
                            "{id}{at}: {n} is not a number of the document"
                        );
                    }
                    _ => {}
                }
            }
        } else {
            assert!(
                row["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{id}: a row without a value says why: {row}"
            );
        }
    }
    eprintln!(
        "budget {BUDGET}: long read in {} chunks, outcomes long={} short={}",
        parts.len(),
        long["outcome"],
        rows["short"]["outcome"]
    );
}
