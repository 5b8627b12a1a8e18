//! Speed of the local backend: figures printed, not asserted.
//!
//! ```text
//! cargo bench -p contract-backends --bench local_speed -- [--model MODEL.gguf]
//! ```
//!
//! The model: `--model PATH`, else `CONTRACT_MODEL`, else the default model (fetched once).
//! Each weight format runs in a child process of its own, so that its peak memory (`VmHWM`) is its
//! own. Per format: load time, resident memory after load and at the end, prefill and decode
//! tokens/s on synthetic tokens, the cost of a forward call with 4 and 16 tokens against one, and
//! `examples::Guidance` extractions on short press releases: seconds per extraction with the
//! contract's mask (prefix cache warm, and cold), without a mask, and with fast-forward of forced
//! tokens off, with forward calls and decode-loop tokens/s. Then the mask alone: time per step of
//! the contract's mask (with and without the cross-field rule filter) against llguidance driven
//! directly on the same grammar and tokenizer, replaying the constrained outputs; and the grounded
//! mask of `examples::filings::GroundedGuidance` on the same releases, against llguidance's own
//! `compute_mask` on each segment's composed grammar inside the same steps (the segments'
//! grammars, built when a segment ends, timed apart).
//!
//! Environment: `FORMATS` (default `fast,fast@1,fast:q8,f32,q8_0,as_stored`; `NAME@N` runs that
//! format with `CANDLE_NUM_THREADS=N`), `STAGES` (default `raw,e2e,mask`), `PREFILL` (tokens,
//! default 256), `DECODE` (default 64), `RUNS` (default 3), `E2E_RUNS` (passes over the
//! releases, default 2), `MASK_RUNS` (replays, default 20); thread counts as usual
//! (`CANDLE_NUM_THREADS`, `RAYON_NUM_THREADS`; by default the backend sets them).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use candle_core::quantized::GgmlDType;
use candle_core::Device;
use contract_backends::local::mask::{percentile_us, MaskEngine};
use contract_backends::local::model::resolve_engine;
use contract_backends::local::NativeOptions;
use contract_backends::local::{
    candle_thread_env, fetch, gguf_tokenizer, Engine, LocalBackend, LocalOptions, Model, Output,
    WeightFormat,
};
use contract_core::extract::Sampling;
use contract_core::prompt::{Message, PromptParts};
use contract_core::Contract;
use contract_core::Source;
use examples::filings::GroundedGuidance;
use examples::Guidance;
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};

const RELEASES: [&str; 4] = [
    "Acme Corp reported second-quarter revenue of $1.2 billion.\n\
     For the third quarter of 2024, the company expects revenue between $1,250 million and $1,300 million.",
    "Globex Inc. Exhibit 99.1\nNet income was $45,210 thousand.\nThe company is not providing guidance for the next quarter.",
    "Initech expects fourth-quarter 2025 revenue of approximately $820 million.",
    "Umbrella SA prevé para el primer trimestre de 2026 unos ingresos de entre 3.100 y 3.300 millones de euros.",
];
const MAX_TOKENS: u32 = 120;

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// A field of /proc/self/status in MiB.
fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// A format name: `as_stored`, `f32`, `q8_0`, `fast`, `auto`, or `fast:` followed
/// by options separated by `:` (`q8_0`, `q4k`, `q6k`, `f16`, `pad`, `nopad`, `dense`, `own`,
/// `candle`, `q8` (4-bit matrices re-quantized to Q8_0), `kv16` (the KV cache in f16)) to try
/// other settings of the native engine.
fn format_of(name: &str) -> (Engine, NativeOptions) {
    if let Some(opts) = name.strip_prefix("fast:") {
        let mut o = NativeOptions::default();
        for opt in opts.split(':') {
            o = match opt {
                "q8_0" => o.dtype(GgmlDType::Q8_0),
                "q4k" => o.dtype(GgmlDType::Q4K),
                "q5k" => o.dtype(GgmlDType::Q5K),
                "q6k" => o.dtype(GgmlDType::Q6K),
                "f16" => o.dtype(GgmlDType::F16),
                "pad" => o.pad(true),
                "nopad" => o.pad(false),
                "dense" => o.dense_from(16),
                "own" => o.own_kernel(true),
                "candle" => o.own_kernel(false),
                "q8" => o.keep_4bit(false),
                "kv16" => o.kv_f16(true),
                other => panic!("unknown fast option {other}"),
            };
        }
        return (Engine::Native, o);
    }
    let f = match name {
        "auto" => Engine::Auto,
        "as_stored" => Engine::Candle(WeightFormat::AsStored),
        "f32" => Engine::Candle(WeightFormat::F32),
        "q8_0" => Engine::Candle(WeightFormat::Q8_0),
        "fast" => Engine::Native,
        other => panic!("unknown format {other}"),
    };
    (f, NativeOptions::default())
}

