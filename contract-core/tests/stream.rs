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
use contract_core::{Contract, Evidenced};
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

/// An officer a release names.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Officer {
    /// The officer's name, copied from the lines cited.
    #[contract(grounded(with_container))]
    name: String,
    /// A short title.
    #[contract(len = 1..=24)]
    role: String,
}

/// The officers a release names, each with the lines that name them.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Roster {
    /// The company.
    #[contract(grounded)]
    company: String,
    /// Every officer named.
    #[contract(len = 1..=5)]
    officers: Vec<Evidenced<Officer>>,
    /// How many officers the release names.
    #[contract(range = 0..=10)]
    count: u8,
}

const ROSTER_DOC: &str = "Acme Corp names its officers.\n\
Jane Roe is the chief executive.\n\
John Poe is the chief financial officer.\n\
Ann Lee is the general counsel.";

/// Three officers, each with its spans.
const OFFICERS: [&str; 3] = [
    r#"{"evidence": [{"start_line": 2, "end_line": 2, "quote": "Jane Roe"}], "value": {"name": "Jane Roe", "role": "chief executive"}}"#,
    r#"{"evidence": [{"start_line": 3, "end_line": 3, "quote": null}], "value": {"name": "John Poe", "role": "finance chief"}}"#,
    r#"{"evidence": [{"start_line": 4, "end_line": 4, "quote": "general counsel"}], "value": {"name": "Ann Lee", "role": "general counsel"}}"#,
];

/// A roster reply with `officers` as its list.
fn roster(officers: &[&str]) -> String {
    format!(
        r#"{{"company": "Acme Corp", "officers": [{}], "count": {}}}"#,
        officers.join(", "),
        officers.len()
    )
}

/// The events of a roster stream (each with the bytes handed when it came) and its record.
fn run_roster(
    extractor: &Extractor<Roster, Script>,
    sent: Option<&AtomicUsize>,
) -> (Vec<(FieldEvent, usize)>, Extraction<Roster>) {
    block_on(async {
        let mut stream = extractor.stream(ROSTER_DOC);
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

#[test]
fn list_items_stream_one_by_one_each_once_closed_and_before_the_list() {
    let reply = roster(&OFFICERS);
    // Where each officer's closing brace is in the reply (one past it).
    let ends: Vec<usize> = OFFICERS
        .iter()
        .map(|o| reply.find(o).expect("the item") + o.len())
        .collect();
    for n in [1, 4, 7, 19] {
        let script = Script::new(&[&reply], Some(n));
        let sent = script.sent.clone();
        let extractor = Extractor::<Roster, _>::new(script);
        let (events, done) = run_roster(&extractor, Some(&sent));
        assert!(done.is_ok(), "{:?}", done.violations);
        let json = done.json.clone().expect("the reply's JSON");
        let items: Vec<(usize, &FieldEvent, usize)> = events
            .iter()
            .enumerate()
            .filter(|(_, (f, _))| f.is_item())
            .map(|(i, (f, at))| (i, f, *at))
            .collect();
        assert_eq!(items.len(), 3, "pieces of {n}: {events:?}");
        let list_at = events
            .iter()
            .position(|(f, _)| f.path == "/officers" && !f.is_item())
            .expect("the list's own event");
        for (k, (i, f, at)) in items.iter().enumerate() {
            assert_eq!(f.item, Some(k), "in order");
            assert_eq!(f.path, format!("/officers/{k}"));
            assert_eq!(f.field_path(), "/officers");
            assert_eq!(
                f.value, json["officers"][k],
                "the item as the record has it"
            );
            assert!(
                f.value["evidence"][0]["start_line"].is_u64(),
                "with its spans"
            );
            assert!(*i < list_at, "item {k} before the list");
            // Never before its closing brace was fed, and in the piece that fed it.
            assert!(
                *at >= ends[k],
                "item {k} at byte {at}, closes at {}",
                ends[k]
            );
            assert!(
                *at < ends[k] + n,
                "item {k} late: byte {at}, closed at {}",
                ends[k]
            );
        }
        assert_eq!(events[list_at].0.value, json["officers"]);
        // The item events come before the reply is whole: the first long before.
        assert!(items[0].2 < reply.len() / 2);
        // The whole fields, last value per path, are the record's JSON.
        let mut last = Map::new();
        for (f, _) in events.iter().filter(|(f, _)| !f.is_item()) {
            last.insert(f.path.trim_start_matches('/').to_owned(), f.value.clone());
        }
        assert_eq!(Value::Object(last), json);
        // And the record is `extract`'s.
        let extracted = block_on(
            Extractor::<Roster, _>::new(Script::new(&[&reply], Some(n))).extract(ROSTER_DOC),
        );
        assert_eq!(timeless(done), timeless(extracted));
    }
}

#[test]
fn an_item_that_fails_its_checks_is_never_emitted_and_its_index_is_skipped() {
    let bad = roster(&[
        OFFICERS[0],
        // Not in the document.
        r#"{"evidence": [{"start_line": 3, "end_line": 3, "quote": null}], "value": {"name": "Bob Smith", "role": "finance chief"}}"#,
        // In the document, not in the line its span cites.
        r#"{"evidence": [{"start_line": 2, "end_line": 2, "quote": null}], "value": {"name": "Ann Lee", "role": "general counsel"}}"#,
        // Its role breaks its length.
        r#"{"evidence": [{"start_line": 4, "end_line": 4, "quote": null}], "value": {"name": "Ann Lee", "role": "the general counsel of the whole company"}}"#,
        OFFICERS[2],
    ]);
    let good = roster(&OFFICERS);
    for pieces in [None, Some(1), Some(6)] {
        let extractor =
            Extractor::<Roster, _>::new(Script::new(&[&bad, &good], pieces)).max_attempts(2);
        let (events, done) = run_roster(&extractor, None);
        let first: Vec<&str> = events
            .iter()
            .filter(|(f, _)| f.attempt == 1)
            .map(|(f, _)| f.path.as_str())
            .collect();
        // Items 1 to 3 are refused, the list with them; the item after them keeps its index.
        assert_eq!(
            first,
            ["/company", "/officers/0", "/officers/4", "/count"],
            "pieces {pieces:?}"
        );
        let off: Vec<&str> = done.attempts[0]
            .violations
            .iter()
            .map(|v| v.path.as_str())
            .collect();
        for k in 1..=3 {
            assert!(
                off.iter()
                    .any(|p| p.starts_with(&format!("/officers/{k}/"))),
                "item {k}'s violation in the record: {off:?}"
            );
        }
        assert!(done.is_ok(), "the retry holds");
        let second: Vec<&str> = events
            .iter()
            .filter(|(f, _)| f.attempt == 2)
            .map(|(f, _)| f.path.as_str())
            .collect();
        assert_eq!(
            second,
            [
                "/company",
                "/officers/0",
                "/officers/1",
                "/officers/2",
                "/officers",
                "/count"
            ]
        );
    }
}
