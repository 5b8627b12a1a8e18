//! The CPU kernels of the native forward pass ([`super::native`]): this crate's own int8 and 4-bit matmuls
//! ([`q8`], [`q4`]; AVX2, and with AVX-512 VNNI a few-row kernel in each and the many-row
//! kernel of [`vnni`]), the thread team they run on ([`team`]), and what they share: CPU feature
//! detection, the f16 conversion, the activation quantizer and the output pointer the workers
//! of one call write through. Nothing here depends on the model code above it.

pub(crate) mod q4;
pub(crate) mod q8;
pub(crate) mod team;
pub(crate) mod vnni;

/// Values per quantization block (of weights and of activations).
pub(crate) const BLOCK: usize = 32;
/// Weight rows processed together.
pub(crate) const TILE: usize = 4;

/// Whether the CPU has AVX2 and FMA (the int8 matmul, the attention loops).
pub(crate) fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has AVX2, FMA and F16C (the 4-bit matmul, which converts f16 scales).
pub(crate) fn avx2_fma_f16c() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx2_fma() && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether Candle 0.11's repacked x86 kernels (`repack_x86::select`) take Q8_0 matrices on this
/// CPU: AVX-512 VNNI, or AVX-VNNI with AVX2 (plain AVX2 falls back to the per-row dot products).
pub(crate) fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
            || (is_x86_feature_detected!("avxvnni") && is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Runs `run` over the tiles `0..tiles` of one matmul: on the thread team in chunks (four a
/// worker), or on this thread when the call is small (`work`, tiles x activation rows x blocks,
/// under 2048) or the team has one worker.
pub(crate) fn for_tiles<F: Fn(std::ops::Range<usize>) + Sync>(tiles: usize, work: usize, run: F) {
    let team = team::Team::global();
    if work < 2048 || team.size() == 1 {
        run(0..tiles);
    } else {
        team.for_each(tiles, tiles.div_ceil(4 * team.size()), run);
    }
}

/// The sum of the eight lanes of `v` (for the AVX2 kernels, inlined into them).
///
/// # Safety
///
/// The CPU must have AVX.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn hsum(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
}

/// f16 bits to f32 (the `half` crate's conversion).
#[inline]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    half::f16::from_bits(h).to_f32()
}

/// Quantizes one block (`d = max|x| / 127`, `q = round(x / d)`, halves away from zero);
/// returns its scale. With AVX2 the same numbers come from [`quantize_block_avx2`] (the scalar
/// loop's `round` was a tenth of the time spent outside the matmuls in a profile of decoding).
pub(crate) fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if x.len() == BLOCK && q.len() == BLOCK && avx2_fma() {
        // SAFETY: the CPU has AVX2, and both blocks hold BLOCK values.
        return unsafe { quantize_block_avx2(x, q) };
    }
    quantize_block_plain(x, q)
}

/// [`quantize_block`] without SIMD.
fn quantize_block_plain(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
    d
}

/// [`quantize_block`] of one 32-value block with AVX2, giving the plain loop's numbers: the same
/// maximum, scale and products, and `round`'s halves away from zero as `trunc(v + copysign(h,
/// v))` with `h` the float just below 0.5 (exact for `|v| < 2^23`; here `|v| <= 127`).
///
/// # Safety
/// The CPU must have AVX2; `x` and `q` hold [`BLOCK`] values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_block_avx2(x: &[f32], q: &mut [i8]) -> f32 {
    use std::arch::x86_64::*;
    assert!(x.len() >= BLOCK && q.len() >= BLOCK);
    let v: [__m256; 4] = std::array::from_fn(|k| _mm256_loadu_ps(x.as_ptr().add(8 * k)));
    let sign = _mm256_set1_ps(-0.0);
    let abs = |v: __m256| _mm256_andnot_ps(sign, v);
    let m = _mm256_max_ps(
        _mm256_max_ps(abs(v[0]), abs(v[1])),
        _mm256_max_ps(abs(v[2]), abs(v[3])),
    );
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
    let d = amax / 127.0;
    let id = _mm256_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
    let half = _mm256_set1_ps(f32::from_bits(0.5f32.to_bits() - 1));
    let i: [__m256i; 4] = std::array::from_fn(|k| {
        let s = _mm256_mul_ps(v[k], id);
        let r = _mm256_add_ps(s, _mm256_or_ps(half, _mm256_and_ps(s, sign)));
        _mm256_cvttps_epi32(r)
    });
    // 32-bit to 8-bit: the packs work within 128-bit lanes, so the result's 4-byte groups hold
    // the block's 4-value groups in the order 0 2 4 6 1 3 5 7, put back in order here.
    let packed = _mm256_packs_epi16(
        _mm256_packs_epi32(i[0], i[1]),
        _mm256_packs_epi32(i[2], i[3]),
    );
    let ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(q.as_mut_ptr() as *mut __m256i, ordered);
    d
}

/// The output pointer shared by the workers of one call, each writing its own part (columns
/// of a matmul, rows of the attention).
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub(crate) *mut f32);

impl OutPtr {
    /// The pointer (a method, so that closures capture the whole `Sync` wrapper).
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}
// SAFETY: every user hands each worker a disjoint part of the output, and the team returns only
// after all of them are done.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 quantizer gives the plain loop's scale and quants, halves included.
    #[test]
    fn quantize_block_simd_is_the_plain_loop() {
        let mut blocks: Vec<Vec<f32>> = Vec::new();
        // Scale 1 (the largest value is 127): every .5 is a tie for `round`.
        blocks.push(
            (0..BLOCK)
                .map(|k| match k {
                    0 => 127.0,
                    _ => (k as f32 - 16.0) * 3.0 + 0.5,
                })
                .collect(),
        );
        blocks.push(
            (0..BLOCK)
                .map(|k| -(k as f32) - 0.5)
                .chain([-127.0])
                .skip(1)
                .collect(),
        );
        blocks.push(vec![0.0; BLOCK]);
        for seed in 0..200u32 {
            blocks.push(
                (0..BLOCK as u32)
                    .map(|k| {
                        let h = (seed * 7919 + k * 104_729) % 20_011;
                        (h as f32 / 20_011.0 - 0.5) * (1.0 + seed as f32)
                    })
                    .collect(),
            );
        }
        let mut ties = 0;
        for x in &blocks {
            let mut plain = [0i8; BLOCK];
            let mut fast = [0i8; BLOCK];
            let d = quantize_block_plain(x, &mut plain);
            assert_eq!(quantize_block(x, &mut fast).to_bits(), d.to_bits());
            assert_eq!(plain, fast, "{x:?}");
            ties += x
                .iter()
                .filter(|v| d == 1.0 && v.fract().abs() == 0.5)
                .count();
        }
        assert!(ties > 40, "the blocks hold halves to round: {ties}");
    }
}
