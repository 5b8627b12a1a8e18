//! The numbers a value may still be ([`NumSet`]): a set of intervals or literal choices, and
//! for each literal prefix met, whether it is complete and which number bytes may follow, kept
//! so that the decimal arithmetic runs once per prefix and byte; the longest literal allowed
//! ([`MAX_NUMBER_LEN`]) and the filter's memo maps ([`Memo`]). Apart from the scanner, which
//! only asks it about the bytes it meets; it reads no other part of the filter.

use std::collections::HashMap;
use std::sync::Mutex;

use super::super::rules_dec::{Interval, NumPrefix, NumSyntax, Parts};

/// The longest number literal the filter lets a model write, in bytes. Without it a masked model
/// can write digits until its token limit (SmolLM2-135M wrote `"low": 12500000…` for 100
/// tokens); no contract value needs more.
pub const MAX_NUMBER_LEN: usize = 32;

/// A map of the filter's memos: looked up at every step, with short keys (number literals, a
/// field's partner values) that come from the model's own output and are capped in number, so
/// FxHash (one multiply a word) serves where SipHash's resistance to chosen keys buys nothing.
pub(super) type Memo<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

/// The numbers a value may still be, with the verdicts found so far.
#[derive(Debug)]
pub(super) struct NumSet {
    kind: NumKind,
    /// What is known of each literal prefix met so far. A set is shared by every value of its
    /// field with the same partner values ([`RulePlan`]'s `num_memo`), and the same prefixes
    /// come back at every step and in every generation: the decimal arithmetic behind a
    /// verdict runs once per prefix and byte.
    memo: Mutex<Memo<Vec<u8>, Next>>,
}

#[derive(Debug)]
pub(super) enum NumKind {
    Intervals(NumSyntax, Vec<Interval>, Parts),
    Choices(Vec<Vec<u8>>),
}

/// The bytes a number literal is made of (any other byte ends it), in the order of [`Next`]'s
/// bits.
const NUMBER_BYTES: &[u8; 15] = b"0123456789.eE+-";

/// For each byte, its index in [`NUMBER_BYTES`], or `NOT_NUMBER`.
const NUMBER_INDEX: [u8; 256] = {
    let mut index = [NOT_NUMBER; 256];
    let mut i = 0;
    while i < NUMBER_BYTES.len() {
        index[NUMBER_BYTES[i] as usize] = i as u8;
        i += 1;
    }
    index
};
const NOT_NUMBER: u8 = u8::MAX;

/// The bits of [`NUMBER_BYTES`] that start a number alone (`-` and the digits).
pub(super) const START_NUMBER_BYTES: u16 = 0b100_0000_0000_0000 | 0b11_1111_1111;

/// The index of `b` in `NUMBER_BYTES` (`None`: any other byte).
pub fn number_byte(b: u8) -> Option<u32> {
    let i = NUMBER_INDEX[usize::from(b)];
    (i != NOT_NUMBER).then_some(u32::from(i))
}

/// What is known of one literal prefix: whether it is a literal of the set, and which number
/// bytes may follow it ([`NumSet::extends`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Next {
    complete: Option<bool>,
    /// Bit `i`: the verdict on `NUMBER_BYTES[i]` is in `ok`.
    pub(super) known: u16,
    pub(super) ok: u16,
}

/// The most prefixes a [`NumSet`] remembers (it starts over past them).
const NUM_MEMO: usize = 4096;

impl NumSet {
    pub(super) fn new(kind: NumKind) -> NumSet {
        NumSet {
            kind,
            memo: Mutex::new(Memo::default()),
        }
    }

    /// What is remembered of `text`.
    pub(super) fn known(&self, text: &[u8]) -> Next {
        let memo = self.memo.lock().ok();
        memo.and_then(|m| m.get(text).copied()).unwrap_or_default()
    }

    /// Remembers `next` for `text`.
    pub(super) fn remember(&self, text: &[u8], next: Next) {
        if let Ok(mut m) = self.memo.lock() {
            if m.len() >= NUM_MEMO && !m.contains_key(text) {
                m.clear();
            }
            m.insert(text.to_vec(), next);
        }
    }

    /// Whether `text` can still become a literal of the set.
    fn feasible(&self, text: &[u8]) -> bool {
        match &self.kind {
            NumKind::Intervals(syntax, _, parts) => NumPrefix {
                text: text.to_vec(),
            }
            .feasible_in(*syntax, parts),
            NumKind::Choices(c) => c.iter().any(|t| t.starts_with(text)),
        }
    }

    /// Whether `text` is a literal of the set.
    fn is_literal(&self, text: &[u8]) -> bool {
        match &self.kind {
            NumKind::Intervals(_, set, _) => NumPrefix {
                text: text.to_vec(),
            }
            .complete_in(set),
            NumKind::Choices(c) => c.iter().any(|t| t == text),
        }
    }

    /// Whether number byte `b` may follow `text` (the scanner's check inside a number).
    fn may_follow(&self, text: &[u8], b: u8) -> bool {
        // Bounded length: the literal must be able to end inside the set within the cap.
        if text.len() + 1 > MAX_NUMBER_LEN {
            return false;
        }
        let mut buf = [0u8; MAX_NUMBER_LEN];
        let next = &mut buf[..text.len() + 1];
        next[..text.len()].copy_from_slice(text);
        next[text.len()] = b;
        self.feasible(next) && (next.len() < 12 || self.is_literal(next) || self.fits(next))
    }

    /// Whether the feasible prefix `text` can end inside the set within [`MAX_NUMBER_LEN`].
    fn fits(&self, text: &[u8]) -> bool {
        let room = MAX_NUMBER_LEN - text.len();
        match &self.kind {
            NumKind::Intervals(syntax, _, parts) => NumPrefix {
                text: text.to_vec(),
            }
            .completes_within(room, *syntax, parts),
            NumKind::Choices(c) => c
                .iter()
                .any(|t| t.starts_with(text) && t.len() <= MAX_NUMBER_LEN),
        }
    }

    /// [`NumSet::may_follow`], from `known` (what is known of `text`) or else computed into it.
    pub(super) fn extends_with(&self, text: &[u8], b: u8, known: &mut Next) -> bool {
        let Some(i) = number_byte(b) else {
            return self.may_follow(text, b);
        };
        let bit = 1 << i;
        if known.known & bit == 0 {
            known.known |= bit;
            if self.may_follow(text, b) {
                known.ok |= bit;
            }
        }
        known.ok & bit != 0
    }

    /// [`NumSet::is_literal`], from `known` or else computed into it.
    pub(super) fn complete_with(&self, text: &[u8], known: &mut Next) -> bool {
        *known.complete.get_or_insert_with(|| self.is_literal(text))
    }

    /// Whether number byte `b` may follow `text`, remembered.
    pub(super) fn extends(&self, text: &[u8], b: u8) -> bool {
        let before = self.known(text);
        let mut known = before;
        let ok = self.extends_with(text, b, &mut known);
        if known != before {
            self.remember(text, known);
        }
        ok
    }

    /// Whether `text` is a literal of the set, remembered.
    pub(super) fn complete(&self, text: &[u8]) -> bool {
        let before = self.known(text);
        let mut known = before;
        let ok = self.complete_with(text, &mut known);
        if known != before {
            self.remember(text, known);
        }
        ok
    }
}

/// Whether `b` belongs to a number literal (any other byte ends it).
pub(super) fn is_number_byte(b: u8) -> bool {
    number_byte(b).is_some()
}
