//! The x86 kernels of the Q4/Q5 matmul (AVX2; AVX-512 VNNI for a few rows): unpacking a tile's
//! nibbles and fifth bits into bytes, and the tile and few-row dot products. Apart from the layout and the
//! portable code in the parent, which say where each value lies; this only reads it fast.

use super::super::{hsum, vnni};
use super::{Acts, Tile, BLOCK, TILE};
use std::arch::x86_64::*;

/// Byte `k` of the result is 0x10 where element `k`'s fifth bit is set in `word` (kept in
/// [`super::spread_order`]), else 0.
#[inline(always)]
unsafe fn fifth_bits(word: u32) -> __m256i {
    let lanes = _mm256_sllv_epi32(
        _mm256_set1_epi32(word as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    // Bit 7 of every byte, moved to bit 4 (a 16-bit shift moves no bit across bytes here).
    _mm256_srli_epi16(_mm256_and_si256(lanes, _mm256_set1_epi8(-128)), 3)
}

/// How the kernel reads a tile's values: nibbles, nibbles and fifth bits, or bytes
/// unpacked beforehand.
pub(super) const NIBBLES: u8 = 0;
pub(super) const FIVE_BIT: u8 = 1;
pub(super) const UNPACKED: u8 = 2;

/// Row `i`'s values of the pair of blocks `b`, `b + 1` (`b` even), one a byte (0..=31), as
/// [`super::qs_at`] describes: elements 0..16 of both blocks, then 16..32 of both.
#[inline(always)]
unsafe fn pair_values<const MODE: u8>(w: &Tile<'_>, b: usize, i: usize) -> (__m256i, __m256i) {
    if MODE == UNPACKED {
        let p = w.unpacked.as_ptr().add(super::pair_unpacked(b, i));
        return (
            _mm256_loadu_si256(p as *const __m256i),
            _mm256_loadu_si256(p.add(BLOCK) as *const __m256i),
        );
    }
    let v = _mm256_loadu_si256(w.qs.as_ptr().add(super::pair_qs(b, i)) as *const __m256i);
    let mask = _mm256_set1_epi8(0x0f);
    let low = _mm256_and_si256(v, mask);
    let high = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
    if MODE == FIVE_BIT {
        let h = w.qh.as_ptr().add(super::pair_qh(b, i));
        (
            _mm256_or_si256(low, fifth_bits(*h)),
            _mm256_or_si256(high, fifth_bits(*h.add(1))),
        )
    } else {
        (low, high)
    }
}

/// Row `i`'s 32 values of block `b` when it stands alone (an odd last block), in order.
#[inline(always)]
unsafe fn single_values<const MODE: u8>(w: &Tile<'_>, b: usize, i: usize) -> __m256i {
    if MODE == UNPACKED {
        let p = w.unpacked.as_ptr().add(super::single_unpacked(b, i));
        return _mm256_loadu_si256(p as *const __m256i);
    }
    let packed = _mm_loadu_si128(w.qs.as_ptr().add(super::single_qs(b, i)) as *const __m128i);
    // Low nibbles (elements 0..16) in the low lane, high nibbles (16..32) above.
    let q = _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
        _mm256_set1_epi8(0x0f),
    );
    if MODE == FIVE_BIT {
        _mm256_or_si256(q, fifth_bits(*w.qh.get_unchecked(super::single_qh(b, i))))
    } else {
        q
    }
}

/// Tiles `range` against one or two activation rows (`m`, decoding) in one call, so that
/// the loop over tiles runs inside the kernel's target features: per tile, the weights'
/// slices and the kernel come inlined, with no call or dispatch of their own (a tile of a
/// 576-column matrix is about 200 cycles of work; the per-tile call and slicing cost 5% of
/// SmolLM2's decoding in a profile).
///
/// # Safety
/// `out` points to `m x rows` floats and no other thread writes the columns of `range`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn few_rows(
    q: &super::Q4Matrix,
    range: std::ops::Range<usize>,
    x: &Acts<'_>,
    m: usize,
    out: super::OutPtr,
) {
    let five = !q.qh.is_empty();
    for t in range {
        let w = q.tile_weights(t);
        let mut sums = [[0f32; TILE]; 2];
        match (m == 2, five) {
            (true, false) => tile::<2, NIBBLES>(&w, x, &mut sums),
            (false, false) => tile::<1, NIBBLES>(&w, x, &mut sums),
            (true, true) => tile::<2, FIVE_BIT>(&w, x, &mut sums),
            (false, true) => tile::<1, FIVE_BIT>(&w, x, &mut sums),
        }
        q.store(t, 0, m.min(2), &sums, out);
    }
}

