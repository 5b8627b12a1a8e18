//! Streaming: the server-sent `chat.completion.chunk`s put together into the [`Response`] the
//! unstreamed reply would have been, each content piece handed on as it arrives. Apart from
//! the one-body reply ([`super::reply`]), whose reading it mirrors chunk by chunk.

use contract_core::extract::{BackendError, Response};
use eventsource_stream::Event;
use reqwest::header::ACCEPT;
use serde_json::Value;

use super::client::OpenAiBackend;
use super::reply::{content_text, finish_reason, parse_reply};
use crate::http::{
    api_error, excerpt, is_event_stream, post_json, read_events, transport_failure, EventReader,
    Failure, Relay, REFUSAL_PREFIX,
};

impl OpenAiBackend {
    /// One streamed attempt: the reply's content handed on through `relay` as it arrives; a
    /// failure after a piece was handed on is final ([`Relay::guard`]).
    pub(super) async fn attempt_streaming(
        &self,
        body: &[u8],
        relay: &Relay<'_>,
    ) -> Result<Response, Failure> {
        let transport = |e: reqwest::Error| transport_failure(&e, self.timeout, &self.url);
        let read = async {
            let request = self
                .http
                .post(&self.url)
                .query(&self.query)
                .headers(self.headers.clone())
                .header(ACCEPT, "text/event-stream")
                .body(body.to_vec());
            let reply = post_json(request, self.timeout, &self.url).await?;
            let response = if is_event_stream(&reply) {
                let mut chunks = Chunks::default();
                read_events(reply.bytes_stream(), &mut chunks, relay, transport).await?;
                chunks.into_response()?
            } else {
                // A server that ignored `stream`: one completion.
                let bytes = reply.bytes().await.map_err(transport)?;
                parse_reply(&bytes)?
            };
            relay.finish(&response.text);
            Ok::<_, Failure>(response)
        };
        read.await.map_err(|f| relay.guard(f))
    }
}

/// A streamed completion being put together, chunk by chunk (`chat.completion.chunk` objects,
/// read leniently as replies are).
#[derive(Debug, Default)]
struct Chunks {
    text: String,
    reasoning: String,
    refusal: String,
    finish_reason: Option<String>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    events: usize,
}

/// A retried `protocol` failure.
fn protocol(message: String) -> Failure {
    Failure::retry(BackendError::Protocol { message }, None)
}

impl EventReader for Chunks {
    const END: &'static str = "data: [DONE]";

    fn feed(&mut self, event: &Event, relay: &Relay<'_>) -> Result<bool, Failure> {
        let data = event.data.trim();
        // Keep-alives and empty events.
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        self.events += 1;
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            protocol(format!(
                "chunk {} of the stream is not JSON ({e}): `{}`",
                self.events,
                excerpt(data, 80)
            ))
        })?;
        if !chunk.is_object() {
            return Err(protocol(format!(
                "chunk {} of the stream is not an object: `{}`",
                self.events,
                excerpt(data, 80)
            )));
        }
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            let error = api_error(data.as_bytes());
            return Err(protocol(format!(
                "the server sent an error mid-stream: {}",
                excerpt(&error.message, 300)
            )));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| usage.get(k).and_then(Value::as_u64);
            self.prompt_tokens = n("prompt_tokens").or(self.prompt_tokens);
            self.completion_tokens = n("completion_tokens").or(self.completion_tokens);
        }
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => return Ok(false),
            Some(Value::Array(choices)) => choices,
            Some(other) => {
                return Err(protocol(format!(
                    "chunk {}'s `choices` is not a list: {}",
                    self.events,
                    excerpt(&other.to_string(), 80)
                )))
            }
        };
        // The first choice (`n` is never asked for): index 0, or no index at all.
        let Some(choice) = choices
            .iter()
            .find(|c| c.get("index").is_none_or(|i| i.as_u64() == Some(0)))
        else {
            return Ok(false);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta").filter(|d| !d.is_null()) else {
            return Ok(false);
        };
        let text = |key: &str| -> Result<Option<String>, Failure> {
            match delta.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => content_text(v).map(Some).ok_or_else(|| {
                    protocol(format!(
                        "chunk {}'s `delta.{key}` is neither text nor text parts: {}",
                        self.events,
                        excerpt(&v.to_string(), 80)
                    ))
                }),
            }
        };
        if let Some(piece) = text("content")? {
            self.text.push_str(&piece);
            relay.piece(&piece);
        }
        if let Some(piece) = text("reasoning_content")? {
            self.reasoning.push_str(&piece);
        } else if let Some(Value::String(piece)) = delta.get("reasoning") {
            self.reasoning.push_str(piece);
        }
        if let Some(piece) = text("refusal")? {
            self.refusal.push_str(&piece);
        }
        Ok(false)
    }

    fn so_far(&self) -> String {
        format!(
            "{} chunks, {} characters of reply",
            self.events,
            self.text.chars().count()
        )
    }
}

