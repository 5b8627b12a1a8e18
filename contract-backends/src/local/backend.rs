//! [`LocalBackend`]: a GGUF model on Candle answering [`Request`]s, with the contract's token mask.
//!
//! The decode loop masks every step's logits with the [`TokenMask`] (when there is one), and feeds
//! the tokens the mask forces together with the sampled token in one forward call. A prompt prefix
//! made of the leading system messages is prefilled once and its KV cache reused while the next
//! request starts with the same prefix. Answers are scored after many prompts at once in a
//! private `score` module (a token trie of the prompts, several sequences a forward call).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use candle_core::Device;
use contract_core::extract::{
    Backend, BackendError, FinishReason, Request, Response, Sampling, ScoreRequest, ScoreResponse,
};
use contract_core::prompt::{Budget, Message, Messages, Role};

use super::chat::ChatTemplate;
use super::gguf_tokenizer::{read_content, GgufTokenizer};
use super::mask::{GrammarMasks, MaskEngine};
use super::model::{BatchItem, Engine, Model, WeightFormat};
use super::native::NativeOptions;
pub use super::sample::apply_mask;
use super::sample::Sampler;
use super::score::{log_sum_exp, Plan, Scorer};
use super::{fetch, Allowed, LocalError, MaskFactory, TokenMask};

/// Settings of a [`LocalBackend`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalOptions {
    /// Which forward pass runs the model (default [`Engine::Auto`]: the native one on the CPU).
    pub engine: Engine,
    /// Most tokens to generate when the request does not say (default 512).
    pub max_tokens: u32,
    /// Threads of the native engine's own matmuls (its thread team, process-wide, sized by
    /// the first backend that loads; default: `CANDLE_NUM_THREADS` when set, else the available
    /// parallelism). Candle's own kernels ([`Engine::Candle`], and what the native engine
    /// leaves to Candle) run on Candle's pools, which read `CANDLE_NUM_THREADS` and
    /// `RAYON_NUM_THREADS` from the environment at their first use: this library never sets
    /// the environment (unsound once other threads run); a program that wants the measured
    /// best settings puts [`candle_thread_env`]'s values there at the top of `main`.
    pub threads: Option<usize>,
    /// A `tokenizer.json` to use instead of the one built from the GGUF metadata.
    pub tokenizer_json: Option<PathBuf>,
    /// Reuse the KV cache of the leading system messages across requests (default on).
    pub prefix_cache: bool,
    /// Where the forward pass runs (default the CPU). On a GPU
    /// ([`parse_device`](super::parse_device)`("cuda:0")`, feature `cuda`) [`Engine::Auto`] is
    /// candle-transformers' model with the weights as stored; the mask and the sampler stay on
    /// the CPU.
    pub device: Device,
    /// Constrain requests that carry a grammar with the contract's token mask (default on; the
    /// mask engine is built on the first such request).
    pub constrain: bool,
    /// Options of the native engine, for [`Engine::Native`] (default: its defaults).
    pub native: NativeOptions,
    /// Feed the tokens the mask forces together with the sampled token in one forward call
    /// (default on; off only to measure what it saves: the output is the same).
    pub fast_forward: bool,
    /// Compute the next step's mask on the decode thread while another thread runs the forward
    /// call, instead of before it (`None`, the default: when the model is not on the CPU, where
    /// the forward pass leaves the CPU mostly idle). The mask of step `n + 1` depends on the
    /// tokens of step `n`, not on its logits, so candle-transformers' models give the same
    /// output either way. The native engine, given the mask first, computes only the allowed
    /// tokens' logits on steps with few of them (equal to the full computation to rounding);
    /// overlapped, it computes them all. Requests decoded together in a batch
    /// ([`LocalOptions::max_batch`]) overlap the same way: every request's mask on this thread
    /// while the batch's forward call runs.
    pub overlap_mask: Option<bool>,
    /// Most requests [`Backend::complete`] decodes together (default 8). Requests that arrive
    /// while others decode join them: every step feeds all of them in one forward call, which
    /// reads the weights once for all (a decode step on a CPU is bound by reading them), and a
    /// request that finishes leaves at once while the others go on. Each request decodes
    /// exactly as it would alone (the same tokens, the same [`Output`]; on a GPU to the
    /// rounding of Candle's matrix kernels, which change with the number of rows). Only models
    /// that batch ([`Model::batches`]: [`Engine::Native`], [`Engine::CandleOps`]) do; 1 decodes
    /// one request at a time.
    pub max_batch: usize,
    /// Most sequences one forward call of [`Backend::score`] (and
    /// [`LocalBackend::score_prompts`]) feeds (default 64): the prompts' segments after their
    /// shared prefixes, each with its own KV cache. Only models that batch ([`Model::batches`])
    /// feed several in one call; others feed them one after the other.
    pub score_batch: usize,
    /// Most tokens one forward call of [`Backend::score`] feeds, all its sequences together
    /// (default 512): a longer segment is fed over several calls. It bounds the call's
    /// activations (a few MiB per hundred tokens for a 0.5B model).
    pub score_tokens: usize,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            engine: Engine::Auto,
            max_tokens: 512,
            threads: None,
            tokenizer_json: None,
            prefix_cache: true,
            device: Device::Cpu,
            constrain: true,
            fast_forward: true,
            native: NativeOptions::default(),
            overlap_mask: None,
            max_batch: 8,
            score_batch: 64,
            score_tokens: 512,
        }
    }
}

impl LocalOptions {
    /// Sets the engine (and, for [`Engine::Candle`], the weight format).
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }
    /// Sets the default token limit.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }
    /// Sets the thread count.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }
    /// Uses a `tokenizer.json` file.
    pub fn tokenizer_json(mut self, path: impl Into<PathBuf>) -> Self {
        self.tokenizer_json = Some(path.into());
        self
    }
    /// Turns prefix reuse on or off.
    pub fn prefix_cache(mut self, on: bool) -> Self {
        self.prefix_cache = on;
        self
    }
    /// Sets the device.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }
    /// Turns the contract's token mask on or off.
    pub fn constrain(mut self, on: bool) -> Self {
        self.constrain = on;
        self
    }
    /// Sets the options of the native engine.
    pub fn native_options(mut self, native: NativeOptions) -> Self {
        self.native = native;
        self
    }
    /// Turns fast-forward of forced tokens on or off.
    pub fn fast_forward(mut self, on: bool) -> Self {
        self.fast_forward = on;
        self
    }
    /// Computes the next step's mask while the forward call runs, or before it, whatever the
    /// device ([`LocalOptions::overlap_mask`]).
    pub fn overlap_mask(mut self, on: bool) -> Self {
        self.overlap_mask = Some(on);
        self
    }
    /// Sets how many requests decode together ([`LocalOptions::max_batch`]; 0 counts as 1).
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }
    /// Sets how many sequences a scoring forward call feeds ([`LocalOptions::score_batch`]; 0
    /// counts as 1).
    pub fn score_batch(mut self, n: usize) -> Self {
        self.score_batch = n.max(1);
        self
    }
    /// Sets how many tokens a scoring forward call feeds ([`LocalOptions::score_tokens`]; 0
    /// counts as 1).
    pub fn score_tokens(mut self, n: usize) -> Self {
        self.score_tokens = n.max(1);
        self
    }
}

