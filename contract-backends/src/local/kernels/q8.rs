//! An int8 matrix (Q8_0-style: 32 values per block, one f32 scale each) and its AVX2 matmul, for
//! CPUs where Candle 0.11 has no fast Q8_0 kernel (x86 without VNNI: its repacked kernels need
//! VNNI for Q8_0, and its per-row dot product converts f16 scales per block with one
//! accumulator).
//!
//! Layout: rows in tiles of [`TILE`]; for each tile and each block, the tile's rows' 32 quants
//! one after the other, so a tile is read sequentially. Activations are quantized per call, per
//! row and block, the same way (`d = max|x| / 127`, `q = round(x / d)`), and the dot product of
//! two blocks is exact in i32 (`|q| <= 127`, so `maddubs` never saturates).

use super::vnni;
use super::{avx2_fma as avx2, f16_to_f32, for_tiles, quantize_block, OutPtr, BLOCK, TILE};

/// A quantized matrix of `rows x cols` (`cols` a multiple of [`BLOCK`]).
pub(crate) struct Q8Matrix {
    rows: usize,
    cols: usize,
    /// `[tile][block][row in tile][32]`.
    qs: Vec<i8>,
    /// `[tile][block][row in tile]`.
    d: Vec<f32>,
}

impl Q8Matrix {
    /// Quantizes `w` (`rows x cols`, row-major).
    pub(crate) fn quantize(w: &[f32], rows: usize, cols: usize) -> Q8Matrix {
        assert!(cols.is_multiple_of(BLOCK) && w.len() == rows * cols);
        let kb = cols / BLOCK;
        let tiles = rows.div_ceil(TILE);
        let mut qs = vec![0i8; tiles * kb * TILE * BLOCK];
        let mut d = vec![0f32; tiles * kb * TILE];
        for r in 0..rows {
            let (t, i) = (r / TILE, r % TILE);
            for b in 0..kb {
                let at = (t * kb + b) * TILE + i;
                d[at] = quantize_block(
                    &w[r * cols + b * BLOCK..][..BLOCK],
                    &mut qs[at * BLOCK..][..BLOCK],
                );
            }
        }
        Q8Matrix { rows, cols, qs, d }
    }

    /// Stacks `parts` (raw Q8_0 blocks of `(rows_i, pad_to_i)` rows each, `cols` columns) on
    /// rows, each part padded with zero rows to `pad_to_i`, then zero rows up to `rows`: the
    /// file's numbers exactly (the f16 scales widened to f32).
    pub(crate) fn from_blocks(
        parts: &[(&[u8], usize, usize)],
        rows: usize,
        cols: usize,
    ) -> Option<Q8Matrix> {
        if !cols.is_multiple_of(BLOCK) {
            return None;
        }
        let kb = cols / BLOCK;
        let bb = 2 + BLOCK;
        let tiles = rows.div_ceil(TILE);
        let mut qs = vec![0i8; tiles * kb * TILE * BLOCK];
        let mut d = vec![0f32; tiles * kb * TILE];
        let mut r0 = 0;
        for &(data, n, pad_to) in parts {
            if data.len() != n * kb * bb {
                return None;
            }
            for r in 0..n {
                let row = r0 + r;
                let (t, i) = (row / TILE, row % TILE);
                for b in 0..kb {
                    let blk = &data[(r * kb + b) * bb..][..bb];
                    let at = (t * kb + b) * TILE + i;
                    d[at] = f16_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
                    for (q, &v) in qs[at * BLOCK..][..BLOCK].iter_mut().zip(&blk[2..]) {
                        *q = v as i8;
                    }
                }
            }
            r0 += n.max(pad_to);
        }
        (r0 <= rows).then_some(Q8Matrix { rows, cols, qs, d })
    }

