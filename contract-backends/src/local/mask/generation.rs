//! The mask of one generation ([`ContractMask`]): llguidance's matcher stepped token by token,
//! the value filter run over what it allows, a reasoning block counted, and a grounded grammar
//! composed segment by segment. Apart from the [`MaskEngine`](super::MaskEngine), which holds
//! what depends only on the tokenizer and compiles and caches grammars.

use std::sync::Arc;
use std::time::Instant;

use contract_core::grammar::lark::GroundedSegment;
use contract_core::grammar::{Grammar, Think};
use contract_core::ground::{Grounds, Numerals};
use contract_core::parse::think::THINK_CLOSE;
use contract_core::source::Source;
use llguidance::toktrie::SimpleVob;
use llguidance::Matcher;
use serde_json::Value;

use super::engine::{llg_err, mask_err, MaskEngine, THINK_OPEN_LEN};
use super::rules::probe::Probe;
use super::rules::{self, Blanks, RulePlan, Scanner};
use crate::local::error::LocalError;
use crate::local::token_mask::{Allowed, TokenMask};

/// The grounded grammar of one document, composed segment by segment
/// ([`Grammar::grounded_segments`]): when a segment's matcher accepts, the next segment's
/// grammar is built from the source and the values decoded so far, and decoding goes on in it.
#[derive(Clone)]
pub(super) struct Composer {
    pub(super) grammar: Arc<Grammar>,
    pub(super) source: Arc<Source>,
    pub(super) numerals: Numerals,
    pub(super) segments: usize,
    pub(super) current: usize,
}

impl Composer {
    pub(super) fn segment(
        &self,
        segment: usize,
        output: &[u8],
    ) -> Result<GroundedSegment, LocalError> {
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
    pub(super) engine: Arc<MaskEngine>,
    pub(super) matcher: Matcher,
    pub(super) composer: Option<Box<Composer>>,
    pub(super) plan: Option<Arc<RulePlan>>,
    /// Whether the value filter runs over the allowed tokens (false while the composed
    /// grounded grammar holds every rule itself).
    pub(super) filter_on: bool,
    pub(super) scanner: Scanner,
    /// The last step's allowed tokens (handed out by reference, not copied).
    pub(super) allowed: SimpleVob,
    /// The tokens the filter refused this step (kept to reuse the allocation).
    pub(super) refused: Vec<u32>,
    pub(super) output: Vec<u8>,
    pub(super) stats: MaskStats,
    pub(super) timing: bool,
    /// Think, then fill ([`MaskEngine::think_mask`]): where the contract starts in the output.
    pub(super) trace: Option<Trace>,
}

/// The reasoning block of a think-then-fill mask.
#[derive(Debug, Clone)]
pub(super) struct Trace {
    /// The byte offset in the output just past `</think>`; `None` while the block is open.
    pub(super) contract_at: Option<usize>,
    /// Tokens consumed inside the block (after `<think>`).
    pub(super) tokens: u32,
    /// The most it may hold ([`Think::max_tokens`]): then only `</think>` goes on.
    pub(super) cap: u32,
}

impl Trace {
    pub(super) fn new(think: Think) -> Trace {
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
                let probe = Probe::new(scanner, plan);
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
