//! Scoring answers by the model's likelihood: [`LocalBackend::score_continuations`] (one prompt,
//! its cache reused from the last scored prompt or the prefix cache) and
//! [`LocalBackend::score_prompts`] (many prompts at once, planned as a token trie and fed several
//! sequences a forward call by the private `score` module), with their results [`Scores`] and
//! [`BatchScores`].

use contract_core::prompt::{Message, Messages};

use super::error::LocalError;
use super::model::Model;
use super::score::{log_sum_exp, Plan, Scorer};
use super::state::LocalBackend;

impl LocalBackend {
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
    /// fed up to [`LocalOptions::score_batch`](super::LocalOptions::score_batch) (and [`LocalOptions::score_tokens`](super::LocalOptions::score_tokens) tokens) a
    /// forward call. A model that cannot copy its cache (candle-transformers' qwen2) scores the
    /// prompts one after the other with [`LocalBackend::score_continuations`].
    ///
    /// Runs on the calling thread; [`Backend::score`](contract_core::extract::Backend::score) runs the same on the worker thread.
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
    pub(super) fn start_scoring(
        &self,
        prompts: &[Messages],
        answers: &[&str],
    ) -> Result<Scoring, LocalError> {
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
pub(super) enum Scoring {
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
    pub(super) fn is_done(&self) -> bool {
        match self {
            Scoring::Batched { scorer, .. } => scorer.is_done(),
            Scoring::OneByOne { prompts, scores } => scores.logprobs.len() >= *prompts,
        }
    }

    pub(super) fn step(
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
        backend.stats().score_forward_calls += u64::from(calls);
        Ok(())
    }

    /// The scores, once [`Scoring::is_done`]; counted in the backend's
    /// [`DecodeStats::scorings`].
    pub(super) fn finish(self, backend: &LocalBackend) -> Result<BatchScores, LocalError> {
        backend.stats().scorings += 1;
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
