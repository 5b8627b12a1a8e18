//! Where the forward pass runs: the CPU, or a GPU through Candle's CUDA backend (feature `cuda`).
//!
//! On a GPU the model is candle-transformers' quantized llama / qwen2 with the weights as stored
//! in the file ([`Engine::Auto`](super::Engine::Auto)); the logits come back to the CPU, where
//! the contract's mask and the sampler run.

use candle_core::Device;

use super::error::LocalError;

/// Whether this build has Candle's CUDA backend (feature `cuda`).
pub const CUDA_COMPILED: bool = cfg!(feature = "cuda");

/// The device named by `spec`: `cpu`, `cuda` (the first GPU) or `cuda:N`.
///
/// A GPU needs a build with the `cuda` feature ([`CUDA_COMPILED`]; `scripts/cuda_build.sh`
/// builds one) and a GPU the driver can open; either missing is a [`LocalError::Device`] that
/// says which.
pub fn parse_device(spec: &str) -> Result<Device, LocalError> {
    let spec = spec.trim();
    if spec.eq_ignore_ascii_case("cpu") {
        return Ok(Device::Cpu);
    }
    let ordinal = match spec.split_once(':') {
        None if spec.eq_ignore_ascii_case("cuda") => 0,
        Some((kind, n)) if kind.eq_ignore_ascii_case("cuda") => {
            n.parse::<usize>().map_err(|_| {
                LocalError::Device(format!(
                    "`{spec}`: the GPU's number must be a non-negative integer (`cuda:0`)"
                ))
            })?
        }
        _ => {
            return Err(LocalError::Device(format!(
                "`{spec}` is not a device (expected `cpu`, `cuda` or `cuda:N`)"
            )))
        }
    };
    if !CUDA_COMPILED {
        return Err(LocalError::Device(format!(
            "`{spec}`: this build has no GPU support (build with the `cuda` feature, see \
             scripts/cuda_build.sh)"
        )));
    }
    Device::new_cuda(ordinal).map_err(|e| {
        LocalError::Device(format!(
            "`cuda:{ordinal}` cannot be opened: {}",
            super::error::candle_message(&e)
        ))
    })
}

/// How `device` is written for [`parse_device`] (`cpu`, `cuda:0`; `metal:0` for Candle's Metal
/// backend, which this crate does not build).
pub fn device_name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_specs() {
        assert!(parse_device("cpu").unwrap().is_cpu());
        assert!(parse_device(" CPU ").unwrap().is_cpu());
        assert_eq!(device_name(&Device::Cpu), "cpu");
        for bad in ["gpu", "cuda:x", "cuda:-1", "", "cpu:0"] {
            let err = parse_device(bad).unwrap_err();
            assert!(matches!(err, LocalError::Device(_)), "{bad}: {err}");
        }
        // Without the feature a GPU is refused with what to do; with it, on a machine without
        // a GPU, the driver's error comes back as a value (the test machine has no GPU: when it
        // has one, the device opens).
        match parse_device("cuda:0") {
            Ok(d) => assert!(CUDA_COMPILED && d.is_cuda()),
            Err(LocalError::Device(m)) if !CUDA_COMPILED => {
                assert!(m.contains("`cuda` feature"), "{m}")
            }
            Err(LocalError::Device(m)) => assert!(m.contains("cuda:0"), "{m}"),
            Err(e) => panic!("{e}"),
        }
    }
}