/// One generation's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The generated text (special tokens left out).
    pub text: String,
    /// The generated tokens, sampled and forced, without the final stop token.
    pub tokens: Vec<u32>,
    /// Why generation stopped (`stop`: a stop token or the mask completed; `length`: the limit).
    pub finish_reason: FinishReason,
    /// Prompt tokens (with any tokens forced before the first sampled one excluded).
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV cache came from the prefix cache.
    pub reused_prefix_tokens: usize,
    /// Forward calls made for this generation (prompt processing included).
    pub forward_calls: u32,
    /// Tokens fed without sampling because the mask forced them.
    pub forced_tokens: u32,
    /// Wall time of prompt processing, in milliseconds.
    pub prefill_ms: f64,
    /// Wall time of the decode loop, in milliseconds.
    pub decode_ms: f64,
    /// Tokens chosen by the sampler (a sampled stop token included): the decode loop's steps.
    pub sampled_tokens: u32,
    /// Wall time of the forward calls (prompt and decode, the logits' copy to the CPU
    /// included), in milliseconds.
    pub forward_ms: f64,
    /// Wall time of the mask's work (the allowed tokens, forced tokens and advancing it), in
    /// milliseconds.
    pub mask_ms: f64,
    /// The part of `mask_ms` computed while a forward call ran on another thread
    /// ([`LocalOptions::overlap_mask`]), which adds nothing to the generation's time.
    pub mask_overlapped_ms: f64,
}

/// Totals over the generations of a [`LocalBackend`] and its clones
/// ([`LocalBackend::decode_stats`]; [`LocalBackend::score_continuations`] is not counted, the
/// scorings of batches of prompts are, apart).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct DecodeStats {
    /// Generations that ended with an output.
    pub generations: u64,
    /// Generated tokens, sampled and forced ([`Output::tokens`]).
    pub tokens: u64,
    /// Sampled tokens ([`Output::sampled_tokens`]).
    pub sampled_tokens: u64,
    /// Forward calls ([`Output::forward_calls`]).
    pub forward_calls: u64,
    /// [`Output::prefill_ms`], summed.
    pub prefill_ms: f64,
    /// [`Output::decode_ms`], summed.
    pub decode_ms: f64,
    /// [`Output::forward_ms`], summed.
    pub forward_ms: f64,
    /// [`Output::mask_ms`], summed.
    pub mask_ms: f64,
    /// [`Output::mask_overlapped_ms`], summed.
    pub mask_overlapped_ms: f64,
    /// Forward calls of [`Backend::complete`]'s batch that fed more than one request at once
    /// ([`LocalOptions::max_batch`]).
    pub batched_calls: u64,
    /// The requests those calls fed, summed (over `batched_calls`: the mean batch).
    pub batched_requests: u64,
    /// Batches of prompts scored to the end ([`LocalBackend::score_prompts`],
    /// [`Backend::score`]).
    pub scorings: u64,
    /// Forward calls of those scorings, counted as they run (a cancelled one's included).
    pub score_forward_calls: u64,
}

impl DecodeStats {
    fn add(&mut self, o: &Output) {
        self.generations += 1;
        self.tokens += o.tokens.len() as u64;
        self.sampled_tokens += u64::from(o.sampled_tokens);
        self.forward_calls += u64::from(o.forward_calls);
        self.prefill_ms += o.prefill_ms;
        self.decode_ms += o.decode_ms;
        self.forward_ms += o.forward_ms;
        self.mask_ms += o.mask_ms;
        self.mask_overlapped_ms += o.mask_overlapped_ms;
    }

    /// Generated tokens per second of the decode loops (`None` before any decode time).
    pub fn tokens_per_second(&self) -> Option<f64> {
        (self.decode_ms > 0.0).then(|| self.tokens as f64 / (self.decode_ms / 1e3))
    }

    /// The mask's share of the generations' wall time (prompt and decode): its work, and the
    /// part of it not overlapped with a forward call (what it adds to the time).
    pub fn mask_share(&self) -> Option<(f64, f64)> {
        let total = self.prefill_ms + self.decode_ms;
        (total > 0.0).then(|| {
            (
                self.mask_ms / total,
                (self.mask_ms - self.mask_overlapped_ms).max(0.0) / total,
            )
        })
    }
}

struct Prefix {
    tokens: Vec<u32>,
    model: Model,
}

struct State {
    model: Model,
    prefix: Option<Prefix>,
    /// The tokens whose keys and values the model's cache holds, in order, when the last call
    /// was [`LocalBackend::score_continuations`] on a model that can rewind (empty otherwise):
    /// the next such call computes only what its prompt does not share with them.
    scored: Vec<u32>,
    /// An empty copy of `model` (its weights shared), once a batch of prompts was scored: each
    /// sequence of [`Scorer`] starts from a copy of it.
    blank: Option<Model>,
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
/// A clone is cheap and shares the model. [`Backend::complete`] runs the decode on the backend's
/// worker thread (started on the first request) and waits for it without blocking the async
/// caller; dropping that future (a `tokio::time::timeout` that fires, a cancelled task) stops the
/// decode at its next step. Requests that arrive while others decode join them, up to
/// [`LocalOptions::max_batch`]: one forward call a step feeds them all (continuous batching:
/// each leaves when it ends, the next waiting one takes its place), and each decodes exactly as
/// it would alone. [`Backend::score`] runs on the same worker, one forward call of the oldest
/// scoring after each decode step ([`LocalBackend::score_prompts`]). The synchronous methods
/// ([`LocalBackend::generate`], [`LocalBackend::score_continuations`],
/// [`LocalBackend::score_prompts`]) run on the calling thread.
#[derive(Clone)]
pub struct LocalBackend {
    inner: Arc<Inner>,
    masks: Option<Arc<dyn MaskFactory>>,
}

/// What the clones of one [`LocalBackend`] share.
struct Inner {
    path: PathBuf,
    tokenizer: Arc<GgufTokenizer>,
    template: ChatTemplate,
    options: LocalOptions,
    contract_masks: OnceLock<Result<Arc<dyn MaskFactory>, String>>,
    state: Mutex<State>,
    stats: Mutex<DecodeStats>,
    /// The worker thread's queue, once started (or why it could not start).
    worker: OnceLock<Result<Sender<Work>, String>>,
}

/// What the worker thread is given.
enum Work {
    /// A request to decode.
    Complete(Job),
    /// A batch of prompts to score.
    Score(ScoreJob),
}

/// A request for the worker thread, and where its answer goes.
struct Job {
    backend: LocalBackend,
    req: Request,
    cancel: Arc<AtomicBool>,
    reply: tokio::sync::oneshot::Sender<Result<Response, BackendError>>,
}

/// A [`ScoreRequest`] for the worker thread, and where its answer goes.
struct ScoreJob {
    backend: LocalBackend,
    req: ScoreRequest,
    cancel: Arc<AtomicBool>,
    reply: tokio::sync::oneshot::Sender<Result<ScoreResponse, BackendError>>,
}

/// A [`ScoreJob`] on the worker, with its scoring once started.
struct ScoreActive {
    job: ScoreJob,
    scoring: Option<Scoring>,
}

/// Sets the flag when dropped: the futures of [`Backend::complete`] and [`Backend::score`] hold
/// one, so that dropping the future cancels its work.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Starts the thread that decodes a backend's requests, until every sender is dropped: up to
/// [`LocalOptions::max_batch`] at once when the model batches, else one at a time; and scores
/// batches of prompts, one forward call of the oldest after each decode step. A request whose
/// work panics loses its answer (its caller is told), not the thread.
fn spawn_worker() -> Result<Sender<Work>, String> {
    let (tx, rx) = std::sync::mpsc::channel::<Work>();
    std::thread::Builder::new()
        .name("contract-local-model".into())
        .spawn(move || run_worker(&rx))
        .map_err(|e| format!("cannot start the local model's worker thread: {e}"))?;
    Ok(tx)
}

/// The worker's loop: takes the work that has arrived, steps the decode batch, makes one forward
/// call of the oldest scoring job, repeats. Decoding and scoring take turns, so that neither
/// waits for the other to end.
fn run_worker(rx: &Receiver<Work>) {
    let mut batch: Vec<Active> = Vec::new();
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut scoring: VecDeque<ScoreActive> = VecDeque::new();
    let take =
        |work: Work, waiting: &mut VecDeque<Job>, scoring: &mut VecDeque<ScoreActive>| match work {
            Work::Complete(job) => waiting.push_back(job),
            Work::Score(job) => scoring.push_back(ScoreActive { job, scoring: None }),
        };
    loop {
        if batch.is_empty() && waiting.is_empty() && scoring.is_empty() {
            let Ok(work) = rx.recv() else { return };
            take(work, &mut waiting, &mut scoring);
        }
        while let Ok(work) = rx.try_recv() {
            take(work, &mut waiting, &mut scoring);
        }
        while let Some(job) = waiting.pop_front() {
            let max = batch
                .first()
                .map_or(usize::MAX, |a| a.job.backend.inner.options.max_batch);
            if batch.len() >= max {
                waiting.push_front(job);
                break;
            }
            admit(job, &mut batch);
        }
        if !batch.is_empty() {
            let stepped =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(&mut batch)));
            if let Err(p) = stepped {
                for a in batch.drain(..) {
                    let _ = a.job.reply.send(Err(panicked(&*p)));
                }
            }
        }
        if let Some(a) = scoring.front_mut() {
            if let Some(answer) = score_step(a) {
                if let Some(a) = scoring.pop_front() {
                    let _ = a.job.reply.send(answer);
                }
            }
        }
    }
}

