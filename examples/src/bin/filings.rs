//! The filings study: revenue guidance from earnings releases under each mode of the
//! reliability ladder, on the default local model (fetched on first use) or any GGUF.
//!
//! ```text
//! cargo run --release -p examples --bin filings                      # 40 generated releases, routed mode
//! cargo run --release -p examples --bin filings -- --study           # every mode of the ladder
//! cargo run --release -p examples --bin filings -- --mode rules --docs 10
//! cargo run --release -p examples --bin filings -- --input docs.jsonl --output results.jsonl
//! scripts/cuda_build.sh && ../target-cuda/release/filings --device cuda:0   # on a GPU
//! ```

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use contract_backends::batch::{run_batch, run_batch_streaming, BatchOptions, Doc};
use contract_backends::local::{
    parse_device, Device, Engine, LocalBackend, LocalOptions, WeightFormat,
};
use contract_backends::openai::{self, OpenAiBackend};
use contract_core::extract::FieldEvent;
use contract_core::grammar::Whitespace;
use contract_core::prompt::{system_message_with, Instructions};
use contract_core::select::Selection;
use contract_core::Backend;
use examples::filings::study::{self, Mode, ModeBackend, StudyDoc};
use examples::filings::{generate, GroundedGuidance, ReleaseGuidance, DEFAULT_DOCS, DEFAULT_SEED};
use serde_json::Value;

