//! `Extractor::stream` on scripted replies: the events end with the record `extract` returns,
//! a field is emitted only once its value is closed and checked (its constraints, its
//! grounding in the source, the rules it takes part in), and dropping the stream drops the
//! backend's request.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use contract_core::extract::{
    Backend, BackendError, Extraction, Extractor, FieldEvent, Request, Response, StreamEvent,
};
use contract_core::Contract;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Guidance a release states.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "low <= high")]
struct Guidance {
    /// The company.
    #[contract(grounded)]
    company: String,
    /// A short label the model writes.
    #[contract(len = 1..=12)]
    label: Option<String>,
    /// The low end.
    #[contract(grounded)]
    low: Option<f64>,
    /// The high end.
    #[contract(grounded)]
    high: Option<f64>,
}

const DOC: &str = "Acme Corp reports its third quarter.\n\
For the fourth quarter, Acme expects revenue between 4065 and 4140 million dollars.";

/// A reply that breaks the rule (low above high) and one that holds.
const SWAPPED: &str = r#"{"company": "Acme Corp", "label": "guidance", "low": 4140, "high": 4065}"#;
const VALID: &str = r#"{"company": "Acme Corp", "label": "q4", "low": 4065, "high": 4140}"#;

/// Runs a future to its end on this thread.
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// Returns `Pending` once (waking itself), so the stream is polled between two pieces.
struct YieldOnce(bool);
impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Scripted replies; with `pieces`, each reply is streamed that many bytes at a time, the
/// stream polled between two pieces, and `sent` the bytes handed so far.
struct Script {
    replies: Mutex<VecDeque<String>>,
    pieces: Option<usize>,
    sent: Arc<AtomicUsize>,
}

