//! Completeness of a list that may continue past a page, decided in code from the next page's
//! head (which the model never sees): each rule, and the re-retrieval end to end with the
//! scripted backend.

use contract_backends::ScriptedBackend;
use contract_core::audit::extract_pages;
use contract_core::source::completeness_after;
use contract_core::{completeness, Completeness, Extractor, Source};
use examples::Exclusions;

fn complete(head: &str) -> bool {
    match completeness(head) {
        Completeness::Complete { reason } => {
            assert!(!reason.is_empty());
            true
        }
        Completeness::Truncated { reason } => {
            assert!(!reason.is_empty());
            false
        }
    }
}

#[test]
fn end_of_document_is_complete() {
    assert!(complete(""));
    assert!(complete("\n  \n"));
    assert!(completeness("").reason().contains("end of document"));
}

#[test]
fn markdown_heading_is_complete() {
    assert!(complete("# Conditions\nThe insured must..."));
    assert!(complete("### 5.1 Claims"));
    assert!(
        !completeness("#hashtag").reason().contains("markdown"),
        "no space: not a heading"
    );
}

#[test]
fn numbered_section_is_complete() {
    assert!(complete("3."));
    assert!(complete("3.2 Title"));
    assert!(complete("4. Claims procedure"));
    assert!(complete("\n  12.3.1 Notices"));
}

#[test]
fn section_article_chapter_is_complete() {
    for head in [
        "Section 4 Claims",
        "SECTION 4",
        "Article 12",
        "Chapter IV",
        "Sección 3 Reclamaciones",
        "Artículo 7",
        "Capítulo 2",
    ] {
        assert!(complete(head), "{head}");
    }
}

#[test]
fn a_line_in_capitals_is_complete() {
    assert!(complete("GENERAL CONDITIONS"));
    assert!(complete("CLAIMS — NOTIFICATION"));
}

#[test]
fn a_list_item_is_truncated() {
    for head in [
        "- pollution;",
        "* pollution;",
        "• pollution;",
        "a) pollution;",
        "(iv) pollution;",
        "1) pollution;",
    ] {
        assert!(!complete(head), "{head}");
        assert!(completeness(head).reason().contains("list"), "{head}");
    }
}

#[test]
fn a_continuing_sentence_is_truncated() {
    assert!(!complete("corrosion;\n- pollution"));
    assert!(completeness("and rust.").reason().contains("sentence"));
    // The previous page ended mid-sentence.
    let c = completeness_after(
        "- wear and tear, gradual deterioration or",
        "Corrosion of pipes.",
    );
    assert!(c.is_truncated());
    assert!(c.reason().contains("mid-sentence"));
    // A heading wins over a page that ended mid-sentence.
    assert!(!completeness_after("- wear and tear or", "5. Claims").is_truncated());
    // A finished page and a new paragraph: complete.
    assert!(!completeness_after("- mould.", "The insurer pays within 30 days.").is_truncated());
}

const PAGES: [&str; 4] = [
    "Policy PX-1\n4. Exclusions\n- war;\n- nuclear reaction;",
    "- mould;\n- wear and tear;",
    "- pollution.",
    "5. Claims\nNotify us within 30 days.",
];

fn items(names: &[(&str, u32)]) -> String {
    let items: Vec<String> = names
        .iter()
        .map(|(v, line)| {
            format!(
                r#"{{"value": "{v}", "evidence": [{{"start_line": {line}, "end_line": {line}, "quote": "{v}"}}]}}"#
            )
        })
        .collect();
    format!(r#"{{"items": [{}]}}"#, items.join(", "))
}

#[tokio::test(flavor = "current_thread")]
async fn truncated_lists_are_re_retrieved() {
    let src = Source::from_pages(&PAGES);
    let backend = ScriptedBackend::new([
        items(&[("war", 3), ("nuclear reaction", 4)]),
        items(&[
            ("war", 3),
            ("nuclear reaction", 4),
            ("mould", 5),
            ("wear and tear", 6),
        ]),
        items(&[
            ("war", 3),
            ("nuclear reaction", 4),
            ("mould", 5),
            ("wear and tear", 6),
            ("pollution", 7),
        ]),
    ]);
    let x = Extractor::<Exclusions, _>::new(&backend).max_attempts(1);
    let out = extract_pages(&x, &src, 1, 1, 3).await;

    assert_eq!(backend.requests().len(), 3);
    assert_eq!(out.rounds.len(), 3);
    assert_eq!((out.rounds[0].first_page, out.rounds[0].last_page), (1, 1));
    assert_eq!(out.rounds[0].next_page_head, "- mould;\n- wear and tear;");
    assert!(out.rounds[0].completeness.is_truncated());
    assert_eq!(out.rounds[0].decision, "re-retrieve with page 2");
    assert_eq!((out.rounds[1].first_page, out.rounds[1].last_page), (1, 2));
    assert_eq!(out.rounds[2].last_page, 3);
    assert!(!out.rounds[2].completeness.is_truncated());
    assert!(out.rounds[2].completeness.reason().contains("5. Claims"));
    assert!(out.complete);
    assert!(out.audit.accepted, "{:?}", out.audit);
    let value = out.value.expect("accepted");
    assert_eq!(value.items.len(), 5);

    // The model never sees the next page's head.
    let seen: Vec<String> = backend
        .requests()
        .iter()
        .map(|r| r.messages.0.iter().map(|m| m.content.clone()).collect())
        .collect();
    assert!(!seen[0].contains("mould"));
    assert!(seen[1].contains("mould") && !seen[1].contains("pollution"));
    assert!(seen[2].contains("pollution") && !seen[2].contains("5. Claims"));
}

#[tokio::test(flavor = "current_thread")]
async fn re_retrieval_is_bounded() {
    let src = Source::from_pages(&PAGES);
    let backend = ScriptedBackend::new([
        items(&[("war", 3)]),
        items(&[("war", 3), ("mould", 5)]),
        items(&[("never asked", 1)]),
    ]);
    let x = Extractor::<Exclusions, _>::new(&backend).max_attempts(1);
    let out = extract_pages(&x, &src, 1, 1, 2).await;
    assert_eq!(backend.requests().len(), 2);
    assert_eq!(out.rounds.len(), 2);
    assert!(
        out.rounds[1].decision.starts_with("stop"),
        "{}",
        out.rounds[1].decision
    );
    assert!(!out.complete, "the record says the list may continue");
    assert_eq!(out.value.map(|v| v.items.len()), Some(2));
}
