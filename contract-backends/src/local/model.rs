//! A GGUF model on Candle, picked from the file's `general.architecture` (llama or qwen2), with its
//! KV cache: our own forward pass ([`super::fast`], Q8_0 weights, the default), or
//! candle-transformers' `quantized_llama` / `quantized_qwen2` with the weights as stored or
//! converted at load (f32 for fast prompt processing, Q8_0 for formats Candle has no SIMD kernel
//! for).

use std::collections::HashMap;
use std::fs;
use std::io::Cursor;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Content};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};

use super::fast::{FastModel, FastOptions, FastWeights};
use super::LocalError;

/// How the weights are held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WeightFormat {
    /// [`WeightFormat::Fast`] on the CPU; elsewhere [`WeightFormat::F32`] when the dequantised
    /// weights take at most [`AUTO_F32_LIMIT`] bytes, else [`WeightFormat::AsStored`].
    #[default]
    Auto,
    /// candle-transformers' model, weights as stored in the file (least memory).
    AsStored,
    /// candle-transformers' model, every quantized matrix dequantised to f32: much faster prompt
    /// processing than as stored, about 4 bytes per parameter.
    F32,
    /// candle-transformers' model, every matrix in a format other than Q8_0 re-quantised to Q8_0,
    /// whose matmul has a SIMD kernel on x86 (Q4_1, Q5_0 and Q5_1 do not): about 1.1 bytes per
    /// parameter.
    Q8_0,
    /// Our own forward pass ([`super::fast`], CPU only): matrices re-quantised to Q8_0, q/k/v and
    /// gate/up fused, an in-place KV cache with cheap snapshots for both architectures, inner
    /// dimensions padded to 256 where Candle's VNNI kernels exist. About 1.1 bytes per parameter
    /// (1.4 when padded).
    Fast,
}

/// The most bytes of f32 weights [`WeightFormat::Auto`] accepts (3 GiB: models up to about
/// 0.75 B parameters).
pub const AUTO_F32_LIMIT: u64 = 3 << 30;

pub use super::arch::Arch;

enum Weights {
    Llama(Box<quantized_llama::ModelWeights>),
    // Not Clone in Candle 0.11: no snapshots for qwen2.
    Qwen2(Box<quantized_qwen2::ModelWeights>),
    Fast(Box<FastModel>),
}

/// A loaded model and its KV cache.
///
/// `forward` appends tokens to the cache; [`Model::snapshot`] keeps a copy of the cache (sharing
/// the weights) so a shared prompt prefix is computed once.
pub struct Model {
    weights: Weights,
    arch: Arch,
    format: WeightFormat,
    device: Device,
    pos: usize,
    context: usize,
    vocab_size: usize,
    forward_calls: u64,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("arch", &self.arch)
            .field("pos", &self.pos)
            .field("context", &self.context)
            .field("vocab_size", &self.vocab_size)
            .finish()
    }
}

fn md_usize(ct: &Content, key: &str) -> Option<usize> {
    ct.metadata
        .get(key)
        .and_then(|v| v.to_u64().ok().or_else(|| v.to_u32().ok().map(u64::from)))
        .map(|v| v as usize)
}

