//! A document longer than the budget read in chunks ([`crate::chunk`]): each chunk one try
//! over its text alone, the replies merged, the merged value read and checked against the
//! document.

use serde_json::{Map, Value};

use super::record::{accepted_repairs, Attempt, AttemptError, Extraction};
use super::shown::GroupTry;
use super::{Backend, Extractor};
use crate::chunk::{merge_chunks, plan_chunks, Chunk, ChunkPart, ChunkRecord};
use crate::context::DocContext;
use crate::ground::{check_reply, has_grounding, Grounds};
use crate::ir::ContractSpec;
use crate::parse::Level;
use crate::prompt::{Budget, Tokenizer};
use crate::source::Source;
use crate::stream::{emit_field, Sink};
use crate::validate::Violations;

impl<C, B: Backend> Extractor<C, B> {
    /// A document longer than the budget read in chunks ([`crate::chunk`]): each chunk asked
    /// for the whole contract under a mask grounded in it alone (a local backend decodes
    /// several at once), the replies merged, the merged value read and checked against the
    /// document. `None` when the document has no chunk to read (only blank lines): the
    /// caller cuts it instead.
    pub(super) async fn extract_chunked(
        &self,
        document: &str,
        source: &Source,
        tok: &(dyn Tokenizer + Send + Sync),
        budget: Budget,
        overlap_lines: usize,
        sink: Option<&Sink<'_>>,
    ) -> Option<Extraction<C>> {
        /// Chunks decoded at once.
        const AT_ONCE: usize = 8;
        let spec: &ContractSpec = &self.spec;
        let mut out = Extraction::empty(spec);
        let doc = Source::from_text(document).with_numerals(source.numerals());
        // With retries, a quarter of the budget is left for a retry's reply and feedback.
        let planned = if self.max_attempts > 1 {
            Budget {
                max_tokens: budget.max_tokens - budget.max_tokens / 4,
                ..budget
            }
        } else {
            budget
        };
        let chunks: Vec<Chunk> = match plan_chunks(&self.parts, &doc, planned, tok, overlap_lines) {
            Ok(c) => c,
            Err(error) => {
                let mut attempt = Attempt::empty();
                attempt.error = Some(AttemptError::Budget { error });
                out.error = attempt.error.clone();
                out.attempts.push(attempt);
                return Some(out);
            }
        };
        if chunks.is_empty() {
            return None;
        }
        let keeps: Vec<[_; 1]> = chunks.iter().map(|c| [c.keep()]).collect();
        // In waves (a local backend decodes a wave as one batch); a sliding window over a
        // stream would be tighter, but its future is not `Send` (a higher-ranked closure).
        let mut tries: Vec<GroupTry> = Vec::with_capacity(chunks.len());
        for wave in keeps.chunks(AT_ONCE) {
            let results = futures_util::future::join_all(
                wave.iter()
                    .map(|keep| self.try_shown(spec, &self.constraint, &self.parts, keep, &doc)),
            )
            .await;
            tries.extend(results);
        }
        let values: Vec<Option<Map<String, Value>>> =
            tries.iter().map(|t| t.value.clone()).collect();
        let (merged, lists, conflicts) = merge_chunks(spec, &doc, &chunks, &values);
        let mut parts = Vec::with_capacity(chunks.len());
        let mut backend_failed = None;
        let mut unanswered: Option<AttemptError> = None;
        let mut level = Level::Strict;
        for (chunk, tried) in chunks.iter().zip(tries) {
            parts.push(ChunkPart {
                lines: chunk.first_last(),
                chars: chunk.chars.clone().map(|c| [c.start, c.end]),
                filled: tried.value.is_some(),
                attempts: tried.attempts.len(),
            });
            if tried.value.is_some() {
                level = level.max(tried.level);
            }
            // A chunk the backend did not answer (its last attempt an error, no value) is text
            // nobody read: the extraction is an error, as a group the backend did not answer
            // is under selection, not a value whose fields from that chunk look unstated.
            if tried.value.is_none() {
                if let Some(e) = tried.attempts.last().and_then(|a| a.error.clone()) {
                    unanswered.get_or_insert(e);
                }
            }
            for attempt in tried.attempts {
                if let Some(e) = &attempt.error {
                    backend_failed = Some(e.clone());
                }
                if out.prompt_tokens.is_none() {
                    out.prompt_tokens = attempt.prompt_tokens;
                }
                out.timings.attempts_ms.push(attempt.ms);
                out.attempts.push(attempt);
            }
        }
        let filled = parts.iter().filter(|p| p.filled).count();
        out.level = if filled == 0 || unanswered.is_some() {
            Level::Invalid
        } else {
            level
        };
        if let (Some(error), true) = (unanswered, filled > 0) {
            // What the other chunks gave is kept for inspection, not as the value.
            out.error = Some(error);
            out.json = Some(merged);
        } else if filled == 0 {
            out.error = backend_failed;
            out.violations = out
                .attempts
                .last()
                .map(|a| a.violations.clone())
                .unwrap_or_default();
        } else {
            let cx = DocContext::of(source).adjusted(self.adjust.clone());
            let mut violations = Violations::new();
            if self.grounding && has_grounding(spec) {
                let raw = merged.to_string();
                violations
                    .0
                    .extend(check_reply(spec, &merged, &raw, &Grounds::new(&doc)).0);
            }
            match self.read_value(&merged, &cx) {
                Ok(value) if violations.is_empty() => {
                    out.value = Some(value);
                    if let (Some(sink), Value::Object(map)) = (sink, &merged) {
                        for (name, value) in map {
                            emit_field(sink, spec, name, value.clone(), out.attempts.len(), None);
                        }
                    }
                }
                Ok(_) => {}
                Err(v) => violations.0.extend(v.0),
            }
            out.violations = violations;
            out.json = Some(merged);
        }
        out.repairs = accepted_repairs(&out.attempts);
        out.chunks = Some(ChunkRecord {
            overlap_lines,
            chunks: parts,
            lists,
            conflicts,
        });
        Some(out)
    }
}
