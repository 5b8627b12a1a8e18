//! Causal attention over the KV cache slices (f16), with an AVX2 kernel and a plain one.

use half::f16;

use super::config::Config;
use crate::local::kernels::team::Team;
use crate::local::kernels::OutPtr;

/// A number type the KV cache holds: f32 (the default) or f16, as llama.cpp
/// ([`NativeOptions::kv_f16`](super::NativeOptions::kv_f16)).
pub(super) trait CacheValue: Copy + Send + Sync + 'static {
    /// The zero the cache grows with.
    const ZERO: Self;
    fn to_f32(self) -> f32;
    /// `dst[i] = src[i]` rounded to this type (same lengths).
    fn convert(dst: &mut [Self], src: &[f32]);
    /// Eight values at `p` as f32 lanes.
    ///
    /// # Safety
    /// Eight values are readable at `p`; the CPU has AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl CacheValue for f16 {
    const ZERO: Self = f16::ZERO;
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn convert(dst: &mut [Self], src: &[f32]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(dst, src);
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
    }
}

impl CacheValue for f32 {
    const ZERO: Self = 0.0;
    fn to_f32(self) -> f32 {
        self
    }
    fn convert(dst: &mut [Self], src: &[f32]) {
        dst.copy_from_slice(src);
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(p)
    }
}

/// Causal attention of the `m` new query rows (in `qkv`, rows of `qkv_rows`) over the cache
/// (`pos + m` positions), each query head reading its key/value head in place. Writes `m` rows
/// of `attn_p` to `out` (zeros past `n_head * head_dim`).
/// Runs on our own thread team with our own kernels (`team`), else on Candle's pool.
#[allow(clippy::too_many_arguments)]
pub(super) fn attention<T: CacheValue>(
    c: &Config,
    qkv: &[f32],
    k: &[T],
    v: &[T],
    pos: usize,
    m: usize,
    out: &mut [f32],
    team: bool,
) {
    let hd = c.head_dim;
    let kv = c.kv_dim();
    let group = c.n_head / c.n_kv_head;
    let scale = 1.0 / (hd as f32).sqrt();
    let units = m * c.n_head;
    let ptr = OutPtr(out.as_mut_ptr());
    let (attn_p, qkv_rows, n_head) = (c.attn_p, c.qkv_rows, c.n_head);
    let simd = simd::available();
    let run = move |range: std::ops::Range<usize>| {
        let mut scores = Vec::new();
        for unit in range {
            let (r, head) = (unit / n_head, unit % n_head);
            let q = &qkv[r * qkv_rows + head * hd..][..hd];
            let g = head / group;
            let n = pos + r + 1;
            // SAFETY: unit (r, head) owns out[r * attn_p + head * hd ..][..hd]; see `OutPtr`.
            let o = unsafe {
                std::slice::from_raw_parts_mut(ptr.get().add(r * attn_p + head * hd), hd)
            };
            scores.clear();
            scores.resize(n, 0.0);
            simd::attend(simd, q, k, v, kv, g * hd, scale, &mut scores, o);
        }
    };
    // Work in multiply-adds: below some tens of thousands, a thread hand-off costs more.
    let work = units * (pos + m) * hd;
    if units <= 1 || work < 1 << 16 {
        run(0..units);
    } else if team {
        let team = Team::global();
        // Small chunks: a decoding step has one unit a head (9 for SmolLM2), and in chunks of
        // a quarter one thread got 6 heads and the other 3; a prompt's later rows cost more
        // than its first (causal), so a few large chunks are uneven there too.
        team.for_each(units, (units / (8 * team.size())).max(1), run);
    } else {
        candle_core::utils::barrier_pool().execute_chunked(units, run);
    }
}

mod simd {
    //! The attention inner loops: AVX2 + FMA when the CPU has them, else plain Rust.

    use super::CacheValue;

    /// Whether the AVX2 + FMA loops (F16C for the cache) can run.
    pub(super) fn available() -> bool {
        crate::local::kernels::avx2_fma_f16c()
    }

