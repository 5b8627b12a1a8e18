//! A 4- or 5-bit matrix kept as the file stores it, and its AVX2 matmul against int8
//! activations. Every format is held as 32-value blocks with an f16 scale `d` and offset `m`,
//! value `d * q + m`:
//!
//! - Q4_0: `q` in 0..=15, `m = -8 d`; Q4_1: `q` in 0..=15, `m` stored;
//! - Q5_0: `q` in 0..=31 (a fifth bit per value kept beside the nibbles), `m = -16 d`;
//! - Q4_K: 256-value super-blocks whose eight 32-value sub-blocks have 6-bit scales and mins
//!   under an f16 `d` and `dmin`: sub-block `s` is `d sc_s q - dmin m_s`, held here as `d =
//!   d sc_s`, `m = -dmin m_s` rounded to f16 (a relative change of at most 2^-11 in a
//!   sub-block's scale, against Q8_0's re-quantisation, which moves every value).
//!
//! On a CPU whose decoding speed is set by memory bandwidth, reading 0.56-0.69 bytes per weight
//! instead of Q8_0's 1.06 is most of the gain, and the numbers are the file's. Candle 0.11 has
//! no SIMD kernel for Q4_1 or Q5_0 on x86, and its Q4_K kernel needs rows padded to 256.
//! Qwen2.5-Coder-0.5B's Q4_K_M file stores its q/k/v/o/gate/up matrices as Q5_0 and half its
//! down matrices as Q4_K.
//!
//! Layout: tiles of [`TILE`] rows as in [`super::q8`], the blocks of a tile two by two,
//! `[tile][pair of blocks][row in tile][32 bytes]` (an odd last block alone, `[row][16]`: see
//! `qs_at`), so that one 32-byte load gives a row's two blocks and one conversion and
//! multiply-add serve both; the scales and offsets `[tile][block][row in tile]` as f16 bits (no
//! offsets when they are a fixed multiple of the scale), the fifth bits one `u32` per pair's
//! vector (`qh_at`). Per block, `sum_i (d q_i + m) x_i = d dx sum_i q_i qx_i + m dx sum_i
//! qx_i`: the first term with `maddubs` (unsigned 4- or 5-bit values times signed int8, exact),
//! the second from the activation block's sum.
//!
//! Pairing the blocks, with the decode tiles looped inside the target features (measured in
//! `docs/benchmarks.md`, "Blocks two by two"), took a one-row call on a matrix that stays in
//! cache from 0.6-0.7x the speed of our Q8_0 kernel to 1.1-1.5x (Q4_1 on 1536 x 576: 38-44 us
//! a call to 18-25 us).
//!
//! The SIMD kernels are in `avx2`; this module holds the formats, the layout and the portable
//! code.

use super::vnni;
use super::{avx2_fma_f16c as avx2, f16_to_f32, for_tiles, quantize_block, OutPtr, BLOCK, TILE};

/// A 4- or 5-bit matrix of `rows x cols` (`cols` a multiple of [`BLOCK`]).
pub(crate) struct Q4Matrix {
    rows: usize,
    cols: usize,
    /// A block's 16 bytes hold element `j` in the low nibble of byte `j`, element `j + 16` in
    /// its high nibble; where the blocks go: [`qs_at`].
    qs: Vec<u8>,
    /// The fifth bit of each value (where: [`qh_at`], then [`spread_order`]); empty for the
    /// 4-bit formats.
    qh: Vec<u32>,
    /// f16 bits, `[tile][block][row in tile]`.
    d: Vec<u16>,
    /// f16 bits, `[tile][block][row in tile]`; empty when `m = offset * d`.
    m: Vec<u16>,
    /// `m / d` when it is the same for every block (Q4_0, Q5_0).
    offset: Option<f32>,
}

/// The stored formats [`Q4Matrix`] takes as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Q4Format {
    /// `d` (f16), 16 bytes of nibbles; value `d (q - 8)`.
    Q4_0,
    /// `d`, `m` (f16), 16 bytes of nibbles; value `d q + m`.
    Q4_1,
    /// `d` (f16), 4 bytes of fifth bits, 16 bytes of nibbles; value `d (q - 16)`.
    Q5_0,
    /// 256 values: `d`, `dmin` (f16), 12 bytes of packed 6-bit scales and mins, 128 bytes of
    /// nibbles.
    Q4K,
}

impl Q4Format {
    fn block_bytes(self) -> usize {
        match self {
            Q4Format::Q4_0 => 18,
            Q4Format::Q4_1 => 20,
            Q4Format::Q5_0 => 22,
            Q4Format::Q4K => 144,
        }
    }

    /// Values per stored block.
    fn block_values(self) -> usize {
        match self {
            Q4Format::Q4K => 256,
            _ => BLOCK,
        }
    }

