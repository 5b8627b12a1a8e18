//! [`Engine::CandleOps`](super::Engine::CandleOps): this crate's forward pass written in Candle's
//! tensor operations, so that it runs on any device Candle has (a CUDA GPU above all), with the
//! file's quantized matrices as stored on the device and multiplied by Candle's kernels for
//! them (`QMatMul`).
//!
//! What candle-transformers' `quantized_llama` / `quantized_qwen2` cannot give, and why this
//! exists: their KV cache lives inside the model and one `forward(input, index_pos)` call takes
//! one position for the whole batch, so sequences at different positions (continuous batching,
//! each request joining and leaving when it likes) cannot share a call; and `quantized_qwen2` is
//! not `Clone`, so it has no snapshots (the shared system prefix is recomputed per request).
//! Here each sequence ([`OpsModel`]) holds its own cache as tensors on the device (a snapshot
//! shares them: Candle's tensors are immutable, appending makes new ones) and [`run_batch`] runs
//! any number of sequences, each with its own tokens and position, in one pass over the
//! weights: the matrix products take all the sequences' rows at once, the rotary embedding
//! takes every row at its own position in one call a layer, attention runs per sequence over its
//! own cache with the queries grouped by the key/value head they share. The operations are those
//! of candle-transformers' models (the same rotary tables, norms, masks and kernels; only the
//! attention's grouping and where 1/sqrt(head_dim) is applied differ), so that on the CPU a
//! sequence's logits are the reference model's to rounding (a test holds them within 1e-5 of
//! the logits' scale).
//!
//! Measured on an H200 (docs/benchmarks.md, "On a GPU"): SmolLM2 decodes 143 tokens/s alone,
//! 341 with 8 sequences a call and 374 with 32; the per-sequence attention (small kernels, each
//! launched from the CPU, about 2.5 ms a sequence a call) is what a call's time grows with.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor};

use super::arch::Arch;
use super::causal_lm::{
    of_engine, only_logits, other_load, run_batch, same_engine, CausalLm, Segment, WeightsId,
};
use super::error::LocalError;
use super::native::Config;

/// One layer's weights on the device.
struct Layer {
    attn_norm: Tensor,
    q: QMatMul,
    k: QMatMul,
    v: QMatMul,
    /// qwen2's q/k/v biases (llama has none).
    bias: Option<[Tensor; 3]>,
    o: QMatMul,
    ffn_norm: Tensor,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
}

/// The model's weights on the device, shared by every sequence of one load.
pub(crate) struct OpsWeights {
    cfg: Config,
    device: Device,
    /// The token embeddings, dequantised to f32 (a row lookup, as candle-transformers does).
    embed: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QMatMul,
    /// Rotary tables, `[context, head_dim / 2]`.
    cos: Tensor,
    sin: Tensor,
    /// llama.cpp's "neox" rotary layout (qwen2: halves), else interleaved pairs (llama).
    neox: bool,
    neg_inf: Tensor,
}

