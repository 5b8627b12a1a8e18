//! The decode loop on a tiny llama with seeded weights and the real SmolLM2 tokenizer (its
//! metadata copied from the fetched GGUF), plus one short run of the real SmolLM2.

#![cfg(feature = "local")]

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use contract_backends::local::gguf_tokenizer::read_content;
use contract_backends::local::sample::SplitMix64;
use contract_backends::local::NativeOptions;
use contract_backends::local::{
    fetch, Allowed, BatchItem, Engine, LocalBackend, LocalError, LocalOptions, Model, TokenMask,
    WeightFormat,
};
use contract_core::extract::{Backend, Constraint, Decoding, FinishReason, Request, Sampling};
use contract_core::prompt::{Message, Messages};

const HIDDEN: usize = 64;
const FF: usize = 128;
const LAYERS: usize = 2;
const HEADS: u32 = 4;
const KV_HEADS: u32 = 2;

fn real_model() -> PathBuf {
    fetch::fetch_default_model(&fetch::cache_dir().unwrap()).unwrap()
}

/// A 2-layer llama (hidden 64) with weights from a seeded generator and the SmolLM2 vocabulary.
fn tiny_model() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| write_tiny("llama")).clone()
}

/// The same in the qwen2 architecture (with q/k/v biases).
fn tiny_qwen2() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| write_tiny("qwen2")).clone()
}

/// A qwen2 stored as Qwen2.5's Q4_K_M file stores most of its matrices: q/k/v/o/gate/up in
/// Q5_0, down in Q4_K (so its feed-forward width is [`FF_K`], a multiple of Q4_K's 256-value
/// blocks).
fn tiny_qwen2_k() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| write_tiny("qwen2-k")).clone()
}

/// The feed-forward width of [`tiny_qwen2_k`].
const FF_K: usize = 256;

/// `variant` is an architecture, or `qwen2-k` for [`tiny_qwen2_k`].
fn write_tiny(variant: &str) -> PathBuf {
    let (arch, q, down, ff) = match variant {
        "qwen2-k" => ("qwen2", GgmlDType::Q5_0, GgmlDType::Q4K, FF_K),
        arch => (arch, GgmlDType::Q4_1, GgmlDType::Q4_1, FF),
    };
    let real = read_content(&real_model()).unwrap();
    let vocab = 49152usize;
    let mut md: Vec<(String, Value)> = real
        .metadata
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    md.push(("general.architecture".into(), Value::String(arch.into())));
    for (k, v) in [
        ("block_count", Value::U32(LAYERS as u32)),
        ("context_length", Value::U32(1024)),
        ("embedding_length", Value::U32(HIDDEN as u32)),
        ("feed_forward_length", Value::U32(ff as u32)),
        ("attention.head_count", Value::U32(HEADS)),
        ("attention.head_count_kv", Value::U32(KV_HEADS)),
        ("rope.dimension_count", Value::U32(HIDDEN as u32 / HEADS)),
        ("attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("rope.freq_base", Value::F32(10000.0)),
        ("vocab_size", Value::U32(vocab as u32)),
    ] {
        md.push((format!("{arch}.{k}"), v));
    }

    let mut rng = SplitMix64(20241130);
    let mut tensor = |dims: &[usize], scale: f32, dtype: GgmlDType| {
        let n: usize = dims.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| (rng.next_f64() as f32 * 2.0 - 1.0) * scale)
            .collect();
        QTensor::quantize(&Tensor::from_vec(data, dims, &Device::Cpu).unwrap(), dtype).unwrap()
    };
    let kv = HIDDEN / HEADS as usize * KV_HEADS as usize;
    let ones = |n: usize| {
        let t = Tensor::ones(n, candle_core::DType::F32, &Device::Cpu).unwrap();
        QTensor::quantize(&t, GgmlDType::F32).unwrap()
    };
    let mut tensors: Vec<(String, QTensor)> = vec![
        (
            "token_embd.weight".into(),
            tensor(&[vocab, HIDDEN], 1.0, GgmlDType::Q8_0),
        ),
        ("output_norm.weight".into(), ones(HIDDEN)),
    ];
    for l in 0..LAYERS {
        let p = format!("blk.{l}");
        tensors.push((format!("{p}.attn_norm.weight"), ones(HIDDEN)));
        tensors.push((format!("{p}.ffn_norm.weight"), ones(HIDDEN)));
        tensors.push((
            format!("{p}.attn_q.weight"),
            tensor(&[HIDDEN, HIDDEN], 0.2, q),
        ));
        tensors.push((format!("{p}.attn_k.weight"), tensor(&[kv, HIDDEN], 0.2, q)));
        tensors.push((format!("{p}.attn_v.weight"), tensor(&[kv, HIDDEN], 0.2, q)));
        tensors.push((
            format!("{p}.attn_output.weight"),
            tensor(&[HIDDEN, HIDDEN], 0.2, q),
        ));
        tensors.push((
            format!("{p}.ffn_gate.weight"),
            tensor(&[ff, HIDDEN], 0.2, q),
        ));
        tensors.push((format!("{p}.ffn_up.weight"), tensor(&[ff, HIDDEN], 0.2, q)));
        tensors.push((
            format!("{p}.ffn_down.weight"),
            tensor(&[HIDDEN, ff], 0.2, down),
        ));
        if arch == "qwen2" {
            let f32 = GgmlDType::F32;
            tensors.push((format!("{p}.attn_q.bias"), tensor(&[HIDDEN], 0.1, f32)));
            tensors.push((format!("{p}.attn_k.bias"), tensor(&[kv], 0.1, f32)));
            tensors.push((format!("{p}.attn_v.bias"), tensor(&[kv], 0.1, f32)));
        }
    }
    // One file per architecture, shared by test runs: written under a unique name, then renamed.
    let dir = std::env::temp_dir().join("contract-local-model");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("tiny-{variant}-v1.gguf"));
    let partial = dir.join(format!("tiny-{variant}-v1.gguf.{}", std::process::id()));
    let mut f = std::fs::File::create(&partial).unwrap();
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut f, &md_refs, &t_refs).unwrap();
    drop(f);
    std::fs::rename(&partial, &path).unwrap();
    path
}

fn tiny(options: LocalOptions) -> LocalBackend {
    LocalBackend::with_options(tiny_model(), options).unwrap()
}

fn messages(user: &str) -> Vec<Message> {
    vec![
        Message::system("Extract the fields as JSON."),
        Message::user(user),
    ]
}

/// A mask that allows exactly one token sequence, with the tokens at `free` positions sampled
/// (allowed alone) and every other token forced.
struct ScriptMask {
    target: Vec<u32>,
    free: HashSet<usize>,
    pos: usize,
    fast_forward: bool,
    bits: Vec<u32>,
    consumed: Vec<u32>,
}

impl ScriptMask {
    fn new(target: Vec<u32>, free: impl IntoIterator<Item = usize>, fast_forward: bool) -> Self {
        ScriptMask {
            target,
            free: free.into_iter().collect(),
            pos: 0,
            fast_forward,
            bits: vec![0; 49152 / 32],
            consumed: Vec::new(),
        }
    }
}

