//! Real documents through the library's default extraction: shop receipts (SROIE) and
//! non-disclosure agreements (Kleister-NDA), with the data sets' own scoring
//! ([`examples::realdocs`]).
//!
//! ```text
//! cargo run --release -p examples --bin realdocs -- --receipts sroie.jsonl --ndas nda.jsonl --split test
//! cargo run --release -p examples --bin realdocs -- --receipts sroie.jsonl --mode plain   # a JSON-schema mask only
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::{Parser, ValueEnum};
use contract_backends::local::{LocalBackend, LocalOptions};
use contract_core::extract::{Backend, BackendError, Request, Response};
use contract_core::ground::{check_reply, Grounds};
use contract_core::read::{Conventions, DateOrder};
use contract_core::select::{Judge, Passages, Selection, ValuePrompt};
use contract_core::{Constraint, Contract, Decoding, Extraction, Extractor, Source};
use examples::realdocs::{
    nda_pairs, nda_truth_pairs, read_rows, score_receipt, Counts, Nda, Receipt, Row, Split,
    NDAS_DEV, RECEIPTS_DEV,
};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// The library's default extraction (`Extractor::new(backend).extract(doc)`).
    Library,
    /// The same contract under a plain JSON-schema mask (what llama.cpp or Outlines give): no
    /// grounding in the mask, no passage selection; replies still checked by the library.
    Plain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SplitArg {
    Dev,
    Test,
    All,
}

/// Runs the receipt and agreement contracts over labelled real documents and prints the data
/// sets' scores, seconds and forward calls per document.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// SROIE receipts as JSON lines `{id, text, truth}`.
    #[arg(long)]
    receipts: Option<PathBuf>,
    /// Kleister-NDA agreements as JSON lines `{id, text, truth}`.
    #[arg(long)]
    ndas: Option<PathBuf>,
    /// Which rows: `dev` (the first 20 receipts / 15 agreements), `test` (the rest) or `all`.
    #[arg(long, value_enum, default_value = "test")]
    split: SplitArg,
    /// How to extract.
    #[arg(long, value_enum, default_value = "library")]
    mode: Mode,
    /// A GGUF file or a catalogue model (default `qwen2.5-coder-0.5b`).
    #[arg(long, default_value = "qwen2.5-coder-0.5b")]
    model: String,
    /// At most this many documents of each set.
    #[arg(long)]
    limit: Option<usize>,
    /// Most tokens generated per request.
    #[arg(long, default_value_t = 256)]
    max_tokens: u32,
    /// Where to write one JSON line per document (the record and its score).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Evidence selection (`--mode library`): on (the library's default) or off (the whole
    /// document under the grounded mask).
    #[arg(long, default_value = "on")]
    selection: String,
    /// How documents are cut into passages: `sentences` (the default), `lines`, `windows:N:K`.
    #[arg(long, default_value = "sentences")]
    passages: String,
    /// How passages are judged: `values` (the library's default: the values a field could
    /// take, scored over the whole document) or `question` (yes/no about each passage).
    #[arg(long, default_value = "values")]
    judge: String,
    /// How the values judge asks for a value: `auto` (the library's default: numbers in words,
    /// the rest as the contract's reply), `question` (a question in words, each value scored as
    /// the sentence answering it) or `contract` (the extraction prompt, each value scored as the
    /// JSON reply starts).
    #[arg(long, default_value = "auto")]
    value_prompt: String,
    /// A list field's first try is also shown the passages that start within the document's
    /// first this many characters (the library's default, 1,000; 0 for none).
    #[arg(long, default_value_t = 1_000)]
    opening_chars: usize,
}

/// The selection the flags ask for.
fn selection(args: &Args) -> Result<Selection, String> {
    if args.selection == "off" {
        return Ok(Selection::off());
    }
    let passages = match args.passages.as_str() {
        "sentences" => Passages::Sentences,
        "lines" => Passages::Lines,
        "pages" => Passages::Pages,
        w => {
            let parts: Vec<&str> = w.split(':').collect();
            match parts.as_slice() {
                ["windows", n, k] => Passages::Windows {
                    lines: n.parse().map_err(|e| format!("--passages {w}: {e}"))?,
                    overlap: k.parse().map_err(|e| format!("--passages {w}: {e}"))?,
                },
                _ => {
                    return Err(format!(
                        "--passages {w}: expected sentences, lines, pages or windows:N:K"
                    ))
                }
            }
        }
    };
    let judge = match args.judge.as_str() {
        "values" => Judge::Values,
        "question" => Judge::Question,
        j => return Err(format!("--judge {j}: expected values or question")),
    };
    let value_prompt = match args.value_prompt.as_str() {
        "auto" => ValuePrompt::Auto,
        "question" => ValuePrompt::Question,
        "contract" => ValuePrompt::Contract,
        p => {
            return Err(format!(
                "--value-prompt {p}: expected auto, question or contract"
            ))
        }
    };
    Ok(Selection::default()
        .passages(passages)
        .judge(judge)
        .value_prompt(value_prompt)
        .opening_chars(args.opening_chars))
}

