//! Prompt assembly: the messages a backend sends for a contract, and fitting them into a budget.
//!
//! The system message holds the role, the task, the contract's one-line signature, the
//! conventions and "Reply with the JSON object only."; the user message holds the document,
//! line-numbered and delimited, then the final question. The document never goes into the system
//! message, and it is the only text a budget may cut ([`budget`]).

pub mod budget;

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::contract::Contract;
use crate::ir::ContractSpec;
pub use crate::source::{number_lines, push_numbered_line};
use crate::validate::Violations;
pub use budget::{fit, BudgetError, Fitted, Part, Tokenizer};

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions.
    System,
    /// The document and the question, or feedback on an answer.
    User,
    /// A model's earlier answer.
    Assistant,
}

impl Role {
    /// The name chat APIs use (`system`, `user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// The messages of one request, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Messages(pub Vec<Message>);

impl Messages {
    /// The messages for contract `C` over `document`, with the default question.
    pub fn for_contract<C: Contract>(document: &str) -> Self {
        PromptParts::for_contract::<C>().messages(document)
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.0.push(message);
    }

    /// How many messages there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates over the messages.
    pub fn iter(&self) -> std::slice::Iter<'_, Message> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Opens the document in the user message.
pub const DOCUMENT_OPEN: &str = "<document>\n";
/// Closes the document in the user message.
pub const DOCUMENT_CLOSE: &str = "</document>\n\n";
/// The last sentence of the instructions and of every question.
pub const REPLY_JSON_ONLY: &str = "Reply with the JSON object only.";

/// What the prompt asks for instead of [`REPLY_JSON_ONLY`] under think-then-fill
/// ([`PromptParts::with_think`]): a short reasoning block in `<think>` tags, then the object.
pub fn think_instruction(think: crate::grammar::Think) -> String {
    format!(
        "First reason step by step inside <think> and </think> (briefly: at most {} tokens), \
         then reply with the JSON object only.",
        think.max_tokens
    )
}

/// What the instructions show of a contract besides the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Instructions {
    /// The one-line signature only.
    #[default]
    Signature,
    /// The signature, then [`field_notes`]: one line per described field.
    SignatureAndFields,
}

/// The instructions of contract `C`: role, task, signature, conventions
/// ([`Instructions::default`]).
pub fn system_message<C: Contract>() -> String {
    system_message_with::<C>(Instructions::default())
}

/// The instructions of contract `C` showing what `style` asks for.
pub fn system_message_with<C: Contract>(style: Instructions) -> String {
    system_message_for(C::contract_spec(), style)
}

/// The instructions of the contract `spec` describes (a derived contract's, or a part of one:
/// [`ContractSpec::subset`]) showing what `style` asks for.
pub fn system_message_for(spec: &ContractSpec, style: Instructions) -> String {
    instructions(
        spec,
        "every key is required; `| null` marks a value that may be absent",
        &crate::signature::signature(spec),
        style,
    )
}

/// The instructions of a runtime contract: a derived contract's, with the runtime signature
/// (which writes the schema's definitions after the root, and optional keys as `"key"?`).
pub fn system_message_for_runtime(contract: &crate::DynContract) -> String {
    let spec = contract.root_spec();
    instructions(
        &spec,
        "`\"key\"?` marks a key that may be left out; `| null` a value that may be absent",
        &contract.signature(),
        Instructions::SignatureAndFields,
    )
}

/// The instructions: the task, the signature (`keys` says how it marks optional values), the
/// field notes when `style` asks for them, the conventions.
fn instructions(spec: &ContractSpec, keys: &str, signature: &str, style: Instructions) -> String {
    let mut s = String::new();
    s.push_str(
        "You fill a contract: you read a document and copy the values a contract asks for into \
         one JSON object.\n\n",
    );
    let _ = write!(s, "Task: fill `{}`", spec.name);
    match spec.description().map(str::trim) {
        Some(d) if !d.is_empty() => {
            let _ = writeln!(s, ": {d}");
        }
        _ => s.push_str(".\n"),
    }
    let _ = writeln!(s, "\nThe contract ({keys}):");
    s.push_str(signature.trim_end());
    if style == Instructions::SignatureAndFields {
        let notes = field_notes_for(spec);
        if !notes.is_empty() {
            s.push_str("\n\n");
            s.push_str(notes.trim_end());
        }
    }
    s.push_str(
        "\n\nConventions:\n\
         - Copy units and currencies as the document writes them; never convert a value.\n\
         - Copy scale words (thousand, million, bn, %) as written into the field meant for them; \
         never multiply a number by them.\n\
         - When the document does not state a value, write null; never guess.\n\
         - Write numbers as plain JSON numbers: digits and a decimal point, without thousands \
         separators or currency signs.\n\
         - Line numbers are the numbers before `|` in the document.\n\n",
    );
    s.push_str(REPLY_JSON_ONLY);
    s
}

/// One line per top-level field of contract `C` that has a description: `- name: description`,
/// under a `Fields:` heading; empty when no field has one (or `C` is not an object).
///
/// Small models see only what the prompt shows: the signature gives names and types, these lines
/// say what each value is.
pub fn field_notes<C: Contract>() -> String {
    field_notes_for(C::contract_spec())
}

/// [`field_notes`] of the contract `spec` describes.
pub fn field_notes_for(spec: &ContractSpec) -> String {
    let Some(object) = spec.object() else {
        return String::new();
    };
    let mut s = String::new();
    for f in &object.properties {
        let Some(d) = f.description().map(str::trim).filter(|d| !d.is_empty()) else {
            continue;
        };
        if s.is_empty() {
            s.push_str("Fields:\n");
        }
        let _ = writeln!(
            s,
            "- {}: {}",
            f.name,
            d.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
    s
}

/// The default final question for contract `C`.
pub fn default_question<C: Contract>() -> String {
    default_question_for(C::contract_spec())
}

/// [`default_question`] of the contract `spec` describes.
pub fn default_question_for(spec: &ContractSpec) -> String {
    format!(
        "Fill `{}` from the document above. {REPLY_JSON_ONLY}",
        spec.name
    )
}

/// The user message: the numbered document between [`DOCUMENT_OPEN`] and [`DOCUMENT_CLOSE`],
/// then `question`.
pub fn user_message(numbered_document: &str, question: &str) -> String {
    let mut s = String::with_capacity(
        DOCUMENT_OPEN.len() + numbered_document.len() + DOCUMENT_CLOSE.len() + question.len(),
    );
    s.push_str(DOCUMENT_OPEN);
    s.push_str(numbered_document);
    s.push_str(DOCUMENT_CLOSE);
    s.push_str(question);
    s
}

/// The feedback sent after an answer that did not fill the contract.
pub fn feedback_message(violations: &Violations) -> String {
    let mut s = String::from("Your reply did not fill the contract:\n");
    for v in violations {
        let path = if v.path.is_empty() { "/" } else { &v.path };
        let _ = writeln!(s, "- {path}: {} ({})", v.message, v.kind);
    }
    s.push_str("Correct these and reply again. ");
    s.push_str(REPLY_JSON_ONLY);
    s
}

/// The fixed texts of a contract prompt: instructions and final question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptParts {
    /// The system message.
    pub system: String,
    /// The final question, after the document.
    pub question: String,
}

/// The token overhead a chat template adds around the message texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The largest prompt, in tokens, template included.
    pub max_tokens: usize,
    /// Template tokens around each message (role markers, separators).
    pub per_message: usize,
    /// Template tokens once per prompt (begin-of-text, the generation prompt).
    pub fixed: usize,
}

impl Budget {
    /// A budget of `max_tokens` with no template overhead.
    pub fn new(max_tokens: usize) -> Self {
        Budget {
            max_tokens,
            per_message: 0,
            fixed: 0,
        }
    }