/// The hyperparameters every forward pass divides by or allocates with, checked against each
/// other and against the tensor index before any of them is used (Candle's models divide by the
/// head count and reserve `block_count` layers).
fn check_hyperparameters(ct: &Content, arch: Arch) -> Result<(), LocalError> {
    let name = arch.name();
    let get = |k: &str| md_usize(ct, &format!("{name}.{k}"));
    let need = |k: &str| {
        get(k).ok_or_else(|| LocalError::Gguf(format!("no `{name}.{k}` in the metadata")))
    };
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    let kv_heads = get("attention.head_count_kv").unwrap_or(heads);
    if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 || hidden % heads != 0 {
        return Err(LocalError::Gguf(format!(
            "`{name}.embedding_length` {hidden}, `{name}.attention.head_count` {heads} and \
             `{name}.attention.head_count_kv` {kv_heads} do not divide into attention heads"
        )));
    }
    let blocks = need("block_count")?;
    if blocks == 0
        || (0..blocks).any(|l| {
            !ct.tensor_infos
                .contains_key(&format!("blk.{l}.attn_q.weight"))
        })
    {
        return Err(LocalError::Gguf(format!(
            "`{name}.block_count` is {blocks}, the tensor index does not hold that many blocks"
        )));
    }
    const MAX_CONTEXT: usize = 1 << 22;
    if let Some(context) = get("context_length").filter(|&c| c == 0 || c > MAX_CONTEXT) {
        return Err(LocalError::Gguf(format!(
            "`{name}.context_length` {context} is outside 1 to {MAX_CONTEXT}"
        )));
    }
    if let Some(info) = ct.tensor_infos.get("token_embd.weight") {
        let dims = info.shape.dims();
        if dims.len() != 2 || dims[1] != hidden {
            return Err(LocalError::Gguf(format!(
                "tensor `token_embd.weight` has shape {dims:?}, `{name}.embedding_length` is \
                 {hidden}"
            )));
        }
    }
    Ok(())
}

impl Model {
    /// Loads the GGUF file at `path` on `device`.
    pub fn load(path: &Path, format: WeightFormat, device: &Device) -> Result<Self, LocalError> {
        let mut file = fs::File::open(path).map_err(|e| LocalError::io(path, e))?;
        let ct =
            super::gguf_tokenizer::read_content_from(&mut file).map_err(|e| e.in_file(path))?;
        Self::from_content(ct, &mut file, format, device).map_err(|e| e.in_file(path))
    }

    /// Loads a model from GGUF content read from `reader`.
    pub fn from_content<R: std::io::Read + std::io::Seek>(
        ct: Content,
        reader: &mut R,
        format: WeightFormat,
        device: &Device,
    ) -> Result<Self, LocalError> {
        Self::from_content_with(ct, reader, format, device, FastOptions::default())
    }

    /// Loads a model from GGUF content read from `reader`, with `fast` as the options of the
    /// fast forward pass when `format` is (or stands for) [`WeightFormat::Fast`].
    pub fn from_content_with<R: std::io::Read + std::io::Seek>(
        ct: Content,
        reader: &mut R,
        format: WeightFormat,
        device: &Device,
        fast: FastOptions,
    ) -> Result<Self, LocalError> {
        let arch = arch_of(&ct)?;
        check_hyperparameters(&ct, arch)?;
        let arch_name = arch.name();
        let mut context = md_usize(&ct, &format!("{arch_name}.context_length")).unwrap_or(4096);
        let vocab_size = md_usize(&ct, &format!("{arch_name}.vocab_size"))
            .or_else(|| {
                ct.metadata
                    .get("tokenizer.ggml.tokens")
                    .and_then(|v| v.to_vec().ok())
                    .map(|v| v.len())
            })
            .unwrap_or(0);
        let format = resolve_format(&ct, format, device);
        if arch == Arch::Llama && format != WeightFormat::Fast {
            // quantized_llama precomputes rotary embeddings for this many positions.
            context = context.min(quantized_llama::MAX_SEQ_LEN);
        }
        let weights = match format {
            WeightFormat::Auto | WeightFormat::AsStored => load_weights(arch, ct, reader, device)?,
            WeightFormat::F32 => convert_and_load(arch, ct, reader, device, GgmlDType::F32)?,
            WeightFormat::Q8_0 => convert_and_load(arch, ct, reader, device, GgmlDType::Q8_0)?,
            WeightFormat::Fast => {
                if !device.is_cpu() {
                    return Err(LocalError::Gguf(format!(
                        "weight format {format:?} runs on the CPU only"
                    )));
                }
                let w = FastWeights::load(&ct, reader, arch, fast)?;
                context = w.context_length();
                Weights::Fast(Box::new(FastModel::new(std::sync::Arc::new(w))))
            }
        };
        Ok(Model {
            weights,
            arch,
            format,
            device: device.clone(),
            pos: 0,
            context,
            vocab_size,
            forward_calls: 0,
        })
    }

