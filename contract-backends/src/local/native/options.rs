//! [`NativeOptions`], how the native engine holds its matrices and its KV cache, and what the CPU
//! decides of them by default ([`vnni_kernels`]). Read by every part of the native forward pass.

use candle_core::quantized::GgmlDType;

use super::super::kernels;

/// How the native engine ([`Engine::Native`](crate::local::Engine::Native)) holds its matrices; the
/// defaults are what it uses unless told otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct NativeOptions {
    /// The quantized format of every matrix (Q8_0 unless measuring something else).
    pub dtype: GgmlDType,
    /// Pad inner dimensions to a multiple of 256 (`None`: when Candle's repacked VNNI kernels
    /// exist on this CPU).
    pub pad: Option<bool>,
    /// Keep an f32 copy of every matrix for calls with at least this many tokens (`None`: no
    /// copy; prompt processing uses the quantized matrices).
    pub dense_from: Option<usize>,
    /// Use our own matmuls (int8 and 4-bit; AVX2, and AVX-512 VNNI where the CPU has it)
    /// instead of Candle's (`None`: on every x86 CPU with AVX2, FMA and F16C, VNNI or not). They
    /// take Q8_0 only as [`NativeOptions::dtype`]. On a CPU with AVX-512 VNNI the numbers are
    /// not bit for bit those of an AVX2-only CPU (the same exact integer products, other
    /// rounding of their float sums); on either, a row's numbers do not depend on the call it
    /// comes in (batch, prefix cache).
    ///
    /// Measured on an AVX-512 VNNI machine (2026-12-01): with Candle's repacked VNNI kernels
    /// (padded to 256) the native engine's logits on the tiny test model were 0.54 off the
    /// reference (the test allows 0.5) and SmolLM2's greedy generation left the reference's after
    /// one token, where our own kernels stay within the tests' bounds; so ours are the default
    /// wherever they run, and Candle's stay one option away (`own_kernel(false)`).
    pub own_kernel: Option<bool>,
    /// With our own kernels, keep matrices stored in Q4_0 / Q4_1 / Q5_0 / Q4_K as they are
    /// (default): the file's numbers (Q4_K's sub-block scales rounded to f16), 0.56-0.69 bytes
    /// per weight; else re-quantize them to Q8_0 (1.06 bytes per weight).
    pub keep_4bit: bool,
    /// Hold the KV cache in f16, as llama.cpp does, instead of f32 (default): half the bytes a
    /// decoding step reads from the cache, each key and value rounded to 11 significant bits.
    ///
    /// Measured (docs/benchmarks.md, "f16 KV cache"): SmolLM2-135M decodes 1.11-1.16x faster
    /// after a 256-token prompt (its cache is a seventh of its weights' bytes there), Qwen2.5-
    /// Coder-0.5B no faster (its two KV heads make a small cache), and on a fresh seed of the
    /// filings study Qwen's passage ranking moved enough to lose 2 of 38 correct answers; so
    /// it is off unless asked for.
    pub kv_f16: bool,
}

impl NativeOptions {
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
    /// Keeps 4- and 5-bit matrices as stored (with our own kernels), or re-quantizes them to
    /// Q8_0.
    pub fn keep_4bit(mut self, on: bool) -> Self {
        self.keep_4bit = on;
        self
    }

    /// Holds the KV cache in f16 (`true`) or f32 (`false`, the default).
    pub fn kv_f16(mut self, on: bool) -> Self {
        self.kv_f16 = on;
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

impl Default for NativeOptions {
    fn default() -> Self {
        NativeOptions {
            dtype: GgmlDType::Q8_0,
            pad: None,
            dense_from: None,
            own_kernel: None,
            keep_4bit: true,
            kv_f16: false,
        }
    }
}

/// Whether Candle 0.11's repacked x86 kernels (`repack_x86::select`) take Q8_0 matrices on this
/// CPU: AVX-512 VNNI, or AVX-VNNI with AVX2 (plain AVX2 falls back to the per-row dot products).
pub fn vnni_kernels() -> bool {
    kernels::vnni()
}

pub(crate) fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}