    fn offset(self) -> Option<f32> {
        match self {
            Q4Format::Q4_0 => Some(-8.0),
            Q4Format::Q5_0 => Some(-16.0),
            Q4Format::Q4_1 | Q4Format::Q4K => None,
        }
    }
}

/// One 32-value block in the common form: scale and offset (f16 bits), the nibbles in our byte
/// order, the fifth bits.
struct Block {
    d: u16,
    m: u16,
    qs: [u8; 16],
    qh: u32,
}

/// Where element `k`'s fifth bit is kept: bit `8 (k % 4) + 7 - k / 4`. The kernel broadcasts
/// the word to eight 32-bit lanes and shifts lane `l` left by `l`; bit 7 of byte `b` in lane `l`
/// is then element `4 l + b`'s bit, in place for a mask and one shift (one instruction fewer a
/// block than the usual byte shuffle and compare).
fn fifth_bit_position(k: usize) -> usize {
    8 * (k % 4) + 7 - k / 4
}

/// The fifth bits in the order the kernel reads them ([`fifth_bit_position`]).
fn spread_order(bits: u32) -> u32 {
    (0..32).fold(0, |acc, k| acc | ((bits >> k) & 1) << fifth_bit_position(k))
}

/// Element `k`'s fifth bit, from a word in [`spread_order`].
fn fifth_bit(word: u32, k: usize) -> u32 {
    (word >> fifth_bit_position(k)) & 1
}

/// Sub-block `j`'s 6-bit scale and min from a Q4_K block's 12 packed bytes (ggml's
/// `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

impl Q4Format {
    /// The 32-value blocks of one stored block (`bytes` is `block_bytes` long).
    fn blocks(self, bytes: &[u8], out: &mut Vec<Block>) {
        let f16 = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let nibbles = |q: &[u8]| {
            let mut qs = [0u8; 16];
            qs.copy_from_slice(&q[..16]);
            qs
        };
        match self {
            Q4Format::Q4_0 => out.push(Block {
                d: f16(0),
                m: 0,
                qs: nibbles(&bytes[2..]),
                qh: 0,
            }),
            Q4Format::Q4_1 => out.push(Block {
                d: f16(0),
                m: f16(2),
                qs: nibbles(&bytes[4..]),
                qh: 0,
            }),
            Q4Format::Q5_0 => out.push(Block {
                d: f16(0),
                m: 0,
                qs: nibbles(&bytes[6..]),
                qh: u32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]),
            }),
            Q4Format::Q4K => {
                let (d, dmin) = (f16_to_f32(f16(0)), f16_to_f32(f16(2)));
                let (scales, qs) = (&bytes[4..16], &bytes[16..144]);
                for s in 0..8 {
                    let (sc, mn) = scale_min_k4(s, scales);
                    // Sub-blocks 2p and 2p+1 share bytes 32p..32p+32: low and high nibbles.
                    let src = &qs[32 * (s / 2)..][..32];
                    let shift = 4 * (s % 2);
                    let e = |l: usize| (src[l] >> shift) & 0xf;
                    let mut q = [0u8; 16];
                    for (j, b) in q.iter_mut().enumerate() {
                        *b = e(j) | (e(j + 16) << 4);
                    }
                    out.push(Block {
                        d: f32_to_f16(d * sc as f32),
                        m: f32_to_f16(-dmin * mn as f32),
                        qs: q,
                        qh: 0,
                    });
                }
            }
        }
    }

    fn five_bit(self) -> bool {
        self == Q4Format::Q5_0
    }
}

/// f32 to f16 bits, rounding to nearest, ties to even (the Q4_K sub-block scales and mins; the
/// `half` crate's conversion).
fn f32_to_f16(v: f32) -> u16 {
    half::f16::from_f32(v).to_bits()
}

