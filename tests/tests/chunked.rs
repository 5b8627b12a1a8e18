//! A document longer than the budget read in overlapping chunks: every chunk's prompt fits,
//! the mask and checks see only the chunk shown, records are merged without repeats and
//! nothing is dropped, and a list's completeness is decided from the overlaps.
//!
//! The backend here is a faithful reader: it answers from the lines its prompt shows (the
//! members named there, the city when a line states it), as a model that copies perfectly
//! would. What is tested is the chunking around it, not a model's reading.

use std::sync::{Arc, Mutex};

use contract_core::extract::{Backend, BackendError, Extractor, Overflow, Request, Response};
use contract_core::prompt::{Budget, Tokenizer};
use contract_core::{Completeness, Contract, Evidenced};
use serde::{Deserialize, Serialize};

/// The members of a club and its city.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Roster {
    /// Every member the text names.
    members: Vec<Evidenced<String>>,
    /// The club's city, when stated.
    #[contract(grounded)]
    city: Option<String>,
}

/// One token per whitespace-separated word and per line break.
struct Words;

impl Tokenizer for Words {
    fn encode(&self, text: &str) -> Vec<u32> {
        vec![0; text.split_whitespace().count() + text.matches('\n').count()]
    }
    fn decode(&self, _: &[u32]) -> String {
        String::new()
    }
}

/// How the reader misreads, to test what the chunking does with it.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// Ignores the first `n` lines shown after the first chunk (the overlap).
    SkipsHead(usize),
    /// Replies with broken JSON to the chunk that shows this line.
    Breaks(usize),
    /// Names, besides what it is shown, a member from a line it was not shown.
    Invents,
    /// The backend fails (unavailable) for the chunk that shows this line.
    Fails(usize),
}

struct Reader {
    fault: Fault,
    requests: Mutex<Vec<Request>>,
}

impl Reader {
    fn new(fault: Fault) -> Self {
        Reader {
            fault,
            requests: Mutex::new(Vec::new()),
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The numbered lines a prompt shows: `(number, text)`.
    fn shown(req: &Request) -> Vec<(usize, String)> {
        let user = &req.messages.0[1].content;
        user.lines()
            .filter_map(|l| {
                let (n, text) = l.split_once("| ")?;
                Some((n.trim().parse().ok()?, text.to_owned()))
            })
            .collect()
    }

    fn reply(&self, req: &Request) -> String {
        let shown = Self::shown(req);
        let first = shown.first().map_or(0, |s| s.0);
        if let Fault::Breaks(line) = self.fault {
            if shown.iter().any(|(n, _)| *n == line) {
                return "{\"members\": [".into();
            }
        }
        let skip = match self.fault {
            Fault::SkipsHead(k) if first > 1 => k,
            _ => 0,
        };
        let mut members: Vec<serde_json::Value> = shown
            .iter()
            .skip(skip)
            .filter_map(|(n, text)| {
                let name = text.strip_prefix("Member: ").filter(|n| !n.is_empty())?;
                Some(serde_json::json!({
                    "evidence": [{"start_line": n, "end_line": n, "quote": name}],
                    "value": name,
                }))
            })
            .collect();
        if self.fault == Fault::Invents {
            members.push(serde_json::json!({
                "evidence": [{"start_line": 1, "end_line": 1, "quote": null}],
                "value": "Nobody Shown",
            }));
        }
        let city = shown
            .iter()
            .find_map(|(_, text)| text.strip_prefix("City: "))
            .map_or(serde_json::Value::Null, |c| c.into());
        serde_json::json!({"members": members, "city": city}).to_string()
    }
}

impl Backend for Reader {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req.clone());
        if let Fault::Fails(line) = self.fault {
            if Self::shown(req).iter().any(|(n, _)| *n == line) {
                return Err(BackendError::Unavailable {
                    message: "the server went away".into(),
                });
            }
        }
        Ok(Response::text(self.reply(req)))
    }
}

