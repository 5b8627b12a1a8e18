//! Runtime contracts held against JSONSchemaBench (`testdata/jsonschemabench` at the repository
//! root: 440 real schemas in 15 categories, with 655 valid and 1,322 invalid instances labelled by
//! JSON Schema validators; its `SOURCE` says where they come from).
//!
//! For each schema: `DynContract::from_schema`; its grammar (`Whitespace::Compact`) compiled by
//! llguidance on the real SmolLM2 tokenizer; then every instance, serialised compactly with
//! object keys in the order llguidance generates them (see [`canonical`]), tokenised with the
//! same tokenizer and walked through the mask token by token: a token is taken when the mask
//! allows it; a token the mask does not offer is checked byte-wise with llguidance's
//! `validate_tokens`, since inside forced text the mask offers only llguidance's canonical
//! tokenisation (those steps are counted). At the end the mask must accept. Invalid instances
//! must be rejected by the mask or by `DynContract::validate` (the pipeline); the test asserts
//! that none gets through both, and lists every exception. Figures per category are printed
//! (`--nocapture`); they are in `docs/benchmarks.md`.
//!
//! `JSB_LIMIT=n` runs the first `n` schemas of each category only; without it, the test holds the
//! counts it read to the whole set (440 schemas, 655 valid and 1,322 invalid instances). Without
//! the data the test fails, naming the path it looked at.

#![cfg(feature = "local")]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use contract_backends::local::fetch::default_model_path;
use contract_backends::local::gguf_tokenizer::{read_content, GgufTokenizer};
use contract_backends::local::mask::{percentile_us, ContractMask, MaskEngine};
use contract_core::grammar::Whitespace;
use contract_core::DynContract;
use serde_json::{Map, Value};

/// `testdata/jsonschemabench` at the repository root (see `testdata/README.md`).
fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/jsonschemabench")
}

#[derive(Default)]
struct Tally {
    schemas: usize,
    accepted: usize,
    compiled: usize,
    /// Valid / invalid instances of accepted schemas.
    valid: usize,
    invalid: usize,
    /// Valid instances walked through a mask, and those it accepted.
    valid_walked: usize,
    valid_mask_ok: usize,
    invalid_mask_rejected: usize,
    invalid_validator_rejected: usize,
    invalid_neither: usize,
    validator_valid_ok: usize,
    validator_invalid_ok: usize,
    /// Instances of schemas `from_schema` rejected (not checked).
    skipped: usize,
    /// Instances of accepted schemas llguidance did not compile (validator only).
    unmasked: usize,
    noncanonical_steps: usize,
    tokens: usize,
    mask_ns: Vec<u64>,
    compile_ns: Vec<u64>,
    ratios: Vec<f64>,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.schemas += o.schemas;
        self.accepted += o.accepted;
        self.compiled += o.compiled;
        self.valid += o.valid;
        self.invalid += o.invalid;
        self.valid_walked += o.valid_walked;
        self.valid_mask_ok += o.valid_mask_ok;
        self.invalid_mask_rejected += o.invalid_mask_rejected;
        self.invalid_validator_rejected += o.invalid_validator_rejected;
        self.invalid_neither += o.invalid_neither;
        self.validator_valid_ok += o.validator_valid_ok;
        self.validator_invalid_ok += o.validator_invalid_ok;
        self.skipped += o.skipped;
        self.unmasked += o.unmasked;
        self.noncanonical_steps += o.noncanonical_steps;
        self.tokens += o.tokens;
        self.mask_ns.extend_from_slice(&o.mask_ns);
        self.compile_ns.extend_from_slice(&o.compile_ns);
        self.ratios.extend_from_slice(&o.ratios);
    }
}

/// How a walk ended.
enum Walk {
    Accepted,
    /// Rejected at token `step` (of `len`), or at the end (`step == len`).
    Rejected {
        step: usize,
        len: usize,
        why: String,
    },
}

fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn jsonschemabench() {
    let dir = data_dir();
    let index_path = dir.join("index.jsonl");
    let index = std::fs::read_to_string(&index_path).unwrap_or_else(|e| {
        panic!(
            "JSONSchemaBench data not found at {} ({e}): it is the repository's \
             testdata/jsonschemabench",
            index_path.display()
        )
    });
    let model = default_model_path().expect("the default model (SmolLM2) is needed");
    let tokenizer =
        GgufTokenizer::from_content(&read_content(&model).expect("gguf")).expect("tokenizer");
    let engine = MaskEngine::cached(tokenizer.json().as_bytes(), tokenizer.stop_tokens())
        .expect("mask engine");
    let limit: usize = std::env::var("JSB_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);

    let started = Instant::now();
    let mut by_category: BTreeMap<String, Tally> = BTreeMap::new();
    let mut rejected_schemas: Vec<String> = Vec::new();
    let mut compile_failures: Vec<String> = Vec::new();
    let mut valid_rejected: Vec<String> = Vec::new();
    let mut invalid_accepted: Vec<String> = Vec::new();
    let mut label_disagreements: Vec<String> = Vec::new();
    let mut warnings: BTreeMap<String, usize> = BTreeMap::new();
    let mut strict_ok = 0usize;
    let mut gap_counts: BTreeMap<String, usize> = BTreeMap::new();
    // Why the mask let an invalid instance through: the validator's first violation kind.
    let mut validator_only: BTreeMap<String, usize> = BTreeMap::new();
    let mut mask_passed: Vec<String> = Vec::new();
    // What was read: schemas, valid and invalid instances (checked against the set's size below).
    let mut read = (0usize, 0usize, 0usize);

    for line in index.lines().filter(|l| !l.trim().is_empty()) {
        let entry: Value = serde_json::from_str(line).expect("index line");
        let path = entry["path"].as_str().expect("path").to_owned();
        let category = entry["category"].as_str().expect("category").to_owned();
        let t = by_category.entry(category.clone()).or_default();
        if t.schemas >= limit {
            continue;
        }
        t.schemas += 1;
        let file_path = dir.join(&path);
        let file_text = std::fs::read_to_string(&file_path)
            .unwrap_or_else(|e| panic!("{}: {e}", file_path.display()));
        let file: Value = serde_json::from_str(&file_text)
            .unwrap_or_else(|e| panic!("{}: {e}", file_path.display()));
        let schema = file["schema"].clone();
        let tests: Vec<(bool, Value)> = file["tests"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| (t["valid"].as_bool().unwrap_or(false), t["data"].clone()))
                    .collect()
            })
            .unwrap_or_default();
        let valid_read = tests.iter().filter(|(valid, _)| *valid).count();
        read.0 += 1;
        read.1 += valid_read;
        read.2 += tests.len() - valid_read;

        let contract = match DynContract::from_schema(schema.clone()) {
            Ok(c) => c,
            Err(e) => {
                rejected_schemas.push(format!("{path}: {e}"));
                t.skipped += tests.len();
                continue;
            }
        };
        t.accepted += 1;
        for g in contract.gaps() {
            *gap_counts
                .entry(format!(
                    "{} ({})",
                    g.keyword,
                    g.missing
                        .iter()
                        .map(|r| r.as_str())
                        .collect::<Vec<_>>()
                        .join("+")
                ))
                .or_default() += 1;
        }
        // Renderings must not panic on any schema; the strict subset may refuse some.
        let _ = contract.docs_markdown();
        if contract.strict_schema().is_ok() {
            strict_ok += 1;
        }
        let signature = contract.signature();
        let compact = serde_json::to_string(&schema).expect("schema text");
        let sig_tokens = tokenizer.encode(&signature).expect("encode").len();
        let schema_tokens = tokenizer.encode(&compact).expect("encode").len();
        t.ratios
            .push(sig_tokens as f64 / schema_tokens.max(1) as f64);

        let grammar = contract.grammar_with(Whitespace::Compact);
        let t0 = Instant::now();
        let proto = engine.mask_for_schema(grammar, None).and_then(|m| {
            let mut m = m.with_timing(true);
            m.allowed_tokens()?;
            Ok(m)
        });
        let compile_ns = t0.elapsed().as_nanos() as u64;

        for (valid, data) in &tests {
            let ok = contract.is_valid(data);
            if *valid {
                t.valid += 1;
                t.validator_valid_ok += usize::from(ok);
            } else {
                t.invalid += 1;
                t.validator_invalid_ok += usize::from(!ok);
            }
            if ok != *valid {
                let why = contract
                    .validate(data)
                    .err()
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "accepted".into());
                label_disagreements.push(format!(
                    "{path}: labelled {}, validator says {}: {}",
                    if *valid { "valid" } else { "invalid" },
                    if ok { "valid" } else { "invalid" },
                    cut(&why, 300)
                ));
            }
        }

        let mut proto = match proto {
            Ok(p) => p,
            Err(e) => {
                compile_failures.push(format!("{path}: {}", cut(&e.to_string(), 200)));
                t.unmasked += tests.len();
                for (i, (valid, data)) in tests.iter().enumerate() {
                    if *valid {
                        continue;
                    }
                    if contract.is_valid(data) {
                        t.invalid_neither += 1;
                        invalid_accepted.push(format!(
                            "{path} #{i} (no mask): {}",
                            cut(&data.to_string(), 240)
                        ));
                    } else {
                        t.invalid_validator_rejected += 1;
                    }
                }
                continue;
            }
        };
        t.compiled += 1;
        t.compile_ns.push(compile_ns);
        for w in proto.grammar_warnings() {
            *warnings.entry(cut(&w, 90)).or_default() += 1;
        }

        let root = schema.clone();
        for (i, (valid, data)) in tests.iter().enumerate() {
            let text =
                serde_json::to_string(&canonical(data, &[&root], &root, 0)).expect("instance text");
            let tokens = tokenizer.encode(&text).expect("encode");
            let (walk, noncanonical, mask_ns) = walk(&proto, &tokens, &text);
            t.noncanonical_steps += noncanonical;
            t.tokens += tokens.len();
            t.mask_ns.extend_from_slice(&mask_ns);
            let validator_ok = contract.is_valid(data);
            t.valid_walked += usize::from(*valid);
            match (valid, &walk) {
                (true, Walk::Accepted) => t.valid_mask_ok += 1,
                (true, Walk::Rejected { step, len, why }) => valid_rejected.push(format!(
                    "{path} #{i}: rejected at token {step}/{len}: {} in {}",
                    cut(why, 160),
                    cut(&text, 240)
                )),
                (false, Walk::Rejected { .. }) => t.invalid_mask_rejected += 1,
                (false, Walk::Accepted) => {
                    if let Err(v) = contract.validate(data) {
                        let kinds: Vec<&str> = v.iter().map(|x| x.kind.as_str()).collect();
                        *validator_only.entry(kinds.join("+")).or_default() += 1;
                        mask_passed.push(format!("{path} #{i}: {}", cut(&v.to_string(), 200)));
                    }
                    if validator_ok {
                        t.invalid_neither += 1;
                        invalid_accepted.push(format!("{path} #{i}: {}", cut(&text, 240)));
                    } else {
                        t.invalid_validator_rejected += 1;
                    }
                }
            }
        }
    }

    let mut total = Tally::default();
    println!(
        "\nJSONSchemaBench: runtime contracts (DynContract), SmolLM2 tokenizer, compact layout\n"
    );
    println!(
        "| category | schemas | from_schema | mask | valid passed (mask) | invalid rejected: mask / validator only / neither | validator right (valid, invalid) | mask µs/token p50 / p99 | compile ms p50 / p99 | signature/schema tokens (median) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (category, t) in &by_category {
        print_row(category, t);
        total.add(t);
    }
    print_row("**total**", &total);
    println!(
        "\ninstances not checked (schema rejected by from_schema): {}; instances checked by the \
         validator alone (no mask): {}; tokens walked: {}; steps where the mask did not offer the \
         tokenizer's token but llguidance accepted its bytes (forced text): {}",
        total.skipped, total.unmasked, total.tokens, total.noncanonical_steps
    );
    let mean = total.mask_ns.iter().sum::<u64>() as f64 / total.mask_ns.len().max(1) as f64;
    println!(
        "mask µs per token: mean {:.1}, p90 {:.1}, p95 {:.1}; steps over 1 ms: {:.2}%",
        mean / 1000.0,
        percentile_us(&total.mask_ns, 90.0),
        percentile_us(&total.mask_ns, 95.0),
        100.0 * total.mask_ns.iter().filter(|&&n| n > 1_000_000).count() as f64
            / total.mask_ns.len().max(1) as f64
    );
    println!(
        "strict subset: {strict_ok} of {} accepted schemas; wall time {:.1} s",
        total.accepted,
        started.elapsed().as_secs_f64()
    );
    let list = |title: &str, items: &[String]| {
        println!("\n{title}: {}", items.len());
        for item in items {
            println!("  - {item}");
        }
    };
    list("schemas from_schema rejected", &rejected_schemas);
    list("schemas llguidance did not compile", &compile_failures);
    list("valid instances the mask rejected", &valid_rejected);
    list(
        "invalid instances accepted by mask and validator",
        &invalid_accepted,
    );
    list(
        "validator against the labels (disagreements)",
        &label_disagreements,
    );
    println!("\ninvalid instances the mask let through, by the validator's violation kinds:");
    for (kinds, n) in &validator_only {
        println!("  - {kinds}: {n}");
    }
    list(
        "invalid instances the mask let through (the validator rejected them)",
        &mask_passed,
    );
    println!("\nllguidance warnings (count):");
    for (w, n) in &warnings {
        println!("  - {n} × {w}");
    }
    println!("\ngaps reported by from_schema (keyword (renderings missing it): count):");
    let mut gaps: Vec<_> = gap_counts.into_iter().collect();
    gaps.sort_by_key(|g| std::cmp::Reverse(g.1));
    for (g, n) in gaps {
        println!("  - {g}: {n}");
    }
    println!(
        "\nJSONSchemaBench: {} schemas read, {} valid and {} invalid instances",
        read.0, read.1, read.2
    );
    if limit == usize::MAX {
        assert_eq!(
            read,
            (440, 655, 1322),
            "schemas, valid and invalid instances read from {}",
            dir.display()
        );
    }
    assert!(
        invalid_accepted.is_empty(),
        "{} invalid instances got through mask and validator",
        invalid_accepted.len()
    );
}

