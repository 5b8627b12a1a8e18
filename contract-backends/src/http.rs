//! What the HTTP backends share (OpenAI-compatible and Anthropic): bounded retries with
//! backoff and `Retry-After`, the mapping of HTTP statuses, transport errors and error bodies to
//! [`BackendError`]s, the attempt count in the final error, and the reading of streamed replies
//! (server-sent events, each piece of text handed on as it arrives).

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use contract_core::extract::BackendError;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use reqwest::StatusCode;
use serde_json::Value;

/// How the message of a refusal error starts.
pub const REFUSAL_PREFIX: &str = "the model refused";

/// Bounded retries with exponential backoff and jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: no retry).
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles with each retry.
    pub base_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// The longest `Retry-After` to wait for; a longer one ends the retries at once.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// 4 retries, 500 ms doubling up to 20 s, `Retry-After` up to 60 s.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (0 for the first), or `None` when the server asked
    /// for a wait longer than [`max_retry_after`](Self::max_retry_after).
    ///
    /// Without `retry_after`: "equal jitter", half of `min(base * 2^retry, max)` plus a random
    /// part of the other half. With it: that wait plus up to `base_delay` of jitter, so clients
    /// told the same time do not all come back at once.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(wait) = retry_after {
            if wait > self.max_retry_after {
                return None;
            }
            return Some(wait + self.base_delay.mul_f64(random_unit()));
        }
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.min(31)))
            .min(self.max_delay);
        Some(exp / 2 + (exp / 2).mul_f64(random_unit()))
    }
}

/// A uniform number in `[0, 1)`; the randomness of std's hasher keys is enough for jitter.
fn random_unit() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Reads a `Retry-After` value: seconds (`"2"`, `"1.5"`) or an HTTP date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`, a date in the past meaning no wait), relative to `now`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let now = chrono::DateTime::<chrono::Utc>::from(now);
    let wait = date.with_timezone(&chrono::Utc) - now;
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// The wait a reply asks for: `retry-after-ms` (OpenAI) or `Retry-After`.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    header("retry-after").and_then(|v| parse_retry_after(v, SystemTime::now()))
}

/// A name the API accepts for the schema: `[A-Za-z0-9_-]{1,64}`.
pub(crate) fn schema_name(contract: &str) -> String {
    let name: String = contract
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "contract".to_owned()
    } else {
        name
    }
}

/// An error with its source chain (`error sending request: connection closed before message
/// completed`).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !s.contains(&text) {
            let _ = write!(s, ": {text}");
        }
        source = cause.source();
    }
    s
}

/// At most `n` characters of `text`, on one line.
pub(crate) fn excerpt(text: &str, n: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let trimmed = one_line.trim();
    match trimmed.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &trimmed[..i]),
        None => trimmed.to_owned(),
    }
}

/// One failed attempt: the error, whether to retry, and the wait the server asked for.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) error: BackendError,
    pub(crate) retryable: bool,
    pub(crate) retry_after: Option<Duration>,
}

impl Failure {
    pub(crate) fn retry(error: BackendError, retry_after: Option<Duration>) -> Self {
        Failure {
            error,
            retryable: true,
            retry_after,
        }
    }

    pub(crate) fn fatal(error: BackendError) -> Self {
        Failure {
            error,
            retryable: false,
            retry_after: None,
        }
    }

    /// The error to report after `attempts` attempts over `elapsed` (counted in messages, or in
    /// the fields of the kinds that have them).
    pub(crate) fn into_error(self, attempts: u32, elapsed: Duration) -> BackendError {
        let elapsed_ms = elapsed.as_millis().try_into().unwrap_or(u64::MAX);
        let count = |message: String| {
            let plural = if attempts == 1 { "" } else { "s" };
            format!("{message} (after {attempts} attempt{plural})")
        };
        match self.error {
            BackendError::Unavailable { message } => BackendError::Unavailable {
                message: count(message),
            },
            BackendError::Protocol { message } => BackendError::Protocol {
                message: count(message),
            },
            BackendError::InvalidRequest { message } => BackendError::InvalidRequest {
                message: count(message),
            },
            BackendError::Other { message } => BackendError::Other {
                message: count(message),
            },
            BackendError::Timeout { after_ms, .. } => BackendError::Timeout {
                after_ms,
                attempts,
                elapsed_ms,
            },
            BackendError::RateLimited { retry_after_ms, .. } => BackendError::RateLimited {
                retry_after_ms,
                attempts,
                elapsed_ms,
            },
            other => other,
        }
    }
}

