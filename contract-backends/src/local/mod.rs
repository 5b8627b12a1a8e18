//! A local GGUF model on Candle, with the contract's token mask (feature `local`).
//!
//! - [`fetch`]: the default model (SmolLM2-135M-Instruct, Q4_1), fetched once into a cache.
//! - [`device`]: the CPU or a GPU (`cuda:N`, feature `cuda`), parsed from a name.
//! - [`gguf_tokenizer`]: a `tokenizers` tokenizer (and its `tokenizer.json`) built from the GGUF
//!   metadata, as llama.cpp builds it.
//! - [`chat`]: the GGUF's chat template, rendered with minijinja (ChatML when absent).
//! - [`model`]: the model, picked from `general.architecture` (llama or qwen2), run by one of
//!   three engines behind one interface: this crate's own forward pass on the CPU
//!   ([`Engine::Native`], the default there), the same written in Candle's tensor operations for
//!   any device ([`Engine::CandleOps`], the default on a GPU; both decode several sequences in
//!   one forward call), or candle-transformers' quantized llama / qwen2 ([`Engine::Candle`], the
//!   reference).
//! - [`native`]: the native forward pass (Q8_0 or 4-bit weights, fused matmuls, in-place KV
//!   cache); its CPU kernels and feature detection are in a private `kernels` module.
//! - [`mask`]: the contract's token mask (llguidance plus the cross-field value filter,
//!   [`mask::rules`]).
//! - [`sample`]: greedy, or temperature / top-p with a seed.
//! - [`backend`]: [`LocalBackend`], its loading and its
//!   [`Backend`](contract_core::extract::Backend) impl. Its parts are private modules beside it:
//!   `state`, what a [`LocalBackend`] holds and the work its worker thread is given (data only);
//!   `output` ([`Output`], [`DecodeStats`]); `options` ([`LocalOptions`]); `worker`, the worker thread and its continuous-batching
//!   scheduler (requests that arrive together decode in one batch); `decode`, the decode loop,
//!   with an optional [`TokenMask`] applied at every step and forced tokens fed in one forward
//!   call (a request decoded alone on a GPU has its next step's mask computed on the CPU while
//!   the forward call runs); `prefix`, the prefix cache; `scoring`, answers scored by the model's
//!   likelihood, many prompts at once planned by `score`.
//! - `error` ([`LocalError`]) and `token_mask` ([`TokenMask`], [`Allowed`], [`MaskFactory`]):
//!   what the other parts share, in files that import none of them.

mod arch;
pub mod backend;
mod candle_models;
mod candle_ops;
mod causal_lm;
pub mod chat;
mod decode;
pub mod device;
mod error;
pub mod fetch;
pub mod gguf_tokenizer;
mod kernels;
pub mod mask;
pub mod model;
pub mod native;
mod options;
mod output;
mod prefix;
pub mod sample;
mod score;
mod scoring;
mod state;
mod token_mask;
mod worker;

pub use backend::{
    candle_thread_env, BatchScores, DecodeStats, LocalBackend, LocalOptions, Output, Scores,
};
/// Candle's device type, for [`LocalOptions::device`] (re-exported so that a program need not
/// depend on `candle-core` itself).
pub use candle_core::Device;
pub use chat::ChatTemplate;
pub use device::{parse_device, CUDA_COMPILED};
pub use model::{BatchItem, Engine, Model, WeightFormat};
pub use native::NativeOptions;
pub use sample::Sampler;

pub use error::LocalError;
pub use token_mask::{Allowed, MaskFactory, TokenMask};
