//! The batch runner: an [`Extractor`] over many documents (feature `batch`).
//!
//! [`run_batch`] runs up to [`BatchOptions::concurrency`] extractions at once, on the calling
//! task (no spawning, so the extractor is only borrowed), and writes one JSON line per document
//! to [`BatchOptions::output`] as results arrive, flushing after each. Nothing is lost:
//!
//! - every input id gets exactly one row: duplicate ids are refused before anything runs, and an
//!   [`Extraction`] never fails (a backend error is a row with its reason, see [`default_row`]);
//! - with [`BatchOptions::resume`], ids already in the output are skipped (a truncated last line
//!   from an interrupted run is cut off and its document runs again), and with
//!   [`BatchOptions::retry_errors`] the rows a predicate picks (say [`is_error_row`]: no reply)
//!   are taken out and their documents run again; without it the output is replaced, or refused
//!   when it has rows and [`BatchOptions::overwrite`] is off;
//! - on Ctrl-C the runner starts no new document, finishes the ones in flight, writes their rows
//!   and returns with [`BatchSummary::interrupted`]; a second Ctrl-C abandons the ones in flight
//!   (they have no row, so a resumed run does them).
//!
//! A progress bar on stderr shows done / failed / rate (hidden when stderr is not a terminal or
//! [`BatchOptions::progress`] is off). [`run_batch_streaming`] also hands every field to a
//! callback as it closes and is checked ([`Extractor::extract_observed`]: the local backend
//! streams token by token), and the bar counts the fields and shows the last one; the rows
//! are the same as [`run_batch`]'s.
//!
//! All three run on [`run_jobs`], the runner for any job that turns a document into a row
//! (the `contract` command line runs its runtime contracts on it): the output, resume, the
//! bar, the stop and the one-row-per-document guarantee without an [`Extractor`].
//!
//! # The local backend
//!
//! `local::LocalBackend` (feature `local`) decodes on a worker thread of its own: the requests in
//! flight (up to `LocalOptions::max_batch`, 8 by default) decode together, one forward call a
//! step for all of them, each with its own prompt, mask and stop, and each reply exactly what it
//! would be alone. Set the runner's concurrency to the batch size to use it. A cancelled request
//! (timeout, Ctrl-C) stops within one decoding step.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use contract_backends::batch::{default_row, read_jsonl_docs, run_batch, BatchOptions};
//! use contract_backends::openai::OpenAiBackend;
//! use contract_core::Extractor;
//! # #[derive(contract_core::Contract, serde::Serialize, serde::Deserialize)]
//! # struct Guidance { quarter: Option<u8> }
//!
//! let docs = read_jsonl_docs("filings.jsonl".as_ref())?;
//! let extractor = Extractor::<Guidance, _>::new(OpenAiBackend::new("gpt-4o-mini")?);
//! let options = BatchOptions::default()
//!     .concurrency(8)
//!     .output("guidance.jsonl")
//!     .resume(true);
//! let (_rows, summary) = run_batch(&extractor, docs, &options, default_row).await?;
//! eprintln!("{} ok, {} failed, {} skipped", summary.done, summary.failed, summary.skipped);
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use contract_core::extract::{
    AttemptError, Backend, BackendError, Extraction, Extractor, FieldEvent, FinishReason,
};
use contract_core::Contract;
use futures_util::stream::{FuturesUnordered, StreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// One input document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doc {
    /// A unique id; it keys the output row and resuming.
    pub id: String,
    /// The document text.
    pub text: String,
}

impl Doc {
    /// A document.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Doc {
            id: id.into(),
            text: text.into(),
        }
    }
}

