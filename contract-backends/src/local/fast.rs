//! Our own llama / qwen2 forward pass on the CPU, built for decoding speed.
//!
//! Based on candle-transformers' `quantized_llama` and `quantized_qwen2`, with what the measured
//! recipe in `notes/candle-cpu-speed.md` found to matter:
//!
//! - every matrix re-quantised to one format with a SIMD kernel on x86 (Q8_0 by default, from
//!   whatever the file stores: Q4_1, Q5_0 and Q5_1 have none);
//! - q/k/v fused into one matmul, gate/up into another;
//! - a KV cache that grows in place (one buffer per layer, no concatenation per step), shared
//!   key/value heads read in place (no `repeat_kv`), and a small attention kernel over the cache
//!   slices, run on Candle's thread pool;
//! - on CPUs where Candle has its repacked VNNI kernels (AVX-512 VNNI or AVX-VNNI), every inner
//!   dimension zero-padded to a multiple of 256 so those kernels apply; the hidden state is kept
//!   padded (zeros) from the embedding to the final norm;
//! - the token embedding kept as stored, rows dequantised on lookup;
//! - optionally an f32 copy of every matrix for calls with many tokens (prompt processing), where
//!   a dense GEMM beats the quantized one on CPUs without those kernels.
//!
//! Matmuls call the quantized tensor's CPU kernel directly, without building tensors.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Tensor};

use super::arch::Arch;
use super::kernels::q4::{Q4Format, Q4Matrix};
use super::kernels::q8::Q8Matrix;
use super::kernels::team::Team;
use super::kernels::{self, OutPtr};
use super::LocalError;

/// How the fast model holds its matrices (see [`super::WeightFormat::Fast`]); the defaults are
/// what [`super::WeightFormat::Fast`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FastOptions {
    /// The quantized format of every matrix (Q8_0 unless measuring something else).
    pub dtype: GgmlDType,
    /// Pad inner dimensions to a multiple of 256 (`None`: when Candle's repacked VNNI kernels
    /// exist on this CPU).
    pub pad: Option<bool>,
    /// Keep an f32 copy of every matrix for calls with at least this many tokens (`None`: no
    /// copy; prompt processing uses the quantized matrices).
    pub dense_from: Option<usize>,
    /// Use our own matmuls (int8 and 4-bit, AVX2) instead of Candle's (`None`: on every x86
    /// CPU with AVX2, FMA and F16C, VNNI or not). They take Q8_0 only as [`FastOptions::dtype`].
    ///
    /// Measured on an AVX-512 VNNI machine (2026-12-01): with Candle's repacked VNNI kernels
    /// (padded to 256) the fast model's logits on the tiny test model were 0.54 off the
    /// reference (the test allows 0.5) and SmolLM2's greedy generation left the reference's after
    /// one token, where our own kernels stay within the tests' bounds; so ours are the default
    /// wherever they run, and Candle's stay one option away (`own_kernel(false)`).
    pub own_kernel: Option<bool>,
    /// With our own kernels, keep matrices stored in Q4_0 / Q4_1 as they are (default): the
    /// file's numbers, 0.625 bytes per weight; else re-quantize them to Q8_0.
    pub keep_4bit: bool,
}

impl FastOptions {
    /// Sets the matrices' format (any format Candle quantizes to; those with 256-value blocks
    /// need padding).
    pub fn dtype(mut self, dtype: GgmlDType) -> Self {
        self.dtype = dtype;
        self
    }
    /// Forces padding on or off.
    pub fn pad(mut self, pad: bool) -> Self {
        self.pad = Some(pad);
        self
    }
    /// Keeps f32 copies for calls of at least `tokens` tokens.
    pub fn dense_from(mut self, tokens: usize) -> Self {
        self.dense_from = Some(tokens);
        self
    }
    /// Forces our own kernels on or off.
    pub fn own_kernel(mut self, on: bool) -> Self {
        self.own_kernel = Some(on);
        self
    }
    /// Keeps 4-bit matrices as stored (with our own kernels), or re-quantizes them to Q8_0.
    pub fn keep_4bit(mut self, on: bool) -> Self {
        self.keep_4bit = on;
        self
    }

    /// Whether Q8_0 matrices go through our own kernel on this CPU.
    pub fn uses_own_kernel(&self) -> bool {
        self.dtype == GgmlDType::Q8_0
            && self
                .own_kernel
                .unwrap_or_else(|| kernels::avx2_fma() && kernels::avx2_fma_f16c())
    }

    /// Whether inner dimensions are padded to 256 on this CPU.
    pub fn pads(&self) -> bool {
        self.dtype.block_size() > 32
            || self
                .pad
                .unwrap_or_else(|| vnni_kernels() && !self.uses_own_kernel())
    }
}

impl Default for FastOptions {
    fn default() -> Self {
        FastOptions {
            dtype: GgmlDType::Q8_0,
            pad: None,
            dense_from: None,
            own_kernel: None,
            keep_4bit: true,
        }
    }
}

/// Whether Candle 0.11's repacked x86 kernels (`repack_x86::select`) take Q8_0 matrices on this
/// CPU: AVX-512 VNNI, or AVX-VNNI with AVX2 (plain AVX2 falls back to the per-row dot products).
pub fn vnni_kernels() -> bool {
    kernels::vnni()
}

fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

/// The model's dimensions, from the GGUF metadata.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub arch: Arch,
    pub hidden: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub ff: usize,
    pub n_layer: usize,
    pub eps: f32,
    pub rope_dim: usize,
    pub rope_base: f32,
    pub context: usize,
    /// Padded sizes: hidden, attention output (n_head * head_dim), feed-forward.
    hidden_p: usize,
    attn_p: usize,
    ff_p: usize,
    /// Rows of the fused q/k/v matrix (q, then k, then v, then zero rows up to a multiple of 16).
    qkv_rows: usize,
}

