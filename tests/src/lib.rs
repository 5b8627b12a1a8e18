//! Cross-crate tests live in `tests/`.

pub mod lossy;
pub mod openai_rules;
