//! The output ladder on external data (`testdata/` at the repository root; each folder's `SOURCE`
//! says where it comes from): JSONTestSuite at the strict level, reasoning-trace splits, and the
//! json-repair suites (no panic; recovery counts per case class). Each test holds the counts it
//! read to the set's size, and fails, naming the path, when its data is missing.
//!
//! Run with `-- --nocapture` to see the counts and the per-class table.

use std::collections::BTreeMap;
use std::path::PathBuf;

use contract_core::parse::{recover, split_reasoning, strict_json, Level};
use serde_json::Value;

/// `testdata/` at the repository root (see its `README.md`).
fn data_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    assert!(
        dir.is_dir(),
        "test data not found at {}: it is the repository's testdata/ folder",
        dir.display()
    );
    dir
}

fn read_json(rel: &str) -> Value {
    let path = data_dir().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Strict acceptance of raw bytes: invalid UTF-8 is rejected.
fn accepts(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|s| strict_json(s).is_ok())
}

#[test]
fn jsontestsuite_at_the_strict_level() {
    let dir = data_dir().join("jsontestsuite/test_parsing");
    let mut wrong = Vec::new();
    let (mut y, mut n, mut i) = (0, 0, 0);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        // The ladder never panics on any of them, whatever the prefix.
        let _ = recover(&String::from_utf8_lossy(&bytes));
        if name.starts_with("y_") {
            y += 1;
            assert!(
                std::str::from_utf8(&bytes).is_ok(),
                "{name}: a y_ file that is not UTF-8"
            );
            if !accepts(&bytes) {
                wrong.push(format!("{name}: must accept"));
            }
        } else if name.starts_with("n_") {
            n += 1;
            if accepts(&bytes) {
                wrong.push(format!("{name}: must reject"));
            }
        } else if name.starts_with("i_") {
            i += 1;
        }
    }
    println!("JSONTestSuite: {y} y_ accepted, {n} n_ rejected, {i} i_ read without panic");
    assert_eq!((y, n), (95, 188), "unexpected file counts");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn strict_level_is_one_object() {
    let dir = data_dir().join("jsontestsuite/test_parsing");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let level = recover(&text).level;
        let is_object = matches!(strict_json(&text), Ok(Value::Object(_)));
        if name.starts_with("y_") || name.starts_with("n_") {
            assert_eq!(level == Level::Strict, is_object, "{name}: level {level}");
            checked += 1;
        }
    }
    println!("JSONTestSuite: {checked} UTF-8 y_ and n_ files, strict level iff one object");
    // 95 y_ and 188 n_ files, less the 12 n_ files that are not UTF-8 (no text to recover).
    assert_eq!(
        checked,
        271,
        "y_ and n_ files read as text in {}",
        dir.display()
    );
}

#[test]
fn reasoning_traces_split() {
    let data = read_json("think/vllm_deepseek_r1_cases.json");
    let cases = data["cases"].as_array().expect("cases");
    println!("reasoning traces: {} cases", cases.len());
    assert_eq!(cases.len(), 11);
    for case in cases {
        let id = case["id"].as_str().unwrap_or("?");
        let output = case["output"].as_str().expect("output");
        // DeepSeek-R1's template opens the trace in the prompt.
        let split = split_reasoning(output, true);
        assert_eq!(
            split.reasoning,
            case["reasoning"].as_str(),
            "{id}: reasoning"
        );
        assert_eq!(split.content, case["content"].as_str(), "{id}: content");

        // With a JSON answer after the trace, the ladder extracts it and keeps the reasoning.
        if output.contains("</think>") {
            let reply = format!("{output}{{\"a\": 1}}");
            let rec = recover(&reply);
            assert_eq!(rec.level, Level::Extracted, "{id}");
            assert_eq!(rec.reasoning.as_deref(), case["reasoning"].as_str(), "{id}");
            assert_eq!(rec.json, Some(serde_json::json!({"a": 1})), "{id}");
        }
    }
}

#[derive(Default)]
struct Tally {
    cases: usize,
    levels: [usize; 4],
    expected_objects: usize,
    matches: usize,
}