    /// Rows (outputs).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.qs.len() + 4 * self.d.len()
    }

    /// Row `r` dequantised into `out` (`cols` long).
    pub(crate) fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let kb = self.cols / BLOCK;
        let (t, i) = (r / TILE, r % TILE);
        for (b, o) in out.chunks_exact_mut(BLOCK).enumerate().take(kb) {
            let at = (t * kb + b) * TILE + i;
            let d = self.d[at];
            for (o, &q) in o.iter_mut().zip(&self.qs[at * BLOCK..][..BLOCK]) {
                *o = q as f32 * d;
            }
        }
    }

    /// The dot products of one activation row `x` (`cols`) with the rows `ids` (each below
    /// [`Q8Matrix::rows`]), in the order given.
    pub(crate) fn dot_rows(&self, x: &[f32], ids: &[u32]) -> Vec<f32> {
        assert_eq!(x.len(), self.cols);
        let kb = self.cols / BLOCK;
        let mut xq = vec![0i8; self.cols];
        let mut xd = vec![0f32; kb];
        for ((xb, qb), d) in x
            .chunks_exact(BLOCK)
            .zip(xq.chunks_exact_mut(BLOCK))
            .zip(xd.iter_mut())
        {
            *d = quantize_block(xb, qb);
        }
        let simd = avx2();
        ids.iter()
            .map(|&r| {
                let (t, i) = (r as usize / TILE, r as usize % TILE);
                let mut sum = 0f32;
                for b in 0..kb {
                    let at = (t * kb + b) * TILE + i;
                    let w = &self.qs[at * BLOCK..][..BLOCK];
                    let xb = &xq[b * BLOCK..][..BLOCK];
                    #[cfg(target_arch = "x86_64")]
                    let dot = if simd {
                        // SAFETY: the CPU has AVX2 (checked by `avx2`).
                        unsafe { avx2::block_dot(w, xb) }
                    } else {
                        w.iter().zip(xb).map(|(&a, &b)| a as i32 * b as i32).sum()
                    };
                    #[cfg(not(target_arch = "x86_64"))]
                    let dot: i32 = {
                        let _ = simd;
                        w.iter().zip(xb).map(|(&a, &b)| a as i32 * b as i32).sum()
                    };
                    sum += dot as f32 * self.d[at] * xd[b];
                }
                sum
            })
            .collect()
    }

    /// `x` (`m x cols`) times the transpose: `m x rows`. With AVX-512 VNNI through this
    /// module's few-row kernel below [`vnni::MIN_ROWS`] rows and [`vnni::matmul`] from there,
    /// which give each row the same numbers (so a row's result does not depend on the call it
    /// is in); else the AVX2 tile kernels, whose rows do not depend on the call either.
    pub(crate) fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        if vnni::available() {
            if m >= vnni::MIN_ROWS {
                if let Some(y) = vnni::matmul(self, x, m) {
                    return y;
                }
            }
            #[cfg(target_arch = "x86_64")]
            return self.matmul_vnni_few(x, m);
        }
        self.matmul_tiles(x, m)
    }

    /// [`Q8Matrix::matmul`] with AVX-512 VNNI for few rows (`avx2::vnni_few`).
    #[cfg(target_arch = "x86_64")]
    fn matmul_vnni_few(&self, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(x.len(), m * self.cols);
        let acts = vnni::RowActs::new(x, vnni::Source::zero(self));
        let mut out = vec![0f32; m * self.rows];
        let tiles = self.rows.div_ceil(TILE);
        let kb = self.cols / BLOCK;
        let ptr = OutPtr(out.as_mut_ptr());
        let run = |range: std::ops::Range<usize>| {
            for t in range {
                for j in 0..m {
                    // SAFETY: the CPU has AVX-512 VNNI (checked by the caller); tile `t` writes
                    // only its own columns of row `j` (see OutPtr).
                    let sums = unsafe { avx2::vnni_tile(self, t, &acts, j) };
                    let rows = (self.rows - t * TILE).min(TILE);
                    for (i, &v) in sums.iter().enumerate().take(rows) {
                        // SAFETY: as above; `out` holds `m x rows` floats.
                        unsafe { *ptr.get().add(j * self.rows + t * TILE + i) = v };
                    }
                }
            }
        };
        for_tiles(tiles, tiles * m * kb, run);
        out
    }

    /// [`Q8Matrix::matmul`] with the tile kernels (for the kernels' tests and speed bench, which call
    /// the AVX2 kernels on any CPU).
    #[cfg(test)]
    pub(crate) fn matmul_tiles_for_tests(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_tiles(x, m)
    }

    /// [`Q8Matrix::matmul`] with the tile kernels.
    fn matmul_tiles(&self, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(x.len(), m * self.cols);
        let kb = self.cols / BLOCK;
        let mut xq = vec![0i8; m * self.cols];
        let mut xd = vec![0f32; m * kb];
        for ((xb, qb), d) in x
            .chunks_exact(BLOCK)
            .zip(xq.chunks_exact_mut(BLOCK))
            .zip(xd.iter_mut())
        {
            *d = quantize_block(xb, qb);
        }
        let mut out = vec![0f32; m * self.rows];
        let tiles = self.rows.div_ceil(TILE);
        let ptr = OutPtr(out.as_mut_ptr());
        let simd = avx2();
        let run = |range: std::ops::Range<usize>| {
            for t in range {
                // SAFETY: tile `t` writes only columns t*TILE.. of each output row (see OutPtr).
                unsafe { self.tile(t, &xq, &xd, m, ptr, simd) };
            }
        };
        for_tiles(tiles, tiles * m * kb, run);
        out
    }

    /// Output columns `t*TILE..` for every activation row.
    ///
    /// # Safety
    /// `out` points to `m x rows` floats and no other thread writes these columns.
    unsafe fn tile(&self, t: usize, xq: &[i8], xd: &[f32], m: usize, out: OutPtr, simd: bool) {
        let kb = self.cols / BLOCK;
        let qs = &self.qs[t * kb * TILE * BLOCK..][..kb * TILE * BLOCK];
        let d = &self.d[t * kb * TILE..][..kb * TILE];
        let rows = (self.rows - t * TILE).min(TILE);
        let mut a = 0;
        while a < m {
            let mt = (m - a).min(2);
            let mut sums = [[0f32; TILE]; 2];
            let xq = &xq[a * self.cols..][..mt * self.cols];
            let xd = &xd[a * kb..][..mt * kb];
            #[cfg(target_arch = "x86_64")]
            if simd {
                if mt == 2 {
                    avx2::tile::<2>(qs, d, xq, xd, kb, &mut sums);
                } else {
                    avx2::tile::<1>(qs, d, xq, xd, kb, &mut sums);
                }
            } else {
                plain_tile(qs, d, xq, xd, kb, mt, &mut sums);
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = simd;
                plain_tile(qs, d, xq, xd, kb, mt, &mut sums);
            }
            for (j, s) in sums.iter().enumerate().take(mt) {
                for (i, &v) in s.iter().enumerate().take(rows) {
                    *out.get().add((a + j) * self.rows + t * TILE + i) = v;
                }
            }
            a += mt;
        }
    }
}