/// One forward call of a scoring job (its prompts tokenised and planned first, on its first
/// step); its answer once it has ended, failed or been cancelled.
fn score_step(a: &mut ScoreActive) -> Option<Result<ScoreResponse, BackendError>> {
    if a.job.cancel.load(Ordering::Relaxed) {
        return Some(Err(backend_error(LocalError::Cancelled { tokens: 0 })));
    }
    let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || -> Result<Option<ScoreResponse>, LocalError> {
            let ScoreActive { job, scoring } = a;
            let answers: Vec<&str> = job.req.answers.iter().map(String::as_str).collect();
            let s = match scoring {
                Some(s) => s,
                None => scoring.insert(job.backend.start_scoring(&job.req.prompts, &answers)?),
            };
            if !s.is_done() {
                s.step(&job.backend, &job.req.prompts, &answers)?;
            }
            if !s.is_done() {
                return Ok(None);
            }
            let Some(s) = scoring.take() else {
                return Ok(None);
            };
            let scores = s.finish(&job.backend)?;
            Ok(Some(ScoreResponse {
                logprobs: scores.logprobs,
                exact: true,
                forward_calls: Some(scores.forward_calls),
            }))
        },
    ));
    match stepped {
        Ok(Ok(None)) => None,
        Ok(Ok(Some(response))) => Some(Ok(response)),
        Ok(Err(e)) => Some(Err(backend_error(e))),
        Err(p) => Some(Err(panicked(&*p))),
    }
}

/// A request being decoded in the worker's batch: its own model (a snapshot sharing the
/// weights), mask and generation.
struct Active {
    job: Job,
    model: Model,
    mask: Option<Box<dyn TokenMask + Send>>,
    gen: Generation,
    bits: Vec<u32>,
}

/// Starts decoding `job`: in the batch when its model batches (and the batch may hold more than
/// one request), else to its end at once, alone, on the backend's model.
fn admit(job: Job, batch: &mut Vec<Active>) {
    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let backend = &job.backend;
        let options = &backend.inner.options;
        if options.max_batch <= 1 {
            return Err(backend.complete_now(&job.req, &job.cancel));
        }
        match backend.start_in_batch(&job.req, &job.cancel) {
            Ok(Some((model, mask, gen))) => Ok((model, mask, gen)),
            Ok(None) => Err(backend.complete_now(&job.req, &job.cancel)),
            Err(e) => Err(Err(e)),
        }
    }));
    match answered {
        Ok(Ok((model, mask, gen))) => batch.push(Active {
            job,
            model,
            mask,
            gen,
            bits: Vec::new(),
        }),
        Ok(Err(answer)) => {
            let _ = job.reply.send(answer);
        }
        Err(p) => {
            let _ = job.reply.send(Err(panicked(&*p)));
        }
    }
}