fn arg_value(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = arg_value(&args, "--model")
        .map(PathBuf::from)
        .unwrap_or_else(|| fetch::default_model_path().expect("default model"));
    if let Some(what) = arg_value(&args, "--child") {
        if what == "mask" {
            mask_child(&path);
        } else {
            let label = arg_value(&args, "--label").unwrap_or_else(|| what.clone());
            format_child(&path, &what, &label);
        }
        return;
    }
    let formats = std::env::var("FORMATS")
        .unwrap_or_else(|_| "fast,fast@1,fast:q8,f32,q8_0,as_stored".into());
    println!("model: {}", path.display());
    println!(
        "threads: CANDLE_NUM_THREADS={:?} RAYON_NUM_THREADS={:?} (unset: the backend's defaults)",
        std::env::var("CANDLE_NUM_THREADS").ok(),
        std::env::var("RAYON_NUM_THREADS").ok()
    );
    let exe = std::env::current_exe().expect("current exe");
    let mut sections = vec![String::new(); 3];
    let stages = std::env::var("STAGES").unwrap_or_else(|_| "raw,e2e,mask".into());
    for name in formats.split(',').map(str::trim) {
        // Rows come as they are measured (on stderr), then again in the tables at the end.
        let mut cmd = Command::new(&exe);
        let format = match name.split_once('@') {
            Some((format, threads)) => {
                cmd.env("CANDLE_NUM_THREADS", threads);
                format
            }
            None => name,
        };
        cmd.args(["--child", format, "--label", name, "--model"])
            .arg(&path)
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("child process");
        let stdout = child.stdout.take().expect("piped stdout");
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            eprintln!("[{name}] {line}");
            // Lines tagged `0|`, `1|`, `2|`: rows of the three tables; the rest goes as is.
            match line.split_once('|') {
                Some((tag, row)) if tag.len() == 1 && tag.chars().all(|c| c.is_ascii_digit()) => {
                    let t: usize = tag.parse().unwrap_or(0);
                    let header = row.starts_with("| weights") || row.starts_with("|---");
                    if !header || !sections[t].contains(row) {
                        sections[t].push_str(row);
                        sections[t].push('\n');
                    }
                }
                _ => println!("{line}"),
            }
        }
        let status = child.wait().expect("child process");
        if !status.success() {
            println!("{name}: failed ({status})");
        }
    }
    for s in &sections {
        println!("\n{s}");
    }
    if !stages.contains("mask") {
        return;
    }
    let out = Command::new(&exe)
        .args(["--child", "mask", "--model"])
        .arg(&path)
        .output()
        .expect("child process");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        println!(
            "mask: failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Stores the process's thread settings as [`candle_thread_env`] gives them for `format` as it
/// resolves on the CPU (what a program does at the top of its `main`).
fn set_threads(format: Engine, fast: &NativeOptions) {
    let options = LocalOptions::default()
        .engine(resolve_engine(format, &Device::Cpu))
        .native_options(*fast);
    for (key, value) in candle_thread_env(&options) {
        if std::env::var_os(key).is_none() {
            std::env::set_var(key, value);
        }
    }
}

fn messages(doc: &str) -> Vec<Message> {
    PromptParts::for_contract::<Guidance>().messages(doc).0
}

/// One constrained (or free) generation of `doc`, timed from the mask's creation.
fn extract(
    backend: &LocalBackend,
    engine: &Arc<MaskEngine>,
    doc: &str,
    constrained: bool,
) -> (f64, Output) {
    let t = Instant::now();
    let msgs = messages(doc);
    let out = if constrained {
        let mut mask = engine.mask(&Guidance::grammar()).expect("mask");
        backend
            .generate(&msgs, MAX_TOKENS, &Sampling::default(), Some(&mut mask))
            .expect("generate")
    } else {
        backend
            .generate(&msgs, MAX_TOKENS, &Sampling::default(), None)
            .expect("generate")
    };
    if constrained {
        if let Err(e) = Guidance::from_json(&out.text) {
            // Printed, not fatal: a figure run reports what it saw.
            println!("INVALID constrained output ({e}): {:?}", out.text);
        }
    }
    (t.elapsed().as_secs_f64(), out)
}

#[derive(Default)]
struct E2e {
    secs: Vec<f64>,
    calls: Vec<f64>,
    tokens: Vec<f64>,
    forced: Vec<f64>,
    prompt: Vec<f64>,
    decode_tps: Vec<f64>,
    prefill_ms: Vec<f64>,
}

impl E2e {
    fn push(&mut self, secs: f64, o: &Output) {
        self.secs.push(secs);
        self.calls.push(o.forward_calls as f64);
        self.tokens.push(o.tokens.len() as f64);
        self.forced.push(o.forced_tokens as f64);
        self.prompt
            .push((o.prompt_tokens - o.reused_prefix_tokens) as f64);
        self.prefill_ms.push(o.prefill_ms);
        if o.decode_ms > 0.0 {
            self.decode_tps
                .push(o.tokens.len() as f64 / (o.decode_ms / 1e3));
        }
    }
}

fn run_e2e(
    backend: &LocalBackend,
    engine: &Arc<MaskEngine>,
    constrained: bool,
    warm_prefix: bool,
    runs: usize,
) -> E2e {
    let mut e = E2e::default();
    for _ in 0..runs {
        for doc in RELEASES {
            if !warm_prefix {
                backend.clear_prefix_cache();
            }
            let (s, o) = extract(backend, engine, doc, constrained);
            e.push(s, &o);
        }
    }
    e
}

fn format_child(path: &std::path::Path, name: &str, label_name: &str) {
    let (format, fast) = format_of(name);
    set_threads(format, &fast);
    let e2e_runs = env_usize("E2E_RUNS", 2);
    let stages = std::env::var("STAGES").unwrap_or_else(|_| "raw,e2e,mask".into());

    let mut label = label_name.to_string();
    if stages.contains("raw") {
        label = raw_stage(path, label_name, format, fast);
    }
    if !stages.contains("e2e") {
        return;
    }
    // Extractions.
    let backend = LocalBackend::with_options(
        path,
        LocalOptions::default().engine(format).native_options(fast),
    )
    .expect("backend");
    let tok = backend.tokenizer().clone();
    let engine = MaskEngine::cached(tok.json().as_bytes(), tok.stop_tokens()).expect("engine");
    // Warm-up: builds the grammar and caches the system prefix.
    let _ = extract(&backend, &engine, RELEASES[0], true);
    let warm = run_e2e(&backend, &engine, true, true, e2e_runs);
    let cold = run_e2e(&backend, &engine, true, false, 1);
    let _ = extract(&backend, &engine, RELEASES[0], false);
    let free = run_e2e(&backend, &engine, false, true, 1);
    drop(backend);
    let no_ff_backend = LocalBackend::with_options(
        path,
        LocalOptions::default()
            .engine(format)
            .native_options(fast)
            .fast_forward(false),
    )
    .expect("backend");
    let _ = extract(&no_ff_backend, &engine, RELEASES[0], true);
    let no_ff = run_e2e(&no_ff_backend, &engine, true, true, 1);
    drop(no_ff_backend);
    let peak = status_mib("VmHWM:");

    println!("1|| weights | s / extraction, mask, prefix cached | same, no prefix cache | s / generation, no mask | s / extraction, mask, no fast-forward | peak RSS MiB |");
    println!("1||---|---|---|---|---|---|");
    println!(
        "1|| {label} | {:.3} | {:.3} | {:.3} | {:.3} | {peak:.0} |",
        mean(&warm.secs),
        mean(&cold.secs),
        mean(&free.secs),
        mean(&no_ff.secs)
    );
    println!("2|| weights | prompt tokens prefilled (prefix cached / not) | prefill ms (cached / not) | tokens generated (forced) | forward calls (fast-forward on / off) | decode-loop tok/s with mask | same, no mask (tokens) |");
    println!("2||---|---|---|---|---|---|---|");
    println!(
        "2|| {label} | {:.0} / {:.0} | {:.0} / {:.0} | {:.1} ({:.1}) | {:.1} / {:.1} | {:.1} | {:.1} ({:.0}) |",
        mean(&warm.prompt),
        mean(&cold.prompt),
        mean(&warm.prefill_ms),
        mean(&cold.prefill_ms),
        mean(&warm.tokens),
        mean(&warm.forced),
        mean(&warm.calls),
        mean(&no_ff.calls),
        median(warm.decode_tps),
        median(free.decode_tps),
        mean(&free.tokens)
    );
}

/// Time per step of the contract's mask and of llguidance alone, replaying constrained outputs.
fn mask_child(path: &std::path::Path) {
    set_threads(Engine::Auto, &NativeOptions::default());
    let runs = env_usize("MASK_RUNS", 20);
    let backend = LocalBackend::with_options(path, LocalOptions::default()).expect("backend");
    let tok = backend.tokenizer().clone();
    let engine = MaskEngine::cached(tok.json().as_bytes(), tok.stop_tokens()).expect("engine");
    let outputs: Vec<Vec<u32>> = RELEASES
        .iter()
        .map(|doc| extract(&backend, &engine, doc, true).1.tokens)
        .collect();
    // Grounded: `GroundedGuidance` on the same releases, each under its own document's mask.
    let grounded = GroundedGuidance::grammar();
    let grounded_outputs: Vec<(Source, Vec<u32>)> = RELEASES
        .iter()
        .map(|doc| {
            let source = Source::from_text(doc);
            let mut mask = engine
                .grounded_mask(&grounded, &source)
                .expect("grounded mask");
            let msgs = PromptParts::for_contract::<GroundedGuidance>()
                .messages(doc)
                .0;
            let out = backend
                .generate(&msgs, MAX_TOKENS, &Sampling::default(), Some(&mut mask))
                .expect("generate");
            (source, out.tokens)
        })
        .collect();
    drop(backend);
    let grammar = Guidance::grammar();

    // llguidance alone: a prototype matcher cloned per generation, as the contract's mask does.
    let mut factory = ParserFactory::new_simple(engine.tok_env()).expect("factory");
    factory.quiet();
    let parser = factory
        .create_parser(TopLevelGrammar::from_json_schema(grammar.schema()))
        .expect("parser");
    let proto = Matcher::new(Ok(parser));

    let mut direct = Vec::new();
    let mut ours = Vec::new();
    let mut ours_no_rules = Vec::new();
    let mut filter = Vec::new();
    for run in 0..runs + 1 {
        for toks in &outputs {
            let mut m = proto.clone();
            let mut t_direct = Vec::new();
            for &t in toks {
                let s = Instant::now();
                let v = m.compute_mask().expect("mask");
                t_direct.push(s.elapsed().as_nanos() as u64);
                assert!(v.is_allowed(t), "llguidance refuses its own output");
                m.consume_tokens(&[t]).expect("consume");
            }
            // The steps are timed without the mask's own timing (as the decode loop runs it);
            // a third pass with it times the rule filter alone.
            for (rules, timed) in [(true, false), (false, false), (true, true)] {
                let mut cm = engine.mask(&grammar).expect("mask").with_timing(timed);
                if !rules {
                    cm = cm.without_rules();
                }
                let mut times = Vec::new();
                for &t in toks {
                    let s = Instant::now();
                    let bits = cm.allowed_tokens().expect("mask");
                    times.push(s.elapsed().as_nanos() as u64);
                    assert!(bits[t as usize / 32] & (1 << (t % 32)) != 0);
                    cm.consume(&[t]).expect("consume");
                }
                if run > 0 {
                    match (rules, timed) {
                        (true, false) => ours.extend(times),
                        (false, _) => ours_no_rules.extend(times),
                        (true, true) => filter.extend_from_slice(&cm.stats().filter_ns),
                    }
                }
            }
            if run > 0 {
                direct.extend(t_direct);
            }
        }
    }
    let steps: usize = outputs.iter().map(Vec::len).sum();
    println!(
        "mask per step, µs ({} steps per pass over {} outputs, {runs} passes after a warm-up):",
        steps,
        outputs.len()
    );
    println!("| | p50 µs | p99 µs | p50 / llguidance | p99 / llguidance |");
    println!("|---|---|---|---|---|");
    let (d50, d99) = (percentile_us(&direct, 50.0), percentile_us(&direct, 99.0));
    println!("| llguidance `Matcher::compute_mask` alone | {d50:.1} | {d99:.1} | 1.00 | 1.00 |");
    for (name, xs) in [
        ("contract mask, no rule filter", &ours_no_rules),
        ("contract mask with the rule filter", &ours),
    ] {
        let (p50, p99) = (percentile_us(xs, 50.0), percentile_us(xs, 99.0));
        println!(
            "| {name} | {p50:.1} | {p99:.1} | {:.2} | {:.2} |",
            p50 / d50,
            p99 / d99
        );
    }
    println!(
        "| the rule filter alone | {:.1} | {:.1} | | |",
        percentile_us(&filter, 50.0),
        percentile_us(&filter, 99.0)
    );

    // Grounded masks: llguidance's own `compute_mask` on the segment's composed grammar, timed
    // inside each step, against the whole step; the segments' grammars are built and compiled
    // when a segment ends (in `consume`), timed apart.
    let (mut g_llg, mut g_step, mut g_compile) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs + 1 {
        for (source, toks) in &grounded_outputs {
            // Whole steps untimed inside, then llguidance's share with the mask's timing on.
            for timed in [false, true] {
                let mut cm = engine
                    .grounded_mask(&grounded, source)
                    .expect("grounded mask")
                    .with_timing(timed);
                let mut times = Vec::new();
                for &t in toks {
                    let s = Instant::now();
                    let bits = cm.allowed_tokens().expect("mask");
                    times.push(s.elapsed().as_nanos() as u64);
                    assert!(bits[t as usize / 32] & (1 << (t % 32)) != 0);
                    cm.consume(&[t]).expect("consume");
                }
                if run > 0 && timed {
                    g_llg.extend_from_slice(&cm.stats().llg_ns);
                    g_compile.extend_from_slice(&cm.stats().compile_ns);
                } else if run > 0 {
                    g_step.extend(times);
                }
            }
        }
    }
    let g_steps: usize = grounded_outputs.iter().map(|(_, t)| t.len()).sum();
    println!(
        "\ngrounded mask per step, µs (`GroundedGuidance`, {g_steps} steps per pass over {} \
         outputs, {runs} passes after a warm-up):",
        grounded_outputs.len()
    );
    println!("| | p50 µs | p99 µs | p50 / llguidance | p99 / llguidance |");
    println!("|---|---|---|---|---|");
    let (l50, l99) = (percentile_us(&g_llg, 50.0), percentile_us(&g_llg, 99.0));
    println!("| llguidance `compute_mask` on the segment's grammar, inside the step | {l50:.1} | {l99:.1} | 1.00 | 1.00 |");
    let (p50, p99) = (percentile_us(&g_step, 50.0), percentile_us(&g_step, 99.0));
    println!(
        "| grounded contract mask, whole step | {p50:.1} | {p99:.1} | {:.2} | {:.2} |",
        p50 / l50,
        p99 / l99
    );
    println!(
        "| segment grammar built and compiled ({} per pass) | {:.1} | {:.1} | | |",
        g_compile.len() / runs.max(1),
        percentile_us(&g_compile, 50.0),
        percentile_us(&g_compile, 99.0)
    );
}

/// Prefill, decode, multi-token calls and perplexity of the bare model; returns the row label.
fn raw_stage(path: &std::path::Path, name: &str, format: Engine, fast: NativeOptions) -> String {
    let prefill = env_usize("PREFILL", 256);
    let decode = env_usize("DECODE", 64);
    let runs = env_usize("RUNS", 3);
    // Raw model speed.
    let t = Instant::now();
    let mut model = {
        let mut file = std::fs::File::open(path).expect("open");
        let ct = gguf_tokenizer::read_content(path).expect("gguf");
        Model::from_content_with(ct, &mut file, format, &Device::Cpu, fast).expect("load")
    };
    let load_s = t.elapsed().as_secs_f64();
    let rss_load = status_mib("VmRSS:");
    let label = match model.native_weights() {
        Some((bytes, o)) => format!(
            "{name} ({}{}, {} threads, {:.0} MiB weights)",
            if o.uses_own_kernel() {
                "own int8 kernel"
            } else {
                "Candle kernels"
            },
            if o.pads() { ", padded to 256" } else { "" },
            std::env::var("CANDLE_NUM_THREADS").unwrap_or_default(),
            bytes as f64 / (1 << 20) as f64
        ),
        _ => name.to_string(),
    };
    let prompt: Vec<u32> = (0..prefill as u32)
        .map(|i| 100 + (i * 7919) % 20000)
        .collect();
    // Warm-up: Candle packs some weights on first use.
    model
        .forward(&prompt[..16.min(prompt.len())], 0)
        .expect("warm-up");
    model.feed(&[300]).expect("warm-up");
    let (mut pre, mut dec, mut r4, mut r16) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        let mut logits = model.forward(&prompt, 0).expect("prefill");
        pre.push(prefill as f64 / t.elapsed().as_secs_f64());
        let snap = model.snapshot();
        let t = Instant::now();
        for _ in 0..decode {
            let next = contract_backends::local::sample::argmax(&logits).unwrap_or(0);
            logits = model.feed(&[next]).expect("decode");
        }
        let per_token = t.elapsed().as_secs_f64() / decode as f64;
        dec.push(1.0 / per_token);
        if let Some(snap) = snap {
            for (n, out) in [(4usize, &mut r4), (16, &mut r16)] {
                let mut m = snap.snapshot().expect("snapshot");
                let toks: Vec<u32> = (0..n as u32).map(|i| 300 + i).collect();
                let t = Instant::now();
                m.feed(&toks).expect("feed");
                out.push(t.elapsed().as_secs_f64() / per_token);
            }
        }
    }
    // Accuracy: perplexity of a fixed text (the contract's system message and the releases),
    // fed one token at a time.
    let ppl_tokens = env_usize("PPL_TOKENS", 160);
    let ppl = {
        let ct = gguf_tokenizer::read_content(path).expect("gguf");
        let tok = gguf_tokenizer::GgufTokenizer::from_content(&ct).expect("tokenizer");
        let text = format!(
            "{}\n\n{}",
            contract_core::prompt::system_message::<Guidance>(),
            RELEASES.join("\n\n")
        );
        let ids = tok.encode(&text).expect("encode");
        let ids = &ids[..ids.len().min(ppl_tokens + 1)];
        let mut nll = 0.0f64;
        let mut logits = model.forward(&ids[..1], 0).expect("forward");
        for w in ids.windows(2) {
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let lse = max
                + logits
                    .iter()
                    .map(|&l| (l as f64 - max).exp())
                    .sum::<f64>()
                    .ln();
            nll += lse - logits[w[1] as usize] as f64;
            logits = model.feed(&[w[1]]).expect("forward");
        }
        (nll / (ids.len() - 1) as f64).exp()
    };
    drop(model);
    let r = |v: Vec<f64>| {
        if v.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}", median(v))
        }
    };
    println!("0|| weights | load s | RSS after load MiB | prefill tok/s ({prefill} tokens) | decode tok/s ({decode} tokens after them) | forward(4) / forward(1) | forward(16) / forward(1) | perplexity ({ppl_tokens} tokens) |");
    println!("0||---|---|---|---|---|---|---|---|");
    println!(
        "0|| {label} | {load_s:.2} | {rss_load:.0} | {:.0} | {:.1} | {} | {} | {ppl:.3} |",
        median(pre),
        median(dec),
        r(r4),
        r(r16)
    );

    label
}
