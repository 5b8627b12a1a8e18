//! The Rust side of `scripts/device_check.sh`: the local backend's logits on the CPU and on a
//! GPU, compared, one `name: value` a line.
//!
//! ```text
//! device_check --device cuda:0                          # two tiny seeded models, made in memory
//! device_check --device cuda:0 --model smollm2.gguf     # and a real one, with greedy generations
//! ```
//!
//! The device runs what [`Engine::Auto`] picks there (on a GPU [`Engine::CandleOps`], this
//! crate's batching forward pass in Candle's tensor operations) and candle-transformers' model
//! with the weights as stored; the CPU runs candle-transformers' model with the same weights,
//! and the reference is the CPU with the weights dequantised to f32 (the file's numbers, f32
//! arithmetic). The device's logits must stay within [`TOLERANCE`] of the logits' scale from
//! the reference: the bound the CPU engines are held to in the test suite. The CPU's own
//! distance from the reference, and the device's from the CPU, are printed beside it. Then one
//! batched forward call on the device (sequences at different positions) against the same
//! sequences run alone there, and with a real model the batched decoding speed (tokens/s for
//! 1, 8 and 32 sequences a call). Exit status: 0 when every comparison holds, 1 when one does
//! not, 2 on an error (no GPU, a model that does not load).

use std::io::Cursor;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Tensor;
use clap::Parser;
use contract_backends::local::sample::SplitMix64;
use contract_backends::local::{
    parse_device, BatchItem, Device, Engine, LocalBackend, LocalError, LocalOptions, Model,
    WeightFormat,
};
use contract_core::extract::Sampling;
use contract_core::prompt::Message;

/// The largest difference accepted between the device's logits and the f32 reference, as a
/// fraction of the reference's largest logit magnitude: the bound the test suite puts on the
/// native engine against the same reference (`the_native_engine_matches_the_reference_model`),
/// the noise of 8-bit activations, which Candle's quantized matmuls use on the CPU and the GPU
/// alike (with different block sizes).
const TOLERANCE: f32 = 0.05;

/// Compares the local backend's logits on the CPU and on a GPU.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// The device to check against the CPU (`cuda:0`; with `cpu` the "device" side is the
    /// native engine, which is what `Engine::Auto` picks there).
    #[arg(long, default_value = "cuda:0")]
    device: String,
    /// A llama or qwen2 GGUF file to compare as well (logits, then greedy generations).
    #[arg(long)]
    model: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            println!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<bool, LocalError> {
    let device = parse_device(&args.device)?;
    println!("device: {}", args.device);
    println!("tolerance (of the logits' scale): {TOLERANCE}");
    let mut ok = true;
    for (name, arch, dtype) in [
        ("tiny-llama-q4_1", "llama", GgmlDType::Q4_1),
        ("tiny-qwen2-q4_k", "qwen2", GgmlDType::Q4K),
    ] {
        let gguf = tiny_gguf(arch, dtype)?;
        let load = |engine: Engine, device: &Device| {
            let mut reader = Cursor::new(gguf.as_slice());
            let ct = Content::read(&mut reader).map_err(LocalError::from)?;
            Model::from_content(ct, &mut reader, engine, device)
        };
        ok &= compare_logits(name, &load, &device)?;
        if name == "tiny-llama-q4_1" && !device.is_cpu() {
            // The native engine is CPU-only: a clear error, not a panic.
            match load(Engine::Native, &device) {
                Err(e @ LocalError::Device(_)) => println!("native engine on the device: {e}"),
                Err(e) => {
                    println!("native engine on the device: unexpected error: {e}");
                    ok = false;
                }
                Ok(_) => {
                    println!("native engine on the device: loaded (expected a refusal)");
                    ok = false;
                }
            }
        }
    }
    if let Some(path) = &args.model {
        let name = path
            .file_stem()
            .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
        let load = |engine: Engine, device: &Device| Model::load(path, engine, device);
        ok &= compare_logits(&name, &load, &device)?;
        ok &= compare_generations(&name, path, &device)?;
        batched_speed(&name, &load, &device)?;
    }
    println!("logits agree: {}", if ok { "yes" } else { "no" });
    Ok(ok)
}

