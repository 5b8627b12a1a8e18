//! The backend value ([`OpenAiBackend`]: its HTTP client and settings) and the settings' types
//! ([`Mode`], [`MaxTokensField`]), in a file of their own: the requests (`request.rs`), the
//! streamed replies (`stream.rs`) and the [`Backend`](contract_core::extract::Backend) impl
//! (`mod.rs`) all read them.

use std::time::Duration;

use crate::http::RetryPolicy;

/// What the server is asked to enforce; see the [module docs](super).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Mode {
    /// `response_format` `json_schema` with `strict: true` and the contract's strict schema.
    #[default]
    StructuredOutputs,
    /// `response_format` `json_object`, then validation.
    JsonMode,
    /// No `response_format`: the signature in the prompt, then validation.
    PromptOnly,
    /// vLLM's `guided_json` extra body field with the contract's strict schema.
    VllmGuidedJson,
    /// `response_format` `{type: json_object, schema}` with the contract's strict schema: how
    /// llama-cpp-python's server (which refuses the `json_schema` type) constrains to a schema.
    JsonObjectSchema,
    /// vLLM's `guided_grammar` extra body field with the contract's grammar in llguidance's
    /// Lark syntax (vLLM started with `--guided-decoding-backend guidance`): grounded strings as
    /// substring terminals over the request's document, grounded numbers as the numbers it
    /// writes. Values grounded in another field are grounded in the whole document there (a
    /// server cannot compose the grammar per field); the extractor checks them after decoding.
    ///
    /// The one mode that carries think-then-fill
    /// ([`Constraint::think`](contract_core::Constraint::think)): the grammar sent opens with
    /// the bounded reasoning block ([`Think::wrap_lark`](contract_core::grammar::Think::wrap_lark)).
    /// In every other mode what the server enforces has no room for a trace (a JSON Schema
    /// starts at `{`), so the request goes as without it: the prompt still asks for the trace,
    /// and a server that enforces a schema holds the reply to the JSON alone.
    VllmGuidedGrammar,
}

impl Mode {
    /// The snake_case name (`structured_outputs`, `json_mode`, `prompt_only`, `vllm_guided_json`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::StructuredOutputs => "structured_outputs",
            Mode::JsonMode => "json_mode",
            Mode::PromptOnly => "prompt_only",
            Mode::VllmGuidedJson => "vllm_guided_json",
            Mode::JsonObjectSchema => "json_object_schema",
            Mode::VllmGuidedGrammar => "vllm_guided_grammar",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    /// Reads a mode name: `structured_outputs` (or `strict`, `schema`), `json_mode` (or `json`),
    /// `prompt_only` (or `prompt`), `vllm_guided_json` (or `vllm`, `guided_json`),
    /// `json_object_schema` (or `llama_cpp`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "structured_outputs" | "strict" | "schema" => Ok(Mode::StructuredOutputs),
            "json_mode" | "json" | "json_object" => Ok(Mode::JsonMode),
            "prompt_only" | "prompt" => Ok(Mode::PromptOnly),
            "vllm_guided_json" | "vllm" | "guided_json" => Ok(Mode::VllmGuidedJson),
            "json_object_schema" | "llama_cpp" | "llamacpp" => Ok(Mode::JsonObjectSchema),
            "vllm_guided_grammar" | "guided_grammar" | "lark" => Ok(Mode::VllmGuidedGrammar),
            other => Err(format!(
                "unknown mode `{other}` (expected `structured_outputs`, `json_mode`, \
                 `prompt_only`, `vllm_guided_json`, `vllm_guided_grammar` or `json_object_schema`)"
            )),
        }
    }
}

/// Which body field carries [`Request::max_tokens`](contract_core::extract::Request::max_tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MaxTokensField {
    /// `max_tokens`: understood by OpenAI's non-reasoning models, vLLM and llama.cpp.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: required by OpenAI's reasoning models.
    MaxCompletionTokens,
}

/// A chat-completions backend for OpenAI and OpenAI-compatible servers; see the
/// [module docs](crate::openai).
///
/// ```no_run
/// use std::time::Duration;
/// use contract_backends::openai::{Mode, OpenAiBackend};
/// let backend = OpenAiBackend::builder("gpt-4o-mini")   // key from OPENAI_API_KEY
///     .mode(Mode::StructuredOutputs)
///     .timeout(Duration::from_secs(60))
///     .max_retries(4)
///     .build()?;
/// let local = OpenAiBackend::builder("smollm2")
///     .base_url("http://127.0.0.1:8000/v1")
///     .mode(Mode::JsonMode)
///     .build()?;
/// # Ok::<(), contract_core::BackendError>(())
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiBackend {
    pub(super) http: reqwest::Client,
    pub(super) url: String,
    pub(super) query: Vec<(String, String)>,
    pub(super) headers: reqwest::header::HeaderMap,
    pub(super) base_url: String,
    pub(super) model: String,
    pub(super) mode: Mode,
    pub(super) timeout: Duration,
    pub(super) retry: RetryPolicy,
    pub(super) max_tokens_field: MaxTokensField,
    pub(super) score_concurrency: usize,
    pub(super) stream_usage: bool,
}
