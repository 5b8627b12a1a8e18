//! The one interface [`Model`](super::Model) drives, whichever engine holds the weights: this
//! crate's own forward pass ([`super::native`]) or candle-transformers' quantized models
//! ([`super::candle_models`]), as candle-transformers' own models share `forward(input, pos)`.

use std::any::Any;

use super::LocalError;

/// A causal language model over its own KV cache.
///
/// [`Model`](super::Model) checks positions and the context length before it calls `forward`;
/// an engine only runs what it is given.
pub(crate) trait CausalLm: Send {
    /// Runs `tokens` at positions `pos..pos + tokens.len()` (`pos` is 0 after a reset, else the
    /// cached length) and returns the logits after the last one. With `allowed` (a bitset over
    /// token ids: token `t` is bit `t % 32` of word `t / 32`) the other logits are -inf; an engine
    /// may then compute only the allowed ones.
    fn forward(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError>;

    /// Empties the KV cache.
    fn reset(&mut self);

    /// Whether [`CausalLm::rewind`] works.
    fn can_rewind(&self) -> bool {
        false
    }

    /// Drops the cached positions from `pos` on (`pos` at most the cached length).
    fn rewind(&mut self, _pos: usize) -> Result<(), LocalError> {
        Err(LocalError::State(
            "this engine cannot rewind its cache (use a snapshot)".into(),
        ))
    }

    /// Whether [`CausalLm::snapshot`] and [`CausalLm::restore_from`] work.
    fn can_snapshot(&self) -> bool {
        true
    }

    /// A copy in the current state sharing the weights; `None` when the engine cannot copy its
    /// cache.
    fn snapshot(&self) -> Option<Box<dyn CausalLm>>;

    /// Puts this model in `other`'s state; both come from the same load.
    fn restore_from(&mut self, other: &dyn CausalLm) -> Result<(), LocalError>;

    /// The engine as [`Any`], to reach what only one engine has (the native weights' summary).
    fn as_any(&self) -> &dyn Any;

    /// [`CausalLm::as_any`], mutably (the native engine's batched forward pass).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The error of [`CausalLm::restore_from`] across engines.
pub(crate) fn other_engine() -> LocalError {
    LocalError::State("cannot restore a model from a different kind of model".into())
}

/// The error of [`CausalLm::restore_from`] from a model of another load (the weights differ).
pub(crate) fn other_load() -> LocalError {
    LocalError::State("cannot restore a model from another model's snapshot".into())
}

/// The one sequence's logits of a batched call made for one sequence.
pub(crate) fn only_logits(mut logits: Vec<Vec<f32>>) -> Result<Vec<f32>, LocalError> {
    match (logits.pop(), logits.is_empty()) {
        (Some(l), true) => Ok(l),
        _ => Err(LocalError::State(
            "a forward call for one sequence returned another number of logits".into(),
        )),
    }
}