    /// Loads the GGUF file at `path` into the fast forward pass ([`super::fast`]) with explicit
    /// options ([`WeightFormat::Fast`] uses the defaults).
    pub fn load_fast(path: &Path, opts: FastOptions) -> Result<Self, LocalError> {
        let mut file = fs::File::open(path).map_err(|e| LocalError::io(path, e))?;
        let ct =
            super::gguf_tokenizer::read_content_from(&mut file).map_err(|e| e.in_file(path))?;
        Self::from_content_with(ct, &mut file, WeightFormat::Fast, &Device::Cpu, opts)
            .map_err(|e| e.in_file(path))
    }

    /// Bytes held by the weights of a [`WeightFormat::Fast`] model
    /// and the options it runs with (`None` for the other formats).
    pub fn fast_weights(&self) -> Option<(usize, FastOptions)> {
        match &self.weights {
            Weights::Fast(f) => Some((f.weights().bytes(), *f.weights().options())),
            _ => None,
        }
    }

    /// How the weights are held, in words for a user: the format, and for the fast forward
    /// pass the stored formats it re-quantised to its kernels' format at load
    /// (`fast forward pass, own kernels; re-quantised to Q8_0 at load ...: Q4_K (120 matrices), Q6_K (48 matrices)`).
    pub fn weights_summary(&self) -> String {
        let Weights::Fast(f) = &self.weights else {
            return format!("{:?} (candle-transformers)", self.format);
        };
        let w = f.weights();
        let (kernels, target) = if w.options().uses_own_kernel() {
            ("own kernels", "Q8_0".to_owned())
        } else {
            ("Candle's kernels", format!("{:?}", w.options().dtype))
        };
        let converted = w.converted();
        if converted.is_empty() {
            return format!("fast forward pass, {kernels}, weights as stored");
        }
        let list: Vec<String> = converted
            .iter()
            .map(|(d, n)| format!("{d:?} ({n} matrices)"))
            .collect();
        format!(
            "fast forward pass, {kernels}; re-quantised to {target} at load (no kernel takes \
             them as stored): {}",
            list.join(", ")
        )
    }

    /// The architecture.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// How the weights are held (never [`WeightFormat::Auto`]: the format it chose).
    pub fn weight_format(&self) -> WeightFormat {
        self.format
    }

    /// The context length (positions the model can attend to).
    pub fn context_length(&self) -> usize {
        self.context
    }

    /// The vocabulary size from the metadata (the logits may be longer).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Tokens in the KV cache (the position of the next token).
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Forward calls made by this model (and the snapshot it was cloned from).
    pub fn forward_calls(&self) -> u64 {
        self.forward_calls
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) {
        match &mut self.weights {
            Weights::Llama(w) => w.clear_kv_cache(),
            Weights::Qwen2(w) => w.clear_kv_cache(),
            Weights::Fast(m) => m.reset(),
        }
        self.pos = 0;
    }

    /// A copy of the model in its current state, sharing the weights and the cached keys and
    /// values (later calls on either copy do not affect the other); `None` when the model does
    /// not allow it (candle-transformers' qwen2, which is not `Clone` in Candle 0.11; the fast
    /// model allows it for both architectures).
    pub fn snapshot(&self) -> Option<Model> {
        let weights = match &self.weights {
            Weights::Llama(w) => Weights::Llama(w.clone()),
            Weights::Fast(m) => Weights::Fast(m.clone()),
            Weights::Qwen2(_) => return None,
        };
        Some(Model {
            weights,
            arch: self.arch,
            format: self.format,
            device: self.device.clone(),
            pos: self.pos,
            context: self.context,
            vocab_size: self.vocab_size,
            forward_calls: self.forward_calls,
        })
    }