/// The main job's model: the smallest catalogue model that does it well (`docs/benchmarks.md`,
/// "Passage choice": 40 of 40 fresh releases right in `routed` mode, where SmolLM2-135M, the
/// tests' model, gets the releases without guidance only).
const MAIN_MODEL: &str = "qwen2.5-coder-0.5b";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendKind {
    /// A GGUF model on Candle (the default model unless `--model`).
    Local,
    /// An OpenAI-compatible server (`--base-url`, `--model-name`, `OPENAI_API_KEY`).
    Openai,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Weights {
    /// This crate's own forward pass on the CPU (its kernels' formats); on a GPU
    /// candle-transformers' model with the weights as stored.
    Auto,
    /// candle-transformers' model, weights as stored in the file.
    Stored,
    /// candle-transformers' model, weights dequantised to f32.
    F32,
    /// candle-transformers' model, weights re-quantised to Q8_0.
    Q8,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Ws {
    /// Newlines and indentation as the model writes them, capped.
    Bounded,
    /// No whitespace between tokens.
    Compact,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PromptStyle {
    /// The contract's one-line signature.
    Signature,
    /// The signature and one line per field with its description.
    Fields,
}

/// Extracts revenue guidance from earnings releases with every rung of the reliability ladder
/// and prints valid / correct / speed per mode.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// In `routed` mode: what the words a passage shares with the judge's question add to its
    /// margin, at most, in nats (`Selection::lexical_weight`; the library's default, 1, when not
    /// given; 0 for the model's margins alone).
    #[arg(long)]
    lexical_weight: Option<f64>,
    /// `{id, text}` JSON lines to run on instead of the generated releases (no truth: `correct`
    /// is null).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Where to write one JSON line per document and mode.
    #[arg(long)]
    output: Option<PathBuf>,
    /// free, retry, repair, constrained, rules, grounded, routed, a comma-separated list, or all. The
    /// default is the best measured mode (docs/benchmarks.md): routed.
    #[arg(long, default_value = "routed")]
    mode: String,
    /// Runs the whole ladder (every mode), as `--mode all`.
    #[arg(long)]
    study: bool,
    /// How many releases to generate.
    #[arg(long, default_value_t = DEFAULT_DOCS)]
    docs: usize,
    /// The generator's seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Which backend answers.
    #[arg(long, value_enum, default_value = "local")]
    backend: BackendKind,
    /// A GGUF file or a catalogue model (`smollm2-135m`, `qwen2.5-coder-0.5b`; fetched on first
    /// use); default: `CONTRACT_MODEL`, else `qwen2.5-coder-0.5b` (`MAIN_MODEL`).
    #[arg(long)]
    model: Option<PathBuf>,
    /// How the local model holds its weights.
    #[arg(long, value_enum, default_value = "auto")]
    weights: Weights,
    /// Where the local model runs: `cpu`, or `cuda:N` (a binary built with the `cuda` feature:
    /// scripts/cuda_build.sh). The mask and the sampler run on the CPU either way.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// The mask's whitespace layout (default: the contract's, bounded).
    #[arg(long, value_enum)]
    whitespace: Option<Ws>,
    /// What the instructions show besides the signature: `signature` only, or `fields` (one line
    /// per field with its description; the default, `study::DEFAULT_INSTRUCTIONS`).
    #[arg(long, value_enum)]
    prompt: Option<PromptStyle>,
    /// Most tokens per reply.
    #[arg(long, default_value_t = 160)]
    max_tokens: u32,
    /// The server's base URL (`--backend openai`; default `OPENAI_BASE_URL` or OpenAI's).
    #[arg(long)]
    base_url: Option<String>,
    /// The model name the server serves (`--backend openai`).
    #[arg(long, default_value = "gpt-4o-mini")]
    model_name: String,
    /// How the masked modes ask the server to constrain (`structured_outputs`, `json_mode`,
    /// `vllm_guided_json`, `json_object_schema` for llama.cpp). The free modes send no format.
    #[arg(long, default_value = "structured_outputs")]
    server_mode: String,
    /// Seconds a request to the server may take before it is abandoned and retried
    /// (`--backend openai`). A CPU server with many parallel slots can need far more than the
    /// default for its first replies: its slots prefill all their prompts before decoding.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Documents in flight at once: requests to the server with `--backend openai`; with the
    /// local backend, requests decoded together in one batch (`LocalOptions::max_batch`, each
    /// exactly as alone). `routed` takes one release at a time.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Print every field to stderr as it closes and is checked (`id /path = value`), the
    /// batch runner's `run_batch_streaming`; the rows are the same.
    #[arg(long)]
    fields: bool,
    /// Score replies produced elsewhere instead of running a backend: `{id, raw, seconds}` JSON
    /// lines, read through the same ladder and normalisation; `--label` names them.
    #[arg(long)]
    replies: Option<PathBuf>,
    /// The name of `--replies` in the table.
    #[arg(long, default_value = "external")]
    label: String,
    /// Write the generated releases as `{id, text, truth}` JSON lines here and exit.
    #[arg(long)]
    write_docs: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Candle's thread pools read their sizes from the environment: set the measured best ones
    // here, before any other thread starts (the library never writes the environment).
    if matches!(args.backend, BackendKind::Local) {
        let options = LocalOptions::default().engine(local_engine(args.weights));
        for (key, value) in contract_backends::local::candle_thread_env(&options) {
            if std::env::var_os(key).is_none() {
                std::env::set_var(key, value);
            }
        }
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn local_engine(w: Weights) -> Engine {
    match w {
        Weights::Auto => Engine::Auto,
        Weights::Stored => Engine::Candle(WeightFormat::AsStored),
        Weights::F32 => Engine::Candle(WeightFormat::F32),
        Weights::Q8 => Engine::Candle(WeightFormat::Q8_0),
    }
}

fn read_docs(path: &Path) -> Result<Vec<StudyDoc>, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut docs = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let doc: StudyDoc = serde_json::from_str(&line).map_err(|e| {
            format!(
                "{}:{}: expected {{\"id\", \"text\"}}: {e}",
                path.display(),
                i + 1
            )
        })?;
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
    let modes = if args.study {
        Mode::ALL.to_vec()
    } else {
        Mode::parse_list(&args.mode)?
    };
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
        let mut out =
            BufWriter::new(File::create(path).map_err(|e| format!("{}: {e}", path.display()))?);
        for d in &docs {
            let line = serde_json::to_string(d).map_err(|e| e.to_string())?;
            writeln!(out, "{line}").map_err(|e| e.to_string())?;
        }
        out.flush().map_err(|e| e.to_string())?;
        eprintln!("wrote {} documents to {}", docs.len(), path.display());
        return Ok(());
    }

    let out = match &args.output {
        Some(p) => Some(BufWriter::new(
            File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => None,
    };
    let out = Mutex::new(out);
    let emit = |row: &Value| {
        if let Ok(mut guard) = out.lock() {
            if let Some(w) = guard.as_mut() {
                let line = serde_json::to_string(row).unwrap_or_default();
                if let Err(e) = writeln!(w, "{line}").and_then(|_| w.flush()) {
                    eprintln!("error: writing the output: {e}");
                }
            }
        }
    };

    if let Some(path) = &args.replies {
        let rows = score_replies(path, &docs, &args.label, &emit)?;
        println!("\nreplies: {}\ndocuments: {}\n", path.display(), docs.len());
        println!("{}", study::table(&[study::summarize(&args.label, &rows)]));
        return Ok(());
    }

    let whitespace = args.whitespace.map(|w| match w {
        Ws::Bounded => Whitespace::DEFAULT,
        Ws::Compact => Whitespace::Compact,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut rows: Vec<Value> = Vec::new();
    let described;
    let mut decode_figures = None;
    match args.backend {
        BackendKind::Local => {
            let device: Device = parse_device(&args.device).map_err(|e| e.to_string())?;
            let options = LocalOptions::default()
                .engine(local_engine(args.weights))
                .device(device)
                .max_tokens(args.max_tokens)
                .max_batch(args.concurrency);
            let path = match &args.model {
                Some(p) => contract_backends::local::fetch::model_path(&p.to_string_lossy())
                    .map_err(|e| e.to_string())?,
                None => match std::env::var_os(contract_backends::local::fetch::MODEL_ENV) {
                    Some(v) if !v.is_empty() => {
                        contract_backends::local::fetch::default_model_path()
                            .map_err(|e| e.to_string())?
                    }
                    _ => contract_backends::local::fetch::model_path(MAIN_MODEL)
                        .map_err(|e| e.to_string())?,
                },
            };
            eprintln!("loading {}", path.display());
            let local = LocalBackend::with_options(&path, options).map_err(|e| e.to_string())?;
            eprintln!("weights: {}", local.weights_summary());
            described = format!("local {} on {}", path.display(), args.device);
            for &mode in &modes {
                let backend = ModeBackend::new(&local, mode).whitespace(whitespace);
                rows.extend(runtime.block_on(run_mode(
                    backend,
                    mode,
                    &docs,
                    &args,
                    args.concurrency,
                    &emit,
                ))?);
            }
            decode_figures = Some(local.decode_stats());
        }
        BackendKind::Openai => {
            let masked_mode: openai::Mode = args.server_mode.parse()?;
            let build = |mode: openai::Mode| {
                let mut b = OpenAiBackend::builder(args.model_name.clone())
                    .mode(mode)
                    .timeout(Duration::from_secs(args.timeout));
                if let Some(url) = &args.base_url {
                    b = b.base_url(url.clone());
                }
                b.build().map_err(|e| e.to_string())
            };
            let free = build(openai::Mode::PromptOnly)?;
            let masked = build(masked_mode)?;
            described = format!(
                "openai {} at {} ({} for the masked modes; `rules` cannot be enforced by a server)",
                args.model_name,
                masked.base_url(),
                masked_mode.as_str()
            );
            for &mode in &modes {
                let server = if mode.masked() { &masked } else { &free };
                // `routed` judges the passages by the server's log-probabilities (`logprobs`).
                let backend = ModeBackend::new(server, mode);
                rows.extend(runtime.block_on(run_mode(
                    backend,
                    mode,
                    &docs,
                    &args,
                    args.concurrency,
                    &emit,
                ))?);
            }
        }
    }
    let summaries: Vec<_> = modes
        .iter()
        .map(|m| study::summarize(m.as_str(), &rows))
        .collect();
    println!("\nbackend: {described}\ndocuments: {}\n", docs.len());
    println!("{}", study::table(&summaries));
    if let [mode] = modes.as_slice() {
        println!("{}", study::headline(mode.as_str(), &rows, 3));
    }
    if let Some(stats) = decode_figures {
        print_decode_figures(&stats);
    }
    Ok(())
}

/// The local backend's generation figures, one `name: value` a line.
fn print_decode_figures(stats: &contract_backends::local::DecodeStats) {
    println!("\ngenerations: {}", stats.generations);
    println!("generated tokens: {}", stats.tokens);
    if let Some(tps) = stats.tokens_per_second() {
        println!("decode tokens/s: {tps:.1}");
    }
    if stats.sampled_tokens > 0 {
        let steps = stats.sampled_tokens as f64;
        println!(
            "step ms: {:.2}",
            (stats.prefill_ms + stats.decode_ms) / steps
        );
        println!("mask ms/step: {:.3}", stats.mask_ms / steps);
    }
    if stats.batched_calls > 0 {
        println!("batched forward calls: {}", stats.batched_calls);
        println!(
            "mean batch: {:.2}",
            stats.batched_requests as f64 / stats.batched_calls as f64
        );
    }
    if let Some((work, exposed)) = stats.mask_share() {
        println!("mask share of generation time: {:.1}%", work * 100.0);
        println!("mask share not overlapped: {:.1}%", exposed * 100.0);
    }
}

/// Runs one mode over every document with the batch runner (progress bar on stderr); each row
/// is written as it arrives.
async fn run_mode<B: Backend + Sync>(
    backend: B,
    mode: Mode,
    docs: &[StudyDoc],
    args: &Args,
    concurrency: usize,
    emit: &(dyn Fn(&Value) + Sync),
) -> Result<Vec<Value>, String> {
    let style = match args.prompt {
        None => study::DEFAULT_INSTRUCTIONS,
        Some(PromptStyle::Signature) => Instructions::Signature,
        Some(PromptStyle::Fields) => Instructions::SignatureAndFields,
    };
    if mode.grounded() {
        let mut extractor = study::grounded_extractor(backend, mode, args.max_tokens)
            .instructions(system_message_with::<GroundedGuidance>(style));
        if let (Some(w), Mode::Routed) = (args.lexical_weight, mode) {
            extractor = extractor.selection(Selection::default().lexical_weight(w));
        }
        return run_extractor(extractor, mode, docs, concurrency, args.fields, emit).await;
    }
    let extractor = study::extractor(backend, mode, args.max_tokens)
        .instructions(system_message_with::<ReleaseGuidance>(style));
    run_extractor(extractor, mode, docs, concurrency, args.fields, emit).await
}

async fn run_extractor<C: study::StudyContract + Send + Sync, B: Backend + Sync>(
    extractor: contract_core::Extractor<C, B>,
    mode: Mode,
    docs: &[StudyDoc],
    concurrency: usize,
    fields: bool,
    emit: &(dyn Fn(&Value) + Sync),
) -> Result<Vec<Value>, String> {
    let by_id: HashMap<&str, &StudyDoc> = docs.iter().map(|d| (d.id.as_str(), d)).collect();
    let batch: Vec<Doc> = docs.iter().map(|d| Doc::new(&d.id, &d.text)).collect();
    let options = BatchOptions::default()
        .concurrency(concurrency)
        .label(mode.as_str());
    // With --fields: when each document's first field came (time to first field), beside
    // the whole record's time (the extraction's own `timings.total_ms`).
    let first: Mutex<HashMap<String, Instant>> = Mutex::new(HashMap::new());
    let waits: Mutex<Vec<(f64, f64)>> = Mutex::new(Vec::new());
    let row = |doc: &Doc, ex: contract_core::Extraction<C>| {
        let mut row = match by_id.get(doc.id.as_str()) {
            Some(d) => study::row(d, mode, &ex),
            None => serde_json::json!({"id": doc.id, "mode": mode.as_str(), "valid": false,
                                        "error": "unknown document id"}),
        };
        let came = first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&doc.id);
        if let (Some(came), Value::Object(map)) = (came, &mut row) {
            // The record ends now: the first field came `came.elapsed()` before its end.
            let record_ms = ex.timings.total_ms;
            let first_ms = (record_ms - came.elapsed().as_secs_f64() * 1000.0).max(0.0);
            map.insert("first_field_ms".into(), serde_json::json!(first_ms));
            eprintln!(
                "{}: first field at {first_ms:.0} ms, the record at {record_ms:.0} ms",
                doc.id
            );
            waits
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((first_ms, record_ms));
        }
        emit(&row);
        row
    };
    let print = |doc: &Doc, f: &FieldEvent| {
        first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(doc.id.clone())
            .or_insert_with(Instant::now);
        eprintln!(
            "{} {} = {} (attempt {})",
            doc.id, f.path, f.value, f.attempt
        );
    };
    let (rows, summary) = if fields {
        run_batch_streaming(&extractor, batch, &options, row, &print).await
    } else {
        run_batch(&extractor, batch, &options, row).await
    }
    .map_err(|e| e.to_string())?;
    let waits = waits.into_inner().unwrap_or_else(|e| e.into_inner());
    if !waits.is_empty() {
        let n = waits.len() as f64;
        eprintln!(
            "{:<11} {} documents with a field: first field {:.0} ms, the record {:.0} ms (means)",
            mode.as_str(),
            waits.len(),
            waits.iter().map(|w| w.0).sum::<f64>() / n,
            waits.iter().map(|w| w.1).sum::<f64>() / n
        );
    }
    eprintln!(
        "{:<11} {} documents, {} valid, {:.1} s{}",
        mode.as_str(),
        summary.done + summary.failed,
        summary.done,
        summary.seconds,
        if summary.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    if summary.interrupted {
        return Err(format!("interrupted during `{}`", mode.as_str()));
    }
    Ok(rows)
}

/// Scores `{id, raw, seconds}` rows produced by another engine.
fn score_replies(
    path: &Path,
    docs: &[StudyDoc],
    label: &str,
    emit: &dyn Fn(&Value),
) -> Result<Vec<Value>, String> {
    let by_id: HashMap<&str, &StudyDoc> = docs.iter().map(|d| (d.id.as_str(), d)).collect();
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let reply: Value = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        let id = reply["id"].as_str().unwrap_or_default();
        let Some(doc) = by_id.get(id) else {
            return Err(format!(
                "{}:{}: unknown document id `{id}`",
                path.display(),
                i + 1
            ));
        };
        let raw = reply["raw"].as_str().unwrap_or_default();
        let row = study::score_reply(doc, label, raw, reply["seconds"].as_f64().unwrap_or(0.0));
        emit(&row);
        rows.push(row);
    }
    Ok(rows)
}
