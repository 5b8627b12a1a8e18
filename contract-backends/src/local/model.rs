//! A GGUF model, picked from the file's `general.architecture` (llama or qwen2), with its KV
//! cache, run by one of two engines behind one interface (a `CausalLm` trait, crate-private):
//! [`Engine::Native`], this crate's own forward pass ([`super::native`], the default on the
//! CPU), or [`Engine::Candle`], candle-transformers' `quantized_llama` / `quantized_qwen2` with
//! the weights as stored or converted at load ([`WeightFormat`]: f32 for fast prompt processing,
//! Q8_0 for formats Candle has no SIMD kernel for).

use std::fs;
use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use candle_core::Device;
use candle_transformers::models::quantized_llama;

use super::candle_ops::{OpsModel, OpsWeights};
use super::causal_lm::{run_batch, CausalLm, Segment};
use super::error::LocalError;
use super::native::{NativeModel, NativeOptions, NativeWeights};

/// Which forward pass runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Engine {
    /// [`Engine::Native`] on the CPU; on a GPU [`Engine::CandleOps`]: the file's quantized
    /// matrices on the device, multiplied by Candle's CUDA kernels for those formats (no
    /// dequantised copy: nothing has measured one faster there), several sequences in one
    /// forward call.
    #[default]
    Auto,
    /// This crate's own forward pass ([`super::native`], CPU only): matrices in its kernels'
    /// formats (Q8_0, or the file's Q4_0 / Q4_1 / Q5_0 / Q4_K blocks), q/k/v and gate/up fused, an
    /// in-place KV cache with cheap snapshots and rewinds for both architectures. About 0.6-1.1
    /// bytes per parameter (1.4 when padded for Candle's VNNI kernels). Its options are
    /// [`NativeOptions`]. On another device loading fails with [`LocalError::Device`].
    Native,
    /// candle-transformers' `quantized_llama` / `quantized_qwen2`, the weights held as the
    /// [`WeightFormat`] says: the reference the other engines are tested against. One sequence
    /// a forward call; no snapshots for qwen2 (not `Clone` in Candle 0.11).
    Candle(WeightFormat),
    /// This crate's forward pass written in Candle's tensor operations, on any device Candle
    /// has (the engine [`Engine::Auto`] picks on a GPU): the file's quantized matrices as stored,
    /// multiplied by Candle's kernels for their formats, each sequence's KV cache on the device.
    /// Unlike [`Engine::Candle`], sequences at different positions run in one call
    /// ([`Model::forward_batch`]: the matrix products take every sequence's rows at once,
    /// attention runs per sequence), and both architectures have snapshots and rewinds. The
    /// operations are candle-transformers' own (only the attention's grouping differs), so on
    /// the CPU its logits are [`Engine::Candle`]'s with [`WeightFormat::AsStored`] to rounding
    /// (slower there than [`Engine::Native`]).
    CandleOps,
}

pub use super::candle_models::WeightFormat;

pub use super::arch::Arch;

/// A loaded model and its KV cache.
///
/// `forward` appends tokens to the cache; [`Model::snapshot`] keeps a copy of the cache (sharing
/// the weights) so a shared prompt prefix is computed once.
pub struct Model {
    lm: Box<dyn CausalLm>,
    arch: Arch,
    engine: Engine,
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
            .field("engine", &self.engine)
            .field("device", &super::device::device_name(&self.device))
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
    pub fn load(path: &Path, engine: Engine, device: &Device) -> Result<Self, LocalError> {
        Self::load_with(path, engine, device, NativeOptions::default())
    }

    /// Loads the GGUF file at `path` on `device`, with `native` as the options of
    /// [`Engine::Native`] (when `engine` is, or stands for, that engine).
    pub fn load_with(
        path: &Path,
        engine: Engine,
        device: &Device,
        native: NativeOptions,
    ) -> Result<Self, LocalError> {
        let mut file = fs::File::open(path).map_err(|e| LocalError::io(path, e))?;
        let ct =
            super::gguf_tokenizer::read_content_from(&mut file).map_err(|e| e.in_file(path))?;
        Self::from_content_with(ct, &mut file, engine, device, native).map_err(|e| e.in_file(path))
    }

    /// Loads a model from GGUF content read from `reader`.
    pub fn from_content<R: std::io::Read + std::io::Seek>(
        ct: Content,
        reader: &mut R,
        engine: Engine,
        device: &Device,
    ) -> Result<Self, LocalError> {
        Self::from_content_with(ct, reader, engine, device, NativeOptions::default())
    }

