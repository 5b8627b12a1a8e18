//! Probe: time of one quantized / dense matmul per weight format, for a model's shapes.
use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Module, Tensor};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let shapes: Vec<(usize, usize, usize)> = vec![
        // (n, k, count per token)
        (960, 576, 30),
        (576, 576, 30),
        (3072, 576, 30),
        (576, 1536, 30),
        (49152, 576, 1),
    ];
    let pad = |k: usize| k.div_ceil(256) * 256;
    let formats = std::env::var("F").unwrap_or("q4_1,q8_0,q8_0p,q4kp,q6kp,f32,f16".into());
    let ms: Vec<usize> = std::env::var("M")
        .unwrap_or("1,4,64".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    for f in formats.split(',') {
        for &m in &ms {
            let mut total = 0.0;
            let mut parts = Vec::new();
            for &(n, k, count) in &shapes {
                let (dt, kk) = match f {
                    "q4_1" => (Some(GgmlDType::Q4_1), k),
                    "q8_0" => (Some(GgmlDType::Q8_0), k),
                    "q8_0p" => (Some(GgmlDType::Q8_0), pad(k)),
                    "q4kp" => (Some(GgmlDType::Q4K), pad(k)),
                    "q6kp" => (Some(GgmlDType::Q6K), pad(k)),
                    "q5kp" => (Some(GgmlDType::Q5K), pad(k)),
                    "f32" => (None, k),
                    "f16" => (Some(GgmlDType::F16), k),
                    _ => panic!(),
                };
                let w = Tensor::randn(0f32, 0.1, (n, kk), &Device::Cpu).unwrap();
                let x: Vec<f32> = (0..m * kk).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
                let reps = if m == 1 { 30 } else { 5 };
                let mut ts = Vec::new();
                match dt {
                    Some(GgmlDType::F16) | None => {
                        let mm = if dt.is_some() {
                            QMatMul::TensorF16(w.to_dtype(DType::F16).unwrap())
                        } else {
                            QMatMul::Tensor(w)
                        };
                        for _ in 0..reps {
                            let t = Instant::now();
                            let xt = Tensor::from_slice(&x, (m, kk), &Device::Cpu).unwrap();
                            let y = mm.forward(&xt).unwrap();
                            let _v: Vec<f32> = y.flatten_all().unwrap().to_vec1().unwrap();
                            ts.push(t.elapsed().as_secs_f64());
                        }
                    }
                    Some(dt) => {
                        let q = QTensor::quantize(&w, dt).unwrap();
                        let mut buf = x.clone();
                        for _ in 0..reps {
                            let t = Instant::now();
                            let st = CpuStorage::F32(std::mem::take(&mut buf));
                            let (out, _) = q.cpu_fwd(&st, &Layout::contiguous((m, kk))).unwrap();
                            buf = match st {
                                CpuStorage::F32(v) => v,
                                _ => unreachable!(),
                            };
                            drop(out);
                            ts.push(t.elapsed().as_secs_f64());
                        }
                    }
                }
                let per = median(ts) * count as f64;
                parts.push(format!("{:.2}", per * 1e3));
                total += per;
            }
            println!(
                "{f:6} m={m:3}: {:8.2} ms per forward ({:8.1} tok/s) parts {:?}",
                total * 1e3,
                m as f64 / total,
                parts
            );
        }
    }
}