impl Q4Matrix {
    /// Stacks `parts` (raw blocks of `(rows_i, pad_to_i)` rows each, `cols` columns, all in
    /// `format`) on rows, each part padded with zero rows to `pad_to_i`, then zero rows up to
    /// `rows`. `None` when the sizes do not fit the format.
    pub(crate) fn from_blocks(
        format: Q4Format,
        parts: &[(&[u8], usize, usize)],
        rows: usize,
        cols: usize,
    ) -> Option<Q4Matrix> {
        if !cols.is_multiple_of(format.block_values()) {
            return None;
        }
        let kb = cols / BLOCK;
        let stored = cols / format.block_values();
        let bb = format.block_bytes();
        let tiles = rows.div_ceil(TILE);
        let five = format.five_bit();
        let fixed = format.offset().is_some();
        let mut qs = vec![0u8; tiles * kb * TILE * 16];
        let mut qh = vec![0u32; if five { tiles * kb * TILE } else { 0 }];
        let mut d = vec![0u16; tiles * kb * TILE];
        let mut m = vec![0u16; if fixed { 0 } else { tiles * kb * TILE }];
        let mut r0 = 0;
        let mut blocks = Vec::with_capacity(kb);
        for &(data, n, pad_to) in parts {
            if data.len() != n * stored * bb {
                return None;
            }
            for r in 0..n {
                let row = r0 + r;
                if row >= rows {
                    return None;
                }
                let (t, i) = (row / TILE, row % TILE);
                blocks.clear();
                for blk in data[r * stored * bb..][..stored * bb].chunks_exact(bb) {
                    format.blocks(blk, &mut blocks);
                }
                for (b, blk) in blocks.iter().enumerate() {
                    let at = (t * kb + b) * TILE + i;
                    d[at] = blk.d;
                    if !fixed {
                        m[at] = blk.m;
                    }
                    if five {
                        // Raw bits here, put in the kernel's order below.
                        for k in 0..BLOCK {
                            let (slot, bit) = qh_at(kb, b, i, k);
                            qh[t * kb * TILE + slot] |= ((blk.qh >> k) & 1) << bit;
                        }
                    }
                    qs[t * kb * TILE * 16 + qs_at(kb, b, i)..][..16].copy_from_slice(&blk.qs);
                }
            }
            r0 += n.max(pad_to);
        }
        if r0 > rows {
            return None;
        }
        for word in &mut qh {
            *word = spread_order(*word);
        }
        Some(Q4Matrix {
            rows,
            cols,
            qs,
            qh,
            d,
            m,
            offset: format.offset(),
        })
    }

    /// Block `at`'s offset `m`.
    fn offset_at(&self, at: usize) -> f32 {
        block_offset(self.offset, &self.d, &self.m, at)
    }

    /// Rows (outputs).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.qs.len() + 4 * self.qh.len() + 2 * (self.d.len() + self.m.len())
    }

    /// Row `r` dequantised into `out` (`cols` long).
    pub(crate) fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let kb = self.cols / BLOCK;
        let (t, i) = (r / TILE, r % TILE);
        let w = self.tile_weights(t);
        for (b, o) in out.chunks_exact_mut(BLOCK).enumerate().take(kb) {
            let at = (t * kb + b) * TILE + i;
            let (d, m) = (f16_to_f32(self.d[at]), self.offset_at(at));
            for (k, o) in o.iter_mut().enumerate() {
                *o = d * w.value(b, i, k) as f32 + m;
            }
        }
    }

    /// `x` (`m x cols`) times the transpose: `m x rows`. With AVX-512 VNNI through this
    /// module's few-row kernel below [`vnni::MIN_ROWS`] rows and [`vnni::matmul`] from there,
    /// which give each row the same numbers (so a row's result does not depend on the call it
    /// is in); else the AVX2 kernels, whose rows do not depend on the call either.
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
        self.matmul_with(x, m, avx2())
    }

    /// [`Q4Matrix::matmul`] with AVX-512 VNNI for few rows: per tile and row, the tile's four
    /// weight rows against one activation row (`avx2::vnni_few`).
    #[cfg(target_arch = "x86_64")]
    fn matmul_vnni_few(&self, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(x.len(), m * self.cols);
        let acts = vnni::RowActs::new(x, vnni::Source::zero(self));
        let mut out = vec![0f32; m * self.rows];
        let tiles = self.rows.div_ceil(TILE);
        let kb = self.cols / BLOCK;
        let ptr = OutPtr(out.as_mut_ptr());
        // SAFETY: the CPU has AVX-512 VNNI (checked by the caller); the tiles of `range` write
        // only their own columns (see OutPtr).
        let run =
            |range: std::ops::Range<usize>| unsafe { avx2::vnni_few(self, range, &acts, m, ptr) };
        for_tiles(tiles, tiles * m * kb, run);
        out
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
            #[cfg(target_arch = "x86_64")]
            if simd && m <= 2 {
                let x = Acts {
                    q: &xq,
                    d: &xd,
                    s: &xs,
                };
                // SAFETY: the tiles of `range` write only their own columns (see OutPtr).
                unsafe { avx2::few_rows(self, range, &x, m, ptr) };
                return;
            }
            for t in range {
                // SAFETY: tile `t` writes only columns t*TILE.. of each output row (see OutPtr).
                unsafe { self.tile(t, &xq, &xd, &xs, m, ptr, simd) };
            }
        };
        for_tiles(tiles, tiles * m * kb, run);
        out
    }

    /// Writes tile `t`'s sums for activation rows `a..a + mt`.
    ///
    /// # Safety
    /// `out` points to `m x rows` floats (`a + mt <= m`) and no other thread writes these columns.
    #[inline(always)]
    unsafe fn store(&self, t: usize, a: usize, mt: usize, sums: &[[f32; TILE]; 2], out: OutPtr) {
        let rows = (self.rows - t * TILE).min(TILE);
        for (j, s) in sums.iter().enumerate().take(mt) {
            for (i, &v) in s.iter().enumerate().take(rows) {
                *out.get().add((a + j) * self.rows + t * TILE + i) = v;
            }
        }
    }

    /// Tile `t`'s weights.
    #[inline(always)]
    fn tile_weights(&self, t: usize) -> Tile<'_> {
        let kb = self.cols / BLOCK;
        Tile {
            qs: &self.qs[t * kb * TILE * 16..][..kb * TILE * 16],
            qh: tile_part(&self.qh, t, kb * TILE),
            d: &self.d[t * kb * TILE..][..kb * TILE],
            m: tile_part(&self.m, t, kb * TILE),
            offset: self.offset,
            kb,
            unpacked: &[],
        }
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
        let w = self.tile_weights(t);
        // More than one pair of activation rows: the tile's values are unpacked to bytes once
        // (a byte a value, 4 KiB for 1024 columns), not once a pair.
        #[cfg(target_arch = "x86_64")]
        let buffer = (simd && m > 2).then(|| {
            let mut buf = UNPACK.with(|b| b.take());
            buf.resize(kb * TILE * BLOCK, 0);
            avx2::unpack(&w, &mut buf);
            buf
        });
        #[cfg(not(target_arch = "x86_64"))]
        let buffer: Option<Vec<u8>> = None;
        let unpacked = buffer.as_deref();
        let w = Tile {
            unpacked: unpacked.unwrap_or(&[]),
            ..w
        };
        let mut a = 0;
        while a < m {
            let mt = (m - a).min(2);
            let mut sums = [[0f32; TILE]; 2];
            let x = Acts {
                q: &xq[a * self.cols..][..mt * self.cols],
                d: &xd[a * kb..][..mt * kb],
                s: &xs[a * kb..][..mt * kb],
            };
            // With SIMD this runs only for more than two rows (one or two go through
            // `avx2::few_rows`), so the values are unpacked.
            #[cfg(target_arch = "x86_64")]
            match (unpacked.is_some(), mt == 2) {
                (true, true) => avx2::tile::<2, { avx2::UNPACKED }>(&w, &x, &mut sums),
                (true, false) => avx2::tile::<1, { avx2::UNPACKED }>(&w, &x, &mut sums),
                (false, _) => plain_tile(&w, &x, mt, &mut sums),
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = simd;
                plain_tile(&w, &x, mt, &mut sums);
            }
            self.store(t, a, mt, &sums, out);
            a += mt;
        }
        if let Some(buf) = buffer {
            UNPACK.with(|b| b.replace(buf));
        }
    }
}