impl Config {
    fn from_content(ct: &Content, arch: Arch, pad: bool) -> Result<Config, LocalError> {
        let prefix = arch.name();
        let get = |k: &str| -> Option<&candle_core::quantized::gguf_file::Value> {
            ct.metadata.get(&format!("{prefix}.{k}"))
        };
        let int = |k: &str| -> Result<usize, LocalError> {
            get(k)
                .and_then(|v| v.to_u32().ok().map(u64::from).or_else(|| v.to_u64().ok()))
                .map(|v| v as usize)
                .ok_or_else(|| LocalError::Gguf(format!("no `{prefix}.{k}` in the metadata")))
        };
        let float = |k: &str| get(k).and_then(|v| v.to_f32().ok());
        let hidden = int("embedding_length")?;
        let n_head = int("attention.head_count")?;
        let n_kv_head = int("attention.head_count_kv").unwrap_or(n_head);
        let n_layer = int("block_count")?;
        let ff = int("feed_forward_length")?;
        let context = int("context_length").unwrap_or(4096);
        if n_head == 0 || n_kv_head == 0 || n_head % n_kv_head != 0 || hidden % n_head != 0 {
            return Err(LocalError::Gguf(format!(
                "{n_head} attention heads, {n_kv_head} key/value heads, hidden size {hidden}: \
                 not a grouped-query layout"
            )));
        }
        let head_dim = int("attention.key_length").unwrap_or(hidden / n_head);
        let rope_dim = int("rope.dimension_count").unwrap_or(head_dim);
        if rope_dim > head_dim || rope_dim % 2 != 0 || head_dim == 0 {
            return Err(LocalError::Gguf(format!(
                "rotary dimension {rope_dim} does not fit head dimension {head_dim}"
            )));
        }
        let eps = float("attention.layer_norm_rms_epsilon").unwrap_or(1e-6);
        let rope_base = float("rope.freq_base").unwrap_or(10000.0);
        let block = if pad { 256 } else { 32 };
        let attn = n_head * head_dim;
        Ok(Config {
            arch,
            hidden,
            n_head,
            n_kv_head,
            head_dim,
            ff,
            n_layer,
            eps,
            rope_dim,
            rope_base,
            context,
            hidden_p: round_up(hidden, block),
            attn_p: round_up(attn, block),
            ff_p: round_up(ff, block),
            qkv_rows: round_up(attn + 2 * n_kv_head * head_dim, 16),
        })
    }

    fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }
}

/// The quantized form of a matrix.
enum Quantized {
    /// Our own int8 layout and kernel.
    Own(Q8Matrix),
    /// The file's 4-bit blocks in our own layout and kernel.
    Own4(Q4Matrix),
    /// A Candle quantized tensor, multiplied by its CPU kernel.
    Candle(QTensor),
}

/// One matrix `y = x W^T`, `W` of `rows x cols` (padded), quantized, and optionally dense.
struct Linear {
    q: Quantized,
    dense: Option<Tensor>,
    rows: usize,
    cols: usize,
    /// The stored formats of the parts, when they were dequantised and quantized again (no
    /// kernel takes them as stored).
    converted_from: Vec<GgmlDType>,
}

impl Linear {
    /// `parts` (each `r_i x c` with `c <= cols`, rows padded to the number given) stacked on
    /// rows, columns zero-padded to `cols`, rows zero-padded to `rows`. With our own kernels,
    /// matrices stored in Q4_0 / Q4_1 (when [`FastOptions::keep_4bit`]) or Q8_0 are taken as
    /// they are; anything else is dequantised and quantized again.
    fn build(
        parts: &[(&QTensor, usize)],
        rows: usize,
        cols: usize,
        opts: &FastOptions,
    ) -> Result<Linear, LocalError> {
        let own = opts.uses_own_kernel();
        let dtype = parts.first().map(|(q, _)| q.dtype());
        let same = parts
            .iter()
            .all(|(q, _)| Some(q.dtype()) == dtype && q.shape().dims().get(1) == Some(&cols));
        let mut q = None;
        if own && same {
            let raw: Vec<_> = parts
                .iter()
                .map(|(t, pad)| Ok((t.data()?, t.shape().dims()[0], *pad)))
                .collect::<Result<_, candle_core::Error>>()?;
            let blocks: Vec<(&[u8], usize, usize)> =
                raw.iter().map(|(d, n, p)| (d.as_ref(), *n, *p)).collect();
            q = match dtype {
                Some(GgmlDType::Q4_0) if opts.keep_4bit => {
                    Q4Matrix::from_blocks(Q4Format::Q4_0, &blocks, rows, cols).map(Quantized::Own4)
                }
                Some(GgmlDType::Q4_1) if opts.keep_4bit => {
                    Q4Matrix::from_blocks(Q4Format::Q4_1, &blocks, rows, cols).map(Quantized::Own4)
                }
                Some(GgmlDType::Q8_0) => {
                    Q8Matrix::from_blocks(&blocks, rows, cols).map(Quantized::Own)
                }
                _ => None,
            };
        }
        let mut converted_from = Vec::new();
        let q = match q {
            Some(q) => q,
            None => {
                converted_from = parts.iter().map(|(t, _)| t.dtype()).collect();
                let w = Self::dense_stack(parts, rows, cols)?;
                if own {
                    let v = w.flatten_all()?.to_vec1::<f32>()?;
                    Quantized::Own(Q8Matrix::quantize(&v, rows, cols))
                } else {
                    Quantized::Candle(QTensor::quantize(&w, opts.dtype)?)
                }
            }
        };
        let mut linear = Linear {
            q,
            dense: None,
            rows,
            cols,
            converted_from,
        };
        if opts.dense_from.is_some() {
            // The dense copy holds what the quantized matrix holds, so both paths agree closely.
            linear.dense = Some(match &linear.q {
                Quantized::Candle(q) => q.dequantize(&Device::Cpu)?,
                _ => {
                    let mut d = vec![0f32; rows * cols];
                    for (r, row) in d.chunks_exact_mut(cols).enumerate() {
                        linear.row(r, row);
                    }
                    Tensor::from_vec(d, (rows, cols), &Device::Cpu)?
                }
            });
        }
        Ok(linear)
    }

