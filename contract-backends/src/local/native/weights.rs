//! Loading: the GGUF tensors read, fused (q/k/v, gate/up), padded and put in the kernels'
//! layout; the weights every snapshot of a model shares.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::config::Config;
use super::linear::Linear;
use super::options::round_up;
use super::NativeOptions;
use crate::local::arch::Arch;
use crate::local::error::LocalError;

pub(super) struct Layer {
    pub(super) attn_norm: Vec<f32>,
    pub(super) qkv: Linear,
    pub(super) qkv_bias: Option<Vec<f32>>,
    pub(super) wo: Linear,
    pub(super) ffn_norm: Vec<f32>,
    pub(super) gate_up: Linear,
    pub(super) down: Linear,
}

/// The token embedding, as stored (rows dequantised on lookup), or f32 when the stored format's
/// blocks do not divide a row.
pub(super) enum Embedding {
    Quantized(Arc<QTensor>),
    Dense(Vec<f32>),
    /// Tied to the output matrix, held in our own layout: rows read from there.
    Output,
}

/// The weights of a native model, shared by its snapshots.
pub(crate) struct NativeWeights {
    pub(super) cfg: Config,
    pub(super) opts: NativeOptions,
    pub(super) embedding: Embedding,
    pub(super) vocab_rows: usize,
    pub(super) layers: Vec<Layer>,
    pub(super) norm: Vec<f32>,
    pub(super) output: Linear,
    /// 1 / base^(2i / rope_dim), i < rope_dim / 2.
    pub(super) inv_freq: Vec<f32>,
}

fn read_f32<R: Read + Seek>(
    ct: &Content,
    reader: &mut R,
    name: &str,
) -> Result<Tensor, LocalError> {
    let q = ct
        .tensor(reader, name, &Device::Cpu)
        .map_err(|e| LocalError::GgufRead {
            what: format!("tensor `{name}`"),
            source: crate::local::error::without_backtrace(e),
        })?;
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
        .map_err(|e| LocalError::GgufRead {
            what: format!("tensor `{name}`"),
            source: crate::local::error::without_backtrace(e),
        })?;
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

impl NativeWeights {
    /// Loads the model in `ct` (already known to be `arch`).
    pub(crate) fn load<R: Read + Seek>(
        ct: &Content,
        reader: &mut R,
        arch: Arch,
        opts: NativeOptions,
    ) -> Result<NativeWeights, LocalError> {
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
                    crate::local::error::candle_message(&e)
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
            &NativeOptions {
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
        Ok(NativeWeights {
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
    pub(crate) fn options(&self) -> &NativeOptions {
        &self.opts
    }

    /// `m x hidden_p` rows of the embedding, zero-padded.
    pub(super) fn embed(&self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
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
