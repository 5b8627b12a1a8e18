//! Think, then fill: a bounded reasoning block before the contract.
//!
//! A reasoning model writes a `<think> .. </think>` trace before its answer; under the
//! contract's mask alone it could not (the mask allows `{` first), and without a mask its
//! reply is not strict JSON (seed `000`: DeepSeek-R1 and QwQ-32B, 0/5 strict, 5/5
//! extractable). [`Think::wrap_lark`] puts a trace in front of any grammar in llguidance's Lark
//! syntax:
//!
//! ```text
//! start: "<think>" think_trace think_gap? think_fill
//! think_trace[lazy]: /(.|\n){0,B}<\/think>/
//! think_gap: /[ \t\r\n]{1,2}/
//! think_fill: <the contract's own start rule, unchanged>
//! ```
//!
//! The trace is free text that ends at the first `</think>` (a lazy lexeme, so the text
//! cannot hold the closing tag) and holds at most `B` characters
//! ([`Think::max_chars`]: [`Think::CHARS_PER_TOKEN`] a token of the cap, more than a tokenizer
//! writes on average), after which only `</think>` may follow: the bound every grammar engine
//! enforces (a server that takes the grammar). The local backend's mask caps the trace at
//! exactly `N` tokens on top of it (it counts them: llguidance's own `max_tokens=` lexeme option
//! was measured not to end a lazy lexeme here). Then the contract's grammar follows as it is:
//! its syntax, its grounded substring terminals and the rules it holds. The trace is not
//! optional: `<think>` is the first thing the mask allows (an empty trace, `<think></think>`,
//! is allowed).
//!
//! The record keeps the trace apart: the ladder ([`split_reasoning`](crate::parse::split_reasoning))
//! reads a reply `<think>..</think>{..}` into [`Parsed::reasoning`](crate::Parsed::reasoning) and
//! the value.

use serde::{Deserialize, Serialize};

use super::Grammar;
use crate::parse::think::{THINK_CLOSE, THINK_OPEN};

/// The reasoning block a model may write before the contract ([`Think::wrap_lark`]).
///
/// ```
/// use contract_core::grammar::Think;
///
/// let lark = Think::new(64).wrap_lark("start: %json {\"type\": \"object\"}").unwrap();
/// assert!(lark.starts_with("start: \"<think>\" think_trace think_gap? think_fill\n"));
/// assert!(lark.contains("think_trace[lazy]: /(.|\\n){0,512}<\\/think>/"));
/// assert!(lark.contains("think_fill: %json {\"type\": \"object\"}"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Think {
    /// Most tokens of the trace before its closing `</think>` (at least 1).
    pub max_tokens: u32,
}

impl Default for Think {
    fn default() -> Self {
        Think::DEFAULT
    }
}

/// The rule names [`Think::wrap_lark`] adds; a grammar that already uses one is not wrapped.
const RULES: [&str; 3] = ["think_trace", "think_gap", "think_fill"];

impl Think {
    /// A trace of at most 256 tokens.
    pub const DEFAULT: Think = Think { max_tokens: 256 };

    /// Characters a token of the cap stands for in the grammar's own bound
    /// ([`Think::max_chars`]): above the 3 to 5 characters a BPE token holds on average in
    /// prose, so the token cap binds first where it is counted.
    pub const CHARS_PER_TOKEN: u32 = 8;

    /// The grammar's bound on the trace, in characters: `max_tokens *`
    /// [`Think::CHARS_PER_TOKEN`].
    pub fn max_chars(self) -> u32 {
        self.max_tokens.max(1).saturating_mul(Self::CHARS_PER_TOKEN)
    }

    /// A trace of at most `max_tokens` tokens (at least 1: the closing tag).
    pub fn new(max_tokens: u32) -> Think {
        Think {
            max_tokens: max_tokens.max(1),
        }
    }

    /// The tokens a reply may spend on the trace and its tags: the cap, the tags and a gap (a
    /// decoder's token limit for the answer is raised by this much).
    pub fn overhead_tokens(self) -> u32 {
        self.max_tokens.max(1).saturating_add(16)
    }

