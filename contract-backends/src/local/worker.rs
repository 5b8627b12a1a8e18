//! The worker thread and its continuous-batching scheduler: `Backend::complete` and
//! `Backend::score` queue their work there; each turn admits waiting requests into the decode
//! batch (up to `LocalOptions::max_batch`), feeds every request's next call in one forward call
//! ([`step`]), answers those that end, then makes one forward call of the oldest scoring job.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use contract_core::extract::{BackendError, FinishReason, Request, ScoreResponse};

use super::decode::{compute_masks, Generation, MaskParts, Start};
use super::error::{backend_error, panic_message, LocalError};
use super::model::{BatchItem, Model};
use super::sample::apply_mask;
use super::scoring::Scoring;
use super::state::{Job, LocalBackend, ScoreJob, Work};
use super::token_mask::{Allowed, TokenMask};

/// A [`ScoreJob`] on the worker, with its scoring once started.
struct ScoreActive {
    job: ScoreJob,
    scoring: Option<Scoring>,
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
            return Err(backend.complete_now(&job.req, &job.cancel, job.text.clone()));
        }
        match backend.start_in_batch(&job.req, &job.cancel) {
            Ok(Some((model, mask, mut gen))) => {
                gen.text = job.text.clone();
                Ok((model, mask, gen))
            }
            Ok(None) => Err(backend.complete_now(&job.req, &job.cancel, job.text.clone())),
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
            let mut stats = a.job.backend.stats();
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

/// The answer of a request whose decode panicked.
fn panicked(payload: &(dyn std::any::Any + Send)) -> BackendError {
    BackendError::Other {
        message: format!(
            "the local decode ended without an answer (it panicked: {})",
            panic_message(payload)
        ),
    }
}

impl LocalBackend {
    /// Starts the worker thread on first use and queues `job` on it.
    pub(super) fn submit(&self, job: Work) -> Result<(), BackendError> {
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
        // A reasoning block's tokens come on top of the answer's limit.
        let max_tokens = req
            .constraint
            .generation_limit(req.max_tokens.unwrap_or(self.inner.options.max_tokens));
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
