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

/// Answers [`JUDGE_QUESTION`] about one line.
pub trait Judge {
    /// `log P(yes) - log P(no)` for `line` (nats), and the forward calls it took.
    fn margin(&self, line: &str) -> Result<(f64, u32), String>;
}

impl<J: Judge + ?Sized> Judge for &J {
    fn margin(&self, line: &str) -> Result<(f64, u32), String> {
        (**self).margin(line)
    }
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
pub fn route(doc: &str, judge: &impl Judge) -> Result<Route, String> {
    let t0 = Instant::now();
    let mut ranked = Vec::new();
    let mut calls = 0;
    for (n, line) in candidate_lines(doc) {
        let (m, c) = judge.margin(line)?;
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

    use super::Judge;

    /// Both spellings of each answer count: `log(P(yes) + P(Yes)) - log(P(no) + P(No))`.
    impl Judge for LocalBackend {
        fn margin(&self, line: &str) -> Result<(f64, u32), String> {
            let msgs = [Message::user(super::judge_prompt(line))];
            let s = self
                .score_continuations(&msgs, &["yes", "Yes", "no", "No"])
                .map_err(|e| e.to_string())?;
            let lse = |a: f64, b: f64| {
                let m = a.max(b);
                if m == f64::NEG_INFINITY {
                    m
                } else {
                    m + ((a - m).exp() + (b - m).exp()).ln()
                }
            };
            let [y, yc, n, nc] = s.logprobs[..] else {
                return Err("the model scored fewer than four answers".into());
            };
            Ok((lse(y, yc) - lse(n, nc), s.forward_calls))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scripted(Vec<f64>, std::cell::Cell<usize>);
    impl Judge for Scripted {
        fn margin(&self, _: &str) -> Result<(f64, u32), String> {
            let i = self.1.get();
            self.1.set(i + 1);
            self.0.get(i).map(|&m| (m, 1)).ok_or("no more".into())
        }
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
