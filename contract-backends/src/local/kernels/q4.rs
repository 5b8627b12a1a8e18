//! A 4-bit matrix kept as the file stores it (Q4_0 and Q4_1: 32 values per block, an f16 scale
//! `d` and offset `m`, value `d * q + m` with `q` in 0..=15; Q4_0 is `m = -8 d`) and its AVX2
//! matmul against int8 activations.
//!
//! On a CPU whose decoding speed is set by memory bandwidth, reading 0.625 bytes per weight
//! instead of Q8_0's 1.06 is most of the gain, and the numbers are exactly the file's: no
//! re-quantisation. Candle 0.11 has no SIMD kernel for these formats on x86.
//!
//! Layout as in [`super::q8`]: tiles of [`TILE`] rows, `[tile][block][row in tile][16 bytes]`,
//! the scales and offsets `[tile][block][row in tile]` as f16 bits. Per block,
//! `sum_i (d q_i + m) x_i = d dx sum_i q_i qx_i + m dx sum_i qx_i`: the first term with
//! `maddubs` (unsigned nibbles times signed int8, exact), the second from the activation block's
//! sum.

use super::team::Team;
use super::{avx2_fma_f16c as avx2, f16_to_f32, quantize_block, OutPtr, BLOCK, TILE};

/// A 4-bit matrix of `rows x cols` (`cols` a multiple of [`BLOCK`]).
pub(crate) struct Q4Matrix {
    rows: usize,
    cols: usize,
    /// `[tile][block][row in tile][16]`: element `j` in the low nibble of byte `j`, element
    /// `j + 16` in its high nibble.
    qs: Vec<u8>,
    /// f16 bits, `[tile][block][row in tile]`.
    d: Vec<u16>,
    m: Vec<u16>,
}

/// The stored formats [`Q4Matrix`] takes as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Q4Format {
    /// `d` (f16), 16 bytes of nibbles; value `d (q - 8)`.
    Q4_0,
    /// `d`, `m` (f16), 16 bytes of nibbles; value `d q + m`.
    Q4_1,
}

impl Q4Format {
    fn block_bytes(self) -> usize {
        match self {
            Q4Format::Q4_0 => 18,
            Q4Format::Q4_1 => 20,
        }
    }
}