/// Logits of a prompt (one call), three single tokens, then four tokens in one call: prefill,
/// single-token and multi-token kernels alike.
fn trace(m: &mut Model) -> Result<Vec<Vec<f32>>, LocalError> {
    let vocab = m.vocab_size().max(1) as u32;
    let prompt: Vec<u32> = (0..40).map(|i| (i * 37 + 100) % vocab).collect();
    let mut out = vec![m.forward(&prompt, 0)?];
    for t in [500, 9, 3001] {
        out.push(m.feed(&[t % vocab])?);
    }
    out.push(m.feed(&[600 % vocab, 601 % vocab, 2048 % vocab, 2])?);
    Ok(out)
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn argmax(l: &[f32]) -> Option<usize> {
    l.iter()
        .enumerate()
        .filter(|(_, x)| x.is_finite())
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
}

/// Prints the comparison of one model's logits; whether it holds.
fn compare_logits(
    name: &str,
    load: &dyn Fn(Engine, &Device) -> Result<Model, LocalError>,
    device: &Device,
) -> Result<bool, LocalError> {
    let reference = trace(&mut load(Engine::Candle(WeightFormat::F32), &Device::Cpu)?)?;
    let cpu = trace(&mut load(
        Engine::Candle(WeightFormat::AsStored),
        &Device::Cpu,
    )?)?;
    let scale = reference
        .iter()
        .flatten()
        .map(|x| x.abs())
        .fold(0.0, f32::max);
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(LocalError::State(format!(
            "{name}: the reference logits are degenerate"
        )));
    }
    let worst = |a: &[Vec<f32>], b: &[Vec<f32>]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| max_diff(x, y) / scale)
            .fold(0.0, f32::max)
    };
    println!("{name} logits scale: {scale:.3}");
    println!(
        "{name} max diff cpu as stored vs f32 reference (of scale): {:.2e}",
        worst(&cpu, &reference)
    );
    let mut ok = true;
    for engine in [Engine::Auto, Engine::Candle(WeightFormat::AsStored)] {
        let t = Instant::now();
        let mut on_device = load(engine, device)?;
        let load_s = t.elapsed().as_secs_f64();
        let dev = trace(&mut on_device)?;
        let label = format!("{name} {}", engine_name(on_device.engine()));
        let device_error = worst(&dev, &reference);
        let argmax_agree = cpu
            .iter()
            .zip(&dev)
            .filter(|(a, b)| argmax(a) == argmax(b))
            .count();
        let held = device_error <= TOLERANCE && dev.iter().flatten().all(|x| x.is_finite());
        println!("{label} load s: {load_s:.2}");
        println!("{label} max diff device vs f32 reference (of scale): {device_error:.2e}");
        println!(
            "{label} max diff device vs cpu as stored (of scale): {:.2e}",
            worst(&dev, &cpu)
        );
        println!(
            "{label} argmax agree device vs cpu: {argmax_agree}/{}",
            cpu.len()
        );
        println!(
            "{label} within tolerance: {}",
            if held { "yes" } else { "no" }
        );
        ok &= held;
        if on_device.batches() {
            // The same sequences on the CPU with the same engine, for the noise of each side.
            let mut cpu_base = load(on_device.engine(), &Device::Cpu)?;
            trace(&mut cpu_base)?;
            ok &= compare_batch(&label, &on_device, &cpu_base, scale)?;
        }
    }
    Ok(ok)
}

/// The engine's name in the printed lines (no spaces).
fn engine_name(engine: Engine) -> String {
    match engine {
        Engine::Candle(format) => format!("candle-transformers-{format:?}"),
        other => format!("{other:?}"),
    }
}

