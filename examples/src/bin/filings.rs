//! The filings study: revenue guidance from earnings releases under each mode of the
//! reliability ladder, on the default local model (fetched on first use) or any GGUF.
//!
//! ```text
//! cargo run --release -p examples --bin filings                      # 40 generated releases, every mode
//! cargo run --release -p examples --bin filings -- --mode rules --docs 10
//! cargo run --release -p examples --bin filings -- --input docs.jsonl --output results.jsonl
//! ```

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use contract_backends::local::{LocalBackend, LocalOptions, WeightFormat};
use contract_core::grammar::Whitespace;
use examples::filings::study::{self, Mode, ModeBackend, StudyDoc};
use examples::filings::{generate, DEFAULT_DOCS, DEFAULT_SEED};
use serde_json::Value;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BackendKind {
    /// A GGUF model on Candle (the default model unless `--model`).
    Local,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Weights {
    /// f32 for small models, else as stored.
    Auto,
    /// As stored in the file.
    Stored,
    /// Dequantised to f32.
    F32,
    /// Re-quantised to Q8_0.
    Q8,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Ws {
    /// Newlines and indentation as the model writes them, capped.
    Bounded,
    /// No whitespace between tokens.
    Compact,
}

/// Extracts revenue guidance from earnings releases with every rung of the reliability ladder
/// and prints valid / correct / speed per mode.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// `{id, text}` JSON lines to run on instead of the generated releases (no truth: `correct`
    /// is null).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Where to write one JSON line per document and mode.
    #[arg(long)]
    output: Option<PathBuf>,
    /// free, retry, repair, constrained, rules, a comma-separated list, or all.
    #[arg(long, default_value = "all")]
    mode: String,
    /// How many releases to generate.
    #[arg(long, default_value_t = DEFAULT_DOCS)]
    docs: usize,
    /// The generator's seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Which backend answers.
    #[arg(long, value_enum, default_value = "local")]
    backend: BackendKind,
    /// A GGUF file (default: SmolLM2-135M-Instruct, fetched on first use).
    #[arg(long)]
    model: Option<PathBuf>,
    /// How the local model holds its weights.
    #[arg(long, value_enum, default_value = "auto")]
    weights: Weights,
    /// The mask's whitespace layout (default: the contract's, bounded).
    #[arg(long, value_enum)]
    whitespace: Option<Ws>,
    /// Most tokens per reply.
    #[arg(long, default_value_t = 160)]
    max_tokens: u32,
    /// Write the generated releases as `{id, text, truth}` JSON lines here and exit.
    #[arg(long)]
    write_docs: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_docs(path: &PathBuf) -> Result<Vec<StudyDoc>, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut docs = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let doc: StudyDoc = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: expected {{\"id\", \"text\"}}: {e}", path.display(), i + 1))?;
        if let Some(first) = seen.insert(doc.id.clone(), i + 1) {
            return Err(format!(
                "{}:{}: id `{}` already on line {first}",
                path.display(),
                i + 1,
                doc.id
            ));
        }
        docs.push(doc);
    }
    Ok(docs)
}

fn run(args: Args) -> Result<(), String> {
    let modes = Mode::parse_list(&args.mode)?;
    let docs: Vec<StudyDoc> = match &args.input {
        Some(path) => read_docs(path)?,
        None => generate(args.docs, args.seed)
            .into_iter()
            .map(|f| StudyDoc {
                id: f.id,
                text: f.text,
                truth: Some(f.truth),
            })
            .collect(),
    };
    if let Some(path) = &args.write_docs {
        let mut out = BufWriter::new(File::create(path).map_err(|e| format!("{}: {e}", path.display()))?);
        for d in &docs {
            let line = serde_json::to_string(d).map_err(|e| e.to_string())?;
            writeln!(out, "{line}").map_err(|e| e.to_string())?;
        }
        out.flush().map_err(|e| e.to_string())?;
        eprintln!("wrote {} documents to {}", docs.len(), path.display());
        return Ok(());
    }

    let weights = match args.weights {
        Weights::Auto => WeightFormat::Auto,
        Weights::Stored => WeightFormat::AsStored,
        Weights::F32 => WeightFormat::F32,
        Weights::Q8 => WeightFormat::Q8_0,
    };
    let options = LocalOptions::default().weights(weights).max_tokens(args.max_tokens);
    let path = match &args.model {
        Some(p) => p.clone(),
        None => contract_backends::local::fetch::default_model_path().map_err(|e| e.to_string())?,
    };
    let BackendKind::Local = args.backend;
    eprintln!("loading {}", path.display());
    let backend = LocalBackend::with_options(&path, options).map_err(|e| e.to_string())?;
    let whitespace = args.whitespace.map(|w| match w {
        Ws::Bounded => Whitespace::DEFAULT,
        Ws::Compact => Whitespace::Compact,
    });

    let mut out = match &args.output {
        Some(p) => Some(BufWriter::new(File::create(p).map_err(|e| format!("{}: {e}", p.display()))?)),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let mut rows: Vec<Value> = Vec::new();
    let started = Instant::now();
    for mode in &modes {
        let mode = *mode;
        let extractor = study::extractor(
            ModeBackend::new(&backend, mode).whitespace(whitespace),
            mode,
            args.max_tokens,
        );
        for (i, doc) in docs.iter().enumerate() {
            let ex = runtime.block_on(extractor.extract(&doc.text));
            let row = study::row(doc, mode, &ex);
            eprintln!(
                "[{:>5.0}s] {:<11} {:>3}/{} {:<8} valid={} correct={} {:.1}s",
                started.elapsed().as_secs_f64(),
                mode.as_str(),
                i + 1,
                docs.len(),
                doc.id,
                row["valid"],
                row["correct"],
                row["seconds"].as_f64().unwrap_or(0.0)
            );
            if let Some(out) = out.as_mut() {
                let line = serde_json::to_string(&row).map_err(|e| e.to_string())?;
                writeln!(out, "{line}").and_then(|_| out.flush()).map_err(|e| e.to_string())?;
            }
            rows.push(row);
        }
    }
    let summaries: Vec<_> = modes.iter().map(|m| study::summarize(*m, &rows)).collect();
    println!(
        "\nmodel: {}\ndocuments: {}\n",
        path.display(),
        docs.len()
    );
    println!("{}", study::table(&summaries));
    Ok(())
}