/// f32 to f16 bits, rounding to nearest (used for `-8 d` of Q4_0, exact unless it overflows).
fn f32_to_f16(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let man = bits & 0x7f_ffff;
    if v.is_nan() {
        return sign | 0x7e00;
    }
    if exp >= 31 {
        return sign | 0x7c00;
    }
    if exp <= 0 {
        // Subnormal or zero: value / 2^-24, rounded.
        let sub = (v.abs() * 16_777_216.0).round() as u16;
        return sign | sub.min(0x3ff);
    }
    let mut h = ((exp as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}

impl Q4Matrix {
    /// Stacks `parts` (raw blocks of `(rows_i, pad_to_i)` rows each, `cols` columns, all in
    /// `format`) on rows, each part padded with zero rows to `pad_to_i`, then zero rows up to
    /// `rows`.
    pub(crate) fn from_blocks(
        format: Q4Format,
        parts: &[(&[u8], usize, usize)],
        rows: usize,
        cols: usize,
    ) -> Option<Q4Matrix> {
        if cols % BLOCK != 0 {
            return None;
        }
        let kb = cols / BLOCK;
        let bb = format.block_bytes();
        let tiles = rows.div_ceil(TILE);
        let mut qs = vec![0u8; tiles * kb * TILE * 16];
        let mut d = vec![0u16; tiles * kb * TILE];
        let mut m = vec![0u16; tiles * kb * TILE];
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
                    let dh = u16::from_le_bytes([blk[0], blk[1]]);
                    d[at] = dh;
                    let (mh, q) = match format {
                        Q4Format::Q4_0 => (f32_to_f16(-8.0 * f16_to_f32(dh)), &blk[2..18]),
                        Q4Format::Q4_1 => (u16::from_le_bytes([blk[2], blk[3]]), &blk[4..20]),
                    };
                    m[at] = mh;
                    qs[at * 16..][..16].copy_from_slice(q);
                }
            }
            r0 += n.max(pad_to);
        }
        if r0 > rows {
            return None;
        }
        Some(Q4Matrix {
            rows,
            cols,
            qs,
            d,
            m,
        })
    }

    /// Rows (outputs).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.qs.len() + 2 * (self.d.len() + self.m.len())
    }

    /// Row `r` dequantised into `out` (`cols` long).
    pub(crate) fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let kb = self.cols / BLOCK;
        let (t, i) = (r / TILE, r % TILE);
        for (b, o) in out.chunks_exact_mut(BLOCK).enumerate().take(kb) {
            let at = (t * kb + b) * TILE + i;
            let (d, m) = (f16_to_f32(self.d[at]), f16_to_f32(self.m[at]));
            let q = &self.qs[at * 16..][..16];
            for j in 0..16 {
                o[j] = d * (q[j] & 0xf) as f32 + m;
                o[j + 16] = d * (q[j] >> 4) as f32 + m;
            }
        }
    }

    /// `x` (`m x cols`) times the transpose: `m x rows`.
    pub(crate) fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_with(x, m, avx2())
    }

    fn matmul_with(&self, x: &[f32], m: usize, simd: bool) -> Vec<f32> {
        assert_eq!(x.len(), m * self.cols);
        let kb = self.cols / BLOCK;
        let mut xq = vec![0i8; m * self.cols];
        let mut xd = vec![0f32; m * kb];
        let mut xs = vec![0f32; m * kb];
        for (((xb, qb), d), s) in x
            .chunks_exact(BLOCK)
            .zip(xq.chunks_exact_mut(BLOCK))
            .zip(xd.iter_mut())
            .zip(xs.iter_mut())
        {
            *d = quantize_block(xb, qb);
            *s = *d * qb.iter().map(|&q| q as i32).sum::<i32>() as f32;
        }
        let mut out = vec![0f32; m * self.rows];
        let tiles = self.rows.div_ceil(TILE);
        let ptr = OutPtr(out.as_mut_ptr());
        let run = |range: std::ops::Range<usize>| {
            for t in range {
                // SAFETY: tile `t` writes only columns t*TILE.. of each output row (see OutPtr).
                unsafe { self.tile(t, &xq, &xd, &xs, m, ptr, simd) };
            }
        };
        let team = Team::global();
        if tiles * m * kb < 2048 || team.size() == 1 {
            run(0..tiles);
        } else {
            team.for_each(tiles, tiles.div_ceil(4 * team.size()), run);
        }
        out
    }

    /// Output columns `t*TILE..` for every activation row.
    ///
    /// # Safety
    /// `out` points to `m x rows` floats and no other thread writes these columns.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(
        &self,
        t: usize,
        xq: &[i8],
        xd: &[f32],
        xs: &[f32],
        m: usize,
        out: OutPtr,
        simd: bool,
    ) {
        let kb = self.cols / BLOCK;
        let w = Tile {
            qs: &self.qs[t * kb * TILE * 16..][..kb * TILE * 16],
            d: &self.d[t * kb * TILE..][..kb * TILE],
            m: &self.m[t * kb * TILE..][..kb * TILE],
            kb,
        };
        let rows = (self.rows - t * TILE).min(TILE);
        let mut a = 0;
        while a < m {
            let mt = (m - a).min(2);
            let mut sums = [[0f32; TILE]; 2];
            let x = Acts {
                q: &xq[a * self.cols..][..mt * self.cols],
                d: &xd[a * kb..][..mt * kb],
                s: &xs[a * kb..][..mt * kb],
            };
            #[cfg(target_arch = "x86_64")]
            if simd {
                if mt == 2 {
                    avx2::tile::<2>(&w, &x, &mut sums);
                } else {
                    avx2::tile::<1>(&w, &x, &mut sums);
                }
            } else {
                plain_tile(&w, &x, mt, &mut sums);
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = simd;
                plain_tile(&w, &x, mt, &mut sums);
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

/// One tile of weights.
struct Tile<'a> {
    qs: &'a [u8],
    d: &'a [u16],
    m: &'a [u16],
    kb: usize,
}

/// Quantized activation rows: quants, scales, and scale times the block's sum of quants.
struct Acts<'a> {
    q: &'a [i8],
    d: &'a [f32],
    s: &'a [f32],
}

fn plain_tile(w: &Tile<'_>, x: &Acts<'_>, mt: usize, sums: &mut [[f32; TILE]; 2]) {
    let kb = w.kb;
    for (j, s) in sums.iter_mut().enumerate().take(mt) {
        for b in 0..kb {
            let xb = &x.q[(j * kb + b) * BLOCK..][..BLOCK];
            for (i, s) in s.iter_mut().enumerate() {
                let at = b * TILE + i;
                let q = &w.qs[at * 16..][..16];
                let mut dot = 0i32;
                for k in 0..16 {
                    dot += (q[k] & 0xf) as i32 * xb[k] as i32;
                    dot += (q[k] >> 4) as i32 * xb[k + 16] as i32;
                }
                *s += f16_to_f32(w.d[at]) * x.d[j * kb + b] * dot as f32
                    + f16_to_f32(w.m[at]) * x.s[j * kb + b];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::hsum;
    use super::{Acts, Tile, BLOCK, TILE};
    use std::arch::x86_64::*;

    /// `M` activation rows (1 or 2) against one tile of [`TILE`] weight rows.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn tile<const M: usize>(
        w: &Tile<'_>,
        x: &Acts<'_>,
        sums: &mut [[f32; TILE]; 2],
    ) {
        let kb = w.kb;
        assert!(w.qs.len() >= kb * TILE * 16 && w.d.len() >= kb * TILE && w.m.len() >= kb * TILE);
        assert!(x.q.len() >= M * kb * BLOCK && x.d.len() >= M * kb && x.s.len() >= M * kb);
        let ones = _mm256_set1_epi16(1);
        let low = _mm256_set1_epi8(0x0f);
        let mut acc = [[_mm256_setzero_ps(); TILE]; M];
        let mut offs = [_mm_setzero_ps(); M];
        let wp = w.qs.as_ptr();
        let xp = x.q.as_ptr();
        for b in 0..kb {
            let mut xv = [_mm256_setzero_si256(); M];
            let mut dx = [0f32; M];
            for j in 0..M {
                xv[j] = _mm256_loadu_si256(xp.add((j * kb + b) * BLOCK) as *const __m256i);
                dx[j] = *x.d.get_unchecked(j * kb + b);
            }
            // The tile's four scales and offsets, f16 to f32.
            let d4 = _mm_cvtph_ps(_mm_loadl_epi64(w.d.as_ptr().add(b * TILE) as *const __m128i));
            let m4 = _mm_cvtph_ps(_mm_loadl_epi64(w.m.as_ptr().add(b * TILE) as *const __m128i));
            let mut dw = [0f32; TILE];
            _mm_storeu_ps(dw.as_mut_ptr(), d4);
            for j in 0..M {
                offs[j] = _mm_fmadd_ps(m4, _mm_set1_ps(*x.s.get_unchecked(j * kb + b)), offs[j]);
            }
            for i in 0..TILE {
                let packed = _mm_loadu_si128(wp.add((b * TILE + i) * 16) as *const __m128i);
                // Low nibbles (elements 0..16) in the low lane, high nibbles (16..32) above.
                let q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), low);
                for j in 0..M {
                    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv[j]), ones);
                    acc[j][i] = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(p),
                        _mm256_set1_ps(dw[i] * dx[j]),
                        acc[j][i],
                    );
                }
            }
        }
        for j in 0..M {
            let mut o = [0f32; TILE];
            _mm_storeu_ps(o.as_mut_ptr(), offs[j]);
            for i in 0..TILE {
                sums[j][i] = hsum(acc[j][i]) + o[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_bits(v: f32) -> [u8; 2] {
        f32_to_f16(v).to_le_bytes()
    }

    #[test]
    fn f16_round_trips() {
        for v in [0.0f32, 1.0, -2.5, 0.000_123, 65504.0, -0.333_251_95, 6.0e-8] {
            let back = f16_to_f32(f32_to_f16(v));
            assert!((back - v).abs() <= v.abs() * 1e-3 + 6e-8, "{v} -> {back}");
        }
    }

    #[test]
    fn matmul_matches_the_dequantised_product() {
        let (rows, cols) = (11, 64);
        let kb = cols / BLOCK;
        for format in [Q4Format::Q4_0, Q4Format::Q4_1] {
            let bb = format.block_bytes();
            let mut data = vec![0u8; rows * kb * bb];
            for (n, blk) in data.chunks_exact_mut(bb).enumerate() {
                blk[..2].copy_from_slice(&f16_bits(0.01 + n as f32 * 0.003));
                let q0 = match format {
                    Q4Format::Q4_0 => 2,
                    Q4Format::Q4_1 => {
                        blk[2..4].copy_from_slice(&f16_bits(-0.05 * (n % 3) as f32));
                        4
                    }
                };
                for (k, b) in blk[q0..].iter_mut().enumerate() {
                    *b = ((n * 7 + k * 13) % 256) as u8;
                }
            }
            // Split in two parts with padding rows between them.
            let split = 5 * kb * bb;
            let q = Q4Matrix::from_blocks(
                format,
                &[(&data[..split], 5, 8), (&data[split..], rows - 5, 0)],
                16,
                cols,
            )
            .expect("matrix");
            let mut dense = vec![0f32; 16 * cols];
            for (r, row) in dense.chunks_exact_mut(cols).enumerate() {
                q.dequantize_row(r, row);
            }
            assert!(dense[5 * cols..8 * cols].iter().all(|&v| v == 0.0));
            // Row 0, block 0 of the source.
            let d = 0.01f32;
            let (m, q0) = match format {
                Q4Format::Q4_0 => (-8.0 * d, 2),
                Q4Format::Q4_1 => (0.0, 4),
            };
            let byte = data[q0];
            assert!((dense[0] - (d * (byte & 0xf) as f32 + m)).abs() < 1e-4);
            assert!((dense[16] - (d * (byte >> 4) as f32 + m)).abs() < 1e-4);
            for mrows in [1, 2, 3] {
                let x: Vec<f32> = (0..mrows * cols)
                    .map(|i| ((i * 7919 % 2001) as f32 / 1000.0) - 1.0)
                    .collect();
                let y = q.matmul(&x, mrows);
                let plain = q.matmul_with(&x, mrows, false);
                for (a, b) in y.iter().zip(&plain) {
                    assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{a} {b}");
                }
                // The activations as the kernel sees them (int8 per block).
                let mut xdq = x.clone();
                for xb in xdq.chunks_exact_mut(BLOCK) {
                    let mut q = [0i8; BLOCK];
                    let d = quantize_block(xb, &mut q);
                    for (v, &q) in xb.iter_mut().zip(&q) {
                        *v = q as f32 * d;
                    }
                }
                for r in 0..mrows {
                    for c in 0..16 {
                        let exact: f32 = (0..cols)
                            .map(|k| xdq[r * cols + k] * dense[c * cols + k])
                            .sum();
                        let got = y[r * 16 + c];
                        assert!(
                            (exact - got).abs() < 1e-3 * exact.abs().max(1.0),
                            "{format:?} row {r} col {c}: {exact} vs {got}"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::local::kernels::q8::Q8Matrix;
    use std::time::Instant;

    /// Kernel throughput (run with `--ignored --nocapture` in release).
    #[test]
    #[ignore]
    fn kernel_speed() {
        let (rows, cols) = (3072usize, 576usize);
        let kb = cols / BLOCK;
        let mut data = vec![0u8; rows * kb * 20];
        for (n, blk) in data.chunks_exact_mut(20).enumerate() {
            blk[..2].copy_from_slice(&f32_to_f16(0.01).to_le_bytes());
            for (k, b) in blk[4..].iter_mut().enumerate() {
                *b = ((n * 7 + k * 13) % 256) as u8;
            }
        }
        let q4 = Q4Matrix::from_blocks(Q4Format::Q4_1, &[(&data, rows, 0)], rows, cols).unwrap();
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i % 17) as f32 - 8.0) * 0.01)
            .collect();
        let q8 = Q8Matrix::quantize(&w, rows, cols);
        for m in [1usize, 2, 16] {
            let x: Vec<f32> = (0..m * cols)
                .map(|i| ((i % 13) as f32 - 6.0) * 0.1)
                .collect();
            let f4 = |x: &[f32]| q4.matmul(x, m);
            let f8 = |x: &[f32]| q8.matmul(x, m);
            type Kernel<'a> = &'a dyn Fn(&[f32]) -> Vec<f32>;
            let fs: [(&str, Kernel); 2] = [("q4", &f4), ("q8", &f8)];
            for (name, f) in fs {
                let reps = 200 / m;
                let t = Instant::now();
                for _ in 0..reps {
                    std::hint::black_box(f(&x));
                }
                let s = t.elapsed().as_secs_f64() / reps as f64;
                eprintln!(
                    "{name} m={m}: {:.1} us per call, {:.2} GMAC/s",
                    s * 1e6,
                    (rows * cols * m) as f64 / s / 1e9
                );
            }
        }
    }
}