    /// Whether [`Model::rewind`] works for this model (the fast forward pass).
    pub fn can_rewind(&self) -> bool {
        matches!(self.weights, Weights::Fast(_))
    }

    /// Drops the cached positions from `pos` on, so that the next [`Model::forward`] continues
    /// at `pos`; an error for a model that cannot ([`Model::can_rewind`]) or a `pos` past the
    /// cache.
    pub fn rewind(&mut self, pos: usize) -> Result<(), LocalError> {
        if pos > self.pos {
            return Err(LocalError::Gguf(format!(
                "rewind to position {pos} but the cache holds {} tokens",
                self.pos
            )));
        }
        match &mut self.weights {
            Weights::Fast(m) => m.truncate(pos),
            _ => {
                return Err(LocalError::Gguf(
                    "this weight format cannot rewind its cache (use a snapshot)".into(),
                ))
            }
        }
        self.pos = pos;
        Ok(())
    }

    /// Whether [`Model::snapshot`] and [`Model::restore_from`] work for this model.
    pub fn can_snapshot(&self) -> bool {
        !matches!(self.weights, Weights::Qwen2(_))
    }

    /// Puts this model in `other`'s state (its cache and position), reusing this model's buffers
    /// where it can. Both must come from the same load ([`Model::snapshot`]).
    pub fn restore_from(&mut self, other: &Model) -> Result<(), LocalError> {
        match (&mut self.weights, &other.weights) {
            (Weights::Fast(a), Weights::Fast(b)) => a.restore_from(b)?,
            (Weights::Llama(a), Weights::Llama(b)) => **a = (**b).clone(),
            _ => {
                return Err(LocalError::Gguf(
                    "cannot restore a model from a different kind of model".into(),
                ))
            }
        }
        self.pos = other.pos;
        Ok(())
    }

    /// Runs `tokens` at positions `pos..pos + tokens.len()` and returns the logits after the last
    /// one. `pos` must be the current cache length ([`Model::pos`]) or 0 (which empties the cache
    /// first).
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, LocalError> {
        self.forward_masked(tokens, pos, None)
    }

    /// [`Model::forward`], with the logits of tokens outside `allowed` (a bitset: token `t` is
    /// bit `t % 32` of word `t / 32`) set to -inf. The fast model then computes only the allowed
    /// tokens' logits when they are few (a constrained step), skipping most of the output matrix.
    pub fn forward_masked(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        if tokens.is_empty() {
            return Err(LocalError::Gguf("forward with no tokens".into()));
        }
        if pos != self.pos && pos != 0 {
            return Err(LocalError::Gguf(format!(
                "forward at position {pos} but the cache holds {} tokens (rewind with a snapshot)",
                self.pos
            )));
        }
        if pos + tokens.len() > self.context {
            return Err(LocalError::ContextLength {
                tokens: pos + tokens.len(),
                context: self.context,
            });
        }
        if pos == 0 {
            self.reset();
        }
        let logits = match &mut self.weights {
            Weights::Fast(m) => m.forward(tokens, pos, allowed)?,
            Weights::Llama(w) => {
                let input = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
                masked(to_vec(w.forward(&input, pos)?)?, allowed)
            }
            Weights::Qwen2(w) => {
                let input = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
                masked(to_vec(w.forward(&input, pos)?)?, allowed)
            }
        };
        self.pos = pos + tokens.len();
        self.forward_calls += 1;
        Ok(logits)
    }

    /// Appends `tokens` to the cache; the logits after the last one.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
        self.forward(tokens, self.pos)
    }
}

fn masked(mut logits: Vec<f32>, allowed: Option<&[u32]>) -> Vec<f32> {
    if let Some(bits) = allowed {
        super::backend::apply_mask(&mut logits, super::Allowed::Bits(bits));
    }
    logits
}

