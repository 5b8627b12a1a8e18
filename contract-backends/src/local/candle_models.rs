//! candle-transformers' `quantized_llama` and `quantized_qwen2` as [`CausalLm`] engines
//! ([`Engine::Candle`](super::Engine::Candle)), with the weights held as stored or converted at
//! load ([`WeightFormat`]).

use std::collections::HashMap;
use std::io::{Cursor, Read, Seek};

use candle_core::quantized::gguf_file::{self, Content};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};

use super::arch::Arch;
use super::causal_lm::{same_engine, CausalLm};
use super::error::LocalError;

/// How candle-transformers' model ([`Engine::Candle`](super::Engine::Candle)) holds the weights in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WeightFormat {
    /// As stored in the file (least memory).
    AsStored,
    /// Every quantized matrix dequantised to f32: much faster prompt processing than as stored,
    /// about 4 bytes per parameter.
    F32,
    /// Every matrix in a format other than Q8_0 re-quantised to Q8_0, whose matmul has a SIMD
    /// kernel on x86 (Q4_1, Q5_0 and Q5_1 do not): about 1.1 bytes per parameter.
    Q8_0,
}

/// One of candle-transformers' quantized models on `device`: `quantized_llama` or
/// `quantized_qwen2` ([`CandleWeights`]).
pub(crate) struct CandleModel<W> {
    weights: Box<W>,
    device: Device,
}

/// What the engine needs of a candle-transformers model's weights: the two models have the same
/// methods but share no trait.
trait CandleWeights: Send + Sized + 'static {
    /// candle-transformers' `forward(input, index_pos)`.
    fn forward(&mut self, input: &Tensor, pos: usize) -> candle_core::Result<Tensor>;
    /// candle-transformers' `clear_kv_cache`.
    fn clear_kv_cache(&mut self);
    /// Whether [`CandleWeights::copy`] gives a copy.
    const CAN_COPY: bool;
    /// A copy in the current state sharing the weights; `None` when the model is not `Clone`.
    fn copy(&self) -> Option<Self>;
}

impl CandleWeights for quantized_llama::ModelWeights {
    fn forward(&mut self, input: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        quantized_llama::ModelWeights::forward(self, input, pos)
    }
    fn clear_kv_cache(&mut self) {
        quantized_llama::ModelWeights::clear_kv_cache(self)
    }
    const CAN_COPY: bool = true;
    fn copy(&self) -> Option<Self> {
        Some(self.clone())
    }
}

/// Not `Clone` in Candle 0.11: no snapshots.
impl CandleWeights for quantized_qwen2::ModelWeights {
    fn forward(&mut self, input: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        quantized_qwen2::ModelWeights::forward(self, input, pos)
    }
    fn clear_kv_cache(&mut self) {
        quantized_qwen2::ModelWeights::clear_kv_cache(self)
    }
    const CAN_COPY: bool = false;
    fn copy(&self) -> Option<Self> {
        None
    }
}

fn boxed<W: CandleWeights>(weights: W, device: Device) -> Box<dyn CausalLm> {
    Box::new(CandleModel {
        weights: Box::new(weights),
        device,
    })
}

/// Loads `arch` from `ct` with the weights held as `format`.
pub(crate) fn load<R: Read + Seek>(
    arch: Arch,
    ct: Content,
    reader: &mut R,
    device: &Device,
    format: WeightFormat,
) -> Result<Box<dyn CausalLm>, LocalError> {
    match format {
        WeightFormat::AsStored => load_as_stored(arch, ct, reader, device),
        WeightFormat::F32 => convert_and_load(arch, ct, reader, device, GgmlDType::F32),
        WeightFormat::Q8_0 => convert_and_load(arch, ct, reader, device, GgmlDType::Q8_0),
    }
}

fn load_as_stored<R: Read + Seek>(
    arch: Arch,
    ct: Content,
    reader: &mut R,
    device: &Device,
) -> Result<Box<dyn CausalLm>, LocalError> {
    let device = device.clone();
    Ok(match arch {
        Arch::Llama => boxed(
            quantized_llama::ModelWeights::from_gguf(ct, reader, &device)?,
            device,
        ),
        Arch::Qwen2 => boxed(
            quantized_qwen2::ModelWeights::from_gguf(ct, reader, &device)?,
            device,
        ),
    })
}

/// Rewrites the file in memory with its quantized matrices converted to `target`, then loads that.
fn convert_and_load<R: Read + Seek>(
    arch: Arch,
    ct: Content,
    reader: &mut R,
    device: &Device,
    target: GgmlDType,
) -> Result<Box<dyn CausalLm>, LocalError> {
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
    load_as_stored(arch, ct, &mut buf, device)
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

/// The logits of candle-transformers' `forward` for one sequence, masked by `allowed`.
fn logits(logits: Tensor, allowed: Option<&[u32]>) -> Result<Vec<f32>, LocalError> {
    let mut logits = logits
        .squeeze(0)?
        .to_dtype(candle_core::DType::F32)?
        .to_vec1::<f32>()?;
    if let Some(bits) = allowed {
        super::sample::apply_mask(&mut logits, super::token_mask::Allowed::Bits(bits));
    }
    Ok(logits)
}

impl<W: CandleWeights> CausalLm for CandleModel<W> {
    fn forward(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        let input = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
        logits(self.weights.forward(&input, pos)?, allowed)
    }

    fn reset(&mut self) {
        self.weights.clear_kv_cache();
    }

    fn can_snapshot(&self) -> bool {
        W::CAN_COPY
    }

    fn snapshot(&self) -> Option<Box<dyn CausalLm>> {
        Some(boxed(self.weights.copy()?, self.device.clone()))
    }

    fn restore_from(&mut self, other: &dyn CausalLm) -> Result<(), LocalError> {
        let other = same_engine::<CandleModel<W>>(other)?;
        *self.weights = other.weights.copy().ok_or_else(|| {
            LocalError::State("this candle-transformers model cannot restore a snapshot".into())
        })?;
        Ok(())
    }
}