    /// `lark` (an llguidance Lark grammar whose start rule is `start:`, as every grammar of
    /// this crate is) with the trace in front: its start rule renamed `think_fill`, a new start
    /// rule writing `<think>`, the trace, at most two whitespace characters, then `think_fill`.
    /// `None` when `lark` has no `start:` rule at the beginning of a line, or already names one
    /// of the rules added.
    pub fn wrap_lark(self, lark: &str) -> Option<String> {
        let at = if lark.starts_with("start:") {
            0
        } else {
            lark.find("\nstart:")? + 1
        };
        if RULES.iter().any(|r| defines(lark, r)) {
            return None;
        }
        let rest = &lark[at + "start:".len()..];
        let mut out = String::with_capacity(lark.len() + 160);
        out.push_str(&format!(
            "start: {open} think_trace think_gap? think_fill\n\
             think_trace[lazy]: /(.|\\n){{0,{n}}}{close}/\n\
             think_gap: /[ \\t\\r\\n]{{1,2}}/\n",
            open = lark_literal(THINK_OPEN),
            n = self.max_chars(),
            close = regex_escape(THINK_CLOSE),
        ));
        out.push_str(&lark[..at]);
        out.push_str("think_fill:");
        out.push_str(rest);
        Some(out)
    }
}

/// Whether `lark` defines a rule or terminal `name` (at the start of a line).
fn defines(lark: &str, name: &str) -> bool {
    lark.lines().any(|l| {
        l.strip_prefix(name)
            .is_some_and(|r| r.starts_with(':') || r.starts_with('['))
    })
}

/// `text` as a Lark string literal.
fn lark_literal(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// `text` escaped for a Lark `/regex/` (the slash included).
fn regex_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c == '/' || "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Grammar {
    /// The contract's grammar ([`Grammar::lark`]) with a reasoning block of at most
    /// `think.max_tokens` tokens in front ([`Think::wrap_lark`]). A grounded contract's masks
    /// wrap their first segment's grammar the same way (the local backend); a server that takes
    /// one grammar gets [`Think::wrap_lark`] of
    /// [`Grammar::static_grounded_lark`](Grammar::static_grounded_lark).
    pub fn think_then_fill(&self, think: Think) -> String {
        let lark = self.lark();
        // `lark()` is `start: %json {..}`: always wrappable.
        think.wrap_lark(&lark).unwrap_or(lark)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_the_start_rule_and_keeps_the_rest() {
        let lark = "start: a b\na: \"x\"\nb: /[0-9]+/\n";
        let out = Think::new(5).wrap_lark(lark).unwrap();
        assert_eq!(
            out,
            "start: \"<think>\" think_trace think_gap? think_fill\n\
             think_trace[lazy]: /(.|\\n){0,40}<\\/think>/\n\
             think_gap: /[ \\t\\r\\n]{1,2}/\n\
             think_fill: a b\na: \"x\"\nb: /[0-9]+/\n"
        );
        // A start rule further down is found; one that is missing, or a name clash, is not.
        let later = Think::new(5).wrap_lark("a: \"x\"\nstart: a\n").unwrap();
        assert!(later.ends_with("a: \"x\"\nthink_fill: a\n"), "{later}");
        assert_eq!(Think::new(5).wrap_lark("a: \"x\"\n"), None);
        assert_eq!(
            Think::new(5).wrap_lark("start: think_fill\nthink_fill: \"x\"\n"),
            None
        );
        // The cap is at least one token.
        assert!(Think::new(0).wrap_lark(lark).unwrap().contains("{0,8}<"));
    }

    #[test]
    fn a_contract_grammar_wraps() {
        #[derive(crate::Contract, serde::Serialize, serde::Deserialize)]
        struct Small {
            n: u8,
        }
        use crate::Contract;
        let g = Small::grammar();
        let out = g.think_then_fill(Think::new(32));
        assert!(out.starts_with("start: \"<think>\" think_trace"), "{out}");
        assert!(out.ends_with(&format!("think_fill: %json {}", g.schema())));
    }
}