impl TokenMask for ScriptMask {
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError> {
        self.bits.iter_mut().for_each(|w| *w = 0);
        let t = self.target[self.pos] as usize;
        self.bits[t / 32] |= 1 << (t % 32);
        Ok(Allowed::Bits(&self.bits))
    }
    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        if !self.fast_forward {
            return Ok(Vec::new());
        }
        let end = (self.pos..self.target.len())
            .find(|i| self.free.contains(i))
            .unwrap_or(self.target.len());
        Ok(self.target[self.pos..end].to_vec())
    }
    fn consume(&mut self, tokens: &[u32]) -> Result<(), LocalError> {
        for &t in tokens {
            if self.target.get(self.pos) != Some(&t) {
                return Err(LocalError::Mask(format!(
                    "unexpected token {t} at {}",
                    self.pos
                )));
            }
            self.pos += 1;
        }
        self.consumed.extend_from_slice(tokens);
        Ok(())
    }
    fn is_done(&self) -> bool {
        self.pos == self.target.len()
    }
}

#[test]
fn greedy_decoding_is_deterministic_and_bounded() {
    let b = tiny(LocalOptions::default().prefix_cache(false));
    let g = Sampling::default();
    let one = b
        .generate(&messages("Total: 12 EUR"), 12, &g, None)
        .unwrap();
    let two = b
        .generate(&messages("Total: 12 EUR"), 12, &g, None)
        .unwrap();
    assert_eq!(
        (&one.tokens, &one.text, one.finish_reason),
        (&two.tokens, &two.text, two.finish_reason)
    );
    assert!(one.tokens.len() <= 12);
    if one.finish_reason == FinishReason::Length {
        assert_eq!(one.tokens.len(), 12);
        // One prompt call, then one per generated token but the last.
        assert_eq!(one.forward_calls, 12);
    }
    assert!(!one
        .tokens
        .iter()
        .any(|t| b.tokenizer().stop_tokens().contains(t)));
}

#[test]
fn mask_forces_the_output_and_fast_forward_saves_calls() {
    let b = tiny(LocalOptions::default().prefix_cache(false));
    let target = b
        .tokenizer()
        .encode("{\"name\": \"Ana\", \"total\": 12}")
        .unwrap();
    assert!(target.len() > 8);
    let free = [3usize, 7];
    let g = Sampling::default();

    let mut slow = ScriptMask::new(target.clone(), free, false);
    let a = b
        .generate(&messages("Ana paid 12."), 64, &g, Some(&mut slow))
        .unwrap();
    let mut fast = ScriptMask::new(target.clone(), free, true);
    let c = b
        .generate(&messages("Ana paid 12."), 64, &g, Some(&mut fast))
        .unwrap();

    for out in [&a, &c] {
        assert_eq!(out.tokens, target);
        assert_eq!(out.text, "{\"name\": \"Ana\", \"total\": 12}");
        assert_eq!(out.finish_reason, FinishReason::Stop);
    }
    assert_eq!(slow.consumed, target);
    assert_eq!(fast.consumed, target);
    // Without fast-forward: the prompt, then one call per token but the last.
    assert_eq!(a.forward_calls as usize, 1 + target.len() - 1);
    assert_eq!(a.forced_tokens, 0);
    // With it: the prompt with the forced head, then one call per sampled token but the last.
    assert_eq!(c.forward_calls as usize, 1 + free.len() - 1);
    assert_eq!(c.forced_tokens as usize, target.len() - free.len());
}

#[test]
fn max_tokens_cuts_a_masked_output() {
    let b = tiny(LocalOptions::default());
    let target = b
        .tokenizer()
        .encode("{\"name\": \"Ana\", \"total\": 12}")
        .unwrap();
    let mut m = ScriptMask::new(target.clone(), [3usize], true);
    let out = b
        .generate(&messages("x"), 5, &Sampling::default(), Some(&mut m))
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Length);
    assert_eq!(out.tokens, target[..5]);
}

struct EmptyMask;
impl TokenMask for EmptyMask {
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError> {
        Ok(Allowed::Bits(&[]))
    }
    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        Ok(Vec::new())
    }
    fn consume(&mut self, _: &[u32]) -> Result<(), LocalError> {
        Ok(())
    }
    fn is_done(&self) -> bool {
        false
    }
}

#[test]
fn an_empty_mask_is_an_error() {
    let b = tiny(LocalOptions::default());
    let err = b
        .generate(
            &messages("x"),
            8,
            &Sampling::default(),
            Some(&mut EmptyMask),
        )
        .unwrap_err();
    assert!(matches!(err, LocalError::Mask(_)), "{err}");
}

/// Allows only the stop token `<|im_end|>`.
struct StopMask(Vec<u32>, usize);
impl TokenMask for StopMask {
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError> {
        self.0 = vec![0; 2];
        self.0[0] = 1 << 2;
        Ok(Allowed::Bits(&self.0))
    }
    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        Ok(Vec::new())
    }
    fn consume(&mut self, t: &[u32]) -> Result<(), LocalError> {
        self.1 += t.len();
        Ok(())
    }
    fn is_done(&self) -> bool {
        false
    }
}

#[test]
fn a_stop_token_ends_without_being_consumed() {
    let b = tiny(LocalOptions::default().prefix_cache(false));
    let mut m = StopMask(Vec::new(), 0);
    let out = b
        .generate(&messages("x"), 8, &Sampling::default(), Some(&mut m))
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert!(out.tokens.is_empty());
    assert_eq!(out.text, "");
    assert_eq!(m.1, 0);
    assert_eq!(out.forward_calls, 1);
}

#[test]
fn the_system_prefix_is_computed_once_and_changes_nothing() {
    let cached = tiny(LocalOptions::default());
    let plain = tiny(LocalOptions::default().prefix_cache(false));
    let g = Sampling::default();
    let docs = ["Invoice 1: 30 EUR", "Invoice 2: 45 USD", "Invoice 3: none"];
    let mut reused = Vec::new();
    for doc in docs {
        let a = cached.generate(&messages(doc), 6, &g, None).unwrap();
        let b = plain.generate(&messages(doc), 6, &g, None).unwrap();
        assert_eq!(a.tokens, b.tokens, "{doc}");
        reused.push(a.reused_prefix_tokens);
        assert_eq!(b.reused_prefix_tokens, 0);
    }
    assert_eq!(reused[0], 0);
    assert!(reused[1] > 0 && reused[1] == reused[2], "{reused:?}");
}

#[test]
fn fed_together_or_one_by_one_the_logits_agree() {
    for format in [Engine::Candle(WeightFormat::AsStored), Engine::Native] {
        fed_together_or_one_by_one(format);
    }
}

fn fed_together_or_one_by_one(format: Engine) {
    let path = tiny_model();
    let mut m = Model::load(&path, format, &Device::Cpu).unwrap();
    let prompt: Vec<u32> = (100..140).collect();
    let extra = [500u32, 501, 502, 503];
    m.forward(&prompt, 0).unwrap();
    let mut one = m.snapshot().unwrap();
    let together = m.feed(&extra).unwrap();
    let mut last = Vec::new();
    for t in extra {
        last = one.feed(&[t]).unwrap();
    }
    assert_eq!(m.pos(), one.pos());
    let diff = together
        .iter()
        .zip(&last)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(diff < 1e-3, "max difference {diff}");
    // Rewinding needs a snapshot.
    assert!(m.forward(&[1], 3).is_err());
}