    /// The parts dequantised, padded and stacked (`rows x cols`, f32).
    fn dense_stack(
        parts: &[(&QTensor, usize)],
        rows: usize,
        cols: usize,
    ) -> Result<Tensor, LocalError> {
        let mut blocks = Vec::with_capacity(parts.len() + 1);
        let mut used = 0;
        for (q, pad_rows_to) in parts {
            let t = q.dequantize(&Device::Cpu)?;
            let (r, c) = t.dims2()?;
            let t = if c < cols {
                t.pad_with_zeros(1, 0, cols - c)?
            } else {
                t
            };
            let t = if *pad_rows_to > r {
                t.pad_with_zeros(0, 0, pad_rows_to - r)?
            } else {
                t
            };
            used += (*pad_rows_to).max(r);
            blocks.push(t);
        }
        if used < rows {
            blocks.push(Tensor::zeros(
                (rows - used, cols),
                DType::F32,
                &Device::Cpu,
            )?);
        }
        Ok(Tensor::cat(&blocks, 0)?)
    }

    /// `x` is `m x cols`; returns `m x rows`. `x` is given back unchanged.
    fn forward(
        &self,
        x: &mut Vec<f32>,
        m: usize,
        dense_from: usize,
    ) -> Result<Vec<f32>, LocalError> {
        debug_assert_eq!(x.len(), m * self.cols);
        if let Some(w) = self.dense.as_ref().filter(|_| m >= dense_from) {
            let xt = Tensor::from_slice(x.as_slice(), (m, self.cols), &Device::Cpu)?;
            let y = xt.matmul(&w.t()?)?;
            return Ok(y.flatten_all()?.to_vec1::<f32>()?);
        }
        let q = match &self.q {
            Quantized::Own(q) => return Ok(q.matmul(x, m)),
            Quantized::Own4(q) => return Ok(q.matmul(x, m)),
            Quantized::Candle(q) => q,
        };
        let storage = CpuStorage::F32(std::mem::take(x));
        let result = q.cpu_fwd(&storage, &Layout::contiguous((m, self.cols)));
        if let CpuStorage::F32(v) = storage {
            *x = v;
        }
        match result? {
            (CpuStorage::F32(y), _) if y.len() == m * self.rows => Ok(y),
            _ => Err(LocalError::Gguf(
                "the quantized matmul did not return the expected f32 values".into(),
            )),
        }
    }

    /// `y` for one row `x` restricted to the outputs `ids`: `None` when only the full product
    /// is available (Candle's kernels, 4-bit rows).
    fn forward_rows(&self, x: &[f32], ids: &[u32]) -> Option<Vec<f32>> {
        match &self.q {
            Quantized::Own(q) if ids.iter().all(|&r| (r as usize) < q.rows()) => {
                Some(q.dot_rows(x, ids))
            }
            _ => None,
        }
    }

    /// Row `r` dequantised (`cols` long), from our own layout only.
    fn row(&self, r: usize, out: &mut [f32]) -> bool {
        match &self.q {
            Quantized::Own(q) if r < q.rows() => {
                q.dequantize_row(r, out);
                true
            }
            Quantized::Own4(q) if r < q.rows() => {
                q.dequantize_row(r, out);
                true
            }
            _ => false,
        }
    }

    fn bytes(&self) -> usize {
        let q = match &self.q {
            Quantized::Own(q) => q.bytes(),
            Quantized::Own4(q) => q.bytes(),
            Quantized::Candle(q) => q.storage_size_in_bytes(),
        };
        q + self.dense.as_ref().map_or(0, |d| d.elem_count() * 4)
    }
}

struct Layer {
    attn_norm: Vec<f32>,
    qkv: Linear,
    qkv_bias: Option<Vec<f32>>,
    wo: Linear,
    ffn_norm: Vec<f32>,
    gate_up: Linear,
    down: Linear,
}

/// The token embedding, as stored (rows dequantised on lookup), or f32 when the stored format's
/// blocks do not divide a row.
enum Embedding {
    Quantized(Arc<QTensor>),
    Dense(Vec<f32>),
    /// Tied to the output matrix, held in our own layout: rows read from there.
    Output,
}

/// The weights of a fast model, shared by its snapshots.
pub(crate) struct FastWeights {
    cfg: Config,
    opts: FastOptions,
    embedding: Embedding,
    vocab_rows: usize,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Linear,
    /// 1 / base^(2i / rope_dim), i < rope_dim / 2.
    inv_freq: Vec<f32>,
}

fn read_f32<R: Read + Seek>(
    ct: &Content,
    reader: &mut R,
    name: &str,
) -> Result<Tensor, LocalError> {
    let q = ct
        .tensor(reader, name, &Device::Cpu)
        .map_err(|e| LocalError::Gguf(format!("tensor `{name}`: {}", super::candle_message(&e))))?;
    Ok(q.dequantize(&Device::Cpu)?)
}

