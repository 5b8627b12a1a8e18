//! Passage choice for the grounded contract: the model judges every line of a release on its
//! own ("does this sentence say how much revenue the company expects...?") by the likelihood it
//! gives `yes` against `no`, and the lines are ranked by that margin. The `routed` mode of the
//! study then runs the grounded extraction on the best-ranked line alone, and on the next one
//! when code rejects the first answer (not guidance for a period after the one the release
//! reports); a release whose tried lines give no such guidance has none.
//!
//! Why: on whole releases a 0.5B model asked to quote the guidance sentence quoted the heading
//! or the reporting line instead (`docs/benchmarks.md`, "Grounded values"); given the right
//! line it copies the values right (`../shared/notes/grounding.md`). A yes/no question per line
//! scores every candidate instead of trusting one greedy first token.

use std::time::Instant;

use serde::Serialize;

/// The question the model answers about every line (asked after the line, in the user
/// message).
///
/// Chosen on the 40 development releases (seed 2026) with Qwen2.5-Coder-0.5B: with this
/// question after the line the guidance line ranked first in 23 of 28 releases; the same idea as
/// a system message before the line ranked it first in 1 of 10, and with six worked examples in
/// the system message in 2 of 20 (`docs/benchmarks.md`, "Passage choice").
pub const JUDGE_QUESTION: &str =
    "does this sentence say how much revenue the company expects to make in a future period?";

/// The user message that asks [`JUDGE_QUESTION`] about `line`.
pub fn judge_prompt(line: &str) -> String {
    format!("{line}\n\nQuestion: {JUDGE_QUESTION} Answer yes or no.")
}

/// A judge's answer about one line: `log P(yes) - log P(no)` (nats) and the forward calls it
/// took, computed at once (a local model) or by a server.
pub type Margin<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(f64, u32), String>> + 'a>>;

/// Answers [`JUDGE_QUESTION`] about one line.
pub trait Judge {
    /// The margin for `line` (see [`Margin`]).
    fn margin<'a>(&'a self, line: &'a str) -> Margin<'a>;
}

impl<J: Judge + ?Sized> Judge for &J {
    fn margin<'a>(&'a self, line: &'a str) -> Margin<'a> {
        (**self).margin(line)
    }
}

/// `log(P(a) + P(b))` from two log-probabilities.
fn log_sum_exp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        m
    } else {
        m + ((a - m).exp() + (b - m).exp()).ln()
    }
}

/// The margin from a server's top first tokens (`(token, logprob)`, as
/// `OpenAiBackend::first_token_logprobs` gives them): `log(P(yes) + P(Yes)) - log(P(no) +
/// P(No))`, tokens compared with their surrounding whitespace trimmed. An answer missing from
/// the list is less likely than every listed token, so it is counted at the least listed
/// log-probability (an upper bound): with neither answer listed the margin is 0.
pub fn margin_from_top(top: &[(String, f64)]) -> f64 {
    let floor = top
        .iter()
        .map(|(_, l)| *l)
        .fold(f64::INFINITY, f64::min)
        .min(0.0);
    let answer = |spellings: [&str; 2]| {
        let found = top
            .iter()
            .filter(|(t, _)| spellings.contains(&t.trim()))
            .fold(f64::NEG_INFINITY, |acc, (_, l)| log_sum_exp(acc, *l));
        if found == f64::NEG_INFINITY {
            floor
        } else {
            found
        }
    };
    answer(["yes", "Yes"]) - answer(["no", "No"])
}

/// The lines of a release ranked by the model's judgement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Route {
    /// Each candidate line's number (1-based, as in the release) and margin, highest margin
    /// first (on a tie, the earlier line first).
    pub ranked: Vec<(usize, f64)>,
    /// Forward calls the judging took.
    pub forward_calls: u32,
    /// Wall time of the judging, in seconds.
    pub seconds: f64,
}

impl Route {
    /// The first `k` ranked lines of `doc`: number and text.
    pub fn passages<'a>(&self, doc: &'a str, k: usize) -> Vec<(usize, &'a str)> {
        self.ranked
            .iter()
            .take(k)
            .filter_map(|&(n, _)| Some((n, doc.lines().nth(n.checked_sub(1)?)?.trim())))
            .collect()
    }
}

/// The lines a release's guidance can be on, numbered from 1: every line with a letter and a
/// digit in it (guidance copies both ends as numbers from its line, so a line without a digit,
/// a heading such as "Outlook", cannot hold it; not judging those saved a fifth of the judging
/// time on the development releases).
pub fn candidate_lines(doc: &str) -> Vec<(usize, &str)> {
    doc.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| {
            l.chars().any(char::is_alphabetic) && l.chars().any(|c| c.is_ascii_digit())
        })
        .collect()
}

