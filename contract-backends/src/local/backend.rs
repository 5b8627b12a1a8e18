//! [`LocalBackend`]: a GGUF model on Candle answering [`Request`]s, with the contract's token mask;
//! here its loading, its shared state and its [`Backend`] impl.
//!
//! Its parts are private modules beside this file, their public types re-exported here:
//! `options` ([`LocalOptions`], [`candle_thread_env`]); `worker`, the worker thread and its
//! continuous-batching scheduler; `decode`, the decode loop, which masks every step's logits with
//! the [`TokenMask`] (when there is one) and feeds the tokens the mask forces together with the
//! sampled token in one forward call ([`Output`], [`DecodeStats`]); `prefix`, the prefix cache
//! (the leading system messages prefilled once, their KV cache reused while the next request
//! starts with them); `scoring`, answers scored by the model's likelihood ([`Scores`],
//! [`BatchScores`]), many prompts at once planned as a token trie by `score`.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use candle_core::Device;
use contract_core::extract::{
    Backend, BackendError, Request, Response, ScoreRequest, ScoreResponse,
};
use contract_core::prompt::{Budget, Message};

use super::chat::ChatTemplate;
use super::error::{backend_error, LocalError};
use super::fetch;
use super::gguf_tokenizer::{read_content, GgufTokenizer};
use super::mask::{GrammarMasks, MaskEngine};
use super::model::Model;
use super::output::TextSender;
use super::state::{CancelOnDrop, Inner, Job, ScoreJob, State, Work};
use super::token_mask::{MaskFactory, TokenMask};

pub use super::options::{candle_thread_env, LocalOptions};
pub use super::output::{DecodeStats, Output};
pub use super::sample::apply_mask;
pub use super::scoring::{BatchScores, Scores};
pub use super::state::LocalBackend;