fn to_vec(logits: Tensor) -> Result<Vec<f32>, LocalError> {
    Ok(logits
        .squeeze(0)?
        .to_dtype(candle_core::DType::F32)?
        .to_vec1::<f32>()?)
}

fn arch_of(ct: &Content) -> Result<Arch, LocalError> {
    let name = ct
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .ok_or_else(|| LocalError::Gguf("no `general.architecture` in the metadata".into()))?;
    match name.as_str() {
        "llama" => Ok(Arch::Llama),
        "qwen2" => Ok(Arch::Qwen2),
        _ => Err(LocalError::UnsupportedArchitecture(name)),
    }
}

/// The format [`WeightFormat::Auto`] stands for with this file on this device (other formats are
/// returned as they are).
pub fn resolve_format(ct: &Content, format: WeightFormat, device: &Device) -> WeightFormat {
    match format {
        WeightFormat::Auto if device.is_cpu() => WeightFormat::Fast,
        WeightFormat::Auto => {
            let f32_bytes: u64 = ct
                .tensor_infos
                .values()
                .map(|t| t.shape.elem_count() as u64 * 4)
                .sum();
            if f32_bytes <= AUTO_F32_LIMIT {
                WeightFormat::F32
            } else {
                WeightFormat::AsStored
            }
        }
        f => f,
    }
}

fn load_weights<R: std::io::Read + std::io::Seek>(
    arch: Arch,
    ct: Content,
    reader: &mut R,
    device: &Device,
) -> Result<Weights, LocalError> {
    Ok(match arch {
        Arch::Llama => Weights::Llama(Box::new(quantized_llama::ModelWeights::from_gguf(
            ct, reader, device,
        )?)),
        Arch::Qwen2 => Weights::Qwen2(Box::new(quantized_qwen2::ModelWeights::from_gguf(
            ct, reader, device,
        )?)),
    })
}

/// Rewrites the file in memory with its quantized matrices converted to `target`, then loads that.
fn convert_and_load<R: std::io::Read + std::io::Seek>(
    arch: Arch,
    ct: Content,
    reader: &mut R,
    device: &Device,
    target: GgmlDType,
) -> Result<Weights, LocalError> {
    let cpu = Device::Cpu;
    let mut names: Vec<&String> = ct.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(String, QTensor)> = Vec::with_capacity(names.len());
    for name in names {
        let q = ct.tensor(reader, name, &cpu)?;
        let q = match convert(&q, target)? {
            Some(converted) => converted,
            None => q,
        };
        tensors.push((name.clone(), q));
    }
    let metadata: HashMap<&str, &gguf_file::Value> =
        ct.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let metadata: Vec<(&str, &gguf_file::Value)> = metadata.into_iter().collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let data_bytes: usize = refs.iter().map(|(_, t)| t.storage_size_in_bytes()).sum();
    let mut buf = Cursor::new(Vec::with_capacity(data_bytes + (64 << 20)));
    gguf_file::write(&mut buf, &metadata, &refs)?;
    drop(refs);
    drop(tensors);
    buf.set_position(0);
    let ct = Content::read(&mut buf)?;
    load_weights(arch, ct, &mut buf, device)
}

/// `q` converted to `target`, or `None` to keep it: vectors, tensors already in a float format or
/// in the target, and rows not a multiple of the target's block size stay as they are.
fn convert(q: &QTensor, target: GgmlDType) -> Result<Option<QTensor>, LocalError> {
    let dtype = q.dtype();
    if q.shape().rank() < 2
        || dtype == target
        || matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
    {
        return Ok(None);
    }
    let row = q.shape().dims().last().copied().unwrap_or(0);
    if row % target.block_size() != 0 {
        return Ok(None);
    }
    let dense = q.dequantize(&Device::Cpu)?;
    Ok(Some(QTensor::quantize(&dense, target)?))
}
