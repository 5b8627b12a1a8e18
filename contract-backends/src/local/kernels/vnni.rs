//! The matmul of many activation rows (prefill, batches) with AVX-512 VNNI, for [`super::q4`]'s
//! and [`super::q8`]'s matrices, which keep the layouts their decoding kernels read.
//!
//! The activations are transposed once per call into panels of [`LANES`] rows, `[block][group
//! of four values][row][4 bytes]`, so that one `vpdpbusd` multiplies four values of one weight
//! row, broadcast, by the same four values of sixteen activation rows and adds them to sixteen
//! 32-bit sums: no horizontal sum, and per block a conversion and one or two multiply-adds for
//! sixteen outputs. Transposing the activations, not the weights (Candle 0.11's `repack_x86`
//! repacks the weights), keeps the per-call work on the weights what the AVX2 path already did
//! (each tile unpacked to a byte a value once a call): a first version that repacked the
//! weights per call spent 1.2 ms a call on Qwen2.5-0.5B's gate/up matrix, four times the AVX2
//! kernel's whole call at three rows.
//!
//! Values are `d (q - zero) + m` with `q` unsigned: `zero` 8 for Q4_0, 16 for Q5_0, 128 for
//! int8 (stored `q + 128`), 0 for the formats with an offset `m` (Q4_1, Q4_K). Per block and
//! activation row, `sum_i (d (q_i - z) + m) dx qx_i = d dx (S - z X) + m dx X` with `S = sum
//! q_i qx_i` (exact in i32) and `X = sum qx_i`: the zero point is taken off in integers, exactly.
//!
//! Measured in `docs/benchmarks.md` ("Prefill with AVX-512 VNNI").

use super::{OutPtr, BLOCK, TILE};

/// Activation rows in one vector of 32-bit sums.
pub(crate) const LANES: usize = 16;
/// Activation panels per pass over a weight tile (16 of the 32 vector registers hold sums;
/// three panels, 24 registers, measured slower: 12.2-14.0 against 10.1-10.3 ms a call at 256
/// rows, Q4_0 and Q5_0 on a 9728 x 896 matrix).
const PASS: usize = 2;
/// Activation rows from which [`super::q4::Q4Matrix::matmul`] and [`super::q8::Q8Matrix::matmul`]
/// take this kernel rather than their few-row one: the panel kernel was the faster at 6 rows
/// and above for every format, the few-row one at 5 and below (`docs/benchmarks.md`, "Prefill
/// with AVX-512 VNNI"). The two give the same numbers, so this changes speed only.
pub(crate) const MIN_ROWS: usize = 6;

/// Whether the CPU has the AVX-512 foundation, byte/word, vector-length and VNNI instructions
/// this kernel and the few-row kernels (256-bit `vpdpbusd`, which needs VL) use, and AVX2, FMA
/// and F16C (the tiles are unpacked with AVX2).
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::avx2_fma_f16c()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One tile of [`TILE`] weight rows as the kernel reads them, filled by a [`Source`].
#[derive(Default)]
pub(crate) struct WeightTile {
    /// The values a byte each, unsigned: `[block][row][32]` in order, or, when `paired`, the
    /// blocks two by two as `q4`'s unpacked tiles hold them (`[pair][row][64]`: elements 0..16
    /// of both blocks, then 16..32 of both; an odd last block alone, in order).
    pub(crate) qs: Vec<u8>,
    pub(crate) paired: bool,
    /// `[block][row]`: the scale `d`.
    pub(crate) d: Vec<f32>,
    /// `[block][row]`: the offset `m`; empty when the format has none.
    pub(crate) m: Vec<f32>,
}

impl WeightTile {
    /// Makes room for `kb` blocks.
    pub(crate) fn reset(&mut self, kb: usize, paired: bool, offsets: bool) {
        self.qs.resize(kb * TILE * BLOCK, 0);
        self.paired = paired;
        self.d.resize(kb * TILE, 0.0);
        self.m.clear();
        if offsets {
            self.m.resize(kb * TILE, 0.0);
        }
    }
}

