//! `from_json` throughput on 10,000 mixed valid and invalid `Guidance` documents, one thread.
//!
//! Run with `cargo bench -p contract-core --bench from_json` (append `-- NAME` to run only the
//! measurements whose name contains NAME). Prints documents/second and ns/document for
//! `Guidance::from_json` and, in the same run, for baselines: parsing into a
//! `serde_json::Value` only, and plain `serde_json::from_str::<Guidance>` (typed, no checks), so
//! the cost of checking is visible; then the same on the valid documents alone, and `from_json`
//! on the invalid ones (where it writes every violation's message), and what merely cloning
//! those violations costs (their allocations: a floor under that figure). Each figure is
//! the fastest of several rounds, to keep other load on the machine out of it. Nothing about
//! time is asserted.
//!
//! Then `from_json_in` (the grounding check against a source document) on 10,000 replies of a
//! grounded contract, `Quoted`: a quote, and a period and two numbers grounded in the quote, a
//! few values invented or written with other digits, so that some replies are refused.
//!
//! With `BENCH_DOCS_OUT=path` the documents are also written there, one per line, so the same
//! set can be fed to Pydantic's `model_validate_json` for comparison.

use std::hint::black_box;
use std::time::{Duration, Instant};

use contract_core::{Contract, Source, Violations};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Next-quarter revenue guidance stated in an earnings release.
#[derive(Contract, Debug, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Guidance {
    #[contract(range = 1..=4)]
    quarter: Option<u8>,
    #[contract(range = 2018..=2030)]
    year: Option<u16>,
    /// Low end of the range.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    low: Option<f64>,
    #[contract(exclusive_min = 0, unit = "USD millions")]
    high: Option<f64>,
}

/// Guidance quoted from a release: the quote from the document, the rest from the quote.
#[derive(Contract, Debug, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Quoted {
    /// The sentence that states the guidance.
    #[contract(grounded)]
    quote: Option<String>,
    #[contract(grounded(in = quote), len = 1..=60)]
    period: Option<String>,
    #[contract(grounded(in = quote))]
    low: Option<f64>,
    #[contract(grounded(in = quote))]
    high: Option<f64>,
}

/// The release `Quoted` replies are checked against.
const RELEASE: &str = "Acme Reports Third Quarter 2024 Results\n\
Revenue was $2,757.50 million, up 7.5% year over year.\n\
For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140.25 million.\n\
For the full year 2025, Acme expects revenue between $16,200 and $16,900 million.\n\
Acme had 12,400 employees.";

/// One `Quoted` reply: mostly copied, sometimes a number or period invented or reworded.
fn quoted(rng: &mut Rng) -> String {
    let (quote, period, low, high) = if rng.chance(50) {
        (
            "For the fourth quarter of 2024, Acme expects revenue between $4,065 and $4,140.25 million.",
            "the fourth quarter of 2024",
            "4065",
            "4140.25",
        )
    } else {
        (
            "For the full year 2025, Acme expects revenue between $16,200 and $16,900 million.",
            "the full year 2025",
            "16200",
            "16900.0",
        )
    };
    let mut low = low.to_owned();
    let mut high = high.to_owned();
    let mut period = format!("\"{period}\"");
    if rng.chance(30) {
        match rng.below(5) {
            0 => low = format!("{}", 1000 + rng.below(9000)),
            1 => high = "4140.2500".into(),
            2 => period = "\"Q4 2024\"".into(),
            3 => period = "null".into(),
            _ => high = "4.14025e3".into(),
        }
    }
    if rng.chance(50) {
        format!(
            "{{\"quote\": \"{quote}\", \"period\": {period}, \"low\": {low}, \"high\": {high}}}"
        )
    } else {
        format!("{{\"quote\":\"{quote}\",\"period\":{period},\"low\":{low},\"high\":{high}}}")
    }
}

const DOCUMENTS: usize = 10_000;
const ROUNDS: usize = 15;

/// SplitMix64: small, deterministic, good enough to vary documents.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One document: about 60% valid, the rest broken in one of several ways (a few in two).
fn document(rng: &mut Rng) -> String {
    let mut quarter = format!("{}", 1 + rng.below(4));
    let mut year = format!("{}", 2018 + rng.below(13));
    let base = 100 + rng.below(20_000);
    let spread = rng.below(2_000);
    let mut low = if rng.chance(50) {
        format!("{base}")
    } else {
        format!("{base}.{}", rng.below(100))
    };
    let mut high = format!("{}.{}", base + spread + 1, rng.below(10));
    if rng.chance(10) {
        quarter = "null".into();
    }
    if rng.chance(10) {
        year = "null".into();
    }
    if rng.chance(8) {
        low = "null".into();
        high = "null".into();
    }
    let mut extra = String::new();
    let mut drop_year = false;
    let mut truncate = false;
    if rng.chance(40) {
        match rng.below(11) {
            0 => quarter = format!("{}", 5 + rng.below(10)),
            1 => year = format!("{}", 1990 + rng.below(27)),
            2 => std::mem::swap(&mut low, &mut high),
            3 => high = "null".into(),
            4 => low = format!("\"{base}\""),
            5 => low = format!("-{base}"),
            6 => drop_year = true,
            7 => extra = format!(", \"currency\": \"USD\", \"note\": {}", rng.below(9)),
            8 => truncate = true,
            9 => quarter = format!("{}.0", 1 + rng.below(4)), // valid: 3.0 is an integer
            _ => {
                quarter = "\"Q3\"".into();
                year = "2031".into();
            }
        }
    }
    let year_part = if drop_year {
        String::new()
    } else {
        format!(", \"year\": {year}")
    };
    let mut doc = if rng.chance(50) {
        format!("{{\"quarter\": {quarter}{year_part}, \"low\": {low}, \"high\": {high}{extra}}}")
    } else {
        format!("{{\"quarter\":{quarter}{year_part},\"low\":{low},\"high\":{high}{extra}}}")
            .replace(", ", ",")
            .replace(": ", ":")
    };
    if truncate {
        let cut = doc.len() - 1 - rng.below(doc.len() as u64 / 2) as usize;
        doc.truncate(cut);
    }
    doc
}

