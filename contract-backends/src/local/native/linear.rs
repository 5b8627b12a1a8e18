//! One weight matrix in the layout its kernel takes: our own int8 or 4-bit blocks, or a Candle
//! quantized tensor, with an optional dense copy for long calls.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Tensor};

use super::options::NativeOptions;
use crate::local::error::LocalError;
use crate::local::kernels::q4::{Q4Format, Q4Matrix};
use crate::local::kernels::q8::Q8Matrix;

/// The quantized form of a matrix.
pub(super) enum Quantized {
    /// Our own int8 layout and kernel.
    Own(Q8Matrix),
    /// The file's 4- or 5-bit blocks (Q4_0, Q4_1, Q5_0, Q4_K) in our own layout and kernel.
    Own4(Q4Matrix),
    /// A Candle quantized tensor, multiplied by its CPU kernel.
    Candle(QTensor),
}

/// One matrix `y = x W^T`, `W` of `rows x cols` (padded), quantized, and optionally dense.
pub(super) struct Linear {
    pub(super) q: Quantized,
    pub(super) dense: Option<Tensor>,
    pub(super) rows: usize,
    pub(super) cols: usize,
    /// The stored formats of the parts, when they were dequantised and quantized again (no
    /// kernel takes them as stored).
    pub(super) converted_from: Vec<GgmlDType>,
}

impl Linear {
    /// `parts` (each `r_i x c` with `c <= cols`, rows padded to the number given) stacked on
    /// rows, columns zero-padded to `cols`, rows zero-padded to `rows`. With our own kernels,
    /// matrices stored in Q4_0 / Q4_1 / Q5_0 / Q4_K (when [`NativeOptions::keep_4bit`]) or Q8_0
    /// are taken as they are (Q4_K only when `cols` is a multiple of its 256-value blocks, the
    /// file's own columns unpadded); anything else (Q6_K, mixed formats in one fused matrix) is
    /// dequantised and quantized again.
    pub(super) fn build(
        parts: &[(&QTensor, usize)],
        rows: usize,
        cols: usize,
        opts: &NativeOptions,
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
            let low_bit = match dtype {
                Some(GgmlDType::Q4_0) => Some(Q4Format::Q4_0),
                Some(GgmlDType::Q4_1) => Some(Q4Format::Q4_1),
                Some(GgmlDType::Q5_0) => Some(Q4Format::Q5_0),
                Some(GgmlDType::Q4K) => Some(Q4Format::Q4K),
                _ => None,
            };
            q = match (dtype, low_bit) {
                (_, Some(format)) if opts.keep_4bit => {
                    Q4Matrix::from_blocks(format, &blocks, rows, cols).map(Quantized::Own4)
                }
                (Some(GgmlDType::Q8_0), _) => {
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
    pub(super) fn dense_stack(
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
    pub(super) fn forward(
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
    pub(super) fn forward_rows(&self, x: &[f32], ids: &[u32]) -> Option<Vec<f32>> {
        match &self.q {
            Quantized::Own(q) if ids.iter().all(|&r| (r as usize) < q.rows()) => {
                Some(q.dot_rows(x, ids))
            }
            _ => None,
        }
    }

    /// Row `r` dequantised (`cols` long), from our own layout only.
    pub(super) fn row(&self, r: usize, out: &mut [f32]) -> bool {
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

    pub(super) fn bytes(&self) -> usize {
        let q = match &self.q {
            Quantized::Own(q) => q.bytes(),
            Quantized::Own4(q) => q.bytes(),
            Quantized::Candle(q) => q.storage_size_in_bytes(),
        };
        q + self.dense.as_ref().map_or(0, |d| d.elem_count() * 4)
    }
}