/// A matrix the kernel reads tile by tile.
pub(crate) trait Source: Sync {
    /// Rows (outputs).
    fn rows(&self) -> usize;
    /// Columns (a multiple of [`BLOCK`]).
    fn cols(&self) -> usize;
    /// What is subtracted from every value `q` (see the module doc).
    fn zero(&self) -> i32;
    /// Tile `t` (rows `TILE t..`; rows past the end zeros) into `w`.
    fn fill(&self, t: usize, w: &mut WeightTile);
}

/// One activation block quantized: its quants in `q`; returns the scale `d`, `d` times the sum
/// of the quants (as the offsets term takes it) and the sum. Both kernels take these numbers
/// from here, so that they compute each output with the same operations.
#[inline]
fn block_terms(xb: &[f32], q: &mut [i8]) -> (f32, f32, i32) {
    let d = super::quantize_block(xb, q);
    let sum: i32 = q.iter().map(|&v| v as i32).sum();
    (d, d * sum as f32, sum)
}

/// Activation rows quantized per block, row by row, for the kernels of few rows
/// (`q4`'s and `q8`'s `vnni_few`): quants `[row][cols]`, and per row and block the scale,
/// the scale times the sum of the quants, and the zero point times that sum.
pub(crate) struct RowActs {
    pub(crate) q: Vec<i8>,
    pub(crate) d: Vec<f32>,
    pub(crate) s: Vec<f32>,
    pub(crate) z: Vec<i32>,
}

impl RowActs {
    pub(crate) fn new(x: &[f32], zero: i32) -> RowActs {
        let blocks = x.len() / BLOCK;
        let mut a = RowActs {
            q: vec![0i8; blocks * BLOCK],
            d: vec![0f32; blocks],
            s: vec![0f32; blocks],
            z: vec![0i32; blocks],
        };
        for (k, (xb, q)) in x
            .chunks_exact(BLOCK)
            .zip(a.q.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let (d, s, sum) = block_terms(xb, q);
            (a.d[k], a.s[k], a.z[k]) = (d, s, zero * sum);
        }
        a
    }
}

/// The activation rows quantized per block and transposed into panels of [`LANES`] rows (rows
/// past `m` zeros).
struct Acts {
    kb: usize,
    /// `[panel][block][group of four (8)][row][4]`.
    q: Vec<i8>,
    /// `[panel][block][row]`: the scale.
    d: Vec<f32>,
    /// `[panel][block][row]`: the scale times the sum of the quants.
    s: Vec<f32>,
    /// `[panel][block][row]`: the zero point times the sum of the quants.
    z: Vec<i32>,
}

impl Acts {
    fn new(x: &[f32], m: usize, cols: usize, zero: i32) -> Acts {
        let kb = cols / BLOCK;
        let panels = m.div_ceil(LANES);
        let mut a = Acts {
            kb,
            q: vec![0i8; panels * kb * LANES * BLOCK],
            d: vec![0f32; panels * kb * LANES],
            s: vec![0f32; panels * kb * LANES],
            z: vec![0i32; panels * kb * LANES],
        };
        let mut q = [0i8; BLOCK];
        for (r, row) in x.chunks_exact(cols).enumerate().take(m) {
            let (p, lane) = (r / LANES, r % LANES);
            for (b, xb) in row.chunks_exact(BLOCK).enumerate() {
                let (d, s, sum) = block_terms(xb, &mut q);
                let at = (p * kb + b) * LANES + lane;
                a.d[at] = d;
                a.s[at] = s;
                a.z[at] = zero * sum;
                for (g, four) in q.chunks_exact(4).enumerate() {
                    let o = (((p * kb + b) * 8 + g) * LANES + lane) * 4;
                    a.q[o..o + 4].copy_from_slice(four);
                }
            }
        }
        a
    }
}

