//! The extraction loop: prompt, budget, backend, ladder, retry with feedback, and the audit
//! record.
//!
//! [`Extractor::extract`] always returns an [`Extraction`], never an error: a backend failure or
//! a document whose fixed prompt parts do not fit is recorded in [`Extraction::error`], so a batch
//! never loses a document.

// The parts, each an `impl` of the extractor or the types it works with, re-exported here:
// the backend interface, the audit record, one try over the text a prompt shows, the chunked
// read, and the read with evidence selection.
mod backend;
mod chunked;
mod plan;
mod record;
mod selected;
mod shown;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

pub use crate::constraint::{Constraint, Decoding};
use crate::contract::Contract;
use crate::ground::{has_grounding, Grounds};
use std::sync::{Mutex, OnceLock};

pub use crate::chunk::Overflow;
use crate::context::{Adjust, DocContext};
use crate::dynamic::typed;
use crate::dynamic::values::{adopt_value_types, has_def_refs, normalize_values};
use crate::dynamic::DynContract;
use crate::grammar::Think;
use crate::ground::check_reply;
use crate::ir::ContractSpec;
use crate::parse::{parse_output_by, ParseOptions};
use crate::prompt::Instructions;
use crate::prompt::{feedback_message, Budget, Message, PromptParts, Tokenizer};
use crate::read::Conventions;
use crate::select::{Selection, Skipped};
use crate::source::Source;
use crate::stream::{tied_fields, FieldReader, Shared, Sink};
pub use crate::stream::{ExtractionStream, FieldEvent, StreamEvent};
use crate::validate::Violations;

pub use backend::{
    Backend, BackendError, BoxFuture, DynBackend, FinishReason, Request, Response, Sampling,
    ScoreRequest, ScoreResponse,
};
use plan::GroupPlan;
use record::{finish_attempt, ms};
pub use record::{Attempt, AttemptError, Extraction, Timings};

/// Runs contract `C` over documents with backend `B`.
///
/// ```ignore
/// let extraction = Extractor::<Guidance, _>::new(backend).max_attempts(2).extract(&doc).await;
/// ```
pub struct Extractor<C, B> {
    backend: B,
    /// The contract's spec: a derived contract's, or a runtime contract's root.
    spec: Arc<ContractSpec>,
    /// The contract's own constraint, grounded ([`Extractor::grounding`] derives the one used).
    base: Arc<Constraint>,
    /// How a recovered object becomes the value.
    read: Read<C>,
    /// The user's checks, run on every value read.
    checks: Vec<Check>,
    /// The user's grounding checks, run on every reply against the text it was asked from.
    shown_checks: Vec<ShownCheck>,
    max_attempts: usize,
    budget: Option<(Arc<dyn Tokenizer + Send + Sync>, Budget)>,
    overflow: Overflow,
    max_tokens: Option<u32>,
    sampling: Sampling,
    options: ParseOptions,
    parts: PromptParts,
    constraint: Arc<Constraint>,
    grounding: bool,
    selection: Selection,
    plans: OnceLock<Vec<GroupPlan>>,
    adjust: Option<Adjust>,
    think: Option<Think>,
}