/// 120 members, one a line, the city stated on line 101, a blank line every 10.
fn document() -> String {
    let mut lines = Vec::new();
    for i in 1..=130 {
        if i == 101 {
            lines.push("City: Lisbon Harbour".to_owned());
        } else if i % 10 == 0 {
            lines.push(String::new());
        } else {
            lines.push(format!("Member: Person {i:03}"));
        }
    }
    lines.join("\n")
}

fn members_in(doc: &str) -> Vec<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("Member: "))
        .map(str::to_owned)
        .collect()
}

const BUDGET: usize = 420;

fn extractor(reader: &Reader) -> Extractor<Roster, &Reader> {
    Extractor::<Roster, _>::new(reader)
        .budget(Arc::new(Words), Budget::new(BUDGET).with_template(3, 2))
        .max_attempts(2)
}

fn prompt_tokens(req: &Request) -> usize {
    let text: Vec<&str> = req.messages.0.iter().map(|m| m.content.as_str()).collect();
    Words.encode(&text.join("\n")).len() + 2 + 3 * req.messages.0.len()
}

#[tokio::test(flavor = "current_thread")]
async fn a_long_document_is_read_whole_in_chunks_without_repeats() {
    let doc = document();
    let reader = Reader::new(Fault::None);
    let x = extractor(&reader).extract(&doc).await;
    let requests = reader.requests();
    assert!(requests.len() >= 4, "{} chunks", requests.len());
    let record = x.chunks.as_ref().expect("read in chunks");
    assert_eq!(record.chunks.len(), requests.len());

    let mut covered = vec![false; doc.lines().count() + 1];
    for (req, part) in requests.iter().zip(&record.chunks) {
        // Every prompt fits the budget.
        assert!(prompt_tokens(req) <= BUDGET, "{}", prompt_tokens(req));
        // The mask and the checks see exactly the lines shown, nothing else.
        let shown = Reader::shown(req);
        let source = req.source.as_ref().expect("a source");
        for n in 1..=source.line_count() {
            let text = source.line(n).unwrap_or("");
            let in_prompt = shown.iter().find(|(m, _)| *m == n);
            match in_prompt {
                Some((_, t)) => assert_eq!(t, text),
                None => assert!(text.trim().is_empty(), "line {n} not shown: {text}"),
            }
        }
        let [a, b] = part.lines;
        assert!(shown.iter().all(|(n, _)| (a..=b).contains(n)));
        (a..=b).for_each(|l| covered[l] = true);
        assert!(part.filled);
    }
    // Nothing dropped: every line in a chunk, each chunk overlapping the one before.
    assert!(covered[1..].iter().all(|&c| c));
    for pair in record.chunks.windows(2) {
        assert!(pair[1].lines[0] <= pair[0].lines[1], "{pair:?}");
    }

    let roster = x.value.as_ref().expect("a value");
    let names: Vec<&str> = roster.members.iter().map(|m| m.value.as_str()).collect();
    assert_eq!(names, members_in(&doc), "every member once, in order");
    assert_eq!(roster.city.as_deref(), Some("Lisbon Harbour"));
    let list = &record.lists[0];
    assert_eq!(list.field, "members");
    assert_eq!(list.items, members_in(&doc).len());
    assert!(list.repeats > 0, "the overlaps were read twice");
    assert!(
        matches!(list.completeness, Completeness::Complete { .. }),
        "{:?}",
        list.completeness
    );
    // Each member's evidence is its own line.
    for m in &roster.members {
        let line = m.evidence[0].start_line as usize;
        assert_eq!(
            doc.lines().nth(line - 1),
            Some(format!("Member: {}", m.value).as_str())
        );
    }
    assert!(x.dropped_tokens == 0 && x.dropped_lines == 0);
}

