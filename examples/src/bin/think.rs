//! Think, then fill: seed `000`'s measurement (reasoning models: 0/5 strict JSON, 5/5
//! extractable, because the `<think>` trace comes first) on a local model prompted to reason
//! first, against the same prompt under the think-then-fill mask.
//!
//! Three arms over the same receipts (SROIE development rows, `Receipt` from
//! [`examples::realdocs`], one attempt each, greedy, the whole document shown):
//!
//! - `prompted`: the prompt asks for a `<think>` block then the JSON; nothing enforced;
//! - `opened`: the same prompt, the reply opened with `<think>\n` (as a reasoning model's chat
//!   template does: DeepSeek-R1's opens the trace in the prompt), then nothing enforced: what a
//!   reasoning model behind a plain API gives, the seed's condition;
//! - `enforced`: the same prompt under the think-then-fill mask
//!   ([`Extractor::think`]): the block capped, then the contract's grammar and groundings;
//! - `no_think`: the library's default (the contract's mask from the first token), for reference.
//!
//! For each: replies with a trace, strict (the reply is exactly one JSON object), extractable
//! (the ladder recovers an object), valid (the value fills the contract, grounded in the
//! document), fields right (of 4 per receipt, the data set's scoring), seconds per document.
//!
//! ```text
//! cargo run --release -p examples --bin think -- --receipts sroie-dev.jsonl --limit 5 --think 128
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use contract_backends::local::{
    Allowed, LocalBackend, LocalError, LocalOptions, MaskFactory, TokenMask,
};
use contract_core::extract::{Backend, BackendError, Request, Response, Sampling};
use contract_core::grammar::Think;
use contract_core::read::{Conventions, DateOrder};
use contract_core::select::Selection;
use contract_core::{Extraction, Extractor, Level};
use examples::realdocs::{read_rows, score_receipt, Receipt};
use serde_json::json;

/// Runs the three arms over the first receipts and prints one row per arm.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// SROIE receipts as JSON lines `{id, text, truth}` (development rows).
    #[arg(long)]
    receipts: PathBuf,
    /// How many receipts (the first ones).
    #[arg(long, default_value_t = 5)]
    limit: usize,
    /// A GGUF file or a catalogue model.
    #[arg(long, default_value = "qwen2.5-coder-0.5b")]
    model: String,
    /// The reasoning block's cap, in tokens.
    #[arg(long, default_value_t = 128)]
    think: u32,
    /// Most tokens of the answer after the block.
    #[arg(long, default_value_t = 200)]
    max_tokens: u32,
    /// Which arms, comma-separated.
    #[arg(long, default_value = "prompted,opened,enforced,no_think")]
    arms: String,
    /// Prints every reply.
    #[arg(long)]
    verbose: bool,
}

/// The backend without any decoding constraint: the request's messages only.
struct Unmasked<B>(B);

impl<B: Backend + Sync> Backend for Unmasked<B> {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        let mut req = req.clone();
        req.constraint = std::sync::Arc::new(req.constraint.with_decoding(None));
        self.0.complete(&req).await
    }
}

/// Masks that open every reply with `<think>\n` and then leave it free (`--arms opened`).
struct OpenTrace {
    open: Vec<u32>,
}

impl MaskFactory for OpenTrace {
    fn mask_for(&self, _req: &Request) -> Result<Option<Box<dyn TokenMask + Send>>, LocalError> {
        Ok(Some(Box::new(Opened {
            open: self.open.clone(),
            fed: false,
        })))
    }
}

/// Forces the opening tokens once, then allows every token.
struct Opened {
    open: Vec<u32>,
    fed: bool,
}

impl TokenMask for Opened {
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError> {
        Ok(Allowed::All)
    }

    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        Ok(if self.fed {
            Vec::new()
        } else {
            self.open.clone()
        })
    }

    fn consume(&mut self, _tokens: &[u32]) -> Result<(), LocalError> {
        self.fed = true;
        Ok(())
    }

    fn is_done(&self) -> bool {
        false
    }
}

/// Malaysian receipts write the day first.
fn day_first(c: Conventions) -> Conventions {
    c.or_date_order(DateOrder::DayFirst)
}

