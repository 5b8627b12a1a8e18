//! Running many documents: bounded concurrency, one JSON line per document written as it
//! finishes, resume, Ctrl-C, a progress bar.
//!
//! Nothing is lost or doubled: a row is written with one `write` of the whole line and a flush,
//! so a kill leaves at most a torn last line (no newline); resuming cuts it off and runs its
//! document again, and skips every id that has a whole row.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::error::CliError;
use crate::inputs::Doc;

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The JSON lines file the rows go to.
    pub output: PathBuf,
    /// Skip the ids that already have a row in `output`, append the others.
    pub resume: bool,
    /// Replace an existing `output` (without it, an existing non-empty output is refused).
    pub overwrite: bool,
    /// With `resume`: run again the documents whose row is an `error` (no reply: a server down,
    /// a timeout), their old rows taken out of the output first.
    pub retry_errors: bool,
    /// Documents in flight at once.
    pub concurrency: usize,
    /// Draw the progress bar (on a terminal).
    pub progress: bool,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Input documents.
    pub total: usize,
    /// Skipped: their row was already there.
    pub skipped: usize,
    /// Rows written with a value.
    pub ok: usize,
    /// Rows written without one (invalid, error).
    pub failed: usize,
    /// Ctrl-C stopped the run before every document had its row.
    pub interrupted: bool,
    /// Wall time.
    pub seconds: f64,
    /// The reason of the first `error` row of this run, and how many there were.
    pub errors: (usize, Option<String>),
}

impl Summary {
    /// Documents without a row yet.
    pub fn remaining(&self) -> usize {
        self.total - self.skipped - self.ok - self.failed
    }
}

struct Output {
    path: PathBuf,
    file: File,
}

impl Output {
    fn write(&mut self, row: &Value) -> Result<(), CliError> {
        let mut line = row.to_string();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| CliError::output(&self.path, e))
    }
}

/// Opens the output: fresh (refusing to replace rows unless `overwrite`), or for resuming with
/// the ids of its whole rows after cutting off a torn last line.
fn open_output(options: &RunOptions) -> Result<(Output, HashSet<String>), CliError> {
    let path = options.output.as_path();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::output(dir, e))?;
    }
    let err = |e: std::io::Error| CliError::output(path, e);
    if !options.resume {
        let has_rows = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
        if has_rows && !options.overwrite {
            return Err(CliError::output(
                path,
                "already has rows: `--resume` skips the ids it has and appends the others, \
                 `--overwrite` starts again",
            ));
        }
        let file = File::create(path).map_err(err)?;
        return Ok((
            Output {
                path: path.to_path_buf(),
                file,
            },
            HashSet::new(),
        ));
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(err)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(err)?;
    let (keep, done) = whole_rows(path, &bytes)?;
    if keep < bytes.len() {
        eprintln!(
            "resume: {}: cut off a torn last line ({} bytes; its document runs again)",
            path.display(),
            bytes.len() - keep
        );
        file.set_len(keep as u64).map_err(err)?;
    }
    let mut done = done;
    if options.retry_errors {
        let (kept, retried) = without_errors(&bytes[..keep.min(bytes.len())]);
        if !retried.is_empty() {
            // The rows without errors go to a new file that replaces the output in one rename,
            // so a kill here leaves the old output or the new one, never a mix.
            let tmp = path.with_extension("retry-errors.tmp");
            std::fs::write(&tmp, &kept)
                .and_then(|()| File::open(&tmp)?.sync_all())
                .and_then(|()| std::fs::rename(&tmp, path))
                .map_err(|e| CliError::output(&tmp, e))?;
            file = OpenOptions::new().append(true).open(path).map_err(err)?;
            eprintln!(
                "resume: {} documents with an error row run again",
                retried.len()
            );
            for id in &retried {
                done.remove(id);
            }
        }
    }
    file.seek(SeekFrom::End(0)).map_err(err)?;
    Ok((
        Output {
            path: path.to_path_buf(),
            file,
        },
        done,
    ))
}

/// The length of the whole rows of `bytes` and their ids. Only the last line may be torn (no
/// newline, or not a row): a broken line before it is an error, since cutting it would lose
/// the rows after it.
fn whole_rows(path: &Path, bytes: &[u8]) -> Result<(usize, HashSet<String>), CliError> {
    let mut done = HashSet::new();
    let mut start = 0;
    let mut line_no = 0;
    while start < bytes.len() {
        line_no += 1;
        let Some(nl) = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| start + i)
        else {
            return Ok((start, done)); // torn: no newline
        };
        let line = &bytes[start..nl];
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                if s.trim().is_empty() {
                    return Ok(None);
                }
                match serde_json::from_str::<Value>(s) {
                    Ok(v) => match v.get("id") {
                        Some(Value::String(id)) => Ok(Some(id.clone())),
                        _ => Err("the row has no string `id`".to_owned()),
                    },
                    Err(e) => Err(e.to_string()),
                }
            });
        match parsed {
            Ok(id) => done.extend(id),
            Err(_) if nl + 1 >= bytes.len() => return Ok((start, done)),
            Err(e) => {
                return Err(CliError::output(
                    path,
                    format!(
                        "line {line_no} is not a row ({e}); cannot resume without losing the \
                         rows after it: move the file aside or fix that line"
                    ),
                ))
            }
        }
        start = nl + 1;
    }
    Ok((start, done))
}