    /// Loads a model from GGUF content read from `reader`, with `native` as the options of
    /// [`Engine::Native`] (when `engine` is, or stands for, that engine).
    pub fn from_content_with<R: std::io::Read + std::io::Seek>(
        ct: Content,
        reader: &mut R,
        engine: Engine,
        device: &Device,
        native: NativeOptions,
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
        let engine = resolve_engine(engine, device);
        let lm: Box<dyn CausalLm> = match engine {
            Engine::Native | Engine::Auto => {
                if !device.is_cpu() {
                    return Err(LocalError::Device(format!(
                        "the native engine runs on the CPU only, not on `{}` (use Engine::Auto \
                         or Engine::Candle)",
                        super::device::device_name(device)
                    )));
                }
                let w = NativeWeights::load(&ct, reader, arch, native)?;
                context = w.context_length();
                Box::new(NativeModel::new(std::sync::Arc::new(w)))
            }
            Engine::CandleOps => {
                let w = OpsWeights::load(&ct, reader, arch, device)?;
                context = w.context_length();
                Box::new(OpsModel::new(std::sync::Arc::new(w)))
            }
            Engine::Candle(format) => {
                // quantized_llama precomputes rotary embeddings for this many positions.
                if arch == Arch::Llama {
                    context = context.min(quantized_llama::MAX_SEQ_LEN);
                }
                super::candle_models::load(arch, ct, reader, device, format)?
            }
        };
        Ok(Model {
            lm,
            arch,
            engine,
            device: device.clone(),
            pos: 0,
            context,
            vocab_size,
            forward_calls: 0,
        })
    }

    /// The native engine's weights: the bytes they hold and the options they run with (`None`
    /// for candle-transformers' models).
    pub fn native_weights(&self) -> Option<(usize, NativeOptions)> {
        let w = self.lm.native_weights()?;
        Some((w.bytes(), *w.options()))
    }

    /// How the weights are held, in words for a user: the engine and format, and for the native
    /// engine the stored formats it re-quantised to its kernels' format at load
    /// (`native forward pass, own kernels; re-quantised to Q8_0 at load ...: Q6K (12 matrices)`).
    pub fn weights_summary(&self) -> String {
        let Some(w) = self.lm.native_weights() else {
            return match self.engine {
                Engine::Candle(format) => format!("{format:?} (candle-transformers)"),
                Engine::CandleOps => "AsStored (Candle's tensor operations, batched)".to_owned(),
                other => format!("{other:?}"),
            };
        };
        let (kernels, target) = if w.options().uses_own_kernel() {
            ("own kernels", "Q8_0".to_owned())
        } else {
            ("Candle's kernels", format!("{:?}", w.options().dtype))
        };
        let converted = w.converted();
        if converted.is_empty() {
            return format!("native forward pass, {kernels}, weights as stored");
        }
        let list: Vec<String> = converted
            .iter()
            .map(|(d, n)| format!("{d:?} ({n} matrices)"))
            .collect();
        format!(
            "native forward pass, {kernels}; re-quantised to {target} at load (no kernel takes \
             them as stored, or they are fused with a part stored in another format): {}",
            list.join(", ")
        )
    }

    /// The architecture.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The engine that runs it (never [`Engine::Auto`]: the one it chose).
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The device the forward pass runs on (the logits always come back to the CPU).
    pub fn device(&self) -> &Device {
        &self.device
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
        self.lm.reset();
        self.pos = 0;
    }

    /// A copy of the model in its current state, sharing the weights and the cached keys and
    /// values (later calls on either copy do not affect the other); `None` when the model does
    /// not allow it (candle-transformers' qwen2, which is not `Clone` in Candle 0.11; the native
    /// engine and [`Engine::CandleOps`] allow it for both architectures).
    pub fn snapshot(&self) -> Option<Model> {
        Some(Model {
            lm: self.lm.snapshot()?,
            arch: self.arch,
            engine: self.engine,
            device: self.device.clone(),
            pos: self.pos,
            context: self.context,
            vocab_size: self.vocab_size,
            forward_calls: self.forward_calls,
        })
    }

    /// Whether [`Model::rewind`] works for this model (the native engine).
    pub fn can_rewind(&self) -> bool {
        self.lm.can_rewind()
    }

    /// Drops the cached positions from `pos` on, so that the next [`Model::forward`] continues
    /// at `pos`; an error for a model that cannot ([`Model::can_rewind`]) or a `pos` past the
    /// cache.
    pub fn rewind(&mut self, pos: usize) -> Result<(), LocalError> {
        if pos > self.pos {
            return Err(LocalError::State(format!(
                "rewind to position {pos} but the cache holds {} tokens",
                self.pos
            )));
        }
        self.lm.rewind(pos)?;
        self.pos = pos;
        Ok(())
    }

