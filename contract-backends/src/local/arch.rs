//! The model architectures the local backend runs (shared by both engines: Candle's quantized
//! models in [`model`](super::model) and the native forward pass in [`native`](super::native)).

/// The supported architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// `llama` (Llama, SmolLM, Mistral-style).
    Llama,
    /// `qwen2`.
    Qwen2,
}

impl Arch {
    /// The GGUF `general.architecture` name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        }
    }
}