/// Why a batch could not run or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A row of the input is not a `{"id", "text"}` object.
    #[error("{path}:{line}: {message}")]
    BadInput {
        /// The input file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Two input documents have the same id.
    #[error("duplicate document id `{id}`{}", where_(.first_line, .line))]
    DuplicateId {
        /// The id.
        id: String,
        /// Where it first appears in the input file, when read from one.
        first_line: Option<usize>,
        /// Where it appears again.
        line: Option<usize>,
    },
    /// A row of an existing output file (not the last) is not JSON with a string `id`.
    #[error("{path}:{line}: cannot resume: {message}")]
    BadOutput {
        /// The output file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The output already has rows, and neither [`BatchOptions::resume`] nor
    /// [`BatchOptions::overwrite`] is set.
    #[error("{}: already has rows (resume appends to them, overwrite starts again)", .path.display())]
    OutputHasRows {
        /// The output file.
        path: PathBuf,
    },
}

fn where_(first: &Option<usize>, again: &Option<usize>) -> String {
    match (first, again) {
        (Some(a), Some(b)) => format!(" (lines {a} and {b})"),
        _ => String::new(),
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> BatchError + '_ {
    move |source| BatchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads documents from a JSONL file of `{"id": "...", "text": "..."}` rows (blank lines are
/// skipped; other fields are ignored).
///
/// Fails with the line number on a row that is not such an object and on a repeated id.
pub fn read_jsonl_docs(path: &Path) -> Result<Vec<Doc>, BatchError> {
    let file = File::open(path).map_err(io_error(path))?;
    let mut docs = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line_no = i + 1;
        let line = line.map_err(io_error(path))?;
        if line.trim().is_empty() {
            continue;
        }
        let doc: Doc = serde_json::from_str(&line).map_err(|e| BatchError::BadInput {
            path: path.to_path_buf(),
            line: line_no,
            message: format!("expected a {{\"id\": string, \"text\": string}} object: {e}"),
        })?;
        if let Some(&first) = seen.get(&doc.id) {
            return Err(BatchError::DuplicateId {
                id: doc.id,
                first_line: Some(first),
                line: Some(line_no),
            });
        }
        seen.insert(doc.id.clone(), line_no);
        docs.push(doc);
    }
    Ok(docs)
}

/// How to run a batch.
// Two options are equal with the same `retry_errors` function (its address), as intended.
#[allow(unpredictable_function_pointer_comparisons)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOptions {
    /// Extractions in flight at once (at least 1; use 1 with the local backend).
    pub concurrency: usize,
    /// The JSONL file the rows go to; `None` keeps them in memory only.
    pub output: Option<PathBuf>,
    /// Skip documents whose id is already in `output` and append; without it `output` is
    /// overwritten.
    pub resume: bool,
    /// Without `resume`, replace an `output` that already has rows (`true`, the default); when
    /// `false` such an output is refused with [`BatchError::OutputHasRows`] and left as it is.
    pub overwrite: bool,
    /// With `resume`, the rows this predicate accepts (say, a document that got no reply, see
    /// [`is_error_row`]) are taken out of `output` and their documents run again; `None` (the
    /// default) keeps every row. The rows kept go to a new file that replaces `output` in one
    /// rename, so a kill leaves the old output or the new one, never a mix. A document with
    /// such a row and another one keeps the other and is not run.
    pub retry_errors: Option<fn(&Value) -> bool>,
    /// Show a progress bar on stderr (only drawn when stderr is a terminal).
    pub progress: bool,
    /// The progress bar's label.
    pub label: String,
}

impl Default for BatchOptions {
    /// Concurrency 4, no output file, no resume, overwrite, no retried rows, progress bar on,
    /// label `extract`.
    fn default() -> Self {
        BatchOptions {
            concurrency: 4,
            output: None,
            resume: false,
            overwrite: true,
            retry_errors: None,
            progress: true,
            label: "extract".to_owned(),
        }
    }
}

impl BatchOptions {
    /// Sets [`concurrency`](Self::concurrency).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Sets [`output`](Self::output).
    pub fn output(mut self, path: impl Into<PathBuf>) -> Self {
        self.output = Some(path.into());
        self
    }

    /// Sets [`resume`](Self::resume).
    pub fn resume(mut self, on: bool) -> Self {
        self.resume = on;
        self
    }

    /// Sets [`overwrite`](Self::overwrite).
    pub fn overwrite(mut self, on: bool) -> Self {
        self.overwrite = on;
        self
    }

    /// Sets [`retry_errors`](Self::retry_errors): with `resume`, the documents whose row
    /// `is_error` accepts run again.
    pub fn retry_errors(mut self, is_error: fn(&Value) -> bool) -> Self {
        self.retry_errors = Some(is_error);
        self
    }

    /// Sets [`progress`](Self::progress).
    pub fn progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// Sets [`label`](Self::label).
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }
}

/// What a batch did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchSummary {
    /// Input documents.
    pub total: usize,
    /// Documents skipped because the output already had their row (resume).
    pub skipped: usize,
    /// Documents that got a value in this run.
    pub done: usize,
    /// Documents that got a row without a value in this run (an error or an invalid reply).
    pub failed: usize,
    /// Whether Ctrl-C (or the stop future) ended the run early; then
    /// `skipped + done + failed < total`.
    pub interrupted: bool,
    /// Wall time of the run, in seconds.
    pub seconds: f64,
    /// Bytes of a torn last line (an interrupted write) cut off the output when resuming; its
    /// document ran again.
    pub torn_bytes: usize,
    /// Documents whose rows [`BatchOptions::retry_errors`] took out of the output to run again
    /// (not counted in `skipped`).
    pub retried: usize,
}

