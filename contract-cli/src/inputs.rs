//! Reading documents: JSON lines of `{"id", "text"}`, plain text files, folders and globs.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::error::CliError;

/// One input document: its id (the `id` of its JSON line, else the path of its text file) and
/// its text.
pub use contract_backends::batch::Doc;

/// Whether `path` names a JSON lines file (by its extension).
fn is_jsonl(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("jsonl" | "ndjson")
    )
}

fn is_glob(spec: &str) -> bool {
    spec.contains(['*', '?', '['])
}

/// Every document of `specs`: each a `.jsonl` file, a text file, a folder (its files, sorted,
/// recursively) or a glob. Ids must be unique across all of them.
pub fn read_docs(specs: &[String]) -> Result<Vec<Doc>, CliError> {
    let mut docs = Vec::new();
    for spec in specs {
        let path = PathBuf::from(spec);
        if path.is_dir() {
            let mut files = Vec::new();
            walk(&path, &mut files)?;
            files.sort();
            for f in files {
                read_file(&f, &mut docs)?;
            }
        } else if path.is_file() {
            read_file(&path, &mut docs)?;
        } else if is_glob(spec) {
            let paths = glob::glob(spec)
                .map_err(|e| CliError::Input(format!("`{spec}` is not a glob: {e}")))?;
            let mut files = Vec::new();
            for p in paths {
                let p = p.map_err(|e| CliError::Input(format!("`{spec}`: {e}")))?;
                if p.is_file() {
                    files.push(p);
                }
            }
            if files.is_empty() {
                return Err(CliError::Input(format!("`{spec}` matches no file")));
            }
            files.sort();
            for f in files {
                read_file(&f, &mut docs)?;
            }
        } else {
            return Err(CliError::input(&path, "no such file or folder"));
        }
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, d) in docs.iter().enumerate() {
        if seen.insert(d.id.as_str(), i).is_some() {
            return Err(CliError::Input(format!(
                "the document id `{}` appears twice: ids key the output rows and resuming",
                d.id
            )));
        }
    }
    Ok(docs)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let entries = std::fs::read_dir(dir).map_err(|e| CliError::input(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::input(dir, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| CliError::input(&path, e))?;
        if kind.is_dir() {
            walk(&path, out)?;
        } else if kind.is_file()
            && !path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        {
            out.push(path);
        }
    }
    Ok(())
}

fn read_file(path: &Path, docs: &mut Vec<Doc>) -> Result<(), CliError> {
    if is_jsonl(path) {
        docs.extend(read_jsonl(path)?);
        return Ok(());
    }
    let bytes = std::fs::read(path).map_err(|e| CliError::input(path, e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        CliError::input(
            path,
            format!(
                "not UTF-8 text (byte {}); convert it, or give JSON lines",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    docs.push(Doc {
        id: path.to_string_lossy().into_owned(),
        text,
    });
    Ok(())
}

/// The documents of a JSON lines file of `{"id": string, "text": string}` objects (blank lines
/// skipped, other keys ignored); a line that is not such an object is an error naming it.
pub fn read_jsonl(path: &Path) -> Result<Vec<Doc>, CliError> {
    let file = std::fs::File::open(path).map_err(|e| CliError::input(path, e))?;
    let mut docs = Vec::new();
    for (i, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|e| CliError::input(path, e))?;
        let at = format!("{}:{}", path.display(), i + 1);
        let line = std::str::from_utf8(&line)
            .map_err(|e| CliError::Input(format!("{at}: not UTF-8 ({e})")))?;
        if line.trim().is_empty() {
            continue;
        }
        let doc: Doc = serde_json::from_str(line).map_err(|e| {
            CliError::Input(format!(
                "{at}: expected a {{\"id\": string, \"text\": string}} object: {e}; nothing \
                 was run"
            ))
        })?;
        docs.push(doc);
    }
    Ok(docs)
}

/// Reads a JSON lines file of objects with a string `id`, keeping each whole; a line that is
/// not one is an error naming it, except a torn last line (no newline: an interrupted write),
/// which is skipped with a warning.
pub fn read_rows(path: &Path) -> Result<Vec<serde_json::Value>, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::input(path, e))?;
    let mut rows = Vec::new();
    let mut lines = bytes.split(|&b| b == b'\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let last = lines.peek().is_none();
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).map_err(|e| e.to_string()))
            .and_then(|v| match v.get("id") {
                Some(serde_json::Value::String(_)) => Ok(v),
                _ => Err("the row has no string `id`".to_owned()),
            });
        match parsed {
            Ok(v) => rows.push(v),
            Err(e) if last => eprintln!(
                "warning: {}:{}: skipped a torn last line ({e})",
                path.display(),
                i + 1
            ),
            Err(e) => return Err(CliError::input(path, format!("line {}: {e}", i + 1))),
        }
    }
    Ok(rows)
}
