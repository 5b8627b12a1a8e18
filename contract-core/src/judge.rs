//! A passage judged by the model's answer to a yes/no question about it: the margin
//! `log P(yes) - log P(no)` from the log-probabilities [`Backend::score`] gives (several spellings
//! of each answer summed), and the answers' log-probabilities read from a server's list of most
//! likely first tokens.
//!
//! ```
//! use contract_core::judge::margin;
//!
//! let answers = ["yes", "Yes", "no", "No"].map(String::from);
//! let logprobs = [-1.0, -2.0, -3.0, -0.5];
//! let m = margin(&logprobs, &answers, &["yes", "Yes"], &["no", "No"]);
//! let want = ((-1f64).exp() + (-2f64).exp()).ln() - ((-3f64).exp() + (-0.5f64).exp()).ln();
//! assert!((m - want).abs() < 1e-12);
//! ```
//!
//! [`Backend::score`]: crate::Backend::score

/// `log(sum(exp(x)))` over `xs`, computed stably: -inf for none (or when every one is -inf).
pub fn log_sum_exp(xs: impl IntoIterator<Item = f64>) -> f64 {
    let xs: Vec<f64> = xs.into_iter().collect();
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY || max.is_nan() {
        return max;
    }
    max + xs.iter().map(|x| (x - max).exp()).sum::<f64>().ln()
}

/// `log(sum P(yes spellings)) - log(sum P(no spellings))` (nats), from `logprobs[i]`, the
/// log-probability of `answers[i]` ([`ScoreResponse::logprobs`]'s row for one prompt, with
/// [`ScoreRequest::answers`]): an answer counts for `yes` when its text, surrounding whitespace
/// trimmed, is one of `yes` (trimmed too), for `no` likewise. Spellings that are not among the
/// answers add nothing; with no probability on either side the margin is 0 (no evidence), with
/// none on one side it is infinite. Positive: the model leans to yes.
///
/// [`ScoreResponse::logprobs`]: crate::ScoreResponse::logprobs
/// [`ScoreRequest::answers`]: crate::ScoreRequest::answers
pub fn margin(logprobs: &[f64], answers: &[impl AsRef<str>], yes: &[&str], no: &[&str]) -> f64 {
    let side = |spellings: &[&str]| {
        log_sum_exp(
            answers
                .iter()
                .zip(logprobs)
                .filter(|(a, _)| spellings.iter().any(|s| s.trim() == a.as_ref().trim()))
                .map(|(_, &l)| l),
        )
    };
    let (y, n) = (side(yes), side(no));
    if y == f64::NEG_INFINITY && n == f64::NEG_INFINITY {
        0.0
    } else {
        y - n
    }
}

/// Each answer's log-probability read from a server's most likely first tokens (`(token,
/// logprob)`, as an OpenAI-compatible server lists them in `top_logprobs`): the listed tokens
/// whose text, surrounding whitespace trimmed, is the answer's trimmed text, summed (`Yes` and
/// ` Yes` are both the answer `Yes`). An answer missing from the list is less likely than every
/// listed token, so it is counted at the least listed log-probability (an upper bound); the
/// second value says whether every answer was listed. Only an answer's first token is scored:
/// an answer of several tokens is found only if a listed token is the whole of it.
pub fn answers_from_top(top: &[(String, f64)], answers: &[impl AsRef<str>]) -> (Vec<f64>, bool) {
    let floor = top
        .iter()
        .map(|(_, l)| *l)
        .fold(f64::INFINITY, f64::min)
        .min(0.0);
    let mut all_listed = true;
    let logprobs = answers
        .iter()
        .map(|a| {
            let a = a.as_ref().trim();
            let found = log_sum_exp(top.iter().filter(|(t, _)| t.trim() == a).map(|(_, l)| *l));
            if found == f64::NEG_INFINITY {
                all_listed = false;
                floor
            } else {
                found
            }
        })
        .collect();
    (logprobs, all_listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(v: &[(&str, f64)]) -> Vec<(String, f64)> {
        v.iter().map(|(t, l)| (t.to_string(), *l)).collect()
    }

    const ANSWERS: [&str; 4] = ["yes", "Yes", "no", "No"];
    const YES: [&str; 2] = ["yes", "Yes"];
    const NO: [&str; 2] = ["no", "No"];

    #[test]
    fn log_sum_exp_is_stable_and_empty_is_minus_infinity() {
        assert_eq!(log_sum_exp([]), f64::NEG_INFINITY);
        assert_eq!(log_sum_exp([f64::NEG_INFINITY; 2]), f64::NEG_INFINITY);
        let l = log_sum_exp([1000.0, 1000.0]);
        assert!((l - (1000.0 + 2f64.ln())).abs() < 1e-9, "{l}");
        assert_eq!(log_sum_exp([-3.0, f64::NEG_INFINITY]), -3.0);
    }

    #[test]
    fn the_margin_sums_the_spellings_of_each_side() {
        let m = margin(&[-0.5, -5.0, -1.0, -9.0], &ANSWERS, &YES, &NO);
        let want = (f64::exp(-0.5) + f64::exp(-5.0)).ln() - (f64::exp(-1.0) + f64::exp(-9.0)).ln();
        assert!((m - want).abs() < 1e-12, "{m} {want}");
        // Answers are compared trimmed; an answer outside both sides counts for neither.
        let answers = [" Yes", "maybe", "No "];
        let m = margin(&[-1.0, -0.1, -2.0], &answers, &YES, &NO);
        assert!((m - 1.0).abs() < 1e-12, "{m}");
        assert_eq!(margin(&[-1.0], &["maybe"], &YES, &NO), 0.0);
        assert_eq!(margin(&[-1.0], &["yes"], &YES, &NO), f64::INFINITY);
        assert!(margin(&[-1.0, -0.1], &["yes", "no"], &YES, &NO) < 0.0);
    }

    #[test]
    fn a_servers_top_tokens_give_each_answer() {
        let (lp, all) = answers_from_top(
            &top(&[
                ("Yes", -0.5),
                ("No", -1.0),
                (" yes", -5.0),
                ("To", -6.0),
                ("yes", -7.0),
            ]),
            &ANSWERS,
        );
        assert!(!all, "`no` is not listed");
        let yes = (f64::exp(-5.0) + f64::exp(-7.0)).ln();
        assert_eq!(lp.len(), 4);
        assert!((lp[0] - yes).abs() < 1e-12, "{lp:?}");
        assert_eq!(lp[1], -0.5);
        assert_eq!(lp[2], -7.0, "the least listed");
        assert_eq!(lp[3], -1.0);
        // The margin as the filings example computed it from the same list when both spellings
        // of a side are listed.
        let m = margin(&lp, &ANSWERS, &YES, &NO);
        let want = (f64::exp(-0.5) + f64::exp(-5.0) + f64::exp(-7.0)).ln()
            - (f64::exp(-1.0) + f64::exp(-7.0)).ln();
        assert!((m - want).abs() < 1e-12, "{m} {want}");
        let (lp, all) = answers_from_top(&top(&[("Yes", -0.2), ("No", -3.0)]), &["Yes", "No"]);
        assert!(all);
        assert_eq!(lp, [-0.2, -3.0]);
        // An empty list has no floor below 0.
        let (lp, all) = answers_from_top(&[], &["Yes"]);
        assert_eq!((lp, all), (vec![0.0], false));
    }
}
