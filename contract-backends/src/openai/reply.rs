//! Reading a reply: a chat completion read leniently (servers differ in which fields they
//! send) into a [`Response`], or a first token's `top_logprobs` for scoring. Apart from the
//! request and the sending, which never look inside the body.

use contract_core::extract::{BackendError, FinishReason, Response};
use serde::Deserialize;
use serde_json::Value;

use crate::http::{api_error, excerpt, reply_json, Failure, REFUSAL_PREFIX};

#[derive(Debug, Deserialize)]
struct Reply {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ReplyMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// Text from a content value: a string, or an array of `{type: text, text}` parts.
pub(super) fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::Null => Some(String::new()),
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        ),
        _ => None,
    }
}

pub(super) fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// A first token's most likely alternatives: `(token, logprob)`, most likely first.
pub(super) type TopList = Vec<(String, f64)>;

/// The first generated token's `top_logprobs` (`choices[0].logprobs.content[0]`), most likely
/// first; a reply without them is a `protocol` error.
pub(super) fn parse_top_logprobs(body: &[u8]) -> Result<Vec<(String, f64)>, Failure> {
    read_top_logprobs(body, |reply| BackendError::Protocol {
        message: format!(
            "the reply has no `choices[0].logprobs.content[0].top_logprobs` (does the server \
             support `logprobs`?): `{reply}`"
        ),
    })
}

/// [`parse_top_logprobs`] for [`Backend::score`]: a reply without them says the server cannot
/// score (`unsupported`).
pub(super) fn parse_top_logprobs_to_score(body: &[u8]) -> Result<Vec<(String, f64)>, Failure> {
    read_top_logprobs(body, |reply| BackendError::Unsupported {
        message: format!(
            "the server returns no log-probabilities (no \
             `choices[0].logprobs.content[0].top_logprobs` in its reply to `logprobs: true`), so \
             it cannot score answers: `{reply}`"
        ),
    })
}

/// The top list of a reply; `missing(excerpt of the reply)` is the error (not retried) when
/// the reply has none.
fn read_top_logprobs(
    body: &[u8],
    missing: impl FnOnce(String) -> BackendError,
) -> Result<Vec<(String, f64)>, Failure> {
    let value = reply_json(body)?;
    let first = value
        .pointer("/choices/0/logprobs/content/0/top_logprobs")
        .and_then(Value::as_array)
        .ok_or_else(|| Failure::fatal(missing(excerpt(&value.to_string(), 200))))?;
    let mut out: Vec<(String, f64)> = first
        .iter()
        .filter_map(|t| {
            let token = t.get("token")?.as_str()?.to_owned();
            let logprob = t.get("logprob")?.as_f64().filter(|l| !l.is_nan())?;
            Some((token, logprob))
        })
        .collect();
    if out.is_empty() {
        return Err(Failure::retry(
            BackendError::Protocol {
                message: "the reply's top_logprobs list is empty".into(),
            },
            None,
        ));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(out)
}

pub(super) fn parse_reply(body: &[u8]) -> Result<Response, Failure> {
    let value = reply_json(body)?;
    if value.get("error").is_some_and(|e| !e.is_null()) && value.get("choices").is_none() {
        let error = api_error(body);
        return Err(Failure::retry(
            BackendError::Protocol {
                message: format!("the server replied with an error: {}", error.message),
            },
            None,
        ));
    }
    let reply: Reply = serde_json::from_value(value).map_err(|e| {
        Failure::retry(
            BackendError::Protocol {
                message: format!("the reply is not a chat completion: {e}"),
            },
            None,
        )
    })?;
    let usage = reply.usage;
    let choice = reply.choices.into_iter().next().ok_or_else(|| {
        Failure::retry(
            BackendError::Protocol {
                message: "the reply has no choices".to_owned(),
            },
            None,
        )
    })?;
    let message = choice.message.unwrap_or_default();
    if let Some(refusal) = message.refusal.filter(|r| !r.trim().is_empty()) {
        return Err(Failure::fatal(BackendError::Other {
            message: format!("{REFUSAL_PREFIX}: {}", excerpt(&refusal, 500)),
        }));
    }
    let text = match &message.content {
        None => String::new(),
        Some(c) => content_text(c).ok_or_else(|| {
            Failure::retry(
                BackendError::Protocol {
                    message: format!(
                        "the message content is neither text nor text parts: {}",
                        excerpt(&c.to_string(), 80)
                    ),
                },
                None,
            )
        })?,
    };
    let reasoning = message
        .reasoning_content
        .or_else(|| match message.reasoning {
            Some(Value::String(s)) => Some(s),
            Some(Value::Object(o)) => o.get("content").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
        .filter(|r| !r.trim().is_empty());
    let tokens = |n: Option<u64>| n.map(|n| n.try_into().unwrap_or(u32::MAX));
    Ok(Response {
        text,
        reasoning,
        finish_reason: choice.finish_reason.as_deref().map(finish_reason),
        prompt_tokens: tokens(usage.as_ref().and_then(|u| u.prompt_tokens)),
        completion_tokens: tokens(usage.as_ref().and_then(|u| u.completion_tokens)),
        forward_calls: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies() {
        let ok = br#"{"choices":[{"message":{"role":"assistant","content":"{}","reasoning_content":"hmm"},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":3}}"#;
        let r = parse_reply(ok).unwrap();
        assert_eq!(r.text, "{}");
        assert_eq!(r.reasoning.as_deref(), Some("hmm"));
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (Some(12), Some(3)));
        let parts = br#"{"choices":[{"message":{"content":[{"type":"text","text":"{"},{"type":"text","text":"}"}],"reasoning":"r"},"finish_reason":"stop"}]}"#;
        let r = parse_reply(parts).unwrap();
        assert_eq!((r.text.as_str(), r.reasoning.as_deref()), ("{}", Some("r")));
        let refusal = br#"{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}"#;
        let f = parse_reply(refusal).unwrap_err();
        assert!(!f.retryable);
        assert!(
            f.error.to_string().starts_with(REFUSAL_PREFIX),
            "{}",
            f.error
        );
        for bad in [
            &b"{\"choices\":[{\"message\":{\"content\":\"{}\"}"[..],
            b"<html>oops</html>",
            b"{\"choices\":[]}",
        ] {
            let f = parse_reply(bad).unwrap_err();
            assert!(f.retryable);
            assert_eq!(f.error.kind(), "protocol");
        }
    }
}
