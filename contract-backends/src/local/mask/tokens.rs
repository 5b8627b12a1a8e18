//! Tokens as the value filter reads them: sets of tokens (llguidance's bitsets) scanned against
//! a mask a block of words at a time, and every token's bytes laid out one after the other.
//! Apart from the engine and the mask, which decide which set to scan and what to do with a
//! token.

use llguidance::toktrie::{SimpleVob, TokTrie};

/// A set of tokens (llguidance's bitset), scanned against a mask.
#[derive(Debug, Default)]
pub(super) struct TokenSet {
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
    pub(super) fn of(trie: &TokTrie, has: impl Fn(&[u8]) -> bool) -> TokenSet {
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

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Adds to `refused` the tokens of this set that `vob` allows and `refuse` refuses.
    pub(super) fn refuse(
        &self,
        vob: &SimpleVob,
        refused: &mut Vec<u32>,
        mut refuse: impl FnMut(u32) -> bool,
    ) {
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
pub(super) struct TokenBytes {
    data: Vec<u8>,
    /// Token `t`'s bytes are `data[starts[t]..starts[t + 1]]`.
    starts: Vec<usize>,
}

impl TokenBytes {
    pub(super) fn of(trie: &TokTrie) -> TokenBytes {
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
    pub(super) fn token(&self, t: u32) -> &[u8] {
        let t = t as usize;
        match (self.starts.get(t), self.starts.get(t + 1)) {
            (Some(&a), Some(&b)) => self.data.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// The bytes of token `t`, empty for a special token (which llguidance's trie stores behind a
/// marker byte).
pub(super) fn plain_bytes(trie: &TokTrie, t: u32) -> &[u8] {
    let b = trie.token(t);
    if b.first() == Some(&TokTrie::SPECIAL_TOKEN_MARKER) {
        &[]
    } else {
        b
    }
}