impl LocalBackend {
    /// Loads the GGUF file at `path` with default options.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, LocalError> {
        Self::with_options(path, LocalOptions::default())
    }

    /// Loads the default model (see [`fetch::default_model_path`]), fetching it on first use.
    pub fn default_model() -> Result<Self, LocalError> {
        Self::with_options(fetch::default_model_path()?, LocalOptions::default())
    }

    /// Loads the GGUF file at `path`.
    ///
    /// Every error names the file it is about ([`LocalError::File`]): a truncated file, a tensor
    /// index or hyperparameters that disagree, a tokenizer that cannot be built, a chat template
    /// that does not compile or does not render a system and a user message.
    pub fn with_options(path: impl AsRef<Path>, options: LocalOptions) -> Result<Self, LocalError> {
        let path = path.as_ref().to_path_buf();
        let ct = read_content(&path)?;
        let tokenizer = match &options.tokenizer_json {
            Some(json) => GgufTokenizer::from_json_file(&ct, json).map_err(|e| e.in_file(json))?,
            None => GgufTokenizer::from_content(&ct).map_err(|e| e.in_file(&path))?,
        };
        let template = ChatTemplate::for_tokenizer(&tokenizer)
            .and_then(|t| {
                t.render(&[Message::system("s"), Message::user("u")], true)?;
                Ok(t)
            })
            .map_err(|e| e.in_file(&path))?;
        let mut file = std::fs::File::open(&path).map_err(|e| LocalError::io(&path, e))?;
        // Before loading: converting the weights may start the native engine's thread team.
        super::kernels::team::Team::global_with(options.threads);
        let model = Model::from_content_with(
            ct,
            &mut file,
            options.engine,
            &options.device,
            options.native,
        )
        .map_err(|e| e.in_file(&path))?;
        Ok(LocalBackend {
            inner: Arc::new(Inner {
                path,
                tokenizer: Arc::new(tokenizer),
                template,
                options,
                contract_masks: OnceLock::new(),
                state: Mutex::new(State {
                    model,
                    prefix: None,
                    scored: Vec::new(),
                    blank: None,
                }),
                stats: Mutex::new(DecodeStats::default()),
                worker: OnceLock::new(),
            }),
            masks: None,
        })
    }

    /// Constrains every request that has a grammar with the masks `factory` builds (instead of
    /// the contract's own mask).
    pub fn with_masks(mut self, factory: Arc<dyn MaskFactory>) -> Self {
        self.masks = Some(factory);
        self
    }

    /// The mask factory for requests with a grammar: the one given, else (when
    /// [`LocalOptions::constrain`]) the contract's mask on this model's tokenizer.
    pub fn mask_factory(&self) -> Result<Option<Arc<dyn MaskFactory>>, LocalError> {
        if let Some(f) = &self.masks {
            return Ok(Some(f.clone()));
        }
        if !self.inner.options.constrain {
            return Ok(None);
        }
        self.inner
            .contract_masks
            .get_or_init(|| {
                MaskEngine::cached(
                    self.inner.tokenizer.json().as_bytes(),
                    self.inner.tokenizer.stop_tokens(),
                )
                .map(|engine| Arc::new(GrammarMasks::new(engine)) as Arc<dyn MaskFactory>)
                .map_err(|e| e.to_string())
            })
            .clone()
            .map(Some)
            .map_err(LocalError::Mask)
    }

    /// The GGUF file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Arc<GgufTokenizer> {
        &self.inner.tokenizer
    }

    /// The chat template.
    pub fn template(&self) -> &ChatTemplate {
        &self.inner.template
    }

    /// How the model holds its weights ([`Model::weights_summary`]), for a user to read:
    /// which stored formats were re-quantised at load.
    pub fn weights_summary(&self) -> String {
        self.state().model.weights_summary()
    }

    /// The options.
    pub fn options(&self) -> &LocalOptions {
        &self.inner.options
    }

    /// The device the model runs on ([`LocalOptions::device`]).
    pub fn device(&self) -> &Device {
        &self.inner.options.device
    }

    /// Totals over the generations of this backend and its clones so far.
    pub fn decode_stats(&self) -> DecodeStats {
        *self.stats()
    }

    /// The totals, to add to.
    pub(super) fn stats(&self) -> MutexGuard<'_, DecodeStats> {
        self.inner.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops the cached prompt prefix.
    pub fn clear_prefix_cache(&self) {
        self.state().prefix = None;
    }

    /// A [`Budget`] of `max_tokens` prompt tokens for this model: the chat template's tokens
    /// (around each message, and once per prompt with the generation prompt) measured by
    /// rendering short conversations, so an [`Extractor::budget`](contract_core::Extractor::budget)
    /// with this model's [tokenizer](Self::tokenizer) counts what the model will be given.
    /// Use the model's context length less the reply's tokens, e.g. `budget(2048 - 256)`.
    pub fn budget(&self, max_tokens: usize) -> Result<Budget, LocalError> {
        let tok = &self.inner.tokenizer;
        let words = |t: &str| contract_core::prompt::Tokenizer::encode(tok.as_ref(), t).len();
        let (s, u) = ("You read.", "A document.");
        let two = self
            .prompt_tokens(&[Message::system(s), Message::user(u)])?
            .len();
        let three = self
            .prompt_tokens(&[Message::system(s), Message::user(u), Message::user(u)])?
            .len();
        let per_message = three.saturating_sub(two + words(u));
        // The budget counts the system and user texts joined by one separator.
        let joined = words(&format!("{s}\n{u}"));
        let fixed = two.saturating_sub(joined + 2 * per_message);
        Ok(Budget::new(max_tokens).with_template(per_message, fixed))
    }

    /// The prompt tokens of `messages` (chat template applied, generation prompt added).
    pub fn prompt_tokens(&self, messages: &[Message]) -> Result<Vec<u32>, LocalError> {
        let text = self.inner.template.render(messages, true)?;
        self.inner.tokenizer.encode_prompt(&text)
    }
}

