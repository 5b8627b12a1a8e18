//! Helpers of the CLI tests: the binary, scratch folders, the example data, rows.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `contract` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_contract");

/// What a run gave.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `contract` with `args` to the end.
pub fn contract(args: &[&str]) -> Run {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The arguments of one `contract extract` run: the schema, the inputs, the output and
/// `--quiet`, then the backend and whatever else a test adds.
#[derive(Debug, Clone)]
pub struct Extract {
    args: Vec<String>,
}

impl Extract {
    /// `extract --schema SCHEMA --input INPUT --output OUTPUT --quiet`.
    pub fn new(schema: &str, input: &str, output: &Path) -> Self {
        Extract {
            args: ["extract", "--schema", schema, "--input", input, "--output"]
                .map(str::to_owned)
                .to_vec(),
        }
        .arg(path(output))
        .arg("--quiet")
    }

    /// The example invoices (`invoice.schema.json` on `invoices.jsonl`) into `output`.
    pub fn invoices(output: &Path) -> Self {
        Extract::new(
            &data("invoice.schema.json"),
            &data("invoices.jsonl"),
            output,
        )
    }

    /// `--backend scripted --replies REPLIES`.
    pub fn scripted(self, replies: &str) -> Self {
        self.args(&["--backend", "scripted", "--replies", replies])
    }

    /// One more argument.
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// More arguments.
    pub fn args(self, args: &[&str]) -> Self {
        args.iter().fold(self, |e, a| e.arg(a))
    }

    /// Runs `contract` with these arguments to the end.
    pub fn run(&self) -> Run {
        contract(&self.args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// `contract` with these arguments, to spawn.
    pub fn command(&self) -> Command {
        let mut command = Command::new(BIN);
        command.args(&self.args);
        command
    }
}

/// Runs `contract review ROWS --docs DOCS --html HTML` and `more` to the end.
pub fn review(rows: &Path, docs: &str, html: &Path, more: &[&str]) -> Run {
    let mut args = vec!["review", path(rows), "--docs", docs, "--html", path(html)];
    args.extend_from_slice(more);
    contract(&args)
}

/// An empty folder of this test's own.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("contract-cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// A file of the example data the repository ships (`examples/data/cli`).
pub fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/data/cli")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `p` as a `&str`.
pub fn path(p: &Path) -> &str {
    p.to_str()
        .unwrap_or_else(|| panic!("not UTF-8: {}", p.display()))
}

/// The rows of a JSON lines file by id; every line must be a whole row with a new id.
pub fn rows_by_id(file: &Path) -> HashMap<String, Value> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut rows = HashMap::new();
    for line in text.lines() {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let id = row["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id: {line}"))
            .to_owned();
        assert!(rows.insert(id.clone(), row).is_none(), "`{id}` twice");
    }
    rows
}

/// The documents of a JSON lines file by id.
pub fn docs_by_id(file: &str) -> HashMap<String, String> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}"));
            (
                v["id"].as_str().unwrap_or_default().to_owned(),
                v["text"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Waits until `file` has at least `n` whole lines, while `child` runs (a child that ends first
/// fails the test; so does a hang of 600 s, a guard, not a timing: a row takes seconds).
pub fn wait_for_rows(child: &mut std::process::Child, file: &Path, n: usize) {
    let start = Instant::now();
    loop {
        let lines = std::fs::read(file)
            .map(|b| b.iter().filter(|&&c| c == b'\n').count())
            .unwrap_or(0);
        if lines >= n {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the run ended ({status}) before {n} rows in {}",
                file.display()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "no {n} rows in {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
