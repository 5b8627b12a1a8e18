//! The per-layer arithmetic around the matmuls: residual add, RMS norm, rotary embedding.

use crate::local::arch::Arch;

pub(super) fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// RMS norm of each `hp`-row of `x` over its first `h` values (the rest are zeros), times `w`
/// (zero past `h`, so the padding stays zero).
pub(super) fn rms_norm(x: &[f32], w: &[f32], h: usize, hp: usize, eps: f32, out: &mut [f32]) {
    for (row, o) in x.chunks_exact(hp).zip(out.chunks_exact_mut(hp)) {
        let ss: f32 = row[..h].iter().map(|v| v * v).sum();
        let scale = 1.0 / (ss / h as f32 + eps).sqrt();
        for ((o, &v), &w) in o.iter_mut().zip(row).zip(w) {
            *o = v * scale * w;
        }
    }
}

/// cos and sin of `position * inv_freq` for positions `pos..pos + m`.
pub(super) fn rope_table(inv_freq: &[f32], pos: usize, m: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut cos = Vec::with_capacity(m);
    let mut sin = Vec::with_capacity(m);
    for p in pos..pos + m {
        let (c, s): (Vec<f32>, Vec<f32>) = inv_freq
            .iter()
            .map(|f| {
                let a = p as f32 * f;
                (a.cos(), a.sin())
            })
            .unzip();
        cos.push(c);
        sin.push(s);
    }
    (cos, sin)
}

/// Rotary embedding of one head in place: interleaved pairs for llama GGUFs (whose q/k rows are
/// permuted for it), halves for qwen2 (neox style); dimensions past the rotary ones untouched.
pub(super) fn rope(x: &mut [f32], cos: &[f32], sin: &[f32], arch: Arch) {
    let half = cos.len();
    match arch {
        Arch::Llama => {
            for i in 0..half {
                let (a, b) = (x[2 * i], x[2 * i + 1]);
                x[2 * i] = a * cos[i] - b * sin[i];
                x[2 * i + 1] = a * sin[i] + b * cos[i];
            }
        }
        Arch::Qwen2 => {
            for i in 0..half {
                let (a, b) = (x[i], x[i + half]);
                x[i] = a * cos[i] - b * sin[i];
                x[i + half] = a * sin[i] + b * cos[i];
            }
        }
    }
}