#[test]
fn weight_formats_load_and_agree_roughly() {
    let path = tiny_model();
    let prompt: Vec<u32> = (100..120).collect();
    let base = Model::load(&path, Engine::Candle(WeightFormat::AsStored), &Device::Cpu)
        .unwrap()
        .forward(&prompt, 0)
        .unwrap();
    for format in [
        Engine::Candle(WeightFormat::F32),
        Engine::Candle(WeightFormat::Q8_0),
        Engine::Native,
    ] {
        let other = Model::load(&path, format, &Device::Cpu)
            .unwrap()
            .forward(&prompt, 0)
            .unwrap();
        assert_eq!(other.len(), base.len());
        let diff = base
            .iter()
            .zip(&other)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(diff < 0.5, "{format:?}: max difference {diff}");
    }
}

#[test]
fn seeded_sampling_is_reproducible() {
    let b = tiny(LocalOptions::default());
    let s = |seed| Sampling {
        temperature: Some(1.5),
        top_p: Some(0.95),
        seed: Some(seed),
    };
    let a1 = b.generate(&messages("x"), 8, &s(1), None).unwrap();
    let a2 = b.generate(&messages("x"), 8, &s(1), None).unwrap();
    let c = b.generate(&messages("x"), 8, &s(2), None).unwrap();
    assert_eq!(a1.tokens, a2.tokens);
    assert_ne!(a1.tokens, c.tokens);
}

#[test]
fn qwen2_as_stored_decodes_without_prefix_snapshots() {
    let opts = LocalOptions::default().engine(Engine::Candle(WeightFormat::AsStored));
    let cached = LocalBackend::with_options(tiny_qwen2(), opts.clone()).unwrap();
    let plain = LocalBackend::with_options(tiny_qwen2(), opts.prefix_cache(false)).unwrap();
    let g = Sampling::default();
    for doc in ["Invoice 1: 30 EUR", "Invoice 2: 45 USD"] {
        let a = cached.generate(&messages(doc), 6, &g, None).unwrap();
        let b = plain.generate(&messages(doc), 6, &g, None).unwrap();
        assert_eq!(a.tokens, b.tokens);
        assert_eq!(a.reused_prefix_tokens, 0);
        assert!(!a.tokens.is_empty());
    }
    let m = Model::load(
        &tiny_qwen2(),
        Engine::Candle(WeightFormat::Q8_0),
        &Device::Cpu,
    )
    .unwrap();
    assert_eq!(m.arch(), contract_backends::local::model::Arch::Qwen2);
    assert!(m.snapshot().is_none());
}

