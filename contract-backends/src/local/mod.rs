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
//!   `options` ([`LocalOptions`]); `worker`, the worker thread and its continuous-batching
//!   scheduler (requests that arrive together decode in one batch); `decode`, the decode loop,
//!   with an optional [`TokenMask`] applied at every step and forced tokens fed in one forward
//!   call (a request decoded alone on a GPU has its next step's mask computed on the CPU while
//!   the forward call runs); `prefix`, the prefix cache; `scoring`, answers scored by the model's
//!   likelihood, many prompts at once planned by `score`.

mod arch;
pub mod backend;
mod candle_models;
mod candle_ops;
mod causal_lm;
pub mod chat;
mod decode;
pub mod device;
pub mod fetch;
pub mod gguf_tokenizer;
mod kernels;
pub mod mask;
pub mod model;
pub mod native;
mod options;
mod prefix;
pub mod sample;
mod score;
mod scoring;
mod worker;

use std::path::PathBuf;

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

/// Why the local backend failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The default model could not be fetched.
    #[error("cannot fetch the model: {0}")]
    Fetch(String),
    /// A downloaded file does not have the expected checksum.
    #[error("{path}: sha256 {actual}, expected {expected}")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The expected sha256 (hex).
        expected: String,
        /// The sha256 found (hex).
        actual: String,
    },
    /// The GGUF file is invalid or lacks what is needed.
    #[error("gguf: {0}")]
    Gguf(String),
    /// The model's architecture is not supported.
    #[error("unsupported architecture `{0}` (supported: `llama`, `qwen2`)")]
    UnsupportedArchitecture(String),
    /// The tokenizer could not be built or failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The chat template could not be rendered.
    #[error("chat template: {0}")]
    Template(String),
    /// The token mask failed, or allowed no token before the grammar accepted.
    #[error("token mask: {0}")]
    Mask(String),
    /// The prompt (plus generation) does not fit the model's context.
    #[error("{tokens} tokens exceed the context of {context} tokens")]
    ContextLength {
        /// Tokens needed.
        tokens: usize,
        /// The model's context.
        context: usize,
    },
    /// Candle failed: its message, without the backtrace Candle may append to it.
    #[error("candle: {0}")]
    Candle(String),
    /// A library the backend builds on failed; `source` is its error, kept for
    /// [`std::error::Error::source`].
    #[error("{what}: {source}")]
    Library {
        /// What was being done (`token mask`, `tokenizer`, `chat template`).
        what: &'static str,
        /// The library's error (llguidance's, tokenizers', minijinja's, serde_json's).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The prompt rendered to no token to feed.
    #[error("the prompt has no tokens to feed")]
    EmptyPrompt,
    /// A call the model's state does not allow: a forward pass with no tokens or at a position
    /// its cache does not hold, a rewind or a restore its weights cannot do.
    #[error("model state: {0}")]
    State(String),
    /// Candle could not read part of a GGUF file; `source` is its error (without the backtrace
    /// Candle may attach).
    #[error("gguf: {what}: {}", crate::local::candle_message(source))]
    GgufRead {
        /// What was read (`tensor `blk.0.attn_q.weight``, `the header`).
        what: String,
        /// Candle's error.
        source: candle_core::Error,
    },
    /// The device cannot run the model: not a device name, a GPU in a build without the `cuda`
    /// feature, a GPU the driver cannot open, or an engine that does not run there.
    #[error("device: {0}")]
    Device(String),
    /// The decode was cancelled (its caller stopped waiting) after `tokens` generated tokens.
    #[error("the decode was cancelled after {tokens} tokens")]
    Cancelled {
        /// Tokens generated before it stopped.
        tokens: usize,
    },
    /// A model file that cannot be used: which file, and why.
    #[error("{}: {error}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        error: Box<LocalError>,
    },
}

impl From<candle_core::Error> for LocalError {
    fn from(e: candle_core::Error) -> Self {
        LocalError::Candle(candle_message(&e))
    }
}

impl LocalError {
    /// A library's error while doing `what`, its cause kept.
    pub(crate) fn library(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        LocalError::Library {
            what,
            source: source.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LocalError::Io {
            path: path.into(),
            source,
        }
    }

    /// This error as one about the file at `path` (unchanged when it names a file already).
    pub(crate) fn in_file(self, path: &std::path::Path) -> Self {
        match self {
            e @ (LocalError::Io { .. } | LocalError::File { .. }) => e,
            e => LocalError::File {
                path: path.to_path_buf(),
                error: Box::new(e),
            },
        }
    }
}

/// The message of a Candle error, without the backtrace Candle appends when `RUST_BACKTRACE` is
/// set (users read the message; the frames are Candle's, not theirs).
pub(crate) fn candle_message(e: &candle_core::Error) -> String {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } => candle_message(inner),
        E::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        other => other.to_string(),
    }
}

/// `e` without the backtraces Candle attaches when `RUST_BACKTRACE` is set, to be kept as a
/// cause ([`LocalError::GgufRead`]): the error's `Debug` then shows the error, not Candle's
/// frames.
pub(crate) fn without_backtrace(e: candle_core::Error) -> candle_core::Error {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } => without_backtrace(*inner),
        E::Context { inner, context } => E::Context {
            inner: Box::new(without_backtrace(*inner)),
            context,
        },
        E::WithPath { inner, path } => E::WithPath {
            inner: Box::new(without_backtrace(*inner)),
            path,
        },
        other => other,
    }
}

/// The tokens allowed next, as a [`TokenMask`] reports them.
#[derive(Debug, Clone, Copy)]
pub enum Allowed<'a> {
    /// Every token is allowed (no constraint at this step).
    All,
    /// A bitset over token ids: token `t` is allowed when bit `t % 32` of word `t / 32` is set.
    /// Ids past the end of the slice are disallowed.
    Bits(&'a [u32]),
}

/// A token-level constraint driven by the decode loop (implemented by the contract's grammar mask).
///
/// The loop, for one generation:
///
/// 1. `forced()`: tokens the constraint forces before anything is sampled (e.g. `{"`); they
///    are appended to the prompt and passed to `consume`.
/// 2. Each step: if `is_done()`, generation ends (finish reason `stop`); otherwise `allowed()`
///    masks the logits (disallowed ones set to -inf), a token is sampled. A stop token (EOS,
///    `<|im_end|>`) ends generation *without* being passed to `consume` (it is sampled only
///    when the mask allows it, i.e. when the grammar accepts). Any other token is passed to
///    `consume(&[t])`; then `forced()` gives the tokens that follow necessarily, which are
///    passed to `consume` as well and fed to the model together with `t` in one forward call.
///
/// If every token is masked out, the loop fails with [`LocalError::Mask`].
pub trait TokenMask {
    /// The tokens allowed at the next step.
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError>;
    /// The tokens the constraint forces next (possibly none), to feed without sampling.
    fn forced(&mut self) -> Result<Vec<u32>, LocalError>;
    /// Advances the constraint over `tokens` (sampled or forced).
    fn consume(&mut self, tokens: &[u32]) -> Result<(), LocalError>;
    /// Whether the constraint is complete and admits no further token.
    fn is_done(&self) -> bool;
}

/// Builds the [`TokenMask`] for a request (from `Request::grammar`), or none to decode freely.
///
/// Set on a [`LocalBackend`] with [`LocalBackend::with_masks`].
pub trait MaskFactory: Send + Sync {
    /// The mask for `req`, or `None` for unconstrained decoding.
    fn mask_for(
        &self,
        req: &contract_core::extract::Request,
    ) -> Result<Option<Box<dyn TokenMask + Send>>, LocalError>;
}
