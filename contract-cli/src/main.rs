//! `contract`: fill any JSON Schema contract from documents with a language model, check
//! replies, show a contract, review the results in a browser.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use contract_backends::batch::BatchOptions;

mod backend;
mod commands;
mod dynx;
mod error;
mod evidence;
mod inputs;
mod review;
mod runner;
mod schema;

use error::CliError;

const EXIT_CODES: &str = "\
Exit codes:
  0    done: every document has its row (a value or the reason it has none)
  1    check: at least one reply does not fill the contract
  2    bad command line
  3    the schema cannot be read or cannot be a contract (the message names the keyword and \
its JSON pointer)
  4    an input cannot be read (the message names the file and line); nothing was run
  5    the model cannot be found or loaded, or the server backend cannot be set up
  6    the output cannot be written or resumed
  130  interrupted (Ctrl-C): the documents in flight got their rows; run again with --resume";

/// Fill a typed contract (any JSON Schema) from documents with a language model.
#[derive(Debug, Parser)]
#[command(name = "contract", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Extract the contract from every document: one JSON line per document in the output.
    #[command(after_help = EXIT_CODES)]
    Extract(ExtractArgs),
    /// Read model replies through the ladder and the validator: each reply's level, value,
    /// violations, and the values its document does not write.
    #[command(after_help = EXIT_CODES)]
    Check(CheckArgs),
    /// Show a contract: its signature, strict schema (and what it moved), field docs and gaps.
    #[command(after_help = EXIT_CODES)]
    Show(ShowArgs),
    /// Write the review page of a run: one HTML file, each value highlighted in its document.
    #[command(after_help = EXIT_CODES)]
    Review(ReviewArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendKind {
    /// A GGUF model on this machine (the catalogue's, fetched on first use, or a file).
    Local,
    /// An OpenAI-compatible server (OpenAI, vLLM, llama.cpp's server).
    Openai,
    /// Replies from a file (`--replies`), for tests and dry runs.
    Scripted,
}

#[derive(Debug, Args)]
struct ExtractArgs {
    /// The contract: a JSON Schema file (its keywords plus `x-grounded`, `x-rules`, `x-unit`).
    #[arg(long)]
    schema: PathBuf,
    /// Documents: `.jsonl` files of `{"id", "text"}` lines, text files, folders or globs.
    #[arg(long, required = true, num_args = 1..)]
    input: Vec<String>,
    /// The JSON lines file the rows go to.
    #[arg(long)]
    output: PathBuf,
    /// Skip the documents whose id already has a row in the output.
    #[arg(long, conflicts_with = "overwrite")]
    resume: bool,
    /// Replace an existing output.
    #[arg(long)]
    overwrite: bool,
    /// With --resume: run again the documents whose row is an `error` (no reply: a server
    /// down, a timeout), replacing their rows.
    #[arg(long, requires = "resume")]
    retry_errors: bool,
    /// Also write the review page of the whole output here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Where replies come from.
    #[arg(long, value_enum, default_value_t = BackendKind::Local)]
    backend: BackendKind,
    /// Local: a catalogue model (`smollm2-135m`, `qwen2.5-coder-0.5b`) or a GGUF file;
    /// default `CONTRACT_MODEL`, else `smollm2-135m`.
    #[arg(long)]
    model: Option<String>,
    /// Local: the largest prompt, in the model's tokens (its chat template counted). A schema
    /// read whole (no grounded field, or a `$ref`) reads a longer document in overlapping
    /// chunks and merges the replies (the row's `chunks`), each chunk's grounded values held to
    /// its lines; one that selects evidence shows passages that fit. Without it, the whole
    /// document is shown however long.
    #[arg(long)]
    budget: Option<usize>,
    /// Openai: the server's URL (default OpenAI's; the key from `OPENAI_API_KEY`).
    #[arg(long)]
    base_url: Option<String>,
    /// Openai: the model name the server knows.
    #[arg(long, required_if_eq("backend", "openai"))]
    model_name: Option<String>,
    /// Openai: how the server holds the reply to the schema (`structured_outputs`,
    /// `json_object_schema`, `vllm_guided_json`, `json_mode`, `prompt_only`).
    #[arg(long, default_value = "structured_outputs")]
    server_mode: String,
    /// Openai: seconds before a request times out.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Scripted: JSON lines `{"id", "replies": [..]}`.
    #[arg(long, required_if_eq("backend", "scripted"))]
    replies: Option<PathBuf>,
    /// Scripted: milliseconds each document waits before its reply.
    #[arg(long, default_value_t = 0, hide = true)]
    delay_ms: u64,
    /// Documents in flight at once (the local model decodes them in one batch).
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Attempts per document: the first, then retries with the violations fed back.
    #[arg(long, default_value_t = 2)]
    attempts: usize,
    /// Most tokens a reply may have.
    #[arg(long, default_value_t = 512)]
    max_tokens: u32,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The contract: a JSON Schema file.
    #[arg(long)]
    schema: PathBuf,
    /// Replies: JSON lines `{"id", "reply": "raw model text"}` (or `"value": {..}`).
    #[arg(long)]
    input: PathBuf,
    /// The documents the replies answer (by id): values are checked against them.
    #[arg(long, num_args = 1..)]
    source: Vec<String>,
    /// Write the rows here instead of standard output.
    #[arg(long)]
    output: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The contract: a JSON Schema file.
    #[arg(long)]
    schema: PathBuf,
    /// Everything as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ReviewArgs {
    /// The rows of a run (`contract extract --output`, `contract check --output`).
    rows: PathBuf,
    /// The documents (as for `extract --input`).
    #[arg(long, required = true, num_args = 1..)]
    docs: Vec<String>,
    /// The HTML file to write.
    #[arg(long)]
    html: PathBuf,
    /// The page's title.
    #[arg(long, default_value = "contract")]
    title: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Extract(a) => extract(a),
        Command::Check(a) => commands::check(&a.schema, &a.input, &a.source, a.output.as_deref()),
        Command::Show(a) => commands::show(&a.schema, a.json),
        Command::Review(a) => {
            commands::review(&a.rows, &a.docs, &a.html, &a.title).map(|()| error::code::OK)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code())
        }
    }
}