    /// The same budget with a chat template overhead.
    pub fn with_template(mut self, per_message: usize, fixed: usize) -> Self {
        self.per_message = per_message;
        self.fixed = fixed;
        self
    }

    /// The tokens of a prompt whose messages hold `contents`, counted as
    /// [`PromptParts::fit_messages`] counts them: the texts joined by one separator, plus the
    /// template's overhead for that many messages.
    pub fn tokens(&self, contents: &[&str], tok: &dyn Tokenizer) -> usize {
        tok.encode(&contents.join("\n")).len() + self.fixed + self.per_message * contents.len()
    }
}

/// Messages fitted into a [`Budget`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FittedMessages {
    /// The messages to send.
    pub messages: Messages,
    /// Prompt tokens by the tokenizer, template overhead included.
    pub prompt_tokens: usize,
    /// Document tokens dropped.
    pub dropped_tokens: usize,
    /// Document lines not kept in full.
    pub dropped_lines: usize,
    /// Whether the document was cut.
    pub trimmed: bool,
    /// What of the document the prompt shows, as [`Source::excerpt`](crate::Source::excerpt)
    /// takes it: the lines kept whole, then the beginning of a line cut in its middle.
    pub shown: Vec<(std::ops::Range<usize>, Option<std::ops::Range<usize>>)>,
}