/// The `error` object of an error reply, read leniently (OpenAI, vLLM and llama.cpp differ).
#[derive(Debug, Default)]
pub(crate) struct ApiError {
    pub(crate) message: String,
    kind: Option<String>,
    code: Option<String>,
    raw: Value,
}

pub(crate) fn api_error(body: &[u8]) -> ApiError {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return ApiError {
            message: excerpt(&String::from_utf8_lossy(body), 300),
            ..ApiError::default()
        };
    };
    let error = match value.get("error") {
        Some(Value::String(s)) => {
            return ApiError {
                message: s.clone(),
                raw: value.clone(),
                ..ApiError::default()
            }
        }
        Some(e @ Value::Object(_)) => e.clone(),
        _ => value.clone(),
    };
    let text = |k: &str| match error.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    ApiError {
        message: text("message")
            .or_else(|| text("detail"))
            .unwrap_or_else(|| excerpt(&value.to_string(), 300)),
        kind: text("type"),
        code: text("code"),
        raw: error,
    }
}

impl ApiError {
    fn mentions(&self, needle: &str) -> bool {
        [&self.kind, &self.code]
            .into_iter()
            .flatten()
            .any(|s| s.contains(needle))
    }
}

/// The number right after `phrase` in `text` (`"maximum context length is 4096 tokens"`).
fn number_after(text: &str, phrase: &str) -> Option<usize> {
    let start = text.find(phrase)? + phrase.len();
    let digits: String = text[start..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    digits.parse().ok()
}

/// A context-length error, when the reply names both numbers (OpenAI, vLLM, llama.cpp or
/// Anthropic style: `prompt is too long: 210012 tokens > 200000 maximum`).
fn context_length(error: &ApiError) -> Option<BackendError> {
    let field = |k: &str| error.raw.get(k).and_then(Value::as_u64).map(|n| n as usize);
    let lower = error.message.to_ascii_lowercase();
    if let (Some(prompt), Some(context)) = (
        number_after(&lower, "prompt is too long:"),
        number_after(&lower, "tokens >"),
    ) {
        return Some(BackendError::ContextLength {
            prompt_tokens: prompt,
            context,
        });
    }
    let context = field("n_ctx").or_else(|| number_after(&lower, "maximum context length is"))?;
    let prompt = field("n_prompt_tokens")
        .or_else(|| number_after(&lower, "resulted in"))
        .or_else(|| number_after(&lower, "you requested"))?;
    Some(BackendError::ContextLength {
        prompt_tokens: prompt,
        context,
    })
}

/// `HTTP 503 Service Unavailable`; Anthropic's 529 is `HTTP 529 Overloaded`.
pub(crate) fn status_label(status: StatusCode) -> String {
    let reason = status
        .canonical_reason()
        .or((status.as_u16() == 529).then_some("Overloaded"));
    match reason {
        Some(reason) => format!("HTTP {} {reason}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    }
}

/// The failure an error status means (with the reply's body and `Retry-After` wait): whether it is
/// retried, and which [`BackendError`] it is.
pub(crate) fn status_failure(status: StatusCode, wait: Option<Duration>, body: &[u8]) -> Failure {
    let error = api_error(body);
    let what = format!("{}: {}", status_label(status), excerpt(&error.message, 300));
    match status.as_u16() {
        429 if error.mentions("insufficient_quota") => Failure::fatal(BackendError::Unavailable {
            message: format!("insufficient quota ({what})"),
        }),
        429 => Failure::retry(
            BackendError::RateLimited {
                retry_after_ms: wait.map(|d| d.as_millis().try_into().unwrap_or(u64::MAX)),
                attempts: 1,
                elapsed_ms: 0,
            },
            wait,
        ),
        // llama-cpp-python's server answers a body it cannot validate (a `response_format` type
        // it does not know) with HTTP 500 and the validation error; retrying cannot help.
        500 if error.message.contains("validation error") && error.message.contains("('body'") => {
            Failure::fatal(BackendError::InvalidRequest {
                message: format!("the server refused the request body ({what})"),
            })
        }
        408 | 409 | 425 | 500..=599 => {
            Failure::retry(BackendError::Unavailable { message: what }, wait)
        }
        401 | 403 => Failure::fatal(BackendError::Unavailable {
            message: format!("not authorised, check the API key ({what})"),
        }),
        404 => Failure::fatal(BackendError::Unavailable {
            message: format!("not found, check the base URL and the model name ({what})"),
        }),
        400 | 413 | 422 => Failure::fatal(
            context_length(&error).unwrap_or(BackendError::InvalidRequest { message: what }),
        ),
        400..=499 => Failure::fatal(BackendError::InvalidRequest { message: what }),
        _ => Failure::fatal(BackendError::Protocol {
            message: format!("unexpected {what}"),
        }),
    }
}

/// A 2xx body as JSON; a body that is not JSON is a retryable `protocol` failure.
pub(crate) fn reply_json(body: &[u8]) -> Result<Value, Failure> {
    serde_json::from_slice(body).map_err(|e| {
        Failure::retry(
            BackendError::Protocol {
                message: format!(
                    "the reply is not JSON ({e}; {} bytes, starting `{}`)",
                    body.len(),
                    excerpt(&String::from_utf8_lossy(body), 80)
                ),
            },
            None,
        )
    })
}

/// Runs `attempt` until it succeeds, fails for good, or `policy` allows no more retries,
/// waiting between attempts as `policy` says (the server's `Retry-After` first); the error
/// counts the attempts made and the time they took.
pub(crate) async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    mut attempt: F,
) -> Result<T, BackendError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let started = Instant::now();
    let mut retries = 0u32;
    loop {
        let failure = match attempt().await {
            Ok(reply) => return Ok(reply),
            Err(failure) => failure,
        };
        if !failure.retryable || retries >= policy.max_retries {
            return Err(failure.into_error(retries + 1, started.elapsed()));
        }
        let Some(wait) = policy.delay(retries, failure.retry_after) else {
            return Err(failure.into_error(retries + 1, started.elapsed()));
        };
        tokio::time::sleep(wait).await;
        retries += 1;
    }
}

/// A transport error of one attempt against `url` with the per-attempt `timeout`: a timeout, a
/// refused or reset connection, or a body cut off (all retried), or a request that cannot be
/// built (not retried).
pub(crate) fn transport_failure(e: &reqwest::Error, timeout: Duration, url: &str) -> Failure {
    let detail = chain(e);
    let error = if e.is_timeout() {
        // One attempt so far; the retry loop fills in the count and the time of all of them.
        BackendError::Timeout {
            after_ms: timeout.as_millis().try_into().unwrap_or(u64::MAX),
            attempts: 1,
            elapsed_ms: 0,
        }
    } else if e.is_builder() {
        return Failure::fatal(BackendError::InvalidRequest {
            message: format!("cannot build the request for {url}: {detail}"),
        });
    } else if e.is_connect() {
        BackendError::Unavailable {
            message: format!("cannot connect to {url}: {detail}"),
        }
    } else if e.is_body() || e.is_decode() {
        BackendError::Protocol {
            message: format!("the response body was cut off: {detail}"),
        }
    } else {
        BackendError::Unavailable {
            message: format!("the connection failed before a reply: {detail}"),
        }
    };
    Failure::retry(error, None)
}

/// Sends one attempt: `request` with a JSON content type and the per-attempt `timeout`; the
/// reply when its status is a success, else the failure its status and body mean (the body read
/// whole).
pub(crate) async fn post_json(
    request: reqwest::RequestBuilder,
    timeout: Duration,
    url: &str,
) -> Result<reqwest::Response, Failure> {
    let transport = |e: reqwest::Error| transport_failure(&e, timeout, url);
    let reply = request
        .header(CONTENT_TYPE, "application/json")
        .timeout(timeout)
        .send()
        .await
        .map_err(transport)?;
    let status = reply.status();
    if status.is_success() {
        return Ok(reply);
    }
    let wait = retry_after(reply.headers());
    let bytes = reply.bytes().await.map_err(transport)?;
    Err(status_failure(status, wait, &bytes))
}

/// Whether a reply is a server-sent event stream (`Content-Type: text/event-stream`).
pub(crate) fn is_event_stream(reply: &reqwest::Response) -> bool {
    reply
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// Hands the text of a streamed reply on as it arrives ([`Backend::complete_streaming`]'s
/// `on_text`), and remembers what it handed on: once a piece is out it cannot be taken back, so
/// a failure after it is not retried ([`Relay::guard`]).
///
/// [`Backend::complete_streaming`]: contract_core::extract::Backend::complete_streaming
pub(crate) struct Relay<'a> {
    on_text: Option<&'a (dyn Fn(&str) + Send + Sync)>,
    handed: std::sync::Mutex<String>,
}

impl<'a> Relay<'a> {
    /// A relay that hands pieces to `on_text`.
    pub(crate) fn new(on_text: &'a (dyn Fn(&str) + Send + Sync)) -> Self {
        Relay {
            on_text: Some(on_text),
            handed: std::sync::Mutex::default(),
        }
    }

    /// A relay that hands nothing on (a streamed reply read for [`Backend::complete`]): every
    /// failure stays retryable.
    ///
    /// [`Backend::complete`]: contract_core::extract::Backend::complete
    #[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
    pub(crate) fn silent() -> Self {
        Relay {
            on_text: None,
            handed: std::sync::Mutex::default(),
        }
    }

    fn handed(&self) -> std::sync::MutexGuard<'_, String> {
        self.handed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `piece` on (an empty piece is not handed).
    pub(crate) fn piece(&self, piece: &str) {
        let Some(on_text) = self.on_text else { return };
        if piece.is_empty() {
            return;
        }
        self.handed().push_str(piece);
        on_text(piece);
    }

    /// Characters handed on so far.
    pub(crate) fn handed_chars(&self) -> usize {
        self.handed().chars().count()
    }

    /// At the end of a whole reply whose text is `text`: hands on the part of it not handed yet
    /// (all of it for a reply that did not stream, `{}` for an empty tool input), so the pieces
    /// make `text`. Pieces that are not the start of `text` (a server that sent content blocks
    /// out of order) cannot be mended: nothing more is handed then.
    pub(crate) fn finish(&self, text: &str) {
        let rest = {
            let handed = self.handed();
            match text.strip_prefix(handed.as_str()) {
                Some(rest) => rest.to_owned(),
                None => return,
            }
        };
        self.piece(&rest);
    }

    /// `failure`, made final when pieces were handed on already: the caller has read them as
    /// the start of the reply, and a new attempt would start another.
    pub(crate) fn guard(&self, failure: Failure) -> Failure {
        let chars = self.handed_chars();
        if chars == 0 || !failure.retryable {
            return failure;
        }
        let note = format!("; not retried: {chars} characters of the reply were already handed on");
        let error = match failure.error {
            BackendError::Unavailable { message } => BackendError::Unavailable {
                message: message + &note,
            },
            BackendError::Protocol { message } => BackendError::Protocol {
                message: message + &note,
            },
            BackendError::Other { message } => BackendError::Other {
                message: message + &note,
            },
            other => other,
        };
        Failure::fatal(error)
    }
}

/// A reader of one streamed reply's server-sent events.
pub(crate) trait EventReader {
    /// What ends a whole reply (`message_stop`, `data: [DONE]`), for the error of a stream that
    /// ends without it.
    const END: &'static str;

    /// Reads one event (its text is handed on through `relay`); `true` when it ends the reply.
    fn feed(&mut self, event: &Event, relay: &Relay<'_>) -> Result<bool, Failure>;

    /// What was read so far, for an error (`12 events, 40 characters of reply`).
    fn so_far(&self) -> String;
}

/// Reads a server-sent event stream of byte chunks (cut anywhere; comments, keep-alives and
/// CRLF line ends handled by `eventsource-stream`) into `reader`, until it says the reply is
/// whole; `transport` maps an error of the underlying stream. A stream that ends first is a
/// retryable `protocol` failure, never a shorter reply.
pub(crate) async fn read_events<R, S, B, E>(
    stream: S,
    reader: &mut R,
    relay: &Relay<'_>,
    transport: impl Fn(E) -> Failure,
) -> Result<(), Failure>
where
    R: EventReader,
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    let mut events = std::pin::pin!(stream.eventsource());
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(EventStreamError::Transport(e)) => {
                let mut failure = transport(e);
                if let BackendError::Protocol { message } | BackendError::Unavailable { message } =
                    &mut failure.error
                {
                    message.push_str(&format!(" (mid-stream, after {})", reader.so_far()));
                }
                return Err(failure);
            }
            Err(EventStreamError::Utf8(e)) => {
                return Err(Failure::retry(
                    BackendError::Protocol {
                        message: format!("the event stream is not UTF-8: {e}"),
                    },
                    None,
                ))
            }
            Err(EventStreamError::Parser(e)) => {
                return Err(Failure::retry(
                    BackendError::Protocol {
                        message: format!("the reply is not a server-sent event stream: {e}"),
                    },
                    None,
                ))
            }
        };
        if reader.feed(&event, relay)? {
            return Ok(());
        }
    }
    Err(Failure::retry(
        BackendError::Protocol {
            message: format!(
                "the event stream ended before `{}` ({}): the reply is incomplete",
                R::END,
                reader.so_far()
            ),
        },
        None,
    ))
}