#[test]
fn qwen2_reuses_the_prefix_with_the_native_engine() {
    let cached = LocalBackend::with_options(tiny_qwen2(), LocalOptions::default()).unwrap();
    let plain =
        LocalBackend::with_options(tiny_qwen2(), LocalOptions::default().prefix_cache(false))
            .unwrap();
    let g = Sampling::default();
    let mut reused = Vec::new();
    for doc in ["Invoice 1: 30 EUR", "Invoice 2: 45 USD", "Invoice 3: none"] {
        let a = cached.generate(&messages(doc), 6, &g, None).unwrap();
        let b = plain.generate(&messages(doc), 6, &g, None).unwrap();
        assert_eq!(a.tokens, b.tokens, "{doc}");
        assert!(!a.tokens.is_empty());
        reused.push(a.reused_prefix_tokens);
    }
    assert_eq!(reused[0], 0);
    assert!(reused[1] > 0 && reused[1] == reused[2], "{reused:?}");
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn max_abs(a: &[f32]) -> f32 {
    a.iter().map(|x| x.abs()).fold(0.0, f32::max)
}

/// Logits of a prompt (one call), three single tokens, then four tokens in one call.
fn logit_trace(m: &mut Model) -> Vec<Vec<f32>> {
    let prompt: Vec<u32> = (100..140).chain([7, 3000, 42]).collect();
    let mut out = vec![m.forward(&prompt, 0).unwrap()];
    for t in [500u32, 9, 17000] {
        out.push(m.feed(&[t]).unwrap());
    }
    out.push(m.feed(&[600, 601, 48000, 2]).unwrap());
    out
}

/// The native engine against candle-transformers' model with f32 weights (the file's numbers):
/// exact up to rounding when the native engine's matrices and KV cache are f32 too (padded or
/// not), within the f16 rounding of the cache with f32 matrices and an f16 cache, within the
/// noise of int8 activations (and of Q8_0 weights where re-quantized) otherwise; prefill, single
/// tokens and a multi-token call alike.
#[test]
fn the_native_engine_matches_the_reference_model() {
    for (arch, path) in [
        ("llama", tiny_model()),
        ("qwen2", tiny_qwen2()),
        ("qwen2 Q5_0/Q4_K", tiny_qwen2_k()),
    ] {
        let reference = logit_trace(
            &mut Model::load(&path, Engine::Candle(WeightFormat::F32), &Device::Cpu).unwrap(),
        );
        let scale = reference.iter().map(|l| max_abs(l)).fold(0.0, f32::max);
        assert!(scale > 0.5, "{arch}: degenerate logits");
        let f32_opts = NativeOptions::default().dtype(GgmlDType::F32);
        for (name, opts, tolerance) in [
            ("f32", f32_opts.pad(false), 1e-4),
            ("f32 padded", f32_opts.pad(true), 1e-4),
            // Only the cache's rounding to f16 (11 significant bits) between the two.
            ("f32, f16 cache", f32_opts.kv_f16(true), 2e-3),
            (
                "own kernels, 4-bit as stored, f16 cache",
                NativeOptions::default().own_kernel(true).kv_f16(true),
                0.05,
            ),
            (
                "own kernels, 4-bit as stored",
                NativeOptions::default().own_kernel(true),
                0.05,
            ),
            (
                "own kernels, re-quantized to Q8_0",
                NativeOptions::default().own_kernel(true).keep_4bit(false),
                0.05,
            ),
            (
                "Candle's kernels, Q8_0",
                NativeOptions::default().own_kernel(false),
                0.05,
            ),
            (
                "Candle's kernels, Q8_0 padded",
                NativeOptions::default().own_kernel(false).pad(true),
                0.05,
            ),
            (
                "with f32 copies for prefill",
                NativeOptions::default().dense_from(8),
                0.05,
            ),
        ] {
            let mut fast = Model::load_with(&path, Engine::Native, &Device::Cpu, opts).unwrap();
            let trace = logit_trace(&mut fast);
            let mut worst = 0f32;
            for (step, (a, b)) in reference.iter().zip(&trace).enumerate() {
                let d = max_diff(a, b) / scale;
                assert!(
                    d < tolerance,
                    "{arch} {name}, call {step}: max difference {d} of the logits' scale {scale}"
                );
                worst = worst.max(d);
            }
            eprintln!("{arch} {name}: max difference {worst:.2e} of the logits' scale {scale:.2}");
        }
    }
}

/// `Engine::CandleOps` (this crate's forward pass in Candle's tensor operations, the engine on a
/// GPU) against candle-transformers' model with the same weights as stored: the same operations
/// and kernels, so the same logits to rounding, on prefill, single tokens and a multi-token
/// call; and the same again after a rewind and after restoring a snapshot.
#[test]
fn the_candle_ops_engine_matches_candle_transformers() {
    for (arch, path) in [
        ("llama", tiny_model()),
        ("qwen2", tiny_qwen2()),
        ("qwen2 Q5_0/Q4_K", tiny_qwen2_k()),
    ] {
        let mut reference =
            Model::load(&path, Engine::Candle(WeightFormat::AsStored), &Device::Cpu).unwrap();
        let expected = logit_trace(&mut reference);
        let scale = expected.iter().map(|l| max_abs(l)).fold(0.0, f32::max);
        assert!(scale > 0.5, "{arch}: degenerate logits");
        let mut ops = Model::load(&path, Engine::CandleOps, &Device::Cpu).unwrap();
        assert_eq!(ops.engine(), Engine::CandleOps);
        assert!(ops.batches() && ops.can_snapshot() && ops.can_rewind());
        let trace = logit_trace(&mut ops);
        for (step, (a, b)) in expected.iter().zip(&trace).enumerate() {
            let d = max_diff(a, b) / scale;
            assert!(
                d < 1e-5,
                "{arch}, call {step}: max difference {d} of {scale}"
            );
        }
        // Rewind past the last call and run it again; restore a snapshot taken mid-way.
        let end = ops.pos();
        ops.rewind(end - 4).unwrap();
        let again = ops.feed(&[600, 601, 48000, 2]).unwrap();
        assert_eq!(&again, trace.last().unwrap(), "{arch}: after a rewind");
        let mut early = Model::load(&path, Engine::CandleOps, &Device::Cpu).unwrap();
        early.forward(&[100, 101, 102], 0).unwrap();
        let snapshot = early.snapshot().unwrap();
        early.feed(&[5, 6, 7]).unwrap();
        let from_snapshot = early.snapshot().unwrap().feed(&[9]).unwrap();
        early.restore_from(&snapshot).unwrap();
        assert_eq!(early.pos(), 3);
        early.feed(&[5, 6, 7]).unwrap();
        assert_eq!(
            early.feed(&[9]).unwrap(),
            from_snapshot,
            "{arch}: after a restore"
        );
        // A token id past the vocabulary is an error that leaves the cache as it was.
        let pos = early.pos();
        let err = early.feed(&[u32::MAX]).unwrap_err().to_string();
        assert!(err.contains("outside the model's"), "{arch}: {err}");
        assert_eq!(early.pos(), pos);
        early.feed(&[9]).unwrap();
    }
}

#[test]
fn native_snapshots_restore_the_cache() {
    for path in [tiny_model(), tiny_qwen2()] {
        let mut m = Model::load(&path, Engine::Native, &Device::Cpu).unwrap();
        let prompt: Vec<u32> = (200..230).collect();
        m.forward(&prompt, 0).unwrap();
        let snap = m.snapshot().unwrap();
        let a = m.feed(&[5, 6, 7]).unwrap();
        assert_eq!(m.pos(), 33);
        m.restore_from(&snap).unwrap();
        assert_eq!(m.pos(), 30);
        let b = m.feed(&[8]).unwrap();
        // The same from scratch.
        let mut fresh = Model::load(&path, Engine::Native, &Device::Cpu).unwrap();
        let b2 = fresh
            .forward(&[prompt.clone(), vec![8]].concat(), 0)
            .unwrap();
        assert!(
            max_diff(&b, &b2) < 1e-3 * max_abs(&b2),
            "{}",
            max_diff(&b, &b2)
        );
        let mut other = snap.snapshot().unwrap();
        let a2 = other.feed(&[5, 6, 7]).unwrap();
        assert_eq!(a, a2);
        // A model from another load is refused.
        assert!(fresh.restore_from(&snap).is_err());
    }
}

#[test]
fn unsupported_architectures_are_refused() {
    let dir = std::env::temp_dir().join("contract-local-model");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("gpt2-{}.gguf", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    let arch = Value::String("gpt2".into());
    gguf_file::write(&mut f, &[("general.architecture", &arch)], &[]).unwrap();
    drop(f);
    let err = Model::load(&path, Engine::Candle(WeightFormat::AsStored), &Device::Cpu).unwrap_err();
    let _ = std::fs::remove_file(&path);
    assert!(
        matches!(
            err,
            LocalError::File { path: ref p, ref error }
                if *p == path && matches!(**error, LocalError::UnsupportedArchitecture(ref a) if a == "gpt2")
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn smollm2_answers_a_short_chat() {
    let b =
        LocalBackend::with_options(real_model(), LocalOptions::default().max_tokens(16)).unwrap();
    let req = Request {
        max_tokens: Some(16),
        ..Request::new(
            Arc::new(Constraint::unconstrained("chat")),
            Messages(vec![Message::user(
                "What is the capital of France? Answer in one word.",
            )]),
        )
    };
    let r = b.complete(&req).await.unwrap();
    assert!(!r.text.trim().is_empty());
    let n = r.completion_tokens.unwrap();
    assert!((1..=16).contains(&n));
    match r.finish_reason.unwrap() {
        FinishReason::Stop => assert_eq!(r.forward_calls, Some(n + 1)),
        FinishReason::Length => assert_eq!((n, r.forward_calls), (16, Some(16))),
        other => panic!("{other:?}"),
    }
    assert!(r.text.contains("Paris"), "{:?}", r.text);
}

#[tokio::test(flavor = "current_thread")]
async fn smollm2_under_a_schema_mask_writes_valid_json_with_fewer_calls() {
    let b =
        LocalBackend::with_options(real_model(), LocalOptions::default().max_tokens(48)).unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}, "country": {"enum": ["France", "Spain", "Other"]}},
        "required": ["city", "country"],
        "additionalProperties": false
    });
    let constraint = Constraint {
        decoding: Some(Decoding::JsonSchema(Arc::new(schema))),
        ..Constraint::unconstrained("place")
    };
    let req = Request::new(
        Arc::new(constraint),
        Messages(vec![
            Message::system("Answer with JSON only."),
            Message::user("Where is the Eiffel Tower? Give the city and the country."),
        ]),
    );
    let r = b.complete(&req).await.unwrap();
    assert_eq!(r.finish_reason, Some(FinishReason::Stop), "{:?}", r.text);
    let v: serde_json::Value =
        serde_json::from_str(&r.text).unwrap_or_else(|e| panic!("{e}: {:?}", r.text));
    assert!(v["city"].is_string());
    assert!(
        ["France", "Spain", "Other"].contains(&v["country"].as_str().unwrap()),
        "{v}"
    );
    // Keys and punctuation are forced: fewer forward calls than tokens (+1 for the prompt,
    // +1 for the system prefix computed on this first request).
    let (n, calls) = (r.completion_tokens.unwrap(), r.forward_calls.unwrap());
    assert!(calls < n, "{calls} calls for {n} tokens: {:?}", r.text);
}

/// Greedy generations of the real SmolLM2: the native engine (Q8_0) against candle-transformers'
/// model with f32 weights (the file's weights exactly).
#[test]
fn smollm2_native_and_reference_greedy_generations_agree() {
    let fast =
        LocalBackend::with_options(real_model(), LocalOptions::default().engine(Engine::Native))
            .unwrap();
    let reference = LocalBackend::with_options(
        real_model(),
        LocalOptions::default().engine(Engine::Candle(WeightFormat::F32)),
    )
    .unwrap();
    let g = Sampling::default();
    let mut agreed = Vec::new();
    for prompt in [
        "What is the capital of France? Answer in one word.",
        "Name three primary colours.",
        "Complete: The quick brown fox",
    ] {
        let msgs = vec![Message::user(prompt)];
        let a = fast.generate(&msgs, 24, &g, None).unwrap();
        let b = reference.generate(&msgs, 24, &g, None).unwrap();
        let same = a
            .tokens
            .iter()
            .zip(&b.tokens)
            .take_while(|(x, y)| x == y)
            .count();
        eprintln!(
            "{prompt:?}: {same} of {} tokens agree\n  fast: {:?}\n  reference: {:?}",
            b.tokens.len(),
            a.text,
            b.text
        );
        agreed.push((same, b.tokens.len()));
    }
    for (same, n) in agreed {
        assert!(
            same >= n.min(8),
            "only the first {same} of {n} greedy tokens agree"
        );
    }
}

/// A masked forward call: the allowed tokens' logits as in the full call, the others -inf; the
/// fast model computes only the allowed rows of the output matrix when they are few.
#[test]
fn masked_forward_calls_keep_the_allowed_logits() {
    for (format, path) in [
        (Engine::Native, tiny_model()),
        (Engine::Native, tiny_qwen2()),
        (Engine::Candle(WeightFormat::AsStored), tiny_model()),
    ] {
        let mut m = Model::load(&path, format, &Device::Cpu).unwrap();
        let prompt: Vec<u32> = (300..340).collect();
        m.forward(&prompt, 0).unwrap();
        let snap = m
            .snapshot()
            .unwrap_or_else(|| panic!("{format:?}: no snapshot"));
        let full = m.feed(&[7, 8]).unwrap();
        for allowed_ids in [
            vec![5u32, 17, 300, 48000, 49151],
            (0..49152).step_by(2).collect(),
        ] {
            let mut bits = vec![0u32; 49152 / 32];
            for &t in &allowed_ids {
                bits[t as usize / 32] |= 1 << (t % 32);
            }
            let mut m2 = snap.snapshot().unwrap();
            let pos = m2.pos();
            let masked = m2.forward_masked(&[7, 8], pos, Some(&bits)).unwrap();
            assert_eq!(masked.len(), full.len());
            let scale = max_abs(&full);
            for (t, (&a, &b)) in full.iter().zip(&masked).enumerate() {
                if bits[t / 32] & (1 << (t % 32)) != 0 {
                    assert!(
                        (a - b).abs() <= 1e-4 * scale,
                        "{format:?} token {t}: {a} vs {b}"
                    );
                } else {
                    assert_eq!(b, f32::NEG_INFINITY, "{format:?} token {t}");
                }
            }
        }
    }
}

/// `score_continuations`: each continuation starts from the prompt (the order they come in
/// changes nothing), the prefix cache changes nothing, and the real model prefers the right
/// answer.
#[test]
fn smollm2_scores_continuations_from_the_prompt() {
    let cached = LocalBackend::new(real_model()).unwrap();
    let uncached =
        LocalBackend::with_options(real_model(), LocalOptions::default().prefix_cache(false))
            .unwrap();
    let msgs = vec![
        Message::system("Answer in one word."),
        Message::user("What is the capital of France?"),
    ];
    let options = ["Paris", "London", "Paris is the capital of France."];
    let a = cached.score_continuations(&msgs, &options).unwrap();
    let mut reversed = options;
    reversed.reverse();
    let b = cached.score_continuations(&msgs, &reversed).unwrap();
    let c = uncached.score_continuations(&msgs, &options).unwrap();
    eprintln!("{a:?}\n{b:?}\n{c:?}");
    for (i, &lp) in a.logprobs.iter().enumerate() {
        assert!(lp.is_finite() && lp < 0.0, "{lp}");
        assert!((lp - b.logprobs[2 - i]).abs() < 1e-3, "{a:?} {b:?}");
        assert!((lp - c.logprobs[i]).abs() < 1e-3, "{a:?} {c:?}");
    }
    assert!(a.tokens[2] > 1, "{a:?}");
    // A longer continuation adds tokens, each with a log-probability below 0.
    assert!(a.logprobs[2] < a.logprobs[0], "{a:?}");
    assert_eq!(a.best(), Some(0), "{a:?}");
    // The first prompt computed and cached the system prefix; the second reused the whole
    // prompt but its last token (the same prompt), the uncached backend nothing.
    assert!(a.forward_calls > b.forward_calls, "{a:?} {b:?}");
    assert_eq!(b.reused_tokens, b.prompt_tokens - 1, "{b:?}");
    assert_eq!(c.reused_tokens, 0, "{c:?}");
    // Another question after the same system message shares the template's head: reused, and
    // the scores are those of a backend that computes everything.
    let other = vec![
        Message::system("Answer in one word."),
        Message::user("What is the capital of Spain?"),
    ];
    let d = cached
        .score_continuations(&other, &["Madrid", "Paris"])
        .unwrap();
    let e = uncached
        .score_continuations(&other, &["Madrid", "Paris"])
        .unwrap();
    assert!(
        d.reused_tokens > 0 && d.reused_tokens < d.prompt_tokens,
        "{d:?}"
    );
    for (x, y) in d.logprobs.iter().zip(&e.logprobs) {
        assert!((x - y).abs() < 1e-3, "{d:?} {e:?}");
    }
    assert_eq!(d.best(), Some(0), "{d:?}");

    // The greedy first token of a generation is the most likely single token.
    let out = cached
        .generate(&msgs, 1, &Sampling::default(), None)
        .unwrap();
    let first = out.text.clone();
    let s = cached
        .score_continuations(&msgs, &[first.as_str(), "London", "Berlin"])
        .unwrap();
    if s.tokens[0] == 1 {
        assert_eq!(s.best(), Some(0), "{first:?} {s:?}");
    }
}

/// Without snapshots (candle-transformers' qwen2), continuations of several tokens recompute
/// the prompt and score the same in any order.
#[test]
fn scores_without_snapshots_recompute_the_prompt() {
    let b = LocalBackend::with_options(
        tiny_qwen2(),
        LocalOptions::default().engine(Engine::Candle(WeightFormat::AsStored)),
    )
    .unwrap();
    let msgs = vec![Message::user("hello there")];
    let x = b
        .score_continuations(&msgs, &["one two three", "four five"])
        .unwrap();
    let y = b
        .score_continuations(&msgs, &["four five", "one two three"])
        .unwrap();
    assert!((x.logprobs[0] - y.logprobs[1]).abs() < 1e-3, "{x:?} {y:?}");
    assert!((x.logprobs[1] - y.logprobs[0]).abs() < 1e-3, "{x:?} {y:?}");
    let calls = x.tokens.iter().map(|&t| t - 1).sum::<usize>() as u32;
    // The prompt once, then one call per token but the last of each, and the prompt again
    // before the second continuation.
    assert_eq!(x.forward_calls, 1 + calls + 1, "{x:?}");
    assert!(b.score_continuations(&msgs, &[]).unwrap().best().is_none());
}

/// `score_prompts`: on the engines that batch (native, Candle's operations) the trie and
/// batched calls give each prompt's `score_continuations` scores in fewer calls (answers of
/// several tokens, one a prefix of another, included); without snapshots it scores one prompt
/// at a time, the same as alone.
#[test]
fn score_prompts_gives_each_prompts_scores() {
    let prompts: Vec<Messages> = ["hello there", "hello there, again", "goodbye"]
        .iter()
        .map(|u| Messages(vec![Message::user(*u)]))
        .collect();
    let answers = ["one two three", "one two", "four", ""];
    for engine in [
        Engine::Native,
        Engine::CandleOps,
        Engine::Candle(WeightFormat::AsStored),
    ] {
        let b = LocalBackend::with_options(tiny_qwen2(), LocalOptions::default().engine(engine))
            .unwrap();
        let batched = b.score_prompts(&prompts, &answers).unwrap();
        let mut calls = 0;
        for (p, row) in prompts.iter().zip(&batched.logprobs) {
            let alone = b.score_continuations(&p.0, &answers).unwrap();
            calls += alone.forward_calls;
            for (x, y) in row.iter().zip(&alone.logprobs) {
                assert!((x - y).abs() < 1e-4, "{engine:?}: {row:?} {alone:?}");
            }
            assert_eq!(row[3], 0.0);
            assert!(row[0] < row[1], "{row:?}");
        }
        if engine != Engine::Candle(WeightFormat::AsStored) {
            assert!(batched.forward_calls < calls, "{batched:?} {calls}");
            assert!(batched.fed_tokens < batched.prompt_tokens, "{batched:?}");
        } else {
            assert_eq!(batched.logprobs.len(), 3);
        }
    }
}

/// The weights summary names the stored formats the native engine re-quantised at load.
#[test]
fn the_weights_summary_names_what_was_requantised() {
    let kept = tiny(LocalOptions::default().engine(Engine::Native)).weights_summary();
    let converted = tiny(
        LocalOptions::default()
            .engine(Engine::Native)
            .native_options(NativeOptions::default().keep_4bit(false)),
    )
    .weights_summary();
    eprintln!("{kept}\n{converted}");
    // Each layer's q, k, v, output, gate, up and down matrices, stored as Q4_1.
    let count = format!("Q4_1 ({} matrices)", LAYERS * 7);
    if NativeOptions::default().uses_own_kernel() {
        assert!(converted.contains(&count), "{converted}");
        assert!(converted.contains("re-quantised to Q8_0"), "{converted}");
        assert!(!kept.contains("Q4_1"), "{kept}");
    }
    // Q5_0 and Q4_K are taken as stored too.
    let k = LocalBackend::with_options(
        tiny_qwen2_k(),
        LocalOptions::default().engine(Engine::Native),
    )
    .unwrap()
    .weights_summary();
    if NativeOptions::default().uses_own_kernel() {
        assert!(k.ends_with("weights as stored"), "{k}");
    }
    let reference =
        tiny(LocalOptions::default().engine(Engine::Candle(WeightFormat::F32))).weights_summary();
    assert!(reference.contains("F32"), "{reference}");
}

/// Allows, at step `n`, the tokens whose id is `n` modulo 3 (the stop tokens too, when they
/// are), for `steps` steps; then it is done. The model chooses among thousands of tokens each
/// step, so an output depends on its logits and on the right mask reaching the right step.
struct ModuloMask {
    bits: Vec<u32>,
    step: u32,
    steps: u32,
    consumed: Vec<u32>,
}

impl ModuloMask {
    fn new(steps: u32) -> Self {
        ModuloMask {
            bits: vec![0; 49152 / 32],
            step: 0,
            steps,
            consumed: Vec::new(),
        }
    }
}

impl TokenMask for ModuloMask {
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError> {
        for (w, word) in self.bits.iter_mut().enumerate() {
            *word = (0..32)
                .filter(|b| (w as u32 * 32 + b) % 3 == self.step % 3)
                .fold(0, |acc, b| acc | 1 << b);
        }
        Ok(Allowed::Bits(&self.bits))
    }
    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        Ok(Vec::new())
    }
    fn consume(&mut self, tokens: &[u32]) -> Result<(), LocalError> {
        self.step += tokens.len() as u32;
        self.consumed.extend_from_slice(tokens);
        Ok(())
    }
    fn is_done(&self) -> bool {
        self.step >= self.steps
    }
}

