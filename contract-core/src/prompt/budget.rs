//! Budget fitting: only the document loses text, head kept and tail dropped, before assembly.

use serde::Serialize;

/// Turns text into token ids and back; the model's own tokenizer, so counts are the model's.
pub trait Tokenizer {
    /// The token ids of `text` (no special tokens added).
    fn encode(&self, text: &str) -> Vec<u32>;
    /// The text of `ids`. Budget fitting never relies on it: a tokenizer that normalises text
    /// (whitespace, Unicode) need not give the original back.
    fn decode(&self, ids: &[u32]) -> String;
}

/// One piece of a prompt, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    /// Never cut: instructions, the signature, the final question, template text.
    Fixed(&'a str),
    /// May lose its tail: the document.
    Trimmable(&'a str),
}

impl<'a> Part<'a> {
    /// The part's text.
    pub fn text(&self) -> &'a str {
        match *self {
            Part::Fixed(t) | Part::Trimmable(t) => t,
        }
    }
}

/// The result of [`fit`]: the concatenation of the parts, trimmed when needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fitted {
    /// The parts concatenated; the trimmable parts possibly cut.
    pub text: String,
    /// Tokens of the trimmable parts that were dropped (their token count before the cut minus
    /// after it).
    pub dropped_tokens: usize,
    /// Lines of the trimmable parts not kept in full: lines dropped entirely, plus a line cut in
    /// its middle.
    pub dropped_lines: usize,
    /// Whether anything was cut; `false` means `text` is the plain concatenation, byte for byte.
    pub trimmed: bool,
}

/// Why a prompt cannot be fitted into a budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BudgetError {
    /// The fixed parts leave no room for a single document token.
    #[error("the fixed parts of the prompt need {needed} tokens with at least one document token, only {available} are available")]
    FixedPartsTooLong {
        /// Tokens of the prompt with the shortest head of the document that can be kept (the
        /// fixed parts plus at least one document token).
        needed: usize,
        /// The budget.
        available: usize,
    },
}

/// How many bytes of each part are kept, and what was dropped.
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    /// Bytes kept of each part (the whole part for fixed parts).
    pub kept: Vec<usize>,
    pub dropped_tokens: usize,
    pub dropped_lines: usize,
    pub trimmed: bool,
}