/// Tiles `range` against each of the `m` activation rows with AVX-512 VNNI (256-bit), each
/// output computed with [`vnni::matmul`]'s operations (see `vnni::few`): the same numbers.
///
/// # Safety
/// The CPU has AVX2, FMA, F16C and AVX-512 F, BW, VL and VNNI; `out` points to `m x rows`
/// floats and no other thread writes the columns of `range`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn vnni_few(
    q: &super::Q4Matrix,
    range: std::ops::Range<usize>,
    x: &vnni::RowActs,
    m: usize,
    out: super::OutPtr,
) {
    let five = !q.qh.is_empty();
    for t in range {
        let w = q.tile_weights(t);
        for j in 0..m {
            let sums = match five {
                true => vnni_tile::<FIVE_BIT>(&w, x, j),
                false => vnni_tile::<NIBBLES>(&w, x, j),
            };
            let mut s = [[0f32; TILE]; 2];
            s[0] = sums;
            q.store(t, j, 1, &s, out);
        }
    }
}

/// One tile against activation row `j`: block by block, the four rows' exact dot products
/// (`vpdpbusd` on the pair's two vectors, then summed per block), then `vnni::few::step`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
#[allow(clippy::needless_range_loop)]
unsafe fn vnni_tile<const MODE: u8>(w: &Tile<'_>, x: &vnni::RowActs, j: usize) -> [f32; TILE] {
    use vnni::few::{row_sums, step};
    let kb = w.kb;
    assert!(w.qs.len() >= kb * TILE * 16 && w.d.len() >= kb * TILE);
    assert!(w.offset.is_some() || w.m.len() >= kb * TILE);
    assert!(MODE != FIVE_BIT || w.qh.len() >= kb * TILE);
    assert!(x.q.len() >= (j + 1) * kb * BLOCK && x.d.len() >= (j + 1) * kb);
    assert!(x.s.len() >= (j + 1) * kb && x.z.len() >= (j + 1) * kb);
    let offsets = w.offset.is_none();
    let xp = x.q.as_ptr().add(j * kb * BLOCK);
    let (xd, xs, xz) = (&x.d[j * kb..], &x.s[j * kb..], &x.z[j * kb..]);
    let zero = _mm256_setzero_si256();
    let mut acc = _mm_setzero_ps();
    for b in (0..kb & !1).step_by(2) {
        let first = _mm256_loadu_si256(xp.add(b * BLOCK) as *const __m256i);
        let second = _mm256_loadu_si256(xp.add((b + 1) * BLOCK) as *const __m256i);
        let x_low = _mm256_permute2x128_si256(first, second, 0x20);
        let x_high = _mm256_permute2x128_si256(first, second, 0x31);
        let mut s = [zero; TILE];
        for i in 0..TILE {
            let (low, high) = pair_values::<MODE>(w, b, i);
            s[i] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(zero, low, x_low), high, x_high);
        }
        let (first_sums, second_sums) = row_sums(&s);
        let d8 = _mm256_cvtph_ps(_mm_loadu_si128(w.d.as_ptr().add(b * TILE) as *const __m128i));
        let m8 = match offsets {
            true => _mm256_cvtph_ps(_mm_loadu_si128(w.m.as_ptr().add(b * TILE) as *const __m128i)),
            false => _mm256_setzero_ps(),
        };
        let (d_lo, d_hi) = (_mm256_castps256_ps128(d8), _mm256_extractf128_ps(d8, 1));
        let (m_lo, m_hi) = (_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
        acc = step(acc, first_sums, d_lo, m_lo, xd[b], xs[b], xz[b], offsets);
        acc = step(
            acc,
            second_sums,
            d_hi,
            m_hi,
            xd[b + 1],
            xs[b + 1],
            xz[b + 1],
            offsets,
        );
    }
    if kb % 2 == 1 {
        let b = kb - 1;
        let xv = _mm256_loadu_si256(xp.add(b * BLOCK) as *const __m256i);
        let mut s = [zero; TILE];
        for i in 0..TILE {
            s[i] = _mm256_dpbusd_epi32(zero, single_values::<MODE>(w, b, i), xv);
        }
        let (lo, hi) = row_sums(&s);
        let d4 = _mm_cvtph_ps(_mm_loadl_epi64(w.d.as_ptr().add(b * TILE) as *const __m128i));
        let m4 = match offsets {
            true => _mm_cvtph_ps(_mm_loadl_epi64(w.m.as_ptr().add(b * TILE) as *const __m128i)),
            false => _mm_setzero_ps(),
        };
        acc = step(
            acc,
            _mm_add_epi32(lo, hi),
            d4,
            m4,
            xd[b],
            xs[b],
            xz[b],
            offsets,
        );
    }
    let mut o = [0f32; TILE];
    _mm_storeu_ps(o.as_mut_ptr(), acc);
    o
}

