//! The one interface [`Model`](super::Model) drives, whichever engine holds the weights: this
//! crate's own forward pass ([`super::native`]), the same in Candle's tensor operations
//! (`candle_ops`) or candle-transformers' quantized models ([`super::candle_models`]), as
//! candle-transformers' own models share `forward(input, pos)`; and the one batched forward call
//! ([`run_batch`]) over the [`Segment`]s of the engines that run several sequences at once.

use std::any::Any;

use super::error::LocalError;
use super::native::NativeWeights;

/// A causal language model over its own KV cache.
///
/// [`Model`](super::Model) checks positions and the context length before it calls `forward`;
/// an engine only runs what it is given.
pub(crate) trait CausalLm: Any + Send {
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

    /// The weights this sequence runs on, for an engine that runs several sequences in one pass
    /// over them ([`run_batch`]); `None` for an engine that runs one sequence a call.
    fn weights_id(&self) -> Option<WeightsId> {
        None
    }

    /// The native engine's weights (their size and options, for a user to read); `None` for the
    /// other engines.
    fn native_weights(&self) -> Option<&NativeWeights> {
        None
    }

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
}

/// Which weights a sequence runs on ([`CausalLm::weights_id`]): their address, which one load
/// and its snapshots share (sequences with the same one run in one call), and the engine's
/// forward pass over several of its sequences.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WeightsId {
    /// The address of the shared weights.
    pub(crate) addr: usize,
    /// The engine's pass.
    pub(crate) pass: Pass,
}

/// An engine's forward pass over several of its sequences: every segment's model is of that
/// engine and load ([`run_batch`] checks it; [`of_engine`] gives them as the engine's own type).
pub(crate) type Pass = fn(&mut [Segment<'_>]) -> Result<Vec<Vec<f32>>, LocalError>;

impl PartialEq for WeightsId {
    /// The same weights: one address holds one engine's weights while they live.
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}

/// One sequence's part of a forward call: its model (its own KV cache, the weights shared with
/// the call's other sequences), its tokens at positions `pos..` (`pos` at most the cached length:
/// later positions are dropped first) and the tokens allowed after the last one (a bitset, as in
/// [`CausalLm::forward`]). The model is `dyn CausalLm` for [`run_batch`], the engine's own type
/// inside its pass.
pub(crate) struct Segment<'a, M: ?Sized = dyn CausalLm> {
    /// The sequence's model.
    pub(crate) model: &'a mut M,
    /// Its tokens, at positions `pos..`.
    pub(crate) tokens: &'a [u32],
    /// Where they go.
    pub(crate) pos: usize,
    /// The tokens allowed after the last one.
    pub(crate) allowed: Option<&'a [u32]>,
}

/// Runs several sequences in one forward call of their engine: every segment's tokens are rows of
/// the same matrix products (the weights are read once for all, which is what a decode step on a
/// CPU is bound by), each row's attention reads its own sequence's cache. Returns each segment's
/// logits after its last token. The segments' models must share their weights
/// ([`CausalLm::weights_id`]).
pub(crate) fn run_batch(segs: &mut [Segment<'_>]) -> Result<Vec<Vec<f32>>, LocalError> {
    let Some(first) = segs.first() else {
        return Ok(Vec::new());
    };
    let Some(id) = first.model.weights_id() else {
        return Err(LocalError::State(
            "this engine runs one sequence a forward call".into(),
        ));
    };
    for s in segs.iter() {
        if s.tokens.is_empty() {
            return Err(LocalError::State("forward with no tokens".into()));
        }
        if s.model.weights_id() != Some(id) {
            return Err(LocalError::State(
                "a batched forward call needs models of the same weights".into(),
            ));
        }
    }
    (id.pass)(segs)
}

/// The segments of an engine's pass as that engine's models (all of them are, when they share a
/// [`WeightsId`]).
pub(crate) fn of_engine<'s, M: CausalLm>(
    segs: &'s mut [Segment<'_>],
) -> Result<Vec<Segment<'s, M>>, LocalError> {
    segs.iter_mut()
        .map(|s| {
            let model = (&mut *s.model as &mut dyn Any)
                .downcast_mut::<M>()
                .ok_or_else(other_engine)?;
            Ok(Segment {
                model,
                tokens: s.tokens,
                pos: s.pos,
                allowed: s.allowed,
            })
        })
        .collect()
}

/// `other` as a model of engine `M`, for [`CausalLm::restore_from`].
pub(crate) fn same_engine<M: CausalLm>(other: &dyn CausalLm) -> Result<&M, LocalError> {
    (other as &dyn Any)
        .downcast_ref::<M>()
        .ok_or_else(other_engine)
}

/// The error of [`CausalLm::restore_from`] (or a batch) across engines.
fn other_engine() -> LocalError {
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