fn print_row(name: &str, t: &Tally) {
    println!(
        "| {name} | {} | {} | {} | {}/{} | {} / {} / {} (of {}) | {}/{}, {}/{} | {:.1} / {:.1} | {:.1} / {:.1} | {:.2} |",
        t.schemas,
        t.accepted,
        t.compiled,
        t.valid_mask_ok,
        t.valid_walked,
        t.invalid_mask_rejected,
        t.invalid_validator_rejected,
        t.invalid_neither,
        t.invalid,
        t.validator_valid_ok,
        t.valid,
        t.validator_invalid_ok,
        t.invalid,
        percentile_us(&t.mask_ns, 50.0),
        percentile_us(&t.mask_ns, 99.0),
        percentile_us(&t.compile_ns, 50.0) / 1000.0,
        percentile_us(&t.compile_ns, 99.0) / 1000.0,
        median(&t.ratios),
    );
}

/// Walks `tokens` through a clone of `proto`: (how it ended, steps taken byte-wise, mask ns).
fn walk(proto: &ContractMask, tokens: &[u32], text: &str) -> (Walk, usize, Vec<u64>) {
    let mut m = proto.clone().with_timing(true);
    let mut noncanonical = 0;
    let len = tokens.len();
    let rejected = |step: usize, why: String, m: &ContractMask| {
        let done = String::from_utf8_lossy(m.output()).into_owned();
        Walk::Rejected {
            step,
            len,
            why: format!("{why} after {:?}", tail(&done, 60)),
        }
    };
    for (step, &t) in tokens.iter().enumerate() {
        if m.is_stopped() {
            let w = rejected(step, "the grammar ended".into(), &m);
            return (w, noncanonical, m.stats().llg_ns.clone());
        }
        let allowed = match m.allowed_tokens() {
            Ok(bits) => bits
                .get(t as usize / 32)
                .is_some_and(|w| w >> (t % 32) & 1 == 1),
            Err(e) => {
                let w = rejected(step, format!("mask error {e}"), &m);
                return (w, noncanonical, m.stats().llg_ns.clone());
            }
        };
        if !allowed {
            match m.validate_tokens(&[t]) {
                Ok(1) => noncanonical += 1,
                _ => {
                    let token = String::from_utf8_lossy(m.engine().token_bytes(t)).into_owned();
                    let w = rejected(step, format!("token {token:?} not allowed"), &m);
                    return (w, noncanonical, m.stats().llg_ns.clone());
                }
            }
        }
        if let Err(e) = m.consume(&[t]) {
            let w = rejected(step, format!("consume failed: {e}"), &m);
            return (w, noncanonical, m.stats().llg_ns.clone());
        }
    }
    let ns = m.stats().llg_ns.clone();
    if m.output() != text.as_bytes() {
        let w = rejected(len, "the tokens do not spell the text".into(), &m);
        return (w, noncanonical, ns);
    }
    if m.is_accepting() {
        (Walk::Accepted, noncanonical, ns)
    } else {
        let w = rejected(len, "not accepting at the end".into(), &m);
        (w, noncanonical, ns)
    }
}