/// The builder methods every HTTP backend's builder has, over its fields `timeout`,
/// `connect_timeout` and `retry`.
macro_rules! http_builder_methods {
    () => {
        /// The limit for one HTTP attempt, from connecting to the end of the body (default
        /// 120 s).
        pub fn timeout(mut self, timeout: Duration) -> Self {
            self.timeout = timeout;
            self
        }

        /// The limit for connecting (default 10 s).
        pub fn connect_timeout(mut self, timeout: Duration) -> Self {
            self.connect_timeout = timeout;
            self
        }

        /// The retry policy (default [`RetryPolicy::default`]).
        pub fn retry(mut self, retry: RetryPolicy) -> Self {
            self.retry = retry;
            self
        }

        /// Shorthand for the retry count, keeping the other retry settings.
        pub fn max_retries(mut self, n: u32) -> Self {
            self.retry.max_retries = n;
            self
        }
    };
}
pub(crate) use http_builder_methods;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 2015-10-21 07:28:00
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);

        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    #[test]
    fn backoff_grows_is_jittered_and_bounded() {
        let p = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(5),
        };
        for retry in 0..10 {
            let exp = (100u64 << retry).min(1000);
            let d = p.delay(retry, None).unwrap().as_millis() as u64;
            assert!(
                d >= exp / 2 && d <= exp,
                "retry {retry}: {d} ms not in {exp}/2..={exp}"
            );
        }
        let waits: std::collections::HashSet<_> = (0..20).map(|_| p.delay(3, None)).collect();
        assert!(waits.len() > 1, "no jitter");
        let d = p.delay(0, Some(Duration::from_secs(2))).unwrap();
        assert!(d >= Duration::from_secs(2) && d <= Duration::from_millis(2100));
        assert_eq!(p.delay(0, Some(Duration::from_secs(6))), None);
    }

    #[test]
    fn status_mapping() {
        let f = status_failure(
            StatusCode::TOO_MANY_REQUESTS,
            Some(Duration::from_secs(1)),
            b"{}",
        );
        assert!(f.retryable);
        assert_eq!(
            f.error,
            BackendError::RateLimited {
                retry_after_ms: Some(1000),
                attempts: 1,
                elapsed_ms: 0,
            }
        );
        let quota = br#"{"error":{"message":"quota","type":"insufficient_quota"}}"#;
        let f = status_failure(StatusCode::TOO_MANY_REQUESTS, None, quota);
        assert!(!f.retryable && f.error.kind() == "unavailable");
        let f = status_failure(StatusCode::SERVICE_UNAVAILABLE, None, b"<html>busy</html>");
        assert!(f.retryable);
        assert_eq!(f.error.kind(), "unavailable");
        assert!(f.error.to_string().contains("503"), "{}", f.error);
        let ctx = br#"{"error":{"message":"This model's maximum context length is 4,096 tokens. However, your messages resulted in 5000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        let f = status_failure(StatusCode::BAD_REQUEST, None, ctx);
        assert!(!f.retryable);
        assert_eq!(
            f.error,
            BackendError::ContextLength {
                prompt_tokens: 5000,
                context: 4096
            }
        );
        let llama = br#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error","n_prompt_tokens":900,"n_ctx":512}}"#;
        let f = status_failure(StatusCode::BAD_REQUEST, None, llama);
        assert_eq!(
            f.error,
            BackendError::ContextLength {
                prompt_tokens: 900,
                context: 512
            }
        );
        let bad = br#"{"error":{"message":"Invalid schema","type":"invalid_request_error"}}"#;
        let f = status_failure(StatusCode::BAD_REQUEST, None, bad);
        assert_eq!(f.error.kind(), "invalid_request");
        assert!(f.error.to_string().contains("Invalid schema"));
        assert_eq!(
            status_failure(StatusCode::UNAUTHORIZED, None, b"")
                .error
                .kind(),
            "unavailable"
        );
        assert!(status_failure(StatusCode::BAD_GATEWAY, None, b"").retryable);
        // What llama-cpp-python 0.3.36's server answered to `response_format: json_schema`
        // (scripts/llama_server_check.sh): a 500 carrying a request-validation error.
        let refused = br#"{"error":{"message":"1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}","type":"internal_server_error","param":null,"code":null}}"#;
        let f = status_failure(StatusCode::INTERNAL_SERVER_ERROR, None, refused);
        assert!(!f.retryable);
        assert_eq!(f.error.kind(), "invalid_request");
        assert!(
            f.error.to_string().contains("response_format"),
            "{}",
            f.error
        );
        // Anthropic's error bodies: a prompt too long, and 529 (overloaded) is transient.
        let anthropic = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210012 tokens > 200000 maximum"}}"#;
        assert_eq!(
            status_failure(StatusCode::BAD_REQUEST, None, anthropic).error,
            BackendError::ContextLength {
                prompt_tokens: 210_012,
                context: 200_000
            }
        );
        let overloaded =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let f = status_failure(StatusCode::from_u16(529).unwrap(), None, overloaded);
        assert!(f.retryable);
        assert!(
            f.error
                .to_string()
                .contains("HTTP 529 Overloaded: Overloaded"),
            "{}",
            f.error
        );
        // Any other 500 is still transient.
        assert!(status_failure(StatusCode::INTERNAL_SERVER_ERROR, None, b"oops").retryable);
    }

    #[test]
    fn attempts_counted_in_messages() {
        let f = Failure::retry(
            BackendError::Unavailable {
                message: "HTTP 503".into(),
            },
            None,
        );
        assert_eq!(
            f.into_error(4, Duration::from_millis(900)).to_string(),
            "backend unavailable: HTTP 503 (after 4 attempts)"
        );
        let f = Failure::fatal(BackendError::Protocol {
            message: "x".into(),
        });
        assert_eq!(
            f.into_error(1, Duration::ZERO).to_string(),
            "protocol error: x (after 1 attempt)"
        );
        let f = status_failure(StatusCode::TOO_MANY_REQUESTS, None, b"{}");
        assert_eq!(
            f.into_error(5, Duration::from_millis(3_250)),
            BackendError::RateLimited {
                retry_after_ms: None,
                attempts: 5,
                elapsed_ms: 3_250,
            }
        );
        let f = Failure::retry(
            BackendError::Timeout {
                after_ms: 1_500,
                attempts: 1,
                elapsed_ms: 0,
            },
            None,
        );
        assert_eq!(
            f.into_error(3, Duration::from_millis(4_620)).to_string(),
            "backend timed out after 1500 ms, 3 attempts over 4620 ms"
        );
    }
}