impl vnni::Source for Q8Matrix {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    /// The int8 values are handed over as `q + 128` (unsigned).
    fn zero(&self) -> i32 {
        128
    }

    fn fill(&self, t: usize, w: &mut vnni::WeightTile) {
        let kb = self.cols / BLOCK;
        w.reset(kb, false, false);
        let src = &self.qs[t * kb * TILE * BLOCK..][..kb * TILE * BLOCK];
        for (o, &v) in w.qs.iter_mut().zip(src) {
            *o = (v as u8) ^ 0x80;
        }
        w.d.copy_from_slice(&self.d[t * kb * TILE..][..kb * TILE]);
    }
}

fn plain_tile(
    qs: &[i8],
    d: &[f32],
    xq: &[i8],
    xd: &[f32],
    kb: usize,
    mt: usize,
    sums: &mut [[f32; TILE]; 2],
) {
    for (j, s) in sums.iter_mut().enumerate().take(mt) {
        for b in 0..kb {
            let x = &xq[(j * kb + b) * BLOCK..][..BLOCK];
            for (i, s) in s.iter_mut().enumerate() {
                let w = &qs[(b * TILE + i) * BLOCK..][..BLOCK];
                let dot: i32 = w.iter().zip(x).map(|(&a, &b)| a as i32 * b as i32).sum();
                *s += dot as f32 * d[b * TILE + i] * xd[j * kb + b];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::hsum;
    use super::{BLOCK, TILE};
    use std::arch::x86_64::*;

    /// Tile `t` against activation row `j` with AVX-512 VNNI: per block, each row's 32 values
    /// made unsigned (`q + 128`), its exact dot product, then `vnni::few::step` (zero point 128):
    /// [`super::vnni::matmul`]'s numbers.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and AVX-512 F, BW, VL and VNNI.
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn vnni_tile(
        q: &super::Q8Matrix,
        t: usize,
        x: &super::vnni::RowActs,
        j: usize,
    ) -> [f32; TILE] {
        use super::vnni::few::{row_sums, step};
        let kb = q.cols / BLOCK;
        let qs = &q.qs[t * kb * TILE * BLOCK..][..kb * TILE * BLOCK];
        let d = &q.d[t * kb * TILE..][..kb * TILE];
        assert!(x.q.len() >= (j + 1) * kb * BLOCK && x.d.len() >= (j + 1) * kb);
        assert!(x.s.len() >= (j + 1) * kb && x.z.len() >= (j + 1) * kb);
        let xp = x.q.as_ptr().add(j * kb * BLOCK);
        let (xd, xs, xz) = (&x.d[j * kb..], &x.s[j * kb..], &x.z[j * kb..]);
        let zero = _mm256_setzero_si256();
        let flip = _mm256_set1_epi8(-128);
        let mut acc = _mm_setzero_ps();
        for b in 0..kb {
            let xv = _mm256_loadu_si256(xp.add(b * BLOCK) as *const __m256i);
            let mut s = [zero; TILE];
            for i in 0..TILE {
                let w =
                    _mm256_loadu_si256(qs.as_ptr().add((b * TILE + i) * BLOCK) as *const __m256i);
                s[i] = _mm256_dpbusd_epi32(zero, _mm256_xor_si256(w, flip), xv);
            }
            let (lo, hi) = row_sums(&s);
            let d4 = _mm_loadu_ps(d.as_ptr().add(b * TILE));
            acc = step(
                acc,
                _mm_add_epi32(lo, hi),
                d4,
                _mm_setzero_ps(),
                xd[b],
                xs[b],
                xz[b],
                false,
            );
        }
        let mut o = [0f32; TILE];
        _mm_storeu_ps(o.as_mut_ptr(), acc);
        o
    }

    /// The exact dot product of two blocks of 32 int8 (`|q| <= 127`).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block_dot(w: &[i8], x: &[i8]) -> i32 {
        assert!(w.len() >= BLOCK && x.len() >= BLOCK);
        let w = _mm256_loadu_si256(w.as_ptr() as *const __m256i);
        let x = _mm256_loadu_si256(x.as_ptr() as *const __m256i);
        let p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x));
        let p = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
        let s = _mm_add_epi32(_mm256_extracti128_si256(p, 1), _mm256_castsi256_si128(p));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
        _mm_cvtsi128_si32(s)
    }

    /// `M` activation rows (1 or 2) against one tile of [`TILE`] weight rows.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn tile<const M: usize>(
        qs: &[i8],
        d: &[f32],
        xq: &[i8],
        xd: &[f32],
        kb: usize,
        sums: &mut [[f32; TILE]; 2],
    ) {
        assert!(qs.len() >= kb * TILE * BLOCK && d.len() >= kb * TILE);
        assert!(xq.len() >= M * kb * BLOCK && xd.len() >= M * kb);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_ps(); TILE]; M];
        let wp = qs.as_ptr();
        let xp = xq.as_ptr();
        for b in 0..kb {
            let mut ax = [_mm256_setzero_si256(); M];
            let mut sx = [_mm256_setzero_si256(); M];
            let mut dx = [0f32; M];
            for j in 0..M {
                let x = _mm256_loadu_si256(xp.add((j * kb + b) * BLOCK) as *const __m256i);
                ax[j] = _mm256_sign_epi8(x, x);
                sx[j] = x;
                dx[j] = *xd.get_unchecked(j * kb + b);
            }
            for i in 0..TILE {
                let w = _mm256_loadu_si256(wp.add((b * TILE + i) * BLOCK) as *const __m256i);
                let dw = *d.get_unchecked(b * TILE + i);
                for j in 0..M {
                    // |x| * (w with x's sign): u8 x i8 pairs, exact in i16 since |q| <= 127.
                    let p = _mm256_maddubs_epi16(ax[j], _mm256_sign_epi8(w, sx[j]));
                    let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                    acc[j][i] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw * dx[j]), acc[j][i]);
                }
            }
        }
        for j in 0..M {
            for i in 0..TILE {
                sums[j][i] = hsum(acc[j][i]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_matches_a_plain_product() {
        let (rows, cols) = (37, 96);
        let val = |i: usize| ((i * 7919 % 2001) as f32 / 1000.0) - 1.0;
        let w: Vec<f32> = (0..rows * cols).map(val).collect();
        let q = Q8Matrix::quantize(&w, rows, cols);
        let mut row = vec![0f32; cols];
        q.dequantize_row(5, &mut row);
        for (a, b) in row.iter().zip(&w[5 * cols..6 * cols]) {
            assert!((a - b).abs() < 0.01, "{a} {b}");
        }
        for m in [1, 2, 3, 5, 12] {
            let x: Vec<f32> = (0..m * cols).map(|i| val(i * 13 + 7)).collect();
            let y = q.matmul(&x, m);
            // With AVX-512 VNNI (from vnni::MIN_ROWS rows) the sums are the tile kernels' up to
            // the order of the additions.
            for (a, b) in y.iter().zip(&q.matmul_tiles(&x, m)) {
                assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "m {m}: {a} {b}");
            }
            for r in 0..m {
                for c in 0..rows {
                    let exact: f32 = (0..cols).map(|k| x[r * cols + k] * w[c * cols + k]).sum();
                    let got = y[r * rows + c];
                    assert!(
                        (exact - got).abs() < 0.15,
                        "row {r} col {c}: {exact} vs {got}"
                    );
                }
            }
            // The SIMD kernel against the plain one on the same quantized values.
            let kb = cols / BLOCK;
            let mut xq = vec![0i8; 2 * cols];
            let mut xd = vec![0f32; 2 * kb];
            for ((xb, qb), d) in x
                .chunks_exact(BLOCK)
                .zip(xq.chunks_exact_mut(BLOCK))
                .zip(xd.iter_mut())
            {
                *d = quantize_block(xb, qb);
            }
            let mt = m.min(2);
            let mut plain = [[0f32; TILE]; 2];
            plain_tile(&q.qs, &q.d, &xq, &xd, kb, mt, &mut plain);
            #[cfg(target_arch = "x86_64")]
            if avx2() {
                let mut fast = [[0f32; TILE]; 2];
                // SAFETY: the CPU has AVX2 and FMA.
                unsafe {
                    if mt == 2 {
                        avx2::tile::<2>(&q.qs, &q.d, &xq, &xd, kb, &mut fast);
                    } else {
                        avx2::tile::<1>(&q.qs, &q.d, &xq, &xd, kb, &mut fast);
                    }
                }
                for (a, b) in plain.iter().flatten().zip(fast.iter().flatten()) {
                    assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{a} {b}");
                }
            }
        }
    }
}