impl BatchSummary {
    /// Documents that got a row in this run (`done + failed`).
    pub fn completed(&self) -> usize {
        self.done + self.failed
    }

    /// Documents that have no row yet (not run because of an interruption).
    pub fn remaining(&self) -> usize {
        self.total - self.skipped - self.completed()
    }
}

/// Why an extraction has no value, as a machine-readable kind and a readable message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureReason {
    /// `rate_limited`, `timeout`, `unavailable`, `protocol`, `invalid_request`,
    /// `context_length`, `other` (backend errors, see
    /// [`BackendError::kind`](contract_core::BackendError::kind)), `budget` (the prompt did not
    /// fit), `length` (the reply hit the token limit), `content_filter`, or `invalid` (the reply
    /// broke the contract).
    pub kind: String,
    /// What happened.
    pub message: String,
}

/// Why `ex` has no value; `None` when it has one.
pub fn failure_reason<C>(ex: &Extraction<C>) -> Option<FailureReason> {
    if ex.value.is_some() {
        return None;
    }
    let attempts = ex.attempts.len();
    let plural = if attempts == 1 { "" } else { "s" };
    let reason = |kind: &str, message: String| FailureReason {
        kind: kind.to_owned(),
        message,
    };
    Some(match &ex.error {
        Some(e @ AttemptError::Backend { error }) => {
            let mut message = e.to_string();
            if let BackendError::RateLimited {
                retry_after_ms: Some(ms),
                ..
            } = error
            {
                message.push_str(&format!(" (the server asked to wait {ms} ms)"));
            }
            reason(error.kind(), message)
        }
        Some(e @ AttemptError::Budget { .. }) => reason("budget", e.to_string()),
        None => match ex.attempts.last().and_then(|a| a.finish_reason) {
            Some(FinishReason::Length) => reason(
                "length",
                format!(
                    "the reply hit the token limit (finish_reason length) in attempt \
                     {attempts} of {attempts}: {}",
                    ex.violations
                ),
            ),
            Some(FinishReason::ContentFilter) => reason(
                "content_filter",
                format!("a content filter stopped the reply (attempt {attempts})"),
            ),
            _ => reason(
                "invalid",
                format!(
                    "no valid value after {attempts} attempt{plural} (read as {}): {}",
                    ex.level.as_str(),
                    ex.violations
                ),
            ),
        },
    })
}