    /// Whether [`Model::snapshot`] and [`Model::restore_from`] work for this model.
    pub fn can_snapshot(&self) -> bool {
        self.lm.can_snapshot()
    }

    /// Puts this model in `other`'s state (its cache and position), reusing this model's buffers
    /// where it can. Both must come from the same load ([`Model::snapshot`]).
    pub fn restore_from(&mut self, other: &Model) -> Result<(), LocalError> {
        self.lm.restore_from(other.lm.as_ref())?;
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
    /// bit `t % 32` of word `t / 32`) set to -inf. The native engine then computes only the
    /// allowed tokens' logits when they are few (a constrained step), skipping most of the
    /// output matrix.
    pub fn forward_masked(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        if tokens.is_empty() {
            return Err(LocalError::State("forward with no tokens".into()));
        }
        if pos != self.pos && pos != 0 {
            return Err(LocalError::State(format!(
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
        let logits = self.lm.forward(tokens, pos, allowed)?;
        self.pos = pos + tokens.len();
        self.forward_calls += 1;
        Ok(logits)
    }

    /// Appends `tokens` to the cache; the logits after the last one.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
        self.forward(tokens, self.pos)
    }

    /// Whether [`Model::forward_batch`] runs this model's sequences in one pass over the weights
    /// ([`Engine::Native`], [`Engine::CandleOps`]) rather than one after the other.
    pub fn batches(&self) -> bool {
        self.lm.weights_id().is_some()
    }

    /// Appends each item's tokens to its model's cache, as [`Model::forward_masked`] at the
    /// model's position, and returns each item's logits. Models of a batching engine
    /// ([`Model::batches`]) loaded together (one load and its [`snapshots`](Model::snapshot))
    /// run in one forward call, the weights read once for all; others run one after the other.
    /// A sequence's logits are the same either way on the CPU (the kernels compute each row on
    /// its own); on a GPU Candle may pick another matrix kernel for more rows, whose sums are
    /// rounded in another order.
    ///
    /// # Errors
    ///
    /// As [`Model::forward_masked`] for any item (nothing is run then), or the engine's error.
    pub fn forward_batch(items: &mut [BatchItem<'_>]) -> Result<Vec<Vec<f32>>, LocalError> {
        for item in items.iter() {
            let (m, n) = (&*item.model, item.tokens.len());
            if n == 0 {
                return Err(LocalError::State("forward with no tokens".into()));
            }
            if m.pos + n > m.context {
                return Err(LocalError::ContextLength {
                    tokens: m.pos + n,
                    context: m.context,
                });
            }
        }
        // A batch is one load's sequences, of an engine that runs several at once.
        let first = items.first().and_then(|i| i.model.lm.weights_id());
        let together = items.len() > 1
            && first.is_some()
            && items.iter().all(|i| i.model.lm.weights_id() == first);
        if !together {
            return items
                .iter_mut()
                .map(|i| {
                    let pos = i.model.pos;
                    i.model.forward_masked(i.tokens, pos, i.allowed)
                })
                .collect();
        }
        let mut segments: Vec<Segment<'_>> = items
            .iter_mut()
            .map(|i| Segment {
                pos: i.model.pos,
                model: i.model.lm.as_mut(),
                tokens: i.tokens,
                allowed: i.allowed,
            })
            .collect();
        let logits = run_batch(&mut segments)?;
        drop(segments);
        for item in items.iter_mut() {
            item.model.pos += item.tokens.len();
            item.model.forward_calls += 1;
        }
        Ok(logits)
    }
}

/// One sequence of [`Model::forward_batch`]: its model and the tokens to feed at its end.
pub struct BatchItem<'a> {
    /// The sequence's model (its own cache).
    pub model: &'a mut Model,
    /// The tokens to append.
    pub tokens: &'a [u32],
    /// The tokens allowed after the last one (a bitset), as in [`Model::forward_masked`].
    pub allowed: Option<&'a [u32]>,
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

/// The engine [`Engine::Auto`] stands for on `device` (other engines are returned as they are):
/// the native engine on the CPU, [`Engine::CandleOps`] elsewhere.
pub fn resolve_engine(engine: Engine, device: &Device) -> Engine {
    match engine {
        Engine::Auto if device.is_cpu() => Engine::Native,
        Engine::Auto => Engine::CandleOps,
        e => e,
    }
}