/// One step of every request in the batch: one forward call for all (each request's next call
/// of its step), then each request samples and advances; finished and cancelled requests are
/// answered and leave.
fn step(batch: &mut Vec<Active>) {
    // Cancelled requests, and calls past a model's context, end here.
    let mut i = 0;
    while i < batch.len() {
        let a = &batch[i];
        let ended = if a.job.cancel.load(Ordering::Relaxed) {
            Some(Err(LocalError::Cancelled {
                tokens: a.gen.out.len(),
            }))
        } else {
            let need = a.model.pos() + a.gen.pending.first().map_or(0, Vec::len);
            (need > a.model.context_length()).then(|| {
                Err(LocalError::ContextLength {
                    tokens: need,
                    context: a.model.context_length(),
                })
            })
        };
        match ended {
            Some(result) => {
                let a = batch.swap_remove(i);
                let _ = a.job.reply.send(result.map_err(backend_error));
            }
            None => i += 1,
        }
    }
    if batch.is_empty() {
        return;
    }
    // The mask of the step after each request's last call: computed before the forward call
    // (which then gets it: the native engine computes only the allowed logits), or, with the
    // model on a device other than the CPU (`LocalOptions::overlap_mask`), on this thread while
    // another runs the forward call, then applied to the logits (the mask of a step depends on
    // the tokens fed, not on their logits: the same output either way).
    let overlap = batch.first().is_some_and(|a| {
        a.job
            .backend
            .inner
            .options
            .overlap_mask
            .unwrap_or_else(|| !a.model.device().is_cpu())
    });
    let mut failed: Vec<(usize, LocalError)> = Vec::new();
    let mut masked = vec![false; batch.len()];
    let mut items: Vec<BatchItem<'_>> = Vec::with_capacity(batch.len());
    let mut fed: Vec<usize> = Vec::with_capacity(batch.len());
    // Each request's mask, its bitset and its generation's timing, split from what the forward
    // call borrows.
    let mut maskers: Vec<(usize, MaskParts<'_>)> = Vec::with_capacity(batch.len());
    for (i, a) in batch.iter_mut().enumerate() {
        let Active {
            model,
            gen,
            bits,
            mask,
            ..
        } = a;
        let Generation {
            pending, timing, ..
        } = gen;
        let Some(tokens) = pending.first() else {
            failed.push((
                i,
                LocalError::State("a generation with nothing to feed".into()),
            ));
            continue;
        };
        if pending.len() == 1 {
            maskers.push((i, (mask, bits, timing)));
        }
        items.push(BatchItem {
            model,
            tokens,
            allowed: None,
        });
        fed.push(i);
    }
    let (result, elapsed) = if overlap {
        let (result, elapsed) = std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .name("contract-local-forward".into())
                .spawn_scoped(scope, || {
                    let t = Instant::now();
                    let result = Model::forward_batch(&mut items);
                    (result, t.elapsed())
                });
            let mask_times = compute_masks(&mut maskers, &mut masked, &mut failed);
            let joined = match handle {
                Ok(h) => h.join().unwrap_or_else(|p| {
                    let message = format!("the forward pass panicked: {}", panic_message(&p));
                    (Err(LocalError::State(message)), Duration::ZERO)
                }),
                Err(e) => (
                    Err(LocalError::State(format!(
                        "cannot start the forward pass's thread: {e}"
                    ))),
                    Duration::ZERO,
                ),
            };
            // The part of each mask's time the forward call hid, shared in proportion.
            let total: Duration = mask_times.iter().map(|(_, d)| *d).sum();
            let hidden = total.min(joined.1).as_secs_f64() / total.as_secs_f64().max(1e-12);
            for (k, d) in mask_times {
                if let Some((_, (_, _, timing))) = maskers.get_mut(k) {
                    timing.mask_overlapped += d.mul_f64(hidden);
                }
            }
            joined
        });
        let result = result.map(|mut logits| {
            for (&i, l) in fed.iter().zip(logits.iter_mut()) {
                if masked[i] {
                    if let Some((_, (_, bits, _))) = maskers.iter().find(|(m, _)| *m == i) {
                        apply_mask(l, Allowed::Bits(bits.as_slice()));
                    }
                }
            }
            logits
        });
        (result, elapsed)
    } else {
        compute_masks(&mut maskers, &mut masked, &mut failed);
        for (item, &i) in items.iter_mut().zip(&fed) {
            if masked[i] {
                item.allowed = maskers
                    .iter()
                    .find(|(m, _)| *m == i)
                    .map(|(_, (_, bits, _))| bits.as_slice());
            }
        }
        let t = Instant::now();
        let result = Model::forward_batch(&mut items);
        (result, t.elapsed())
    };
    drop(items);
    drop(maskers);
    if fed.len() > 1 {
        if let Some(a) = batch.first() {
            let stats = &a.job.backend.inner.stats;
            let mut stats = stats.lock().unwrap_or_else(|e| e.into_inner());
            stats.batched_calls += 1;
            stats.batched_requests += fed.len() as u64;
        }
    }
    let mut answers: Vec<(usize, Result<FinishReason, LocalError>)> = Vec::new();
    match result {
        Ok(logits) => {
            for (&i, logits) in fed.iter().zip(logits) {
                // A request whose mask failed leaves with that error, whatever its call gave.
                if failed.iter().any(|(f, _)| *f == i) {
                    continue;
                }
                let a = &mut batch[i];
                a.gen.timing.forward += elapsed;
                a.gen.calls += 1;
                a.gen.pending.remove(0);
                if !a.gen.pending.is_empty() {
                    continue;
                }
                let (pos, context) = (a.model.pos(), a.model.context_length());
                let mask = a.mask.as_deref_mut().map(|m| m as &mut dyn TokenMask);
                match a.gen.advance(&logits, mask, pos, context) {
                    Ok(None) => {}
                    Ok(Some(finish)) => answers.push((i, Ok(finish))),
                    Err(e) => answers.push((i, Err(e))),
                }
            }
        }
        Err(e) => {
            let message = e.to_string();
            for &i in fed.iter().filter(|i| !failed.iter().any(|(f, _)| f == *i)) {
                answers.push((i, Err(LocalError::State(message.clone()))));
            }
        }
    }
    answers.extend(failed.into_iter().map(|(i, e)| (i, Err(e))));
    // Highest index first, so that removing one leaves the others' indices valid.
    answers.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
    for (i, answer) in answers {
        let a = batch.remove(i);
        let backend = &a.job.backend;
        let answer = answer.and_then(|finish| backend.finish(a.gen, finish));
        let answer = answer
            .map(|out| backend.response(out))
            .map_err(backend_error);
        let _ = a.job.reply.send(answer);
    }
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