/// The default row: `{"id", "ok", "value", "error", "error_kind", "record"}`, where `record` is
/// the whole [`Extraction`] (raw replies, reasoning, attempts, timings) and `error` /
/// `error_kind` are the [`failure_reason`] (null when `ok`).
pub fn default_row<C: Serialize>(doc: &Doc, ex: Extraction<C>) -> Value {
    let reason = failure_reason(&ex);
    let record =
        serde_json::to_value(&ex).unwrap_or_else(|e| json!({ "unserialisable": e.to_string() }));
    json!({
        "id": doc.id,
        "ok": ex.value.is_some(),
        "value": record.get("value").cloned().unwrap_or(Value::Null),
        "error": reason.as_ref().map(|r| r.message.clone()),
        "error_kind": reason.as_ref().map(|r| r.kind.clone()),
        "record": record,
    })
}

/// Whether `row`, a [`default_row`] (or any row with its `ok` and `error_kind`), is that of a
/// document that got no reply: no value, and an `error_kind` other than the ones a reply gives
/// (`invalid`, `length`, `content_filter`). The predicate to hand to
/// [`BatchOptions::retry_errors`] for default rows.
pub fn is_error_row(row: &Value) -> bool {
    row["ok"] != true
        && row["error_kind"]
            .as_str()
            .is_some_and(|k| !matches!(k, "invalid" | "length" | "content_filter"))
}

/// Runs `extractor` over `docs`; for each doc calls `row(&doc, extraction)` to build the JSON row
/// written to the output (as results arrive, flushed), and returns the rows produced in this run
/// (in completion order) plus the summary.
///
/// The runner puts `"id": doc.id` into each row (rows that are not objects are wrapped as
/// `{"id", "row"}`), since resuming reads it back. A row counts as failed when the extraction
/// has no value. Ctrl-C stops the run gracefully (see the [module docs](self)).
pub async fn run_batch<C, B, F>(
    extractor: &Extractor<C, B>,
    docs: Vec<Doc>,
    options: &BatchOptions,
    row: F,
) -> Result<(Vec<Value>, BatchSummary), BatchError>
where
    C: Contract + Send + Sync,
    B: Backend + Sync,
    F: Fn(&Doc, Extraction<C>) -> Value,
{
    extract_all(extractor, docs, options, row, None, ctrl_c).await
}

/// What [`run_batch_streaming`] calls for each field: the document and the field's event.
pub type OnField<'a> = &'a (dyn Fn(&Doc, &FieldEvent) + Send + Sync);

/// [`run_batch`], every field of every document handed to `on_field` as soon as it is closed
/// and checked (the events [`Extractor::stream`] emits, a retry's fields again with their
/// attempt), and the progress bar showing the fields closed and the last one. The rows, the
/// output file, resuming and Ctrl-C are [`run_batch`]'s; a document's row is written when its
/// extraction ends, so a field seen here may still be refused by the contract's reading of the
/// whole value (the row says what holds).
pub async fn run_batch_streaming<C, B, F>(
    extractor: &Extractor<C, B>,
    docs: Vec<Doc>,
    options: &BatchOptions,
    row: F,
    on_field: OnField<'_>,
) -> Result<(Vec<Value>, BatchSummary), BatchError>
where
    C: Contract + Send + Sync,
    B: Backend + Sync,
    F: Fn(&Doc, Extraction<C>) -> Value,
{
    extract_all(extractor, docs, options, row, Some(on_field), ctrl_c).await
}

/// [`run_batch`] with `stop` in place of Ctrl-C: when `stop` completes, no new document starts,
/// the ones in flight finish and their rows are written.
pub async fn run_batch_until<C, B, F, S>(
    extractor: &Extractor<C, B>,
    docs: Vec<Doc>,
    options: &BatchOptions,
    row: F,
    stop: S,
) -> Result<(Vec<Value>, BatchSummary), BatchError>
where
    C: Contract + Send + Sync,
    B: Backend + Sync,
    F: Fn(&Doc, Extraction<C>) -> Value,
    S: Future<Output = ()>,
{
    let mut stop = Some(stop);
    let once = move || {
        let first = stop.take();
        async move {
            match first {
                Some(f) => f.await,
                None => std::future::pending().await,
            }
        }
    };
    extract_all(extractor, docs, options, row, None, once).await
}