#[tokio::test(flavor = "current_thread")]
async fn an_item_at_a_chunk_end_not_read_again_makes_the_list_truncated() {
    let doc = document();
    let reader = Reader::new(Fault::SkipsHead(4));
    let x = extractor(&reader).extract(&doc).await;
    let record = x.chunks.as_ref().expect("read in chunks");
    let list = &record.lists[0];
    match &list.completeness {
        Completeness::Truncated { reason } => {
            assert!(reason.contains("was not read again by chunk 2"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // The items the first chunk read at its end are still kept.
    let roster = x.value.as_ref().expect("a value");
    let end = record.chunks[0].lines[1];
    let at_end = format!("Person {end:03}");
    assert!(roster.members.iter().any(|m| m.value == at_end));
}

#[tokio::test(flavor = "current_thread")]
async fn a_chunk_without_a_valid_reply_is_named_and_loses_nothing_else() {
    let doc = document();
    let reader = Reader::new(Fault::Breaks(55));
    let x = extractor(&reader).extract(&doc).await;
    let record = x.chunks.as_ref().expect("read in chunks");
    let broken: Vec<usize> = record
        .chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.filled)
        .map(|(i, _)| i)
        .collect();
    assert!(!broken.is_empty());
    // Retried once with feedback, then given up.
    assert!(broken.iter().all(|&i| record.chunks[i].attempts == 2));
    let list = &record.lists[0];
    let reason = match &list.completeness {
        Completeness::Truncated { reason } => reason.clone(),
        other => panic!("{other:?}"),
    };
    assert!(reason.contains("gave no valid reply"), "{reason}");
    // Every member outside the broken chunks is there, once.
    let roster = x.value.as_ref().expect("a value from the other chunks");
    let names: Vec<&str> = roster.members.iter().map(|m| m.value.as_str()).collect();
    let mut expected = members_in(&doc);
    let lost: Vec<usize> = (1..=doc.lines().count())
        .filter(|l| {
            broken.iter().all(|&i| {
                let [a, b] = record.chunks[i].lines;
                (a..=b).contains(l)
            }) && record
                .chunks
                .iter()
                .filter(|c| c.filled)
                .all(|c| !(c.lines[0]..=c.lines[1]).contains(l))
        })
        .collect();
    expected.retain(|name| {
        let n: usize = name[7..].parse().unwrap_or(0);
        !lost.contains(&n)
    });
    assert_eq!(names, expected);
    assert!(names.len() < members_in(&doc).len());
}

#[tokio::test(flavor = "current_thread")]
async fn a_chunk_the_backend_did_not_answer_makes_the_extraction_an_error() {
    // The city is stated on line 101 only; the chunk showing it is never answered. A value
    // with `city: null` would say the document does not state it: the record is an error
    // instead, and what the other chunks gave stays in its JSON.
    let doc = document();
    let reader = Reader::new(Fault::Fails(101));
    let x = extractor(&reader).extract(&doc).await;
    assert!(x.value.is_none(), "{:?}", x.value);
    assert!(
        matches!(
            &x.error,
            Some(contract_core::extract::AttemptError::Backend {
                error: BackendError::Unavailable { .. }
            })
        ),
        "{:?}",
        x.error
    );
    let record = x.chunks.as_ref().expect("read in chunks");
    assert!(record.chunks.iter().any(|c| !c.filled));
    assert!(record.chunks.iter().filter(|c| c.filled).count() >= 2);
    let json = x.json.as_ref().expect("the other chunks' values kept");
    let members = json["members"].as_array().expect("members");
    assert!(!members.is_empty());
    assert!(json["city"].is_null());
    // The same document with every chunk answered has a value and the city.
    let reader = Reader::new(Fault::None);
    let x = extractor(&reader).extract(&doc).await;
    let roster = x.value.as_ref().expect("a value");
    assert!(roster.city.is_some());
}

#[tokio::test(flavor = "current_thread")]
async fn a_value_from_text_not_shown_is_refused() {
    let doc = document();
    let reader = Reader::new(Fault::Invents);
    let x = extractor(&reader).extract(&doc).await;
    let record = x.chunks.as_ref().expect("read in chunks");
    // "Nobody Shown" is in no chunk: every reply is refused, and the feedback says why.
    assert!(record.chunks.iter().all(|c| !c.filled));
    assert!(x.value.is_none());
    let violations: Vec<String> = x
        .attempts
        .iter()
        .flat_map(|a| a.violations.iter().map(|v| v.message.clone()))
        .collect();
    assert!(
        violations.iter().any(|m| m.contains("Nobody Shown")),
        "{violations:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn cut_keeps_the_head_and_grounds_in_it_only() {
    let doc = document();
    let reader = Reader::new(Fault::None);
    let x = extractor(&reader)
        .overflow(Overflow::Cut)
        .extract(&doc)
        .await;
    let requests = reader.requests();
    assert_eq!(requests.len(), 1);
    assert!(x.chunks.is_none());
    assert!(x.dropped_lines > 0);
    let shown = Reader::shown(&requests[0]);
    let source = requests[0].source.as_ref().expect("a source");
    let last = shown.last().map_or(0, |s| s.0);
    assert!(last < 100);
    // The source the mask sees ends with the head shown.
    assert!((last + 1..=source.line_count()).all(|n| source.line(n).unwrap_or("").is_empty()));
    let roster = x.value.as_ref().expect("a value");
    assert_eq!(roster.city, None, "the city's line was not shown");
    assert_eq!(
        roster.members.len(),
        shown
            .iter()
            .filter(|(_, t)| t.strip_prefix("Member: ").is_some_and(|n| !n.is_empty()))
            .count()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_long_blank_document_still_gets_a_record() {
    let doc = "\n".repeat(5_000);
    let reader = Reader::new(Fault::None);
    let x = extractor(&reader).extract(&doc).await;
    assert!(x.chunks.is_none());
    assert_eq!(x.attempts.len(), 1);
    assert!(x.dropped_lines > 0);
    let roster = x.value.as_ref().expect("a value");
    assert!(roster.members.is_empty() && roster.city.is_none());
}

#[tokio::test(flavor = "current_thread")]
async fn a_chunked_document_hands_on_the_merged_fields_once() {
    // Fields of a document read in chunks are handed on once the merged value is checked:
    // each root field once, with the merged value, and the record is `extract`'s.
    let doc = document();
    let reader = Reader::new(Fault::None);
    let seen = std::sync::Mutex::new(Vec::new());
    let on_field = |e: contract_core::extract::FieldEvent| {
        seen.lock().unwrap_or_else(|e| e.into_inner()).push(e);
    };
    let x = extractor(&reader).extract_observed(&doc, &on_field).await;
    let seen = seen.into_inner().unwrap_or_else(|e| e.into_inner());
    assert!(x.chunks.is_some(), "read in chunks");
    let json = x.json.as_ref().expect("the merged value");
    let mut paths: Vec<&str> = seen
        .iter()
        .filter(|e| !e.is_item())
        .map(|e| e.path.as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["/city", "/members"]);
    for e in &seen {
        assert_eq!(json.pointer(&e.path), Some(&e.value), "{}", e.path);
    }
    // The merged list's items, each once and in order, just before the list.
    let members = json["members"].as_array().map_or(0, Vec::len);
    assert!(members > 0);
    let list = seen
        .iter()
        .position(|e| e.path == "/members")
        .expect("the list");
    let items: Vec<Option<usize>> = seen[list - members..list].iter().map(|e| e.item).collect();
    assert_eq!(items, (0..members).map(Some).collect::<Vec<_>>());
    assert_eq!(seen.iter().filter(|e| e.is_item()).count(), members);
    let reader = Reader::new(Fault::None);
    let plain = extractor(&reader).extract(&doc).await;
    assert_eq!(plain.value, x.value);
}