/// The next step's mask computed while the forward call runs on another thread
/// (`overlap_mask`) gives the outputs of the mask computed first, for both engines, greedy and
/// sampled, under a mask that leaves the model a choice among a third of the vocabulary at every
/// step (too many for the native engine to compute only the allowed logits: the same logits
/// either way); and every token is one its step allowed.
#[test]
fn overlapping_the_mask_with_the_forward_pass_changes_no_output() {
    let seeded = Sampling {
        temperature: Some(1.0),
        top_p: Some(0.9),
        seed: Some(7),
    };
    for engine in [
        Engine::Native,
        Engine::CandleOps,
        Engine::Candle(WeightFormat::AsStored),
    ] {
        let options = LocalOptions::default().engine(engine).prefix_cache(false);
        let serial = tiny(options.clone().overlap_mask(false));
        let overlapped = tiny(options.overlap_mask(true));
        for sampling in [Sampling::default(), seeded] {
            let mut outputs = Vec::new();
            for b in [&serial, &overlapped] {
                let mut m = ModuloMask::new(10);
                let out = b
                    .generate(&messages("Ana paid 12."), 16, &sampling, Some(&mut m))
                    .unwrap();
                for (i, &t) in m.consumed.iter().enumerate() {
                    assert_eq!(t % 3, i as u32 % 3, "{engine:?}: token {i} is {t}");
                }
                assert!(out.mask_overlapped_ms <= out.mask_ms, "{out:?}");
                outputs.push(out);
            }
            let (a, b) = (&outputs[0], &outputs[1]);
            assert_eq!(
                (&a.tokens, &a.text, a.finish_reason, a.forward_calls),
                (&b.tokens, &b.text, b.finish_reason, b.forward_calls),
                "{engine:?} {sampling:?}"
            );
            assert_eq!(a.sampled_tokens, b.sampled_tokens);
            // Only the overlapped backend computed masks while a forward call ran.
            assert_eq!(a.mask_overlapped_ms, 0.0, "{engine:?}");
            assert!(b.mask_overlapped_ms > 0.0, "{engine:?}: nothing overlapped");
        }
    }
}

