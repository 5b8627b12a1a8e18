//! The bounds a grounded grammar keeps to: how deep objects are rendered inline, how much
//! document text one value may be offered from, how many line ranges are enumerated, when number
//! alternations become chains.

/// Deepest nesting of grounded objects rendered inline (a recursive contract stops there and
/// goes on through llguidance's JSON compiler, ungrounded).
pub(super) const MAX_DEPTH: usize = 8;
/// Documents with more windows of [`MAX_VALUE_LINES`](crate::ground::MAX_VALUE_LINES) lines than
/// this (or whose windows hold more than [`MAX_OFFERED_CHARS`] characters) are offered as one
/// substring terminal over their lines, a value kept within one line.
pub(super) const MAX_WINDOW_ALTERNATIVES: usize = 2000;
/// Most characters the substring alternatives of one grounded string may hold. llguidance
/// refuses a grammar whose lexer starts with more than its initial fuel (1,000,000 units by
/// default: measured, one line of 200,000 characters cut into pieces for a length bound of 1,000
/// is refused, "initial lexer configuration (grammar) too big"); past this bound the grammar says
/// so at once, naming the passages a document can be cut into.
pub const MAX_OFFERED_CHARS: usize = 250_000;
/// Largest `characters x max_len` for which a grounded string's length bound is written as a
/// regex intersected with its substrings (`& /.{1,max}/`). llguidance runs such a lexeme over
/// the whole token trie when it compiles it, through states that pair a place in the text with
/// a count of characters: measured with the SmolLM2 tokenizer, 5,000 characters of one line
/// with `max_len` 1,000 took 5.9 s to compile (100: 0.6 s; none: 36 ms), and one line of 200,000
/// characters ran for over 20 minutes. Beyond this, texts longer than `max_len` are cut into
/// overlapping pieces instead ([`substring_alternatives`](super::text::substring_alternatives)).
pub(super) const EXACT_LENGTH_BUDGET: usize = 100_000;
/// Longest span (in lines) a nested span-like object may cite under a grounded mask.
pub(super) const MAX_SPAN_LINES: usize = 4;
/// Most line ranges enumerated for a nested span-like object; beyond, its quote is grounded in
/// the whole document (and checked against its lines after decoding).
pub(super) const MAX_LINE_RANGES: usize = 1200;
/// Most document lines a span-like root's line fields are enumerated over (`start <= end`
/// written out as a chain of suffixes, one rule per line); beyond, its rule is left to a filter.
pub(super) const MAX_ROOT_SPAN_LINES: usize = 256;
/// Number alternations longer than this are written as chains that share their tails.
pub(super) const CHAIN_MIN: usize = 8;