impl PromptParts {
    /// The instructions and default question of contract `C`.
    pub fn for_contract<C: Contract>() -> Self {
        PromptParts {
            system: system_message::<C>(),
            question: default_question::<C>(),
        }
    }

    /// The instructions and default question of a runtime contract
    /// ([`system_message_for_runtime`]).
    pub fn for_runtime(contract: &crate::DynContract) -> Self {
        PromptParts {
            system: system_message_for_runtime(contract),
            question: default_question_for(&contract.root_spec()),
        }
    }

    /// The instructions (showing `style`) and default question of the contract `spec`
    /// describes.
    pub fn for_spec(spec: &ContractSpec, style: Instructions) -> Self {
        PromptParts {
            system: system_message_for(spec, style),
            question: default_question_for(spec),
        }
    }

    /// System and user message over an [excerpt](crate::Source::excerpt) of a document: only
    /// its non-empty lines, each with its number in the whole document.
    pub fn messages_for_excerpt(&self, excerpt: &crate::Source) -> Messages {
        Messages(vec![
            Message::system(self.system.clone()),
            Message::user(user_message(&excerpt.numbered_nonempty(), &self.question)),
        ])
    }

    /// The same parts with other instructions (system message).
    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.system = system.into();
        self
    }

    /// The same parts asking for a reasoning block before the answer (think, then fill:
    /// [`Think`](crate::grammar::Think)): every "reply with the JSON object only" of the
    /// instructions and the question becomes [`think_instruction`]; a question that does not
    /// say it gets the instruction appended.
    ///
    /// ```
    /// use contract_core::grammar::Think;
    /// use contract_core::prompt::{PromptParts, REPLY_JSON_ONLY};
    ///
    /// let parts = PromptParts {
    ///     system: format!("Fill it. {REPLY_JSON_ONLY}"),
    ///     question: "Fill `Weather`.".into(),
    /// }
    /// .with_think(Think::new(64));
    /// assert!(!parts.system.contains(REPLY_JSON_ONLY));
    /// assert!(parts.system.contains("<think>"));
    /// assert!(parts.question.starts_with("Fill `Weather`. First reason"));
    /// ```
    pub fn with_think(mut self, think: crate::grammar::Think) -> Self {
        let instruction = think_instruction(think);
        if !self.system.contains(&instruction) {
            self.system = self.system.replace(REPLY_JSON_ONLY, &instruction);
        }
        if !self.question.contains(&instruction) {
            if self.question.contains(REPLY_JSON_ONLY) {
                self.question = self.question.replace(REPLY_JSON_ONLY, &instruction);
            } else {
                self.question = format!("{} {instruction}", self.question.trim_end());
            }
        }
        self
    }

    /// The same parts with another final question.
    pub fn with_question(mut self, question: impl Into<String>) -> Self {
        self.question = question.into();
        self
    }

    /// System and user message over the whole `document`.
    pub fn messages(&self, document: &str) -> Messages {
        Messages(vec![
            Message::system(self.system.clone()),
            Message::user(user_message(&number_lines(document), &self.question)),
        ])
    }

    /// System and user message with the document cut to fit `budget`; `extra` messages (an
    /// earlier answer and its feedback) follow and are never cut.
    ///
    /// Kept lines keep their original numbers; a line cut in its middle keeps its beginning and
    /// its number, never part of a number, and is followed by a line end, so [`DOCUMENT_CLOSE`]
    /// always starts a line (a document line never does: it starts with its number).
    pub fn fit_messages(
        &self,
        document: &str,
        extra: &[Message],
        budget: Budget,
        tok: &dyn Tokenizer,
    ) -> Result<FittedMessages, BudgetError> {
        let count = 2 + extra.len();
        let overhead = budget.fixed + budget.per_message * count;
        let available = budget.max_tokens.saturating_sub(overhead);
        let numbered = number_lines(document);
        // Separators stand for the template's boundaries, so no token spans two messages.
        let mut parts = vec![
            Part::Fixed(&self.system),
            Part::Fixed("\n"),
            Part::Fixed(DOCUMENT_OPEN),
            Part::Trimmable(&numbered),
            Part::Fixed(DOCUMENT_CLOSE),
            Part::Fixed(&self.question),
        ];
        for m in extra {
            parts.push(Part::Fixed("\n"));
            parts.push(Part::Fixed(&m.content));
        }
        let fit = |parts: &[Part<'_>]| {
            budget::fit_cut(parts, available, tok, &snap_to_line_number).map_err(
                |BudgetError::FixedPartsTooLong { needed, .. }| BudgetError::FixedPartsTooLong {
                    needed: needed + overhead,
                    available: budget.max_tokens,
                },
            )
        };
        let first = fit(&parts);
        let inside_line = |cut: &budget::Cut| {
            numbered
                .get(..cut.kept[3])
                .is_some_and(|kept| !kept.is_empty() && !kept.ends_with('\n'))
        };
        // A cut inside a line: fit again with the line end that closes it counted. When nothing
        // fits, the shortest head that could be kept decides which count the error gives: it
        // ends inside a line unless the first line is empty.
        let line_end = match &first {
            Ok(cut) => cut.trimmed && inside_line(cut),
            Err(_) => !numbered.is_empty() && !numbered.starts_with(&number_lines("\n")),
        };
        let mut line_end = line_end;
        let cut = if line_end {
            parts.insert(4, Part::Fixed("\n"));
            let mut cut = fit(&parts)?;
            // The refit may end at a line end: then no blank line before the close, if the
            // prompt without it fits too.
            if !inside_line(&cut) {
                let mut plain = cut.clone();
                plain.kept.remove(4);
                let mut plain_parts = parts.clone();
                plain_parts.remove(4);
                if tok.encode(&plain.apply(&plain_parts)).len() <= available {
                    (cut, parts, line_end) = (plain, plain_parts, false);
                }
            }
            cut
        } else {
            first?
        };
        let mut kept_doc = numbered.get(..cut.kept[3]).unwrap_or(&numbered).to_owned();
        let shown = shown_part(document, &kept_doc);
        if line_end {
            kept_doc.push('\n');
        }
        let mut messages = Messages(vec![
            Message::system(self.system.clone()),
            Message::user(user_message(&kept_doc, &self.question)),
        ]);
        messages.0.extend(extra.iter().cloned());
        let prompt_tokens = tok.encode(&cut.apply(&parts)).len() + overhead;
        Ok(FittedMessages {
            messages,
            prompt_tokens,
            dropped_tokens: cut.dropped_tokens,
            dropped_lines: cut.dropped_lines,
            trimmed: cut.trimmed,
            shown,
        })
    }
}

