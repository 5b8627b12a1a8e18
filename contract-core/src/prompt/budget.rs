//! Budget fitting: only the document loses text, head kept and tail dropped, before assembly.

use serde::Serialize;

/// Turns text into token ids and back; the model's own tokenizer, so counts are the model's.
pub trait Tokenizer {
    /// The token ids of `text` (no special tokens added).
    fn encode(&self, text: &str) -> Vec<u32>;
    /// The text of `ids`.
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
        /// Tokens of the fixed parts plus one document token.
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
/// preference to later ones); a cut inside a line keeps that line's beginning; the result is
/// re-tokenised until it really fits. When the fixed parts leave no room for a single document
/// token, [`BudgetError::FixedPartsTooLong`] is returned: never a plausible prompt without its
/// document.
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

/// [`fit`], with `snap(text, at)` moving a cut at byte `at` of a trimmable part back to an
/// earlier char boundary (the prompt uses it never to keep half a line number).
pub(crate) fn fit_cut(
    parts: &[Part<'_>],
    max_tokens: usize,
    tok: &dyn Tokenizer,
    snap: &dyn Fn(&str, usize) -> usize,
) -> Result<Cut, BudgetError> {
    let whole: Vec<usize> = parts.iter().map(|p| p.text().len()).collect();
    let full = concat(parts, &whole);
    if tok.encode(&full).len() <= max_tokens {
        return Ok(Cut {
            kept: whole,
            dropped_tokens: 0,
            dropped_lines: 0,
            trimmed: false,
        });
    }

    // Token ids of each trimmable part, so a cut is always at a token boundary of the part.
    let ids: Vec<Option<Vec<u32>>> = parts
        .iter()
        .map(|p| match p {
            Part::Trimmable(t) => Some(tok.encode(t)),
            Part::Fixed(_) => None,
        })
        .collect();
    let total: usize = ids.iter().flatten().map(Vec::len).sum();

    let empty: Vec<usize> = parts
        .iter()
        .map(|p| match p {
            Part::Fixed(t) => t.len(),
            Part::Trimmable(_) => 0,
        })
        .collect();
    let fixed_tokens = tok.encode(&concat(parts, &empty)).len();
    let too_long = BudgetError::FixedPartsTooLong {
        needed: fixed_tokens + 1,
        available: max_tokens,
    };
    if fixed_tokens >= max_tokens || total == 0 {
        return Err(too_long);
    }

    // `keep` document tokens in all; measure the assembled text, shrink by the overflow.
    let layout = |keep: usize| -> Vec<usize> {
        let mut left = keep;
        parts
            .iter()
            .zip(&ids)
            .map(|(part, ids)| match ids {
                None => part.text().len(),
                Some(ids) => {
                    let n = left.min(ids.len());
                    left -= n;
                    if n == ids.len() {
                        part.text().len()
                    } else {
                        snap(part.text(), prefix_bytes(part.text(), &ids[..n], tok))
                    }
                }
            })
            .collect()
    };
    let measure = |kept: &[usize]| tok.encode(&concat(parts, kept)).len();

    let mut keep = (max_tokens - fixed_tokens).min(total);
    let mut found: Option<(usize, Vec<usize>)> = None;
    // Shrink by the overflow a few times (usually one step), then fall back to bisection.
    for _ in 0..8 {
        let kept = layout(keep);
        let n = measure(&kept);
        if n <= max_tokens {
            found = Some((keep, kept));
            break;
        }
        let over = n - max_tokens;
        if keep <= over {
            keep = 0;
            break;
        }
        keep -= over;
    }
    if found.is_none() {
        let (mut lo, mut hi) = (0usize, keep);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let kept = layout(mid);
            if measure(&kept) <= max_tokens {
                lo = mid;
                found = Some((mid, kept));
            } else {
                hi = mid - 1;
            }
        }
    }
    let Some((mut keep, mut kept)) = found else {
        return Err(too_long);
    };
    // Boundary effects can leave a token or two of room: take it.
    for _ in 0..4 {
        if keep >= total {
            break;
        }
        let next = layout(keep + 1);
        if measure(&next) > max_tokens {
            break;
        }
        keep += 1;
        kept = next;
    }
    if kept
        .iter()
        .zip(parts)
        .all(|(&k, p)| matches!(p, Part::Fixed(_)) || k == 0)
    {
        return Err(too_long);
    }

    let mut dropped_tokens = 0;
    let mut dropped_lines = 0;
    for ((part, &k), ids) in parts.iter().zip(&kept).zip(&ids) {
        if let Some(ids) = ids {
            let text = part.text();
            if k < text.len() {
                let kept_text = text.get(..k).unwrap_or("");
                dropped_tokens += ids.len().saturating_sub(tok.encode(kept_text).len());
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

/// The byte length of the longest prefix of `text` that the decoded `ids` agree with, at a char
/// boundary (a token may end inside a multi-byte character).
fn prefix_bytes(text: &str, ids: &[u32], tok: &dyn Tokenizer) -> usize {
    if ids.is_empty() {
        return 0;
    }
    let decoded = tok.decode(ids);
    let mut n = text
        .bytes()
        .zip(decoded.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while n > 0 && !text.is_char_boundary(n) {
        n -= 1;
    }
    n
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
