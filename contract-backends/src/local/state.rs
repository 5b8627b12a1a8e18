//! What a [`LocalBackend`] is made of: the state its clones share ([`Inner`]: the tokenizer, the
//! chat template, the options, the model behind a lock with its caches) and the work its worker
//! thread is given ([`Work`]). Data only: loading and the `Backend` impl are in `backend.rs`; the
//! decode loop, the prefix cache, scoring and the worker are written as `impl LocalBackend`
//! blocks in their own files, which read these types from here.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock};

use contract_core::extract::{BackendError, Request, Response, ScoreRequest, ScoreResponse};

use super::chat::ChatTemplate;
use super::gguf_tokenizer::GgufTokenizer;
use super::model::Model;
use super::options::LocalOptions;
use super::output::{DecodeStats, TextSender};
use super::token_mask::MaskFactory;

/// The model and what is cached with it, behind the backend's lock.
pub(super) struct State {
    pub(super) model: Model,
    pub(super) prefix: Option<Prefix>,
    /// The tokens whose keys and values the model's cache holds, in order, when the last call
    /// was [`LocalBackend::score_continuations`] on a model that can rewind (empty otherwise):
    /// the next such call computes only what its prompt does not share with them.
    pub(super) scored: Vec<u32>,
    /// An empty copy of `model` (its weights shared), once a batch of prompts was scored: each
    /// sequence of [`Scorer`] starts from a copy of it.
    pub(super) blank: Option<Model>,
}

/// A local GGUF model (llama or qwen2 architecture) on Candle.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use contract_backends::local::LocalBackend;
/// let backend = LocalBackend::default_model()?; // fetches SmolLM2-135M-Instruct once
/// # Ok(()) }
/// ```
///
/// A clone is cheap and shares the model. [`Backend::complete`](contract_core::extract::Backend::complete) runs the decode on the backend's
/// worker thread (started on the first request) and waits for it without blocking the async
/// caller; dropping that future (a `tokio::time::timeout` that fires, a cancelled task) stops the
/// decode at its next step. Requests that arrive while others decode join them, up to
/// [`LocalOptions::max_batch`]: one forward call a step feeds them all (continuous batching:
/// each leaves when it ends, the next waiting one takes its place), and each decodes exactly as
/// it would alone. [`Backend::score`](contract_core::extract::Backend::score) runs on the same worker, one forward call of the oldest
/// scoring after each decode step ([`LocalBackend::score_prompts`]). The synchronous methods
/// ([`LocalBackend::generate`], [`LocalBackend::score_continuations`],
/// [`LocalBackend::score_prompts`]) run on the calling thread.
#[derive(Clone)]
pub struct LocalBackend {
    pub(super) inner: Arc<Inner>,
    pub(super) masks: Option<Arc<dyn MaskFactory>>,
}

/// What the clones of one [`LocalBackend`] share.
pub(super) struct Inner {
    pub(super) path: PathBuf,
    pub(super) tokenizer: Arc<GgufTokenizer>,
    pub(super) template: ChatTemplate,
    pub(super) options: LocalOptions,
    pub(super) contract_masks: OnceLock<Result<Arc<dyn MaskFactory>, String>>,
    pub(super) state: Mutex<State>,
    pub(super) stats: Mutex<DecodeStats>,
    /// The worker thread's queue, once started (or why it could not start).
    pub(super) worker: OnceLock<Result<Sender<Work>, String>>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("path", &self.inner.path)
            .field("options", &self.inner.options)
            .field("custom_masks", &self.masks.is_some())
            .finish()
    }
}

/// The cached prefix: its tokens and the model holding their KV cache.
pub(super) struct Prefix {
    pub(super) tokens: Vec<u32>,
    pub(super) model: Model,
}

/// What the worker thread is given.
pub(super) enum Work {
    /// A request to decode.
    Complete(Job),
    /// A batch of prompts to score.
    Score(ScoreJob),
}

/// A request for the worker thread, and where its answer goes.
pub(super) struct Job {
    pub(super) backend: LocalBackend,
    pub(super) req: Request,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<Response, BackendError>>,
    /// Where the text goes as it is decoded, for `Backend::complete_streaming`.
    pub(super) text: Option<TextSender>,
}

/// A [`ScoreRequest`] for the worker thread, and where its answer goes.
pub(super) struct ScoreJob {
    pub(super) backend: LocalBackend,
    pub(super) req: ScoreRequest,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<ScoreResponse, BackendError>>,
}

/// Sets the flag when dropped: the futures of [`Backend::complete`] and [`Backend::score`] hold
/// one, so that dropping the future cancels its work.
pub(super) struct CancelOnDrop(pub(super) Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
