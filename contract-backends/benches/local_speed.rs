//! Prefill and decode speed of the local backend (figures printed, not asserted).
//!
//! `cargo bench -p contract-backends --bench local_speed [-- MODEL.gguf]`; the default model is
//! fetched when no path is given. Environment: `FORMATS=as_stored,f32,q8_0`, `DECODE=64`,
//! `PREFILL=300`, `RUNS=3`; thread counts as usual (`RAYON_NUM_THREADS`, `CANDLE_NUM_THREADS`).

use std::time::Instant;

use candle_core::Device;
use contract_backends::local::{fetch, Model, WeightFormat};

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| fetch::default_model_path().expect("default model"));
    let formats = std::env::var("FORMATS").unwrap_or_else(|_| "as_stored,f32,q8_0".into());
    let decode = env_usize("DECODE", 64);
    let prefill = env_usize("PREFILL", 300);
    let runs = env_usize("RUNS", 3);
    println!(
        "model {} | RAYON_NUM_THREADS={:?} CANDLE_NUM_THREADS={:?}",
        path.display(),
        std::env::var("RAYON_NUM_THREADS").ok(),
        std::env::var("CANDLE_NUM_THREADS").ok()
    );
    println!("| weights | load s | prefill tok/s ({prefill} tokens) | decode tok/s ({decode} tokens) | forward(4) / forward(1) | forward(16) / forward(1) |");
    println!("|---|---|---|---|---|---|");
    for name in formats.split(',') {
        let format = match name.trim() {
            "as_stored" => WeightFormat::AsStored,
            "f32" => WeightFormat::F32,
            "q8_0" => WeightFormat::Q8_0,
            other => panic!("unknown format {other}"),
        };
        let t = Instant::now();
        let mut model = Model::load(&path, format, &Device::Cpu).expect("load");
        let load_s = t.elapsed().as_secs_f64();
        let prompt: Vec<u32> = (0..prefill as u32)
            .map(|i| 100 + (i * 7919) % 20000)
            .collect();

        let mut pre = Vec::new();
        let mut dec = Vec::new();
        let mut ratio4 = Vec::new();
        let mut ratio16 = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let mut logits = model.forward(&prompt, 0).expect("prefill");
            pre.push(prefill as f64 / t.elapsed().as_secs_f64());
            let snap = model.snapshot();
            let t = Instant::now();
            for _ in 0..decode {
                let next = contract_backends::local::sample::argmax(&logits).unwrap();
                logits = model.feed(&[next]).expect("decode");
            }
            let per_token = t.elapsed().as_secs_f64() / decode as f64;
            dec.push(1.0 / per_token);
            if let Some(snap) = snap {
                for (n, out) in [(4usize, &mut ratio4), (16, &mut ratio16)] {
                    let mut m = snap.snapshot().unwrap();
                    let toks: Vec<u32> = (0..n as u32).map(|i| 300 + i).collect();
                    let t = Instant::now();
                    m.feed(&toks).unwrap();
                    out.push(t.elapsed().as_secs_f64() / per_token);
                }
            }
        }
        let r = |v: Vec<f64>| {
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}", median(v))
            }
        };
        println!(
            "| {name} | {load_s:.2} | {:.0} | {:.1} | {} | {} |",
            median(pre),
            median(dec),
            r(ratio4),
            r(ratio16)
        );
    }
}