impl LocalBackend {
    /// The mask for `req`, when it carries a constraint and the backend constrains.
    pub(super) fn mask_for(
        &self,
        req: &Request,
    ) -> Result<Option<Box<dyn TokenMask + Send>>, BackendError> {
        match &req.constraint.decoding {
            Some(_) => match self.mask_factory().map_err(backend_error)? {
                Some(f) => f.mask_for(req).map_err(backend_error),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    /// One request, decoded on the calling thread; stops when `cancel` is set; its text sent
    /// to `text` as it is decoded, when given.
    pub(super) fn complete_now(
        &self,
        req: &Request,
        cancel: &AtomicBool,
        text: Option<TextSender>,
    ) -> Result<Response, BackendError> {
        let mut mask = self.mask_for(req)?;
        // A reasoning block's tokens come on top of the answer's limit.
        let max_tokens = req
            .constraint
            .generation_limit(req.max_tokens.unwrap_or(self.inner.options.max_tokens));
        let out = self
            .decode(
                &req.messages.0,
                max_tokens,
                &req.sampling,
                mask.as_deref_mut().map(|m| m as &mut dyn TokenMask),
                Some(cancel),
                text,
            )
            .map_err(backend_error)?;
        Ok(self.response(out))
    }

    /// What [`Backend::complete`] answers for a generation.
    pub(super) fn response(&self, out: Output) -> Response {
        Response {
            text: out.text,
            reasoning: None,
            finish_reason: Some(out.finish_reason),
            prompt_tokens: Some(out.prompt_tokens as u32),
            completion_tokens: Some(out.tokens.len() as u32),
            forward_calls: Some(out.forward_calls),
        }
    }
}

impl Backend for LocalBackend {
    /// Runs the request on the backend's worker thread and waits for it without blocking the
    /// caller. Dropping the returned future (a timeout around it, a cancelled task) stops the
    /// decode at its next step and frees the model for the next request.
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Work::Complete(Job {
            backend: self.clone(),
            req: req.clone(),
            cancel,
            reply: tx,
            text: None,
        }))?;
        rx.await.unwrap_or_else(|_| {
            Err(BackendError::Other {
                message: "the local decode ended without an answer (it panicked)".into(),
            })
        })
    }

    /// [`LocalBackend::complete`], each piece of text handed to `on_text` as the decode loop
    /// samples it (in the worker's batch as without streaming: the decode loop sends the text
    /// through a channel, and `on_text` runs on the caller's task). The pieces, concatenated,
    /// are the final text. Dropping the future cancels the decode as `complete`'s does.
    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (text_tx, mut text_rx) = tokio::sync::mpsc::unbounded_channel();
        self.submit(Work::Complete(Job {
            backend: self.clone(),
            req: req.clone(),
            cancel,
            reply: tx,
            text: Some(text_tx),
        }))?;
        // The channel closes when the worker drops the request (answered, failed or cancelled).
        let mut sent = String::new();
        while let Some(piece) = text_rx.recv().await {
            on_text(&piece);
            sent.push_str(&piece);
        }
        let response = rx.await.unwrap_or_else(|_| {
            Err(BackendError::Other {
                message: "the local decode ended without an answer (it panicked)".into(),
            })
        })?;
        // The rest of the final text (the last step's, a character held back). The decode loop
        // sends only text that extends what it sent, so the final text begins with it; were it
        // not so, the response stays the one `complete` gives and nothing more is handed on.
        if let Some(rest) = response.text.strip_prefix(sent.as_str()) {
            if !rest.is_empty() {
                on_text(rest);
            }
        }
        Ok(response)
    }

    /// Scores the answers after every prompt of `req` on the backend's worker thread
    /// ([`LocalBackend::score_prompts`]: shared prefixes computed once, many sequences a forward
    /// call), taking turns with the requests it decodes, and waits without blocking the caller.
    /// Dropping the returned future stops the scoring before its next forward call. The
    /// log-probabilities are the model's own over each whole answer (`exact`).
    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Work::Score(ScoreJob {
            backend: self.clone(),
            req: req.clone(),
            cancel,
            reply: tx,
        }))?;
        rx.await.unwrap_or_else(|_| {
            Err(BackendError::Other {
                message: "the local scoring ended without an answer (it panicked)".into(),
            })
        })
    }
}
