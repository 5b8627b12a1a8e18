//! The extraction loop end to end with a scripted backend: retry with feedback, bounded attempts,
//! levels and repairs recorded, backend and budget failures recorded, one JSON line per document.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use contract_backends::ScriptedBackend;
use contract_core::extract::{AttemptError, BackendError, Extractor, Overflow, Response};
use contract_core::parse::{Level, RepairKind};
use contract_core::prompt::{Budget, BudgetError, Role, Tokenizer};
use contract_core::{Contract, ViolationKind};
use examples::Guidance;

const DOC: &str = "ACME Corp. third quarter results\n\
We expect fiscal 2025 Q3 revenue between $7,230 million and $7,650 million.\n\
Margins were stable.";
const VALID: &str = r#"{"quarter": 3, "year": 2025, "low": 7230, "high": 7650}"#;
const OUT_OF_RANGE: &str = r#"{"quarter": 5, "year": 2025, "low": 7230, "high": 7650}"#;

fn expected() -> Guidance {
    Guidance {
        quarter: Some(3),
        year: Some(2025),
        low: Some(7230.0),
        high: Some(7650.0),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_broken_reply_then_a_valid_one() {
    let backend = ScriptedBackend::new([OUT_OF_RANGE, VALID]);
    let x = Extractor::<Guidance, _>::new(&backend)
        .max_attempts(2)
        .extract(DOC)
        .await;
    assert_eq!(x.value, Some(expected()));
    assert_eq!(x.level, Level::Strict);
    assert!(x.violations.is_empty());
    assert_eq!(x.attempts.len(), 2);
    assert!(x.attempts[0].violations.has_kind(ViolationKind::OutOfRange));
    assert_eq!(x.attempts[0].raw.as_deref(), Some(OUT_OF_RANGE));
    assert_eq!(x.attempts[1].raw.as_deref(), Some(VALID));
    assert!(x.error.is_none());

    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0].messages.0;
    assert_eq!(first.len(), 2);
    let retry = &requests[1].messages.0;
    assert_eq!(retry.len(), 4, "system, user, the answer, the feedback");
    assert_eq!(retry[..2], first[..], "the retry keeps the original prompt");
    assert_eq!(retry[2].role, Role::Assistant);
    assert_eq!(retry[2].content, OUT_OF_RANGE);
    assert_eq!(retry[3].role, Role::User);
    assert!(
        retry[3].content.contains("/quarter"),
        "{}",
        retry[3].content
    );
    assert!(
        retry[3].content.contains("out_of_range"),
        "{}",
        retry[3].content
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_reply_that_never_validates_is_bounded() {
    let replies = [
        "I could not find any guidance.",
        "[1, 2]",
        OUT_OF_RANGE,
        VALID,
    ];
    let backend = ScriptedBackend::new(replies);
    let x = Extractor::<Guidance, _>::new(&backend)
        .max_attempts(3)
        .extract(DOC)
        .await;
    assert_eq!(x.value, None);
    assert_eq!(x.attempts.len(), 3);
    assert_eq!(backend.requests().len(), 3);
    assert_eq!(backend.remaining(), 1, "no fourth attempt");
    let raws: Vec<_> = x.attempts.iter().map(|a| a.raw.as_deref()).collect();
    assert_eq!(raws, [Some(replies[0]), Some(replies[1]), Some(replies[2])]);
    assert_eq!(x.attempts[0].level, Some(Level::Invalid));
    assert!(x.attempts[0]
        .violations
        .has_kind(ViolationKind::JsonInvalid));
    assert_eq!(x.attempts[1].level, Some(Level::Invalid));
    // The reported answer is the last one: strict JSON that breaks a rule.
    assert_eq!(x.level, Level::Strict);
    assert!(x.violations.has_kind(ViolationKind::OutOfRange));
    assert!(x.json.is_some());
    // Feedback accumulates: the third request carries both earlier answers.
    assert_eq!(backend.requests()[2].messages.len(), 6);

    // The default is two attempts.
    let backend = ScriptedBackend::new(["no", "no", "no"]);
    let x = Extractor::<Guidance, _>::new(&backend).extract(DOC).await;
    assert_eq!(x.attempts.len(), 2);
    assert_eq!(backend.remaining(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn extracted_and_repaired_levels_are_recorded() {
    let reply = format!(
        "<think>The release says {{low: 7,230}}; careful with units.</think>\nHere it is:\n```json\n{VALID}\n```"
    );
    let backend = ScriptedBackend::new([reply.as_str()]);
    let x = Extractor::<Guidance, _>::new(&backend).extract(DOC).await;
    assert_eq!(x.value, Some(expected()));
    assert_eq!(x.level, Level::Extracted);
    assert!(x.repairs.is_empty());
    assert_eq!(
        x.reasoning.as_deref(),
        Some("The release says {low: 7,230}; careful with units.")
    );

    let reply = "{'quarter': 3, year: 2025, 'low': 7230, 'high': 7650, /* USD millions */}";
    let backend = ScriptedBackend::new([reply]);
    let x = Extractor::<Guidance, _>::new(&backend).extract(DOC).await;
    assert_eq!(x.value, Some(expected()));
    assert_eq!(x.level, Level::Repaired);
    let kinds: Vec<RepairKind> = x.repairs.iter().map(|r| r.kind).collect();
    for kind in [
        RepairKind::SingleQuotes,
        RepairKind::UnquotedKey,
        RepairKind::Comment,
        RepairKind::TrailingComma,
    ] {
        assert!(kinds.contains(&kind), "{kind:?} not in {kinds:?}");
    }
    for r in &x.repairs {
        assert!(r.offset < reply.len());
    }

    // Thousands separators are never guessed: invalid, then the retry.
    let backend = ScriptedBackend::new([
        r#"{"quarter": 3, "year": 2025, "low": 7,230, "high": 7,650}"#,
        VALID,
    ]);
    let x = Extractor::<Guidance, _>::new(&backend).extract(DOC).await;
    assert_eq!(x.attempts[0].level, Some(Level::Invalid));
    assert_eq!(x.value, Some(expected()));
}

#[tokio::test(flavor = "current_thread")]
async fn a_backend_error_is_recorded() {
    let timeout = BackendError::Timeout {
        after_ms: 30_000,
        attempts: 3,
        elapsed_ms: 91_500,
    };
    assert_eq!(
        timeout.to_string(),
        "backend timed out after 30000 ms, 3 attempts over 91500 ms"
    );
    let backend = ScriptedBackend::from_script([Err(timeout.clone())]);
    let x = Extractor::<Guidance, _>::new(&backend).extract(DOC).await;
    assert_eq!(x.value, None);
    assert_eq!(x.attempts.len(), 1);
    assert_eq!(x.attempts[0].raw, None);
    assert_eq!(x.error, Some(AttemptError::Backend { error: timeout }));
    let line = x.to_json_line().expect("serialisable");
    assert!(!line.contains('\n'));
    let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON line");
    assert_eq!(v["error"]["stage"], "backend");
    assert_eq!(v["error"]["error"]["kind"], "timeout");
    assert_eq!(v["error"]["error"]["attempts"], 3);
    assert_eq!(v["error"]["error"]["elapsed_ms"], 91_500);
    assert_eq!(v["level"], "invalid");

    // An error after an invalid answer keeps that answer.
    let backend = ScriptedBackend::from_script([
        Ok(Response::text("not json")),
        Err(BackendError::RateLimited {
            retry_after_ms: Some(500),
            attempts: 1,
            elapsed_ms: 12,
        }),
    ]);
    let x = Extractor::<Guidance, _>::new(&backend).extract(DOC).await;
    assert_eq!(x.attempts.len(), 2);
    assert_eq!(x.attempts[0].raw.as_deref(), Some("not json"));
    assert!(matches!(
        x.error,
        Some(AttemptError::Backend {
            error: BackendError::RateLimited { .. }
        })
    ));
    let message = x.error.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.ends_with("rate limited, 1 attempt over 12 ms"),
        "{message}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn the_request_and_the_record() {
    let mut response = Response::text(VALID);
    response.prompt_tokens = Some(321);
    response.completion_tokens = Some(24);
    let backend = ScriptedBackend::from_script([Ok(response)]);
    let x = Extractor::<Guidance, _>::new(&backend)
        .max_tokens(256)
        .extract(DOC)
        .await;

    let req = &backend.requests()[0];
    assert_eq!(req.contract(), "Guidance");
    assert_eq!(req.constraint.signature, Guidance::signature());
    assert_eq!(
        req.constraint.strict_schema,
        Guidance::try_strict_schema().ok()
    );
    assert_eq!(
        req.constraint.grammar().map(|g| g.as_ref()),
        Some(&Guidance::grammar())
    );
    // Every request of the contract shares the one constraint rendered for its type.
    assert!(std::sync::Arc::ptr_eq(
        &req.constraint,
        &contract_core::Constraint::of::<Guidance>()
    ));
    assert_eq!(req.max_tokens, Some(256));
    let system = &req.messages.0[0];
    assert_eq!(system.role, Role::System);
    assert!(system.content.contains(&Guidance::signature()));
    assert!(system.content.contains("Reply with the JSON object only."));
    assert!(
        !system.content.contains("ACME"),
        "the document is never in the system message"
    );
    let user = &req.messages.0[1].content;
    assert!(
        user.contains("   2| We expect fiscal 2025 Q3 revenue"),
        "{user}"
    );
    assert!(user.contains("<document>") && user.contains("</document>"));

    let v: serde_json::Value =
        serde_json::from_str(&x.to_json_line().expect("line")).expect("json");
    for key in [
        "contract",
        "value",
        "level",
        "json",
        "violations",
        "repairs",
        "reasoning",
        "attempts",
        "prompt_tokens",
        "dropped_tokens",
        "dropped_lines",
        "timings",
        "error",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["level"], "strict");
    assert_eq!(v["value"]["quarter"], 3);
    assert_eq!(v["prompt_tokens"], 321);
    assert_eq!(v["attempts"][0]["raw"], VALID);
    assert_eq!(v["attempts"][0]["completion_tokens"], 24);
    assert!(v["timings"]["total_ms"].as_f64().is_some());
    assert_eq!(
        v["timings"]["attempts_ms"].as_array().map(Vec::len),
        Some(1)
    );
}

/// One token per word with its trailing whitespace, interned: enough to test the wiring.
#[derive(Default)]
struct Words {
    pieces: Mutex<(HashMap<String, u32>, Vec<String>)>,
}

impl Tokenizer for Words {
    fn encode(&self, text: &str) -> Vec<u32> {
        let mut guard = self.pieces.lock().unwrap_or_else(|e| e.into_inner());
        let (ids, pieces) = &mut *guard;
        text.split_inclusive(char::is_whitespace)
            .map(|piece| {
                *ids.entry(piece.to_owned()).or_insert_with(|| {
                    pieces.push(piece.to_owned());
                    pieces.len() as u32 - 1
                })
            })
            .collect()
    }

    fn decode(&self, ids: &[u32]) -> String {
        let guard = self.pieces.lock().unwrap_or_else(|e| e.into_inner());
        ids.iter()
            .filter_map(|&id| guard.1.get(id as usize).map(String::as_str))
            .collect()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_budget_is_applied_and_recorded() {
    let long_doc = (1..=2_000)
        .map(|i| format!("line {i} says nothing about guidance"))
        .collect::<Vec<_>>()
        .join("\n");
    let backend = ScriptedBackend::new([VALID]);
    let budget = Budget::new(1_500).with_template(4, 3);
    let tok: Arc<dyn Tokenizer + Send + Sync> = Arc::new(Words::default());
    let x = Extractor::<Guidance, _>::new(&backend)
        .budget(tok.clone(), budget)
        .overflow(Overflow::Cut)
        .extract(&long_doc)
        .await;
    assert_eq!(x.value, Some(expected()));
    assert!(
        x.prompt_tokens.is_some_and(|n| n <= 1_500),
        "{:?}",
        x.prompt_tokens
    );
    assert!(x.dropped_tokens > 0 && x.dropped_lines > 0);
    let user = &backend.requests()[0].messages.0[1].content;
    assert!(user.contains("   1| line 1 says"));
    assert!(!user.contains("2000| line 2000"));
    assert!(user.ends_with("Reply with the JSON object only."));

    // Fixed parts longer than the budget: recorded, and no request is sent.
    let backend = ScriptedBackend::new([VALID]);
    let x = Extractor::<Guidance, _>::new(&backend)
        .budget(tok, Budget::new(20))
        .extract(DOC)
        .await;
    assert_eq!(x.value, None);
    assert!(matches!(
        x.error,
        Some(AttemptError::Budget {
            error: BudgetError::FixedPartsTooLong { available: 20, .. }
        })
    ));
    assert!(backend.requests().is_empty());
}

#[test]
fn extraction_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let backend = ScriptedBackend::new([VALID]);
    let extractor = Extractor::<Guidance, _>::new(&backend);
    let future = extractor.extract(DOC);
    assert_send(&future);
}

#[tokio::test(flavor = "current_thread")]
async fn other_instructions_replace_the_system_message_only() {
    use contract_core::prompt::{field_notes, system_message, system_message_with, Instructions};
    let notes = field_notes::<Guidance>();
    assert_eq!(
        notes,
        "Fields:\n\
         - quarter: Fiscal quarter the guidance is for.\n\
         - year: Fiscal year the guidance is for.\n\
         - low: Low end of the range.\n\
         - high: High end of the range.\n"
    );
    let plain = system_message::<Guidance>();
    assert_eq!(
        plain,
        system_message_with::<Guidance>(Instructions::Signature)
    );
    assert!(!plain.contains("Fields:"));
    let with_fields = system_message_with::<Guidance>(Instructions::SignatureAndFields);
    assert!(with_fields.contains(notes.trim_end()), "{with_fields}");
    // The notes follow the signature and precede the conventions.
    let (sig, conv, fields) = (
        with_fields.find(Guidance::signature().trim_end()).unwrap(),
        with_fields.find("Conventions:").unwrap(),
        with_fields.find("Fields:").unwrap(),
    );
    assert!(sig < fields && fields < conv);
    // No example number in the conventions for a small model to copy.
    let conventions = &plain[plain.find("Conventions:").unwrap()..];
    assert!(
        !conventions.chars().any(|c| c.is_ascii_digit()),
        "{conventions}"
    );

    let backend = ScriptedBackend::new([VALID]);
    let x = Extractor::<Guidance, _>::new(&backend)
        .instructions("Only the JSON.")
        .extract(DOC)
        .await;
    assert_eq!(x.value, Some(expected()));
    let sent = &backend.requests()[0].messages.0;
    assert_eq!(sent[0].role, Role::System);
    assert_eq!(sent[0].content, "Only the JSON.");
    assert!(sent[1].content.contains("$7,230 million"));
}