/// The backend with a plain JSON-schema mask instead of the contract's grammar (`--mode plain`).
struct PlainMask<B> {
    inner: B,
    edited: Mutex<Option<(Arc<Constraint>, Arc<Constraint>)>>,
}

impl<B: Backend + Sync> Backend for PlainMask<B> {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        let constraint = {
            let mut last = self.edited.lock().unwrap_or_else(|e| e.into_inner());
            match last.as_ref() {
                Some((from, to)) if Arc::ptr_eq(from, &req.constraint) => to.clone(),
                _ => {
                    let decoding = req.constraint.grammar().map(|g| {
                        Decoding::JsonSchema(Arc::new(
                            contract_core::grammar::Grammar::clone(g)
                                .without_grounding()
                                .schema(),
                        ))
                    });
                    let to = Arc::new(req.constraint.with_decoding(decoding));
                    *last = Some((req.constraint.clone(), to.clone()));
                    to
                }
            }
        };
        let mut req = req.clone();
        req.constraint = constraint;
        self.inner.complete(&req).await
    }
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

/// Malaysian receipts write the day first; a receipt whose own dates do not tell is read so
/// (what a user processing these receipts configures).
fn day_first(c: Conventions) -> Conventions {
    c.or_date_order(DateOrder::DayFirst)
}

/// Agreements filed with the SEC write the month first (when their own dates do not tell).
fn month_first(c: Conventions) -> Conventions {
    c.or_date_order(DateOrder::MonthFirst)
}

fn split(arg: SplitArg) -> Split {
    match arg {
        SplitArg::Dev => Split::Dev,
        SplitArg::Test => Split::Test,
        SplitArg::All => Split::All,
    }
}

