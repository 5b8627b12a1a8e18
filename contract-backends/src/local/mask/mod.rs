//! The contract's token mask: llguidance for the syntax, the value filter ([`rules`]) for
//! cross-field rules.
//!
//! Under a grounded mask ([`MaskEngine::grounded_mask`]) the composed grammar holds the
//! cross-field rules itself when it can ([`Grammar::grounded_rules_composable`]): the filter
//! then does not run over the allowed tokens; its scanner only follows the output, so a token
//! that broke a rule would be an error, never a silent invalid output.
//!
//! A [`MaskEngine`] holds what depends only on the tokenizer (llguidance's `TokEnv` and parser
//! factory, every token's bytes, the classes of tokens by the bytes that can reach a rule value);
//! it is built once per tokenizer and cached ([`MaskEngine::cached`]). Each generation gets a
//! [`ContractMask`] from [`MaskEngine::mask`], which implements [`TokenMask`] for the decode loop.

pub mod rules;
mod rules_dec;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use contract_core::extract::Decoding;
use contract_core::grammar::grounded::GroundedSegment;
use contract_core::grammar::{Grammar, Think};
use contract_core::ground::{Grounds, Numerals};
use contract_core::parse::think::{THINK_CLOSE, THINK_OPEN};
use contract_core::source::Source;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

use self::rules::{Blanks, Reach, RulePlan, Scanner};
use super::{Allowed, LocalError, MaskFactory, TokenMask};

/// The bytes of `<think>`, which open a think-then-fill reply.
const THINK_OPEN_LEN: usize = THINK_OPEN.len();

fn mask_err(e: impl std::fmt::Display) -> LocalError {
    LocalError::Mask(e.to_string())
}

/// An error of llguidance (or of what builds its input), its cause kept.
fn llg_err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> LocalError {
    LocalError::library("token mask", e)
}

/// A set of tokens (llguidance's bitset), scanned against a mask.
#[derive(Debug, Default)]
struct TokenSet {
    vob: SimpleVob,
    len: usize,
    /// The words of `vob` with a token, when they are under a quarter of them (the tokens
    /// with `"` and `:`): those alone are tested.
    sparse: Option<Vec<usize>>,
}

/// Words of a mask tested at once: the allowed tokens are few (keys, digits, punctuation) and
/// most blocks of a mask are empty.
const BLOCK: usize = 16;

impl TokenSet {
    /// The tokens of `trie` whose bytes ([`plain_bytes`]) satisfy `has`.
    fn of(trie: &TokTrie, has: impl Fn(&[u8]) -> bool) -> TokenSet {
        let n = trie.vocab_size();
        let mut vob = SimpleVob::alloc(n);
        for t in 0..n as u32 {
            if has(plain_bytes(trie, t)) {
                vob.allow_token(t);
            }
        }
        let len = vob.num_set();
        let words: Vec<usize> = (vob.as_slice().iter().enumerate())
            .filter(|(_, w)| **w != 0)
            .map(|(i, _)| i)
            .collect();
        let sparse = (words.len() < vob.as_slice().len() / 4).then_some(words);
        TokenSet { vob, len, sparse }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Adds to `refused` the tokens of this set that `vob` allows and `refuse` refuses.
    fn refuse(&self, vob: &SimpleVob, refused: &mut Vec<u32>, mut refuse: impl FnMut(u32) -> bool) {
        // One pass over both, skipping the empty blocks of their intersection (llguidance's
        // `SimpleVob::and` then `iter_set_entries` would take three passes and a copy of the
        // mask). Measured in the bench: reading the mask alone first and the set only in the
        // mask's non-empty blocks, or scanning the mask against the set's complement, cost more
        // (the whitespace tokens a mask allows spread over most blocks).
        let n = vob.as_slice().len().min(self.vob.as_slice().len());
        let (allowed, mine) = (&vob.as_slice()[..n], &self.vob.as_slice()[..n]);
        let mut each = |word: usize, bits: u32| {
            let mut bits = bits;
            while bits != 0 {
                let t = (word * 32) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                if refuse(t) {
                    refused.push(t);
                }
            }
        };
        if let Some(words) = &self.sparse {
            for &w in words.iter().take_while(|&&w| w < n) {
                each(w, allowed[w] & mine[w]);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { scan_avx2(allowed, mine, &mut each) };
            return;
        }
        scan(allowed, mine, &mut each);
    }
}

/// Calls `each` with every word of `allowed & mine` that has a bit, skipping the empty blocks.
#[inline(always)]
fn scan(allowed: &[u32], mine: &[u32], each: &mut impl FnMut(usize, u32)) {
    let n = allowed.len().min(mine.len());
    let blocks = allowed.chunks_exact(BLOCK).zip(mine.chunks_exact(BLOCK));
    for (b, (a, m)) in blocks.enumerate() {
        // Fixed-size blocks: the test compiles to a few vector instructions.
        let (Ok(a), Ok(m)) = (<&[u32; BLOCK]>::try_from(a), <&[u32; BLOCK]>::try_from(m)) else {
            continue;
        };
        let mut any = 0;
        for i in 0..BLOCK {
            any |= a[i] & m[i];
        }
        if any != 0 {
            block_words(b * BLOCK, a, m, each);
        }
    }
    for w in n - n % BLOCK..n {
        each(w, allowed[w] & mine[w]);
    }
}

/// [`scan`]'s work on a block with a token, kept out of its loop (which then holds all it
/// needs in registers).
#[inline(never)]
fn block_words(
    first: usize,
    a: &[u32; BLOCK],
    m: &[u32; BLOCK],
    each: &mut impl FnMut(usize, u32),
) {
    for i in 0..BLOCK {
        // Most words of such a block have none.
        let w = a[i] & m[i];
        if w != 0 {
            each(first + i, w);
        }
    }
}

/// [`scan`] compiled for AVX2 (a block's test in two 256-bit vectors instead of four).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scan_avx2(allowed: &[u32], mine: &[u32], each: &mut impl FnMut(usize, u32)) {
    scan(allowed, mine, each)
}

/// Every token's bytes ([`plain_bytes`]) one after the other, and where each starts: the filter
/// reads a dozen tokens a step, without a call into llguidance's trie for each.
#[derive(Debug, Default)]
struct TokenBytes {
    data: Vec<u8>,
    /// Token `t`'s bytes are `data[starts[t]..starts[t + 1]]`.
    starts: Vec<usize>,
}

impl TokenBytes {
    fn of(trie: &TokTrie) -> TokenBytes {
        let n = trie.vocab_size();
        let mut data = Vec::new();
        let mut starts = Vec::with_capacity(n + 1);
        for t in 0..n as u32 {
            starts.push(data.len());
            data.extend_from_slice(plain_bytes(trie, t));
        }
        starts.push(data.len());
        TokenBytes { data, starts }
    }

