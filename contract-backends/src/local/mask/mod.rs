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
//!
//! This module holds the engine (building, compiling and caching grammars); the mask of one
//! generation is in `generation`, the token sets and bytes the filter scans in `tokens`.

mod engine;
mod generation;
pub mod rules;
mod rules_dec;
mod tokens;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use contract_core::extract::Decoding;
use contract_core::grammar::{Grammar, Think};
use contract_core::source::Source;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

pub use self::engine::MaskEngine;
use self::engine::{
    address, llg_err, mask_err, push_bounded, CachedEngine, Compiled, GroundedParts, Prepared,
    CACHE, CACHED_GRAMMARS,
};
use self::generation::{Composer, Trace};
pub use self::generation::{ContractMask, MaskStats};
use self::rules::{Reach, RulePlan, Scanner};
use self::tokens::{plain_bytes, TokenBytes, TokenSet};
use super::error::LocalError;
use super::token_mask::{MaskFactory, TokenMask};

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
            let (mut schema, plan) = match what {
                Compiled::Grammar(g) => (g.schema(), Some(Arc::new(RulePlan::new(g)))),
                Compiled::Schema(s) => (s.clone(), None),
            };
            let matcher = match think {
                // `mask_for_schema` makes the formats exact.
                None => self.mask_for_schema(schema, None)?.matcher,
                Some(t) => {
                    contract_core::grammar::exact_formats(&mut schema);
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

    /// A mask from an llguidance JSON Schema, with an optional rule plan. The schema's inexact
    /// formats are compiled as their exact patterns
    /// ([`exact_formats`](contract_core::grammar::exact_formats)), as every schema this engine
    /// compiles is.
    pub fn mask_for_schema(
        self: &Arc<Self>,
        mut schema: Value,
        plan: Option<Arc<RulePlan>>,
    ) -> Result<ContractMask, LocalError> {
        contract_core::grammar::exact_formats(&mut schema);
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