fn run(args: Args) -> Result<(), String> {
    let path =
        contract_backends::local::fetch::model_path(&args.model).map_err(|e| e.to_string())?;
    let backend =
        LocalBackend::with_options(&path, LocalOptions::default().max_tokens(args.max_tokens))
            .map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut out = match &args.output {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => None,
    };
    let mut write = |v: Value| -> Result<(), String> {
        if let Some(w) = out.as_mut() {
            writeln!(w, "{v}").map_err(|e| e.to_string())?;
            w.flush().map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let plain = PlainMask {
        inner: backend.clone(),
        edited: Mutex::new(None),
    };
    if let Some(p) = &args.receipts {
        let rows = split(args.split).pick(&read_rows(p)?, RECEIPTS_DEV);
        let rows: Vec<Row> = rows
            .into_iter()
            .take(args.limit.unwrap_or(usize::MAX))
            .collect();
        let summary = match args.mode {
            Mode::Library => runtime.block_on(receipts(
                &Extractor::new(&backend)
                    .conventions(day_first)
                    .selection(selection(&args)?),
                &rows,
                &mut write,
            ))?,
            Mode::Plain => runtime.block_on(receipts(
                &Extractor::new(&plain).conventions(day_first),
                &rows,
                &mut write,
            ))?,
        };
        println!("{summary}");
    }
    if let Some(p) = &args.ndas {
        let rows = split(args.split).pick(&read_rows(p)?, NDAS_DEV);
        let rows: Vec<Row> = rows
            .into_iter()
            .take(args.limit.unwrap_or(usize::MAX))
            .collect();
        let summary = match args.mode {
            Mode::Library => runtime.block_on(ndas(
                &Extractor::new(&backend)
                    .conventions(month_first)
                    .selection(selection(&args)?),
                &rows,
                &mut write,
            ))?,
            Mode::Plain => runtime.block_on(ndas(
                &Extractor::new(&plain).conventions(month_first),
                &rows,
                &mut write,
            ))?,
        };
        println!("{summary}");
    }
    Ok(())
}

/// Values of the reply that are not in the document (grounding checked against the whole
/// document, whatever the mode).
fn outside<C: Contract>(ex: &Extraction<C>, doc: &str) -> usize {
    let Some(json) = &ex.json else { return 0 };
    let raw = ex
        .attempts
        .iter()
        .rev()
        .find_map(|a| a.raw.clone())
        .unwrap_or_default();
    let source = Source::from_text(doc);
    check_reply(C::contract_spec(), json, &raw, &Grounds::new(&source)).len()
}

/// Forward calls of one extraction: its generations and its judging.
fn calls<C>(ex: &Extraction<C>) -> u64 {
    let judge = ex
        .selection
        .as_ref()
        .and_then(|s| s.judge_forward_calls)
        .map_or(0, u64::from);
    ex.attempts
        .iter()
        .map(|a| u64::from(a.forward_calls.unwrap_or(0)))
        .sum::<u64>()
        + judge
}

async fn receipts<B: Backend + Sync>(
    extractor: &Extractor<Receipt, B>,
    rows: &[Row],
    write: &mut impl FnMut(Value) -> Result<(), String>,
) -> Result<String, String> {
    let (mut valid, mut c, mut d, mut a, mut t, mut three, mut four, mut off) =
        (0, 0, 0, 0, 0, 0, 0, 0);
    let mut forward = 0u64;
    let started = Instant::now();
    for row in rows {
        let t0 = Instant::now();
        let ex = extractor.extract(&row.text).await;
        let s = score_receipt(ex.value.as_ref(), &row.truth);
        valid += usize::from(ex.value.is_some());
        c += usize::from(s.company);
        d += usize::from(s.date);
        a += usize::from(s.address);
        t += usize::from(s.total);
        three += usize::from(s.three());
        four += usize::from(s.four());
        let o = outside(&ex, &row.text);
        off += o;
        forward += calls(&ex);
        eprintln!(
            "{} {:.1}s three={} c={} d={} a={} t={} {}",
            row.id,
            t0.elapsed().as_secs_f64(),
            s.three(),
            s.company,
            s.date,
            s.address,
            s.total,
            ex.json.as_ref().map_or("-".to_owned(), Value::to_string)
        );
        write(json!({"id": row.id, "score": s, "outside": o, "truth": row.truth, "record": ex}))?;
    }
    let n = rows.len().max(1);
    Ok(format!(
        "receipts: {} docs, valid {valid}, fully right (company+date+total) {three}, all four {four}; company {c}, date {d}, address {a}, total {t}; values not in the document {off}; {:.2} s/doc, {:.0} forward calls/doc",
        rows.len(),
        started.elapsed().as_secs_f64() / n as f64,
        forward as f64 / n as f64
    ))
}

async fn ndas<B: Backend + Sync>(
    extractor: &Extractor<Nda, B>,
    rows: &[Row],
    write: &mut impl FnMut(Value) -> Result<(), String>,
) -> Result<String, String> {
    let mut counts = Counts::default();
    let (mut valid, mut off) = (0, 0);
    let mut forward = 0u64;
    let started = Instant::now();
    for row in rows {
        let t0 = Instant::now();
        let ex = extractor.extract(&row.text).await;
        let predicted = ex.value.as_ref().map(nda_pairs).unwrap_or_default();
        let truth = nda_truth_pairs(&row.truth);
        let mut one = Counts::default();
        one.add(&predicted, &truth);
        counts.add(&predicted, &truth);
        valid += usize::from(ex.value.is_some());
        let o = outside(&ex, &row.text);
        off += o;
        forward += calls(&ex);
        eprintln!(
            "{} {:.1}s f1={:.2} {}",
            row.id,
            t0.elapsed().as_secs_f64(),
            one.f1(None),
            ex.json.as_ref().map_or("-".to_owned(), Value::to_string)
        );
        write(
            json!({"id": row.id, "predicted": predicted, "truth": truth, "outside": o, "record": ex}),
        )?;
    }
    let n = rows.len().max(1);
    Ok(format!(
        "agreements: {} docs, valid {valid}; F1 all {:.3}, effective_date {:.3}, jurisdiction {:.3}, party {:.3}, term {:.3}; values not in the document {off}; {:.1} s/doc, {:.0} forward calls/doc",
        rows.len(),
        counts.f1(None),
        counts.f1(Some("effective_date")),
        counts.f1(Some("jurisdiction")),
        counts.f1(Some("party")),
        counts.f1(Some("term")),
        started.elapsed().as_secs_f64() / n as f64,
        forward as f64 / n as f64
    ))
}
