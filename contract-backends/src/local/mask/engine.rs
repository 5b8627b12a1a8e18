//! [`MaskEngine`]'s data: what the mask needs of one tokenizer, its caches of compiled grammars
//! (by text, and by the shared grammar for grounded masks) and the process-wide cache of engines;
//! with the helpers both the engine (`mod.rs`) and a generation's mask (`generation.rs`) use.
//! The engine's methods are in `mod.rs`.

use std::sync::{Arc, Mutex};

use contract_core::grammar::Grammar;
use contract_core::parse::think::THINK_OPEN;
use llguidance::toktrie::TokEnv;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

use super::super::error::LocalError;
use super::rules::RulePlan;
use super::tokens::{TokenBytes, TokenSet};

/// The bytes of `<think>`, which open a think-then-fill reply.
pub(super) const THINK_OPEN_LEN: usize = THINK_OPEN.len();

pub(super) fn mask_err(e: impl std::fmt::Display) -> LocalError {
    LocalError::Mask(e.to_string())
}

/// An error of llguidance (or of what builds its input), its cause kept.
pub(super) fn llg_err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> LocalError {
    LocalError::library("token mask", e)
}

/// What the mask needs of one tokenizer, built once.
pub struct MaskEngine {
    pub(super) factory: ParserFactory,
    /// llguidance's tokenizer environment; its trie holds every token's bytes, one after the
    /// other ([`MaskEngine::token_bytes`]).
    pub(super) tok_env: TokEnv,
    /// For each [`Reach::CLASSES`], the tokens that have it: at a step where the scanner is
    /// [`Scanner::quiet`], only these can be refused, and the filter looks at no other (inside
    /// a string the mask allows most of the vocabulary; between values, a hundred whitespace
    /// tokens).
    pub(super) reach: [TokenSet; 4],
    /// Tokens with bytes, none of them whitespace-only: what the filter looks at when any
    /// byte may be checked.
    pub(super) solid: TokenSet,
    /// Tokens of JSON whitespace only (a hundred or so): handled as one ([`Blanks`]).
    pub(super) blank: TokenSet,
    /// Every token's bytes, as the filter reads them.
    pub(super) bytes: TokenBytes,
    pub(super) eos: Vec<u32>,
    /// Compiled grammars (a prototype matcher, whose clones share llguidance's lexer caches,
    /// and the rule plan), by the grammar's text (compared whole, not by a hash).
    pub(super) prepared: Mutex<Vec<CachedGrammar>>,
    /// What a grounded grammar's masks share whatever the document (its segment count and rule
    /// plan), by the shared grammar; at most [`CACHED_GRAMMARS`].
    pub(super) grounded: Mutex<Vec<GroundedParts>>,
}

/// The document-independent parts of a grounded grammar's masks.
pub(super) struct GroundedParts {
    /// The grammar (held, so its address stays this entry's key).
    pub(super) grammar: Arc<Grammar>,
    pub(super) segments: usize,
    pub(super) plan: Option<Arc<RulePlan>>,
}

/// One compiled grammar of [`MaskEngine`]'s cache.
pub(super) struct CachedGrammar {
    /// The grammar's serialised text: the key.
    pub(super) text: String,
    /// The shared value it was compiled from, when it came as one (a request's
    /// [`Decoding`]): a later request with the same `Arc` finds the entry by pointer, without
    /// serialising the grammar again. The entry holds it, so the pointer stays that value's.
    pub(super) shared: Option<Arc<dyn std::any::Any + Send + Sync>>,
    pub(super) prepared: Arc<Prepared>,
}

/// The address an `Arc` points at, for [`CachedGrammar::shared`].
pub(super) fn address<T: ?Sized>(a: &Arc<T>) -> *const () {
    Arc::as_ptr(a).cast()
}

/// The most grammars [`MaskEngine`] keeps compiled (the oldest is dropped first).
pub(super) const CACHED_GRAMMARS: usize = 64;

/// Adds an entry to [`MaskEngine`]'s cache, dropping the oldest past [`CACHED_GRAMMARS`].
pub(super) fn push_bounded(
    list: &mut Vec<CachedGrammar>,
    text: String,
    shared: Option<Arc<dyn std::any::Any + Send + Sync>>,
    prepared: Arc<Prepared>,
) {
    if list.len() >= CACHED_GRAMMARS {
        list.remove(0);
    }
    list.push(CachedGrammar {
        text,
        shared,
        prepared,
    });
}

/// What a cached mask is compiled from.
#[derive(Clone, Copy)]
pub(super) enum Compiled<'a> {
    /// A contract's grammar: llguidance over its schema, and its rule plan.
    Grammar(&'a Grammar),
    /// A plain JSON Schema: llguidance alone.
    Schema(&'a Value),
}

pub(super) struct Prepared {
    pub(super) matcher: Mutex<Matcher>,
    pub(super) plan: Option<Arc<RulePlan>>,
}

impl std::fmt::Debug for MaskEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaskEngine")
            .field("vocab", &self.vocab_size())
            .field("eos", &self.eos)
            .finish()
    }
}

/// One cached engine, with the tokenizer and stop tokens it was built for (compared whole: a
/// process holds one or two, and a comparison that fails on the length costs less than hashing
/// the tokenizer).
pub(super) struct CachedEngine {
    pub(super) tokenizer_json: Vec<u8>,
    pub(super) stop_tokens: Vec<u32>,
    pub(super) engine: Arc<MaskEngine>,
}

pub(super) static CACHE: Mutex<Vec<CachedEngine>> = Mutex::new(Vec::new());
