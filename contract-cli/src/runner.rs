//! `extract`'s batch on the library's runner ([`run_jobs`]: the output file, resume, the
//! progress bar, Ctrl-C, every document exactly once): what is the command line's own is the
//! row of a runtime contract, which rows are `error` rows, and the errors a person can act on.

use contract_backends::batch::{ctrl_c, run_jobs, BatchError, BatchOptions, BatchSummary, Doc};
use serde_json::Value;

use crate::backend::Model;
use crate::dynx::DynExtractor;
use crate::error::CliError;

/// Whether `row` is an `error` row: the document got no reply (a server down, a timeout).
pub fn is_error(row: &Value) -> bool {
    row["outcome"] == "error"
}

/// How many `error` rows this run wrote, and the reason of the first.
pub type Errors = (usize, Option<String>);

/// Runs `ex` on `model` over `docs`, each row written to the output as it arrives.
pub async fn run(
    docs: Vec<Doc>,
    options: &BatchOptions,
    model: &Model,
    ex: &DynExtractor,
) -> Result<(BatchSummary, Errors), CliError> {
    let mut errors: Errors = (0, None);
    let job = |doc: Doc, _| async move {
        let row = model.extract(ex, &doc.id, &doc.text).await;
        let ok = row["ok"] == true;
        (row, ok)
    };
    let on_row = |row: Value| {
        if is_error(&row) {
            errors.0 += 1;
            if errors.1.is_none() {
                errors.1 = row["error"].as_str().map(str::to_owned);
            }
        }
    };
    let summary = run_jobs(docs, options, job, on_row, ctrl_c)
        .await
        .map_err(output_error)?;
    Ok((summary, errors))
}

/// The runner's errors as the command line says them.
fn output_error(e: BatchError) -> CliError {
    match e {
        BatchError::OutputHasRows { path } => CliError::output(
            &path,
            "already has rows: `--resume` skips the ids it has and appends the others, \
             `--overwrite` starts again",
        ),
        BatchError::BadOutput {
            path,
            line,
            message,
        } => CliError::output(
            &path,
            format!(
                "line {line} is not a row ({message}); cannot resume without losing the rows \
                 after it: move the file aside or fix that line"
            ),
        ),
        BatchError::DuplicateId { .. } | BatchError::BadInput { .. } => {
            CliError::Input(e.to_string())
        }
        e => CliError::Output(e.to_string()),
    }
}
