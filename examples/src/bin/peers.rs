//! The Rust side of `scripts/peers.py`, which compares this project with its peers (Pydantic,
//! json-repair, llama.cpp). Each subcommand prints JSON on stdout for the script to read.
//!
//! ```text
//! peers tokens [--model GGUF]        signature vs compact JSON Schema tokens, per example contract
//! peers validate DOCS [--rounds N]   `Guidance::from_json` over one document per line, best of N
//!                [--read-violations]  (and the refused documents' violations read)
//! peers ladder INPUTS.jsonl          the output ladder over `{"input": "..."}` lines, one result a line
//! peers prompts DOCS.jsonl           the messages, prompt tokens and strict schema of the filings study
//! ```

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use contract_backends::local::fetch::resolve_model;
use contract_backends::local::gguf_tokenizer::{read_content, GgufTokenizer};
use contract_backends::local::ChatTemplate;
use contract_core::parse::recover;
use contract_core::Contract;
use examples::filings::study::{self, StudyDoc};
use examples::filings::ReleaseGuidance;
use examples::{Address, Exclusions, FilingTable, Guidance, Policy};
use serde_json::{json, Value};

/// Figures of this project for the comparison with its peers (`scripts/peers.py`).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Tokens of each example contract's signature and compact schemas, with the model's tokenizer.
    Tokens {
        /// A GGUF file (default: the default local model, fetched on first use).
        #[arg(long)]
        model: Option<PathBuf>,
    },
    /// Times `Guidance::from_json` over the documents of FILE, one per line; best of `--rounds`.
    Validate {
        /// One JSON document per line.
        file: PathBuf,
        /// Rounds over all documents; the fastest counts.
        #[arg(long, default_value_t = 15)]
        rounds: usize,
        /// Also write each document's verdict here, one `true`/`false` a line.
        #[arg(long)]
        verdicts: Option<PathBuf>,
        /// Also read every refused document's violations (each one's kind, pointer and
        /// message), as the output ladder does to write a retry; without it only the verdict is
        /// taken.
        #[arg(long)]
        read_violations: bool,
    },
    /// Reads `{"input": "..."}` lines and prints, per line, the ladder's level and recovered JSON.
    Ladder {
        /// JSON lines, each an object with a string `input`.
        file: PathBuf,
    },
    /// The chat messages the filings study sends for each `{id, text}` line, their prompt tokens
    /// (the GGUF's chat template and tokenizer, as the local backend counts them), and the
    /// strict schema.
    Prompts {
        /// `{id, text}` JSON lines (`filings --write-docs` writes them).
        file: PathBuf,
        /// A GGUF file (default: the default local model, fetched on first use).
        #[arg(long)]
        model: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let result = match Args::parse().command {
        Command::Tokens { model } => tokens(model.as_deref()),
        Command::Validate {
            file,
            rounds,
            verdicts,
            read_violations,
        } => validate(&file, rounds, verdicts.as_deref(), read_violations),
        Command::Ladder { file } => ladder(&file),
        Command::Prompts { file, model } => prompts(&file, model.as_deref()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The non-empty lines of `path`, with their 1-based numbers.
fn lines(path: &Path) -> Result<Vec<(usize, String)>, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        if !line.trim().is_empty() {
            out.push((i + 1, line));
        }
    }
    Ok(out)
}

fn print_json(value: &Value) -> Result<(), String> {
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

/// The model's path and its tokenizer, built from the GGUF metadata (no weights are read).
fn tokenizer(model: Option<&Path>) -> Result<(PathBuf, GgufTokenizer), String> {
    let path = resolve_model(model).map_err(|e| e.to_string())?;
    let content = read_content(&path).map_err(|e| e.to_string())?;
    let tok = GgufTokenizer::from_content(&content).map_err(|e| e.to_string())?;
    Ok((path, tok))
}

fn tokens(model: Option<&Path>) -> Result<(), String> {
    let (path, tok) = tokenizer(model)?;
    let count = |text: &str| {
        tok.encode(text)
            .map(|ids| ids.len())
            .map_err(|e| e.to_string())
    };
    let row = |name: &str, signature: String, schema: Value, strict: Option<Value>| {
        let schema = serde_json::to_string(&schema).map_err(|e| e.to_string())?;
        let strict = strict
            .map(|s| serde_json::to_string(&s).map_err(|e| e.to_string()))
            .transpose()?;
        Ok::<Value, String>(json!({
            "contract": name,
            "signature": signature,
            "signature_chars": signature.len(),
            "signature_tokens": count(&signature)?,
            "schema_chars": schema.len(),
            "schema_tokens": count(&schema)?,
            "strict_schema_tokens": strict.as_deref().map(count).transpose()?,
        }))
    };
    fn parts<C: Contract>() -> (String, Value, Option<Value>) {
        (
            C::signature(),
            C::json_schema(),
            C::try_strict_schema().ok(),
        )
    }
    let contracts = [
        ("Guidance", parts::<Guidance>()),
        ("Address", parts::<Address>()),
        ("Policy", parts::<Policy>()),
        ("FilingTable", parts::<FilingTable>()),
        ("Exclusions", parts::<Exclusions>()),
        ("ReleaseGuidance", parts::<ReleaseGuidance>()),
    ];
    let rows = contracts
        .into_iter()
        .map(|(name, (sig, schema, strict))| row(name, sig, schema, strict))
        .collect::<Result<Vec<_>, _>>()?;
    print_json(&json!({"model": path.display().to_string(), "contracts": rows}))
}

fn validate(
    path: &Path,
    rounds: usize,
    verdicts: Option<&Path>,
    read_violations: bool,
) -> Result<(), String> {
    let docs: Vec<String> = lines(path)?.into_iter().map(|(_, l)| l).collect();
    if docs.is_empty() {
        return Err(format!("{}: no documents", path.display()));
    }
    let mut best = Duration::MAX;
    let mut accepted = 0;
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        accepted = 0;
        for doc in &docs {
            match Guidance::from_json(std::hint::black_box(doc)) {
                Ok(_) => accepted += 1,
                Err(violations) if read_violations => {
                    for v in violations.iter() {
                        std::hint::black_box((v.path.as_str(), v.kind, v.message.as_str()));
                    }
                }
                Err(_) => {}
            }
        }
        best = best.min(start.elapsed());
    }
    if let Some(out) = verdicts {
        let file = File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
        let mut w = BufWriter::new(file);
        for doc in &docs {
            writeln!(w, "{}", Guidance::from_json(doc).is_ok())
                .map_err(|e| format!("{}: {e}", out.display()))?;
        }
        w.flush().map_err(|e| format!("{}: {e}", out.display()))?;
    }
    let seconds = best.as_secs_f64();
    print_json(&json!({
        "docs": docs.len(),
        "accepted": accepted,
        "rounds": rounds.max(1),
        "read_violations": read_violations,
        "best_seconds": seconds,
        "docs_per_s": docs.len() as f64 / seconds,
        "ns_per_doc": seconds * 1e9 / docs.len() as f64,
    }))
}

fn ladder(path: &Path) -> Result<(), String> {
    for (n, line) in lines(path)? {
        let case: Value =
            serde_json::from_str(&line).map_err(|e| format!("{}:{n}: {e}", path.display()))?;
        let Some(input) = case["input"].as_str() else {
            return Err(format!("{}:{n}: no string `input`", path.display()));
        };
        let rec = recover(input);
        print_json(&json!({"level": rec.level.as_str(), "json": rec.json}))?;
    }
    Ok(())
}

fn prompts(path: &Path, model: Option<&Path>) -> Result<(), String> {
    let (model, tok) = tokenizer(model)?;
    let template = ChatTemplate::for_tokenizer(&tok).map_err(|e| e.to_string())?;
    let mut docs = Vec::new();
    for (n, line) in lines(path)? {
        let doc: StudyDoc = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{n}: expected {{\"id\", \"text\"}}: {e}", path.display()))?;
        // The messages `filings` sends by default.
        let messages = study::prompt_parts(study::DEFAULT_INSTRUCTIONS).messages(&doc.text);
        let rendered = template
            .render(&messages.0, true)
            .map_err(|e| e.to_string())?;
        let prompt_tokens = tok
            .encode_prompt(&rendered)
            .map_err(|e| e.to_string())?
            .len();
        docs.push(json!({"id": doc.id, "messages": messages, "prompt_tokens": prompt_tokens}));
    }
    print_json(&json!({
        "model": model.display().to_string(),
        "contract": "ReleaseGuidance",
        "strict_schema": ReleaseGuidance::try_strict_schema().map_err(|e| e.to_string())?,
        "json_schema": ReleaseGuidance::json_schema(),
        "docs": docs,
    }))
}
