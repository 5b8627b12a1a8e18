//! Splitting a reasoning trace (`<think> .. </think>`) from the answer.

/// Opens a reasoning trace.
pub const THINK_OPEN: &str = "<think>";
/// Closes a reasoning trace.
pub const THINK_CLOSE: &str = "</think>";

/// A reply split into its reasoning trace and its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split<'a> {
    /// The trace, tags removed; `None` when the reply has none.
    pub reasoning: Option<&'a str>,
    /// Where the trace starts in the reply (byte offset of its text).
    pub reasoning_offset: usize,
    /// The answer after the trace; `None` when there is nothing after it (or the trace never
    /// ends).
    pub content: Option<&'a str>,
    /// Byte offset of `content` in the reply.
    pub content_offset: usize,
    /// Whether a trace was opened and never closed.
    pub unfinished: bool,
}

/// Splits `raw` into reasoning and answer.
///
/// Text before the first `</think>` is reasoning, with or without an opening `<think>` (chat
/// templates of reasoning models often put the opening tag in the prompt); braces and JSON inside
/// the trace are part of it. Leading whitespace before `<think>` is dropped. When
/// `starts_in_reasoning` is true (the template opened the trace), a reply without `</think>` is
/// all reasoning and unfinished; otherwise a reply without tags is all answer, and one that opens
/// `<think>` without closing it is unfinished.
pub fn split_reasoning(raw: &str, starts_in_reasoning: bool) -> Split<'_> {
    let lead = raw.len() - raw.trim_start().len();
    let opened_at = raw[lead..].starts_with(THINK_OPEN).then_some(lead);
    let body_start = opened_at.map_or(0, |at| at + THINK_OPEN.len());
    match raw[body_start..].find(THINK_CLOSE) {
        Some(i) => {
            let end = body_start + i;
            let after = end + THINK_CLOSE.len();
            let content = &raw[after..];
            Split {
                reasoning: Some(&raw[body_start..end]),
                reasoning_offset: body_start,
                content: (!content.is_empty()).then_some(content),
                content_offset: after,
                unfinished: false,
            }
        }
        None if opened_at.is_some() || starts_in_reasoning => Split {
            reasoning: Some(&raw[body_start..]),
            reasoning_offset: body_start,
            content: None,
            content_offset: raw.len(),
            unfinished: !raw[body_start..].is_empty() || opened_at.is_some(),
        },
        None => Split {
            reasoning: None,
            reasoning_offset: 0,
            content: (!raw.is_empty()).then_some(raw),
            content_offset: 0,
            unfinished: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits() {
        let s = split_reasoning("<think>a {\"x\": 1}</think>{\"y\": 2}", false);
        assert_eq!(s.reasoning, Some("a {\"x\": 1}"));
        assert_eq!(s.content, Some("{\"y\": 2}"));
        let s = split_reasoning("no tags {}", false);
        assert_eq!((s.reasoning, s.content), (None, Some("no tags {}")));
        let s = split_reasoning("trace</think>\n{}", false);
        assert_eq!((s.reasoning, s.content), (Some("trace"), Some("\n{}")));
        let s = split_reasoning("<think>never ends {}", false);
        assert!(s.unfinished);
        assert_eq!(s.content, None);
    }
}