/// `x` (`m x cols`) times the transpose of `w`: `m x rows`. `None` when the CPU lacks
/// AVX-512 VNNI ([`available`]).
pub(crate) fn matmul<S: Source>(w: &S, x: &[f32], m: usize) -> Option<Vec<f32>> {
    if !available() {
        return None;
    }
    let (rows, cols) = (w.rows(), w.cols());
    assert!(cols % BLOCK == 0 && x.len() == m * cols);
    let acts = Acts::new(x, m, cols, w.zero());
    let mut out = vec![0f32; m * rows];
    let tiles = rows.div_ceil(TILE);
    let ptr = OutPtr(out.as_mut_ptr());
    let run = |range: std::ops::Range<usize>| {
        WEIGHTS.with(|buf| {
            let mut tile = buf.borrow_mut();
            for t in range {
                w.fill(t, &mut tile);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the CPU has the features (checked above); tile `t` writes only its
                // own columns of `out` (see OutPtr), which holds `m x rows` floats.
                unsafe {
                    x86::tile_rows(&tile, &acts, m, rows, t, ptr)
                };
            }
        })
    };
    super::for_tiles(tiles, tiles * m * acts.kb, run);
    Some(out)
}

thread_local! {
    /// Each worker's weight tile.
    static WEIGHTS: std::cell::RefCell<WeightTile> = std::cell::RefCell::new(WeightTile::default());
}

/// What the kernels of few rows share with [`matmul`]'s, so that each output comes out of the
/// same operations in the same order: per block, `acc = fma(float(S - zX), d dx, acc)`, then
/// with offsets `acc = fma(dx X, m, acc)`.
#[cfg(target_arch = "x86_64")]
pub(crate) mod few {
    use std::arch::x86_64::*;

    /// The four rows' 32-bit sums of one block in each 128-bit half of `s[i]` (row `i`), as
    /// one sum a row: `[block of the low halves; 4]`, `[block of the high halves; 4]`.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    pub(crate) unsafe fn row_sums(s: &[__m256i; 4]) -> (__m128i, __m128i) {
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        (_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
    }

