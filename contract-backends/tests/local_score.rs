//! Scoring many prompts at once with the real SmolLM2 (`LocalBackend::score_prompts` and
//! `Backend::score` on the worker thread): the same log-probabilities as each prompt scored
//! alone with `score_continuations`, the same ranking by `log P(yes) - log P(no)`, in fewer
//! forward calls; a prompt past the context is an error before anything runs; dropping the
//! future cancels the scoring and leaves the backend working.

#![cfg(feature = "local")]

use std::time::Duration;

use contract_backends::local::{fetch, BatchScores, LocalBackend, LocalError, LocalOptions};
use contract_core::extract::{Backend, BackendError, Request, ScoreRequest};
use contract_core::judge::margin;
use contract_core::prompt::{Message, Messages};
use contract_core::Constraint;

const PASSAGES: [&str; 6] = [
    "Total paid: $42.17 by Visa ending 4411.",
    "Thank you for shopping at Green Grocer!",
    "2 x Organic bananas @ 0.59 = 1.18",
    "Amount due 18.00 EUR, paid in cash.",
    "Store #118, 22 Harbour Road, Leeds",
    "Subtotal 39.90, tax 2.27, total 42.17",
];
const QUESTIONS: [&str; 2] = [
    "does this line say the total amount paid?",
    "does this line give the store's address?",
];
const ANSWERS: [&str; 5] = ["yes", "Yes", "no", "No", "Yes, it does."];

fn backend(options: LocalOptions) -> LocalBackend {
    let path = fetch::default_model_path().expect("default model (fetched on first use)");
    LocalBackend::with_options(path, options).expect("load SmolLM2")
}

/// Each passage with each question after it, as the passage judge asks (passage first: the
/// questions about one passage share it).
fn prompts() -> Vec<Messages> {
    PASSAGES
        .iter()
        .flat_map(|p| {
            QUESTIONS.iter().map(move |q| {
                Messages(vec![Message::user(format!(
                    "{p}\n\nQuestion: {q} Answer yes or no."
                ))])
            })
        })
        .collect()
}

fn alone(b: &LocalBackend, prompts: &[Messages]) -> (Vec<Vec<f64>>, u32) {
    let mut calls = 0;
    let logprobs = prompts
        .iter()
        .map(|p| {
            let s = b.score_continuations(&p.0, &ANSWERS).expect("score alone");
            calls += s.forward_calls;
            s.logprobs
        })
        .collect();
    (logprobs, calls)
}

fn max_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).map(|(x, y)| (x - y).abs())
        })
        .fold(0.0, f64::max)
}