/// The whole rows of `bytes` less those whose `outcome` is `error`, and the ids of those.
fn without_errors(bytes: &[u8]) -> (Vec<u8>, HashSet<String>) {
    let mut kept = Vec::with_capacity(bytes.len());
    let mut dropped = HashSet::new();
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let row: Option<Value> = serde_json::from_slice(line).ok();
        match row {
            Some(r) if r["outcome"] == "error" => {
                dropped.insert(r["id"].as_str().unwrap_or_default().to_owned());
            }
            _ => kept.extend_from_slice(line),
        }
    }
    // A document with an error row and another row (an edited file) keeps the other.
    for line in kept.split(|&b| b == b'\n') {
        if let Ok(r) = serde_json::from_slice::<Value>(line) {
            if let Some(id) = r["id"].as_str() {
                dropped.remove(id);
            }
        }
    }
    (kept, dropped)
}

fn progress_bar(options: &RunOptions, len: usize) -> ProgressBar {
    if !options.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "extract [{elapsed_precise}] {wide_bar} {pos}/{len} {msg} eta {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// Runs `extract` over `docs` and writes each row to the output as it arrives.
///
/// `extract` must always give a row (a value or a reason); the runner puts the document's id
/// first in it. On Ctrl-C no new document starts and the ones in flight finish; a second
/// Ctrl-C abandons them (they have no row, so `--resume` runs them).
pub async fn run<'d, F, Fut>(
    docs: &'d [Doc],
    options: &RunOptions,
    extract: F,
) -> Result<Summary, CliError>
where
    F: Fn(&'d Doc) -> Fut,
    Fut: Future<Output = Value> + 'd,
{
    let started = Instant::now();
    let (mut output, already) = open_output(options)?;
    let todo: Vec<&Doc> = docs.iter().filter(|d| !already.contains(&d.id)).collect();
    let mut summary = Summary {
        total: docs.len(),
        skipped: docs.len() - todo.len(),
        ..Summary::default()
    };
    if summary.skipped > 0 {
        eprintln!("resume: {} documents already have a row", summary.skipped);
    }
    let bar = progress_bar(options, todo.len());
    let mut pending = todo.into_iter();
    let mut in_flight = FuturesUnordered::new();
    let mut stops = 0u8;
    let mut signal = std::pin::pin!(ctrl_c());
    loop {
        while stops == 0 && in_flight.len() < options.concurrency.max(1) {
            let Some(doc) = pending.next() else { break };
            let fut = extract(doc);
            in_flight.push(async move { (doc, fut.await) });
        }
        if in_flight.is_empty() || stops >= 2 {
            break;
        }
        tokio::select! {
            biased;
            () = &mut signal => {
                stops += 1;
                summary.interrupted = true;
                bar.println(format!(
                    "interrupted: finishing the {} documents in flight (Ctrl-C again abandons them)",
                    in_flight.len()
                ));
                signal.set(ctrl_c());
            }
            Some((doc, row)) = in_flight.next() => {
                let row = with_id(&doc.id, row);
                output.write(&row)?;
                if row["outcome"] == "error" {
                    summary.errors.0 += 1;
                    if summary.errors.1.is_none() {
                        summary.errors.1 = row["error"].as_str().map(str::to_owned);
                    }
                }
                if row.get("ok") == Some(&Value::Bool(true)) {
                    summary.ok += 1;
                } else {
                    summary.failed += 1;
                }
                bar.inc(1);
                let rate = (summary.ok + summary.failed) as f64
                    / started.elapsed().as_secs_f64().max(1e-9);
                bar.set_message(format!(
                    "{rate:.1} docs/s, ok {} failed {}",
                    summary.ok, summary.failed
                ));
            }
        }
    }
    if pending.len() > 0 || !in_flight.is_empty() {
        summary.interrupted = true;
    }
    summary.seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(summary)
}

/// Completes on Ctrl-C; never when the signal cannot be watched.
async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// `row` with `"id": id` first.
fn with_id(id: &str, row: Value) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("id".into(), Value::String(id.to_owned()));
    match row {
        Value::Object(map) => out.extend(map.into_iter().filter(|(k, _)| k != "id")),
        other => {
            out.insert("row".into(), other);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_cut_and_a_broken_middle_one_refused() {
        let p = Path::new("rows.jsonl");
        let whole = b"{\"id\":\"a\"}\n{\"id\":\"b\"}\n";
        let (keep, ids) = whole_rows(p, whole).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((keep, ids.len()), (whole.len(), 2));
        let mut torn = whole.to_vec();
        torn.extend_from_slice(b"{\"id\":\"c\",\"val");
        let (keep, ids) = whole_rows(p, &torn).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((keep, ids.contains("c")), (whole.len(), false));
        // A torn line that happens to end in a newline (a partial write of a row with one).
        let mut torn_nl = whole.to_vec();
        torn_nl.extend_from_slice(b"{\"id\":\"c\",\n");
        let (keep, _) = whole_rows(p, &torn_nl).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(keep, whole.len());
        let broken = b"{\"id\":\"a\"}\nnot json\n{\"id\":\"b\"}\n";
        assert!(whole_rows(p, broken).is_err());
    }
}