    /// One block's step for four rows (one lane each): `sums` the exact integer dot products,
    /// `d` and `m` the rows' scales and offsets, `dx`, `xs`, `xz` the activation block's scale,
    /// scale times sum, and zero point times sum.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn step(
        acc: __m128,
        sums: __m128i,
        d: __m128,
        m: __m128,
        dx: f32,
        xs: f32,
        xz: i32,
        offsets: bool,
    ) -> __m128 {
        let exact = _mm_cvtepi32_ps(_mm_sub_epi32(sums, _mm_set1_epi32(xz)));
        let acc = _mm_fmadd_ps(exact, _mm_mul_ps(d, _mm_set1_ps(dx)), acc);
        match offsets {
            true => _mm_fmadd_ps(_mm_set1_ps(xs), m, acc),
            false => acc,
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Acts, WeightTile, BLOCK, LANES, PASS, TILE};
    use crate::local::kernels::OutPtr;
    use std::arch::x86_64::*;

    /// Every activation panel against weight tile `t`, [`PASS`] panels at a time.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; `out` holds `m x rows` floats and no other thread
    /// writes the columns of tile `t`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile_rows(
        w: &WeightTile,
        x: &Acts,
        m: usize,
        rows: usize,
        t: usize,
        out: OutPtr,
    ) {
        let panels = m.div_ceil(LANES);
        let valid_rows = (rows - t * TILE).min(TILE);
        let mut p = 0;
        while p < panels {
            let mut sums = [[[0f32; LANES]; TILE]; PASS];
            let n = (panels - p).min(PASS);
            match n {
                2 => panel_sums::<2>(w, x, p, &mut sums),
                _ => panel_sums::<1>(w, x, p, &mut sums),
            }
            for (k, s) in sums.iter().enumerate().take(n) {
                for lane in 0..LANES {
                    let r = (p + k) * LANES + lane;
                    if r >= m {
                        break;
                    }
                    for (i, row) in s.iter().enumerate().take(valid_rows) {
                        *out.get().add(r * rows + t * TILE + i) = row[lane];
                    }
                }
            }
            p += n;
        }
    }

    /// Panels `p..p + A` against the tile, into `sums[panel][weight row][lane]`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    #[allow(clippy::needless_range_loop)]
    unsafe fn panel_sums<const A: usize>(
        w: &WeightTile,
        x: &Acts,
        p: usize,
        sums: &mut [[[f32; LANES]; TILE]; PASS],
    ) {
        let kb = x.kb;
        assert!(w.qs.len() >= kb * TILE * BLOCK && w.d.len() >= kb * TILE);
        assert!(w.m.is_empty() || w.m.len() >= kb * TILE);
        assert!(x.q.len() >= (p + A) * kb * LANES * BLOCK);
        assert!(x.d.len() >= (p + A) * kb * LANES && x.s.len() >= (p + A) * kb * LANES);
        assert!(x.z.len() >= (p + A) * kb * LANES);
        let offsets = !w.m.is_empty();
        let mut acc = [[_mm512_setzero_ps(); A]; TILE];
        let wq = w.qs.as_ptr();
        for b in 0..kb {
            // Where row i's values of block b start, and whether its second 16 sit 16 bytes
            // further on (a pair's layout; see `WeightTile::qs`).
            let wide = w.paired && (b | 1) < kb;
            let base = match wide {
                true => (b & !1) * TILE * BLOCK + (b & 1) * 16,
                false => b * TILE * BLOCK,
            };
            let stride = if wide { 2 * BLOCK } else { BLOCK };
            let mut isum = [[_mm512_setzero_si512(); A]; TILE];
            for g in 0..8 {
                let off = base + 4 * g + if wide && g >= 4 { 16 } else { 0 };
                let mut xv = [_mm512_setzero_si512(); A];
                for k in 0..A {
                    let at = (((p + k) * kb + b) * 8 + g) * LANES * 4;
                    xv[k] = _mm512_loadu_si512(x.q.as_ptr().add(at) as *const _);
                }
                for i in 0..TILE {
                    let four = (wq.add(off + i * stride) as *const i32).read_unaligned();
                    let wv = _mm512_set1_epi32(four);
                    for k in 0..A {
                        isum[i][k] = _mm512_dpbusd_epi32(isum[i][k], wv, xv[k]);
                    }
                }
            }
            for k in 0..A {
                let at = ((p + k) * kb + b) * LANES;
                let dx = _mm512_loadu_ps(x.d.as_ptr().add(at));
                let zx = _mm512_loadu_si512(x.z.as_ptr().add(at) as *const _);
                let sx = _mm512_loadu_ps(x.s.as_ptr().add(at));
                for i in 0..TILE {
                    let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[i][k], zx));
                    let d = _mm512_set1_ps(*w.d.get_unchecked(b * TILE + i));
                    acc[i][k] = _mm512_fmadd_ps(exact, _mm512_mul_ps(dx, d), acc[i][k]);
                    if offsets {
                        let mv = _mm512_set1_ps(*w.m.get_unchecked(b * TILE + i));
                        acc[i][k] = _mm512_fmadd_ps(sx, mv, acc[i][k]);
                    }
                }
            }
        }
        for k in 0..A {
            for i in 0..TILE {
                _mm512_storeu_ps(sums[k][i].as_mut_ptr(), acc[i][k]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix given by its values, to check the kernel against a plain product.
    struct Plain {
        rows: usize,
        cols: usize,
        /// Unsigned values, `rows x cols`.
        q: Vec<u8>,
        d: Vec<f32>,
        m: Vec<f32>,
        zero: i32,
        /// Whether tiles are handed over in the paired layout.
        paired: bool,
    }

    impl Plain {
        fn value(&self, r: usize, k: usize) -> f32 {
            let at = r * (self.cols / BLOCK) + k / BLOCK;
            let m = self.m.get(at).copied().unwrap_or(0.0);
            self.d[at] * (self.q[r * self.cols + k] as i32 - self.zero) as f32 + m
        }
    }

    impl Source for Plain {
        fn rows(&self) -> usize {
            self.rows
        }
        fn cols(&self) -> usize {
            self.cols
        }
        fn zero(&self) -> i32 {
            self.zero
        }
        fn fill(&self, t: usize, w: &mut WeightTile) {
            let kb = self.cols / BLOCK;
            w.reset(kb, self.paired, !self.m.is_empty());
            w.qs.fill(0);
            w.d.fill(0.0);
            for i in 0..TILE {
                let row = t * TILE + i;
                if row >= self.rows {
                    break;
                }
                for b in 0..kb {
                    w.d[b * TILE + i] = self.d[row * kb + b];
                    if !self.m.is_empty() {
                        w.m[b * TILE + i] = self.m[row * kb + b];
                    }
                    for k in 0..BLOCK {
                        let at = match self.paired && (b | 1) < kb {
                            true => {
                                let half = if k < 16 { k } else { 16 + k };
                                (b & !1) * TILE * BLOCK + i * 2 * BLOCK + (b & 1) * 16 + half
                            }
                            false => (b * TILE + i) * BLOCK + k,
                        };
                        w.qs[at] = self.q[row * self.cols + b * BLOCK + k];
                    }
                }
            }
        }
    }

    /// Row counts of one and several panels, two at a time and one alone, with and without
    /// offsets and zero points, both layouts and an odd last block, against the plain product
    /// of the dequantised values and the activations as the kernel quantizes them.
    #[test]
    fn the_kernel_is_the_plain_product() {
        if !available() {
            eprintln!("no AVX-512 VNNI on this CPU: the kernel is not used here");
            assert!(matmul(&plain(3, 64, 0, false, false), &[0.0; 64], 1).is_none());
            return;
        }
        for (rows, cols, zero, offsets, paired) in [
            (16, 32, 0, true, false),
            (37, 96, 8, false, true),
            (21, 64, 128, false, false),
            (50, 160, 16, true, true),
            (9, 128, 0, true, true),
        ] {
            let w = plain(rows, cols, zero, offsets, paired);
            for m in [1usize, 3, 16, 17, 40, 50] {
                let x: Vec<f32> = (0..m * cols)
                    .map(|i| ((i * 7919 % 2001) as f32 / 1000.0) - 1.0)
                    .collect();
                let y = matmul(&w, &x, m).expect("available");
                assert_eq!(y.len(), m * rows);
                let mut xdq = x.clone();
                for xb in xdq.chunks_exact_mut(BLOCK) {
                    let mut q = [0i8; BLOCK];
                    let d = crate::local::kernels::quantize_block(xb, &mut q);
                    for (v, &q) in xb.iter_mut().zip(&q) {
                        *v = q as f32 * d;
                    }
                }
                for r in 0..m {
                    for c in 0..rows {
                        let exact: f32 = (0..cols).map(|k| xdq[r * cols + k] * w.value(c, k)).sum();
                        let got = y[r * rows + c];
                        assert!(
                            (exact - got).abs() <= 1e-4 * exact.abs().max(1.0),
                            "{rows}x{cols} zero {zero} m {m}, row {r} col {c}: {exact} vs {got}"
                        );
                    }
                }
            }
        }
    }

    fn plain(rows: usize, cols: usize, zero: i32, offsets: bool, paired: bool) -> Plain {
        let kb = cols / BLOCK;
        let top = if zero == 128 {
            256
        } else {
            2 * zero.max(16) as usize
        };
        Plain {
            rows,
            cols,
            q: (0..rows * cols)
                .map(|i| ((i * 104_729 + 17) % top) as u8)
                .collect(),
            d: (0..rows * kb)
                .map(|i| 0.001 + (i % 7) as f32 * 0.002)
                .collect(),
            m: match offsets {
                true => (0..rows * kb).map(|i| -0.01 * (i % 5) as f32).collect(),
                false => Vec::new(),
            },
            zero,
            paired,
        }
    }
}
