//! `OpenAiBackend` + `run_batch`: extract `Guidance` from a JSONL file of documents with an
//! OpenAI-compatible server, one JSON row per document.
//!
//! ```text
//! cargo run -p contract-backends --no-default-features --features openai,batch \
//!     --example openai_batch -- --base-url http://127.0.0.1:8000/v1 --model smollm2 \
//!     --mode json_mode --input docs.jsonl --output rows.jsonl --resume
//! ```
//!
//! Without `--input` it runs four built-in earnings-release snippets. The API key comes from
//! `OPENAI_API_KEY` (none is needed for a local server), the base URL from `--base-url` or
//! `OPENAI_BASE_URL`. Prints the summary as JSON on stdout; exits with status 1 when a document
//! failed for a transport reason (unavailable, timeout, protocol, rate limit, invalid request),
//! 2 on bad arguments or input.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use contract_backends::batch::{default_row, read_jsonl_docs, run_batch, BatchOptions, Doc};
use contract_backends::openai::{Mode, OpenAiBackend};
use contract_core::Extractor;
use examples::Guidance;

const SAMPLES: [&str; 4] = [
    "Acme Corp reported second-quarter revenue of $1.2 billion.\n\
     For the third quarter of 2024, the company expects revenue between $1,250 million and $1,300 million.",
    "Globex Inc. Exhibit 99.1\nNet income was $45,210 thousand.\nThe company is not providing guidance for the next quarter.",
    "Initech expects fourth-quarter 2025 revenue of approximately $820 million.",
    "Hooli guides first-quarter 2026 revenue to $3,100 million to $3,300 million.",
];

const TRANSPORT: [&str; 5] = [
    "unavailable",
    "timeout",
    "protocol",
    "rate_limited",
    "invalid_request",
];

struct Args {
    base_url: Option<String>,
    model: String,
    mode: Mode,
    input: Option<PathBuf>,
    output: PathBuf,
    concurrency: usize,
    resume: bool,
    max_tokens: u32,
    timeout: u64,
    retries: u32,
}

fn usage() -> &'static str {
    "usage: openai_batch [--base-url URL] [--model NAME] [--mode structured_outputs|json_mode|prompt_only|vllm_guided_json|json_object_schema]\n\
     \x20                   [--input DOCS.jsonl] [--output ROWS.jsonl] [--concurrency N] [--resume]\n\
     \x20                   [--max-tokens N] [--timeout SECONDS] [--retries N]"
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        base_url: None,
        model: std::env::var("CONTRACT_OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into()),
        mode: Mode::StructuredOutputs,
        input: None,
        output: PathBuf::from("guidance.jsonl"),
        concurrency: 4,
        resume: false,
        max_tokens: 200,
        timeout: 120,
        retries: 4,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("`{flag}` needs a value\n{}", usage()))
        };
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("`{flag} {v}`: {e}"));
        match flag.as_str() {
            "--base-url" => args.base_url = Some(value()?),
            "--model" => args.model = value()?,
            "--mode" => args.mode = value()?.parse()?,
            "--input" => args.input = Some(value()?.into()),
            "--output" => args.output = value()?.into(),
            "--concurrency" => args.concurrency = number(value()?)? as usize,
            "--resume" => args.resume = true,
            "--max-tokens" => args.max_tokens = number(value()?)? as u32,
            "--timeout" => args.timeout = number(value()?)?,
            "--retries" => args.retries = number(value()?)? as u32,
            "-h" | "--help" => return Err(usage().to_owned()),
            other => return Err(format!("unknown argument `{other}`\n{}", usage())),
        }
    }
    Ok(args)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let docs = match &args.input {
        Some(path) => match read_jsonl_docs(path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        },
        None => SAMPLES
            .iter()
            .enumerate()
            .map(|(i, t)| Doc::new(format!("sample-{i}"), *t))
            .collect(),
    };
    let mut builder = OpenAiBackend::builder(&args.model)
        .mode(args.mode)
        .timeout(Duration::from_secs(args.timeout))
        .max_retries(args.retries);
    if let Some(url) = &args.base_url {
        builder = builder.base_url(url);
    }
    let backend = match builder.build() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "{} documents -> {} ({}, mode {})",
        docs.len(),
        args.output.display(),
        backend.base_url(),
        args.mode.as_str()
    );
    let extractor = Extractor::<Guidance, _>::new(backend)
        .max_attempts(2)
        .max_tokens(args.max_tokens);
    let options = BatchOptions::default()
        .concurrency(args.concurrency)
        .output(&args.output)
        .resume(args.resume)
        .label(format!("guidance/{}", args.mode.as_str()));
    let (rows, summary) = match run_batch(&extractor, docs, &options, default_row).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut transport_failures = 0;
    for row in &rows {
        let kind = row["error_kind"].as_str().unwrap_or("");
        if TRANSPORT.contains(&kind) {
            transport_failures += 1;
        }
        eprintln!(
            "{}: {}",
            row["id"].as_str().unwrap_or("?"),
            if row["ok"] == true {
                row["value"].to_string()
            } else {
                format!("{kind}: {}", row["error"])
            }
        );
    }
    println!(
        "{}",
        serde_json::json!({
            "summary": summary,
            "transport_failures": transport_failures,
            "mode": args.mode.as_str(),
        })
    );
    if transport_failures > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