fn read_matrix<R: Read + Seek>(
    ct: &Content,
    reader: &mut R,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<QTensor, LocalError> {
    let q = ct
        .tensor(reader, name, &Device::Cpu)
        .map_err(|e| LocalError::Gguf(format!("tensor `{name}`: {}", super::candle_message(&e))))?;
    match q.shape().dims() {
        [r, c] if *r == rows && *c == cols => Ok(q),
        dims => Err(LocalError::Gguf(format!(
            "tensor `{name}` has shape {dims:?}, expected [{rows}, {cols}]"
        ))),
    }
}

fn read_vector<R: Read + Seek>(
    ct: &Content,
    reader: &mut R,
    name: &str,
    len: usize,
    padded: usize,
) -> Result<Vec<f32>, LocalError> {
    let t = read_f32(ct, reader, name)?;
    if t.dims() != [len] {
        return Err(LocalError::Gguf(format!(
            "tensor `{name}` has shape {:?}, expected [{len}]",
            t.dims()
        )));
    }
    let mut v = t.to_vec1::<f32>()?;
    v.resize(padded, 0.0);
    Ok(v)
}

impl FastWeights {
    /// Loads the model in `ct` (already known to be `arch`).
    pub(crate) fn load<R: Read + Seek>(
        ct: &Content,
        reader: &mut R,
        arch: Arch,
        opts: FastOptions,
    ) -> Result<FastWeights, LocalError> {
        if opts.dtype.block_size() > 32 && opts.pad == Some(false) {
            return Err(LocalError::Gguf(format!(
                "{:?} needs rows padded to its block of {}",
                opts.dtype,
                opts.dtype.block_size()
            )));
        }
        let pad = opts.pads();
        let cfg = Config::from_content(ct, arch, pad)?;
        let (h, hp, hd) = (cfg.hidden, cfg.hidden_p, cfg.head_dim);
        let attn = cfg.n_head * hd;
        let kv = cfg.kv_dim();

        let embd_q = ct
            .tensor(reader, "token_embd.weight", &Device::Cpu)
            .map_err(|e| {
                LocalError::Gguf(format!(
                    "tensor `token_embd.weight`: {}",
                    super::candle_message(&e)
                ))
            })?;
        let (vocab_rows, embd_cols) = embd_q.shape().dims2()?;
        if embd_cols != h {
            return Err(LocalError::Gguf(format!(
                "token embedding has {embd_cols} columns, the hidden size is {h}"
            )));
        }
        let tied = !ct.tensor_infos.contains_key("output.weight");
        let output_q = if tied {
            None
        } else {
            Some(read_matrix(ct, reader, "output.weight", vocab_rows, h)?)
        };
        let output = Linear::build(
            &[(output_q.as_ref().unwrap_or(&embd_q), 0)],
            round_up(vocab_rows, 16),
            hp,
            &FastOptions {
                // The dense copy is never used for the output (one row per call).
                dense_from: None,
                ..opts
            },
        )?;
        drop(output_q);
        let embedding = if tied && opts.uses_own_kernel() {
            Embedding::Output
        } else if h % embd_q.dtype().block_size() == 0 {
            Embedding::Quantized(Arc::new(embd_q))
        } else {
            Embedding::Dense(embd_q.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1()?)
        };

        // `block_count` is read from the file: never reserve more layers than it has tensors.
        let mut layers = Vec::with_capacity(cfg.n_layer.min(ct.tensor_infos.len()));
        for l in 0..cfg.n_layer {
            let p = format!("blk.{l}");
            let wq = read_matrix(ct, reader, &format!("{p}.attn_q.weight"), attn, h)?;
            let wk = read_matrix(ct, reader, &format!("{p}.attn_k.weight"), kv, h)?;
            let wv = read_matrix(ct, reader, &format!("{p}.attn_v.weight"), kv, h)?;
            let qkv = Linear::build(&[(&wq, 0), (&wk, 0), (&wv, 0)], cfg.qkv_rows, hp, &opts)?;
            let qkv_bias = if ct.tensor_infos.contains_key(&format!("{p}.attn_q.bias")) {
                let mut b = read_vector(ct, reader, &format!("{p}.attn_q.bias"), attn, attn)?;
                b.extend(read_vector(
                    ct,
                    reader,
                    &format!("{p}.attn_k.bias"),
                    kv,
                    kv,
                )?);
                b.extend(read_vector(
                    ct,
                    reader,
                    &format!("{p}.attn_v.bias"),
                    kv,
                    kv,
                )?);
                Some(b)
            } else if arch == Arch::Qwen2 {
                return Err(LocalError::Gguf(format!(
                    "no `{p}.attn_q.bias` in a qwen2 model"
                )));
            } else {
                None
            };
            let wo = read_matrix(ct, reader, &format!("{p}.attn_output.weight"), h, attn)?;
            let wo = Linear::build(&[(&wo, 0)], hp, cfg.attn_p, &opts)?;
            let gate = read_matrix(ct, reader, &format!("{p}.ffn_gate.weight"), cfg.ff, h)?;
            let up = read_matrix(ct, reader, &format!("{p}.ffn_up.weight"), cfg.ff, h)?;
            let gate_up = Linear::build(
                &[(&gate, cfg.ff_p), (&up, cfg.ff_p)],
                2 * cfg.ff_p,
                hp,
                &opts,
            )?;
            let down = read_matrix(ct, reader, &format!("{p}.ffn_down.weight"), h, cfg.ff)?;
            let down = Linear::build(&[(&down, 0)], hp, cfg.ff_p, &opts)?;
            layers.push(Layer {
                attn_norm: read_vector(ct, reader, &format!("{p}.attn_norm.weight"), h, hp)?,
                qkv,
                qkv_bias,
                wo,
                ffn_norm: read_vector(ct, reader, &format!("{p}.ffn_norm.weight"), h, hp)?,
                gate_up,
                down,
            });
        }
        let norm = read_vector(ct, reader, "output_norm.weight", h, hp)?;
        let half = cfg.rope_dim / 2;
        let inv_freq = (0..half)
            .map(|i| 1f32 / cfg.rope_base.powf((2 * i) as f32 / cfg.rope_dim as f32))
            .collect();
        Ok(FastWeights {
            cfg,
            opts,
            embedding,
            vocab_rows,
            layers,
            norm,
            output,
            inv_freq,
        })
    }

    /// The context length from the metadata.
    pub(crate) fn context_length(&self) -> usize {
        self.cfg.context
    }

    /// Bytes held by the weights (quantized matrices, dense copies, embedding, norms).
    pub(crate) fn bytes(&self) -> usize {
        let embd = match &self.embedding {
            Embedding::Quantized(q) => q.storage_size_in_bytes(),
            Embedding::Dense(v) => v.len() * 4,
            Embedding::Output => 0,
        };
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                l.qkv.bytes()
                    + l.wo.bytes()
                    + l.gate_up.bytes()
                    + l.down.bytes()
                    + 4 * (l.attn_norm.len() + l.ffn_norm.len())
            })
            .sum();
        embd + layers + self.output.bytes() + 4 * self.norm.len()
    }

    /// The stored formats of the matrices that were re-quantised at load because no kernel
    /// takes them as stored (Q4_K and Q6_K in a Q4_K_M file), each with how many matrices
    /// (fused parts counted one by one), in the order first met.
    pub(crate) fn converted(&self) -> Vec<(GgmlDType, usize)> {
        let mut out: Vec<(GgmlDType, usize)> = Vec::new();
        let linears = self
            .layers
            .iter()
            .flat_map(|l| [&l.qkv, &l.wo, &l.gate_up, &l.down])
            .chain([&self.output]);
        for dtype in linears.flat_map(|l| l.converted_from.iter().copied()) {
            match out.iter_mut().find(|(d, _)| *d == dtype) {
                Some((_, n)) => *n += 1,
                None => out.push((dtype, 1)),
            }
        }
        out
    }

    /// The options it was loaded with.
    pub(crate) fn options(&self) -> &FastOptions {
        &self.opts
    }

    /// `m x hidden_p` rows of the embedding, zero-padded.
    fn embed(&self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
        let (h, hp) = (self.cfg.hidden, self.cfg.hidden_p);
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.vocab_rows) {
            return Err(LocalError::Gguf(format!(
                "token {t} is outside the embedding ({} rows)",
                self.vocab_rows
            )));
        }
        let mut out = vec![0f32; tokens.len() * hp];
        match &self.embedding {
            Embedding::Dense(table) => {
                for (row, &t) in out.chunks_exact_mut(hp).zip(tokens) {
                    let t = t as usize;
                    row[..h].copy_from_slice(&table[t * h..(t + 1) * h]);
                }
            }
            Embedding::Output => {
                for (row, &t) in out.chunks_exact_mut(hp).zip(tokens) {
                    if !self.output.row(t as usize, row) {
                        return Err(LocalError::Gguf(format!("no embedding row for token {t}")));
                    }
                }
            }
            Embedding::Quantized(q) => {
                let ids = Tensor::new(tokens, &Device::Cpu)?;
                let rows = q.embedding(&ids)?.flatten_all()?.to_vec1::<f32>()?;
                for (row, src) in out.chunks_exact_mut(hp).zip(rows.chunks_exact(h)) {
                    row[..h].copy_from_slice(src);
                }
            }
        }
        Ok(out)
    }
}