    /// The bytes of token `t` (empty past the vocabulary).
    #[inline]
    fn token(&self, t: u32) -> &[u8] {
        let t = t as usize;
        match (self.starts.get(t), self.starts.get(t + 1)) {
            (Some(&a), Some(&b)) => self.data.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// The bytes of token `t`, empty for a special token (which llguidance's trie stores behind a
/// marker byte).
fn plain_bytes(trie: &TokTrie, t: u32) -> &[u8] {
    let b = trie.token(t);
    if b.first() == Some(&TokTrie::SPECIAL_TOKEN_MARKER) {
        &[]
    } else {
        b
    }
}

/// What the mask needs of one tokenizer, built once.
pub struct MaskEngine {
    factory: ParserFactory,
    /// llguidance's tokenizer environment; its trie holds every token's bytes, one after the
    /// other ([`MaskEngine::token_bytes`]).
    tok_env: TokEnv,
    /// For each [`Reach::CLASSES`], the tokens that have it: at a step where the scanner is
    /// [`Scanner::quiet`], only these can be refused, and the filter looks at no other (inside
    /// a string the mask allows most of the vocabulary; between values, a hundred whitespace
    /// tokens).
    reach: [TokenSet; 4],
    /// Tokens with bytes, none of them whitespace-only: what the filter looks at when any
    /// byte may be checked.
    solid: TokenSet,
    /// Tokens of JSON whitespace only (a hundred or so): handled as one ([`Blanks`]).
    blank: TokenSet,
    /// Every token's bytes, as the filter reads them.
    bytes: TokenBytes,
    eos: Vec<u32>,
    /// Compiled grammars (a prototype matcher, whose clones share llguidance's lexer caches,
    /// and the rule plan), by the grammar's text (compared whole, not by a hash).
    prepared: Mutex<Vec<CachedGrammar>>,
    /// What a grounded grammar's masks share whatever the document (its segment count and rule
    /// plan), by the shared grammar; at most [`CACHED_GRAMMARS`].
    grounded: Mutex<Vec<GroundedParts>>,
}

/// The document-independent parts of a grounded grammar's masks.
struct GroundedParts {
    /// The grammar (held, so its address stays this entry's key).
    grammar: Arc<Grammar>,
    segments: usize,
    plan: Option<Arc<RulePlan>>,
}

/// One compiled grammar of [`MaskEngine`]'s cache.
struct CachedGrammar {
    /// The grammar's serialised text: the key.
    text: String,
    /// The shared value it was compiled from, when it came as one (a request's
    /// [`Decoding`]): a later request with the same `Arc` finds the entry by pointer, without
    /// serialising the grammar again. The entry holds it, so the pointer stays that value's.
    shared: Option<Arc<dyn std::any::Any + Send + Sync>>,
    prepared: Arc<Prepared>,
}

/// The address an `Arc` points at, for [`CachedGrammar::shared`].
fn address<T: ?Sized>(a: &Arc<T>) -> *const () {
    Arc::as_ptr(a).cast()
}

/// The most grammars [`MaskEngine`] keeps compiled (the oldest is dropped first).
const CACHED_GRAMMARS: usize = 64;

/// Adds an entry to [`MaskEngine`]'s cache, dropping the oldest past [`CACHED_GRAMMARS`].
fn push_bounded(
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
enum Compiled<'a> {
    /// A contract's grammar: llguidance over its schema, and its rule plan.
    Grammar(&'a Grammar),
    /// A plain JSON Schema: llguidance alone.
    Schema(&'a Value),
}

struct Prepared {
    matcher: Mutex<Matcher>,
    plan: Option<Arc<RulePlan>>,
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
struct CachedEngine {
    tokenizer_json: Vec<u8>,
    stop_tokens: Vec<u32>,
    engine: Arc<MaskEngine>,
}

static CACHE: Mutex<Vec<CachedEngine>> = Mutex::new(Vec::new());

impl MaskEngine {
    /// Builds the engine for a `tokenizer.json`, with the model's stop tokens (EOS, end of turn)
    /// as the tokens that end a generation; empty: the tokenizer's own guess.
    pub fn new(tokenizer_json: &[u8], stop_tokens: &[u32]) -> Result<MaskEngine, LocalError> {
        let mut tok = toktrie_hf_tokenizers::ByteTokenizer::from_json_bytes(tokenizer_json)
            .map_err(llg_err)?;
        if !stop_tokens.is_empty() {
            tok.set_eos_tokens(stop_tokens);
        }
        let eos = tok.eos_tokens();
        let tok_env = tok.into_tok_env(None).map_err(llg_err)?;
        let mut factory = ParserFactory::new_simple(&tok_env).map_err(llg_err)?;
        factory.quiet();
        let trie = tok_env.tok_trie();
        let is_blank =
            |b: &[u8]| !b.is_empty() && b.iter().all(|c| matches!(c, b' ' | b'\n' | b'\r' | b'\t'));
        let reach = Reach::CLASSES.map(|r| TokenSet::of(trie, |b| r.reached_by(b)));
        let solid = TokenSet::of(trie, |b| !b.is_empty() && !is_blank(b));
        let blank = TokenSet::of(trie, is_blank);
        let bytes = TokenBytes::of(trie);
        Ok(MaskEngine {
            factory,
            tok_env,
            reach,
            solid,
            blank,
            bytes,
            eos,
            prepared: Mutex::new(Vec::new()),
            grounded: Mutex::new(Vec::new()),
        })
    }

    /// The engine for the tokenizer a GGUF file carries, without stop tokens ([`Self::cached`]):
    /// what a check of masks alone needs, without loading the model's weights.
    pub fn for_gguf(path: &std::path::Path) -> Result<Arc<MaskEngine>, LocalError> {
        let json = super::gguf_tokenizer::load_tokenizer_json(path)?;
        Self::cached(&json, &[])
    }

    /// The engine for this tokenizer and stop tokens, built on first use and shared after.
    pub fn cached(
        tokenizer_json: &[u8],
        stop_tokens: &[u32],
    ) -> Result<Arc<MaskEngine>, LocalError> {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache
            .iter()
            .find(|c| c.stop_tokens == stop_tokens && c.tokenizer_json == tokenizer_json)
        {
            return Ok(c.engine.clone());
        }
        let engine = Arc::new(MaskEngine::new(tokenizer_json, stop_tokens)?);
        cache.push(CachedEngine {
            tokenizer_json: tokenizer_json.to_vec(),
            stop_tokens: stop_tokens.to_vec(),
            engine: engine.clone(),
        });
        Ok(engine)
    }

    /// Vocabulary size (mask length).
    pub fn vocab_size(&self) -> usize {
        self.tok_env.tok_trie().vocab_size()
    }

    /// The bytes of token `t` (empty for special tokens and past the vocabulary).
    pub fn token_bytes(&self, t: u32) -> &[u8] {
        plain_bytes(self.tok_env.tok_trie(), t)
    }

    /// The tokens that end a generation.
    pub fn stop_tokens(&self) -> &[u32] {
        &self.eos
    }

    /// The number of tokens the rule filter must look at inside a free string.
    pub fn quote_colon_tokens(&self) -> usize {
        self.reach_set(Reach::QuoteColon).map_or(0, TokenSet::len)
    }

    /// The tokens that have `reach` (`None` for [`Reach::Nothing`]: no token).
    fn reach_set(&self, reach: Reach) -> Option<&TokenSet> {
        let i = Reach::CLASSES.iter().position(|&r| r == reach)?;
        self.reach.get(i)
    }

    /// The llguidance tokenizer environment.
    pub fn tok_env(&self) -> &TokEnv {
        &self.tok_env
    }

    /// A mask for one generation of `grammar`: llguidance plus the value filter. The grammar is
    /// compiled once per engine; later masks start from a clone.
    pub fn mask(self: &Arc<Self>, grammar: &Grammar) -> Result<ContractMask, LocalError> {
        self.cached_mask(Compiled::Grammar(grammar), None, None)
    }

    /// [`MaskEngine::mask`] for a shared grammar (a request's
    /// [`Decoding::Grammar`]): found again by pointer, without serialising it.
    pub fn mask_shared(
        self: &Arc<Self>,
        grammar: &Arc<Grammar>,
    ) -> Result<ContractMask, LocalError> {
        self.cached_mask(Compiled::Grammar(grammar), Some(grammar.clone()), None)
    }

    /// A mask from a plain JSON Schema (llguidance alone, no cross-field rules), such as
    /// `DynContract::grammar()`; compiled once per engine and schema, later masks start from a
    /// clone.
    pub fn mask_for_json_schema(
        self: &Arc<Self>,
        schema: &Value,
    ) -> Result<ContractMask, LocalError> {
        self.cached_mask(Compiled::Schema(schema), None, None)
    }

    /// [`MaskEngine::mask_for_json_schema`] for a shared schema (a request's
    /// [`Decoding::JsonSchema`]): found again by pointer, without serialising it.
    pub fn mask_for_shared_schema(
        self: &Arc<Self>,
        schema: &Arc<Value>,
    ) -> Result<ContractMask, LocalError> {
        self.cached_mask(Compiled::Schema(schema), Some(schema.clone()), None)
    }

    /// Think, then fill: a mask that first lets the model write a reasoning block of at most
    /// `think.max_tokens` tokens (`<think> .. </think>`, [`Think::wrap_lark`]; the mask counts
    /// the block's tokens and, at the cap, allows and forces only the rest of `</think>`), then
    /// holds it to
    /// `decoding` as [`GrammarMasks`] would: a contract's grammar grounded in `source` when it
    /// has groundings and a source is given (the first grounded segment's grammar is the one
    /// wrapped; the later ones are composed from the values decoded after the trace), else its
    /// grammar, or a plain JSON Schema. The value filter and the rule scanner read only the
    /// output after `</think>`: the trace is free text, held to nothing but its length.
    pub fn think_mask(
        self: &Arc<Self>,
        decoding: &Decoding,
        source: Option<&Source>,
        think: Think,
    ) -> Result<ContractMask, LocalError> {
        match (decoding, source) {
            (Decoding::Grammar(grammar), Some(source)) if grammar.is_grounded() => {
                self.grounded(grammar, source, Some(think))
            }
            (Decoding::Grammar(grammar), _) => {
                self.cached_mask(Compiled::Grammar(grammar), None, Some(think))
            }
            (Decoding::JsonSchema(schema), _) => {
                self.cached_mask(Compiled::Schema(schema), None, Some(think))
            }
        }
    }

    /// A fresh mask of `what`, compiled on first use and cached under `shared`'s address (when
    /// it came as a shared value) and its text.
    /// With `think`, the grammar has a reasoning block in front ([`Think::wrap_lark`]) and is
    /// cached under its text alone (the shared value's address stays the plain grammar's).
    fn cached_mask(
        self: &Arc<Self>,
        what: Compiled<'_>,
        shared: Option<Arc<dyn std::any::Any + Send + Sync>>,
        think: Option<Think>,
    ) -> Result<ContractMask, LocalError> {
        let shared = shared.filter(|_| think.is_none());
        let text = || {
            let text = match what {
                Compiled::Grammar(g) => serde_json::to_string(g),
                Compiled::Schema(s) => serde_json::to_string(s).map(|s| format!("json_schema {s}")),
            }
            .map_err(llg_err)?;
            Ok(match think {
                Some(t) => format!("think {} {text}", t.max_tokens),
                None => text,
            })
        };
        let prepared = self.prepared(text, shared, || {
            let (schema, plan) = match what {
                Compiled::Grammar(g) => (g.schema(), Some(Arc::new(RulePlan::new(g)))),
                Compiled::Schema(s) => (s.clone(), None),
            };
            let matcher = match think {
                None => self.mask_for_schema(schema, None)?.matcher,
                Some(t) => {
                    let lark = t
                        .wrap_lark(&format!("start: %json {schema}"))
                        .ok_or_else(|| mask_err("the contract's grammar has no start rule"))?;
                    self.lark_matcher(lark)?
                }
            };
            Ok(Prepared {
                matcher: Mutex::new(matcher),
                plan,
            })
        })?;
        let mut mask = self.start(&prepared);
        mask.trace = think.map(Trace::new);
        Ok(mask)
    }

    /// The compiled grammar cached under `shared`'s address or else under `text()`, built by
    /// `build` on first use.
    fn prepared(
        &self,
        text: impl FnOnce() -> Result<String, LocalError>,
        shared: Option<Arc<dyn std::any::Any + Send + Sync>>,
        build: impl FnOnce() -> Result<Prepared, LocalError>,
    ) -> Result<Arc<Prepared>, LocalError> {
        let lock = || self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        // One lock on a hit: by address, else by text (serialised under the lock; compiling,
        // the slow part, runs outside it).
        let text = {
            let mut list = lock();
            if let Some(s) = &shared {
                let by_address = list
                    .iter()
                    .find(|c| c.shared.as_ref().is_some_and(|k| address(k) == address(s)));
                if let Some(c) = by_address {
                    return Ok(c.prepared.clone());
                }
            }
            let text = text()?;
            if let Some(found) = list.iter().find(|c| c.text == text) {
                let prepared = found.prepared.clone();
                if shared.is_some() {
                    // Kept again under the shared value's address.
                    push_bounded(&mut list, text, shared, prepared.clone());
                }
                return Ok(prepared);
            }
            text
        };
        let prepared = Arc::new(build()?);
        push_bounded(&mut lock(), text, shared, prepared.clone());
        Ok(prepared)
    }

    /// A fresh mask from a compiled grammar (a clone of its matcher).
    fn start(self: &Arc<Self>, prepared: &Prepared) -> ContractMask {
        let matcher = prepared
            .matcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        ContractMask {
            engine: self.clone(),
            matcher,
            composer: None,
            plan: prepared.plan.clone(),
            filter_on: true,
            scanner: Scanner::new(),
            allowed: SimpleVob::new(),
            refused: Vec::new(),
            output: Vec::new(),
            stats: MaskStats::default(),
            timing: false,
            trace: None,
        }
    }

    /// A matcher for an llguidance Lark grammar.
    fn lark_matcher(&self, lark: String) -> Result<Matcher, LocalError> {
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(lark))
            .map_err(llg_err)?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(mask_err(e));
        }
        Ok(matcher)
    }

    /// A mask for one generation of `grammar` grounded in `source`: grounded strings are
    /// substrings of their text, grounded numbers numbers it writes, values grounded in an earlier
    /// field drawn from that field as decoded (the root object is composed segment by segment),
    /// and the cross-field rules enforced by the value filter as in [`MaskEngine::mask`]. A
    /// grammar without groundings gives the plain mask.
    pub fn grounded_mask(
        self: &Arc<Self>,
        grammar: &Grammar,
        source: &Source,
    ) -> Result<ContractMask, LocalError> {
        if !grammar.is_grounded() {
            return self.mask(grammar);
        }
        self.grounded_mask_shared(&Arc::new(grammar.clone()), source)
    }

    /// [`MaskEngine::grounded_mask`] for a shared grammar (a request's
    /// [`Decoding::Grammar`]), which the mask keeps without copying it.
    pub fn grounded_mask_shared(
        self: &Arc<Self>,
        grammar: &Arc<Grammar>,
        source: &Source,
    ) -> Result<ContractMask, LocalError> {
        if !grammar.is_grounded() {
            return self.mask_shared(grammar);
        }
        self.grounded(grammar, source, None)
    }

    /// [`MaskEngine::grounded_mask_shared`] of a grounded grammar, with a reasoning block in
    /// front of its first segment when `think` is given.
    fn grounded(
        self: &Arc<Self>,
        grammar: &Arc<Grammar>,
        source: &Source,
        think: Option<Think>,
    ) -> Result<ContractMask, LocalError> {
        let t0 = Instant::now();
        let (segments, plan) = self.grounded_parts(grammar)?;
        let composer = Composer {
            grammar: grammar.clone(),
            numerals: source.numerals(),
            source: Arc::new(source.clone()),
            segments,
            current: 0,
        };
        let first = composer.segment(0, &[])?;
        let lark = match think {
            None => first.lark,
            Some(t) => t
                .wrap_lark(&first.lark)
                .ok_or_else(|| mask_err("the grounded grammar has no start rule"))?,
        };
        let matcher = self.lark_matcher(lark)?;
        let filter_on = plan.is_some() && !first.rules_enforced;
        let mut stats = MaskStats::default();
        stats.compile_ns.push(t0.elapsed().as_nanos() as u64);
        Ok(ContractMask {
            engine: self.clone(),
            matcher,
            composer: Some(Box::new(composer)),
            plan,
            filter_on,
            scanner: Scanner::new(),
            allowed: SimpleVob::new(),
            refused: Vec::new(),
            output: Vec::new(),
            stats,
            timing: false,
            trace: think.map(Trace::new),
        })
    }

    /// A grounded grammar's segment count and rule plan, computed once per shared grammar (a
    /// request's [`Decoding::Grammar`] is one `Arc` per contract type).
    fn grounded_parts(
        &self,
        grammar: &Arc<Grammar>,
    ) -> Result<(usize, Option<Arc<RulePlan>>), LocalError> {
        let lock = || self.grounded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = lock().iter().find(|p| Arc::ptr_eq(&p.grammar, grammar)) {
            return Ok((p.segments, p.plan.clone()));
        }
        let segments = grammar.grounded_segments().map_err(llg_err)?.len();
        let plan = grammar
            .has_rules()
            .then(|| Arc::new(RulePlan::new(grammar)));
        let mut list = lock();
        if list.len() >= CACHED_GRAMMARS {
            list.remove(0);
        }
        list.push(GroundedParts {
            grammar: grammar.clone(),
            segments,
            plan: plan.clone(),
        });
        Ok((segments, plan))
    }

    /// A mask from an llguidance JSON Schema, with an optional rule plan.
    pub fn mask_for_schema(
        self: &Arc<Self>,
        schema: Value,
        plan: Option<Arc<RulePlan>>,
    ) -> Result<ContractMask, LocalError> {
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_json_schema(schema))
            .map_err(llg_err)?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(mask_err(e));
        }
        Ok(ContractMask {
            engine: self.clone(),
            matcher,
            composer: None,
            plan,
            filter_on: true,
            scanner: Scanner::new(),
            allowed: SimpleVob::new(),
            refused: Vec::new(),
            output: Vec::new(),
            stats: MaskStats::default(),
            timing: false,
            trace: None,
        })
    }
}

/// The grounded grammar of one document, composed segment by segment
/// ([`Grammar::grounded_segments`]): when a segment's matcher accepts, the next segment's
/// grammar is built from the source and the values decoded so far, and decoding goes on in it.
#[derive(Clone)]
struct Composer {
    grammar: Arc<Grammar>,
    source: Arc<Source>,
    numerals: Numerals,
    segments: usize,
    current: usize,
}

impl Composer {
    fn segment(&self, segment: usize, output: &[u8]) -> Result<GroundedSegment, LocalError> {
        let decoded = if segment == 0 {
            serde_json::Map::new()
        } else {
            // The output ends with the `,` closing the previous segment: close the object.
            let text = String::from_utf8_lossy(output);
            let head = text.trim_end().trim_end_matches(',');
            match serde_json::from_str::<Value>(&format!("{head}}}")) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return Err(mask_err(format!(
                        "grounded segment {segment}: the output so far is not an object prefix: {text:?}"
                    )))
                }
            }
        };
        let grounds = Grounds::with_numerals(&self.source, self.numerals);
        self.grammar
            .grounded_segment(&grounds, segment, &decoded)
            .map_err(llg_err)
    }
}

/// Counters of one generation's mask.
#[derive(Debug, Clone, Default)]
pub struct MaskStats {
    /// Steps whose mask was computed.
    pub steps: usize,
    /// Nanoseconds llguidance took per step (only with timing on).
    pub llg_ns: Vec<u64>,
    /// Nanoseconds the value filter took per step (only with timing on).
    pub filter_ns: Vec<u64>,
    /// Tokens the value filter dropped.
    pub dropped: usize,
    /// Steps where the filter would have left no token (a bug in the filter: the unfiltered
    /// mask is used instead).
    pub filter_emptied: usize,
    /// Steps where the value filter ran over the allowed tokens (under a grounded mask whose
    /// grammar holds the rules itself, none).
    pub filter_steps: usize,
    /// Nanoseconds spent building and compiling each grounded segment's grammar.
    pub compile_ns: Vec<u64>,
}

/// The token mask of one generation. A clone continues independently from the same state
/// (llguidance's lexer caches are shared).
#[derive(Clone)]
pub struct ContractMask {
    engine: Arc<MaskEngine>,
    matcher: Matcher,
    composer: Option<Box<Composer>>,
    plan: Option<Arc<RulePlan>>,
    /// Whether the value filter runs over the allowed tokens (false while the composed
    /// grounded grammar holds every rule itself).
    filter_on: bool,
    scanner: Scanner,
    /// The last step's allowed tokens (handed out by reference, not copied).
    allowed: SimpleVob,
    /// The tokens the filter refused this step (kept to reuse the allocation).
    refused: Vec<u32>,
    output: Vec<u8>,
    stats: MaskStats,
    timing: bool,
    /// Think, then fill ([`MaskEngine::think_mask`]): where the contract starts in the output.
    trace: Option<Trace>,
}

/// The reasoning block of a think-then-fill mask.
#[derive(Debug, Clone)]
struct Trace {
    /// The byte offset in the output just past `</think>`; `None` while the block is open.
    contract_at: Option<usize>,
    /// Tokens consumed inside the block (after `<think>`).
    tokens: u32,
    /// The most it may hold ([`Think::max_tokens`]): then only `</think>` goes on.
    cap: u32,
}

impl Trace {
    fn new(think: Think) -> Trace {
        Trace {
            contract_at: None,
            tokens: 0,
            cap: think.max_tokens.max(1),
        }
    }
}

impl std::fmt::Debug for ContractMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContractMask")
            .field("output", &String::from_utf8_lossy(&self.output))
            .finish()
    }
}