/// How an [`Extractor`] turns a recovered object into its value: a derived contract's
/// [`Contract::from_value_in`], or a runtime contract's validator.
type Read<C> = Arc<dyn Fn(&Value, &DocContext<'_>) -> Result<C, Violations> + Send + Sync>;

/// A check an application adds ([`Extractor::check`]): the violations of a value, seeing the
/// document.
type Check = Arc<dyn Fn(&Value, &DocContext<'_>) -> Violations + Send + Sync>;

/// A grounding check an application adds ([`Extractor::check_shown`]): the violations of a
/// reply, seeing the text the model was shown for it.
type ShownCheck = Arc<dyn Fn(&Value, &Source) -> Violations + Send + Sync>;

impl<C: Contract, B: Backend> Extractor<C, B> {
    /// An extractor with the default prompt, 2 attempts and no budget.
    pub fn new(backend: B) -> Self {
        Extractor::with_target(
            backend,
            Arc::new(C::contract_spec().clone()),
            Constraint::of::<C>(),
            PromptParts::for_contract::<C>(),
            Arc::new(|json: &Value, cx: &DocContext<'_>| C::from_value_in(json, cx)),
        )
    }
}

impl<B: Backend> Extractor<Value, B> {
    /// An extractor of a runtime contract (a JSON Schema read at run time, [`DynContract`]):
    /// the same loop as a derived contract's (evidence selection, the grounded mask, budgets
    /// and chunks, retries with feedback, the audit record), the value the reply's JSON once
    /// the contract's validator (its keywords and `x-rules`) and the grounding checks pass.
    ///
    /// A root property whose `$ref` names one of the library's value types (`#/$defs/Amount`,
    /// `DateValue`, `Period`, `DurationValue`, `NameValue`; directly, nullable through `anyOf` with `null`,
    /// or as a list's items) is that type, as in a derived contract: decoded under its shape,
    /// normalised when read (the ISO date, the currency's code, the scale), its violations at
    /// the property's pointer; the definition's body is not used (`"$defs": {"Amount": {}}`).
    ///
    /// A schema whose root fields are grounded (`x-grounded`) and that has no other definitions
    /// decodes under the grounded grammar, as a derived contract does, and selects evidence by
    /// default; a schema with other definitions decodes under its JSON Schema and reads the
    /// whole document (the grammar and the selection follow a contract's nesting, not a
    /// schema's definitions), and grounded values behind such a `$ref` are not checked by the
    /// extractor: add an [`Extractor::check_shown`] for them (it sees the text each reply was
    /// asked from, a chunk's under a budget). An ungrounded schema with `x-rules` on its root
    /// decodes under the typed grammar too, the rules in the local model's mask, when that
    /// grammar enforces everything the schema's JSON Schema mask would
    /// ([`DynContract::decodes_typed`]); otherwise under its JSON Schema, with the rules held
    /// over that mask by the local model's value filter when every field they name is required
    /// and of a shape the grammar keeps whole ([`DynContract::rules_in_mask`]), else checked
    /// only after decoding.
    pub fn runtime(backend: B, contract: &DynContract) -> Self {
        let mut spec = contract.root_spec();
        let values = adopt_value_types(&mut spec);
        let flat = !has_def_refs(&spec.node);
        let mut constraint = Constraint::from_dyn(contract);
        // The typed grammar when the schema is grounded, or when it carries the root's rules
        // without losing what the JSON Schema mask enforces; the schema's own mask with the
        // rules held over it when the fields they name are carried whole (`dynamic::typed`).
        if let Some(grammar) = typed::mask_grammar(&spec, || contract.grammar()) {
            constraint = constraint.with_decoding(Some(Decoding::Grammar(Arc::new(grammar))));
        }
        // A schema that names value types is shown as the derived contract it reads as (the
        // types' shapes in its signature); any other, in the runtime signature's words.
        let parts = if values.is_empty() {
            PromptParts::for_runtime(contract)
        } else {
            PromptParts::for_spec(&spec, Instructions::SignatureAndFields)
        };
        let validator = Arc::new(contract.clone());
        let read: Read<Value> = Arc::new(move |json: &Value, cx: &DocContext<'_>| {
            validator.validate(json)?;
            let mut value = json.clone();
            let violations = normalize_values(&values, &mut value, cx);
            if violations.is_empty() {
                Ok(value)
            } else {
                Err(violations)
            }
        });
        let extractor =
            Extractor::with_target(backend, Arc::new(spec), Arc::new(constraint), parts, read);
        if flat {
            extractor
        } else {
            extractor.selection(Selection::off())
        }
    }
}

impl<C, B: Backend> Extractor<C, B> {
    fn with_target(
        backend: B,
        spec: Arc<ContractSpec>,
        base: Arc<Constraint>,
        parts: PromptParts,
        read: Read<C>,
    ) -> Self {
        Extractor {
            backend,
            constraint: base.clone(),
            spec,
            base,
            read,
            checks: Vec::new(),
            shown_checks: Vec::new(),
            max_attempts: 2,
            budget: None,
            overflow: Overflow::default(),
            max_tokens: None,
            sampling: Sampling::default(),
            options: ParseOptions::default(),
            parts,
            grounding: true,
            selection: Selection::default(),
            plans: OnceLock::new(),
            adjust: None,
            think: None,
        }
    }

    /// The contract's spec (a runtime contract's root).
    pub fn spec(&self) -> &ContractSpec {
        &self.spec
    }

    /// Adds a check every value must pass, seeing the document ([`DocContext::source`]): a
    /// rule the contract cannot state (a total that must equal a sum the document prints, a
    /// value that must sit in a named section). Its violations refuse the reply like the
    /// contract's own: fed back on a retry, or under evidence selection the next passage
    /// tried for the fields they name.
    pub fn check(
        mut self,
        check: impl Fn(&Value, &DocContext<'_>) -> Violations + Send + Sync + 'static,
    ) -> Self {
        self.checks.push(Arc::new(check));
        self
    }

    /// Adds a grounding check the contract cannot state, run on every reply against the text
    /// the model was shown for it (not the whole document): the document, or the head kept
    /// under a [budget](Extractor::budget), each chunk of a document read in chunks, a
    /// group's passages under evidence selection (the reply then holds the group's fields
    /// only). What the library grounds itself (a derived contract's grounded values, a runtime
    /// contract's root fields) it holds to that text; this is for the values it does not
    /// reach, such as a runtime schema's grounded values behind a `$ref`. Its violations
    /// refuse that reply as the library's own grounding does: fed back on a retry, the chunk
    /// or the group left unfilled when none passes. It does not run with grounding off
    /// ([`Extractor::grounding`]).
    pub fn check_shown(
        mut self,
        check: impl Fn(&Value, &Source) -> Violations + Send + Sync + 'static,
    ) -> Self {
        self.shown_checks.push(Arc::new(check));
        self
    }

    /// The violations of the added grounding checks ([`Extractor::check_shown`]) of `json`
    /// against `shown`; none with grounding off.
    fn check_shown_text(&self, json: &Value, shown: &Source) -> Violations {
        let mut out = Violations::new();
        if self.grounding {
            for check in &self.shown_checks {
                out.0.extend(check(json, shown).0);
            }
        }
        out
    }

    /// Reads `json` into the value: the contract's reading, then the added checks.
    fn read_value(&self, json: &Value, cx: &DocContext<'_>) -> Result<C, Violations> {
        let read = (self.read)(json, cx);
        let mut added = Violations::new();
        for check in &self.checks {
            added.0.extend(check(json, cx).0);
        }
        match read {
            Ok(value) if added.is_empty() => Ok(value),
            Ok(_) => Err(added),
            Err(mut violations) => {
                violations.0.extend(added.0);
                Err(violations)
            }
        }
    }

    /// Think, then fill (off by default): every reply opens with a reasoning block of at most
    /// `think.max_tokens` tokens (`<think> .. </think>`), then the contract. The prompt asks for
    /// the block ([`PromptParts::with_think`]); the request's constraint carries it
    /// ([`Constraint::think`]), so a backend that decodes under a grammar holds the block to its
    /// cap and what follows to the contract's grammar, groundings and rules as always (the local
    /// backend; an OpenAI-compatible server in its grammar mode). The trace's tokens come on top
    /// of [`Extractor::max_tokens`]. The record keeps the trace apart from the value
    /// ([`Extraction::reasoning`], [`Attempt::reasoning`]); a reply read after a trace is at the
    /// `extracted` level, never `strict`.
    pub fn think(mut self, think: Think) -> Self {
        self.think = Some(think);
        self.constraint = Arc::new(self.constraint.with_think(self.think));
        self.parts = self.parts.with_think(think);
        self.plans = OnceLock::new();
        self
    }

    /// How evidence is selected ([`Selection`]; on by default for a contract with grounded
    /// values, when the backend scores answers). `Selection::off()` reads the whole document.
    pub fn selection(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self.plans = OnceLock::new();
        self
    }

    /// Changes the conventions detected in each document before values are read
    /// ([`DocContext::conventions`]): what you know of your documents that one document may not
    /// tell. Receipts from a country that writes the day first:
    /// `.conventions(|c| c.with_date_order(DateOrder::DayFirst))` (a receipt whose only date is
    /// `04/05/2018` is otherwise ambiguous, a violation).
    pub fn conventions(
        mut self,
        adjust: impl Fn(Conventions) -> Conventions + Send + Sync + 'static,
    ) -> Self {
        self.adjust = Some(Arc::new(adjust));
        self
    }

    /// Whether grounded values are held to the document (default `true`): `false` decodes
    /// with the contract's grammar without its groundings and does not check replies against
    /// the document, without a second copy of the contract.
    pub fn grounding(mut self, on: bool) -> Self {
        self.grounding = on;
        self.constraint = if on {
            self.base.clone()
        } else {
            Arc::new(self.base.ungrounded())
        };
        if self.think.is_some() {
            self.constraint = Arc::new(self.constraint.with_think(self.think));
        }
        self.plans = OnceLock::new();
        self
    }

    /// At most `n` attempts (at least 1): the first, then retries with feedback.
    pub fn max_attempts(mut self, n: usize) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Fits every prompt into `budget` tokens of `tokenizer`. A document too long for it is
    /// read in overlapping chunks and the replies merged (the default [`Overflow`]), or cut to
    /// the head that fits ([`Overflow::Cut`]); never silently.
    pub fn budget(mut self, tokenizer: Arc<dyn Tokenizer + Send + Sync>, budget: Budget) -> Self {
        self.budget = Some((tokenizer, budget));
        self
    }

    /// What is done with a document longer than the [budget](Extractor::budget) (default:
    /// [`Overflow::Chunks`] with 4 lines of overlap; see [`crate::chunk`]). The record's
    /// [`Extraction::chunks`] tells how it was read.
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// Most tokens to generate per attempt.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Sampling settings.
    pub fn sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }

    /// Replaces the final question.
    pub fn question(mut self, question: impl Into<String>) -> Self {
        self.parts = self.parts.with_question(question);
        if let Some(think) = self.think {
            self.parts = self.parts.with_think(think);
        }
        self
    }

    /// Replaces the instructions (the system message; by default
    /// [`system_message`](crate::prompt::system_message)). The document and the final question
    /// still go in the user message.
    pub fn instructions(mut self, system: impl Into<String>) -> Self {
        self.parts = self.parts.with_system(system);
        if let Some(think) = self.think {
            self.parts = self.parts.with_think(think);
        }
        self
    }

    /// Ladder options (a template that opens the reasoning trace).
    pub fn parse_options(mut self, options: ParseOptions) -> Self {
        self.options = options;
        self
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Extracts `C` from `document`. Never fails: errors are recorded in the result.
    pub async fn extract(&self, document: &str) -> Extraction<C> {
        self.extract_in(document, Source::from_text(document)).await
    }

    /// Extracts `C` from `document`, grounded values checked against `source` (what the
    /// request's [`Request::source`] carries): `document`'s own [`Source`] with settings such
    /// as [`Source::with_numerals`], or the whole document a passage was cut from.
    pub async fn extract_in(&self, document: &str, source: Source) -> Extraction<C> {
        self.run(document, source, None).await
    }

    /// [`Extractor::extract`], each field handed to `on_field` as [`Extractor::stream`] would
    /// emit it (closed, checked, in the same order), for a caller that wants the record at the
    /// end and the fields on the way without polling a stream (the batch runner's progress per
    /// field, `contract_backends::batch::run_batch_streaming`). The record is the one
    /// `extract` returns.
    pub async fn extract_observed(
        &self,
        document: &str,
        on_field: &(dyn Fn(FieldEvent) + Send + Sync),
    ) -> Extraction<C> {
        self.run(document, Source::from_text(document), Some(on_field))
            .await
    }

    /// Streams the extraction of `C` from `document`: each root field as soon as its value is
    /// closed in a reply and checked, then the record [`Extractor::extract`] returns
    /// ([`StreamEvent::Done`], always the last event).
    ///
    /// A field is emitted ([`StreamEvent::Field`]) once its value is closed and passes the
    /// field's own constraints and, with grounding on, its grounding in the text the request
    /// showed. Fields tied by a cross-field rule or by a grounding in another field
    /// (`grounded(in = quote)`) are emitted together, once all of them are closed and the rule
    /// holds on them. The contract's reading of the whole value (its normalisation, its
    /// custom checks) and the checks added with [`Extractor::check`] and
    /// [`Extractor::check_shown`] run on the whole reply: the `Done` record is what holds.
    ///
    /// Each attempt streams its own fields: a retry with feedback emits its fields again,
    /// with its attempt number ([`FieldEvent::attempt`]); an application keeps the last value
    /// per path. With evidence selection each group's fields are emitted when the group's
    /// try is accepted, and emitted again when a rule of the whole contract sends the group
    /// to its next passage (as `null` when the group ends refused). A document read in
    /// chunks emits the merged value's fields once the merged value is checked, before
    /// `Done`.
    ///
    /// A list field streams item by item: each item is emitted as soon as it is closed in
    /// the reply and passes its own checks (the item type's constraints, its grounding: an
    /// `Evidenced` item's value in the lines its spans cite), as a [`FieldEvent`] with
    /// [`FieldEvent::item`] set and the item's pointer (`/items/2`); the whole list follows
    /// as a field event when it closes and passes the list's own checks. An item that fails
    /// is not emitted (its index is skipped; the violation is in the `Done` record). Where a
    /// group or a chunked document's merged value is emitted whole, its lists' items are
    /// emitted just before the list.
    ///
    /// Nothing is spawned: the extraction runs as the stream is polled, and dropping the
    /// stream drops the extraction and the backend's request with it. A backend that does
    /// not stream ([`Backend::complete_streaming`]'s default) emits a reply's fields when
    /// the reply is whole.
    pub fn stream<'a>(&'a self, document: &'a str) -> ExtractionStream<'a, C>
    where
        C: Send + 'a,
        B: Sync,
    {
        self.stream_in(document, Source::from_text(document))
    }

    /// [`Extractor::stream`], grounded values checked against `source` (as
    /// [`Extractor::extract_in`]).
    pub fn stream_in<'a>(&'a self, document: &'a str, source: Source) -> ExtractionStream<'a, C>
    where
        C: Send + 'a,
        B: Sync,
    {
        let shared = Arc::new(Shared::default());
        let queue = shared.clone();
        let running = Box::pin(async move {
            let sink = move |event: FieldEvent| queue.push(event);
            self.run(document, source, Some(&sink)).await
        });
        ExtractionStream::new(running, shared)
    }

    /// The extraction, its fields handed to `sink` as they are checked.
    async fn run(&self, document: &str, source: Source, sink: Option<&Sink<'_>>) -> Extraction<C> {
        let started = Instant::now();
        let spec: &ContractSpec = &self.spec;
        let grounded = has_grounding(spec);
        let ties = if sink.is_some() {
            tied_fields(spec)
        } else {
            Vec::new()
        };
        let mut skipped = None;
        if grounded && self.selection.is_on() {
            match self.extract_selected(&source, started, sink).await {
                Ok(out) => return out,
                Err(reason) => skipped = Some(Skipped { reason }),
            }
        }
        // The first attempt's fit, computed once: it also says whether the document overflows.
        let mut first_fit = self.budget.as_ref().map(|(tok, budget)| {
            self.parts
                .fit_messages(document, &[], *budget, tok.as_ref())
        });
        if let (Some((tok, budget)), Overflow::Chunks { overlap_lines }) =
            (&self.budget, self.overflow)
        {
            if matches!(&first_fit, Some(Ok(f)) if f.trimmed) {
                if let Some(mut out) = self
                    .extract_chunked(
                        document,
                        &source,
                        tok.as_ref(),
                        *budget,
                        overlap_lines,
                        sink,
                    )
                    .await
                {
                    out.selection_skipped = skipped;
                    out.timings.total_ms = ms(started);
                    return out;
                }
            }
        }
        let cx = DocContext::of(&source).adjusted(self.adjust.clone());

        let mut out = Extraction::empty(spec);
        out.selection_skipped = skipped;
        let mut feedback: Vec<Message> = Vec::new();

        for _ in 0..self.max_attempts {
            let t0 = Instant::now();
            let mut attempt = Attempt::empty();
            // The text the prompt shows: the whole source, or the head kept under the budget
            // (grounded values are held to it, so none comes from text the model never saw).
            let mut shown = source.clone();

            let messages = match &self.budget {
                None => {
                    let mut m = self.parts.messages(document);
                    m.0.extend(feedback.iter().cloned());
                    Ok(m)
                }
                Some((tok, budget)) => first_fit
                    .take()
                    .filter(|_| feedback.is_empty())
                    .unwrap_or_else(|| {
                        self.parts
                            .fit_messages(document, &feedback, *budget, tok.as_ref())
                    })
                    .map(|f| {
                        attempt.prompt_tokens = Some(f.prompt_tokens);
                        attempt.dropped_tokens = f.dropped_tokens;
                        attempt.dropped_lines = f.dropped_lines;
                        if f.trimmed {
                            shown = Source::from_text(document)
                                .with_numerals(source.numerals())
                                .excerpt(&f.shown);
                        }
                        f.messages
                    }),
            };
            let messages = match messages {
                Ok(m) => m,
                Err(error) => {
                    attempt.error = Some(AttemptError::Budget { error });
                    out.error = attempt.error.clone();
                    finish_attempt(&mut out, attempt, t0);
                    break;
                }
            };

            let request = Request {
                constraint: self.constraint.clone(),
                messages,
                max_tokens: self.max_tokens,
                sampling: self.sampling,
                source: Some(shown.clone()),
            };
            let grounds = (grounded && self.grounding).then(|| Grounds::new(&shown));
            let response = match sink {
                None => self.backend.complete(&request).await,
                Some(sink) => {
                    let reader = Mutex::new(FieldReader::new(
                        spec,
                        &ties,
                        grounds.as_ref(),
                        out.attempts.len() + 1,
                        None,
                    ));
                    let on_text = |piece: &str| {
                        if let Ok(mut reader) = reader.lock() {
                            reader.push(piece, sink);
                        }
                    };
                    self.backend.complete_streaming(&request, &on_text).await
                }
            };
            let response = match response {
                Ok(r) => r,
                Err(error) => {
                    attempt.error = Some(AttemptError::Backend { error });
                    out.error = attempt.error.clone();
                    finish_attempt(&mut out, attempt, t0);
                    break;
                }
            };

            let mut parsed = parse_output_by(&response.text, self.options, |json| {
                self.read_value(json, &cx)
            });
            if let Some(json) = &parsed.json {
                let mut off = match &grounds {
                    Some(grounds) => check_reply(spec, json, &response.text, grounds),
                    None => Violations::new(),
                };
                off.0.extend(self.check_shown_text(json, &shown).0);
                if !off.is_empty() {
                    parsed.value = None;
                    parsed.violations.0.extend(off.0);
                }
            }
            let valid = parsed.value.is_some();
            attempt.raw = Some(response.text.clone());
            attempt.reasoning = parsed
                .reasoning
                .clone()
                .or_else(|| response.reasoning.clone());
            attempt.level = Some(parsed.level);
            attempt.json = parsed.json.clone();
            attempt.violations = parsed.violations.clone();
            attempt.repairs = parsed.repairs.clone();
            attempt.finish_reason = response.finish_reason;
            if attempt.prompt_tokens.is_none() {
                attempt.prompt_tokens = response.prompt_tokens.map(|n| n as usize);
            }
            attempt.completion_tokens = response.completion_tokens;
            attempt.forward_calls = response.forward_calls;

            out.value = parsed.value;
            out.level = parsed.level;
            out.json = parsed.json;
            out.violations = parsed.violations;
            out.repairs = parsed.repairs;
            out.reasoning = attempt.reasoning.clone();
            out.error = None;
            finish_attempt(&mut out, attempt, t0);
            if valid {
                break;
            }
            feedback.push(Message::assistant(response.text));
            feedback.push(Message::user(feedback_message(&out.violations)));
        }

        out.timings.total_ms = ms(started);
        out
    }
}