impl Tally {
    fn add(&mut self, input: &str, expected: Option<Value>) {
        let rec = recover(input);
        self.cases += 1;
        self.levels[rec.level as usize] += 1;
        if let Some(expected @ Value::Object(_)) = expected {
            self.expected_objects += 1;
            if rec.json.as_ref() == Some(&expected) {
                self.matches += 1;
            }
        }
    }

    fn recovered(&self) -> usize {
        self.cases - self.levels[Level::Invalid as usize]
    }
}

fn print_table(title: &str, classes: &BTreeMap<String, Tally>) -> Tally {
    println!("\n{title}");
    println!(
        "{:>5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9}  class",
        "cases", "strict", "extr", "repair", "inval", "recov", "match/obj"
    );
    let mut total = Tally::default();
    for (class, t) in classes {
        println!(
            "{:>5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>4}/{:<4}  {class}",
            t.cases,
            t.levels[0],
            t.levels[1],
            t.levels[2],
            t.levels[3],
            t.recovered(),
            t.matches,
            t.expected_objects
        );
        total.cases += t.cases;
        for l in 0..4 {
            total.levels[l] += t.levels[l];
        }
        total.expected_objects += t.expected_objects;
        total.matches += t.matches;
    }
    println!(
        "{:>5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>4}/{:<4}  TOTAL",
        total.cases,
        total.levels[0],
        total.levels[1],
        total.levels[2],
        total.levels[3],
        total.recovered(),
        total.matches,
        total.expected_objects
    );
    total
}

#[test]
fn json_repair_python_suite() {
    let data = read_json("json-repair/json_repair_py_cases.json");
    let mut classes: BTreeMap<String, Tally> = BTreeMap::new();
    for case in data.as_array().expect("cases") {
        let input = case["input"].as_str().unwrap_or("");
        let expected = match (&case["expected_value"], case["expected_json"].as_str()) {
            (Value::Null, Some(text)) => serde_json::from_str(text).ok(),
            (Value::Null, None) => None,
            (v, _) => Some(v.clone()),
        };
        let class = case["test"].as_str().unwrap_or("?").to_owned();
        classes.entry(class).or_default().add(input, expected);
    }
    let total = print_table("json_repair (Python) cases, per test", &classes);
    assert_eq!(total.cases, 286);
}

#[test]
fn json_repair_js_suite() {
    let data = read_json("json-repair/jsonrepair_js_cases.json");
    let mut classes: BTreeMap<String, Tally> = BTreeMap::new();
    let mut unchanged_objects = 0;
    for case in data.as_array().expect("cases") {
        let input = case["input"].as_str().unwrap_or("");
        let kind = case["kind"].as_str().unwrap_or("?");
        let expected = case["expected"]
            .as_str()
            .and_then(|t| serde_json::from_str::<Value>(t).ok());
        if kind == "unchanged" {
            if let Some(Value::Object(_)) = &expected {
                // Valid JSON objects are strict, as written.
                let rec = recover(input);
                assert_eq!(rec.level, Level::Strict, "{input:?}");
                assert_eq!(rec.json, expected, "{input:?}");
                unchanged_objects += 1;
            }
        }
        if kind == "error" {
            // The reference throws; the ladder must not pretend to more.
            let rec = recover(input);
            assert_ne!(rec.level, Level::Strict, "{input:?}");
        }
        let test = case["test"].as_str().unwrap_or("?");
        let class = test.split(" > ").nth(2).unwrap_or(test);
        let class = format!("{kind}: {class}");
        classes.entry(class).or_default().add(input, expected);
    }
    let total = print_table("jsonrepair (JS) cases, per kind and test", &classes);
    assert_eq!(total.cases, 428);
    assert!(unchanged_objects > 0);
}

/// Inputs found by fuzzing or review that once misbehaved; each must parse without a panic.
#[test]
fn regressions() {
    let cases: &[&str] = &[
        "",
        "{",
        "{\"a\":\"\\u12",
        "{\"a\":\"\\",
        "{'a':'\\",
        "{/*",
        "{//",
        "{\"a\":-",
        "{\"a\":1.",
        "{\"a\":1e+",
        "</think>",
        "<think>",
        "```",
        "```json\n[",
        "{\"\u{e9}\": \"\u{1F600}",
        "{\"a\": \"x\u{0}y\"}",
    ];
    for raw in cases {
        let _ = recover(raw);
    }
}