/// The environment Candle's thread pools read, set to what was measured fastest on 2 cores for
/// `options` (`CANDLE_NUM_THREADS` = the threads, else the available parallelism;
/// `RAYON_NUM_THREADS` = 1 for quantized weights, whose matmuls run on Candle's pool and slow
/// down when a rayon pool of the same size shares the cores, else the threads), for a program
/// to set at the top of its `main`, before any other thread starts and before any backend
/// loads (this library never writes the environment itself):
///
/// ```no_run
/// use contract_backends::local::{candle_thread_env, LocalOptions};
/// let options = LocalOptions::default();
/// for (key, value) in candle_thread_env(&options) {
///     if std::env::var_os(key).is_none() {
///         std::env::set_var(key, value);
///     }
/// }
/// ```
///
/// [`Engine::Auto`] counts as the native engine, which is what it picks for the supported
/// architectures on the CPU.
pub fn candle_thread_env(options: &LocalOptions) -> [(&'static str, String); 2] {
    let n = options.threads.filter(|&n| n > 0).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let dense = match options.engine {
        Engine::Candle(WeightFormat::F32) => true,
        Engine::Native | Engine::Auto => options.native.dense_from.is_some(),
        _ => false,
    };
    let rayon = if dense { n } else { 1 };
    [
        ("CANDLE_NUM_THREADS", n.to_string()),
        ("RAYON_NUM_THREADS", rayon.to_string()),
    ]
}

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
        *self.inner.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn state(&self) -> MutexGuard<'_, State> {
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

    /// The prompt tokens of `messages` and, when the prefix cache is on, those of its leading
    /// system messages ([`Self::prefix_tokens`]).
    fn prompt_and_prefix(
        &self,
        messages: &[Message],
    ) -> Result<(Vec<u32>, Option<Vec<u32>>), LocalError> {
        let prompt = self.prompt_tokens(messages)?;
        let prefix = if self.inner.options.prefix_cache {
            self.prefix_tokens(messages, &prompt)?
        } else {
            None
        };
        Ok((prompt, prefix))
    }

    /// The tokens of the leading system messages, when the template renders them as a prefix of
    /// the whole prompt at a token boundary.
    fn prefix_tokens(
        &self,
        messages: &[Message],
        prompt: &[u32],
    ) -> Result<Option<Vec<u32>>, LocalError> {
        let n = messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        if n == 0 || n == messages.len() {
            return Ok(None);
        }
        let text = match self.inner.template.render(&messages[..n], false) {
            Ok(t) if !t.is_empty() => t,
            _ => return Ok(None),
        };
        let tokens = self.inner.tokenizer.encode_prompt(&text)?;
        Ok((tokens.len() < prompt.len() && prompt.starts_with(&tokens)).then_some(tokens))
    }

    /// Puts the model at the start of a prompt: the cached prefix restored (when it is `prefix`),
    /// or `prefix` computed and cached, or an empty cache. Returns the prompt position to feed
    /// from and how many tokens came from the cache.
    fn start_from_prefix(
        state: &mut State,
        prefix: Option<Vec<u32>>,
        calls: &mut u32,
    ) -> Result<(usize, usize), LocalError> {
        let Some(prefix) = prefix.filter(|_| state.model.can_snapshot()) else {
            state.model.reset();
            return Ok((0, 0));
        };
        let mut reused = 0;
        match &state.prefix {
            Some(p) if p.tokens == prefix => {
                state.model.restore_from(&p.model)?;
                reused = prefix.len();
            }
            _ => {
                state.prefix = None;
                state.model.forward(&prefix, 0)?;
                *calls += 1;
                state.prefix = state.model.snapshot().map(|model| Prefix {
                    tokens: prefix.clone(),
                    model,
                });
            }
        }
        Ok((prefix.len(), reused))
    }

    /// The log-probability the model gives each of `continuations` as its answer to `messages`
    /// (the chat template's generation prompt applied): the sum over the continuation's tokens of
    /// each token's log-probability after the ones before it, the full vocabulary competing.
    ///
    /// This is how a choice among a few known answers is made by the model's likelihood instead
    /// of by one greedy token: score `["yes", "no"]` and compare. The prompt is computed once:
    /// with the native engine, only from where it stops sharing tokens with the last
    /// scored prompt (many questions about different lines share the chat template's head);
    /// else its leading system messages come from the prefix cache, as in
    /// [`LocalBackend::generate`];
    /// a continuation of `k` tokens costs `k - 1` more single-token forward calls (none for one
    /// token). An empty continuation scores 0. Scores are in nats.
    pub fn score_continuations(
        &self,
        messages: &[Message],
        continuations: &[&str],
    ) -> Result<Scores, LocalError> {
        let (prompt, prefix) = self.prompt_and_prefix(messages)?;
        let encoded = continuations
            .iter()
            .map(|c| self.inner.tokenizer.encode(c))
            .collect::<Result<Vec<_>, _>>()?;
        let longest = encoded.iter().map(Vec::len).max().unwrap_or(0);
        let mut state = self.state();
        let state = &mut *state;
        let context = state.model.context_length();
        if prompt.len() + longest > context {
            return Err(LocalError::ContextLength {
                tokens: prompt.len() + longest,
                context,
            });
        }
        let mut calls = 0u32;
        // The longest start this prompt shares with the tokens the cache holds from the last
        // call (a chat template's head, a shared instruction), kept when the model can rewind;
        // else the cached system prefix, as for generation.
        let shared = state
            .scored
            .iter()
            .zip(&prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prompt.len().saturating_sub(1));
        let rewind = self.inner.options.prefix_cache && state.model.can_rewind();
        let start = if rewind && shared > 0 && state.model.pos() >= shared {
            state.model.rewind(shared)?;
            shared
        } else {
            Self::start_from_prefix(state, prefix, &mut calls)?.0
        };
        state.scored.clear();
        let model = &mut state.model;
        calls += 1;
        let first = model.forward(&prompt[start..], model.pos())?;
        let first_z = log_sum_exp(&first);
        let base = model.pos();
        // Continuations of several tokens each start from the prompt's cache: a snapshot where
        // the model allows one, else the prompt computed again.
        let snapshot = if longest > 1 { model.snapshot() } else { None };
        let mut logprobs = Vec::with_capacity(encoded.len());
        for tokens in &encoded {
            let mut total = 0f64;
            if tokens.len() > 1 && model.pos() != base {
                match &snapshot {
                    Some(s) => model.restore_from(s)?,
                    None => {
                        calls += 1;
                        model.forward(&prompt, 0)?;
                    }
                }
            }
            // The logits after the tokens fed so far, and their log-normaliser.
            let mut step: Option<(Vec<f32>, f32)> = None;
            for (i, &t) in tokens.iter().enumerate() {
                let (logits, z) = match &step {
                    Some((l, z)) => (l.as_slice(), *z),
                    None => (first.as_slice(), first_z),
                };
                let logit = logits.get(t as usize).copied().ok_or_else(|| {
                    LocalError::Tokenizer(format!(
                        "token {t} is outside the model's {} logits",
                        logits.len()
                    ))
                })?;
                total += f64::from(if z.is_finite() {
                    logit - z
                } else {
                    f32::NEG_INFINITY
                });
                if i + 1 < tokens.len() {
                    calls += 1;
                    let next = model.feed(&[t])?;
                    let z = log_sum_exp(&next);
                    step = Some((next, z));
                }
            }
            logprobs.push(total);
        }
        let prompt_tokens = prompt.len();
        if rewind {
            model.rewind(base)?;
            state.scored = prompt;
        }
        Ok(Scores {
            reused_tokens: start,
            logprobs,
            tokens: encoded.iter().map(Vec::len).collect(),
            prompt_tokens,
            forward_calls: calls,
        })
    }

    /// The log-probability the model gives each of `answers` after each of `prompts`, as
    /// [`LocalBackend::score_continuations`] gives it for one prompt (to float rounding), in few
    /// forward calls: every prompt's tokens (chat template and generation prompt applied) and the
    /// answers' tokens after them go into one token trie, each prefix that prompts share (the
    /// template's head, a passage asked several questions, an answer's first token) is computed
    /// once and its KV cache copied into each sequence that continues it, and the sequences are
    /// fed up to [`LocalOptions::score_batch`] (and [`LocalOptions::score_tokens`] tokens) a
    /// forward call. A model that cannot copy its cache (candle-transformers' qwen2) scores the
    /// prompts one after the other with [`LocalBackend::score_continuations`].
    ///
    /// Runs on the calling thread; [`Backend::score`] runs the same on the worker thread.
    ///
    /// # Errors
    ///
    /// [`LocalError::ContextLength`] when a prompt and the longest answer do not fit the model's
    /// context (before anything is computed), [`LocalError::EmptyPrompt`] for a prompt with no
    /// tokens, the template's, the tokenizer's or the model's errors.
    pub fn score_prompts(
        &self,
        prompts: &[Messages],
        answers: &[&str],
    ) -> Result<BatchScores, LocalError> {
        let mut scoring = self.start_scoring(prompts, answers)?;
        while !scoring.is_done() {
            scoring.step(self, prompts, answers)?;
        }
        scoring.finish(self)
    }

    /// An empty model of this load, for a sequence of its own (`None` when the model cannot copy
    /// its cache).
    fn blank_model(&self) -> Option<Model> {
        let mut state = self.state();
        if state.blank.is_none() {
            state.blank = state.model.snapshot().map(|mut m| {
                m.reset();
                m
            });
        }
        state.blank.as_ref().and_then(Model::snapshot)
    }

    /// `prompts` tokenised, checked against the context, and planned (nothing computed yet).
    fn start_scoring(&self, prompts: &[Messages], answers: &[&str]) -> Result<Scoring, LocalError> {
        let Some(blank) = self.blank_model() else {
            return Ok(Scoring::OneByOne {
                prompts: prompts.len(),
                scores: BatchScores {
                    logprobs: Vec::with_capacity(prompts.len()),
                    prompt_tokens: 0,
                    fed_tokens: 0,
                    forward_calls: 0,
                },
            });
        };
        let encoded = answers
            .iter()
            .map(|a| self.inner.tokenizer.encode(a))
            .collect::<Result<Vec<_>, _>>()?;
        let longest = encoded.iter().map(Vec::len).max().unwrap_or(0);
        let context = blank.context_length();
        let mut tokens = Vec::with_capacity(prompts.len());
        for p in prompts {
            let t = self.prompt_tokens(&p.0)?;
            if t.is_empty() {
                return Err(LocalError::EmptyPrompt);
            }
            if t.len() + longest > context {
                return Err(LocalError::ContextLength {
                    tokens: t.len() + longest,
                    context,
                });
            }
            tokens.push(t);
        }
        let plan = Plan::new(&tokens, &encoded);
        let options = &self.inner.options;
        Ok(Scoring::Batched {
            prompt_tokens: tokens.iter().map(Vec::len).sum(),
            fed_tokens: plan.tokens(),
            scorer: Box::new(Scorer::new(
                plan,
                blank,
                options.score_batch,
                options.score_tokens,
            )),
        })
    }

    /// Generates an answer to `messages`, at most `max_tokens` tokens, constrained by `mask`
    /// when given.
    pub fn generate(
        &self,
        messages: &[Message],
        max_tokens: u32,
        sampling: &Sampling,
        mask: Option<&mut dyn TokenMask>,
    ) -> Result<Output, LocalError> {
        self.decode(messages, max_tokens, sampling, mask, None)
    }

    /// [`LocalBackend::generate`], ending with [`LocalError::Cancelled`] at the first step that
    /// finds `cancel` set.
    fn decode(
        &self,
        messages: &[Message],
        max_tokens: u32,
        sampling: &Sampling,
        mask: Option<&mut dyn TokenMask>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Output, LocalError> {
        let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));
        if cancelled() {
            return Err(LocalError::Cancelled { tokens: 0 });
        }
        let (prompt, prefix) = self.prompt_and_prefix(messages)?;
        let mut state = self.state();
        let state = &mut *state;
        let t0 = Instant::now();
        let mut calls = 0u32;
        state.scored.clear();
        let (start, reused) = Self::start_from_prefix(state, prefix, &mut calls)?;
        let model = &mut state.model;
        let overlap = self
            .inner
            .options
            .overlap_mask
            .unwrap_or_else(|| !model.device().is_cpu());
        let mut mask = mask;
        let start = Start {
            prompt: &prompt,
            from: start,
            reused,
            calls,
            t0,
        };
        let mut gen = self.generation(start, max_tokens, sampling, mask.as_deref_mut())?;
        let mut bits = Vec::new();
        loop {
            // The step's forward calls; the last takes the mask of the step after it, computed
            // before the call (so that the native engine skips the disallowed tokens' logits)
            // or while it runs.
            let step = std::mem::take(&mut gen.pending);
            let mut calls = 0u32;
            let logits = forward_and_mask(
                |allowed| {
                    let mut logits = Vec::new();
                    for (i, tokens) in step.iter().enumerate() {
                        calls += 1;
                        let last = i + 1 == step.len();
                        let allowed = if last { allowed } else { None };
                        logits = model.forward_masked(tokens, model.pos(), allowed)?;
                    }
                    Ok(logits)
                },
                mask.as_deref_mut(),
                &mut bits,
                overlap,
                &mut gen.timing,
            )?;
            gen.calls += calls;
            if cancelled() {
                return Err(LocalError::Cancelled {
                    tokens: gen.out.len(),
                });
            }
            let (pos, context) = (model.pos(), model.context_length());
            if let Some(finish) = gen.advance(&logits, mask.as_deref_mut(), pos, context)? {
                return self.finish(gen, finish);
            }
        }
    }

    /// A generation set up to continue the prompt from `start.from` (the model holds the
    /// positions before it): the tokens the mask forces first go in with the prompt.
    fn generation(
        &self,
        start: Start<'_>,
        max_tokens: u32,
        sampling: &Sampling,
        mask: Option<&mut (dyn TokenMask + '_)>,
    ) -> Result<Generation, LocalError> {
        let Start {
            prompt,
            from,
            reused,
            calls,
            t0,
        } = start;
        let fast_forward = self.inner.options.fast_forward;
        let mut gen = Generation {
            tokenizer: self.inner.tokenizer.clone(),
            stops: self.inner.tokenizer.stop_tokens().to_vec(),
            sampler: Sampler::from_sampling(sampling),
            max_tokens,
            fast_forward,
            prompt_tokens: prompt.len(),
            reused,
            out: Vec::new(),
            forced: 0,
            sampled: 0,
            calls,
            timing: Timing::default(),
            pending: Vec::new(),
            t0,
            decoding: None,
        };
        // Tokens forced before anything is sampled go in with the prompt.
        let mut feed: Vec<u32> = prompt[from..].to_vec();
        if let Some(m) = mask {
            let t = Instant::now();
            let forced = m.forced()?;
            if !forced.is_empty() {
                m.consume(&forced)?;
                gen.forced += forced.len() as u32;
                gen.out.extend_from_slice(&forced);
                feed.extend_from_slice(&forced);
            }
            gen.timing.mask += t.elapsed();
        }
        if feed.is_empty() {
            // The cached prefix was the whole prompt (cannot happen: the prefix is shorter).
            return Err(LocalError::EmptyPrompt);
        }
        // Without fast-forward, the forced head goes in one token per call after the prompt.
        let split = if fast_forward {
            feed.len()
        } else {
            prompt.len() - from
        };
        if split > 0 {
            gen.pending.push(feed[..split].to_vec());
        }
        gen.pending.extend(feed[split..].iter().map(|&t| vec![t]));
        Ok(gen)
    }

    /// The output of a finished generation, counted in [`LocalBackend::decode_stats`].
    fn finish(&self, gen: Generation, finish: FinishReason) -> Result<Output, LocalError> {
        let (prefill, decode) = match gen.decoding {
            Some((prefill, t1)) => (prefill, t1.elapsed()),
            None => (gen.t0.elapsed(), Duration::ZERO),
        };
        let output = Output {
            text: self.inner.tokenizer.decode(&gen.out)?,
            tokens: gen.out,
            finish_reason: finish,
            prompt_tokens: gen.prompt_tokens,
            reused_prefix_tokens: gen.reused,
            forward_calls: gen.calls,
            forced_tokens: gen.forced,
            prefill_ms: prefill.as_secs_f64() * 1e3,
            decode_ms: decode.as_secs_f64() * 1e3,
            sampled_tokens: gen.sampled,
            forward_ms: gen.timing.forward.as_secs_f64() * 1e3,
            mask_ms: gen.timing.mask.as_secs_f64() * 1e3,
            mask_overlapped_ms: gen.timing.mask_overlapped.as_secs_f64() * 1e3,
        };
        self.inner
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(&output);
        Ok(output)
    }
}

