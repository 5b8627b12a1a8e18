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