impl vnni::Source for Q4Matrix {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    /// The fixed offsets are -8 d (Q4_0) and -16 d (Q5_0): zero points 8 and 16.
    fn zero(&self) -> i32 {
        self.offset.map_or(0, |k| -k as i32)
    }

    /// The tile unpacked as the AVX2 path unpacks it (blocks paired), its scales and offsets
    /// widened to f32.
    fn fill(&self, t: usize, w: &mut vnni::WeightTile) {
        use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
        let kb = self.cols / BLOCK;
        w.reset(kb, true, self.offset.is_none());
        let tile = self.tile_weights(t);
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU has AVX2, FMA and F16C; `w.qs` holds a tile's values.
            unsafe { avx2::unpack(&tile, &mut w.qs) };
        } else {
            unpack_plain(&tile, &mut w.qs);
        }
        #[cfg(not(target_arch = "x86_64"))]
        unpack_plain(&tile, &mut w.qs);
        tile.d
            .reinterpret_cast::<half::f16>()
            .convert_to_f32_slice(&mut w.d);
        if !w.m.is_empty() {
            tile.m
                .reinterpret_cast::<half::f16>()
                .convert_to_f32_slice(&mut w.m);
        }
    }
}

/// The tile's values a byte each, in [`avx2::unpack`]'s order, without SIMD.
fn unpack_plain(w: &Tile<'_>, out: &mut [u8]) {
    for b in 0..w.kb {
        for i in 0..TILE {
            for k in 0..BLOCK {
                let at = match paired(w.kb, b) {
                    true => {
                        let half = if k < 16 { k } else { 32 + k - 16 };
                        pair_unpacked(b & !1, i) + (b & 1) * 16 + half
                    }
                    false => single_unpacked(b, i) + k,
                };
                out[at] = w.value(b, i, k);
            }
        }
    }
}