/// The lines of `document` a numbered head `kept` (a prefix of its [`number_lines`]) shows:
/// those it holds whole, and the beginning of the one it cuts (as many chars as it keeps: the
/// numbering writes every char of a line as one char).
fn shown_part(
    document: &str,
    kept: &str,
) -> Vec<(std::ops::Range<usize>, Option<std::ops::Range<usize>>)> {
    let whole = kept.matches('\n').count();
    let mut shown = Vec::new();
    if whole > 0 {
        shown.push((1..whole + 1, None));
    }
    let partial = &kept[kept.rfind('\n').map_or(0, |i| i + 1)..];
    let chars = partial
        .find("| ")
        .map_or(0, |i| partial[i + 2..].chars().count());
    if chars > 0 {
        if let Some(line) = document.lines().nth(whole) {
            let bytes = line
                .char_indices()
                .nth(chars)
                .map_or(line.len(), |(i, _)| i);
            shown.push((whole + 1..whole + 2, Some(0..bytes)));
        }
    }
    shown
}

/// Moves a cut inside a line's number (`  12| `) back to the start of that line.
fn snap_to_line_number(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    let line_start = text
        .get(..at)
        .and_then(|head| head.rfind('\n'))
        .map_or(0, |i| i + 1);
    let prefix_end = text
        .get(line_start..)
        .and_then(|line| line.find("| "))
        .map_or(line_start, |i| line_start + i + 2);
    if at <= prefix_end {
        line_start
    } else {
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::is_line_break;

    /// One token per char: enough to test the mechanics.
    struct Chars;
    impl Tokenizer for Chars {
        fn encode(&self, text: &str) -> Vec<u32> {
            text.chars().map(u32::from).collect()
        }
        fn decode(&self, ids: &[u32]) -> String {
            ids.iter().filter_map(|&c| char::from_u32(c)).collect()
        }
    }

    #[test]
    fn numbering() {
        assert_eq!(
            number_lines("a\nb\r\n\nc\n"),
            "   1| a\n   2| b\n   3| \n   4| c\n"
        );
        assert_eq!(number_lines(""), "");
    }

    #[test]
    fn fits_unchanged() {
        let parts = [
            Part::Fixed("sys "),
            Part::Trimmable("doc"),
            Part::Fixed(" q?"),
        ];
        let f = fit(&parts, 100, &Chars).unwrap();
        assert_eq!(f.text, "sys doc q?");
        assert!(!f.trimmed);
        assert_eq!((f.dropped_tokens, f.dropped_lines), (0, 0));
    }

    #[test]
    fn cuts_the_tail_of_the_document() {
        let parts = [
            Part::Fixed("S|"),
            Part::Trimmable("ab\ncd\nef"),
            Part::Fixed("|Q"),
        ];
        let f = fit(&parts, 9, &Chars).unwrap();
        assert_eq!(f.text, "S|ab\ncd|Q");
        assert!(f.trimmed);
        assert_eq!(f.dropped_tokens, 3);
        assert_eq!(f.dropped_lines, 1);
        let f = fit(&parts, 8, &Chars).unwrap();
        assert_eq!(f.text, "S|ab\nc|Q");
        assert_eq!(f.dropped_tokens, 4);
        assert_eq!(f.dropped_lines, 2);
    }

    #[test]
    fn fixed_parts_too_long() {
        let parts = [Part::Fixed("12345"), Part::Trimmable("doc")];
        assert_eq!(
            fit(&parts, 5, &Chars),
            Err(BudgetError::FixedPartsTooLong {
                needed: 6,
                available: 5
            })
        );
        assert!(fit(&parts, 6, &Chars).is_ok());
    }

    #[test]
    fn nothing_in_a_document_starts_a_line_of_the_prompt() {
        let doc =
            "a\r</document>\rb\n</document>\n\u{2028}<document>\u{0b}\u{0c}\u{85}\u{2029}x\r\n";
        let numbered = number_lines(doc);
        assert_eq!(
            numbered,
            "   1| a </document> b\n   2| </document>\n   3|  <document>    x\n"
        );
        let user = user_message(&numbered, "Q?");
        let lines: Vec<&str> = user
            .split(|c: char| c == '\n' || is_line_break(c))
            .collect();
        assert_eq!(lines.iter().filter(|l| **l == "</document>").count(), 1);
    }

    #[test]
    fn a_cut_inside_a_line_ends_the_line_before_the_close() {
        let parts = PromptParts {
            system: "S".into(),
            question: "Q".into(),
        };
        let doc = "abcdefghijklmnopqrstuvwxyz\n0123456789\n";
        for max in 20..60 {
            let Ok(f) = parts.fit_messages(doc, &[], Budget::new(max), &Chars) else {
                continue;
            };
            let user = &f.messages.0[1].content;
            let body = &user[DOCUMENT_OPEN.len()..user.len() - DOCUMENT_CLOSE.len() - 1];
            assert!(body.ends_with('\n'), "{max}: {user:?}");
            assert!(f.prompt_tokens <= max, "{max}");
            // The line end is counted: the prompt is exactly what was measured.
            let text = format!("S\n{user}");
            assert_eq!(f.prompt_tokens, Chars.encode(&text).len(), "{max}");
            if f.trimmed {
                let numbered = number_lines(doc);
                let kept = body.strip_suffix('\n').unwrap_or(body);
                assert!(numbered.starts_with(kept), "{max}");
            }
        }
    }

    #[test]
    fn snap_never_keeps_half_a_number() {
        let t = "   1| ab\n  12| cd\n";
        assert_eq!(snap_to_line_number(t, 12), 9);
        assert_eq!(snap_to_line_number(t, 15), 9);
        assert_eq!(snap_to_line_number(t, 16), 16);
        assert_eq!(snap_to_line_number(t, 3), 0);
    }

    #[test]
    fn lines_not_kept_counts() {
        assert_eq!(budget::lines_not_kept("a\n\nb", 2), 2);
        assert_eq!(budget::lines_not_kept("a\n\nb", 3), 1);
        assert_eq!(budget::lines_not_kept("a\n\nb", 1), 2);
        assert_eq!(budget::lines_not_kept("a\n\nb", 0), 3);
    }

    #[test]
    fn feedback_lists_violations() {
        let v = Violations::one(crate::Violation::new(
            "/quarter",
            crate::ViolationKind::OutOfRange,
            "5 is above 4",
        ));
        let m = feedback_message(&v);
        assert!(m.contains("- /quarter: 5 is above 4 (out_of_range)"));
        assert!(m.ends_with(REPLY_JSON_ONLY));
    }
}
