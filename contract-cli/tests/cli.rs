//! The `contract` binary end to end on scripted replies: rows for every id, retries, resume
//! after SIGKILL (a torn last line included), Ctrl-C, hostile schemas and inputs, `check`,
//! `show`.

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{json, Value};

#[test]
fn every_document_gets_one_row_with_its_outcome() {
    let dir = scratch("every_row");
    let out = dir.join("rows.jsonl");
    let run = Extract::invoices(&out)
        .scripted(&data("invoice-replies.jsonl"))
        .run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = rows_by_id(&out);
    assert_eq!(rows.len(), 5, "one row per document");
    let outcome = |id: &str| rows[id]["outcome"].as_str().unwrap_or_default().to_owned();
    assert_eq!(outcome("inv-1"), "valid");
    // The first reply of inv-2 writes a seller the document does not: refused, fed back,
    // the second reply kept.
    assert_eq!(outcome("inv-2"), "valid");
    assert_eq!(rows["inv-2"]["retried"], true);
    assert_eq!(
        rows["inv-2"]["attempts"][0]["violations"][0]["path"],
        "/seller"
    );
    assert_eq!(
        rows["inv-2"]["attempts"][0]["violations"][0]["kind"],
        "not_in_source"
    );
    assert_eq!(rows["inv-2"]["value"]["seller"], "Globex Ltd");
    assert_eq!(outcome("inv-3"), "valid");
    assert_eq!(outcome("inv-4"), "empty");
    assert_eq!(outcome("inv-5"), "valid");
    assert_eq!(
        rows["inv-5"]["value"]["seller"],
        "Umbrella <b>Health</b> GmbH"
    );
    // Each value's evidence lies where the document writes it.
    let docs = docs_by_id(&data("invoices.jsonl"));
    for (id, row) in &rows {
        for ev in row["evidence"].as_array().into_iter().flatten() {
            let (s, e) = (
                ev["start"].as_u64().unwrap_or(0) as usize,
                ev["end"].as_u64().unwrap_or(0) as usize,
            );
            assert_eq!(docs[id].get(s..e), ev["written"].as_str(), "{id}: {ev}");
        }
    }
    let total = &rows["inv-1"]["evidence"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let total = total
        .iter()
        .find(|e| e["path"] == "/total")
        .cloned()
        .unwrap_or_default();
    assert_eq!(total["written"], "1,250.00", "{total}");
}

#[test]
fn a_document_without_a_reply_still_gets_a_row_with_the_reason() {
    let dir = scratch("no_reply");
    let replies = dir.join("replies.jsonl");
    fs::write(
        &replies,
        "{\"id\": \"inv-1\", \"replies\": [\"not json at all\", \"still not\"]}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join("rows.jsonl");
    let run = Extract::invoices(&out).scripted(path(&replies)).run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = rows_by_id(&out);
    assert_eq!(rows.len(), 5);
    assert_eq!(rows["inv-1"]["outcome"], "invalid");
    assert_eq!(rows["inv-1"]["error_kind"], "invalid");
    assert_eq!(rows["inv-1"]["attempts"].as_array().map(Vec::len), Some(2));
    for id in ["inv-2", "inv-3", "inv-4", "inv-5"] {
        assert_eq!(rows[id]["outcome"], "error", "{id}");
        assert_eq!(rows[id]["error_kind"], "unavailable", "{id}");
        assert!(rows[id]["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
}

fn many_docs(dir: &Path, n: usize) -> (String, String) {
    let docs = dir.join("docs.jsonl");
    let replies = dir.join("replies.jsonl");
    let mut d = String::new();
    let mut r = String::new();
    for i in 0..n {
        let seller = format!("Seller {i} SA");
        d.push_str(
            &json!({"id": format!("d{i:03}"), "text": format!("{seller}\nTotal: {i}.50 EUR")})
                .to_string(),
        );
        d.push('\n');
        let reply = json!({"seller": seller, "invoice_number": null, "date": null, "total": i as f64 + 0.5, "currency": "EUR"});
        r.push_str(&json!({"id": format!("d{i:03}"), "replies": [reply.to_string()]}).to_string());
        r.push('\n');
    }
    fs::write(&docs, d).unwrap_or_else(|e| panic!("{e}"));
    fs::write(&replies, r).unwrap_or_else(|e| panic!("{e}"));
    (path(&docs).to_owned(), path(&replies).to_owned())
}

#[test]
fn killed_mid_batch_then_resumed_every_document_exactly_once() {
    let dir = scratch("sigkill");
    let (docs, replies) = many_docs(&dir, 40);
    let out = dir.join("rows.jsonl");
    let args = Extract::new(&data("invoice.schema.json"), &docs, &out)
        .scripted(&replies)
        .args(&["--delay-ms", "40", "--concurrency", "3"]);
    let mut child = args.command().spawn().unwrap_or_else(|e| panic!("{e}"));
    wait_for_rows(&mut child, &out, 6);
    child.kill().unwrap_or_else(|e| panic!("{e}")); // SIGKILL
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(!status.success());
    let before = fs::read(&out).unwrap_or_default();
    let whole = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let done_before = before[..whole]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert!(
        (6..40).contains(&done_before),
        "killed mid-batch: {done_before} rows"
    );
    // A kill in the middle of a write leaves a torn line; make sure there is one.
    let mut torn = before[..whole].to_vec();
    torn.extend_from_slice(br#"{"id":"d039","outcome":"valid","value":{"sel"#);
    fs::write(&out, &torn).unwrap_or_else(|e| panic!("{e}"));

    // Without --resume an output with rows is refused and left as it is.
    let refused = args.run();
    assert_eq!(refused.code, 6, "{}", refused.stderr);
    assert!(refused.stderr.contains("--resume"), "{}", refused.stderr);
    assert_eq!(fs::read(&out).unwrap_or_default(), torn);

    let run = args.clone().arg("--resume").run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("torn"), "{}", run.stderr);
    let after = fs::read(&out).unwrap_or_default();
    assert!(
        after.starts_with(&before[..whole]),
        "rows written before the kill are kept as they were"
    );
    let text = String::from_utf8(after).unwrap_or_default();
    let mut count: HashMap<String, usize> = HashMap::new();
    for line in text.lines() {
        let row: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("torn row {line:?}: {e}"));
        *count
            .entry(row["id"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
        assert_eq!(row["outcome"], "valid", "{row}");
    }
    assert_eq!(count.len(), 40, "every document");
    assert!(count.values().all(|&n| n == 1), "exactly once: {count:?}");
    assert!(
        run.stderr
            .contains(&format!("{done_before} documents already have a row")),
        "{}",
        run.stderr
    );
}

#[test]
fn ctrl_c_finishes_the_documents_in_flight() {
    let dir = scratch("sigint");
    let (docs, replies) = many_docs(&dir, 30);
    let out = dir.join("rows.jsonl");
    let args = Extract::new(&data("invoice.schema.json"), &docs, &out)
        .scripted(&replies)
        .args(&["--delay-ms", "60", "--concurrency", "2"]);
    let mut child = args
        .command()
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for_rows(&mut child, &out, 2);
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(sent.success());
    let output = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let text = fs::read_to_string(&out).unwrap_or_default();
    assert!(text.ends_with('\n'), "no torn row after Ctrl-C");
    let n = text.lines().count();
    assert!(n < 30, "stopped early: {n}");
    let run = args.arg("--resume").run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = rows_by_id(&out);
    assert_eq!(rows.len(), 30);
    assert_eq!(
        fs::read_to_string(&out).unwrap_or_default().lines().count(),
        30
    );
}

#[test]
fn a_hostile_schema_is_refused_by_name_and_pointer_and_loses_nothing() {
    let dir = scratch("hostile_schema");
    let out = dir.join("rows.jsonl");
    fs::write(&out, "{\"id\":\"inv-1\",\"ok\":true}\n").unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
            vec!["$ref", "/properties/a"],
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": "ten"}}}),
            vec!["/properties/n"],
        ),
        (
            json!({"type": "object", "x-rules": ["a <=> b"]}),
            vec!["a <=> b"],
        ),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            vec!["must describe an object"],
        ),
        (json!(false), vec!["false"]),
    ];
    for (schema, needles) in cases {
        let file = dir.join("schema.json");
        fs::write(&file, schema.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let run = Extract::new(path(&file), &data("invoices.jsonl"), &out)
            .arg("--resume")
            .scripted(&data("invoice-replies.jsonl"))
            .run();
        assert_eq!(run.code, 3, "{schema}: {}", run.stderr);
        for n in needles {
            assert!(
                run.stderr.contains(n),
                "{schema}: `{n}` not in {}",
                run.stderr
            );
        }
        assert_eq!(
            fs::read_to_string(&out).unwrap_or_default(),
            "{\"id\":\"inv-1\",\"ok\":true}\n"
        );
    }
    fs::write(dir.join("broken.json"), "{\"type\": \"object\",").unwrap_or_else(|e| panic!("{e}"));
    let run = contract(&["show", "--schema", path(&dir.join("broken.json"))]);
    assert_eq!(run.code, 3);
    assert!(run.stderr.contains("not JSON"), "{}", run.stderr);
}

#[test]
fn a_hostile_input_line_is_refused_by_line_and_loses_nothing() {
    let dir = scratch("hostile_input");
    let out = dir.join("rows.jsonl");
    let kept = "{\"id\":\"inv-1\",\"ok\":true}\n";
    fs::write(&out, kept).unwrap_or_else(|e| panic!("{e}"));
    let docs = dir.join("docs.jsonl");
    let cases = [
        ("{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"text\": \"y\"}\n{\"id\": 5, \"text\": \"z\"}\n", ":3"),
        ("{\"id\": \"a\", \"text\": \"x\"}\n[1, 2]\n", ":2"),
        ("{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"a\", \"text\": \"again\"}\n", "`a` appears twice"),
        ("{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"text\": \"unterminated\n", ":2"),
    ];
    for (input, needle) in cases {
        fs::write(&docs, input).unwrap_or_else(|e| panic!("{e}"));
        let run = Extract::new(&data("invoice.schema.json"), path(&docs), &out)
            .arg("--resume")
            .scripted(&data("invoice-replies.jsonl"))
            .run();
        assert_eq!(run.code, 4, "{input:?}: {}", run.stderr);
        assert!(
            run.stderr.contains(needle),
            "{input:?}: `{needle}` not in {}",
            run.stderr
        );
        assert_eq!(fs::read_to_string(&out).unwrap_or_default(), kept);
    }
    // Invalid UTF-8 in a text file.
    let bin = dir.join("doc.txt");
    fs::write(&bin, b"abc\xff\xfe").unwrap_or_else(|e| panic!("{e}"));
    let run = Extract::new(&data("invoice.schema.json"), path(&bin), &out)
        .arg("--resume")
        .scripted(&data("invoice-replies.jsonl"))
        .run();
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("UTF-8"), "{}", run.stderr);
}

#[test]
fn text_files_folders_and_globs_are_documents() {
    let dir = scratch("text_inputs");
    let folder = dir.join("docs");
    fs::create_dir_all(folder.join("sub")).unwrap_or_else(|e| panic!("{e}"));
    fs::write(folder.join("a.txt"), "Seller A\nTotal 5").unwrap_or_else(|e| panic!("{e}"));
    fs::write(folder.join("sub/b.txt"), "Seller B\nTotal 6").unwrap_or_else(|e| panic!("{e}"));
    fs::write(folder.join("c.md"), "Seller C").unwrap_or_else(|e| panic!("{e}"));
    let replies = dir.join("replies.jsonl");
    fs::write(&replies, "").unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join("rows.jsonl");
    let glob = format!("{}/*.txt", path(&folder));
    // More inputs after the first: `--input` takes several.
    let run = Extract::new(
        &data("invoice.schema.json"),
        path(&folder.join("sub")),
        &out,
    )
    .args(&["--input", &glob, path(&folder.join("c.md"))])
    .scripted(path(&replies))
    .run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut ids: Vec<String> = rows_by_id(&out).into_keys().collect();
    ids.sort();
    let expect = |p: &str| path(&folder.join(p)).to_owned();
    assert_eq!(ids, [expect("a.txt"), expect("c.md"), expect("sub/b.txt")]);
}

#[test]
fn a_missing_model_says_how_to_get_one() {
    let dir = scratch("missing_model");
    let out = dir.join("rows.jsonl");
    let run = Extract::invoices(&out)
        .args(&["--model", "/nonexistent/model.gguf"])
        .run();
    assert_eq!(run.code, 5, "{}", run.stderr);
    for needle in [
        "/nonexistent/model.gguf",
        "smollm2-135m",
        "--model",
        "--backend openai",
    ] {
        assert!(
            run.stderr.contains(needle),
            "`{needle}` not in {}",
            run.stderr
        );
    }
    assert!(!out.exists() || fs::read_to_string(&out).unwrap_or_default().is_empty());
}

#[test]
fn check_reads_replies_through_the_ladder_and_the_validator() {
    let dir = scratch("check");
    let replies = dir.join("replies.jsonl");
    let lines = [
        json!({"id": "inv-1", "reply": "Sure! ```json\n{\"seller\": \"ACME Corporation\", \"invoice_number\": \"INV-2024-001\", \"date\": \"15 March 2024\", \"total\": 1250, \"currency\": \"EUR\"}\n```"}),
        json!({"id": "inv-2", "reply": "{\"seller\": \"Globex Inc\", \"invoice_number\": \"G-7781\", \"date\": null, \"total\": -3, \"currency\": \"GBP\"}"}),
        json!({"id": "inv-3", "value": {"seller": "Initech Inc.", "invoice_number": "4410", "date": "June 30, 2024", "total": 2400, "currency": "USD"}}),
        json!({"id": "inv-4", "reply": "{\"seller\": null, \"invoice_number\": null, \"date\": null, \"total\": null, \"currency\": null,"}),
    ];
    fs::write(
        &replies,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join("checked.jsonl");
    let run = contract(&[
        "check",
        "--schema",
        &data("invoice.schema.json"),
        "--input",
        path(&replies),
        "--source",
        &data("invoices.jsonl"),
        "--output",
        path(&out),
    ]);
    assert_eq!(run.code, 1, "one reply is invalid: {}", run.stderr);
    let rows = rows_by_id(&out);
    assert_eq!(rows["inv-1"]["outcome"], "valid");
    assert_eq!(rows["inv-1"]["level"], "extracted");
    let kinds: Vec<(&str, &str)> = rows["inv-2"]["violations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v["path"].as_str().unwrap_or_default(),
                v["kind"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(kinds.contains(&("/total", "out_of_range")), "{kinds:?}");
    assert!(kinds.contains(&("/seller", "not_in_source")), "{kinds:?}");
    assert_eq!(rows["inv-2"]["not_in_source"], json!(["/seller", "/total"]));
    assert_eq!(rows["inv-3"]["outcome"], "valid");
    assert_eq!(rows["inv-3"]["level"], "strict");
    assert_eq!(rows["inv-4"]["level"], "repaired");
    assert_eq!(rows["inv-4"]["outcome"], "empty");
}

#[test]
fn show_prints_the_signature_the_strict_schema_and_the_gaps() {
    let dir = scratch("show");
    let schema = dir.join("tags.json");
    fs::write(
        &schema,
        json!({"title": "Tags", "type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string", "minLength": 2}, "uniqueItems": true}
        }, "required": ["tags"]})
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let run = contract(&["show", "--schema", path(&schema)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("{\"tags\": [string (2+ chars), ...] (unique)}"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("`uniqueItems` at `/properties/tags`"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\"strict\": true") || run.stdout.contains("additionalProperties"),
        "{}",
        run.stdout
    );
    let run = contract(&["show", "--schema", &data("invoice.schema.json"), "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    assert_eq!(v["name"], "Invoice");
    assert!(
        v["moved"]
            .as_array()
            .is_some_and(|m| m.iter().any(|x| x["keyword"] == "x-grounded")),
        "{v:#}"
    );
    assert!(v["gaps"].is_array());
}

#[test]
fn help_documents_the_exit_codes() {
    let run = contract(&["--help"]);
    assert_eq!(run.code, 0);
    for code in ["130", "interrupted", "the schema cannot be read"] {
        assert!(run.stdout.contains(code), "{}", run.stdout);
    }
    let run = contract(&["extract", "--schema"]);
    assert_eq!(run.code, 2);
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    let mut child = Command::new(BIN)
        .args(["show", "--schema", &data("invoice.schema.json")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // The reader goes away before the child writes (as `| head -1` does after its line).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[test]
fn retry_errors_runs_the_documents_without_a_reply_again_once_each() {
    let dir = scratch("retry_errors");
    let out = dir.join("rows.jsonl");
    let some = dir.join("some.jsonl");
    // inv-3 and inv-5 get no reply: the server was down for them.
    let all = fs::read_to_string(data("invoice-replies.jsonl")).unwrap_or_default();
    let partial: String = all
        .lines()
        .filter(|l| !l.contains("\"inv-3\"") && !l.contains("\"inv-5\""))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&some, partial).unwrap_or_else(|e| panic!("{e}"));
    let base = |replies: &str| Extract::invoices(&out).scripted(replies);
    let run = base(path(&some)).run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("2 documents got no reply"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--retry-errors"), "{}", run.stderr);
    assert_eq!(rows_by_id(&out)["inv-3"]["outcome"], "error");
    // A plain resume keeps the error rows (they are rows).
    let resume = base(&data("invoice-replies.jsonl")).arg("--resume");
    let run = resume.run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(rows_by_id(&out)["inv-3"]["outcome"], "error");
    // With --retry-errors they run again, each document still once.
    let run = resume.arg("--retry-errors").run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = rows_by_id(&out); // panics on an id twice
    assert_eq!(rows.len(), 5);
    assert_eq!(rows["inv-3"]["outcome"], "valid");
    assert_eq!(rows["inv-5"]["outcome"], "valid");
    assert!(!dir.join("rows.retry-errors.tmp").exists());
    // --retry-errors needs --resume.
    let bad = base(&data("invoice-replies.jsonl")).arg("--retry-errors");
    assert_eq!(bad.run().code, 2);
}

/// The `x-rules` note `show` and `extract` print is true of the schema: held by the mask of the
/// grounded grammar for a flat grounded schema, by the typed grammar's for a flat ungrounded
/// one it carries without loss, by the value filter over the JSON Schema mask for one whose
/// rule fields it carries, by the validator only otherwise.
#[test]
fn the_rules_note_says_where_the_rules_are_held() {
    let dir = scratch("rules_note");
    let out = dir.join("rows.jsonl");
    let replies = dir.join("replies.jsonl");
    fs::write(&replies, "").unwrap_or_else(|e| panic!("{e}"));
    // (grounded, both rule fields required, an optional property beside them, a rule field
    // with `multipleOf`): the grounded grammar, the typed one, the JSON Schema with the rules
    // held over it by the value filter (a rule field optional, which the typed grammar would
    // have to write; an optional property beside them), the JSON Schema alone (a rule field of
    // a shape the filter does not carry).
    for (grounded, all_required, beside, multiple) in [
        (true, true, false, false),
        (false, true, false, false),
        (false, false, false, false),
        (false, true, true, false),
        (false, true, false, true),
    ] {
        let mut field = json!({"type": ["number", "null"]});
        if grounded {
            field["x-grounded"] = json!("source");
        }
        let required = if all_required {
            json!(["low", "high"])
        } else {
            json!(["low"])
        };
        let mut properties = json!({"low": field, "high": field});
        if beside {
            properties["note"] = json!({"type": ["string", "integer"]});
        }
        if multiple {
            properties["low"]["multipleOf"] = json!(0.5);
        }
        let schema = dir.join(format!(
            "rules-{grounded}-{all_required}-{beside}-{multiple}.json"
        ));
        fs::write(
            &schema,
            json!({"title": "Range", "type": "object", "x-rules": ["low <= high"],
                   "properties": properties, "required": required})
            .to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let shown = contract(&["show", "--schema", path(&schema)]);
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        let extracted = Extract::new(path(&schema), &data("invoices.jsonl"), &out)
            .scripted(path(&replies))
            .arg("--overwrite")
            .run();
        assert_eq!(extracted.code, 0, "{}", extracted.stderr);
        let note = |text: &str| {
            text.lines()
                .find(|l| l.contains("`x-rules` at `/`: not in the"))
                .unwrap_or_else(|| panic!("no x-rules note in {text}"))
                .to_owned()
        };
        let typed = grounded || (all_required && !beside && !multiple);
        let over = !typed && !multiple;
        for line in [note(&shown.stdout), note(&extracted.stderr)] {
            assert_eq!(line.contains("validator only"), !typed && !over, "{line}");
            assert_eq!(line.contains("grounded grammar"), grounded, "{line}");
            assert_eq!(line.contains("typed grammar"), typed && !grounded, "{line}");
            assert_eq!(line.contains("value filter"), over, "{line}");
        }
        let as_json = contract(&["show", "--schema", path(&schema), "--json"]);
        let v: Value = serde_json::from_str(&as_json.stdout).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["grounded_grammar"], grounded, "{v:#}");
        assert_eq!(v["typed_grammar"], typed, "{v:#}");
        assert_eq!(v["rules_in_mask"], typed || over, "{v:#}");
    }
}