/// The three `run_batch` forms on [`run_jobs`]: one extraction a job, its rows kept.
async fn extract_all<C, B, F, S, Fut>(
    extractor: &Extractor<C, B>,
    docs: Vec<Doc>,
    options: &BatchOptions,
    row: F,
    on_field: Option<OnField<'_>>,
    stop: S,
) -> Result<(Vec<Value>, BatchSummary), BatchError>
where
    C: Contract + Send + Sync,
    B: Backend + Sync,
    F: Fn(&Doc, Extraction<C>) -> Value,
    S: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let row = &row;
    let job = |doc: Doc, progress: Progress| async move {
        let ex = match on_field {
            Some(f) => {
                let seen = |event: FieldEvent| {
                    progress.field(&doc.id, &event.path);
                    f(&doc, &event);
                };
                extractor.extract_observed(&doc.text, &seen).await
            }
            None => extractor.extract(&doc.text).await,
        };
        let ok = ex.value.is_some();
        (row(&doc, ex), ok)
    };
    let mut rows = Vec::new();
    let summary = run_jobs(docs, options, job, |r| rows.push(r), stop).await?;
    Ok((rows, summary))
}

/// Completes on Ctrl-C; never when the signal cannot be watched (no tokio signal driver). The
/// `stop` of [`run_jobs`] for a command line.
pub async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The progress bar of a running batch, handed to each job of [`run_jobs`].
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    fields: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("fields", &self.fields.load(Ordering::Relaxed))
            .finish()
    }
}

impl Progress {
    /// Counts a field of document `id` as closed and shows it (`path`, its JSON pointer) on the
    /// bar; from then on the bar also counts the fields.
    pub fn field(&self, id: &str, path: &str) {
        let n = self.fields.fetch_add(1, Ordering::Relaxed) + 1;
        self.bar.set_message(format!("fields {n}, last {id}{path}"));
    }
}