/// Where a generation starts: its prompt, the position it continues from, the prefix tokens
/// reused and the forward calls made for the prefix.
struct Start<'a> {
    prompt: &'a [u32],
    from: usize,
    reused: usize,
    calls: u32,
    t0: Instant,
}

/// One generation between forward calls: the decode loop's state, so that
/// [`LocalBackend::decode`] drives one and the worker's batch drives several with the same steps.
struct Generation {
    tokenizer: Arc<GgufTokenizer>,
    stops: Vec<u32>,
    sampler: Sampler,
    max_tokens: u32,
    fast_forward: bool,
    prompt_tokens: usize,
    reused: usize,
    out: Vec<u32>,
    forced: u32,
    sampled: u32,
    calls: u32,
    timing: Timing,
    /// The forward calls of the next step, in order (the logits of the last one are read).
    pending: Vec<Vec<u32>>,
    t0: Instant,
    /// Once the prompt is processed: how long that took, and when decoding started.
    decoding: Option<(Duration, Instant)>,
}

impl Generation {
    /// Takes the logits of a step's last forward call (masked already): samples the next token,
    /// advances the mask over it and the tokens the mask then forces, and queues the next step's
    /// calls; `Some` when the generation ends instead. `pos` is the model's position after the
    /// call, `context` its context length.
    fn advance(
        &mut self,
        logits: &[f32],
        mask: Option<&mut (dyn TokenMask + '_)>,
        pos: usize,
        context: usize,
    ) -> Result<Option<FinishReason>, LocalError> {
        if self.decoding.is_none() {
            self.decoding = Some((self.t0.elapsed(), Instant::now()));
        }
        if mask.as_deref().is_some_and(|m| m.is_done()) {
            return Ok(Some(FinishReason::Stop));
        }
        if self.out.len() >= self.max_tokens as usize || pos + 1 > context {
            return Ok(Some(FinishReason::Length));
        }
        self.sampled += 1;
        let Some(token) = self.sampler.sample(logits) else {
            return Err(LocalError::Mask(format!(
                "no token allowed after {} generated tokens (output so far: {:?})",
                self.out.len(),
                self.tokenizer.decode(&self.out).unwrap_or_default()
            )));
        };
        if self.stops.contains(&token) {
            return Ok(Some(FinishReason::Stop));
        }
        let mut step = vec![token];
        self.out.push(token);
        if let Some(m) = mask {
            let t = Instant::now();
            m.consume(&[token])?;
            if !m.is_done() {
                let forced = m.forced()?;
                if !forced.is_empty() {
                    let room = (self.max_tokens as usize).saturating_sub(self.out.len());
                    let forced = &forced[..forced.len().min(room)];
                    m.consume(forced)?;
                    self.forced += forced.len() as u32;
                    self.out.extend_from_slice(forced);
                    step.extend_from_slice(forced);
                }
            }
            self.timing.mask += t.elapsed();
            if m.is_done() {
                return Ok(Some(FinishReason::Stop));
            }
        }
        if self.out.len() >= self.max_tokens as usize || pos + step.len() > context {
            return Ok(Some(FinishReason::Length));
        }
        if self.fast_forward {
            self.pending.push(step);
        } else {
            self.pending.extend(step.into_iter().map(|t| vec![t]));
        }
        Ok(None)
    }
}

/// What [`LocalBackend::score_continuations`] measured.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Scores {
    /// Each continuation's log-probability (nats), in the order given.
    pub logprobs: Vec<f64>,
    /// Each continuation's token count.
    pub tokens: Vec<usize>,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values were reused (the prefix cache, or the start shared
    /// with the last scored prompt).
    pub reused_tokens: usize,
    /// Forward calls made (the prefix's, when it was not cached, included).
    pub forward_calls: u32,
}

impl Scores {
    /// The index of the most likely continuation (the first on a tie); `None` when there are
    /// none.
    pub fn best(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, &lp) in self.logprobs.iter().enumerate() {
            if best.is_none_or(|b| lp > self.logprobs[b]) {
                best = Some(i);
            }
        }
        best
    }
}