/// One batched forward call on the device (four sequences at different positions: a prompt, a
/// decode step, a few forced tokens; 12 rows, past the 8 up to which Candle's CUDA matmul takes
/// its one-row kernel) against each sequence alone on the device; whether the logits agree
/// within [`TOLERANCE`] of `scale`. Both are also compared with the sequences run alone on
/// `cpu_base` (the same engine and state on the CPU), to tell which side the kernels' noise is on.
fn compare_batch(
    label: &str,
    base: &Model,
    cpu_base: &Model,
    scale: f32,
) -> Result<bool, LocalError> {
    let vocab = base.vocab_size().max(1) as u32;
    let seqs: Vec<Vec<u32>> = [
        &[5u32, 17, 300, 2][..],
        &[9],
        &[44, 45],
        &[1000, 7, 7, 7, 12],
    ]
    .iter()
    .map(|s| s.iter().map(|t| t % vocab).collect())
    .collect();
    let mut alone = Vec::new();
    let mut batched = Vec::new();
    let mut on_cpu = Vec::new();
    for (i, seq) in seqs.iter().enumerate() {
        let mut c = cpu_base
            .snapshot()
            .ok_or_else(|| LocalError::State(format!("{label}: no snapshot on the CPU")))?;
        let mut m = base
            .snapshot()
            .ok_or_else(|| LocalError::State(format!("{label}: no snapshot")))?;
        let head: Vec<u32> = (0..i as u32 * 3).map(|t| (100 + t) % vocab).collect();
        if !head.is_empty() {
            m.feed(&head)?;
            c.feed(&head)?;
        }
        on_cpu.push(c.feed(seq)?);
        batched.push(
            m.snapshot()
                .ok_or_else(|| LocalError::State(format!("{label}: no snapshot")))?,
        );
        alone.push(m);
    }
    let expected: Vec<Vec<f32>> = alone
        .iter_mut()
        .zip(&seqs)
        .map(|(m, s)| m.feed(s))
        .collect::<Result<_, _>>()?;
    let mut items: Vec<BatchItem<'_>> = batched
        .iter_mut()
        .zip(&seqs)
        .map(|(model, s)| BatchItem {
            model,
            tokens: s,
            allowed: None,
        })
        .collect();
    let got = Model::forward_batch(&mut items)?;
    drop(items);
    let diff = got
        .iter()
        .zip(&expected)
        .map(|(a, b)| max_diff(a, b) / scale)
        .fold(0.0, f32::max);
    let argmax_agree = got
        .iter()
        .zip(&expected)
        .filter(|(a, b)| argmax(a) == argmax(b))
        .count();
    // The caches too: one more lone step on each side.
    let next = alone
        .iter_mut()
        .zip(batched.iter_mut())
        .map(|(a, b)| Ok(max_diff(&a.feed(&[42 % vocab])?, &b.feed(&[42 % vocab])?) / scale))
        .collect::<Result<Vec<f32>, LocalError>>()?
        .into_iter()
        .fold(0.0, f32::max);
    let worst = |a: &[Vec<f32>]| {
        a.iter()
            .zip(&on_cpu)
            .map(|(x, y)| max_diff(x, y) / scale)
            .fold(0.0, f32::max)
    };
    println!(
        "{label} batched vs cpu alone max diff (of scale): {:.2e}",
        worst(&got)
    );
    println!(
        "{label} alone vs cpu alone max diff (of scale): {:.2e}",
        worst(&expected)
    );
    let held = diff <= TOLERANCE && next <= TOLERANCE;
    println!("{label} batched vs alone max diff (of scale): {diff:.2e}");
    println!("{label} batched vs alone next step max diff (of scale): {next:.2e}");
    println!(
        "{label} batched vs alone argmax agree: {argmax_agree}/{}",
        seqs.len()
    );
    println!(
        "{label} batched within tolerance: {}",
        if held { "yes" } else { "no" }
    );
    Ok(held)
}