/// The runner under [`run_batch`], for any job that turns a document into a row: a caller
/// with its own kind of extraction (a runtime contract, several extractors, a pipeline) gets
/// the same output file, resume, bounded concurrency, progress bar and stop.
///
/// `job(doc, progress)` runs one document and gives its row and whether the row holds a value
/// (counted as `done`, else `failed`); it must always give a row (a failure is a row with its
/// reason), so every document gets exactly one. Up to [`BatchOptions::concurrency`] jobs run at
/// once, on the calling task. Each row, with `"id": doc.id` put first (a row that is not an
/// object is wrapped as `{"id", "row"}`), is written to [`BatchOptions::output`] with one
/// write and a flush, then handed to `on_row`.
///
/// Before anything runs, duplicate ids are refused, and the output is opened: created (or
/// refused when it has rows and [`BatchOptions::overwrite`] is off), or with
/// [`BatchOptions::resume`] read back: a torn last line is cut off, the rows
/// [`BatchOptions::retry_errors`] accepts are taken out, and the documents with a row left are
/// skipped. A corrupt row before the last is [`BatchError::BadOutput`] (cutting it would lose
/// the rows after it), and the file is left as it was.
///
/// When `stop()` completes (pass [`ctrl_c`] for Ctrl-C), no new document starts and the jobs in
/// flight finish and get their rows; `stop` is then called again, and its second completion
/// drops the jobs in flight (they have no row, so a resumed run does them).
pub async fn run_jobs<J, JobFut, R, S, StopFut>(
    docs: Vec<Doc>,
    options: &BatchOptions,
    job: J,
    mut on_row: R,
    mut stop: S,
) -> Result<BatchSummary, BatchError>
where
    J: Fn(Doc, Progress) -> JobFut,
    JobFut: Future<Output = (Value, bool)>,
    R: FnMut(Value),
    S: FnMut() -> StopFut,
    StopFut: Future<Output = ()>,
{
    let started = Instant::now();
    let total = docs.len();
    let mut ids = HashSet::with_capacity(total);
    for doc in &docs {
        if !ids.insert(doc.id.as_str()) {
            return Err(BatchError::DuplicateId {
                id: doc.id.clone(),
                first_line: None,
                line: None,
            });
        }
    }
    drop(ids);

    let mut summary = BatchSummary {
        total,
        skipped: 0,
        done: 0,
        failed: 0,
        interrupted: false,
        seconds: 0.0,
        torn_bytes: 0,
        retried: 0,
    };
    let (mut output, already) = match &options.output {
        Some(path) => {
            let (out, done) = open_output(path, options, &mut summary)?;
            (Some(out), done)
        }
        None => (None, HashSet::new()),
    };
    let todo: Vec<Doc> = docs
        .into_iter()
        .filter(|d| !already.contains(&d.id))
        .collect();
    summary.skipped = total - todo.len();

    let progress = Progress {
        bar: progress_bar(options, todo.len()),
        fields: Arc::new(AtomicUsize::new(0)),
    };
    let bar = &progress.bar;
    let mut pending = todo.into_iter();
    let mut in_flight = FuturesUnordered::new();
    let concurrency = options.concurrency.max(1);
    // 0: running; 1: stopping (finish in flight); 2: abandon in flight.
    let mut stops = 0u8;
    let mut signal = std::pin::pin!(stop());

    loop {
        while stops == 0 && in_flight.len() < concurrency {
            let Some(doc) = pending.next() else { break };
            let id = doc.id.clone();
            let run = job(doc, progress.clone());
            in_flight.push(async move { (id, run.await) });
        }
        if in_flight.is_empty() || stops >= 2 {
            break;
        }
        tokio::select! {
            biased;
            () = &mut signal => {
                stops += 1;
                summary.interrupted = true;
                bar.set_message(format!(
                    "interrupted: finishing {} in flight (again to abandon them)",
                    in_flight.len()
                ));
                signal.set(stop());
            }
            Some((id, (row, ok))) = in_flight.next() => {
                let row = with_id(&id, row);
                if let Some(out) = output.as_mut() {
                    out.write(&row)?;
                }
                on_row(row);
                if ok {
                    summary.done += 1;
                } else {
                    summary.failed += 1;
                }
                bar.inc(1);
                let rate = summary.completed() as f64 / started.elapsed().as_secs_f64().max(1e-9);
                if stops == 0 {
                    let fields = match progress.fields.load(Ordering::Relaxed) {
                        0 => String::new(),
                        n => format!(" fields {n}"),
                    };
                    bar.set_message(format!(
                        "ok {} failed {} {rate:.1}/s{fields}",
                        summary.done, summary.failed
                    ));
                }
            }
        }
    }
    if pending.len() > 0 || !in_flight.is_empty() {
        summary.interrupted = true;
    }
    summary.seconds = started.elapsed().as_secs_f64();
    bar.finish_with_message(format!(
        "ok {} failed {} skipped {}{}",
        summary.done,
        summary.failed,
        summary.skipped,
        if summary.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    ));
    Ok(summary)
}

/// The output file, opened for appending after the rows already there.
struct Output {
    path: PathBuf,
    file: File,
}

impl Output {
    fn write(&mut self, row: &Value) -> Result<(), BatchError> {
        let mut line = row.to_string();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(io_error(&self.path))
    }
}

