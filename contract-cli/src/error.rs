//! Errors a person can act on, each with its exit code.

use std::fmt;
use std::path::Path;

/// What went wrong, and the exit code it gives (`contract --help` lists them).
#[derive(Debug)]
pub enum CliError {
    /// The schema cannot be read or cannot be a contract (exit 3).
    Schema(String),
    /// An input (documents, replies, rows) cannot be read (exit 4).
    Input(String),
    /// The model or the server cannot be set up (exit 5).
    Backend(String),
    /// The output cannot be written or resumed (exit 6).
    Output(String),
}

/// Exit codes, as `contract --help` documents them.
pub mod code {
    /// Every input has its row (or every checked reply is valid).
    pub const OK: u8 = 0;
    /// `check`: at least one reply does not fill the contract.
    pub const INVALID: u8 = 1;
    /// The schema cannot be read or is not a contract.
    pub const SCHEMA: u8 = 3;
    /// An input file cannot be read (a line that is not `{"id", "text"}`, a repeated id).
    pub const INPUT: u8 = 4;
    /// The model cannot be found or loaded, or the server cannot be set up.
    pub const BACKEND: u8 = 5;
    /// The output cannot be written or resumed.
    pub const OUTPUT: u8 = 6;
    /// Interrupted (Ctrl-C): the documents in flight have their rows; `--resume` finishes.
    pub const INTERRUPTED: u8 = 130;
}

impl CliError {
    /// The process exit code.
    pub fn code(&self) -> u8 {
        match self {
            CliError::Schema(_) => code::SCHEMA,
            CliError::Input(_) => code::INPUT,
            CliError::Backend(_) => code::BACKEND,
            CliError::Output(_) => code::OUTPUT,
        }
    }

    /// An input error about `path`.
    pub fn input(path: &Path, message: impl fmt::Display) -> CliError {
        CliError::Input(format!("{}: {message}", path.display()))
    }

    /// An output error about `path`.
    pub fn output(path: &Path, message: impl fmt::Display) -> CliError {
        CliError::Output(format!("{}: {message}", path.display()))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Schema(m) => write!(f, "schema: {m}"),
            CliError::Input(m) => write!(f, "input: {m}"),
            CliError::Backend(m) => write!(f, "model: {m}"),
            CliError::Output(m) => write!(f, "output: {m}"),
        }
    }
}

impl std::error::Error for CliError {}
