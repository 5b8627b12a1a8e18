//! `contract extract --backend openai` against a small OpenAI-compatible server in the test:
//! the strict schema is sent, each document gets its row, a server error is a row's reason.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::{json, Value};

/// The replies of the example documents, keyed by a line each document writes.
fn reply_for(prompt: &str) -> Option<(u16, String)> {
    let replies = [
        (
            "ACME Corporation",
            r#"{"seller": "ACME Corporation", "invoice_number": "INV-2024-001", "date": "15 March 2024", "total": 1250, "currency": "EUR"}"#,
        ),
        (
            "Globex Ltd",
            r#"{"seller": "Globex Ltd", "invoice_number": "G-7781", "date": "2 April 2024", "total": 980.5, "currency": "GBP"}"#,
        ),
        (
            "Meeting notes",
            r#"{"seller": null, "invoice_number": null, "date": null, "total": null, "currency": null}"#,
        ),
        (
            "Umbrella",
            r#"{"seller": "Umbrella Corp", "invoice_number": "R-55", "date": null, "total": 310, "currency": "EUR"}"#,
        ),
    ];
    if prompt.contains("Initech") {
        return Some((400, json!({"error": {"message": "model overloaded with licences", "type": "invalid_request_error"}}).to_string()));
    }
    let (_, reply) = replies.iter().find(|(k, _)| prompt.contains(k))?;
    // Umbrella's seller is not in the document: refused, fed back, and written the same again.
    let body = json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    });
    Some((200, body.to_string()))
}

fn serve(mut stream: TcpStream, seen: Arc<Mutex<Vec<Value>>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prompt = request["messages"].to_string();
    seen.lock().unwrap_or_else(|e| e.into_inner()).push(request);
    let (code, payload) = reply_for(&prompt).unwrap_or((
        500,
        json!({"error": {"message": "unknown document"}}).to_string(),
    ));
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        if code == 200 { "OK" } else { "Bad Request" },
        payload.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(payload.as_bytes())?;
    stream.flush()
}

#[test]
fn an_openai_compatible_server_fills_the_contract() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server_seen = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = server_seen.clone();
            std::thread::spawn(move || serve(stream, seen));
        }
    });
    let dir = scratch("openai");
    let out = dir.join("rows.jsonl");
    let url = format!("http://{addr}/v1");
    let run = Extract::invoices(&out)
        .args(&["--backend", "openai", "--base-url", &url])
        .args(&["--model-name", "test-model"])
        .run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = rows_by_id(&out);
    assert_eq!(rows.len(), 5);
    assert_eq!(rows["inv-1"]["outcome"], "valid");
    assert_eq!(rows["inv-2"]["outcome"], "valid");
    assert_eq!(rows["inv-3"]["outcome"], "error");
    assert_eq!(rows["inv-3"]["error_kind"], "invalid_request");
    assert!(
        rows["inv-3"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("overloaded")),
        "{}",
        rows["inv-3"]
    );
    assert_eq!(rows["inv-4"]["outcome"], "empty");
    assert_eq!(rows["inv-5"]["outcome"], "invalid");
    assert_eq!(rows["inv-5"]["retried"], true);
    assert_eq!(rows["inv-5"]["not_in_source"], json!(["/seller"]));
    let all = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // The library's extraction first asks the server to judge passages (a yes/no question
    // scored by log-probabilities); this server gives none, so each document is read whole.
    let (requests, judged): (Vec<Value>, Vec<Value>) = all
        .into_iter()
        .partition(|r| r.get("response_format").is_some());
    assert!(!judged.is_empty());
    for r in &judged {
        let last = r["messages"][r["messages"]
            .as_array()
            .map_or(0, Vec::len)
            .saturating_sub(1)]["content"]
            .as_str()
            .unwrap_or_default();
        assert!(last.ends_with("Answer yes or no."), "{r}");
    }
    // 1 each for inv-1, 2, 3 and 4, 2 for inv-5 (the retry with the violation fed back).
    assert_eq!(requests.len(), 6, "{requests:#?}");
    for r in &requests {
        assert_eq!(r["model"], "test-model");
        assert_eq!(r["response_format"]["type"], "json_schema", "{r}");
        assert_eq!(r["response_format"]["json_schema"]["strict"], true, "{r}");
    }
    let retry = requests
        .iter()
        .find(|r| r["messages"].as_array().is_some_and(|m| m.len() > 2))
        .unwrap_or_else(|| panic!("no retry"));
    assert!(
        retry["messages"]
            .to_string()
            .contains("not in the document"),
        "{retry}"
    );
}