/// `value` with object keys in the order llguidance generates them for `schemas`, and floats
/// with a zero fraction written as integers (JSON Schema reads `1.0` as the integer 1; the
/// grammar writes integers without a fraction).
///
/// llguidance fixes the order of listed properties: a schema's keywords are read in order,
/// `properties` adding its keys, `$ref`, `allOf` and `anyOf` / `oneOf` (the branch that lists most
/// of the value's keys) adding theirs where they stand; then the `required` keys not listed; then
/// any other key (here in the value's order).
fn canonical(value: &Value, schemas: &[&Value], root: &Value, depth: usize) -> Value {
    let mut g = Gathered::default();
    if depth <= 64 {
        for s in schemas {
            g.gather(s, root, value, 0);
        }
    }
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = Vec::new();
            for k in g.order.iter().chain(&g.required) {
                if let Some((key, _)) = map.get_key_value(k.as_str()) {
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
            }
            for k in map.keys() {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            let mut out = Map::new();
            for k in keys {
                let children: Vec<&Value> = match g.by_key.get(k.as_str()) {
                    Some(listed) => listed.clone(),
                    None => g.other.clone(),
                };
                out.insert(k.clone(), canonical(&map[k], &children, root, depth + 1));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let children = g.prefix.get(i).cloned().unwrap_or_else(|| g.items.clone());
                    canonical(item, &children, root, depth + 1)
                })
                .collect(),
        ),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => value.clone(),
        },
        other => other.clone(),
    }
}