/// The same under the contract's own grammar mask (forced tokens included), on
/// candle-transformers' model, the GPU's engine (the native engine, given the mask first,
/// computes only the allowed logits on steps with few of them: equal to rounding only).
#[tokio::test(flavor = "current_thread")]
async fn overlapping_the_contract_mask_changes_no_reply() {
    let req = Request {
        max_tokens: Some(48),
        ..Request::new(
            Constraint::of::<examples::Guidance>(),
            Messages(messages("Acme expects revenue of $10 to $12 million.")),
        )
    };
    let options = LocalOptions::default().engine(Engine::Candle(WeightFormat::AsStored));
    let a = tiny(options.clone().overlap_mask(false))
        .complete(&req)
        .await
        .unwrap();
    let b = tiny(options.overlap_mask(true))
        .complete(&req)
        .await
        .unwrap();
    assert_eq!(a, b);
    assert!(a.text.starts_with('{'), "{:?}", a.text);
}

/// `decode_stats` adds up the outputs of the generations (not the scoring calls), across
/// clones.
#[test]
fn decode_stats_add_up_the_generations() {
    let b = tiny(LocalOptions::default().prefix_cache(false));
    let clone = b.clone();
    assert_eq!(b.decode_stats().generations, 0);
    let g = Sampling::default();
    let target = b
        .tokenizer()
        .encode("{\"name\": \"Ana\", \"total\": 12}")
        .unwrap();
    let mut m = ScriptMask::new(target.clone(), [3usize, 7], true);
    let one = b.generate(&messages("x"), 64, &g, Some(&mut m)).unwrap();
    let two = clone.generate(&messages("y"), 5, &g, None).unwrap();
    b.score_continuations(&messages("z"), &["yes", "no"])
        .unwrap();
    let s = b.decode_stats();
    assert_eq!(s, clone.decode_stats());
    assert_eq!(s.generations, 2);
    assert_eq!(s.tokens, (one.tokens.len() + two.tokens.len()) as u64);
    assert_eq!(
        s.forward_calls,
        u64::from(one.forward_calls + two.forward_calls)
    );
    // The mask forces all but the two free tokens; without a mask every token is sampled (the
    // limit ends the generation before a sixth is).
    assert_eq!(one.sampled_tokens, 2);
    assert_eq!(one.forced_tokens as usize, target.len() - 2);
    if two.finish_reason == FinishReason::Length {
        assert_eq!(two.sampled_tokens, 5);
    }
    assert_eq!(
        s.sampled_tokens,
        u64::from(one.sampled_tokens + two.sampled_tokens)
    );
    assert_eq!(s.mask_ms, one.mask_ms + two.mask_ms);
    assert_eq!(two.mask_ms, 0.0);
    assert!(one.forward_ms <= one.prefill_ms + one.decode_ms, "{one:?}");
    let (work, exposed) = s.mask_share().unwrap();
    assert!((0.0..=1.0).contains(&work) && exposed == work, "{s:?}");
}

