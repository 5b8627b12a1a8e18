//! [`LocalOptions`], the settings of a [`LocalBackend`](super::LocalBackend), and
//! [`candle_thread_env`], the thread settings a program puts in its environment for Candle.

use std::path::PathBuf;

use candle_core::Device;

use super::model::{Engine, WeightFormat};
use super::native::NativeOptions;

/// Settings of a [`LocalBackend`](super::LocalBackend).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalOptions {
    /// Which forward pass runs the model (default [`Engine::Auto`]: the native one on the CPU).
    pub engine: Engine,
    /// Most tokens to generate when the request does not say (default 512).
    pub max_tokens: u32,
    /// Threads of the native engine's own matmuls (its thread team, process-wide, sized by
    /// the first backend that loads; default: `CANDLE_NUM_THREADS` when set, else the available
    /// parallelism). Candle's own kernels ([`Engine::Candle`], and what the native engine
    /// leaves to Candle) run on Candle's pools, which read `CANDLE_NUM_THREADS` and
    /// `RAYON_NUM_THREADS` from the environment at their first use: this library never sets
    /// the environment (unsound once other threads run); a program that wants the measured
    /// best settings puts [`candle_thread_env`]'s values there at the top of `main`.
    pub threads: Option<usize>,
    /// A `tokenizer.json` to use instead of the one built from the GGUF metadata.
    pub tokenizer_json: Option<PathBuf>,
    /// Reuse the KV cache of the leading system messages across requests (default on).
    pub prefix_cache: bool,
    /// Where the forward pass runs (default the CPU). On a GPU
    /// ([`parse_device`](super::parse_device)`("cuda:0")`, feature `cuda`) [`Engine::Auto`] is
    /// candle-transformers' model with the weights as stored; the mask and the sampler stay on
    /// the CPU.
    pub device: Device,
    /// Constrain requests that carry a grammar with the contract's token mask (default on; the
    /// mask engine is built on the first such request).
    pub constrain: bool,
    /// Options of the native engine, for [`Engine::Native`] (default: its defaults).
    pub native: NativeOptions,
    /// Feed the tokens the mask forces together with the sampled token in one forward call
    /// (default on; off only to measure what it saves: the output is the same).
    pub fast_forward: bool,
    /// Compute the next step's mask on the decode thread while another thread runs the forward
    /// call, instead of before it (`None`, the default: when the model is not on the CPU, where
    /// the forward pass leaves the CPU mostly idle). The mask of step `n + 1` depends on the
    /// tokens of step `n`, not on its logits, so candle-transformers' models give the same
    /// output either way. The native engine, given the mask first, computes only the allowed
    /// tokens' logits on steps with few of them (equal to the full computation to rounding);
    /// overlapped, it computes them all. Requests decoded together in a batch
    /// ([`LocalOptions::max_batch`]) overlap the same way: every request's mask on this thread
    /// while the batch's forward call runs.
    pub overlap_mask: Option<bool>,
    /// Most requests [`Backend::complete`](contract_core::extract::Backend::complete) decodes together (default 8). Requests that arrive
    /// while others decode join them: every step feeds all of them in one forward call, which
    /// reads the weights once for all (a decode step on a CPU is bound by reading them), and a
    /// request that finishes leaves at once while the others go on. Each request decodes
    /// exactly as it would alone (the same tokens, the same [`Output`](super::Output); on a GPU to the
    /// rounding of Candle's matrix kernels, which change with the number of rows). Only models
    /// that batch ([`Model::batches`](super::Model::batches): [`Engine::Native`], [`Engine::CandleOps`]) do; 1 decodes
    /// one request at a time.
    pub max_batch: usize,
    /// Most sequences one forward call of [`Backend::score`](contract_core::extract::Backend::score) (and
    /// [`LocalBackend::score_prompts`](super::LocalBackend::score_prompts)) feeds (default 64): the prompts' segments after their
    /// shared prefixes, each with its own KV cache. Only models that batch ([`Model::batches`](super::Model::batches))
    /// feed several in one call; others feed them one after the other.
    pub score_batch: usize,
    /// Most tokens one forward call of [`Backend::score`](contract_core::extract::Backend::score) feeds, all its sequences together
    /// (default 512): a longer segment is fed over several calls. It bounds the call's
    /// activations (a few MiB per hundred tokens for a 0.5B model).
    pub score_tokens: usize,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            engine: Engine::Auto,
            max_tokens: 512,
            threads: None,
            tokenizer_json: None,
            prefix_cache: true,
            device: Device::Cpu,
            constrain: true,
            fast_forward: true,
            native: NativeOptions::default(),
            overlap_mask: None,
            max_batch: 8,
            score_batch: 64,
            score_tokens: 512,
        }
    }
}