/// What the schemas that apply to one value say about its keys and items.
#[derive(Default)]
struct Gathered<'a> {
    order: Vec<String>,
    required: Vec<String>,
    by_key: BTreeMap<String, Vec<&'a Value>>,
    /// `additionalProperties` and `patternProperties` schemas (for keys not listed).
    other: Vec<&'a Value>,
    prefix: Vec<Vec<&'a Value>>,
    items: Vec<&'a Value>,
}

impl<'a> Gathered<'a> {
    fn gather(&mut self, schema: &'a Value, root: &'a Value, value: &Value, depth: usize) {
        let Value::Object(map) = schema else { return };
        if depth > 32 {
            return;
        }
        for (key, v) in map {
            match (key.as_str(), v) {
                ("properties", Value::Object(props)) => {
                    for (name, sub) in props {
                        if !self.order.contains(name) {
                            self.order.push(name.clone());
                        }
                        self.by_key.entry(name.clone()).or_default().push(sub);
                    }
                }
                ("required", Value::Array(names)) => {
                    for n in names.iter().filter_map(Value::as_str) {
                        if !self.required.iter().any(|r| r == n) {
                            self.required.push(n.to_owned());
                        }
                    }
                }
                ("additionalProperties", Value::Object(_)) => self.other.push(v),
                ("patternProperties", Value::Object(patterns)) => {
                    self.other.extend(patterns.values())
                }
                ("items" | "prefixItems", Value::Array(list)) => {
                    for (i, sub) in list.iter().enumerate() {
                        if self.prefix.len() <= i {
                            self.prefix.push(Vec::new());
                        }
                        self.prefix[i].push(sub);
                    }
                }
                ("items" | "additionalItems", Value::Object(_)) => self.items.push(v),
                ("$ref", Value::String(r)) => {
                    if let Some(target) = resolve(root, r) {
                        self.gather(target, root, value, depth + 1);
                    }
                }
                ("allOf", Value::Array(parts)) => {
                    for part in parts {
                        self.gather(part, root, value, depth + 1);
                    }
                }
                ("anyOf" | "oneOf", Value::Array(branches)) => {
                    if let Some(best) = best_branch(branches, root, value) {
                        self.gather(best, root, value, depth + 1);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The branch whose properties (through `$ref`s) cover most of the object's keys (the first on a
/// tie); for a non-object, the first branch whose `type` fits.
fn best_branch<'a>(branches: &'a [Value], root: &'a Value, value: &Value) -> Option<&'a Value> {
    let deref = |mut b: &'a Value| {
        for _ in 0..16 {
            match b
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| resolve(root, r))
            {
                Some(t) => b = t,
                None => break,
            }
        }
        b
    };
    match value {
        Value::Object(map) => branches
            .iter()
            .enumerate()
            .max_by_key(|(i, b)| {
                let b = deref(b);
                let hits = b
                    .get("properties")
                    .and_then(Value::as_object)
                    .map_or(0, |p| map.keys().filter(|k| p.contains_key(*k)).count());
                (hits, std::cmp::Reverse(*i))
            })
            .map(|(_, b)| b),
        _ => branches.first(),
    }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

fn cut(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

fn tail(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        return text.to_owned();
    }
    let skip = count - n;
    format!("…{}", text.chars().skip(skip).collect::<String>())
}

/// The local backend takes a runtime contract's grammar as `Request::grammar` (a plain JSON
/// Schema, compiled once per engine): a valid answer, written with the default whitespace, walks
/// through; an invalid one is refused.
#[test]
fn local_backend_takes_a_dyn_contract_grammar() {
    use contract_backends::local::mask::GrammarMasks;
    use contract_backends::local::{Allowed, MaskFactory};
    use contract_core::extract::Request;

    let model = default_model_path().expect("the default model (SmolLM2) is needed");
    let tokenizer =
        GgufTokenizer::from_content(&read_content(&model).expect("gguf")).expect("tokenizer");
    let engine = MaskEngine::cached(tokenizer.json().as_bytes(), tokenizer.stop_tokens())
        .expect("mask engine");
    let contract = DynContract::from_schema(serde_json::json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}
        },
        "required": ["city", "days"],
        "additionalProperties": false
    }))
    .expect("schema");
    let request = Request::new(
        std::sync::Arc::new(contract_core::Constraint::from_dyn(&contract)),
        Default::default(),
    );
    let masks = GrammarMasks::new(engine);
    let walk = |text: &str| -> Result<(), String> {
        let mut mask = masks
            .mask_for(&request)
            .map_err(|e| e.to_string())?
            .ok_or("no mask")?;
        for t in tokenizer.encode(text).map_err(|e| e.to_string())? {
            match mask.allowed().map_err(|e| e.to_string())? {
                Allowed::Bits(bits) if bits.iter().all(|w| *w == 0) => {
                    return Err("empty mask".into())
                }
                _ => {}
            }
            mask.consume(&[t]).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    walk("{\n  \"city\": \"Oslo\",\n  \"days\": 3\n}").expect("a valid answer walks through");
    assert!(walk(r#"{"city": "Oslo", "days": 30}"#).is_err());
    assert!(
        walk(r#"{"days": 3, "city": "Oslo"}"#).is_err(),
        "keys in schema order"
    );
}