thread_local! {
    /// Each worker's buffer for a tile's unpacked values.
    static UNPACK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Tile `t`'s `len` entries of a per-block array, or nothing when the matrix has no such array.
fn tile_part<T>(v: &[T], t: usize, len: usize) -> &[T] {
    if v.is_empty() {
        v
    } else {
        &v[t * len..][..len]
    }
}

/// One tile of weights.
struct Tile<'a> {
    qs: &'a [u8],
    /// Fifth bits (empty for 4-bit formats).
    qh: &'a [u32],
    d: &'a [u16],
    /// Offsets (empty when `offset` gives them).
    m: &'a [u16],
    offset: Option<f32>,
    kb: usize,
    /// The values a byte each, `[block][row in tile][32]`, when unpacked for this call.
    unpacked: &'a [u8],
}

impl Tile<'_> {
    fn m(&self, at: usize) -> f32 {
        block_offset(self.offset, self.d, self.m, at)
    }

    /// Element `k` of block `b`, row `i` (0..=31), read from the packed bytes.
    fn value(&self, b: usize, i: usize, k: usize) -> u8 {
        let byte = self.qs[qs_at(self.kb, b, i) + k % 16];
        let nibble = if k < 16 { byte & 0xf } else { byte >> 4 };
        let high = match self.qh.is_empty() {
            true => 0,
            false => {
                let (slot, bit) = qh_at(self.kb, b, i, k);
                fifth_bit(self.qh[slot], bit) as u8
            }
        };
        nibble | high << 4
    }
}

/// Whether block `b` of `kb` is one of a pair (all but an odd last block).
fn paired(kb: usize, b: usize) -> bool {
    (b | 1) < kb
}

/// Where block `b`'s 16 packed bytes of row `i` start inside a tile's nibbles (`kb` blocks).
/// Blocks go in pairs, `[pair][row in tile][32]` (block `2p`'s 16 bytes, then `2p + 1`'s), so
/// that one 32-byte load gives a row's two blocks: after masking, byte `c` of the low nibbles
/// is element `c` of the first block for `c < 16` and element `c - 16` of the second above;
/// the high nibbles hold elements 16..32 the same way. An odd last block stands alone,
/// `[row in tile][16]`. Either way block `b` lies in `b * TILE * 16..(b + 1) * TILE * 16`.
fn qs_at(kb: usize, b: usize, i: usize) -> usize {
    if paired(kb, b) {
        pair_qs(b & !1, i) + (b & 1) * 16
    } else {
        single_qs(b, i)
    }
}

/// Where row `i`'s 32 bytes of the pair starting at block `b` (even) start in a tile's nibbles.
#[inline(always)]
fn pair_qs(b: usize, i: usize) -> usize {
    b * TILE * 16 + i * 32
}

/// Where row `i`'s 16 bytes of block `b` start when it stands alone (an odd last block).
#[inline(always)]
fn single_qs(b: usize, i: usize) -> usize {
    b * TILE * 16 + i * 16
}

/// Where row `i`'s two fifth-bit words of the pair starting at block `b` (even) start.
#[inline(always)]
fn pair_qh(b: usize, i: usize) -> usize {
    b * TILE + 2 * i
}

/// Where row `i`'s fifth-bit word of block `b` is when it stands alone.
#[inline(always)]
fn single_qh(b: usize, i: usize) -> usize {
    b * TILE + i
}

/// Where row `i`'s values of the pair starting at block `b` (even) start in a tile's unpacked
/// bytes (`[pair][row][64]`, an odd last block `[row][32]` after them).
#[inline(always)]
fn pair_unpacked(b: usize, i: usize) -> usize {
    b * TILE * BLOCK + i * 2 * BLOCK
}

/// Where row `i`'s values of block `b` start in a tile's unpacked bytes when it stands alone.
#[inline(always)]
fn single_unpacked(b: usize, i: usize) -> usize {
    b * TILE * BLOCK + i * BLOCK
}

/// Where element `k` of block `b`, row `i`, keeps its fifth bit inside a tile's fifth-bit words
/// (`kb` blocks): the word, and the bit in it before [`spread_order`]. A pair's words follow its
/// nibbles: `[pair][row in tile][2]`, the first word the fifth bits of the low-nibble vector
/// (elements 0..16 of both blocks), the second those of the high one; an odd last block's word
/// is its own 32 bits.
fn qh_at(kb: usize, b: usize, i: usize, k: usize) -> (usize, usize) {
    if paired(kb, b) {
        (pair_qh(b & !1, i) + k / 16, (b & 1) * 16 + k % 16)
    } else {
        (single_qh(b, i), k)
    }
}

