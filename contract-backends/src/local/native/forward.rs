//! The forward pass over the in-place KV cache: embedding, layers, final norm and the output
//! matrix (only the allowed tokens' rows on a constrained step).

use std::sync::Arc;

use half::f16;

use super::attention::{attention, CacheValue};
use super::layers::{add, rms_norm, rope, rope_table};
use super::weights::NativeWeights;
use crate::local::causal_lm::{
    of_engine, only_logits, other_load, run_batch, same_engine, CausalLm, Segment, WeightsId,
};
use crate::local::error::LocalError;

/// The cached keys and values of one layer: `[position][kv head][head dim]`, rotary applied;
/// in f32, or in f16 as llama.cpp keeps them with
/// [`NativeOptions::kv_f16`](super::NativeOptions::kv_f16) (a decoding step reads the whole
/// cache of every layer, and at a few hundred positions that is, in f32, about a seventh of
/// SmolLM2's weights).
#[derive(Clone)]
enum LayerCache {
    F16 { k: Vec<f16>, v: Vec<f16> },
    F32 { k: Vec<f32>, v: Vec<f32> },
}

impl LayerCache {
    fn new(f16: bool) -> LayerCache {
        if f16 {
            LayerCache::F16 {
                k: Vec::new(),
                v: Vec::new(),
            }
        } else {
            LayerCache::F32 {
                k: Vec::new(),
                v: Vec::new(),
            }
        }
    }

    /// Appends one position's keys and values.
    fn push(&mut self, k: &[f32], v: &[f32]) {
        fn append<T: CacheValue>(cache: &mut Vec<T>, new: &[f32]) {
            let at = cache.len();
            cache.resize(at + new.len(), T::ZERO);
            T::convert(&mut cache[at..], new);
        }
        match self {
            LayerCache::F16 { k: ck, v: cv } => {
                append(ck, k);
                append(cv, v);
            }
            LayerCache::F32 { k: ck, v: cv } => {
                append(ck, k);
                append(cv, v);
            }
        }
    }

    /// Keeps the first `len` values of keys and of values.
    fn truncate(&mut self, len: usize) {
        match self {
            LayerCache::F16 { k, v } => {
                k.truncate(len);
                v.truncate(len);
            }
            LayerCache::F32 { k, v } => {
                k.truncate(len);
                v.truncate(len);
            }
        }
    }

    /// Copies `other` into this one, reusing the buffers when both hold the same type.
    fn copy_from(&mut self, other: &LayerCache) {
        match (&mut *self, other) {
            (LayerCache::F16 { k, v }, LayerCache::F16 { k: ok, v: ov }) => {
                k.clone_from(ok);
                v.clone_from(ov);
            }
            (LayerCache::F32 { k, v }, LayerCache::F32 { k: ok, v: ov }) => {
                k.clone_from(ok);
                v.clone_from(ov);
            }
            _ => *self = other.clone(),
        }
    }
}

/// The native model: shared weights and its own KV cache. Cloning copies the cache (a prompt prefix
/// of a few hundred tokens is a few MiB) and shares the weights.
#[derive(Clone)]
pub(crate) struct NativeModel {
    w: Arc<NativeWeights>,
    cache: Vec<LayerCache>,
    len: usize,
}

impl NativeModel {
    pub(crate) fn new(w: Arc<NativeWeights>) -> NativeModel {
        let layers = w.cfg.n_layer;
        let kv_f16 = w.opts.kv_f16;
        NativeModel {
            w,
            cache: vec![LayerCache::new(kv_f16); layers],
            len: 0,
        }
    }

    /// Copies `other`'s cache into this one (reusing the buffers); both must share the weights.
    fn restore_cache(&mut self, other: &NativeModel) -> Result<(), LocalError> {
        if !Arc::ptr_eq(&self.w, &other.w) {
            return Err(other_load());
        }
        for (a, b) in self.cache.iter_mut().zip(&other.cache) {
            a.copy_from(b);
        }
        self.len = other.len;
        Ok(())
    }

