//! The model's dimensions, read from the GGUF metadata, with the padded sizes the kernels use.

use candle_core::quantized::gguf_file::Content;

use super::options::round_up;
use crate::local::arch::Arch;
use crate::local::error::LocalError;

/// The model's dimensions, from the GGUF metadata.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub arch: Arch,
    pub hidden: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub ff: usize,
    pub n_layer: usize,
    pub eps: f32,
    pub rope_dim: usize,
    pub rope_base: f32,
    pub context: usize,
    /// Padded sizes: hidden, attention output (n_head * head_dim), feed-forward.
    pub hidden_p: usize,
    pub attn_p: usize,
    pub ff_p: usize,
    /// Rows of the fused q/k/v matrix (q, then k, then v, then zero rows up to a multiple of 16).
    pub qkv_rows: usize,
}

impl Config {
    pub(crate) fn from_content(ct: &Content, arch: Arch, pad: bool) -> Result<Config, LocalError> {
        let prefix = arch.name();
        let get = |k: &str| -> Option<&candle_core::quantized::gguf_file::Value> {
            ct.metadata.get(&format!("{prefix}.{k}"))
        };
        let int = |k: &str| -> Result<usize, LocalError> {
            get(k)
                .and_then(|v| v.to_u32().ok().map(u64::from).or_else(|| v.to_u64().ok()))
                .map(|v| v as usize)
                .ok_or_else(|| LocalError::Gguf(format!("no `{prefix}.{k}` in the metadata")))
        };
        let float = |k: &str| get(k).and_then(|v| v.to_f32().ok());
        let hidden = int("embedding_length")?;
        let n_head = int("attention.head_count")?;
        let n_kv_head = int("attention.head_count_kv").unwrap_or(n_head);
        let n_layer = int("block_count")?;
        let ff = int("feed_forward_length")?;
        let context = int("context_length").unwrap_or(4096);
        if n_head == 0 || n_kv_head == 0 || n_head % n_kv_head != 0 || hidden % n_head != 0 {
            return Err(LocalError::Gguf(format!(
                "{n_head} attention heads, {n_kv_head} key/value heads, hidden size {hidden}: \
                 not a grouped-query layout"
            )));
        }
        let head_dim = int("attention.key_length").unwrap_or(hidden / n_head);
        let rope_dim = int("rope.dimension_count").unwrap_or(head_dim);
        if rope_dim > head_dim || rope_dim % 2 != 0 || head_dim == 0 {
            return Err(LocalError::Gguf(format!(
                "rotary dimension {rope_dim} does not fit head dimension {head_dim}"
            )));
        }
        let eps = float("attention.layer_norm_rms_epsilon").unwrap_or(1e-6);
        let rope_base = float("rope.freq_base").unwrap_or(10000.0);
        let block = if pad { 256 } else { 32 };
        let attn = n_head * head_dim;
        Ok(Config {
            arch,
            hidden,
            n_head,
            n_kv_head,
            head_dim,
            ff,
            n_layer,
            eps,
            rope_dim,
            rope_base,
            context,
            hidden_p: round_up(hidden, block),
            attn_p: round_up(attn, block),
            ff_p: round_up(ff, block),
            qkv_rows: round_up(attn + 2 * n_kv_head * head_dim, 16),
        })
    }

    pub(super) fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }
}