/// Decoding speed of [`Engine::Auto`] on the device with 1, 8 and 32 sequences a forward call
/// (each after its own 64-token prompt, greedy, 32 steps timed after 2 of warm-up): the figure
/// batching is for.
fn batched_speed(
    name: &str,
    load: &dyn Fn(Engine, &Device) -> Result<Model, LocalError>,
    device: &Device,
) -> Result<(), LocalError> {
    let base = load(Engine::Auto, device)?;
    if !base.batches() {
        println!("{name} batched decode: the engine does not batch");
        return Ok(());
    }
    let vocab = base.vocab_size().max(1) as u32;
    for batch in [1usize, 8, 32] {
        let mut models = Vec::with_capacity(batch);
        let mut next = Vec::with_capacity(batch);
        for b in 0..batch {
            let mut m = base
                .snapshot()
                .ok_or_else(|| LocalError::State(format!("{name}: no snapshot")))?;
            let prompt: Vec<u32> = (0..64)
                .map(|i| (i * 37 + 100 + b as u32 * 11) % vocab)
                .collect();
            let logits = m.forward(&prompt, 0)?;
            next.push(argmax(&logits).unwrap_or(0) as u32);
            models.push(m);
        }
        let (warm, timed) = (2, 32);
        let mut t = Instant::now();
        for step in 0..warm + timed {
            if step == warm {
                t = Instant::now();
            }
            let tokens: Vec<[u32; 1]> = next.iter().map(|&t| [t]).collect();
            let mut items: Vec<BatchItem<'_>> = models
                .iter_mut()
                .zip(&tokens)
                .map(|(model, t)| BatchItem {
                    model,
                    tokens: t,
                    allowed: None,
                })
                .collect();
            let logits = Model::forward_batch(&mut items)?;
            next = logits
                .iter()
                .map(|l| argmax(l).unwrap_or(0) as u32)
                .collect();
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{name} batched decode tokens/s, {batch} a call: {:.1}",
            (batch * timed) as f64 / secs
        );
        println!(
            "{name} batched decode ms per call, {batch} a call: {:.2}",
            secs * 1e3 / timed as f64
        );
    }
    Ok(())
}

/// Greedy generations of a real model on both sides, and their speed: the backend end to end
/// (chat template, tokenizer, the decode loop) with the model on the device.
fn compare_generations(
    name: &str,
    path: &std::path::Path,
    device: &Device,
) -> Result<bool, LocalError> {
    let options = LocalOptions::default().engine(Engine::Candle(WeightFormat::AsStored));
    let cpu = LocalBackend::with_options(path, options.clone())?;
    let gpu = LocalBackend::with_options(path, LocalOptions::default().device(device.clone()))?;
    let greedy = Sampling::default();
    let mut ok = true;
    let mut same_total = 0;
    let mut n_total = 0;
    for prompt in [
        "What is the capital of France? Answer in one word.",
        "Name three primary colours.",
        "Complete: The quick brown fox",
    ] {
        let msgs = vec![Message::user(prompt)];
        let a = cpu.generate(&msgs, 24, &greedy, None)?;
        let b = gpu.generate(&msgs, 24, &greedy, None)?;
        let same = a
            .tokens
            .iter()
            .zip(&b.tokens)
            .take_while(|(x, y)| x == y)
            .count();
        // The bound of the CPU engines' own agreement test: the first 8 greedy tokens.
        ok &= same >= a.tokens.len().min(8);
        same_total += same;
        n_total += a.tokens.len();
    }
    println!("{name} greedy tokens agree: {same_total}/{n_total}");
    // Decode speed on the device: one unconstrained generation of 64 tokens after a warm-up.
    let msgs = vec![Message::user(
        "Write a short story about a lighthouse keeper.",
    )];
    gpu.generate(&msgs, 8, &greedy, None)?;
    let out = gpu.generate(&msgs, 64, &greedy, None)?;
    if out.decode_ms > 0.0 {
        println!(
            "{name} decode tokens/s on the device: {:.1}",
            out.tokens.len() as f64 / (out.decode_ms / 1e3)
        );
    }
    println!(
        "{name} prompt of {} tokens ms: {:.1}",
        out.prompt_tokens, out.prefill_ms
    );
    println!(
        "{name} greedy generations agree: {}",
        if ok { "yes" } else { "no" }
    );
    Ok(ok)
}