impl OpsWeights {
    /// Reads the weights of `arch` from `ct` onto `device`.
    pub(crate) fn load<R: Read + Seek>(
        ct: &Content,
        reader: &mut R,
        arch: Arch,
        device: &Device,
    ) -> Result<OpsWeights, LocalError> {
        let cfg = Config::from_content(ct, arch, false)?;
        if cfg.rope_dim != cfg.head_dim {
            return Err(LocalError::Gguf(format!(
                "rotary dimension {} is not the head dimension {}: partial rotary embeddings \
                 are not supported by Engine::CandleOps",
                cfg.rope_dim, cfg.head_dim
            )));
        }
        let mut tensor = |name: &str| ct.tensor(reader, name, device);
        let dense = |q: candle_core::quantized::QTensor| q.dequantize(device);
        let embed_q = tensor("token_embd.weight")?;
        let embed = embed_q.dequantize(device)?;
        let norm = dense(tensor("output_norm.weight")?)?;
        let output = if ct.tensor_infos.contains_key("output.weight") {
            QMatMul::from_qtensor(tensor("output.weight")?)?
        } else {
            QMatMul::from_qtensor(embed_q)?
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for l in 0..cfg.n_layer {
            let mut m = |part: &str| -> Result<QMatMul, LocalError> {
                Ok(QMatMul::from_qtensor(tensor(&format!(
                    "blk.{l}.{part}.weight"
                ))?)?)
            };
            let (q, k, v, o) = (m("attn_q")?, m("attn_k")?, m("attn_v")?, m("attn_output")?);
            let (gate, up, down) = (m("ffn_gate")?, m("ffn_up")?, m("ffn_down")?);
            let bias = if ct
                .tensor_infos
                .contains_key(&format!("blk.{l}.attn_q.bias"))
            {
                let mut b = |part: &str| -> Result<Tensor, LocalError> {
                    Ok(dense(tensor(&format!("blk.{l}.{part}.bias"))?)?)
                };
                Some([b("attn_q")?, b("attn_k")?, b("attn_v")?])
            } else {
                None
            };
            layers.push(Layer {
                attn_norm: dense(tensor(&format!("blk.{l}.attn_norm.weight"))?)?,
                q,
                k,
                v,
                bias,
                o,
                ffn_norm: dense(tensor(&format!("blk.{l}.ffn_norm.weight"))?)?,
                gate,
                up,
                down,
            });
        }
        // As candle-transformers' `precomput_freqs_cis`, for every position of the context.
        let theta: Vec<f32> = (0..cfg.head_dim)
            .step_by(2)
            .map(|i| 1f32 / cfg.rope_base.powf(i as f32 / cfg.head_dim as f32))
            .collect();
        let half = theta.len();
        let theta = Tensor::from_vec(theta, (1, half), device)?;
        let positions = Tensor::arange(0, cfg.context as u32, device)?
            .to_dtype(DType::F32)?
            .reshape((cfg.context, 1))?;
        let angles = positions.matmul(&theta)?;
        Ok(OpsWeights {
            neox: arch == Arch::Qwen2,
            cos: angles.cos()?,
            sin: angles.sin()?,
            neg_inf: Tensor::new(f32::NEG_INFINITY, device)?,
            device: device.clone(),
            cfg,
            embed,
            layers,
            norm,
            output,
        })
    }

    /// The positions the rotary tables cover.
    pub(crate) fn context_length(&self) -> usize {
        self.cfg.context
    }

    /// Rotary embeddings on `x`, `[rows, heads, 1, head_dim]`, each row at the angles of its
    /// own position (`cos` and `sin`, `[rows, 1, head_dim / 2]`).
    fn rope(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor, LocalError> {
        let x = x.contiguous()?;
        Ok(if self.neox {
            candle_nn::rotary_emb::rope(&x, cos, sin)?
        } else {
            candle_nn::rotary_emb::rope_i(&x, cos, sin)?
        })
    }
}

/// One layer's cached keys and values, `[kv heads, positions, head dim]` each, rotary applied.
type LayerCache = Option<(Tensor, Tensor)>;

/// One sequence: the shared weights and its own KV cache on the device.
#[derive(Clone)]
pub(crate) struct OpsModel {
    w: Arc<OpsWeights>,
    cache: Vec<LayerCache>,
    len: usize,
}

impl OpsModel {
    pub(crate) fn new(w: Arc<OpsWeights>) -> OpsModel {
        let layers = w.cfg.n_layer;
        OpsModel {
            w,
            cache: vec![None; layers],
            len: 0,
        }
    }

    /// Drops the cached positions from `len` on (a view of the same storage).
    fn truncate(&mut self, len: usize) -> Result<(), LocalError> {
        if len >= self.len {
            return Ok(());
        }
        for c in &mut self.cache {
            *c = match c.take() {
                Some((k, v)) if len > 0 => Some((k.narrow(1, 0, len)?, v.narrow(1, 0, len)?)),
                _ => None,
            };
        }
        self.len = len;
        Ok(())
    }
}

/// This engine's pass over several sequences of one load ([`run_batch`]); the logits come back to
/// the CPU.
fn forward_pass(segments: &mut [Segment<'_>]) -> Result<Vec<Vec<f32>>, LocalError> {
    let mut segments = of_engine::<OpsModel>(segments)?;
    let Some(first) = segments.first() else {
        return Ok(Vec::new());
    };
    let w = Arc::clone(&first.model.w);
    let cfg = &w.cfg;
    let vocab = w.embed.dim(0)?;
    for s in segments.iter() {
        // An id past the embeddings would be read out of bounds on a GPU.
        if let Some(t) = s.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(LocalError::State(format!(
                "token id {t} is outside the model's {vocab} embeddings"
            )));
        }
        if s.pos > s.model.len || s.pos + s.tokens.len() > cfg.context {
            return Err(LocalError::State(format!(
                "forward at position {} with {} tokens: the cache holds {}, the context {}",
                s.pos,
                s.tokens.len(),
                s.model.len,
                cfg.context
            )));
        }
    }
    // The new caches, put in place only when the whole call succeeded (a device error leaves
    // every sequence as it was).
    let mut caches: Vec<Vec<LayerCache>> = segments
        .iter()
        .map(|_| Vec::with_capacity(cfg.n_layer))
        .collect();
    let ids: Vec<u32> = segments
        .iter()
        .flat_map(|s| s.tokens.iter().copied())
        .collect();
    let rows = ids.len();
    let ids = Tensor::from_vec(ids, rows, &w.device)?;
    // [1, rows, hidden]: the rows of every sequence, one after the other.
    let mut x = w.embed.index_select(&ids, 0)?.unsqueeze(0)?;
    let (heads, kv_heads, hd) = (cfg.n_head, cfg.n_kv_head, cfg.head_dim);
    let rep = heads / kv_heads;
    // Each row's rotary angles at its own position, `[rows, 1, head_dim / 2]`: `rope` takes
    // every row as a batch of one position, so one call a layer serves all the sequences.
    let positions: Vec<u32> = segments
        .iter()
        .flat_map(|s| (s.pos..s.pos + s.tokens.len()).map(|p| p as u32))
        .collect();
    let positions = Tensor::from_vec(positions, rows, &w.device)?;
    let cos = w.cos.index_select(&positions, 0)?.unsqueeze(1)?;
    let sin = w.sin.index_select(&positions, 0)?.unsqueeze(1)?;
    // 1/sqrt(head_dim) on the queries once, rather than on every sequence's scores (exact for
    // the usual head dimensions, powers of 4).
    let scale = 1.0 / (hd as f64).sqrt();
    for (l, layer) in w.layers.iter().enumerate() {
        let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, cfg.eps)?;
        let (mut q, mut k, mut v) = (
            layer.q.forward(&h)?,
            layer.k.forward(&h)?,
            layer.v.forward(&h)?,
        );
        if let Some([bq, bk, bv]) = &layer.bias {
            q = q.broadcast_add(bq)?;
            k = k.broadcast_add(bk)?;
            v = v.broadcast_add(bv)?;
        }
        // [rows, heads, 1, head_dim], rotary applied.
        let q = (w.rope(&q.reshape((rows, heads, 1, hd))?, &cos, &sin)? * scale)?;
        let k = w.rope(&k.reshape((rows, kv_heads, 1, hd))?, &cos, &sin)?;
        let v = v.reshape((rows, kv_heads, hd))?;
        let mut outs = Vec::with_capacity(segments.len());
        let mut row = 0;
        for (s, cache) in segments.iter().zip(caches.iter_mut()) {
            let (n, pos) = (s.tokens.len(), s.pos);
            // The queries grouped by the key/value head they share, `[kv heads, rep * n, hd]`
            // (no copies of the keys and values per query head, unlike `repeat_kv`).
            let qs = q
                .narrow(0, row, n)?
                .reshape((n, heads, hd))?
                .transpose(0, 1)?
                .reshape((kv_heads, rep * n, hd))?;
            let ks = k
                .narrow(0, row, n)?
                .reshape((n, kv_heads, hd))?
                .transpose(0, 1)?
                .contiguous()?;
            let vs = v.narrow(0, row, n)?.transpose(0, 1)?.contiguous()?;
            // After the cached positions before `pos` (a view when later ones are dropped).
            // Candle concatenates along an inner dimension into a transposed layout when an
            // input is not contiguous (a narrowed cache), which cuBLAS refuses: the cache is
            // kept contiguous (the assertion holds the CPU tests to it).
            let (ks, vs) = match &s.model.cache[l] {
                Some((kc, vc)) if pos > 0 => {
                    let (kc, vc) = (kc.narrow(1, 0, pos)?, vc.narrow(1, 0, pos)?);
                    (
                        Tensor::cat(&[&kc, &ks], 1)?.contiguous()?,
                        Tensor::cat(&[&vc, &vs], 1)?.contiguous()?,
                    )
                }
                _ => (ks, vs),
            };
            debug_assert!(ks.is_contiguous() && vs.is_contiguous());
            // [kv heads, rep * n, positions]
            let mut att = qs.matmul(&ks.t()?)?;
            if n > 1 {
                let len = pos + n;
                let grouped = att.reshape((kv_heads, rep, n, len))?;
                let mask = candle_transformers::utils::build_causal_mask(n, pos, &w.device)?
                    .broadcast_as(grouped.shape())?;
                att = mask
                    .where_cond(&w.neg_inf.broadcast_as(grouped.shape())?, &grouped)?
                    .reshape((kv_heads, rep * n, len))?;
            }
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            // [kv heads, rep * n, hd] -> [n, heads * hd]
            let y = att.matmul(&vs)?;
            outs.push(
                y.reshape((heads, n, hd))?
                    .transpose(0, 1)?
                    .reshape((n, heads * hd))?,
            );
            cache.push(Some((ks, vs)));
            row += n;
        }
        let y = if outs.len() == 1 {
            outs.remove(0)
        } else {
            Tensor::cat(&outs, 0)?
        }
        .unsqueeze(0)?;
        x = (layer.o.forward(&y)? + x)?;
        let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, cfg.eps)?;
        let gated = (candle_nn::ops::silu(&layer.gate.forward(&h)?)? * layer.up.forward(&h)?)?;
        x = (layer.down.forward(&gated)? + x)?;
    }
    let mut last = Vec::with_capacity(segments.len());
    let mut end = 0u32;
    for s in segments.iter() {
        end += s.tokens.len() as u32;
        last.push(end - 1);
    }
    let count = last.len();
    let last = Tensor::from_vec(last, count, &w.device)?;
    let x = x.squeeze(0)?.index_select(&last, 0)?.unsqueeze(0)?;
    let x = candle_nn::ops::rms_norm(&x, &w.norm, cfg.eps)?;
    let logits = w
        .output
        .forward(&x)?
        .squeeze(0)?
        .to_dtype(DType::F32)?
        .to_device(&Device::Cpu)?;
    let mut out: Vec<Vec<f32>> = logits.to_vec2()?;
    for (s, cache) in segments.iter_mut().zip(caches) {
        s.model.cache = cache;
        s.model.len = s.pos + s.tokens.len();
    }
    for (logits, s) in out.iter_mut().zip(segments.iter()) {
        if let Some(bits) = s.allowed {
            super::sample::apply_mask(logits, super::token_mask::Allowed::Bits(bits));
        }
    }
    Ok(out)
}

impl CausalLm for OpsModel {
    fn forward(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        only_logits(run_batch(&mut [Segment {
            model: self,
            tokens,
            pos,
            allowed,
        }])?)
    }

    fn weights_id(&self) -> Option<WeightsId> {
        Some(WeightsId {
            addr: Arc::as_ptr(&self.w) as usize,
            pass: forward_pass,
        })
    }

    fn reset(&mut self) {
        self.cache.iter_mut().for_each(|c| *c = None);
        self.len = 0;
    }

    fn can_rewind(&self) -> bool {
        true
    }

    fn rewind(&mut self, pos: usize) -> Result<(), LocalError> {
        self.truncate(pos)
    }

    fn snapshot(&self) -> Option<Box<dyn CausalLm>> {
        Some(Box::new(self.clone()))
    }

    fn restore_from(&mut self, other: &dyn CausalLm) -> Result<(), LocalError> {
        let other = same_engine::<OpsModel>(other)?;
        if !Arc::ptr_eq(&self.w, &other.w) {
            return Err(other_load());
        }
        self.cache.clone_from(&other.cache);
        self.len = other.len;
        Ok(())
    }
}