/// Allows every token but the stop tokens and counts the steps it was asked about; at step
/// `pause_at` it says so and waits to be told to go on.
struct NoStop {
    bits: Vec<u32>,
    steps: Arc<AtomicUsize>,
    pause: Option<Pause>,
    pause_at: usize,
}

impl TokenMask for NoStop {
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError> {
        let n = self.steps.fetch_add(1, SeqCst) + 1;
        if n == self.pause_at {
            if let Some((reached, go)) = self.pause.take() {
                let _ = reached.send(());
                let _ = go.recv();
            }
        }
        Ok(Allowed::Bits(&self.bits))
    }
    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        Ok(Vec::new())
    }
    fn consume(&mut self, _: &[u32]) -> Result<(), LocalError> {
        Ok(())
    }
    fn is_done(&self) -> bool {
        false
    }
}

type Pause = (
    tokio::sync::oneshot::Sender<()>,
    std::sync::mpsc::Receiver<()>,
);

/// Hands out [`NoStop`] masks, each with its own step counter (kept, in order); the first one
/// pauses at step 5.
struct NoStopMasks {
    vocab: usize,
    stops: Vec<u32>,
    counters: Mutex<Vec<Arc<AtomicUsize>>>,
    pause: Mutex<Option<Pause>>,
}

impl contract_backends::local::MaskFactory for NoStopMasks {
    fn mask_for(&self, _: &Request) -> Result<Option<Box<dyn TokenMask + Send>>, LocalError> {
        let mut bits = vec![u32::MAX; self.vocab.div_ceil(32)];
        for &t in &self.stops {
            bits[t as usize / 32] &= !(1 << (t % 32));
        }
        let steps = Arc::new(AtomicUsize::new(0));
        self.counters.lock().expect("counters").push(steps.clone());
        let pause = self.pause.lock().expect("pause").take();
        Ok(Some(Box::new(NoStop {
            bits,
            steps,
            pause,
            pause_at: 5,
        })))
    }
}

/// Dropping the future of `complete` (what a timeout around it does) stops the decode at its
/// next step. A generation of 900 tokens that nothing else would end early pauses at its fifth
/// step; the test drops its future there and lets it go on; the next request (which the worker
/// runs only once the first has ended) then finds that the first decode stopped at that step.
/// Nothing depends on the machine's speed: the pause is a handshake, and what is checked is how
/// many steps ran.
/// A backend whose masks never let the decode stop, the first one pausing at its fifth step
/// (`reached` says it got there; it goes on once `go` is sent).
fn paused_backend() -> (
    LocalBackend,
    Arc<NoStopMasks>,
    tokio::sync::oneshot::Receiver<()>,
    std::sync::mpsc::Sender<()>,
) {
    paused_backend_with(LocalOptions::default())
}

fn paused_backend_with(
    options: LocalOptions,
) -> (
    LocalBackend,
    Arc<NoStopMasks>,
    tokio::sync::oneshot::Receiver<()>,
    std::sync::mpsc::Sender<()>,
) {
    let stops = tiny(LocalOptions::default())
        .tokenizer()
        .stop_tokens()
        .to_vec();
    let (reached_tx, reached) = tokio::sync::oneshot::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    let factory = Arc::new(NoStopMasks {
        vocab: 49152,
        stops,
        counters: Mutex::new(Vec::new()),
        pause: Mutex::new(Some((reached_tx, go_rx))),
    });
    let b = tiny(options).with_masks(factory.clone());
    (b, factory, reached, go)
}