impl LocalOptions {
    /// Sets the engine (and, for [`Engine::Candle`], the weight format).
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }
    /// Sets the default token limit.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }
    /// Sets the thread count.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }
    /// Uses a `tokenizer.json` file.
    pub fn tokenizer_json(mut self, path: impl Into<PathBuf>) -> Self {
        self.tokenizer_json = Some(path.into());
        self
    }
    /// Turns prefix reuse on or off.
    pub fn prefix_cache(mut self, on: bool) -> Self {
        self.prefix_cache = on;
        self
    }
    /// Sets the device.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }
    /// Turns the contract's token mask on or off.
    pub fn constrain(mut self, on: bool) -> Self {
        self.constrain = on;
        self
    }
    /// Sets the options of the native engine.
    pub fn native_options(mut self, native: NativeOptions) -> Self {
        self.native = native;
        self
    }
    /// Turns fast-forward of forced tokens on or off.
    pub fn fast_forward(mut self, on: bool) -> Self {
        self.fast_forward = on;
        self
    }
    /// Computes the next step's mask while the forward call runs, or before it, whatever the
    /// device ([`LocalOptions::overlap_mask`]).
    pub fn overlap_mask(mut self, on: bool) -> Self {
        self.overlap_mask = Some(on);
        self
    }
    /// Sets how many requests decode together ([`LocalOptions::max_batch`]; 0 counts as 1).
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }
    /// Sets how many sequences a scoring forward call feeds ([`LocalOptions::score_batch`]; 0
    /// counts as 1).
    pub fn score_batch(mut self, n: usize) -> Self {
        self.score_batch = n.max(1);
        self
    }
    /// Sets how many tokens a scoring forward call feeds ([`LocalOptions::score_tokens`]; 0
    /// counts as 1).
    pub fn score_tokens(mut self, n: usize) -> Self {
        self.score_tokens = n.max(1);
        self
    }
}

/// The environment Candle's thread pools read, set to what was measured fastest on 2 cores for
/// `options` (`CANDLE_NUM_THREADS` = the threads, else the available parallelism;
/// `RAYON_NUM_THREADS` = 1 for quantized weights, whose matmuls run on Candle's pool and slow
/// down when a rayon pool of the same size shares the cores, else the threads), for a program
/// to set at the top of its `main`, before any other thread starts and before any backend
/// loads (this library never writes the environment itself):
///
/// ```no_run
/// use contract_backends::local::{candle_thread_env, LocalOptions};
/// let options = LocalOptions::default();
/// for (key, value) in candle_thread_env(&options) {
///     if std::env::var_os(key).is_none() {
///         std::env::set_var(key, value);
///     }
/// }
/// ```
///
/// [`Engine::Auto`] counts as the native engine, which is what it picks for the supported
/// architectures on the CPU.
pub fn candle_thread_env(options: &LocalOptions) -> [(&'static str, String); 2] {
    let n = options.threads.filter(|&n| n > 0).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let dense = match options.engine {
        Engine::Candle(WeightFormat::F32) => true,
        Engine::Native | Engine::Auto => options.native.dense_from.is_some(),
        _ => false,
    };
    let rayon = if dense { n } else { 1 };
    [
        ("CANDLE_NUM_THREADS", n.to_string()),
        ("RAYON_NUM_THREADS", rayon.to_string()),
    ]
}