/// Runs `f` over every document `ROUNDS` times; returns the fastest round and a checksum.
fn time(docs: &[String], mut f: impl FnMut(&str) -> bool) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut accepted = 0;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        accepted = 0;
        for doc in docs {
            if f(black_box(doc)) {
                accepted += 1;
            }
        }
        best = best.min(start.elapsed());
    }
    (best, accepted)
}

fn report(name: &str, docs: usize, (elapsed, accepted): (Duration, usize)) -> f64 {
    let ns = elapsed.as_nanos() as f64 / docs as f64;
    println!(
        "{name:<42} {:>12.0} docs/s {ns:>9.1} ns/doc   ({accepted} accepted)",
        1e9 / ns
    );
    ns
}

fn main() {
    // `cargo bench --bench from_json -- NAME` runs only the measurements whose name contains
    // NAME (handy under `perf stat`); cargo's own `--bench` flag is ignored.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));

    let mut rng = Rng(0x00C0_FFEE);
    let docs: Vec<String> = (0..DOCUMENTS).map(|_| document(&mut rng)).collect();

    if let Some(path) = std::env::var_os("BENCH_DOCS_OUT") {
        let mut text = docs.join("\n");
        text.push('\n');
        match std::fs::write(&path, text) {
            Ok(()) => println!(
                "wrote {} documents to {}",
                docs.len(),
                path.to_string_lossy()
            ),
            Err(e) => eprintln!("cannot write {}: {e}", path.to_string_lossy()),
        }
    }

    let (valid, invalid): (Vec<String>, Vec<String>) = docs
        .iter()
        .cloned()
        .partition(|d| Guidance::from_json(d).is_ok());
    let values: Vec<Value> = valid
        .iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    println!(
        "{} Guidance documents ({} valid), best of {ROUNDS} rounds, one thread",
        docs.len(),
        valid.len()
    );

    let mut ns = std::collections::HashMap::new();
    let mut run = |name: &'static str, docs: &[String], f: &mut dyn FnMut(&str) -> bool| {
        if wanted(name) {
            ns.insert(name, report(name, docs.len(), time(docs, f)));
        }
    };
    run("Guidance::from_json", &docs, &mut |d| {
        Guidance::from_json(d).is_ok()
    });
    run(
        "serde_json::from_str::<Value> (parse only)",
        &docs,
        &mut |d| serde_json::from_str::<Value>(d).is_ok(),
    );
    run(
        "serde_json::from_str::<Guidance> (no checks)",
        &docs,
        &mut |d| serde_json::from_str::<Guidance>(d).is_ok(),
    );
    run("valid only: Guidance::from_json", &valid, &mut |d| {
        Guidance::from_json(d).is_ok()
    });
    run(
        "valid only: serde_json::from_str::<Guidance>",
        &valid,
        &mut |d| serde_json::from_str::<Guidance>(d).is_ok(),
    );
    run("invalid only: Guidance::from_json", &invalid, &mut |d| {
        Guidance::from_json(d).is_ok()
    });
    let mut next = values.iter().cycle();
    run(
        "valid only: Guidance::from_value (parsed)",
        &valid,
        &mut |_| next.next().is_some_and(|v| Guidance::from_value(v).is_ok()),
    );
    // What holding a refused document's violations costs, without finding or writing them: a
    // clone of them (the same allocations, the text copied) and its drop. A floor under the
    // refused documents' figure, whatever the parser and the checks.
    let reported: Vec<Violations> = invalid
        .iter()
        .filter_map(|d| Guidance::from_json(d).err())
        .collect();
    let mut next_reported = reported.iter().cycle();
    run(
        "invalid only: cloning their violations",
        &invalid,
        &mut |_| {
            next_reported
                .next()
                .is_some_and(|v| black_box(v.clone()).is_empty())
        },
    );

    let mut qrng = Rng(0x0BAD_5EED);
    let replies: Vec<String> = (0..DOCUMENTS).map(|_| quoted(&mut qrng)).collect();
    let release = Source::from_text(RELEASE);
    run("Quoted::from_json_in (grounded)", &replies, &mut |d| {
        Quoted::from_json_in(d, &release).is_ok()
    });
    run("Quoted::from_json (no source)", &replies, &mut |d| {
        Quoted::from_json(d).is_ok()
    });

    let ratio = |a: &str, b: &str| match (ns.get(a), ns.get(b)) {
        (Some(a), Some(b)) => format!("{:.2}x", a / b),
        _ => "-".to_owned(),
    };
    println!(
        "from_json / typed serde_json: {} on all documents, {} on valid ones",
        ratio(
            "Guidance::from_json",
            "serde_json::from_str::<Guidance> (no checks)"
        ),
        ratio(
            "valid only: Guidance::from_json",
            "valid only: serde_json::from_str::<Guidance>"
        ),
    );

    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    let mut rejected = 0;
    for doc in &docs {
        if let Err(violations) = Guidance::from_json(doc) {
            rejected += 1;
            for v in &violations {
                *kinds.entry(v.kind.as_str()).or_default() += 1;
            }
        }
    }
    println!("{rejected} documents rejected; violations by kind: {kinds:?}");
}