/// Block `at`'s offset: `offset * d` when the format fixes it, else the stored `m`.
fn block_offset(offset: Option<f32>, d: &[u16], m: &[u16], at: usize) -> f32 {
    match offset {
        Some(k) => k * f16_to_f32(d[at]),
        None => f16_to_f32(m[at]),
    }
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
                let dot: i32 = (0..BLOCK)
                    .map(|k| w.value(b, i, k) as i32 * xb[k] as i32)
                    .sum();
                *s +=
                    f16_to_f32(w.d[at]) * x.d[j * kb + b] * dot as f32 + w.m(at) * x.s[j * kb + b];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_bits(v: f32) -> [u8; 2] {
        f32_to_f16(v).to_le_bytes()
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
                    Q4Format::Q4_1 => {
                        blk[2..4].copy_from_slice(&f16_bits(-0.05 * (n % 3) as f32));
                        4
                    }
                    _ => 2,
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
                Q4Format::Q4_1 => (0.0, 4),
                _ => (-8.0 * d, 2),
            };
            let byte = data[q0];
            assert!((dense[0] - (d * (byte & 0xf) as f32 + m)).abs() < 1e-4);
            assert!((dense[16] - (d * (byte >> 4) as f32 + m)).abs() < 1e-4);
            check_matmul(&q, &dense, cols, &format!("{format:?}"));
        }
    }

    /// `q.matmul` agrees with the plain loop and with the exact product of `dense` (`q`'s rows
    /// dequantised, the first 16 of them checked) and the activations as the kernel sees them.
    fn check_matmul(q: &Q4Matrix, dense: &[f32], cols: usize, what: &str) {
        for mrows in [1, 2, 3, 9] {
            let x: Vec<f32> = (0..mrows * cols)
                .map(|i| ((i * 7919 % 2001) as f32 / 1000.0) - 1.0)
                .collect();
            let y = q.matmul(&x, mrows);
            let plain = q.matmul_with(&x, mrows, false);
            for (a, b) in y.iter().zip(&plain) {
                assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{what}: {a} {b}");
            }
            // The AVX2 kernels too, which `matmul` does not take on a CPU with AVX-512 VNNI.
            let simd = q.matmul_with(&x, mrows, avx2());
            for (a, b) in simd.iter().zip(&plain) {
                assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{what}: {a} {b}");
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
                for c in 0..16.min(q.rows()) {
                    let exact: f32 = (0..cols)
                        .map(|k| xdq[r * cols + k] * dense[c * cols + k])
                        .sum();
                    let got = y[r * q.rows() + c];
                    assert!(
                        (exact - got).abs() < 1e-3 * exact.abs().max(1.0),
                        "{what} row {r} col {c}: {exact} vs {got}"
                    );
                }
            }
        }
    }

    /// Every format, quantized by Candle from the same matrix: our rows are Candle's
    /// dequantised rows (exactly for the 32-value formats; Q4_K's sub-block scales and mins
    /// rounded to f16), and the matmul agrees with them.
    #[test]
    fn rows_are_candles_dequantised_rows() {
        use candle_core::quantized::{GgmlDType, QTensor};
        use candle_core::{Device, Tensor};
        let rows = 9usize;
        // An even and an odd number of 32-value blocks (an odd last block is stored alone).
        for cols in [512usize, 480] {
            let w: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 104_729 % 9973) as f32 / 9973.0 - 0.45) * (1.0 + (i / cols) as f32))
                .collect();
            let t = Tensor::from_vec(w, (rows, cols), &Device::Cpu).expect("tensor");
            for (format, dtype) in [
                (Q4Format::Q4_0, GgmlDType::Q4_0),
                (Q4Format::Q4_1, GgmlDType::Q4_1),
                (Q4Format::Q5_0, GgmlDType::Q5_0),
                (Q4Format::Q4K, GgmlDType::Q4K),
            ] {
                if cols % format.block_values() != 0 {
                    continue;
                }
                let qt = QTensor::quantize(&t, dtype).expect("quantize");
                let reference: Vec<f32> = qt
                    .dequantize(&Device::Cpu)
                    .and_then(|d| d.flatten_all())
                    .and_then(|d| d.to_vec1())
                    .expect("dequantize");
                let data = qt.data().expect("data");
                let q =
                    Q4Matrix::from_blocks(format, &[(&data, rows, 0)], 12, cols).expect("matrix");
                // A part whose byte count does not fit is refused.
                assert!(
                    Q4Matrix::from_blocks(format, &[(&data[1..], rows, 0)], 12, cols).is_none()
                );
                let mut dense = vec![0f32; 12 * cols];
                for (r, row) in dense.chunks_exact_mut(cols).enumerate() {
                    q.dequantize_row(r, row);
                }
                let tolerance = match format {
                    Q4Format::Q4K => 2e-3,
                    _ => 0.0,
                };
                for (k, (a, b)) in dense.iter().zip(&reference).enumerate() {
                    let scale = reference[k / cols * cols..][..cols]
                        .iter()
                        .fold(0f32, |m, v| m.max(v.abs()));
                    assert!(
                        (a - b).abs() <= tolerance * scale,
                        "{format:?} value {k}: {a} against Candle's {b}"
                    );
                }
                assert!(dense[rows * cols..].iter().all(|&v| v == 0.0));
                check_matmul(&q, &dense, cols, &format!("{format:?}, {cols} columns"));
            }
        }
    }
    /// The tile unpacking without SIMD (the panel kernel's fallback in `fill`) writes what the
    /// AVX2 one writes, for every format with an even and an odd number of blocks.
    #[test]
    fn plain_unpacking_is_the_simd_one() {
        use candle_core::quantized::{GgmlDType, QTensor};
        use candle_core::{Device, Tensor};
        if !avx2() {
            return;
        }
        let rows = 7usize;
        for cols in [512usize, 480] {
            let w: Vec<f32> = (0..rows * cols)
                .map(|i| (i * 104_729 % 9973) as f32 / 9973.0 - 0.45)
                .collect();
            let t = Tensor::from_vec(w, (rows, cols), &Device::Cpu).expect("tensor");
            for (format, dtype) in [
                (Q4Format::Q4_0, GgmlDType::Q4_0),
                (Q4Format::Q4_1, GgmlDType::Q4_1),
                (Q4Format::Q5_0, GgmlDType::Q5_0),
                (Q4Format::Q4K, GgmlDType::Q4K),
            ] {
                if cols % format.block_values() != 0 {
                    continue;
                }
                let qt = QTensor::quantize(&t, dtype).expect("quantize");
                let data = qt.data().expect("data");
                let q = Q4Matrix::from_blocks(format, &[(&data, rows, 0)], rows, cols).expect("q");
                for tile in 0..rows.div_ceil(TILE) {
                    let w = q.tile_weights(tile);
                    let mut plain = vec![0u8; w.kb * TILE * BLOCK];
                    let mut simd = vec![1u8; w.kb * TILE * BLOCK];
                    unpack_plain(&w, &mut plain);
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the CPU has AVX2, FMA and F16C (checked above).
                    unsafe {
                        avx2::unpack(&w, &mut simd)
                    };
                    assert_eq!(plain, simd, "{format:?}, {cols} columns, tile {tile}");
                }
            }
        }
    }

    /// A row's numbers do not depend on the call it comes in: every row of a call of `m` rows
    /// is bit for bit the row alone, whichever kernels the two calls take (with AVX-512 VNNI,
    /// the few-row kernel alone and the panel kernel from `vnni::MIN_ROWS` rows), for every
    /// format, an even and an odd number of blocks, and Q8_0; and the AVX2 kernels on their own
    /// (Q5_0 and Q8_0), which `matmul` leaves aside on a CPU with AVX-512 VNNI.
    #[test]
    fn a_row_is_the_same_in_any_call() {
        use crate::local::kernels::q8::Q8Matrix;
        use candle_core::quantized::{GgmlDType, QTensor};
        use candle_core::{Device, Tensor};
        let rows = 23usize;
        for cols in [512usize, 480] {
            let w: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 104_729 % 9973) as f32 / 9973.0 - 0.45) * (1.0 + (i / cols) as f32))
                .collect();
            let t = Tensor::from_vec(w.clone(), (rows, cols), &Device::Cpu).expect("tensor");
            type Kernel = Box<dyn Fn(&[f32], usize) -> Vec<f32>>;
            let mut kernels: Vec<(String, Kernel)> = Vec::new();
            for (format, dtype) in [
                (Q4Format::Q4_0, GgmlDType::Q4_0),
                (Q4Format::Q4_1, GgmlDType::Q4_1),
                (Q4Format::Q5_0, GgmlDType::Q5_0),
                (Q4Format::Q4K, GgmlDType::Q4K),
            ] {
                if cols % format.block_values() != 0 {
                    continue;
                }
                let qt = QTensor::quantize(&t, dtype).expect("quantize");
                let data = qt.data().expect("data");
                let q = Q4Matrix::from_blocks(format, &[(&data, rows, 0)], rows, cols).expect("q");
                kernels.push((format!("{format:?}"), Box::new(move |x, m| q.matmul(x, m))));
            }
            let q8 = Q8Matrix::quantize(&w, rows, cols);
            kernels.push(("Q8_0".into(), Box::new(move |x, m| q8.matmul(x, m))));
            // The AVX2 kernels, which `matmul` does not take on a CPU with AVX-512 VNNI, keep the
            // property on their own.
            let qt = QTensor::quantize(&t, GgmlDType::Q5_0).expect("quantize");
            let data = qt.data().expect("data");
            let q5 =
                Q4Matrix::from_blocks(Q4Format::Q5_0, &[(&data, rows, 0)], rows, cols).expect("q");
            kernels.push((
                "Q5_0, AVX2".into(),
                Box::new(move |x, m| q5.matmul_with(x, m, avx2())),
            ));
            let q8 = Q8Matrix::quantize(&w, rows, cols);
            kernels.push((
                "Q8_0, AVX2".into(),
                Box::new(move |x, m| q8.matmul_tiles_for_tests(x, m)),
            ));
            for (name, f) in &kernels {
                for m in [1usize, 2, 3, 7, 8, 9, 17, 33] {
                    let x: Vec<f32> = (0..m * cols)
                        .map(|i| ((i * 7919 % 2001) as f32 / 1000.0) - 1.0)
                        .collect();
                    let y = f(&x, m);
                    for r in 0..m {
                        let alone = f(&x[r * cols..(r + 1) * cols], 1);
                        assert_eq!(
                            &y[r * rows..(r + 1) * rows],
                            &alone[..],
                            "{name}, {cols} columns: row {r} of {m}"
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

    /// Kernel throughput (run with `--ignored --nocapture` in release): Candle-quantized
    /// matrices in each format this kernel takes, and Q8_0, of Qwen2.5-0.5B's gate/up shape
    /// (9728 x 896) or `KERNEL_SHAPE=rows,cols`, for `KERNEL_ROWS=m,..` activation rows (1, 2
    /// and 16 unless told); with AVX-512 VNNI
    /// also the AVX2 kernels and each VNNI kernel alone.
    #[test]
    #[ignore]
    fn kernel_speed() {
        use candle_core::quantized::{GgmlDType, QTensor};
        use candle_core::{Device, Tensor};
        let shape: Vec<usize> = std::env::var("KERNEL_SHAPE")
            .unwrap_or_else(|_| "9728,896".into())
            .split(',')
            .map(|v| v.trim().parse().expect("KERNEL_SHAPE=rows,cols"))
            .collect();
        let (rows, cols) = (shape[0], shape[1]);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 104_729 % 9973) as f32 / 9973.0 - 0.5) * 0.05)
            .collect();
        let t = Tensor::from_vec(w.clone(), (rows, cols), &Device::Cpu).expect("tensor");
        type Kernel = Box<dyn Fn(&[f32], usize) -> Vec<f32>>;
        let mut kernels: Vec<(String, Kernel)> = Vec::new();
        let vnni_here = vnni::available();
        for (format, dtype) in [
            (Q4Format::Q4_1, GgmlDType::Q4_1),
            (Q4Format::Q4_0, GgmlDType::Q4_0),
            (Q4Format::Q5_0, GgmlDType::Q5_0),
        ] {
            let qt = QTensor::quantize(&t, dtype).expect("quantize");
            let data = qt.data().expect("data");
            let q = std::sync::Arc::new(
                Q4Matrix::from_blocks(format, &[(&data, rows, 0)], rows, cols).expect("q"),
            );
            kernels.push((format!("{format:?}"), {
                let q = q.clone();
                Box::new(move |x, m| q.matmul(x, m))
            }));
            if vnni_here {
                let (a, b) = (q.clone(), q.clone());
                kernels.push((
                    format!("{format:?} AVX2"),
                    Box::new(move |x, m| a.matmul_with(x, m, true)),
                ));
                kernels.push((
                    format!("{format:?} VNNI few"),
                    Box::new(move |x, m| b.matmul_vnni_few(x, m)),
                ));
                kernels.push((
                    format!("{format:?} VNNI panel"),
                    Box::new(move |x, m| vnni::matmul(&*q, x, m).expect("vnni")),
                ));
            }
        }
        let q8 = std::sync::Arc::new(Q8Matrix::quantize(&w, rows, cols));
        kernels.push(("Q8_0".into(), {
            let q8 = q8.clone();
            Box::new(move |x, m| q8.matmul(x, m))
        }));
        if vnni_here {
            let a = q8.clone();
            kernels.push((
                "Q8_0 AVX2".into(),
                Box::new(move |x, m| a.matmul_tiles_for_tests(x, m)),
            ));
            kernels.push((
                "Q8_0 VNNI panel".into(),
                Box::new(move |x, m| vnni::matmul(&*q8, x, m).expect("vnni")),
            ));
        }
        let ms: Vec<usize> = std::env::var("KERNEL_ROWS")
            .unwrap_or_else(|_| "1,2,16".into())
            .split(',')
            .map(|v| v.trim().parse().expect("KERNEL_ROWS=m,m,..."))
            .collect();
        for m in ms {
            let x: Vec<f32> = (0..m * cols)
                .map(|i| ((i % 13) as f32 - 6.0) * 0.1)
                .collect();
            for (name, f) in &kernels {
                let reps = 400 / m;
                let t = Instant::now();
                for _ in 0..reps {
                    std::hint::black_box(f(&x, m));
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
