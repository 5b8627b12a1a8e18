//! Backends for [`contract_core::Extractor`]: implementations of [`contract_core::Backend`], and
//! a batch runner.
//!
//! - [`scripted::ScriptedBackend`]: fixed replies in order, for tests of the whole loop without a
//!   model.
//! - `local::LocalBackend` (feature `local`, on by default): a GGUF model on Candle with the
//!   contract's token mask.
//! - `openai::OpenAiBackend` (feature `openai`): OpenAI and OpenAI-compatible servers (vLLM,
//!   llama.cpp) with structured outputs, JSON mode, prompt-only or vLLM guided JSON, and bounded
//!   retries.
//! - `anthropic::AnthropicBackend` (feature `anthropic`): Anthropic's Messages API with
//!   structured outputs or a forced tool call, streamed or not, and the same bounded retries.
//! - `batch::run_batch` (feature `batch`): many documents with bounded concurrency, one JSON line
//!   per document, resume and Ctrl-C.

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "batch")]
pub mod batch;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http;
#[cfg(feature = "local")]
pub mod local;
#[cfg(feature = "openai")]
pub mod openai;
pub mod scripted;

#[cfg(feature = "anthropic")]
pub use anthropic::AnthropicBackend;
#[cfg(feature = "local")]
pub use local::LocalBackend;
#[cfg(feature = "openai")]
pub use openai::OpenAiBackend;
pub use scripted::ScriptedBackend;