impl Script {
    fn new(replies: &[&str], pieces: Option<usize>) -> Script {
        Script {
            replies: Mutex::new(replies.iter().map(|r| (*r).to_owned()).collect()),
            pieces,
            sent: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn next(&self) -> Result<Response, BackendError> {
        let next = self.replies.lock().ok().and_then(|mut r| r.pop_front());
        next.map(Response::text).ok_or(BackendError::Unavailable {
            message: "no more replies".into(),
        })
    }
}

impl Backend for Script {
    async fn complete(&self, _: &Request) -> Result<Response, BackendError> {
        self.next()
    }

    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        let Some(n) = self.pieces else {
            let r = self.complete(req).await?;
            on_text(&r.text);
            return Ok(r);
        };
        let response = self.next()?;
        self.sent.store(0, Ordering::SeqCst);
        let bytes = response.text.as_bytes();
        for (i, piece) in bytes.chunks(n).enumerate() {
            self.sent.store(i * n + piece.len(), Ordering::SeqCst);
            on_text(std::str::from_utf8(piece).unwrap_or_default());
            YieldOnce(false).await;
        }
        Ok(response)
    }
}

/// The record with its wall times cleared (the only part two runs may differ in).
fn timeless<C>(mut out: Extraction<C>) -> Extraction<C> {
    out.timings = Default::default();
    for a in &mut out.attempts {
        a.ms = 0.0;
    }
    out
}

/// The fields and the record of a stream.
fn run_stream(
    extractor: &Extractor<Guidance, Script>,
    sent: Option<&AtomicUsize>,
) -> (Vec<(FieldEvent, usize)>, Extraction<Guidance>) {
    block_on(async {
        let mut stream = extractor.stream(DOC);
        let mut fields = Vec::new();
        let mut done = None;
        while let Some(event) = stream.next().await {
            assert!(done.is_none(), "an event after Done");
            match event {
                StreamEvent::Field(f) => {
                    fields.push((f, sent.map_or(0, |s| s.load(Ordering::SeqCst))))
                }
                StreamEvent::Done(out) => done = Some(out),
            }
        }
        (fields, done.expect("a Done event"))
    })
}

fn extractor(replies: &[&str], pieces: Option<usize>) -> Extractor<Guidance, Script> {
    Extractor::<Guidance, _>::new(Script::new(replies, pieces)).max_attempts(2)
}

#[test]
fn the_last_event_is_the_record_extract_returns() {
    for pieces in [None, Some(1), Some(7)] {
        let streamed = extractor(&[SWAPPED, VALID], pieces);
        let (fields, done) = run_stream(&streamed, None);
        let extracted = block_on(extractor(&[SWAPPED, VALID], pieces).extract(DOC));
        assert!(extracted.is_ok(), "{:?}", extracted.violations);
        assert_eq!(extracted.attempt_count(), 2);
        assert_eq!(timeless(done.clone()), timeless(extracted));
        // The last value per path is the reply's.
        let mut last = Map::new();
        for (f, _) in &fields {
            last.insert(f.path.trim_start_matches('/').to_owned(), f.value.clone());
        }
        assert_eq!(Some(Value::Object(last)), done.json, "pieces {pieces:?}");
    }
}

#[test]
fn a_rule_holds_on_the_fields_emitted_and_a_retry_emits_again() {
    let (fields, _) = run_stream(&extractor(&[SWAPPED, VALID], Some(3)), None);
    let by_attempt = |n: usize| -> Vec<(String, Value)> {
        fields
            .iter()
            .filter(|(f, _)| f.attempt == n)
            .map(|(f, _)| (f.path.clone(), f.value.clone()))
            .collect()
    };
    // Attempt 1 breaks `low <= high`: neither side is emitted, the other fields are.
    assert_eq!(
        by_attempt(1),
        vec![
            ("/company".to_owned(), json!("Acme Corp")),
            ("/label".to_owned(), json!("guidance")),
        ]
    );
    assert_eq!(
        by_attempt(2),
        vec![
            ("/company".to_owned(), json!("Acme Corp")),
            ("/label".to_owned(), json!("q4")),
            ("/low".to_owned(), json!(4065)),
            ("/high".to_owned(), json!(4140)),
        ]
    );
    assert!(fields.iter().all(|(f, _)| f.group.is_none()));
}

#[test]
fn a_value_is_emitted_only_once_closed_and_before_the_reply_ends() {
    let script = Script::new(&[VALID], Some(1));
    let sent = script.sent.clone();
    let extractor = Extractor::<Guidance, _>::new(script);
    let (fields, done) = run_stream(&extractor, Some(&sent));
    assert!(done.is_ok());
    assert_eq!(fields.len(), 4);
    for (f, at) in &fields {
        // Where the value closes in the reply: after its text (a number after the byte that
        // ends it).
        let name = f.path.trim_start_matches('/');
        let key = format!("\"{name}\": ");
        let start = VALID.find(&key).expect("the key") + key.len();
        let mut end = start + f.value.to_string().len();
        if f.value.is_number() {
            end += 1;
        }
        if name == "high" || name == "low" {
            // Tied by the rule: emitted once both sides closed.
            end = end.max(VALID.find("4140}").expect("high") + 5);
        }
        assert!(*at >= end, "{name} emitted at byte {at}, closes at {end}");
        // Streamed: emitted right when its value closes, not when the reply is whole.
        assert!(*at <= end + 1, "{name} emitted late, at byte {at} of {end}");
    }
    assert!(fields[0].1 < VALID.len() / 2);
}

#[test]
fn a_grounded_value_outside_the_source_is_never_emitted() {
    let outside =
        r#"{"company": "Globex", "label": "far too long a label", "low": 4065, "high": 9999}"#;
    for pieces in [None, Some(1), Some(5)] {
        let (fields, done) = run_stream(&extractor(&[outside, VALID], pieces), None);
        let first: Vec<&str> = fields
            .iter()
            .filter(|(f, _)| f.attempt == 1)
            .map(|(f, _)| f.path.as_str())
            .collect();
        // `Globex` is not in the document, the label breaks its length, `high` is not in the
        // document (and `low` is held back with it, their rule cannot be checked).
        assert!(first.is_empty(), "{first:?}");
        assert!(done.attempts[0].violations.len() >= 3);
        assert_eq!(fields.len(), 4, "the retry's fields");
    }
}

#[test]
fn a_reply_that_is_not_json_emits_nothing_but_the_record() {
    let prose = "The company is Acme Corp and {\"company\": \"Acme Corp\"}";
    let (fields, done) = run_stream(&extractor(&[prose, "not json"], Some(2)), None);
    assert!(fields.is_empty(), "{fields:?}");
    assert!(!done.is_ok());
    assert_eq!(done.attempt_count(), 2);
}

/// A request that never ends; records when it is dropped.
struct Endless(Arc<AtomicBool>);

struct Guard(Arc<AtomicBool>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Backend for Endless {
    async fn complete(&self, _: &Request) -> Result<Response, BackendError> {
        let _guard = Guard(self.0.clone());
        std::future::pending::<()>().await;
        Err(BackendError::Other {
            message: "unreachable".into(),
        })
    }
}

#[test]
fn dropping_the_stream_drops_the_request() {
    let dropped = Arc::new(AtomicBool::new(false));
    let extractor = Extractor::<Guidance, _>::new(Endless(dropped.clone()));
    let mut stream = extractor.stream(DOC);
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert!(stream.poll_next_unpin(&mut cx).is_pending());
    assert!(!dropped.load(Ordering::SeqCst), "the request runs");
    drop(stream);
    assert!(dropped.load(Ordering::SeqCst), "the request was dropped");
}