/// The cached keys and values of one layer: `[position][kv head][head dim]`, rotary applied.
#[derive(Clone, Default)]
struct LayerCache {
    k: Vec<f32>,
    v: Vec<f32>,
}

/// A fast model: shared weights and its own KV cache. Cloning copies the cache (a prompt prefix
/// of a few hundred tokens is a few MiB) and shares the weights.
#[derive(Clone)]
pub(crate) struct FastModel {
    w: Arc<FastWeights>,
    cache: Vec<LayerCache>,
    len: usize,
}

impl FastModel {
    pub(crate) fn new(w: Arc<FastWeights>) -> FastModel {
        let layers = w.cfg.n_layer;
        FastModel {
            w,
            cache: vec![LayerCache::default(); layers],
            len: 0,
        }
    }

    pub(crate) fn weights(&self) -> &Arc<FastWeights> {
        &self.w
    }

    /// Copies `other`'s cache into this one (reusing the buffers); both must share the weights.
    pub(crate) fn restore_from(&mut self, other: &FastModel) -> Result<(), LocalError> {
        if !Arc::ptr_eq(&self.w, &other.w) {
            return Err(LocalError::Gguf(
                "cannot restore a model from another model's snapshot".into(),
            ));
        }
        for (a, b) in self.cache.iter_mut().zip(&other.cache) {
            a.k.clone_from(&b.k);
            a.v.clone_from(&b.v);
        }
        self.len = other.len;
        Ok(())
    }

    /// Empties the cache.
    pub(crate) fn reset(&mut self) {
        self.truncate(0);
    }