/// What [`LocalBackend::score_prompts`] measured.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BatchScores {
    /// Per prompt, in order, each answer's log-probability (nats), in the order given.
    pub logprobs: Vec<Vec<f64>>,
    /// The prompts' tokens, summed.
    pub prompt_tokens: usize,
    /// Tokens fed to the model: each shared prefix once, and the answers' tokens but their last.
    pub fed_tokens: usize,
    /// Forward calls made.
    pub forward_calls: u32,
}

/// A batch of prompts being scored, one forward call a step: on copies of the model
/// ([`Scorer`]), or, for a model that cannot copy its cache, one prompt a step with
/// [`LocalBackend::score_continuations`] (what it has scored so far).
enum Scoring {
    Batched {
        scorer: Box<Scorer>,
        prompt_tokens: usize,
        fed_tokens: usize,
    },
    OneByOne {
        /// How many prompts there are.
        prompts: usize,
        scores: BatchScores,
    },
}

impl Scoring {
    fn is_done(&self) -> bool {
        match self {
            Scoring::Batched { scorer, .. } => scorer.is_done(),
            Scoring::OneByOne { prompts, scores } => scores.logprobs.len() >= *prompts,
        }
    }

    fn step(
        &mut self,
        backend: &LocalBackend,
        prompts: &[Messages],
        answers: &[&str],
    ) -> Result<(), LocalError> {
        let calls = match self {
            Scoring::Batched { scorer, .. } => {
                let before = scorer.forward_calls();
                scorer.step()?;
                scorer.forward_calls() - before
            }
            Scoring::OneByOne { scores: s, .. } => {
                let Some(p) = prompts.get(s.logprobs.len()) else {
                    return Ok(());
                };
                let one = backend.score_continuations(&p.0, answers)?;
                s.prompt_tokens += one.prompt_tokens;
                s.fed_tokens += one.prompt_tokens - one.reused_tokens
                    + one
                        .tokens
                        .iter()
                        .map(|t| t.saturating_sub(1))
                        .sum::<usize>();
                s.forward_calls += one.forward_calls;
                s.logprobs.push(one.logprobs);
                one.forward_calls
            }
        };
        let mut stats = backend
            .inner
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        stats.score_forward_calls += u64::from(calls);
        Ok(())
    }

    /// The scores, once [`Scoring::is_done`]; counted in the backend's
    /// [`DecodeStats::scorings`].
    fn finish(self, backend: &LocalBackend) -> Result<BatchScores, LocalError> {
        backend
            .inner
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .scorings += 1;
        match self {
            Scoring::Batched {
                scorer,
                prompt_tokens,
                fed_tokens,
            } => Ok(BatchScores {
                forward_calls: scorer.forward_calls(),
                logprobs: scorer.finish()?,
                prompt_tokens,
                fed_tokens,
            }),
            Scoring::OneByOne { scores, .. } => Ok(scores),
        }
    }
}

/// The tokens `mask` allows at the next step, copied into `bits` (`None`: no mask, a finished
/// mask, or every token allowed).
fn next_allowed<'b>(
    mask: Option<&mut (dyn TokenMask + '_)>,
    bits: &'b mut Vec<u32>,
) -> Result<Option<&'b [u32]>, LocalError> {
    let Some(m) = mask else { return Ok(None) };
    if m.is_done() {
        return Ok(None);
    }
    match m.allowed()? {
        Allowed::All => Ok(None),
        Allowed::Bits(b) => {
            bits.clear();
            bits.extend_from_slice(b);
            Ok(Some(bits.as_slice()))
        }
    }
}

/// What a batch step's mask computation borrows of one request: its mask, its bitset of allowed
/// tokens and its generation's timing.
type MaskParts<'a> = (
    &'a mut Option<Box<dyn TokenMask + Send>>,
    &'a mut Vec<u32>,
    &'a mut Timing,
);