/// Judges every candidate line of `doc` and ranks them.
pub async fn route(doc: &str, judge: &(impl Judge + ?Sized)) -> Result<Route, String> {
    let t0 = Instant::now();
    let mut ranked = Vec::new();
    let mut calls = 0;
    for (n, line) in candidate_lines(doc) {
        let (m, c) = judge.margin(line).await?;
        if !m.is_finite() {
            return Err(format!("line {n}: the judge's margin is {m}"));
        }
        calls += c;
        ranked.push((n, m));
    }
    // Stable: equal margins keep the release's order.
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(Route {
        ranked,
        forward_calls: calls,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(feature = "local")]
mod local {
    use contract_backends::local::LocalBackend;
    use contract_core::prompt::Message;

    use super::{margin_from_top, Judge, Margin};

    /// The four answers scored by the model's own next-token distribution
    /// ([`LocalBackend::score_continuations`]), combined as for a server: [`margin_from_top`],
    /// `log(P(yes) + P(Yes)) - log(P(no) + P(No))` (every answer is scored, so none is counted
    /// at a floor).
    impl Judge for LocalBackend {
        fn margin<'a>(&'a self, line: &'a str) -> Margin<'a> {
            const ANSWERS: [&str; 4] = ["yes", "Yes", "no", "No"];
            let msgs = [Message::user(super::judge_prompt(line))];
            let margin = self
                .score_continuations(&msgs, &ANSWERS)
                .map_err(|e| e.to_string())
                .and_then(|s| {
                    if s.logprobs.len() != ANSWERS.len() {
                        return Err("the model scored fewer than four answers".into());
                    }
                    let scored: Vec<(String, f64)> = ANSWERS
                        .iter()
                        .map(|a| a.to_string())
                        .zip(s.logprobs.iter().copied())
                        .collect();
                    Ok((margin_from_top(&scored), s.forward_calls))
                });
            Box::pin(std::future::ready(margin))
        }
    }
}

#[cfg(feature = "remote")]
mod remote {
    use contract_backends::openai::OpenAiBackend;
    use contract_core::prompt::{Message, Messages};

    use super::{margin_from_top, Judge, Margin};

    /// The same question on an OpenAI-compatible server that returns log-probabilities
    /// (`logprobs` with `top_logprobs: 20`, one token): [`margin_from_top`]. One request per
    /// line, counted as one forward call.
    impl Judge for OpenAiBackend {
        fn margin<'a>(&'a self, line: &'a str) -> Margin<'a> {
            Box::pin(async move {
                let msgs = Messages(vec![Message::user(super::judge_prompt(line))]);
                let top = self
                    .first_token_logprobs(&msgs, 20)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok((margin_from_top(&top), 1))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scripted(Vec<f64>, std::cell::Cell<usize>);
    impl Judge for Scripted {
        fn margin<'a>(&'a self, _: &'a str) -> Margin<'a> {
            let i = self.1.get();
            self.1.set(i + 1);
            let m = self.0.get(i).map(|&m| (m, 1)).ok_or("no more".into());
            Box::pin(std::future::ready(m))
        }
    }

    fn route(doc: &str, judge: &Scripted) -> Result<Route, String> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(super::route(doc, judge))
    }

    #[test]
    fn a_servers_top_tokens_give_the_margin() {
        let top = |v: &[(&str, f64)]| -> Vec<(String, f64)> {
            v.iter().map(|(t, l)| (t.to_string(), *l)).collect()
        };
        let m = margin_from_top(&top(&[
            ("Yes", -0.5),
            ("No", -1.0),
            (" yes", -5.0),
            ("To", -6.0),
        ]));
        // Both spellings of yes count; `No` is listed.
        let want = (f64::exp(-0.5) + f64::exp(-5.0)).ln() + 1.0;
        assert!((m - want).abs() < 1e-12, "{m} {want}");
        // An unlisted answer counts at the least listed log-probability.
        let m = margin_from_top(&top(&[("Yes", -0.2), ("The", -3.0)]));
        assert!((m - 2.8).abs() < 1e-12, "{m}");
        assert!(margin_from_top(&top(&[("No", -0.1), ("The", -3.0)])) < 0.0);
        assert_eq!(margin_from_top(&top(&[("The", -0.1), ("A", -3.0)])), 0.0);
    }

    const DOC: &str =
        "Heading 1\n\nRevenue was $5 million.\n2024\nOutlook\nWe expect revenue of $6 million.";

    #[test]
    fn lines_are_ranked_by_margin() {
        assert_eq!(
            candidate_lines(DOC),
            [
                (1, "Heading 1"),
                (3, "Revenue was $5 million."),
                (6, "We expect revenue of $6 million.")
            ]
        );
        let r = route(DOC, &Scripted(vec![-0.5, 1.0, 2.0], Default::default())).unwrap();
        assert_eq!(r.ranked, [(6, 2.0), (3, 1.0), (1, -0.5)]);
        assert_eq!(
            r.passages(DOC, 2),
            [
                (6, "We expect revenue of $6 million."),
                (3, "Revenue was $5 million.")
            ]
        );
        assert_eq!(r.forward_calls, 3);
        let r = route(DOC, &Scripted(vec![3.0, 1.0, 3.0], Default::default())).unwrap();
        assert_eq!(r.ranked[0].0, 1, "a tie goes to the earlier line");
        assert_eq!(r.passages(DOC, 9).len(), 3);
    }

    #[test]
    fn a_failing_or_broken_judge_is_an_error() {
        assert!(route(DOC, &Scripted(vec![1.0], Default::default())).is_err());
        let err = route(DOC, &Scripted(vec![1.0, f64::NAN, 1.0], Default::default())).unwrap_err();
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn the_question_follows_the_line() {
        let p = judge_prompt("We expect revenue of $6 million.");
        assert!(
            p.starts_with("We expect revenue of $6 million.\n\nQuestion: "),
            "{p}"
        );
        assert!(p.ends_with("Answer yes or no."), "{p}");
    }
}
