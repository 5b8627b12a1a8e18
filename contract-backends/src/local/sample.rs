//! Choosing the next token from logits: greedy by default, or temperature / top-p sampling with
//! a seeded generator (reproducible for a given seed).

use contract_core::extract::Sampling;

use super::token_mask::Allowed;

/// The seed used when sampling is asked for without one.
pub const DEFAULT_SEED: u64 = 0x5EED_C0DE;

/// A token sampler.
#[derive(Debug, Clone)]
pub struct Sampler {
    temperature: f32,
    top_p: f32,
    rng: SplitMix64,
    scratch: Vec<(u32, f32)>,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::greedy()
    }
}

impl Sampler {
    /// Always the most likely token (ties: the lowest id).
    pub fn greedy() -> Self {
        Sampler {
            temperature: 0.0,
            top_p: 1.0,
            rng: SplitMix64(DEFAULT_SEED),
            scratch: Vec::new(),
        }
    }

    /// Samples from the softmax at `temperature`, restricted to the smallest set of most likely
    /// tokens whose mass reaches `top_p`. A temperature of 0 (or less) is greedy.
    pub fn new(temperature: f32, top_p: f32, seed: u64) -> Self {
        Sampler {
            temperature: if temperature.is_finite() {
                temperature.max(0.0)
            } else {
                0.0
            },
            top_p: if top_p.is_finite() && top_p > 0.0 {
                top_p.min(1.0)
            } else {
                1.0
            },
            rng: SplitMix64(seed),
            scratch: Vec::new(),
        }
    }

    /// The sampler a request's settings ask for (greedy when no temperature is given).
    pub fn from_sampling(s: &Sampling) -> Self {
        match s.temperature {
            Some(t) if t > 0.0 => {
                Sampler::new(t, s.top_p.unwrap_or(1.0), s.seed.unwrap_or(DEFAULT_SEED))
            }
            _ => Sampler::greedy(),
        }
    }

    /// Whether this sampler is greedy.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// The next token; `None` when every logit is -inf or NaN (nothing allowed).
    pub fn sample(&mut self, logits: &[f32]) -> Option<u32> {
        let best = argmax(logits)?;
        if self.is_greedy() {
            return Some(best);
        }
        let max = logits[best as usize];
        let inv_t = 1.0 / self.temperature;
        self.scratch.clear();
        let mut total = 0.0f64;
        for (i, &l) in logits.iter().enumerate() {
            if l.is_finite() {
                let p = ((l - max) * inv_t).exp();
                if p > 0.0 {
                    self.scratch.push((i as u32, p));
                    total += p as f64;
                }
            }
        }
        if self.top_p < 1.0 {
            self.scratch
                .sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let limit = self.top_p as f64 * total;
            let mut mass = 0.0f64;
            let mut keep = 0;
            for &(_, p) in &self.scratch {
                mass += p as f64;
                keep += 1;
                if mass >= limit {
                    break;
                }
            }
            self.scratch.truncate(keep.max(1));
            total = mass;
        }
        let mut target = self.rng.next_f64() * total;
        for &(id, p) in &self.scratch {
            target -= p as f64;
            if target <= 0.0 {
                return Some(id);
            }
        }
        self.scratch.last().map(|&(id, _)| id).or(Some(best))
    }
}

/// Sets the logits of disallowed tokens to -inf.
pub fn apply_mask(logits: &mut [f32], allowed: Allowed<'_>) {
    let Allowed::Bits(bits) = allowed else { return };
    for (w, chunk) in logits.chunks_mut(32).enumerate() {
        let word = bits.get(w).copied().unwrap_or(0);
        if word == u32::MAX {
            continue;
        }
        for (b, l) in chunk.iter_mut().enumerate() {
            if word & (1 << b) == 0 {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

/// The tokens a bitset allows (bit `t % 32` of word `t / 32`), in increasing order.
pub fn allowed_ids(bits: &[u32]) -> Vec<u32> {
    let mut ids = Vec::new();
    for (w, &word) in bits.iter().enumerate() {
        let mut x = word;
        while x != 0 {
            ids.push(w as u32 * 32 + x.trailing_zeros());
            x &= x - 1;
        }
    }
    ids
}

/// The index of the largest finite logit (ties: the lowest index).
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if l.is_nan() || l == f32::NEG_INFINITY {
            continue;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// SplitMix64: a small, fast, well-mixed seeded generator (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`; 0 when `n` is 0), with modulo bias below 2^-40 for
    /// `n < 2^24`.
    pub fn below(&mut self, n: usize) -> usize {
        match n {
            0 => 0,
            n => (self.next_u64() % n as u64) as usize,
        }
    }

    /// A uniform float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_ids_lists_the_set_bits_in_order() {
        assert_eq!(allowed_ids(&[0b101, 0, 1 << 31]), vec![0, 2, 95]);
        assert_eq!(allowed_ids(&[u32::MAX])[31], 31);
        assert!(allowed_ids(&[0, 0]).is_empty());
    }

    #[test]
    fn greedy_picks_the_largest_and_skips_masked() {
        let mut s = Sampler::greedy();
        assert_eq!(s.sample(&[0.1, 3.0, 2.0]), Some(1));
        assert_eq!(
            s.sample(&[f32::NEG_INFINITY, f32::NEG_INFINITY, -5.0]),
            Some(2)
        );
        assert_eq!(s.sample(&[f32::NEG_INFINITY; 3]), None);
        assert_eq!(s.sample(&[1.0, 1.0]), Some(0));
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_respects_the_mask() {
        let logits = [1.0, 1.2, f32::NEG_INFINITY, 0.9, 1.1];
        let draw = |seed| {
            let mut s = Sampler::new(1.0, 1.0, seed);
            (0..50)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert!(!draw(7).contains(&2));
    }

    #[test]
    fn top_p_keeps_only_the_head() {
        let logits = [10.0, 0.0, 0.0, 0.0];
        let mut s = Sampler::new(1.0, 0.5, 1);
        assert!((0..100).all(|_| s.sample(&logits) == Some(0)));
    }
}