/// A 2-layer model of `arch` (hidden 256, vocabulary 4096) with weights from a seeded generator,
/// its matrices in `dtype`, as GGUF bytes: no file, nothing to carry to the GPU machine.
fn tiny_gguf(arch: &str, dtype: GgmlDType) -> Result<Vec<u8>, LocalError> {
    const HIDDEN: usize = 256;
    const FF: usize = 512;
    const LAYERS: usize = 2;
    const HEADS: usize = 4;
    const KV_HEADS: usize = 2;
    const VOCAB: usize = 4096;
    let mut md: Vec<(String, Value)> =
        vec![("general.architecture".into(), Value::String(arch.into()))];
    for (k, v) in [
        ("block_count", Value::U32(LAYERS as u32)),
        ("context_length", Value::U32(512)),
        ("embedding_length", Value::U32(HIDDEN as u32)),
        ("feed_forward_length", Value::U32(FF as u32)),
        ("attention.head_count", Value::U32(HEADS as u32)),
        ("attention.head_count_kv", Value::U32(KV_HEADS as u32)),
        ("rope.dimension_count", Value::U32((HIDDEN / HEADS) as u32)),
        ("attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("rope.freq_base", Value::F32(10000.0)),
        ("vocab_size", Value::U32(VOCAB as u32)),
    ] {
        md.push((format!("{arch}.{k}"), v));
    }
    let cpu = Device::Cpu;
    let mut rng = SplitMix64(20261201);
    let mut tensor = |dims: &[usize], scale: f32, dtype: GgmlDType| {
        let n: usize = dims.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| (rng.next_f64() as f32 * 2.0 - 1.0) * scale)
            .collect();
        QTensor::quantize(&Tensor::from_vec(data, dims, &cpu)?, dtype)
    };
    let kv = HIDDEN / HEADS * KV_HEADS;
    let f32 = GgmlDType::F32;
    let mut tensors: Vec<(String, QTensor)> = vec![
        (
            "token_embd.weight".into(),
            tensor(&[VOCAB, HIDDEN], 1.0, GgmlDType::Q8_0)?,
        ),
        (
            "output_norm.weight".into(),
            QTensor::quantize(&Tensor::ones(HIDDEN, candle_core::DType::F32, &cpu)?, f32)?,
        ),
    ];
    for l in 0..LAYERS {
        let p = format!("blk.{l}");
        for norm in ["attn_norm", "ffn_norm"] {
            let ones = Tensor::ones(HIDDEN, candle_core::DType::F32, &cpu)?;
            tensors.push((format!("{p}.{norm}.weight"), QTensor::quantize(&ones, f32)?));
        }
        for (m, rows, cols) in [
            ("attn_q", HIDDEN, HIDDEN),
            ("attn_k", kv, HIDDEN),
            ("attn_v", kv, HIDDEN),
            ("attn_output", HIDDEN, HIDDEN),
            ("ffn_gate", FF, HIDDEN),
            ("ffn_up", FF, HIDDEN),
            ("ffn_down", HIDDEN, FF),
        ] {
            tensors.push((
                format!("{p}.{m}.weight"),
                tensor(&[rows, cols], 0.2, dtype)?,
            ));
        }
        if arch == "qwen2" {
            for (m, n) in [("attn_q", HIDDEN), ("attn_k", kv), ("attn_v", kv)] {
                tensors.push((format!("{p}.{m}.bias"), tensor(&[n], 0.1, f32)?));
            }
        }
    }
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &md_refs, &t_refs)?;
    Ok(out.into_inner())
}
