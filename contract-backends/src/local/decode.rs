//! The decode loop: [`LocalBackend::generate`] on the calling thread, and the
//! [`Generation`] state that the worker's batch drives the same way, one forward call at a time
//! (sampling, the mask advanced over the sampled and forced tokens); the next step's mask computed
//! before the forward call or while it runs ([`forward_and_mask`]). It fills the per-generation
//! [`Output`] and the backend's [`DecodeStats`](super::DecodeStats) (both in `output.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use contract_core::extract::{FinishReason, Sampling};
use contract_core::prompt::Message;

use super::error::{panic_message, LocalError};
use super::gguf_tokenizer::GgufTokenizer;
use super::output::{Output, TextSender};
use super::sample::{apply_mask, Sampler};
use super::state::LocalBackend;
use super::token_mask::{Allowed, TokenMask};

impl LocalBackend {
    /// Generates an answer to `messages`, at most `max_tokens` tokens, constrained by `mask`
    /// when given.
    pub fn generate(
        &self,
        messages: &[Message],
        max_tokens: u32,
        sampling: &Sampling,
        mask: Option<&mut dyn TokenMask>,
    ) -> Result<Output, LocalError> {
        self.decode(messages, max_tokens, sampling, mask, None, None)
    }

    /// [`LocalBackend::generate`], ending with [`LocalError::Cancelled`] at the first step that
    /// finds `cancel` set, and sending the text as it is decoded to `text` when given.
    pub(super) fn decode(
        &self,
        messages: &[Message],
        max_tokens: u32,
        sampling: &Sampling,
        mask: Option<&mut dyn TokenMask>,
        cancel: Option<&AtomicBool>,
        text: Option<TextSender>,
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
        gen.text = text;
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
    pub(super) fn generation(
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
            text: None,
            text_sent: String::new(),
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
    pub(super) fn finish(
        &self,
        gen: Generation,
        finish: FinishReason,
    ) -> Result<Output, LocalError> {
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
        self.stats().add(&output);
        Ok(output)
    }
}

/// Where a generation starts: its prompt, the position it continues from, the prefix tokens
/// reused and the forward calls made for the prefix.
pub(super) struct Start<'a> {
    pub(super) prompt: &'a [u32],
    pub(super) from: usize,
    pub(super) reused: usize,
    pub(super) calls: u32,
    pub(super) t0: Instant,
}

/// One generation between forward calls: the decode loop's state, so that
/// [`LocalBackend::decode`] drives one and the worker's batch drives several with the same steps.
pub(super) struct Generation {
    pub(super) tokenizer: Arc<GgufTokenizer>,
    pub(super) stops: Vec<u32>,
    pub(super) sampler: Sampler,
    pub(super) max_tokens: u32,
    pub(super) fast_forward: bool,
    pub(super) prompt_tokens: usize,
    pub(super) reused: usize,
    pub(super) out: Vec<u32>,
    pub(super) forced: u32,
    pub(super) sampled: u32,
    pub(super) calls: u32,
    pub(super) timing: Timing,
    /// The forward calls of the next step, in order (the logits of the last one are read).
    pub(super) pending: Vec<Vec<u32>>,
    pub(super) t0: Instant,
    /// Once the prompt is processed: how long that took, and when decoding started.
    pub(super) decoding: Option<(Duration, Instant)>,
    /// Where the text goes as it is decoded (`Backend::complete_streaming`).
    pub(super) text: Option<TextSender>,
    /// The text sent so far.
    pub(super) text_sent: String,
}

impl Generation {
    /// Takes the logits of a step's last forward call (masked already): samples the next token,
    /// advances the mask over it and the tokens the mask then forces, and queues the next step's
    /// calls; `Some` when the generation ends instead. `pos` is the model's position after the
    /// call, `context` its context length.
    pub(super) fn advance(
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
        self.send_text();
        Ok(None)
    }

    /// Sends the text decoded since the last step, when streaming: the whole output decoded
    /// again (a token's text can depend on its neighbours), an incomplete character at its end
    /// held back, and nothing sent while the decoded text does not extend what was sent (the
    /// final text, decoded once more, gives the rest).
    fn send_text(&mut self) {
        let Some(tx) = &self.text else {
            return;
        };
        let Ok(text) = self.tokenizer.decode(&self.out) else {
            return;
        };
        let stable = text.trim_end_matches('\u{FFFD}');
        let Some(new) = stable.strip_prefix(self.text_sent.as_str()) else {
            return;
        };
        if new.is_empty() {
            return;
        }
        if tx.send(new.to_owned()).is_err() {
            // The caller is gone: nothing more to send.
            self.text = None;
            return;
        }
        self.text_sent.push_str(new);
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
pub(super) type MaskParts<'a> = (
    &'a mut Option<Box<dyn TokenMask + Send>>,
    &'a mut Vec<u32>,
    &'a mut Timing,
);

/// Computes the next step's mask of each request in `maskers` (request index, parts) into its
/// bitset, marking `masked` and recording failures in `failed`; returns each mask's time by its
/// place in `maskers`.
pub(super) fn compute_masks(
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
pub(super) struct Timing {
    pub(super) forward: Duration,
    pub(super) mask: Duration,
    pub(super) mask_overlapped: Duration,
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
