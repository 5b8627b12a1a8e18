//! This crate's own llama / qwen2 forward pass on the CPU ([`Engine::Native`](super::Engine::Native)),
//! built for decoding speed.
//!
//! Based on candle-transformers' `quantized_llama` and `quantized_qwen2`, with what the measured
//! recipe in `notes/candle-cpu-speed.md` found to matter:
//!
//! - every matrix re-quantised to one format with a SIMD kernel on x86 (Q8_0 by default, from
//!   whatever the file stores: Q4_1, Q5_0 and Q5_1 have none);
//! - q/k/v fused into one matmul, gate/up into another;
//! - a KV cache that grows in place (one buffer per layer, no concatenation per step; f32, or
//!   f16 with [`NativeOptions::kv_f16`]), shared
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
//!
//! Laid out as candle-transformers lays out a model: `config` (the dimensions), `linear` (one
//! matrix in its kernel's layout), `weights` (loading), `layers` (norm, rotary embedding),
//! `attention` and `forward` (the pass over the KV cache); the CPU kernels themselves are in
//! `local::kernels`.

mod attention;
mod config;
mod forward;
mod layers;
mod linear;
mod options;
mod weights;

pub(crate) use config::Config;
pub(crate) use forward::NativeModel;
pub use options::{vnni_kernels, NativeOptions};
pub(crate) use weights::NativeWeights;