    /// Drops the cached positions from `len` on.
    fn truncate(&mut self, len: usize) {
        let kv = self.w.cfg.kv_dim();
        for c in &mut self.cache {
            c.truncate(len * kv);
        }
        self.len = len.min(self.len);
    }
}

/// The native engine's pass over several sequences of one load ([`run_batch`]), each segment's
/// tokens rows of the same matrix products. A row's result does not depend on the other rows:
/// every matrix kernel computes each activation row on its own, so a sequence decodes the same
/// alone or in a batch.
fn forward_pass(segs: &mut [Segment<'_>]) -> Result<Vec<Vec<f32>>, LocalError> {
    let mut segs = of_engine::<NativeModel>(segs)?;
    let Some(first) = segs.first() else {
        return Ok(Vec::new());
    };
    let w = Arc::clone(&first.model.w);
    for s in segs.iter_mut() {
        if s.pos > s.model.len {
            return Err(LocalError::State(format!(
                "forward at position {} but the cache holds {} tokens",
                s.pos, s.model.len
            )));
        }
        s.model.truncate(s.pos);
    }
    let c = &w.cfg;
    let total: usize = segs.iter().map(|s| s.tokens.len()).sum();
    let dense_from = w.opts.dense_from.unwrap_or(usize::MAX);
    // The dense copy (when kept) serves long calls; a batch takes it only as one sequence would
    // have, so that rows come out the same alone or batched.
    let dense_from = if segs.len() == 1 {
        dense_from
    } else {
        usize::MAX
    };
    let own = w.opts.uses_own_kernel();
    let (h, hp) = (c.hidden, c.hidden_p);
    let hd = c.head_dim;
    let attn = c.n_head * hd;
    let kv = c.kv_dim();
    let ropes: Vec<_> = segs
        .iter()
        .map(|s| rope_table(&w.inv_freq, s.pos, s.tokens.len()))
        .collect();
    let starts: Vec<usize> = segs
        .iter()
        .scan(0, |row, s| {
            let start = *row;
            *row += s.tokens.len();
            Some(start)
        })
        .collect();

    let all: Vec<u32> = segs.iter().flat_map(|s| s.tokens.iter().copied()).collect();
    let mut x = w.embed(&all)?;
    let mut xn = vec![0f32; total * hp];
    let mut att = vec![0f32; total * c.attn_p];
    let mut act = vec![0f32; total * c.ff_p];
    for (l, layer) in w.layers.iter().enumerate() {
        rms_norm(&x, &layer.attn_norm, h, hp, c.eps, &mut xn);
        let mut qkv = layer.qkv.forward(&mut xn, total, dense_from)?;
        if let Some(b) = &layer.qkv_bias {
            for row in qkv.chunks_exact_mut(c.qkv_rows) {
                for (y, b) in row.iter_mut().zip(b) {
                    *y += b;
                }
            }
        }
        for ((s, (cos, sin)), &start) in segs.iter_mut().zip(&ropes).zip(&starts) {
            let m = s.tokens.len();
            let cache = &mut s.model.cache[l];
            let rows = &mut qkv[start * c.qkv_rows..(start + m) * c.qkv_rows];
            for (r, row) in rows.chunks_exact_mut(c.qkv_rows).enumerate() {
                let (q, rest) = row.split_at_mut(attn);
                let (k, v) = rest.split_at_mut(kv);
                for head in q.chunks_exact_mut(hd).chain(k.chunks_exact_mut(hd)) {
                    rope(head, &cos[r], &sin[r], c.arch);
                }
                cache.push(k, &v[..kv]);
            }
            let (q, out) = (
                &qkv[start * c.qkv_rows..],
                &mut att[start * c.attn_p..(start + m) * c.attn_p],
            );
            match cache {
                LayerCache::F16 { k, v } => attention(c, q, k, v, s.pos, m, out, own),
                LayerCache::F32 { k, v } => attention(c, q, k, v, s.pos, m, out, own),
            }
        }
        let o = layer.wo.forward(&mut att, total, dense_from)?;
        add(&mut x, &o);
        rms_norm(&x, &layer.ffn_norm, h, hp, c.eps, &mut xn);
        let gu = layer.gate_up.forward(&mut xn, total, dense_from)?;
        for (a, row) in act
            .chunks_exact_mut(c.ff_p)
            .zip(gu.chunks_exact(2 * c.ff_p))
        {
            let (g, u) = row.split_at(c.ff_p);
            for ((a, &g), &u) in a.iter_mut().zip(g).zip(u) {
                *a = g / (1.0 + (-g).exp()) * u;
            }
        }
        let d = layer.down.forward(&mut act, total, dense_from)?;
        add(&mut x, &d);
    }
    for s in segs.iter_mut() {
        s.model.len = s.pos + s.tokens.len();
    }

    // The last row of each segment, normed; the full output product for the rows that need it
    // in one call, only the allowed rows for a segment whose mask leaves few.
    let mut out: Vec<Option<Vec<f32>>> = vec![None; segs.len()];
    let mut full_rows: Vec<usize> = Vec::new();
    let mut lasts: Vec<f32> = Vec::new();
    for (i, (s, &start)) in segs.iter().zip(&starts).enumerate() {
        let mut last = vec![0f32; hp];
        let row = start + s.tokens.len() - 1;
        rms_norm(
            &x[row * hp..(row + 1) * hp],
            &w.norm,
            h,
            hp,
            c.eps,
            &mut last,
        );
        if let Some(logits) = s.allowed.and_then(|bits| few_allowed(&w, &last, bits)) {
            out[i] = Some(logits);
        } else {
            full_rows.push(i);
            lasts.extend_from_slice(&last);
        }
    }
    if !full_rows.is_empty() {
        let logits = w.output.forward(&mut lasts, full_rows.len(), usize::MAX)?;
        let stride = logits.len() / full_rows.len();
        for (&i, row) in full_rows.iter().zip(logits.chunks_exact(stride)) {
            let mut row = row[..w.vocab_rows.min(stride)].to_vec();
            if let Some(bits) = segs[i].allowed {
                crate::local::sample::apply_mask(
                    &mut row,
                    crate::local::token_mask::Allowed::Bits(bits),
                );
            }
            out[i] = Some(row);
        }
    }
    out.into_iter()
        .map(|o| o.ok_or_else(|| LocalError::State("a segment got no logits".into())))
        .collect()
}

/// The logits of a constrained step computed from the output matrix's allowed rows alone, when
/// the mask leaves few of them and the matrix's layout allows it; `None` otherwise.
fn few_allowed(w: &NativeWeights, last: &[f32], bits: &[u32]) -> Option<Vec<f32>> {
    let count: usize = bits.iter().map(|b| b.count_ones() as usize).sum();
    if count * 8 >= w.vocab_rows {
        return None;
    }
    let mut ids = crate::local::sample::allowed_ids(bits);
    ids.retain(|&t| (t as usize) < w.vocab_rows);
    let vals = w.output.forward_rows(last, &ids)?;
    let mut logits = vec![f32::NEG_INFINITY; w.vocab_rows];
    for (&t, v) in ids.iter().zip(vals) {
        logits[t as usize] = v;
    }
    Some(logits)
}

impl CausalLm for NativeModel {
    fn forward(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        only_logits(run_batch(&mut [Segment {
            model: self,
            tokens,
            pos,
            allowed,
        }])?)
    }

    fn weights_id(&self) -> Option<WeightsId> {
        Some(WeightsId {
            addr: Arc::as_ptr(&self.w) as usize,
            pass: forward_pass,
        })
    }

    fn native_weights(&self) -> Option<&NativeWeights> {
        Some(&self.w)
    }

    fn reset(&mut self) {
        self.truncate(0);
    }

    fn can_rewind(&self) -> bool {
        true
    }

    fn rewind(&mut self, pos: usize) -> Result<(), LocalError> {
        self.truncate(pos);
        Ok(())
    }

    fn snapshot(&self) -> Option<Box<dyn CausalLm>> {
        Some(Box::new(self.clone()))
    }

    fn restore_from(&mut self, other: &dyn CausalLm) -> Result<(), LocalError> {
        self.restore_cache(same_engine::<NativeModel>(other)?)
    }
}