impl Cut {
    pub(crate) fn apply(&self, parts: &[Part<'_>]) -> String {
        let mut out = String::new();
        for (part, &kept) in parts.iter().zip(&self.kept) {
            out.push_str(part.text().get(..kept).unwrap_or(part.text()));
        }
        out
    }
}

/// Fits `parts` into `max_tokens` tokens of `tok`, cutting only [`Part::Trimmable`] text.
///
/// Input that fits comes back as the plain concatenation (`trimmed == false`). Otherwise the
/// trimmable parts keep their head and lose their tail (the first trimmable part is kept in
/// preference to later ones); a cut inside a line keeps that line's beginning. The cut is found by
/// measuring assembled prompts with [`Tokenizer::encode`] only (never by comparing the document
/// with a decoding, which a normalising tokenizer does not give back byte for byte), so the
/// longest head that fits is kept with any tokenizer. When the fixed parts leave no room for the
/// shortest head of the document, [`BudgetError::FixedPartsTooLong`] is returned: never a
/// plausible prompt without its document.
pub fn fit(
    parts: &[Part<'_>],
    max_tokens: usize,
    tok: &dyn Tokenizer,
) -> Result<Fitted, BudgetError> {
    let cut = fit_cut(parts, max_tokens, tok, &|_, at| at)?;
    Ok(Fitted {
        text: cut.apply(parts),
        dropped_tokens: cut.dropped_tokens,
        dropped_lines: cut.dropped_lines,
        trimmed: cut.trimmed,
    })
}

/// [`fit`], with `snap(text, at)` moving a cut at char boundary `at` of a trimmable part back to
/// an earlier char boundary (the prompt uses it never to keep half a line number); `snap` must
/// not decrease as `at` grows.
///
/// The cut is a byte position in the trimmable text taken in order (the first trimmable part
/// whole before the second loses anything). Its prompt is measured with `encode`: a first probe
/// where the document's own token density puts the cut, a gallop from it to bracket the
/// answer, then a bisection down to one byte: O(log n) encodes of prompts about as long as the
/// one kept, plus one encode of the whole prompt and one of each trimmable part.
pub(crate) fn fit_cut(
    parts: &[Part<'_>],
    max_tokens: usize,
    tok: &dyn Tokenizer,
    snap: &dyn Fn(&str, usize) -> usize,
) -> Result<Cut, BudgetError> {
    let whole: Vec<usize> = parts.iter().map(|p| p.text().len()).collect();
    if tok.encode(&concat(parts, &whole)).len() <= max_tokens {
        return Ok(Cut {
            kept: whole,
            dropped_tokens: 0,
            dropped_lines: 0,
            trimmed: false,
        });
    }

    let empty: Vec<usize> = parts
        .iter()
        .map(|p| match p {
            Part::Fixed(t) => t.len(),
            Part::Trimmable(_) => 0,
        })
        .collect();
    let fixed_tokens = tok.encode(&concat(parts, &empty)).len();
    let room: usize = parts
        .iter()
        .filter(|p| matches!(p, Part::Trimmable(_)))
        .map(|p| p.text().len())
        .sum();

    // The bytes kept of each part when the cut is at byte `at` of the trimmable text.
    let layout = |at: usize| -> Vec<usize> {
        let mut left = at;
        parts
            .iter()
            .map(|part| match part {
                Part::Fixed(t) => t.len(),
                Part::Trimmable(t) => {
                    let n = left.min(t.len());
                    left -= n;
                    if n == t.len() {
                        n
                    } else {
                        snap(t, floor_char_boundary(t, n)).min(n)
                    }
                }
            })
            .collect()
    };
    let measure = |kept: &[usize]| tok.encode(&concat(parts, kept)).len();
    let keeps_nothing = |kept: &[usize]| {
        kept.iter()
            .zip(parts)
            .all(|(&k, p)| matches!(p, Part::Fixed(_)) || k == 0)
    };
    // When nothing fits, the error counts the prompt with the shortest head that can be kept
    // (found without encoding: whether a cut keeps anything does not depend on the tokenizer).
    let too_long = || {
        let (mut lo, mut hi) = (0usize, room);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if keeps_nothing(&layout(mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        BudgetError::FixedPartsTooLong {
            needed: measure(&layout(hi)).max(fixed_tokens + 1),
            available: max_tokens,
        }
    };
    if fixed_tokens >= max_tokens {
        return Err(too_long());
    }

    // Token counts of each trimmable part alone: for the first probe and for `dropped_tokens`.
    let part_tokens: Vec<Option<usize>> = parts
        .iter()
        .map(|p| match p {
            Part::Trimmable(t) => Some(tok.encode(t).len()),
            Part::Fixed(_) => None,
        })
        .collect();
    let doc_tokens: usize = part_tokens.iter().flatten().sum();
    let fits = |at: usize| measure(&layout(at)) <= max_tokens;

    // Invariant: a cut at `lo` fits, one at `hi` does not (the whole text did not).
    let (mut lo, mut hi) = (0usize, room);
    if doc_tokens > 0 && hi - lo > 1 {
        let share = (room as u128 * (max_tokens - fixed_tokens) as u128 / doc_tokens as u128)
            .min(room as u128) as usize;
        let guess = share.clamp(lo + 1, hi - 1);
        let mut step = (guess / 16).max(16);
        if fits(guess) {
            lo = guess;
            while hi - lo > 1 {
                let at = lo.saturating_add(step).min(hi - 1);
                if !fits(at) {
                    hi = at;
                    break;
                }
                lo = at;
                step = step.saturating_mul(2);
            }
        } else {
            hi = guess;
            while hi - lo > 1 {
                let at = hi.saturating_sub(step).max(lo + 1);
                if fits(at) {
                    lo = at;
                    break;
                }
                hi = at;
                step = step.saturating_mul(2);
            }
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }

    let kept = layout(lo);
    if keeps_nothing(&kept) {
        return Err(too_long());
    }

    let mut dropped_tokens = 0;
    let mut dropped_lines = 0;
    for ((part, &k), n) in parts.iter().zip(&kept).zip(&part_tokens) {
        if let Some(n) = n {
            let text = part.text();
            if k < text.len() {
                let kept_text = text.get(..k).unwrap_or("");
                dropped_tokens += n.saturating_sub(tok.encode(kept_text).len());
                dropped_lines += lines_not_kept(text, k);
            }
        }
    }
    Ok(Cut {
        kept,
        dropped_tokens,
        dropped_lines,
        trimmed: true,
    })
}

fn concat(parts: &[Part<'_>], kept: &[usize]) -> String {
    let mut out = String::with_capacity(kept.iter().sum());
    for (part, &k) in parts.iter().zip(kept) {
        out.push_str(part.text().get(..k).unwrap_or(part.text()));
    }
    out
}

/// The largest char boundary of `text` at or before `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Lines of `text` whose content does not lie entirely within its first `kept` bytes.
pub(crate) fn lines_not_kept(text: &str, kept: usize) -> usize {
    let mut start = 0;
    let mut dropped = 0;
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches('\n').trim_end_matches('\r');
        if start + content.len() > kept
            || (content.is_empty() && start >= kept && kept < text.len())
        {
            dropped += 1;
        }
        start += line.len();
    }
    dropped
}
