//! A/B probe: several weight formats loaded in one process, decode steps (and prompt calls)
//! timed in alternation so that a changing machine load hits them alike. Figures printed only.
//!
//! `cargo bench -p contract-backends --bench matmul_probe -- fast,f32,fast:candle`
use std::time::Instant;

use candle_core::quantized::GgmlDType;
use candle_core::Device;
use contract_backends::local::NativeOptions;
use contract_backends::local::{fetch, Engine, Model, WeightFormat};

/// CPU time of the whole process (all its threads), in seconds: user + system from
/// `/proc/self/stat` is too coarse (10 ms), so sum `/proc/self/task/*/schedstat` (ns on a CPU).
fn cpu_s() -> f64 {
    let mut ns = 0u64;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            }
        }
    }
    ns as f64 / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load(path: &std::path::Path, name: &str) -> Model {
    if let Some(opts) = name.strip_prefix("fast:") {
        let mut o = NativeOptions::default();
        for opt in opts.split(':') {
            o = match opt {
                "q8_0" => o.dtype(GgmlDType::Q8_0),
                "q4k" => o.dtype(GgmlDType::Q4K),
                "q6k" => o.dtype(GgmlDType::Q6K),
                "pad" => o.pad(true),
                "nopad" => o.pad(false),
                "own" => o.own_kernel(true),
                "candle" => o.own_kernel(false),
                "dense" => o.dense_from(16),
                "q8" => o.keep_4bit(false),
                other => panic!("unknown option {other}"),
            };
        }
        return Model::load_with(path, Engine::Native, &Device::Cpu, o).expect("load");
    }
    let f = match name {
        "fast" => Engine::Native,
        "f32" => Engine::Candle(WeightFormat::F32),
        "q8_0" => Engine::Candle(WeightFormat::Q8_0),
        "as_stored" => Engine::Candle(WeightFormat::AsStored),
        other => panic!("unknown format {other}"),
    };
    Model::load(path, f, &Device::Cpu).expect("load")
}

fn main() {
    let names: Vec<String> = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "fast,f32".into())
        .split(',')
        .map(String::from)
        .collect();
    let path = fetch::default_model_path().expect("model");
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let steps: usize = std::env::var("STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let prompt_len: usize = std::env::var("PROMPT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let ctx: usize = std::env::var("CTX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut models: Vec<Model> = names.iter().map(|n| load(&path, n)).collect();
    let base: Vec<u32> = (0..ctx as u32).map(|i| 100 + (i * 7919) % 20000).collect();
    let prompt: Vec<u32> = (0..prompt_len as u32)
        .map(|i| 200 + (i * 104729) % 20000)
        .collect();
    let snaps: Vec<Model> = models
        .iter_mut()
        .map(|m| {
            m.forward(&base, 0).expect("prefill");
            m.snapshot().expect("snapshot")
        })
        .collect();
    let mut dec = vec![Vec::new(); models.len()];
    let mut pre = vec![Vec::new(); models.len()];
    let mut dec_cpu = vec![Vec::new(); models.len()];
    let mut pre_cpu = vec![Vec::new(); models.len()];
    for _ in 0..rounds {
        for (i, m) in models.iter_mut().enumerate() {
            m.restore_from(&snaps[i]).expect("restore");
            let (t, c) = (Instant::now(), cpu_s());
            for s in 0..steps {
                m.feed(&[300 + s as u32]).expect("decode");
            }
            dec[i].push(t.elapsed().as_secs_f64() / steps as f64);
            dec_cpu[i].push((cpu_s() - c) / steps as f64);
            m.restore_from(&snaps[i]).expect("restore");
            let (t, c) = (Instant::now(), cpu_s());
            m.feed(&prompt).expect("prompt");
            pre[i].push(t.elapsed().as_secs_f64());
            pre_cpu[i].push(cpu_s() - c);
        }
    }
    println!(
        "{rounds} rounds; decode at position {ctx}, {steps} steps; a call of {prompt_len} tokens; \
         CANDLE_NUM_THREADS={:?} RAYON_NUM_THREADS={:?}",
        std::env::var("CANDLE_NUM_THREADS").ok(),
        std::env::var("RAYON_NUM_THREADS").ok()
    );
    for (i, n) in names.iter().enumerate() {
        let d = median(dec[i].clone());
        let p = median(pre[i].clone());
        println!(
            "{n:24} decode {:7.2} ms/token ({:6.1} tok/s), CPU {:6.2} ms | {prompt_len}-token call {:8.1} ms ({:6.0} tok/s), CPU {:7.1} ms",
            d * 1e3,
            1.0 / d,
            median(dec_cpu[i].clone()) * 1e3,
            p * 1e3,
            prompt_len as f64 / p,
            median(pre_cpu[i].clone()) * 1e3
        );
    }
}