impl ContractMask {
    /// Records per-step timings in [`ContractMask::stats`].
    pub fn with_timing(mut self, on: bool) -> Self {
        self.timing = on;
        self
    }

    /// Turns the value filter off (llguidance alone), for comparisons.
    pub fn without_rules(mut self) -> Self {
        self.plan = None;
        self
    }

    /// The counters so far.
    pub fn stats(&self) -> &MaskStats {
        &self.stats
    }

    /// The bytes consumed so far.
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    /// Whether a think-then-fill mask is still inside its reasoning block
    /// ([`MaskEngine::think_mask`]); `false` for any other mask.
    pub fn in_trace(&self) -> bool {
        self.trace.as_ref().is_some_and(|t| t.contract_at.is_none())
    }

    /// The reasoning block's text so far, tags removed (`None` without one): what a
    /// think-then-fill mask consumed between `<think>` and `</think>`.
    pub fn trace_text(&self) -> Option<String> {
        let t = self.trace.as_ref()?;
        let end = t
            .contract_at
            .map_or(self.output.len(), |at| at - THINK_CLOSE.len());
        let body = self.output.get(..end).unwrap_or(&self.output);
        let body = body.strip_prefix(b"<think>").unwrap_or(body);
        Some(String::from_utf8_lossy(body).into_owned())
    }