/// Opens `path` for a run: created (refused when it has rows and `overwrite` is off), or
/// (resume) with the ids of its whole rows, after cutting off a torn last line and taking out
/// the rows `retry_errors` accepts (counted in `summary`).
fn open_output(
    path: &Path,
    options: &BatchOptions,
    summary: &mut BatchSummary,
) -> Result<(Output, HashSet<String>), BatchError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    let output = |file| Output {
        path: path.to_path_buf(),
        file,
    };
    if !options.resume {
        if !options.overwrite && std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
            return Err(BatchError::OutputHasRows {
                path: path.to_path_buf(),
            });
        }
        let file = File::create(path).map_err(io_error(path))?;
        return Ok((output(file), HashSet::new()));
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_error(path))?;
    let mut text = Vec::new();
    file.read_to_end(&mut text).map_err(io_error(path))?;
    let (keep, mut done) = whole_rows(path, &text)?;
    if keep < text.len() {
        summary.torn_bytes = text.len() - keep;
        file.set_len(keep as u64).map_err(io_error(path))?;
    }
    if let Some(is_error) = options.retry_errors {
        let (kept, retried) = without(&text[..keep], is_error);
        if !retried.is_empty() {
            // The rows kept go to a new file that replaces the output in one rename, so a kill
            // here leaves the old output or the new one, never a mix.
            let tmp = path.with_extension("retry-errors.tmp");
            std::fs::write(&tmp, &kept)
                .and_then(|()| File::open(&tmp)?.sync_all())
                .and_then(|()| std::fs::rename(&tmp, path))
                .map_err(io_error(&tmp))?;
            file = OpenOptions::new()
                .append(true)
                .open(path)
                .map_err(io_error(path))?;
            summary.retried = retried.len();
            done.retain(|id| !retried.contains(id));
        }
    }
    file.seek(SeekFrom::End(0)).map_err(io_error(path))?;
    Ok((output(file), done))
}

/// The length of the whole rows of `text` and their ids. Only the last line may be torn (no
/// newline, or not a row): a broken line before it is [`BatchError::BadOutput`].
fn whole_rows(path: &Path, text: &[u8]) -> Result<(usize, HashSet<String>), BatchError> {
    let mut done = HashSet::new();
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < text.len() {
        line_no += 1;
        let Some(end) = text[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| start + i)
        else {
            break; // the last line without its newline: an interrupted write
        };
        let parsed = std::str::from_utf8(&text[start..end])
            .map_err(|e| e.to_string())
            .and_then(|s| {
                if s.trim().is_empty() {
                    return Ok(None);
                }
                let v: Value = serde_json::from_str(s).map_err(|e| e.to_string())?;
                match v.get("id") {
                    Some(Value::String(id)) => Ok(Some(id.clone())),
                    _ => Err("the row has no string `id`".to_owned()),
                }
            });
        match parsed {
            Ok(id) => done.extend(id),
            // The last line, unreadable: an interrupted write.
            Err(_) if end + 1 >= text.len() => break,
            Err(message) => {
                return Err(BatchError::BadOutput {
                    path: path.to_path_buf(),
                    line: line_no,
                    message,
                })
            }
        }
        start = end + 1;
    }
    Ok((start, done))
}

/// The whole rows of `text` less those `is_error` accepts, and the ids of those (less the ids
/// that also have a row kept: an edited file keeps that one).
fn without(text: &[u8], is_error: fn(&Value) -> bool) -> (Vec<u8>, HashSet<String>) {
    let mut kept = Vec::with_capacity(text.len());
    let mut dropped = HashSet::new();
    let mut kept_ids = HashSet::new();
    for line in text.split_inclusive(|&b| b == b'\n') {
        let row: Option<Value> = serde_json::from_slice(line).ok();
        let id = row
            .as_ref()
            .and_then(|r| r["id"].as_str())
            .map(str::to_owned);
        match (row, id) {
            (Some(r), Some(id)) if is_error(&r) => {
                dropped.insert(id);
            }
            (_, id) => {
                kept_ids.extend(id);
                kept.extend_from_slice(line);
            }
        }
    }
    dropped.retain(|id| !kept_ids.contains(id));
    (kept, dropped)
}

fn progress_bar(options: &BatchOptions, len: usize) -> ProgressBar {
    if !options.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg} (eta {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(options.label.clone());
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// Puts `id` first into `row`.
fn with_id(id: &str, row: Value) -> Value {
    match row {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len() + 1);
            out.insert("id".to_owned(), Value::String(id.to_owned()));
            out.extend(map.into_iter().filter(|(k, _)| k != "id"));
            Value::Object(out)
        }
        other => json!({ "id": id, "row": other }),
    }
}
