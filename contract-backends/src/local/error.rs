//! [`LocalError`], why the local backend failed, and how a Candle error's message is read
//! (without the backtrace Candle appends), the [`BackendError`] it is reported as, and a panic's
//! message. A leaf of the backend: it imports nothing else of it.

use std::path::PathBuf;

use contract_core::extract::BackendError;

/// Why the local backend failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The default model could not be fetched.
    #[error("cannot fetch the model: {0}")]
    Fetch(String),
    /// A downloaded file does not have the expected checksum.
    #[error("{path}: sha256 {actual}, expected {expected}")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The expected sha256 (hex).
        expected: String,
        /// The sha256 found (hex).
        actual: String,
    },
    /// The GGUF file is invalid or lacks what is needed.
    #[error("gguf: {0}")]
    Gguf(String),
    /// The model's architecture is not supported.
    #[error("unsupported architecture `{0}` (supported: `llama`, `qwen2`)")]
    UnsupportedArchitecture(String),
    /// The tokenizer could not be built or failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The chat template could not be rendered.
    #[error("chat template: {0}")]
    Template(String),
    /// The token mask failed, or allowed no token before the grammar accepted.
    #[error("token mask: {0}")]
    Mask(String),
    /// The prompt (plus generation) does not fit the model's context.
    #[error("{tokens} tokens exceed the context of {context} tokens")]
    ContextLength {
        /// Tokens needed.
        tokens: usize,
        /// The model's context.
        context: usize,
    },
    /// Candle failed: its message, without the backtrace Candle may append to it.
    #[error("candle: {0}")]
    Candle(String),
    /// A library the backend builds on failed; `source` is its error, kept for
    /// [`std::error::Error::source`].
    #[error("{what}: {source}")]
    Library {
        /// What was being done (`token mask`, `tokenizer`, `chat template`).
        what: &'static str,
        /// The library's error (llguidance's, tokenizers', minijinja's, serde_json's).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The prompt rendered to no token to feed.
    #[error("the prompt has no tokens to feed")]
    EmptyPrompt,
    /// A call the model's state does not allow: a forward pass with no tokens or at a position
    /// its cache does not hold, a rewind or a restore its weights cannot do.
    #[error("model state: {0}")]
    State(String),
    /// Candle could not read part of a GGUF file; `source` is its error (without the backtrace
    /// Candle may attach).
    #[error("gguf: {what}: {}", candle_message(source))]
    GgufRead {
        /// What was read (`tensor `blk.0.attn_q.weight``, `the header`).
        what: String,
        /// Candle's error.
        source: candle_core::Error,
    },
    /// The device cannot run the model: not a device name, a GPU in a build without the `cuda`
    /// feature, a GPU the driver cannot open, or an engine that does not run there.
    #[error("device: {0}")]
    Device(String),
    /// The decode was cancelled (its caller stopped waiting) after `tokens` generated tokens.
    #[error("the decode was cancelled after {tokens} tokens")]
    Cancelled {
        /// Tokens generated before it stopped.
        tokens: usize,
    },
    /// A model file that cannot be used: which file, and why.
    #[error("{}: {error}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        error: Box<LocalError>,
    },
}

impl From<candle_core::Error> for LocalError {
    fn from(e: candle_core::Error) -> Self {
        LocalError::Candle(candle_message(&e))
    }
}

impl LocalError {
    /// A library's error while doing `what`, its cause kept.
    pub(crate) fn library(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        LocalError::Library {
            what,
            source: source.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LocalError::Io {
            path: path.into(),
            source,
        }
    }

    /// This error as one about the file at `path` (unchanged when it names a file already).
    pub(crate) fn in_file(self, path: &std::path::Path) -> Self {
        match self {
            e @ (LocalError::Io { .. } | LocalError::File { .. }) => e,
            e => LocalError::File {
                path: path.to_path_buf(),
                error: Box::new(e),
            },
        }
    }
}

/// The message of a Candle error, without the backtrace Candle appends when `RUST_BACKTRACE` is
/// set (users read the message; the frames are Candle's, not theirs).
pub(crate) fn candle_message(e: &candle_core::Error) -> String {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } => candle_message(inner),
        E::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        other => other.to_string(),
    }
}

/// `e` without the backtraces Candle attaches when `RUST_BACKTRACE` is set, to be kept as a
/// cause ([`LocalError::GgufRead`]): the error's `Debug` then shows the error, not Candle's
/// frames.
pub(crate) fn without_backtrace(e: candle_core::Error) -> candle_core::Error {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } => without_backtrace(*inner),
        E::Context { inner, context } => E::Context {
            inner: Box::new(without_backtrace(*inner)),
            context,
        },
        E::WithPath { inner, path } => E::WithPath {
            inner: Box::new(without_backtrace(*inner)),
            path,
        },
        other => other,
    }
}

/// The [`BackendError`] a [`LocalError`] is reported as.
pub(crate) fn backend_error(e: LocalError) -> BackendError {
    match e {
        LocalError::ContextLength { tokens, context } => BackendError::ContextLength {
            prompt_tokens: tokens,
            context,
        },
        LocalError::Io { .. }
        | LocalError::Fetch(_)
        | LocalError::Checksum { .. }
        | LocalError::Gguf(_)
        | LocalError::GgufRead { .. }
        | LocalError::Device(_) => BackendError::Unavailable {
            message: e.to_string(),
        },
        LocalError::Template(_)
        | LocalError::Tokenizer(_)
        | LocalError::Library {
            what: "tokenizer" | "chat template",
            ..
        } => BackendError::InvalidRequest {
            message: e.to_string(),
        },
        _ => BackendError::Other {
            message: e.to_string(),
        },
    }
}

/// The text of a panic's payload, when it has one.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}