    /// Inside a reasoning block that holds its cap of tokens: the bytes of `</think>` still to
    /// write (the output may end with its first bytes already).
    fn closing(&self) -> Option<&'static [u8]> {
        let t = self.trace.as_ref()?;
        if t.contract_at.is_some() || t.tokens < t.cap {
            return None;
        }
        let close = THINK_CLOSE.as_bytes();
        let body = self.output.get(THINK_OPEN_LEN..).unwrap_or(&[]);
        let k = (0..close.len())
            .rev()
            .find(|&k| body.ends_with(&close[..k]))
            .unwrap_or(0);
        close.get(k..)
    }

    /// At a reasoning block's cap, keeps of `vob` only the tokens that go on with `</think>`.
    fn cap_trace(&self, vob: &mut SimpleVob) {
        let Some(rest) = self.closing() else {
            return;
        };
        let mut refused = Vec::new();
        vob.iter_set_entries(|t| {
            let b = self.engine.token_bytes(t as u32);
            if b.is_empty() || !(rest.starts_with(b) || b.starts_with(rest)) {
                refused.push(t as u32);
            }
        });
        for t in refused {
            vob.disallow_token(t);
        }
    }

    /// The output after the reasoning block (all of it without one): the contract's part.
    pub fn contract_output(&self) -> &[u8] {
        match &self.trace {
            None => &self.output,
            Some(Trace {
                contract_at: Some(at),
                ..
            }) => self.output.get(*at..).unwrap_or(&[]),
            Some(Trace {
                contract_at: None, ..
            }) => &[],
        }
    }

    /// The engine this mask runs on.
    pub fn engine(&self) -> &Arc<MaskEngine> {
        &self.engine
    }

    /// llguidance's mask alone for the current step.
    pub fn grammar_mask(&mut self) -> Result<SimpleVob, LocalError> {
        let vob = self.matcher.compute_mask().map_err(llg_err)?;
        if let Some(e) = self.matcher.get_error() {
            return Err(mask_err(e));
        }
        Ok(vob)
    }

    /// The allowed tokens as a bitset (bit `t % 32` of word `t / 32`).
    pub fn allowed_tokens(&mut self) -> Result<&[u32], LocalError> {
        // The clock is read only with timing on (the decode loop runs without).
        let now = |on: bool| on.then(Instant::now);
        let t0 = now(self.timing);
        let mut vob = self.grammar_mask()?;
        self.cap_trace(&mut vob);
        let t1 = now(self.timing);
        let filter_on = self.filter_on && !self.in_trace();
        if let Some(plan) = self.plan.clone().filter(|_| filter_on) {
            self.filter(&plan, &mut vob);
            self.stats.filter_steps += 1;
        }
        if let (Some(t0), Some(t1)) = (t0, t1) {
            let t2 = Instant::now();
            self.stats.llg_ns.push((t1 - t0).as_nanos() as u64);
            self.stats.filter_ns.push((t2 - t1).as_nanos() as u64);
        }
        self.stats.steps += 1;
        self.allowed = vob;
        Ok(self.allowed.as_slice())
    }

    fn filter(&mut self, plan: &RulePlan, vob: &mut SimpleVob) {
        let engine = &self.engine;
        let scanner = &self.scanner;
        // What was refused, to put back if nothing is left (cheaper than a copy of the mask).
        let refused = &mut self.refused;
        refused.clear();
        for &e in &engine.eos {
            if vob.is_allowed(e) && !scanner.can_end(plan) {
                refused.push(e);
            }
        }
        // A stop token with bytes (one that is not a special token) can be refused twice.
        let eos_refused = !refused.is_empty();
        let bytes = |t: u32| engine.bytes.token(t);
        match scanner.quiet() {
            Some(reach) => {
                if let Some(set) = engine.reach_set(reach) {
                    set.refuse(vob, refused, |t| !scanner.allows(plan, bytes(t)));
                }
            }
            None => {
                let probe = scanner.probe(plan);
                let (known, ok) = probe.known_number_bytes();
                engine.solid.refuse(vob, refused, |t| {
                    let b = bytes(t);
                    if let [c] = b {
                        if let Some(i) = rules::number_byte(*c).filter(|i| known >> i & 1 == 1) {
                            return ok >> i & 1 == 0;
                        }
                    }
                    !probe.allows(b)
                });
                match probe.blanks() {
                    Blanks::Neutral => {}
                    // Whitespace ends the number whatever its bytes: a space answers for all.
                    Blanks::Alike => {
                        if !probe.allows(b" ") {
                            engine.blank.refuse(vob, refused, |_| true);
                        }
                    }
                    Blanks::Each => engine
                        .blank
                        .refuse(vob, refused, |t| !probe.allows(bytes(t))),
                }
                probe.finish();
            }
        }
        if eos_refused {
            refused.sort_unstable();
            refused.dedup();
        }
        for &t in refused.iter() {
            vob.disallow_token(t);
        }
        if !refused.is_empty() && vob.is_zero() {
            self.stats.filter_emptied += 1;
            for &t in refused.iter() {
                vob.allow_token(t);
            }
            return;
        }
        self.stats.dropped += refused.len();
    }

    /// The mask [`ContractMask::allowed_tokens`] gives, computed without any of the filter's
    /// shortcuts (token classes, the scanner's early stop, whitespace handled as one, verdicts
    /// shared within a step): every token llguidance allows goes through a copy of the scanner
    /// byte by byte ([`Scanner::advance`]), a stop token only where the output can end. For tests and comparisons; the state is unchanged.
    pub fn reference_mask(&mut self) -> Result<SimpleVob, LocalError> {
        let mut vob = self.grammar_mask()?;
        self.cap_trace(&mut vob);
        let filter_on = self.filter_on && !self.in_trace();
        let Some(plan) = self.plan.clone().filter(|_| filter_on) else {
            return Ok(vob);
        };
        let unfiltered = vob.clone();
        let mut refused = Vec::new();
        vob.iter_set_entries(|t| {
            let t = t as u32;
            let ends = !self.engine.eos.contains(&t) || self.scanner.can_end(&plan);
            if !ends
                || !self
                    .scanner
                    .clone()
                    .advance(&plan, self.engine.token_bytes(t))
            {
                refused.push(t);
            }
        });
        for t in refused {
            vob.disallow_token(t);
        }
        // As the filter: a mask it would empty is left as llguidance gave it.
        Ok(if vob.is_zero() { unfiltered } else { vob })
    }

    /// Tokens the grammar forces next (keys, punctuation), kept only while the filter agrees.
    pub fn forced_tokens(&mut self) -> Result<Vec<u32>, LocalError> {
        // At a reasoning block's cap, the rest of `</think>`, when the grammar takes it.
        if let Some(rest) = self.closing() {
            let toks = self.engine.tok_env.tok_trie().greedy_tokenize(rest);
            if !toks.is_empty() && self.validate_tokens(&toks)? == toks.len() {
                return Ok(toks);
            }
        }
        let mut toks = self.matcher.compute_ff_tokens();
        if let Some(e) = self.matcher.get_error() {
            return Err(mask_err(e));
        }
        // Inside a reasoning block the grammar alone decides (the filter reads the contract).
        if let Some(plan) = self.plan.as_ref().filter(|_| !self.in_trace()) {
            let mut s = self.scanner.clone();
            let ok = toks
                .iter()
                .take_while(|&&t| s.advance(plan, self.engine.token_bytes(t)))
                .count();
            toks.truncate(ok);
        }
        Ok(toks)
    }

    /// Why llguidance stopped (`NotStopped` while it runs).
    pub fn stop_reason(&self) -> String {
        format!("{:?}", self.matcher.stop_reason())
    }

    /// llguidance's error, if it failed.
    pub fn error(&self) -> Option<String> {
        self.matcher.get_error()
    }

    /// Advances over `tokens` (sampled or forced).
    pub fn consume(&mut self, tokens: &[u32]) -> Result<(), LocalError> {
        self.matcher.consume_tokens(tokens).map_err(llg_err)?;
        let result = self.advance_scanner(tokens);
        self.next_segment()?;
        result
    }

    /// Starts the next grounded segment when the current one is complete.
    fn next_segment(&mut self) -> Result<(), LocalError> {
        let Some(c) = &self.composer else {
            return Ok(());
        };
        if c.current + 1 >= c.segments || !self.matcher.is_accepting().unwrap_or(false) {
            return Ok(());
        }
        let t0 = Instant::now();
        let next = c.current + 1;
        let segment = c.segment(next, self.contract_output())?;
        self.matcher = self.engine.lark_matcher(segment.lark)?;
        self.filter_on = self.plan.is_some() && !segment.rules_enforced;
        if let Some(c) = &mut self.composer {
            c.current = next;
        }
        self.stats.compile_ns.push(t0.elapsed().as_nanos() as u64);
        Ok(())
    }

    fn advance_scanner(&mut self, tokens: &[u32]) -> Result<(), LocalError> {
        for &t in tokens {
            let b = self.engine.token_bytes(t);
            let from = self.output.len();
            self.output.extend_from_slice(b);
            // Inside a reasoning block the scanner waits for the bytes after `</think>`.
            let b = match &mut self.trace {
                Some(trace) if trace.contract_at.is_none() => {
                    if from >= THINK_OPEN_LEN {
                        trace.tokens += 1;
                    }
                    let close = THINK_CLOSE.as_bytes();
                    let look = from.saturating_sub(close.len());
                    let Some(i) = self.output[look..]
                        .windows(close.len())
                        .position(|w| w == close)
                    else {
                        continue;
                    };
                    let at = look + i + close.len();
                    trace.contract_at = Some(at);
                    &self.output[at..]
                }
                _ => b,
            };
            if let Some(plan) = &self.plan {
                if !self.scanner.advance(plan, b) {
                    return Err(mask_err(format!(
                        "token {t} ({:?}) breaks a cross-field rule",
                        String::from_utf8_lossy(b)
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether the grammar (and the rules) would accept the output as it is.
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
            && self.plan.as_ref().is_none_or(|p| self.scanner.can_end(p))
            && self
                .composer
                .as_ref()
                .is_none_or(|c| c.current + 1 >= c.segments)
    }

    /// Whether no further token is possible (in the last segment of a grounded grammar).
    pub fn is_stopped(&self) -> bool {
        self.matcher.is_stopped()
            && self
                .composer
                .as_ref()
                .is_none_or(|c| c.current + 1 >= c.segments)
    }

    /// The grounded segment being decoded and how many there are (`None`: not grounded).
    pub fn segment(&self) -> Option<(usize, usize)> {
        self.composer.as_ref().map(|c| (c.current, c.segments))
    }

    /// How many of `tokens`, from the current state, the grammar accepts byte by byte, without
    /// consuming them. Unlike the mask, this accepts any tokenisation of forced text (inside a
    /// forced key the mask offers only llguidance's canonical token). The value filter is not
    /// consulted.
    pub fn validate_tokens(&mut self, tokens: &[u32]) -> Result<usize, LocalError> {
        self.matcher.validate_tokens(tokens).map_err(llg_err)
    }

    /// llguidance's warnings about the grammar (keywords it approximated or ignored).
    pub fn grammar_warnings(&mut self) -> Vec<String> {
        self.matcher.grammar_warnings()
    }
}

impl TokenMask for ContractMask {
    fn allowed(&mut self) -> Result<Allowed<'_>, LocalError> {
        Ok(Allowed::Bits(self.allowed_tokens()?))
    }

    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        self.forced_tokens()
    }

    fn consume(&mut self, tokens: &[u32]) -> Result<(), LocalError> {
        ContractMask::consume(self, tokens)
    }

    fn is_done(&self) -> bool {
        self.is_stopped()
    }
}

/// Masks for requests: `Request::grammar` holds a serialised [`Grammar`] (`C::grammar()`), or a
/// plain JSON Schema (then llguidance alone, no cross-field rules). A request whose constraint
/// asks for a reasoning block first ([`Constraint::think`](contract_core::Constraint::think))
/// gets [`MaskEngine::think_mask`].
#[derive(Debug, Clone)]
pub struct GrammarMasks {
    engine: Arc<MaskEngine>,
}

impl GrammarMasks {
    /// Masks on `engine`'s tokenizer.
    pub fn new(engine: Arc<MaskEngine>) -> Self {
        GrammarMasks { engine }
    }
}

impl MaskFactory for GrammarMasks {
    fn mask_for(
        &self,
        req: &contract_core::extract::Request,
    ) -> Result<Option<Box<dyn TokenMask + Send>>, LocalError> {
        if let (Some(decoding), Some(think)) = (&req.constraint.decoding, req.constraint.think) {
            let mask = self
                .engine
                .think_mask(decoding, req.source.as_ref(), think)?;
            return Ok(Some(Box::new(mask)));
        }
        let mask = match (&req.constraint.decoding, &req.source) {
            (None, _) => return Ok(None),
            (Some(Decoding::Grammar(grammar)), Some(source)) if grammar.is_grounded() => {
                self.engine.grounded_mask_shared(grammar, source)?
            }
            (Some(Decoding::Grammar(grammar)), _) => self.engine.mask_shared(grammar)?,
            (Some(Decoding::JsonSchema(schema)), _) => {
                self.engine.mask_for_shared_schema(schema)?
            }
        };
        Ok(Some(Box::new(mask)))
    }
}

/// Percentile `p` (0-100) of `xs` in microseconds.
pub fn percentile_us(xs: &[u64], p: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_unstable();
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i.min(v.len() - 1)] as f64 / 1000.0
}