    /// Drops the cached positions from `len` on.
    pub(crate) fn truncate(&mut self, len: usize) {
        let kv = self.w.cfg.kv_dim();
        for c in &mut self.cache {
            c.k.truncate(len * kv);
            c.v.truncate(len * kv);
        }
        self.len = len.min(self.len);
    }

    /// Runs `tokens` at positions `pos..`, `pos <= ` the cached length (later positions are
    /// dropped first); the logits after the last token. With `allowed` (a bitset over token
    /// ids), the others are -inf, and only the allowed ones are computed when they are few.
    pub(crate) fn forward(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        let w = Arc::clone(&self.w);
        let c = &w.cfg;
        let m = tokens.len();
        if m == 0 {
            return Err(LocalError::Gguf("forward with no tokens".into()));
        }
        if pos > self.len {
            return Err(LocalError::Gguf(format!(
                "forward at position {pos} but the cache holds {} tokens",
                self.len
            )));
        }
        self.truncate(pos);
        let dense_from = w.opts.dense_from.unwrap_or(usize::MAX);
        let own = w.opts.uses_own_kernel();
        let (h, hp) = (c.hidden, c.hidden_p);
        let hd = c.head_dim;
        let attn = c.n_head * hd;
        let kv = c.kv_dim();
        let (cos, sin) = rope_table(&w.inv_freq, pos, m);

        let mut x = w.embed(tokens)?;
        let mut xn = vec![0f32; m * hp];
        let mut att = vec![0f32; m * c.attn_p];
        let mut act = vec![0f32; m * c.ff_p];
        for (layer, cache) in w.layers.iter().zip(self.cache.iter_mut()) {
            rms_norm(&x, &layer.attn_norm, h, hp, c.eps, &mut xn);
            let mut qkv = layer.qkv.forward(&mut xn, m, dense_from)?;
            for row in qkv.chunks_exact_mut(c.qkv_rows) {
                if let Some(b) = &layer.qkv_bias {
                    for (y, b) in row.iter_mut().zip(b) {
                        *y += b;
                    }
                }
            }
            for (r, row) in qkv.chunks_exact_mut(c.qkv_rows).enumerate() {
                let (q, rest) = row.split_at_mut(attn);
                let k = &mut rest[..kv];
                for head in q.chunks_exact_mut(hd).chain(k.chunks_exact_mut(hd)) {
                    rope(head, &cos[r], &sin[r], c.arch);
                }
                cache.k.extend_from_slice(k);
                cache.v.extend_from_slice(&rest[kv..2 * kv]);
            }
            attention(c, &qkv, &cache.k, &cache.v, pos, m, &mut att, own);
            let o = layer.wo.forward(&mut att, m, dense_from)?;
            add(&mut x, &o);
            rms_norm(&x, &layer.ffn_norm, h, hp, c.eps, &mut xn);
            let gu = layer.gate_up.forward(&mut xn, m, dense_from)?;
            for (a, row) in act
                .chunks_exact_mut(c.ff_p)
                .zip(gu.chunks_exact(2 * c.ff_p))
            {
                let (g, u) = row.split_at(c.ff_p);
                for ((a, &g), &u) in a.iter_mut().zip(g).zip(u) {
                    *a = g / (1.0 + (-g).exp()) * u;
                }
            }
            let d = layer.down.forward(&mut act, m, dense_from)?;
            add(&mut x, &d);
        }
        self.len = pos + m;
        let mut last = vec![0f32; hp];
        rms_norm(&x[(m - 1) * hp..], &w.norm, h, hp, c.eps, &mut last);
        if let Some(bits) = allowed {
            // Few allowed tokens (a constrained step): only their rows of the output matrix.
            let count: usize = bits.iter().map(|b| b.count_ones() as usize).sum();
            if count * 8 < w.vocab_rows {
                let ids: Vec<u32> = bits
                    .iter()
                    .enumerate()
                    .flat_map(|(i, &b)| {
                        (0..32u32)
                            .filter(move |k| b & (1 << k) != 0)
                            .map(move |k| i as u32 * 32 + k)
                    })
                    .filter(|&t| (t as usize) < w.vocab_rows)
                    .collect();
                if let Some(vals) = w.output.forward_rows(&last, &ids) {
                    let mut logits = vec![f32::NEG_INFINITY; w.vocab_rows];
                    for (&t, v) in ids.iter().zip(vals) {
                        logits[t as usize] = v;
                    }
                    return Ok(logits);
                }
            }
        }
        let mut logits = w.output.forward(&mut last, 1, usize::MAX)?;
        logits.truncate(w.vocab_rows);
        if let Some(bits) = allowed {
            super::backend::apply_mask(&mut logits, super::Allowed::Bits(bits));
        }
        Ok(logits)
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// RMS norm of each `hp`-row of `x` over its first `h` values (the rest are zeros), times `w`
/// (zero past `h`, so the padding stays zero).
fn rms_norm(x: &[f32], w: &[f32], h: usize, hp: usize, eps: f32, out: &mut [f32]) {
    for (row, o) in x.chunks_exact(hp).zip(out.chunks_exact_mut(hp)) {
        let ss: f32 = row[..h].iter().map(|v| v * v).sum();
        let scale = 1.0 / (ss / h as f32 + eps).sqrt();
        for ((o, &v), &w) in o.iter_mut().zip(row).zip(w) {
            *o = v * scale * w;
        }
    }
}

/// cos and sin of `position * inv_freq` for positions `pos..pos + m`.
fn rope_table(inv_freq: &[f32], pos: usize, m: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut cos = Vec::with_capacity(m);
    let mut sin = Vec::with_capacity(m);
    for p in pos..pos + m {
        let (c, s): (Vec<f32>, Vec<f32>) = inv_freq
            .iter()
            .map(|f| {
                let a = p as f32 * f;
                (a.cos(), a.sin())
            })
            .unzip();
        cos.push(c);
        sin.push(s);
    }
    (cos, sin)
}

/// Rotary embedding of one head in place: interleaved pairs for llama GGUFs (whose q/k rows are
/// permuted for it), halves for qwen2 (neox style); dimensions past the rotary ones untouched.
fn rope(x: &mut [f32], cos: &[f32], sin: &[f32], arch: Arch) {
    let half = cos.len();
    match arch {
        Arch::Llama => {
            for i in 0..half {
                let (a, b) = (x[2 * i], x[2 * i + 1]);
                x[2 * i] = a * cos[i] - b * sin[i];
                x[2 * i + 1] = a * sin[i] + b * cos[i];
            }
        }
        Arch::Qwen2 => {
            for i in 0..half {
                let (a, b) = (x[i], x[i + half]);
                x[i] = a * cos[i] - b * sin[i];
                x[i + half] = a * sin[i] + b * cos[i];
            }
        }
    }
}

/// Causal attention of the `m` new query rows (in `qkv`, rows of `qkv_rows`) over the cache
/// (`pos + m` positions), each query head reading its key/value head in place. Writes `m` rows
/// of `attn_p` to `out` (zeros past `n_head * head_dim`).
/// Runs on our own thread team with our own kernels (`team`), else on Candle's pool.
#[allow(clippy::too_many_arguments)]
fn attention(
    c: &Config,
    qkv: &[f32],
    k: &[f32],
    v: &[f32],
    pos: usize,
    m: usize,
    out: &mut [f32],
    team: bool,
) {
    let hd = c.head_dim;
    let kv = c.kv_dim();
    let group = c.n_head / c.n_kv_head;
    let scale = 1.0 / (hd as f32).sqrt();
    let units = m * c.n_head;
    let ptr = OutPtr(out.as_mut_ptr());
    let (attn_p, qkv_rows, n_head) = (c.attn_p, c.qkv_rows, c.n_head);
    let simd = simd::available();
    let run = move |range: std::ops::Range<usize>| {
        let mut scores = Vec::new();
        for unit in range {
            let (r, head) = (unit / n_head, unit % n_head);
            let q = &qkv[r * qkv_rows + head * hd..][..hd];
            let g = head / group;
            let n = pos + r + 1;
            // SAFETY: unit (r, head) owns out[r * attn_p + head * hd ..][..hd]; see `OutPtr`.
            let o = unsafe {
                std::slice::from_raw_parts_mut(ptr.get().add(r * attn_p + head * hd), hd)
            };
            scores.clear();
            scores.resize(n, 0.0);
            simd::attend(simd, q, k, v, kv, g * hd, scale, &mut scores, o);
        }
    };
    // Work in multiply-adds: below some tens of thousands, a thread hand-off costs more.
    let work = units * (pos + m) * hd;
    if units <= 1 || work < 1 << 16 {
        run(0..units);
    } else if team {
        let team = Team::global();
        team.for_each(units, units.div_ceil(2 * team.size()), run);
    } else {
        candle_core::utils::barrier_pool().execute_chunked(units, run);
    }
}

mod simd {
    //! The attention inner loops: AVX2 + FMA when the CPU has them, else plain Rust.

    /// Whether the AVX2 + FMA loops can run.
    pub(super) fn available() -> bool {
        super::kernels::avx2_fma()
    }

    /// One query head against `scores.len()` cached positions: the keys and values of this head
    /// start at `offset` in each `row`-long cache row. Writes the weighted sum of values to `out`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend(
        simd: bool,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        row: usize,
        offset: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if simd && q.len() % 8 == 0 {
            // SAFETY: the CPU has AVX2 and FMA (checked by `available`).
            unsafe { attend_avx2(q, k, v, row, offset, scale, scores, out) };
            return;
        }
        let _ = simd;
        attend_plain(q, k, v, row, offset, scale, scores, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn attend_plain(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        row: usize,
        offset: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let hd = q.len();
        for (j, s) in scores.iter_mut().enumerate() {
            let kr = &k[j * row + offset..][..hd];
            *s = q.iter().zip(kr).map(|(a, b)| a * b).sum::<f32>() * scale;
        }
        let sum = softmax(scores);
        out.fill(0.0);
        for (j, &s) in scores.iter().enumerate() {
            let p = s / sum;
            for (o, &x) in out.iter_mut().zip(&v[j * row + offset..][..hd]) {
                *o += p * x;
            }
        }
    }

    /// exp(s - max) in place; returns the sum.
    fn softmax(scores: &mut [f32]) -> f32 {
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        sum
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attend_avx2(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        row: usize,
        offset: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        let hd = q.len();
        let n = scores.len();
        // Accumulate in registers, 8 lanes at a time over the head (at most 256 dimensions).
        let lanes = hd / 8;
        if lanes > 32 || n == 0 {
            attend_plain(q, k, v, row, offset, scale, scores, out);
            return;
        }
        assert!(k.len() >= (n - 1) * row + offset + hd && out.len() == hd);
        let qp = q.as_ptr();
        let kp = k.as_ptr().add(offset);
        let dot = |kr: *const f32| {
            let mut acc = _mm256_setzero_ps();
            for i in (0..lanes * 8).step_by(8) {
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(i)), _mm256_loadu_ps(kr.add(i)), acc);
            }
            acc
        };
        let vscale = _mm_set1_ps(scale);
        let mut j = 0;
        // Four keys at a time: one horizontal reduction for four scores.
        while j + 4 <= n {
            let a0 = dot(kp.add(j * row));
            let a1 = dot(kp.add((j + 1) * row));
            let a2 = dot(kp.add((j + 2) * row));
            let a3 = dot(kp.add((j + 3) * row));
            let h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
            let s4 = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            _mm_storeu_ps(scores.as_mut_ptr().add(j), _mm_mul_ps(s4, vscale));
            j += 4;
        }
        while j < n {
            let acc = dot(kp.add(j * row));
            let s4 = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
            let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
            let s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
            scores[j] = _mm_cvtss_f32(s1) * scale;
            j += 1;
        }
        let sum = softmax_avx2(scores);
        let p = 1.0 / sum;
        match lanes {
            8 => weighted_sum::<8>(v, row, offset, scores, p, out),
            16 => weighted_sum::<16>(v, row, offset, scores, p, out),
            4 => weighted_sum::<4>(v, row, offset, scores, p, out),
            _ => {
                out.fill(0.0);
                for (j, &s) in scores.iter().enumerate() {
                    let w = s * p;
                    for (o, &x) in out.iter_mut().zip(&v[j * row + offset..][..hd]) {
                        *o = w.mul_add(x, *o);
                    }
                }
            }
        }
    }

    /// `exp(s - max)` in place, 8 lanes at a time; returns the sum.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn softmax_avx2(scores: &mut [f32]) -> f32 {
        use std::arch::x86_64::*;
        let n = scores.len();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let vmax = _mm256_set1_ps(max);
        let mut vsum = _mm256_setzero_ps();
        let p = scores.as_mut_ptr();
        let mut j = 0;
        while j + 8 <= n {
            let e = exp256(_mm256_sub_ps(_mm256_loadu_ps(p.add(j)), vmax));
            _mm256_storeu_ps(p.add(j), e);
            vsum = _mm256_add_ps(vsum, e);
            j += 8;
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), vsum);
        let mut sum: f32 = lanes.iter().sum();
        for s in &mut scores[j..] {
            *s = (*s - max).exp();
            sum += *s;
        }
        sum
    }