/// How many steps each decode of `factory`'s masks ran, in order.
fn steps_run(factory: &NoStopMasks) -> Vec<usize> {
    let counters = factory.counters.lock().expect("counters");
    counters.iter().map(|c| c.load(SeqCst)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_local_completion_cancels_its_decode_at_the_next_step() {
    cancel_at_the_fifth_step(LocalOptions::default()).await;
}

/// The same with the mask computed while the forward call runs on another thread: the step
/// paused in the mask still ends the decode there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_with_the_mask_overlapped_stops_at_the_same_step() {
    cancel_at_the_fifth_step(LocalOptions::default().overlap_mask(true)).await;
}

async fn cancel_at_the_fifth_step(options: LocalOptions) {
    let (b, factory, reached, go) = paused_backend_with(options);
    let constraint = Arc::new(Constraint {
        decoding: Some(Decoding::JsonSchema(Arc::new(serde_json::json!({})))),
        ..Constraint::unconstrained("long")
    });
    let request = |max: u32| Request {
        max_tokens: Some(max),
        ..Request::new(
            constraint.clone(),
            Messages(messages("Write for as long as you can.")),
        )
    };
    let first = request(900);
    tokio::select! {
        r = b.complete(&first) => panic!("the decode of 900 tokens ended first: {r:?}"),
        r = reached => r.expect("the first decode reached its fifth step"),
    }
    // The future is dropped: let the paused step finish.
    go.send(()).expect("the decode waits");
    let second = b.complete(&request(3)).await.expect("second request");
    assert_eq!(second.completion_tokens, Some(3));
    assert_eq!(
        steps_run(&factory),
        [5, 3],
        "the cancelled decode went on past the step it was cancelled at"
    );
}

/// A `tokio::time::timeout` around a local extraction ends it: the extraction of a generation
/// of 900 tokens (which nothing but the limit would end) is paused at its fifth step, so the
/// timeout fires whatever the machine's speed; once let go, the decode stops at its next step
/// instead of running its 900 tokens, and the backend answers the next extraction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_around_a_local_extraction_interrupts_it() {
    use contract_core::Extractor;
    let (b, factory, _reached, go) = paused_backend();
    let extractor = Extractor::<examples::Guidance, _>::new(&b)
        .max_tokens(900)
        .max_attempts(1);
    let doc = "Acme expects third-quarter revenue of $10 to $12 million.";
    let timed = tokio::time::timeout(std::time::Duration::from_secs(2), extractor.extract(doc));
    assert!(timed.await.is_err(), "the paused extraction finished");
    go.send(()).expect("the decode waits");
    let next = Extractor::<examples::Guidance, _>::new(&b)
        .max_tokens(3)
        .max_attempts(1)
        .extract(doc)
        .await;
    assert_eq!(next.attempts.len(), 1, "{next:?}");
    let steps = steps_run(&factory);
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(
        steps[0] <= 5,
        "the timed-out decode ran {} steps after its timeout",
        steps[0]
    );
    assert_eq!(steps[1], 3);
}

/// `Model::forward_batch` on the engines that batch (the native one, and Candle's tensor
/// operations on the CPU): one call for several sequences (a prompt, a decode step, a few
/// forced tokens, each at its own position, one with a mask) gives each sequence the very
/// logits it gets alone, and leaves each cache where a lone call would.
#[test]
fn a_batched_forward_call_gives_each_sequence_its_own_logits() {
    let engines = [Engine::Native, Engine::CandleOps];
    for (engine, path) in engines
        .into_iter()
        .flat_map(|e| [(e, tiny_model()), (e, tiny_qwen2())])
    {
        let base = Model::load(&path, engine, &Device::Cpu).unwrap();
        assert!(base.batches());
        let seqs: [&[u32]; 4] = [&[5, 17, 300, 2], &[9], &[44, 45], &[1000, 7, 7, 7, 12]];
        // Different caches first: sequence i has i * 3 earlier tokens.
        let mut alone: Vec<Model> = Vec::new();
        let mut batched: Vec<Model> = Vec::new();
        for i in 0..seqs.len() {
            let mut m = base.snapshot().unwrap();
            if i > 0 {
                let head: Vec<u32> = (0..i as u32 * 3).map(|t| 100 + t).collect();
                m.feed(&head).unwrap();
            }
            batched.push(m.snapshot().unwrap());
            alone.push(m);
        }
        let mut bits = vec![0u32; 49152 / 32];
        for t in [3u32, 77, 4000, 49151] {
            bits[t as usize / 32] |= 1 << (t % 32);
        }
        let allowed = |i: usize| (i == 1).then_some(bits.as_slice());
        let expected: Vec<Vec<f32>> = alone
            .iter_mut()
            .enumerate()
            .map(|(i, m)| {
                let pos = m.pos();
                m.forward_masked(seqs[i], pos, allowed(i)).unwrap()
            })
            .collect();
        let mut items: Vec<BatchItem<'_>> = batched
            .iter_mut()
            .enumerate()
            .map(|(i, model)| BatchItem {
                model,
                tokens: seqs[i],
                allowed: allowed(i),
            })
            .collect();
        let got = Model::forward_batch(&mut items).unwrap();
        drop(items);
        for i in 0..seqs.len() {
            assert_eq!(got[i], expected[i], "{engine:?} {path:?}: sequence {i}");
            assert_eq!(batched[i].pos(), alone[i].pos());
            // The caches agree too: the next lone step gives the same logits.
            let a = alone[i].feed(&[42]).unwrap();
            let b = batched[i].feed(&[42]).unwrap();
            assert_eq!(a, b, "{engine:?} {path:?}: sequence {i} after the batch");
        }
        // Exactly the allowed logits are finite on the masked sequence.
        let finite: Vec<usize> = (0..got[1].len())
            .filter(|&t| got[1][t].is_finite())
            .collect();
        assert_eq!(finite, [3, 77, 4000, 49151]);
    }
}

/// Requests sent at once decode in one batch (`max_batch`) and each gets the reply it gets when
/// decoded alone: the same text, finish reason, token counts and forward calls. Half of them are
/// constrained by a contract's mask. On both engines that batch (Candle's tensor operations, the
/// engine on a GPU, run here on the CPU), and with the masks computed while the batch's forward
/// call runs, as on a GPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_decode_in_one_batch_as_they_would_alone() {
    for (engine, overlap) in [
        (Engine::Native, false),
        (Engine::CandleOps, false),
        (Engine::CandleOps, true),
    ] {
        concurrent_requests_match_lone_ones(engine, overlap).await;
    }
}

async fn concurrent_requests_match_lone_ones(engine: Engine, overlap: bool) {
    let requests: Vec<Request> = (0..6)
        .map(|i| {
            let text = format!("Acme expects revenue of ${i}0 to ${i}5 million in quarter {i}.");
            let mut req = Request::new(
                Constraint::of::<examples::Guidance>(),
                Messages(messages(&text)),
            );
            req.max_tokens = Some(24 + 4 * i);
            if i % 2 == 1 {
                req.constraint = Arc::new(Constraint {
                    decoding: None,
                    ..(*req.constraint).clone()
                });
            }
            req
        })
        .collect();
    // Each backend first computes the shared system prefix on a request of its own: otherwise
    // whichever request the scheduler starts first pays the prefix's forward call, and that is
    // request 0 alone but any of them at once.
    let options = LocalOptions::default().engine(engine).overlap_mask(overlap);
    let alone = tiny(options.clone().max_batch(1));
    alone.complete(&requests[0]).await.unwrap();
    let mut expected = Vec::new();
    for req in &requests {
        expected.push(alone.complete(req).await.unwrap());
    }
    assert_eq!(alone.decode_stats().batched_calls, 0);
    let batched = tiny(options.max_batch(4));
    batched.complete(&requests[0]).await.unwrap();
    let tasks: Vec<_> = requests
        .iter()
        .map(|r| {
            let (backend, req) = (batched.clone(), r.clone());
            tokio::spawn(async move { backend.complete(&req).await })
        })
        .collect();
    for (i, (task, want)) in tasks.into_iter().zip(&expected).enumerate() {
        let got = task.await.unwrap().unwrap();
        assert_eq!(&got, want, "{engine:?}, overlap {overlap}: request {i}");
    }
    let stats = batched.decode_stats();
    assert!(stats.batched_calls > 0, "{stats:?}");
    assert!(
        stats.batched_requests > stats.batched_calls,
        "batches of two or more: {stats:?}"
    );
    assert_eq!(stats.generations, 7);
    // The masks ran beside the forward calls exactly when asked to.
    assert_eq!(stats.mask_overlapped_ms > 0.0, overlap, "{stats:?}");
}
