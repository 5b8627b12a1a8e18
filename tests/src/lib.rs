//! Cross-crate tests live in `tests/`.

pub mod openai_rules;
