//! Backends for [`contract_core::Extractor`]: implementations of [`contract_core::Backend`].
//!
//! - [`scripted::ScriptedBackend`]: fixed replies in order, for tests of the whole loop without a
//!   model.
//!
//! Local (Candle) and remote (OpenAI-compatible) backends come behind the `local` and `openai`
//! features.

#[cfg(feature = "local")]
pub mod local;
pub mod scripted;

#[cfg(feature = "local")]
pub use local::LocalBackend;
pub use scripted::ScriptedBackend;