impl Chunks {
    /// The response the whole stream makes, as [`parse_reply`] reads the same completion.
    fn into_response(self) -> Result<Response, Failure> {
        if !self.refusal.trim().is_empty() {
            return Err(Failure::fatal(BackendError::Other {
                message: format!("{REFUSAL_PREFIX}: {}", excerpt(&self.refusal, 500)),
            }));
        }
        let tokens = |n: Option<u64>| n.map(|n| n.try_into().unwrap_or(u32::MAX));
        Ok(Response {
            text: self.text,
            reasoning: Some(self.reasoning).filter(|r| !r.trim().is_empty()),
            finish_reason: self.finish_reason.as_deref().map(finish_reason),
            prompt_tokens: tokens(self.prompt_tokens),
            completion_tokens: tokens(self.completion_tokens),
            forward_calls: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract_core::extract::FinishReason;

    /// A stream of `chunks` as `data:` events, ended by `[DONE]` when `done`.
    fn sse(chunks: &[Value], done: bool) -> String {
        let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        if done {
            s.push_str("data: [DONE]\n\n");
        }
        s
    }

    /// `text` read in byte chunks of `size`, and the pieces handed on.
    fn read_sse(text: &str, size: usize) -> (Result<Response, Failure>, Vec<String>) {
        let pieces = std::sync::Mutex::new(Vec::new());
        let on_text = |p: &str| pieces.lock().unwrap().push(p.to_owned());
        let relay = Relay::new(&on_text);
        let stream = futures_util::stream::iter(
            text.as_bytes()
                .chunks(size)
                .map(|c| Ok::<_, std::convert::Infallible>(c.to_vec()))
                .collect::<Vec<_>>(),
        );
        let mut chunks = Chunks::default();
        let read = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(read_events(stream, &mut chunks, &relay, |e| match e {}))
            .and_then(|()| chunks.into_response());
        (read, pieces.into_inner().unwrap())
    }

    /// What a server streams for content `{"city": "Zürich", "n": 3}` with a reasoning trace.
    fn streamed() -> Vec<Value> {
        let mut out = vec![
            serde_json::json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}),
        ];
        for r in ["Zürich is ", "the city."] {
            out.push(serde_json::json!({"choices": [{"index": 0, "delta": {"reasoning_content": r}, "finish_reason": null}]}));
        }
        for piece in ["{\"city\": \"Z", "ürich\", ", "\"n\": 3}"] {
            out.push(serde_json::json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]}));
        }
        out.push(
            serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        out.push(serde_json::json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}));
        out
    }

    #[test]
    fn a_stream_reads_like_the_whole_reply_cut_anywhere() {
        let whole = parse_reply(br#"{"choices":[{"message":{"content":"{\"city\": \"Z\u00fcrich\", \"n\": 3}","reasoning_content":"Z\u00fcrich is the city."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3}}"#).unwrap();
        let text = sse(&streamed(), true);
        for size in [1, 2, 3, 7, 64, usize::MAX] {
            let (r, pieces) = read_sse(&text, size);
            assert_eq!(r.expect("read"), whole, "chunks of {size}");
            assert_eq!(
                pieces,
                ["{\"city\": \"Z", "ürich\", ", "\"n\": 3}"],
                "{size}"
            );
        }
        // Comments, empty events, an event whose JSON spans two `data:` lines, a repeated
        // role chunk, an empty content delta, CRLF and a second `[DONE]` change nothing.
        let chunks = streamed();
        let mut noisy = String::from(": keep-alive\r\n\r\ndata:\r\n\r\n");
        noisy.push_str(&sse(&chunks[..1], false).replace('\n', "\r\n"));
        noisy.push_str(&sse(&chunks[..1], false));
        noisy.push_str(&sse(
            &[serde_json::json!({"choices": [{"index": 0, "delta": {"content": ""}}]})],
            false,
        ));
        for c in &chunks[1..] {
            let c = c.to_string();
            // Split after the opening brace, where the joining newline is whitespace.
            let (a, b) = c.split_at(1);
            noisy.push_str(&format!("data: {a}\ndata: {b}\n\n: ping\n\ndata: \n\n"));
        }
        noisy.push_str("data: [DONE]\n\ndata: [DONE]\n\n");
        for size in [1, 5, usize::MAX] {
            let (r, pieces) = read_sse(&noisy, size);
            assert_eq!(r.expect("noisy"), whole, "noisy, chunks of {size}");
            assert_eq!(pieces.concat(), whole.text);
        }
        // `finish_reason: length`, no usage chunk (a server not asked for it).
        let mut short = streamed();
        short.pop();
        short.pop();
        short.push(
            serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        );
        let r = read_sse(&sse(&short, true), 4).0.expect("length");
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (None, None));
    }

    #[test]
    fn a_broken_stream_is_an_error_never_a_value() {
        let text = sse(&streamed(), true);
        let done = text.find("data: [DONE]").unwrap();
        let in_value = text.find("ürich").unwrap();
        for end in [0, 10, in_value, text.len() / 2, done, done + 8] {
            let (r, _) = read_sse(&text[..end], 3);
            let f = r.expect_err("cut");
            assert_eq!(f.error.kind(), "protocol", "{end}");
            assert!(
                f.error.to_string().contains("before `data: [DONE]`"),
                "{end}: {}",
                f.error
            );
        }
        let error = format!(
            "{}data: {}\n\n",
            &text[..text[..in_value].rfind("data:").unwrap()],
            serde_json::json!({"error": {"message": "the model crashed", "type": "server_error"}})
        );
        let (r, _) = read_sse(&error, 2);
        assert!(r
            .expect_err("error chunk")
            .error
            .to_string()
            .contains("the model crashed"),);
        for bad in [
            "data: {\"choices\": \n\n",
            "data: [1, 2]\n\n",
            "data: {\"choices\": 5}\n\n",
        ] {
            let (r, _) = read_sse(bad, 1);
            assert_eq!(r.expect_err(bad).error.kind(), "protocol", "{bad}");
        }
        let refusal = sse(
            &[
                serde_json::json!({"choices": [{"index": 0, "delta": {"refusal": "I can't."}, "finish_reason": "stop"}]}),
            ],
            true,
        );
        let f = read_sse(&refusal, 3).0.expect_err("refusal");
        assert!(!f.retryable);
        assert!(f.error.to_string().starts_with(REFUSAL_PREFIX));
    }
}