/// Element `i` of each 128-bit lane of `v`, in the whole lane: row `i`'s scale for the
/// pair's first block in lanes 0..4 and for its second in 4..8.
#[inline(always)]
unsafe fn row_scale(v: __m256, i: usize) -> __m256 {
    match i {
        0 => _mm256_shuffle_ps(v, v, 0x00),
        1 => _mm256_shuffle_ps(v, v, 0x55),
        2 => _mm256_shuffle_ps(v, v, 0xaa),
        _ => _mm256_shuffle_ps(v, v, 0xff),
    }
}

/// Writes the tile's values to `out` (`kb * TILE * 32` bytes), one a byte, in the order
/// the kernel reads them: a pair's two vectors `[pair][row][64]`, an odd last block
/// `[row][32]`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn unpack(w: &Tile<'_>, out: &mut [u8]) {
    assert!(out.len() >= w.kb * TILE * BLOCK && w.qs.len() >= w.kb * TILE * 16);
    assert!(w.qh.is_empty() || w.qh.len() >= w.kb * TILE);
    let five = !w.qh.is_empty();
    let o = out.as_mut_ptr();
    for b in (0..w.kb & !1).step_by(2) {
        for i in 0..TILE {
            let (low, high) = match five {
                true => pair_values::<FIVE_BIT>(w, b, i),
                false => pair_values::<NIBBLES>(w, b, i),
            };
            let p = o.add(super::pair_unpacked(b, i));
            _mm256_storeu_si256(p as *mut __m256i, low);
            _mm256_storeu_si256(p.add(BLOCK) as *mut __m256i, high);
        }
    }
    if w.kb % 2 == 1 {
        let b = w.kb - 1;
        for i in 0..TILE {
            let q = match five {
                true => single_values::<FIVE_BIT>(w, b, i),
                false => single_values::<NIBBLES>(w, b, i),
            };
            _mm256_storeu_si256(o.add(super::single_unpacked(b, i)) as *mut __m256i, q);
        }
    }
}