    /// `exp(x)` for `x <= 0` (as in a softmax), relative error about 2e-7: `2^n * p(r)` with
    /// `x = n ln 2 + r`, `p` the degree-6 Taylor polynomial of `exp` on `|r| <= ln 2 / 2`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp256(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // Below about -87, exp underflows: clamp, the result is then about 1e-38 (as good as 0).
        let x = _mm256_max_ps(x, _mm256_set1_ps(-87.0));
        let n = _mm256_round_ps(
            _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
        );
        // r = x - n ln 2, with ln 2 split in two for precision.
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_145_75), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428_606_8e-6), r);
        let mut y = _mm256_set1_ps(1.0 / 720.0);
        for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
            y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
        }
        let pow2 = _mm256_slli_epi32(
            _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
            23,
        );
        _mm256_mul_ps(y, _mm256_castsi256_ps(pow2))
    }

    /// `out = sum_j scores[j] * p * v_j`, `L` vectors of 8 lanes held in registers.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn weighted_sum<const L: usize>(
        v: &[f32],
        row: usize,
        offset: usize,
        scores: &[f32],
        p: f32,
        out: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        assert!(out.len() == 8 * L);
        assert!(scores.is_empty() || v.len() >= (scores.len() - 1) * row + offset + 8 * L);
        let mut acc = [_mm256_setzero_ps(); L];
        for (j, &s) in scores.iter().enumerate() {
            let w = _mm256_set1_ps(s * p);
            let vp = v.as_ptr().add(j * row + offset);
            for (l, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(w, _mm256_loadu_ps(vp.add(l * 8)), *a);
            }
        }
        let op = out.as_mut_ptr();
        for (l, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(op.add(l * 8), *a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_exp_is_accurate() {
        if !simd::available() {
            return;
        }
        let xs: Vec<f32> = (0..2000).map(|i| -(i as f32) * 0.05).collect();
        for chunk in xs.chunks_exact(8) {
            let mut out = [0f32; 8];
            // SAFETY: AVX2 and FMA are available.
            unsafe {
                use std::arch::x86_64::*;
                let e = simd::exp256(_mm256_loadu_ps(chunk.as_ptr()));
                _mm256_storeu_ps(out.as_mut_ptr(), e);
            }
            for (&x, &y) in chunk.iter().zip(&out) {
                let want = (x as f64).exp();
                assert!(
                    ((y as f64) - want).abs() <= 1e-6 * want + 1e-37,
                    "exp({x}) = {y}, want {want}"
                );
            }
        }
    }

    #[test]
    fn avx2_and_plain_attention_agree() {
        let hd = 64;
        let row = 3 * hd;
        let n = 37;
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let q: Vec<f32> = (0..hd).map(val).collect();
        let k: Vec<f32> = (0..n * row).map(|i| val(i + 13)).collect();
        let v: Vec<f32> = (0..n * row).map(|i| val(i + 101)).collect();
        let mut s1 = vec![0.0; n];
        let mut s2 = vec![0.0; n];
        let mut o1 = vec![0.0; hd];
        let mut o2 = vec![0.0; hd];
        simd::attend(false, &q, &k, &v, row, hd, 0.125, &mut s1, &mut o1);
        simd::attend(
            simd::available(),
            &q,
            &k,
            &v,
            row,
            hd,
            0.125,
            &mut s2,
            &mut o2,
        );
        for (a, b) in o1.iter().zip(&o2) {
            assert!((a - b).abs() < 1e-5, "{a} {b}");
        }
    }
}