#[derive(Default)]
struct Tally {
    docs: usize,
    traced: usize,
    strict: usize,
    extractable: usize,
    valid: usize,
    fields: usize,
    seconds: f64,
    tokens: u64,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let path =
        contract_backends::local::fetch::model_path(&args.model).map_err(|e| e.to_string())?;
    let backend =
        LocalBackend::with_options(&path, LocalOptions::default()).map_err(|e| e.to_string())?;
    let open = backend
        .tokenizer()
        .encode("<think>\n")
        .map_err(|e| e.to_string())?;
    let opened = backend
        .clone()
        .with_masks(std::sync::Arc::new(OpenTrace { open }));
    let rows = read_rows(&args.receipts)?;
    let rows: Vec<_> = rows.into_iter().take(args.limit).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let think = Think::new(args.think);
    let greedy = Sampling {
        temperature: Some(0.0),
        ..Sampling::default()
    };
    let mut table = Vec::new();
    for arm in args.arms.split(',').map(str::trim) {
        let mut tally = Tally::default();
        for row in &rows {
            let t0 = Instant::now();
            let record: Extraction<Receipt> = runtime.block_on(async {
                match arm {
                    "prompted" => {
                        Extractor::<Receipt, _>::new(Unmasked(&backend))
                            .selection(Selection::off())
                            .conventions(day_first)
                            .max_attempts(1)
                            .max_tokens(args.max_tokens)
                            .sampling(greedy)
                            .think(think)
                            .extract(&row.text)
                            .await
                    }
                    "opened" => {
                        Extractor::<Receipt, _>::new(&opened)
                            .selection(Selection::off())
                            .conventions(day_first)
                            .max_attempts(1)
                            .max_tokens(args.max_tokens)
                            .sampling(greedy)
                            .think(think)
                            .extract(&row.text)
                            .await
                    }
                    "enforced" => {
                        Extractor::<Receipt, _>::new(&backend)
                            .selection(Selection::off())
                            .conventions(day_first)
                            .max_attempts(1)
                            .max_tokens(args.max_tokens)
                            .sampling(greedy)
                            .think(think)
                            .extract(&row.text)
                            .await
                    }
                    _ => {
                        Extractor::<Receipt, _>::new(&backend)
                            .selection(Selection::off())
                            .conventions(day_first)
                            .max_attempts(1)
                            .max_tokens(args.max_tokens)
                            .sampling(greedy)
                            .extract(&row.text)
                            .await
                    }
                }
            });
            let seconds = t0.elapsed().as_secs_f64();
            let attempt = record.attempts.first();
            let raw = attempt.and_then(|a| a.raw.clone()).unwrap_or_default();
            let score = score_receipt(record.value.as_ref(), &row.truth);
            let right = [score.company, score.date, score.address, score.total]
                .iter()
                .filter(|x| **x)
                .count();
            tally.docs += 1;
            tally.traced += usize::from(record.reasoning.is_some());
            tally.strict += usize::from(record.level == Level::Strict);
            tally.extractable += usize::from(record.level != Level::Invalid);
            tally.valid += usize::from(record.value.is_some());
            tally.fields += right;
            tally.seconds += seconds;
            tally.tokens += u64::from(attempt.and_then(|a| a.completion_tokens).unwrap_or(0));
            println!(
                "{}",
                json!({
                    "arm": arm,
                    "id": row.id,
                    "level": record.level,
                    "trace": record.reasoning.is_some(),
                    "valid": record.value.is_some(),
                    "fields_right": right,
                    "seconds": (seconds * 10.0).round() / 10.0,
                    "error": record.error.as_ref().map(|e| e.to_string()),
                    "violations": record.violations.to_string(),
                })
            );
            if args.verbose {
                println!("--- reply ---\n{raw}\n-------------");
            }
        }
        table.push((arm.to_owned(), tally));
    }
    println!(
        "\n| arm | replies with a trace | strict JSON | extractable | valid (contract + grounding) | fields right | s/doc | tokens/doc |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (arm, t) in &table {
        let n = t.docs.max(1);
        println!(
            "| {arm} | {}/{} | {}/{} | {}/{} | {}/{} | {}/{} | {:.1} | {:.0} |",
            t.traced,
            t.docs,
            t.strict,
            t.docs,
            t.extractable,
            t.docs,
            t.valid,
            t.docs,
            t.fields,
            4 * t.docs,
            t.seconds / n as f64,
            t.tokens as f64 / n as f64,
        );
    }
    Ok(())
}