/// Computes the next step's mask of each request in `maskers` (request index, parts) into its
/// bitset, marking `masked` and recording failures in `failed`; returns each mask's time by its
/// place in `maskers`.
fn compute_masks(
    maskers: &mut [(usize, MaskParts<'_>)],
    masked: &mut [bool],
    failed: &mut Vec<(usize, LocalError)>,
) -> Vec<(usize, Duration)> {
    let mut times = Vec::with_capacity(maskers.len());
    for (k, (i, (mask, bits, timing))) in maskers.iter_mut().enumerate() {
        let Some(mask) = mask.as_deref_mut() else {
            continue;
        };
        let t = Instant::now();
        match next_allowed(Some(mask as &mut dyn TokenMask), bits) {
            Ok(allowed) => masked[*i] = allowed.is_some(),
            Err(e) => failed.push((*i, e)),
        }
        let d = t.elapsed();
        timing.mask += d;
        times.push((k, d));
    }
    times
}

/// Where a generation's time went ([`Output::forward_ms`], [`Output::mask_ms`],
/// [`Output::mask_overlapped_ms`]).
#[derive(Default)]
struct Timing {
    forward: Duration,
    mask: Duration,
    mask_overlapped: Duration,
}

/// Runs a step's forward calls (`forward`, given the allowed tokens when they are known before
/// it runs) and computes the mask of the step after it, and returns the logits masked with it.
///
/// With `overlap` (and a mask to compute), `forward` runs on a scoped thread while this thread
/// computes the mask: the mask of the next step depends on the tokens fed, not on their logits,
/// so the two are independent and the result is the same as computing the mask first. Without
/// it, the mask comes first and goes into the forward call (the native engine then computes
/// only the allowed tokens' logits).
fn forward_and_mask<F>(
    forward: F,
    mask: Option<&mut (dyn TokenMask + '_)>,
    bits: &mut Vec<u32>,
    overlap: bool,
    timing: &mut Timing,
) -> Result<Vec<f32>, LocalError>
where
    F: FnOnce(Option<&[u32]>) -> Result<Vec<f32>, LocalError> + Send,
{
    let mask = match mask {
        Some(m) if overlap && !m.is_done() => m,
        mask => {
            let t = Instant::now();
            let masked = mask.is_some();
            let allowed = next_allowed(mask, bits)?;
            if masked {
                timing.mask += t.elapsed();
            }
            let t = Instant::now();
            let logits = forward(allowed);
            timing.forward += t.elapsed();
            return logits;
        }
    };
    let (forwarded, allowed, mask_time) = std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("contract-local-forward".into())
            .spawn_scoped(scope, || {
                let t = Instant::now();
                let logits = forward(None);
                (logits, t.elapsed())
            });
        let t = Instant::now();
        let allowed = next_allowed(Some(mask), bits).map(|a| a.is_some());
        let mask_time = t.elapsed();
        let forwarded = match handle {
            Ok(h) => h.join().map_err(|p| {
                LocalError::State(format!("the forward pass panicked: {}", panic_message(&p)))
            }),
            Err(e) => Err(LocalError::State(format!(
                "cannot start the forward pass's thread: {e}"
            ))),
        };
        (forwarded, allowed, mask_time)
    });
    timing.mask += mask_time;
    let (logits, forward_time) = forwarded?;
    timing.forward += forward_time;
    timing.mask_overlapped += mask_time.min(forward_time);
    let mut logits = logits?;
    if allowed? {
        apply_mask(&mut logits, Allowed::Bits(bits.as_slice()));
    }
    Ok(logits)
}

/// The text of a panic's payload, when it has one.
/// The answer of a request whose decode panicked.
fn panicked(payload: &(dyn std::any::Any + Send)) -> BackendError {
    BackendError::Other {
        message: format!(
            "the local decode ended without an answer (it panicked: {})",
            panic_message(payload)
        ),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

fn backend_error(e: LocalError) -> BackendError {
    match e {
        LocalError::ContextLength { tokens, context } => BackendError::ContextLength {
            prompt_tokens: tokens,
            context,
        },
        LocalError::Io { .. }
        | LocalError::Fetch(_)
        | LocalError::Checksum { .. }
        | LocalError::Gguf(_)
        | LocalError::GgufRead { .. }
        | LocalError::Device(_) => BackendError::Unavailable {
            message: e.to_string(),
        },
        LocalError::Template(_)
        | LocalError::Tokenizer(_)
        | LocalError::Library {
            what: "tokenizer" | "chat template",
            ..
        } => BackendError::InvalidRequest {
            message: e.to_string(),
        },
        _ => BackendError::Other {
            message: e.to_string(),
        },
    }
}

impl LocalBackend {
    /// Starts the worker thread on first use and queues `job` on it.
    fn submit(&self, job: Work) -> Result<(), BackendError> {
        let unavailable = |message: String| BackendError::Unavailable { message };
        let tx = self
            .inner
            .worker
            .get_or_init(spawn_worker)
            .as_ref()
            .map_err(|e| unavailable(e.clone()))?;
        tx.send(job)
            .map_err(|_| unavailable("the local model's worker thread has stopped".into()))
    }

    /// The mask for `req`, when it carries a constraint and the backend constrains.
    fn mask_for(&self, req: &Request) -> Result<Option<Box<dyn TokenMask + Send>>, BackendError> {
        match &req.constraint.decoding {
            Some(_) => match self.mask_factory().map_err(backend_error)? {
                Some(f) => f.mask_for(req).map_err(backend_error),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    /// One request, decoded on the calling thread; stops when `cancel` is set.
    fn complete_now(&self, req: &Request, cancel: &AtomicBool) -> Result<Response, BackendError> {
        let mut mask = self.mask_for(req)?;
        let max_tokens = req.max_tokens.unwrap_or(self.inner.options.max_tokens);
        let out = self
            .decode(
                &req.messages.0,
                max_tokens,
                &req.sampling,
                mask.as_deref_mut().map(|m| m as &mut dyn TokenMask),
                Some(cancel),
            )
            .map_err(backend_error)?;
        Ok(self.response(out))
    }

    /// What [`Backend::complete`] answers for a generation.
    fn response(&self, out: Output) -> Response {
        Response {
            text: out.text,
            reasoning: None,
            finish_reason: Some(out.finish_reason),
            prompt_tokens: Some(out.prompt_tokens as u32),
            completion_tokens: Some(out.tokens.len() as u32),
            forward_calls: Some(out.forward_calls),
        }
    }

    /// Sets `req` up to decode in the worker's batch: the prompt's prefix from the cache (or
    /// computed and cached, as [`LocalBackend::decode`] does), a snapshot of the model for the
    /// request's own cache, its mask and generation. `None` when the model cannot batch (then
    /// the request decodes alone).
    #[allow(clippy::type_complexity)]
    fn start_in_batch(
        &self,
        req: &Request,
        cancel: &AtomicBool,
    ) -> Result<Option<(Model, Option<Box<dyn TokenMask + Send>>, Generation)>, BackendError> {
        {
            let state = self.state();
            if !state.model.batches() || !state.model.can_snapshot() {
                return Ok(None);
            }
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(backend_error(LocalError::Cancelled { tokens: 0 }));
        }
        let mut mask = self.mask_for(req)?;
        let max_tokens = req.max_tokens.unwrap_or(self.inner.options.max_tokens);
        let (prompt, prefix) = self
            .prompt_and_prefix(&req.messages.0)
            .map_err(backend_error)?;
        let t0 = Instant::now();
        let mut calls = 0u32;
        let (model, from, reused) = {
            let mut state = self.state();
            let state = &mut *state;
            state.scored.clear();
            let (from, reused) =
                Self::start_from_prefix(state, prefix, &mut calls).map_err(backend_error)?;
            let Some(model) = state.model.snapshot() else {
                return Ok(None);
            };
            (model, from, reused)
        };
        let start = Start {
            prompt: &prompt,
            from,
            reused,
            calls,
            t0,
        };
        let gen = self
            .generation(
                start,
                max_tokens,
                &req.sampling,
                mask.as_deref_mut().map(|m| m as &mut dyn TokenMask),
            )
            .map_err(backend_error)?;
        Ok(Some((model, mask, gen)))
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
        }))?;
        rx.await.unwrap_or_else(|_| {
            Err(BackendError::Other {
                message: "the local decode ended without an answer (it panicked)".into(),
            })
        })
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