/// `M` activation rows (1 or 2) against one tile of [`TILE`] weight rows, reading the
/// values as `MODE` says.
///
/// Blocks go two at a time: the activations' halves are regrouped to match the pair's two
/// vectors (elements 0..16 of both blocks, then 16..32), the two products added as 16-bit
/// sums (at most 2 x 2 x 31 x 127, no overflow) and widened once; lanes 0..4 of the
/// result then belong to the first block and 4..8 to the second, so one vector of scales
/// (`[d_i dx_b; 4], [d_i dx_b+1; 4]`, an in-lane shuffle of the tile's eight scales) applies
/// both. Per row and pair that is one load, five integer operations per activation row and
/// one conversion and one multiply-add, against twice a load, an insert, a shift, two
/// integer operations, a conversion, a broadcast and a multiply-add a block.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
#[allow(clippy::needless_range_loop)]
pub(super) unsafe fn tile<const M: usize, const MODE: u8>(
    w: &Tile<'_>,
    x: &Acts<'_>,
    sums: &mut [[f32; TILE]; 2],
) {
    let kb = w.kb;
    assert!(w.qs.len() >= kb * TILE * 16 && w.d.len() >= kb * TILE);
    assert!(w.offset.is_some() || w.m.len() >= kb * TILE);
    assert!(MODE != FIVE_BIT || w.qh.len() >= kb * TILE);
    assert!(MODE != UNPACKED || w.unpacked.len() >= kb * TILE * BLOCK);
    assert!(x.q.len() >= M * kb * BLOCK && x.d.len() >= M * kb && x.s.len() >= M * kb);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); TILE]; M];
    let mut offs = [_mm256_setzero_ps(); M];
    let xp = x.q.as_ptr();
    // Two blocks' scale (or offset) pairs, `[a; 4], [b; 4]`.
    let two = |a: f32, b: f32| _mm256_set_m128(_mm_set1_ps(b), _mm_set1_ps(a));
    for b in (0..kb & !1).step_by(2) {
        let mut x_low = [_mm256_setzero_si256(); M];
        let mut x_high = [_mm256_setzero_si256(); M];
        let mut scales = [_mm256_setzero_ps(); M];
        // The tile's scales and offsets of both blocks, f16 to f32.
        let d8 = _mm256_cvtph_ps(_mm_loadu_si128(w.d.as_ptr().add(b * TILE) as *const __m128i));
        let m8 = match w.offset {
            Some(k) => _mm256_mul_ps(d8, _mm256_set1_ps(k)),
            None => _mm256_cvtph_ps(_mm_loadu_si128(w.m.as_ptr().add(b * TILE) as *const __m128i)),
        };
        for j in 0..M {
            let first = _mm256_loadu_si256(xp.add((j * kb + b) * BLOCK) as *const __m256i);
            let second = _mm256_loadu_si256(xp.add((j * kb + b + 1) * BLOCK) as *const __m256i);
            x_low[j] = _mm256_permute2x128_si256(first, second, 0x20);
            x_high[j] = _mm256_permute2x128_si256(first, second, 0x31);
            let at = j * kb + b;
            let (dx, sx) = (x.d.as_ptr().add(at), x.s.as_ptr().add(at));
            scales[j] = _mm256_mul_ps(d8, two(*dx, *dx.add(1)));
            offs[j] = _mm256_fmadd_ps(m8, two(*sx, *sx.add(1)), offs[j]);
        }
        for i in 0..TILE {
            let (low, high) = pair_values::<MODE>(w, b, i);
            for j in 0..M {
                let s16 = _mm256_add_epi16(
                    _mm256_maddubs_epi16(low, x_low[j]),
                    _mm256_maddubs_epi16(high, x_high[j]),
                );
                let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
                let scale = row_scale(scales[j], i);
                acc[j][i] = _mm256_fmadd_ps(p, scale, acc[j][i]);
            }
        }
    }
    if kb % 2 == 1 {
        // The odd last block alone: its scales in both halves, its offsets in the low one.
        let b = kb - 1;
        let d4 = _mm_cvtph_ps(_mm_loadl_epi64(w.d.as_ptr().add(b * TILE) as *const __m128i));
        let m4 = match w.offset {
            Some(k) => _mm_mul_ps(d4, _mm_set1_ps(k)),
            None => _mm_cvtph_ps(_mm_loadl_epi64(w.m.as_ptr().add(b * TILE) as *const __m128i)),
        };
        let mut xv = [_mm256_setzero_si256(); M];
        let mut scales = [_mm256_setzero_ps(); M];
        for j in 0..M {
            xv[j] = _mm256_loadu_si256(xp.add((j * kb + b) * BLOCK) as *const __m256i);
            let (dx, sx) = (
                *x.d.get_unchecked(j * kb + b),
                *x.s.get_unchecked(j * kb + b),
            );
            let d = _mm_mul_ps(d4, _mm_set1_ps(dx));
            scales[j] = _mm256_set_m128(d, d);
            let m = _mm_mul_ps(m4, _mm_set1_ps(sx));
            offs[j] = _mm256_add_ps(offs[j], _mm256_set_m128(_mm_setzero_ps(), m));
        }
        for i in 0..TILE {
            let q = single_values::<MODE>(w, b, i);
            for j in 0..M {
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv[j]), ones);
                let scale = row_scale(scales[j], i);
                acc[j][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[j][i]);
            }
        }
    }
    for j in 0..M {
        let mut o = [0f32; TILE];
        let both = _mm_add_ps(
            _mm256_castps256_ps128(offs[j]),
            _mm256_extractf128_ps(offs[j], 1),
        );
        _mm_storeu_ps(o.as_mut_ptr(), both);
        for i in 0..TILE {
            sums[j][i] = hsum(acc[j][i]) + o[i];
        }
    }
}
