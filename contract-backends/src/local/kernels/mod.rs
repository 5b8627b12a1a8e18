//! The CPU kernels of the native forward pass ([`super::native`]): this crate's own int8 and 4-bit matmuls
//! ([`q8`], [`q4`]), the thread team they run on ([`team`]), and what they share: CPU feature
//! detection, the f16 conversion, the activation quantizer and the output pointer the workers
//! of one call write through. Nothing here depends on the model code above it.

pub(crate) mod q4;
pub(crate) mod q8;
pub(crate) mod team;

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

/// f16 bits to f32 (normal, subnormal, zero, infinity and NaN).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: value man * 2^-24.
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        (31, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Quantizes one block (`d = max|x| / 127`, `q = round(x / d)`); returns its scale.
pub(crate) fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
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
