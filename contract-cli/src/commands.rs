//! `check`, `show` and `review`.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::dynx::DynExtractor;
use crate::error::{code, CliError};
use crate::inputs::{read_docs, read_rows, Doc};

/// `contract check`: every reply of `input` read and checked; exit 1 when one does not fill the
/// contract.
pub fn check(
    schema: &Path,
    input: &Path,
    sources: &[String],
    output: Option<&Path>,
) -> Result<u8, CliError> {
    let contract = crate::schema::load(schema)?;
    let ex = DynExtractor::new(contract, 1, None);
    let docs = if sources.is_empty() {
        Vec::new()
    } else {
        read_docs(sources)?
    };
    let texts: HashMap<&str, &str> = docs
        .iter()
        .map(|d| (d.id.as_str(), d.text.as_str()))
        .collect();
    let replies = read_rows(input)?;
    let mut out: Box<dyn Write> = match output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| CliError::output(p, e))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let (mut valid, mut invalid) = (0usize, 0usize);
    for (i, r) in replies.iter().enumerate() {
        let id = r["id"].as_str().unwrap_or_default();
        let raw = match (&r["reply"], &r["value"]) {
            (Value::String(s), _) => s.clone(),
            (Value::Null, Value::Null) => {
                return Err(CliError::input(
                    input,
                    format!(
                        "row {} (`{id}`) has neither `reply` (a string) nor `value`",
                        i + 1
                    ),
                ))
            }
            (Value::Null, v) => v.to_string(),
            (other, _) => other.to_string(),
        };
        let text = texts.get(id).copied();
        if !sources.is_empty() && text.is_none() {
            eprintln!("warning: `{id}` is not among the --source documents: its values are not checked against one");
        }
        let reading = ex.read(&raw, text);
        if reading.is_valid() {
            valid += 1;
        } else {
            invalid += 1;
        }
        let row = ex.row(id, text, Some(&reading), None);
        match writeln!(out, "{row}") {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(code::OK),
            r => r.map_err(|e| CliError::Output(e.to_string()))?,
        }
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(CliError::Output(e.to_string()))
        }
        _ => {}
    }
    eprintln!(
        "{} replies: {valid} fill the contract, {invalid} do not",
        replies.len()
    );
    Ok(if invalid > 0 { code::INVALID } else { code::OK })
}

/// `contract show`.
pub fn show(schema: &Path, as_json: bool) -> Result<u8, CliError> {
    use std::fmt::Write as _;
    let contract = crate::schema::load(schema)?;
    let strict = contract.strict_schema();
    if as_json {
        let (strict_schema, moved, strict_error) = match &strict {
            Ok(s) => (s.schema.clone(), json!(s.moved), Value::Null),
            Err(e) => (Value::Null, json!([]), json!(e.to_string())),
        };
        let all = json!({
            "name": contract.name(),
            "signature": contract.signature(),
            "strict_schema": strict_schema,
            "moved": moved,
            "strict_error": strict_error,
            "docs": contract.docs_markdown(),
            "gaps": contract.gaps(),
            "grounded_grammar": contract.decodes_grounded(),
            "typed_grammar": contract.decodes_typed(),
            "rules_in_mask": contract.rules_in_mask(),
        });
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&all).unwrap_or_default()
        ))?;
        return Ok(code::OK);
    }
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", contract.name());
    let _ = writeln!(
        s,
        "## Signature (what the model reads)\n\n{}\n",
        contract.signature()
    );
    match &strict {
        Ok(st) => {
            let _ = writeln!(
                s,
                "## Strict schema (OpenAI structured outputs)\n\n{}\n",
                serde_json::to_string_pretty(&st.schema).unwrap_or_default()
            );
            if st.moved.is_empty() {
                let _ = writeln!(
                    s,
                    "Nothing moved: the strict schema carries every keyword.\n"
                );
            } else {
                let _ = writeln!(
                    s,
                    "What the strict subset could not carry, and where it went:\n"
                );
                for m in &st.moved {
                    let path = if m.path.is_empty() { "/" } else { &m.path };
                    let _ = writeln!(s, "- `{}` at `{path}` ({}): {}", m.keyword, m.value, m.into);
                }
                s.push('\n');
            }
        }
        Err(e) => {
            let _ = writeln!(s, "## Strict schema\n\nnone: {e}\n");
        }
    }
    let _ = writeln!(s, "## Fields\n\n{}", contract.docs_markdown().trim_end());
    let _ = writeln!(s, "\n## Gaps\n");
    if contract.gaps().is_empty() {
        let _ = writeln!(
            s,
            "None: every keyword reaches the signature, the token mask and the validator."
        );
    } else {
        for g in contract.gaps() {
            let _ = writeln!(s, "- {g}");
        }
    }
    emit(&s)?;
    Ok(code::OK)
}

/// Writes `text` to standard output; a reader that stopped reading (`| head`) is not an error.
fn emit(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Output(format!("standard output: {e}")))
        }
        _ => Ok(()),
    }
}

/// `contract review`.
pub fn review(rows: &Path, docs: &[String], html: &Path, title: &str) -> Result<(), CliError> {
    let docs = read_docs(docs)?;
    write_review(rows, &docs, html, title)
}

/// Writes the review page of the rows in `rows` over `docs` to `html`.
pub fn write_review(rows: &Path, docs: &[Doc], html: &Path, title: &str) -> Result<(), CliError> {
    let rows = read_rows(rows)?;
    let page = crate::review::page(title, &rows, docs);
    std::fs::write(html, crate::review::html(&page)).map_err(|e| CliError::output(html, e))?;
    eprintln!("review: {} ({} documents)", html.display(), page.docs.len());
    Ok(())
}