fn extract(a: ExtractArgs) -> Result<u8, CliError> {
    let contract = schema::load_for_extraction(&a.schema)?;
    for gap in contract.gaps() {
        eprintln!("note: {gap}");
    }
    let docs = inputs::read_docs(&a.input)?;
    let model = match a.backend {
        #[cfg(feature = "local")]
        BackendKind::Local => backend::local(a.model.as_deref(), a.concurrency, a.max_tokens)?,
        #[cfg(not(feature = "local"))]
        BackendKind::Local => {
            return Err(CliError::Backend(
                "this `contract` was built without feature `local`: use `--backend openai`".into(),
            ))
        }
        BackendKind::Openai => backend::openai(
            a.base_url.as_deref(),
            a.model_name.as_deref().unwrap_or_default(),
            &a.server_mode,
            Duration::from_secs(a.timeout),
        )?,
        BackendKind::Scripted => backend::scripted(
            a.replies.as_deref().unwrap_or(std::path::Path::new("")),
            Duration::from_millis(a.delay_ms),
        )?,
    };
    eprintln!(
        "{} documents, {} on {}",
        docs.len(),
        contract.name(),
        model.describe()
    );
    let title = contract.name().to_owned();
    let mut ex = dynx::DynExtractor::new(contract, a.attempts, Some(a.max_tokens));
    if let Some(tokens) = a.budget {
        ex = ex.with_budget(model.budget(tokens)?);
    }
    let mut options = BatchOptions::default()
        .concurrency(a.concurrency)
        .output(&a.output)
        .resume(a.resume)
        .overwrite(a.overwrite)
        .progress(!a.quiet);
    if a.retry_errors {
        options = options.retry_errors(runner::is_error);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Backend(format!("cannot start the async runtime: {e}")))?;
    // The runner takes the documents; the review page reads them after.
    let review_docs = a.html.as_ref().map(|_| docs.clone());
    let (summary, errors) = runtime.block_on(runner::run(docs, &options, &model, &ex))?;
    if summary.torn_bytes > 0 {
        eprintln!(
            "resume: cut off a torn last line ({} bytes; its document ran again)",
            summary.torn_bytes
        );
    }
    if summary.retried > 0 {
        eprintln!(
            "resume: {} documents with an error row ran again",
            summary.retried
        );
    }
    if summary.skipped > 0 {
        eprintln!("resume: {} documents already have a row", summary.skipped);
    }
    eprintln!(
        "{} documents: {} with a value, {} without (see their `error`), {} already done; {:.1} s",
        summary.total, summary.done, summary.failed, summary.skipped, summary.seconds
    );
    if let (n, Some(first)) = &errors {
        eprintln!(
            "{n} documents got no reply (outcome `error`); the first: {first}\n  \
             once that is fixed, `--resume --retry-errors` runs them again"
        );
    }
    if let (Some(html), Some(docs)) = (&a.html, &review_docs) {
        commands::write_review(&a.output, docs, html, &title)?;
    }
    if summary.interrupted {
        eprintln!(
            "interrupted: {} documents have no row yet; run the same command with --resume",
            summary.remaining()
        );
        return Ok(error::code::INTERRUPTED);
    }
    Ok(error::code::OK)
}
