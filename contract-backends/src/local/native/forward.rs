//! The forward pass over the in-place KV cache: embedding, layers, final norm and the output
//! matrix (only the allowed tokens' rows on a constrained step).

use std::any::Any;
use std::sync::Arc;

use super::attention::attention;
use super::layers::{add, rms_norm, rope, rope_table};
use super::weights::NativeWeights;
use crate::local::causal_lm::{other_engine, CausalLm};
use crate::local::LocalError;

/// The cached keys and values of one layer: `[position][kv head][head dim]`, rotary applied.
#[derive(Clone, Default)]
struct LayerCache {
    k: Vec<f32>,
    v: Vec<f32>,
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
        NativeModel {
            w,
            cache: vec![LayerCache::default(); layers],
            len: 0,
        }
    }

    pub(crate) fn weights(&self) -> &Arc<NativeWeights> {
        &self.w
    }

    /// Copies `other`'s cache into this one (reusing the buffers); both must share the weights.
    fn restore_cache(&mut self, other: &NativeModel) -> Result<(), LocalError> {
        if !Arc::ptr_eq(&self.w, &other.w) {
            return Err(LocalError::State(
                "cannot restore a model from another model's snapshot".into(),
            ));
        }
        for (a, b) in self.cache.iter_mut().zip(&other.cache) {
            a.k.clone_from(&b.k);
            a.v.clone_from(&b.v);
        }
        self.len = other.len;
        Ok(())
    }

    /// Drops the cached positions from `len` on.
    fn truncate(&mut self, len: usize) {
        let kv = self.w.cfg.kv_dim();
        for c in &mut self.cache {
            c.k.truncate(len * kv);
            c.v.truncate(len * kv);
        }
        self.len = len.min(self.len);
    }

    /// Runs `tokens` at positions `pos..`, `pos <= ` the cached length (later positions are
    /// dropped first); the logits after the last token. With `allowed` (a bitset over token
    /// ids), the others are -inf, and only the allowed ones are computed when they are few.
    fn run(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        let w = Arc::clone(&self.w);
        let c = &w.cfg;
        let m = tokens.len();
        if m == 0 {
            return Err(LocalError::State("forward with no tokens".into()));
        }
        if pos > self.len {
            return Err(LocalError::State(format!(
                "forward at position {pos} but the cache holds {} tokens",
                self.len
            )));
        }
        self.truncate(pos);
        let dense_from = w.opts.dense_from.unwrap_or(usize::MAX);
        let own = w.opts.uses_own_kernel();
        let (h, hp) = (c.hidden, c.hidden_p);
        let hd = c.head_dim;
        let attn = c.n_head * hd;
        let kv = c.kv_dim();
        let (cos, sin) = rope_table(&w.inv_freq, pos, m);

        let mut x = w.embed(tokens)?;
        let mut xn = vec![0f32; m * hp];
        let mut att = vec![0f32; m * c.attn_p];
        let mut act = vec![0f32; m * c.ff_p];
        for (layer, cache) in w.layers.iter().zip(self.cache.iter_mut()) {
            rms_norm(&x, &layer.attn_norm, h, hp, c.eps, &mut xn);
            let mut qkv = layer.qkv.forward(&mut xn, m, dense_from)?;
            for row in qkv.chunks_exact_mut(c.qkv_rows) {
                if let Some(b) = &layer.qkv_bias {
                    for (y, b) in row.iter_mut().zip(b) {
                        *y += b;
                    }
                }
            }
            for (r, row) in qkv.chunks_exact_mut(c.qkv_rows).enumerate() {
                let (q, rest) = row.split_at_mut(attn);
                let k = &mut rest[..kv];
                for head in q.chunks_exact_mut(hd).chain(k.chunks_exact_mut(hd)) {
                    rope(head, &cos[r], &sin[r], c.arch);
                }
                cache.k.extend_from_slice(k);
                cache.v.extend_from_slice(&rest[kv..2 * kv]);
            }
            attention(c, &qkv, &cache.k, &cache.v, pos, m, &mut att, own);
            let o = layer.wo.forward(&mut att, m, dense_from)?;
            add(&mut x, &o);
            rms_norm(&x, &layer.ffn_norm, h, hp, c.eps, &mut xn);
            let gu = layer.gate_up.forward(&mut xn, m, dense_from)?;
            for (a, row) in act
                .chunks_exact_mut(c.ff_p)
                .zip(gu.chunks_exact(2 * c.ff_p))
            {
                let (g, u) = row.split_at(c.ff_p);
                for ((a, &g), &u) in a.iter_mut().zip(g).zip(u) {
                    *a = g / (1.0 + (-g).exp()) * u;
                }
            }
            let d = layer.down.forward(&mut act, m, dense_from)?;
            add(&mut x, &d);
        }
        self.len = pos + m;
        let mut last = vec![0f32; hp];
        rms_norm(&x[(m - 1) * hp..], &w.norm, h, hp, c.eps, &mut last);
        if let Some(bits) = allowed {
            // Few allowed tokens (a constrained step): only their rows of the output matrix.
            let count: usize = bits.iter().map(|b| b.count_ones() as usize).sum();
            if count * 8 < w.vocab_rows {
                let ids: Vec<u32> = bits
                    .iter()
                    .enumerate()
                    .flat_map(|(i, &b)| {
                        (0..32u32)
                            .filter(move |k| b & (1 << k) != 0)
                            .map(move |k| i as u32 * 32 + k)
                    })
                    .filter(|&t| (t as usize) < w.vocab_rows)
                    .collect();
                if let Some(vals) = w.output.forward_rows(&last, &ids) {
                    let mut logits = vec![f32::NEG_INFINITY; w.vocab_rows];
                    for (&t, v) in ids.iter().zip(vals) {
                        logits[t as usize] = v;
                    }
                    return Ok(logits);
                }
            }
        }
        let mut logits = w.output.forward(&mut last, 1, usize::MAX)?;
        logits.truncate(w.vocab_rows);
        if let Some(bits) = allowed {
            crate::local::sample::apply_mask(&mut logits, crate::local::Allowed::Bits(bits));
        }
        Ok(logits)
    }
}

impl CausalLm for NativeModel {
    fn forward(
        &mut self,
        tokens: &[u32],
        pos: usize,
        allowed: Option<&[u32]>,
    ) -> Result<Vec<f32>, LocalError> {
        self.run(tokens, pos, allowed)
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
        let other = other
            .as_any()
            .downcast_ref::<NativeModel>()
            .ok_or_else(other_engine)?;
        self.restore_cache(other)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
