//! What a generation gives and what the backend counts: [`Output`] (one generation's result),
//! [`DecodeStats`] (totals over a backend's generations) and the channel a streamed request's
//! text goes through. Data only: the decode loop (`decode.rs`) fills them.

use contract_core::extract::FinishReason;

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
    /// ([`LocalOptions::overlap_mask`](super::LocalOptions::overlap_mask)), which adds nothing to the generation's time.
    pub mask_overlapped_ms: f64,
}

/// Totals over the generations of a [`LocalBackend`](super::LocalBackend) and its clones
/// ([`LocalBackend::decode_stats`](super::LocalBackend::decode_stats); [`LocalBackend::score_continuations`](super::LocalBackend::score_continuations) is not counted, the
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
    /// Forward calls of [`Backend::complete`](contract_core::extract::Backend::complete)'s batch that fed more than one request at once
    /// ([`LocalOptions::max_batch`](super::LocalOptions::max_batch)).
    pub batched_calls: u64,
    /// The requests those calls fed, summed (over `batched_calls`: the mean batch).
    pub batched_requests: u64,
    /// Batches of prompts scored to the end ([`LocalBackend::score_prompts`](super::LocalBackend::score_prompts),
    /// [`Backend::score`](contract_core::extract::Backend::score)).
    pub scorings: u64,
    /// Forward calls of those scorings, counted as they run (a cancelled one's included).
    pub score_forward_calls: u64,
}

impl DecodeStats {
    pub(super) fn add(&mut self, o: &Output) {
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

/// The channel a streaming request's text goes through, from the decode loop to the caller.
pub(super) type TextSender = tokio::sync::mpsc::UnboundedSender<String>;