    /// One query head against `scores.len()` cached positions: the keys and values of this head
    /// start at `offset` in each `row`-long cache row. Writes the weighted sum of values to `out`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend<T: CacheValue>(
        simd: bool,
        q: &[f32],
        k: &[T],
        v: &[T],
        row: usize,
        offset: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if simd && q.len().is_multiple_of(8) {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked by `available`).
            unsafe { attend_avx2(q, k, v, row, offset, scale, scores, out) };
            return;
        }
        let _ = simd;
        attend_plain(q, k, v, row, offset, scale, scores, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn attend_plain<T: CacheValue>(
        q: &[f32],
        k: &[T],
        v: &[T],
        row: usize,
        offset: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let hd = q.len();
        for (j, s) in scores.iter_mut().enumerate() {
            let kr = &k[j * row + offset..][..hd];
            *s = q.iter().zip(kr).map(|(a, b)| a * b.to_f32()).sum::<f32>() * scale;
        }
        let sum = softmax(scores);
        out.fill(0.0);
        for (j, &s) in scores.iter().enumerate() {
            let p = s / sum;
            for (o, &x) in out.iter_mut().zip(&v[j * row + offset..][..hd]) {
                *o += p * x.to_f32();
            }
        }
    }

    /// exp(s - max) in place; returns the sum.
    fn softmax(scores: &mut [f32]) -> f32 {
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        sum
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attend_avx2<T: CacheValue>(
        q: &[f32],
        k: &[T],
        v: &[T],
        row: usize,
        offset: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        let hd = q.len();
        let n = scores.len();
        // Accumulate in registers, 8 lanes at a time over the head (at most 256 dimensions).
        let lanes = hd / 8;
        if lanes > 32 || n == 0 {
            attend_plain(q, k, v, row, offset, scale, scores, out);
            return;
        }
        assert!(k.len() >= (n - 1) * row + offset + hd && out.len() == hd);
        let qp = q.as_ptr();
        let kp = k.as_ptr().add(offset);
        let dot = |kr: *const T| {
            let mut acc = _mm256_setzero_ps();
            for i in (0..lanes * 8).step_by(8) {
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(i)), T::load8(kr.add(i)), acc);
            }
            acc
        };
        let vscale = _mm_set1_ps(scale);
        let mut j = 0;
        // Four keys at a time: one horizontal reduction for four scores.
        while j + 4 <= n {
            let a0 = dot(kp.add(j * row));
            let a1 = dot(kp.add((j + 1) * row));
            let a2 = dot(kp.add((j + 2) * row));
            let a3 = dot(kp.add((j + 3) * row));
            let h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
            let s4 = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            _mm_storeu_ps(scores.as_mut_ptr().add(j), _mm_mul_ps(s4, vscale));
            j += 4;
        }
        while j < n {
            let acc = dot(kp.add(j * row));
            let s4 = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
            let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
            let s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
            scores[j] = _mm_cvtss_f32(s1) * scale;
            j += 1;
        }
        let sum = softmax_avx2(scores);
        let p = 1.0 / sum;
        match lanes {
            8 => weighted_sum::<T, 8>(v, row, offset, scores, p, out),
            16 => weighted_sum::<T, 16>(v, row, offset, scores, p, out),
            4 => weighted_sum::<T, 4>(v, row, offset, scores, p, out),
            _ => {
                out.fill(0.0);
                for (j, &s) in scores.iter().enumerate() {
                    let w = s * p;
                    for (o, &x) in out.iter_mut().zip(&v[j * row + offset..][..hd]) {
                        *o = w.mul_add(x.to_f32(), *o);
                    }
                }
            }
        }
    }

    /// `exp(s - max)` in place, 8 lanes at a time; returns the sum.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn softmax_avx2(scores: &mut [f32]) -> f32 {
        use std::arch::x86_64::*;
        let n = scores.len();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let vmax = _mm256_set1_ps(max);
        let mut vsum = _mm256_setzero_ps();
        let p = scores.as_mut_ptr();
        let mut j = 0;
        while j + 8 <= n {
            let e = exp256(_mm256_sub_ps(_mm256_loadu_ps(p.add(j)), vmax));
            _mm256_storeu_ps(p.add(j), e);
            vsum = _mm256_add_ps(vsum, e);
            j += 8;
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), vsum);
        let mut sum: f32 = lanes.iter().sum();
        for s in &mut scores[j..] {
            *s = (*s - max).exp();
            sum += *s;
        }
        sum
    }

    /// `exp(x)` for `x <= 0` (as in a softmax), relative error about 2e-7: `2^n * p(r)` with
    /// `x = n ln 2 + r`, `p` the degree-6 Taylor polynomial of `exp` on `|r| <= ln 2 / 2`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp256(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // Below about -87, exp underflows: clamp, the result is then about 1e-38 (as good as 0).
        let x = _mm256_max_ps(x, _mm256_set1_ps(-87.0));
        let n = _mm256_round_ps(
            _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
        );
        // r = x - n ln 2, with ln 2 split in two for precision.
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_145_75), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428_606_8e-6), r);
        let mut y = _mm256_set1_ps(1.0 / 720.0);
        for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
            y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
        }
        let pow2 = _mm256_slli_epi32(
            _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
            23,
        );
        _mm256_mul_ps(y, _mm256_castsi256_ps(pow2))
    }

    /// `out = sum_j scores[j] * p * v_j`, `L` vectors of 8 lanes held in registers.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn weighted_sum<T: CacheValue, const L: usize>(
        v: &[T],
        row: usize,
        offset: usize,
        scores: &[f32],
        p: f32,
        out: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        assert!(out.len() == 8 * L);
        assert!(scores.is_empty() || v.len() >= (scores.len() - 1) * row + offset + 8 * L);
        let mut acc = [_mm256_setzero_ps(); L];
        for (j, &s) in scores.iter().enumerate() {
            let w = _mm256_set1_ps(s * p);
            let vp = v.as_ptr().add(j * row + offset);
            for (l, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(w, T::load8(vp.add(l * 8)), *a);
            }
        }
        let op = out.as_mut_ptr();
        for (l, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(op.add(l * 8), *a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_exp_is_accurate() {
        if !simd::available() {
            return;
        }
        let xs: Vec<f32> = (0..2000).map(|i| -(i as f32) * 0.05).collect();
        for chunk in xs.chunks_exact(8) {
            let mut out = [0f32; 8];
            // SAFETY: AVX2 and FMA are available.
            unsafe {
                use std::arch::x86_64::*;
                let e = simd::exp256(_mm256_loadu_ps(chunk.as_ptr()));
                _mm256_storeu_ps(out.as_mut_ptr(), e);
            }
            for (&x, &y) in chunk.iter().zip(&out) {
                let want = (x as f64).exp();
                assert!(
                    ((y as f64) - want).abs() <= 1e-6 * want + 1e-37,
                    "exp({x}) = {y}, want {want}"
                );
            }
        }
    }

    #[test]
    fn avx2_and_plain_attention_agree() {
        let hd = 64;
        let row = 3 * hd;
        let n = 37;
        let val = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let q: Vec<f32> = (0..hd).map(val).collect();
        let k: Vec<f16> = (0..n * row).map(|i| f16::from_f32(val(i + 13))).collect();
        let v: Vec<f16> = (0..n * row).map(|i| f16::from_f32(val(i + 101))).collect();
        let mut s1 = vec![0.0; n];
        let mut s2 = vec![0.0; n];
        let mut o1 = vec![0.0; hd];
        let mut o2 = vec![0.0; hd];
        simd::attend(false, &q, &k, &v, row, hd, 0.125, &mut s1, &mut o1);
        simd::attend(
            simd::available(),
            &q,
            &k,
            &v,
            row,
            hd,
            0.125,
            &mut s2,
            &mut o2,
        );
        for (a, b) in o1.iter().zip(&o2) {
            assert!((a - b).abs() < 1e-5, "{a} {b}");
        }
    }
}