/// The prompts of each question, ranked by margin (best first).
fn rankings(logprobs: &[Vec<f64>]) -> Vec<Vec<usize>> {
    (0..QUESTIONS.len())
        .map(|q| {
            let mut ranked: Vec<(usize, f64)> = logprobs
                .iter()
                .enumerate()
                .filter(|(i, _)| i % QUESTIONS.len() == q)
                .map(|(i, lp)| (i, margin(lp, &ANSWERS, &["yes", "Yes"], &["no", "No"])))
                .collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
            ranked.into_iter().map(|(i, _)| i).collect()
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn batched_scores_are_the_prompts_scored_alone() {
    let b = backend(LocalOptions::default());
    let prompts = prompts();
    let (want, alone_calls) = alone(&b, &prompts);
    let got: BatchScores = b.score_prompts(&prompts, &ANSWERS).expect("batched");
    let diff = max_diff(&got.logprobs, &want);
    eprintln!(
        "batched: {} forward calls, {} of {} prompt tokens fed (answers included); alone: {} \
         calls; max |logprob difference| {diff:e}",
        got.forward_calls, got.fed_tokens, got.prompt_tokens, alone_calls
    );
    assert!(diff < 1e-3, "max difference {diff}");
    for row in &got.logprobs {
        assert!(row.iter().all(|l| l.is_finite() && *l < 0.0), "{row:?}");
        // The long answer's first token is `Yes`: it is less likely than `Yes` alone.
        assert!(row[4] < row[1], "{row:?}");
    }
    assert_eq!(rankings(&got.logprobs), rankings(&want));
    // The template's head and each passage once, the answers' shared first token once a prompt.
    assert!(got.fed_tokens < got.prompt_tokens, "{got:?}");
    assert!(got.forward_calls < alone_calls, "{got:?}");
    // Small calls (2 sequences, 5 tokens each call): segments fed over several calls, the same
    // scores.
    let small = backend(LocalOptions::default().score_batch(2).score_tokens(5));
    let chunked = small.score_prompts(&prompts, &ANSWERS).expect("chunked");
    let diff = max_diff(&chunked.logprobs, &want);
    eprintln!(
        "chunked: {} forward calls; max |logprob difference| {diff:e}",
        chunked.forward_calls
    );
    assert!(diff < 1e-3, "max difference {diff}");
    assert!(chunked.forward_calls > got.forward_calls, "{chunked:?}");
    assert_eq!(chunked.fed_tokens, got.fed_tokens);

    // Through the worker thread: the same as on the calling thread.
    let req = ScoreRequest {
        prompts: prompts.clone(),
        answers: ANSWERS.iter().map(|a| a.to_string()).collect(),
    };
    let resp = runtime().block_on(b.score(&req)).expect("Backend::score");
    assert!(resp.exact);
    assert_eq!(resp.forward_calls, Some(got.forward_calls));
    assert!(max_diff(&resp.logprobs, &got.logprobs) < 1e-6);
}

#[test]
fn empty_requests_and_answers_cost_nothing() {
    let b = backend(LocalOptions::default());
    let none = b.score_prompts(&[], &ANSWERS).expect("no prompts");
    assert!(none.logprobs.is_empty());
    assert_eq!(none.forward_calls, 0);
    let prompts = prompts();
    let empty = b.score_prompts(&prompts[..2], &["", ""]).expect("empty");
    assert_eq!(empty.logprobs, vec![vec![0.0, 0.0]; 2]);
    assert_eq!(empty.forward_calls, 0);
    let no_answers = b.score_prompts(&prompts[..2], &[]).expect("no answers");
    assert_eq!(no_answers.logprobs, vec![Vec::<f64>::new(); 2]);
}

#[test]
fn a_prompt_past_the_context_fails_before_anything_runs() {
    let b = backend(LocalOptions::default());
    let long = "word ".repeat(10_000);
    let mut prompts = prompts();
    prompts.push(Messages(vec![Message::user(long)]));
    match b.score_prompts(&prompts, &ANSWERS) {
        Err(LocalError::ContextLength { tokens, context }) => {
            assert!(tokens > context, "{tokens} {context}")
        }
        other => panic!("expected a context error, got {other:?}"),
    }
    let req = ScoreRequest {
        prompts,
        answers: vec!["yes".into()],
    };
    match runtime().block_on(b.score(&req)) {
        Err(BackendError::ContextLength {
            prompt_tokens,
            context,
        }) => assert!(prompt_tokens > context),
        other => panic!("expected a context error, got {other:?}"),
    }
}

/// Dropping the future stops the scoring; the worker then answers the next request, and a
/// decode and a scoring job sent together both end (they take turns on the worker).
#[test]
fn a_dropped_scoring_is_cancelled_and_work_goes_on() {
    // Small calls: the whole job takes dozens of them.
    let b = backend(LocalOptions::default().score_batch(2).score_tokens(16));
    let rt = runtime();
    let many: Vec<Messages> = (0..24)
        .map(|i| {
            Messages(vec![Message::user(format!(
                "Line {i}: a receipt line number {i}.\n\nQuestion: is this the total? Answer yes \
                 or no."
            ))])
        })
        .collect();
    let req = ScoreRequest {
        prompts: many,
        answers: vec!["yes".into(), "no".into()],
    };
    let cut =
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(50), b.score(&req)).await });
    assert!(cut.is_err(), "the scoring ended within 50 ms: {cut:?}");
    let small = ScoreRequest {
        prompts: prompts()[..2].to_vec(),
        answers: vec!["yes".into(), "no".into()],
    };
    let decode = Request {
        max_tokens: Some(4),
        ..Request::new(
            std::sync::Arc::new(Constraint::unconstrained("hello")),
            Messages(vec![Message::user("Say hello.")]),
        )
    };
    let (scored, decoded) =
        rt.block_on(async { tokio::join!(b.score(&small), b.complete(&decode)) });
    let scored = scored.expect("scored after a cancelled job");
    assert_eq!(scored.logprobs.len(), 2);
    decoded.expect("decoded alongside");
    // The cancelled job stopped: its calls and the small job's are fewer than the whole job's
    // alone, and it was not counted as a scoring.
    let stats = b.decode_stats();
    assert_eq!(stats.scorings, 1, "{stats:?}");
    let whole = b
        .score_prompts(&req.prompts, &["yes", "no"])
        .expect("whole");
    eprintln!(
        "cancelled and small jobs: {} forward calls; the whole job: {}",
        stats.score_forward_calls, whole.forward_calls
    );
    assert!(
        stats.score_forward_calls < u64::from(whole.forward_calls),
        "{stats:?} {whole:?}"
    );
}
