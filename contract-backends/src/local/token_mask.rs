//! What the decode loop asks of a constraint: [`TokenMask`] (the tokens allowed at each step, as
//! [`Allowed`]), and [`MaskFactory`], which builds one for a request. The contract's grammar mask
//! ([`mask`](super::mask)) implements both.

use super::error::LocalError;

/// The tokens allowed next, as a [`TokenMask`] reports them.
#[derive(Debug, Clone, Copy)]
pub enum Allowed<'a> {
    /// Every token is allowed (no constraint at this step).
    All,
    /// A bitset over token ids: token `t` is allowed when bit `t % 32` of word `t / 32` is set.
    /// Ids past the end of the slice are disallowed.
    Bits(&'a [u32]),
}

/// A token-level constraint driven by the decode loop (implemented by the contract's grammar mask).
///
/// The loop, for one generation:
///
/// 1. `forced()`: tokens the constraint forces before anything is sampled (e.g. `{"`); they
///    are appended to the prompt and passed to `consume`.
/// 2. Each step: if `is_done()`, generation ends (finish reason `stop`); otherwise `allowed()`
///    masks the logits (disallowed ones set to -inf), a token is sampled. A stop token (EOS,
///    `<|im_end|>`) ends generation *without* being passed to `consume` (it is sampled only
///    when the mask allows it, i.e. when the grammar accepts). Any other token is passed to
///    `consume(&[t])`; then `forced()` gives the tokens that follow necessarily, which are
///    passed to `consume` as well and fed to the model together with `t` in one forward call.
///
/// If every token is masked out, the loop fails with [`LocalError::Mask`].
pub trait TokenMask {
    /// The tokens allowed at the next step.
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError>;
    /// The tokens the constraint forces next (possibly none), to feed without sampling.
    fn forced(&mut self) -> Result<Vec<u32>, LocalError>;
    /// Advances the constraint over `tokens` (sampled or forced).
    fn consume(&mut self, tokens: &[u32]) -> Result<(), LocalError>;
    /// Whether the constraint is complete and admits no further token.
    fn is_done(&self) -> bool;
}

/// Builds the [`TokenMask`] for a request (from `Request::grammar`), or none to decode freely.
///
/// Set on a [`LocalBackend`](super::LocalBackend) with
/// [`LocalBackend::with_masks`](super::LocalBackend::with_masks).
pub trait MaskFactory: Send + Sync {
    /// The mask for `req`, or `None` for unconstrained decoding.
    fn mask_for(
        &self,
        req: &contract_core::extract::Request,
    ) -> Result<Option<Box<dyn TokenMask + Send>>, LocalError>;
}
