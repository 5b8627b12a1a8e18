//! The question judge ([`Judge::Question`]): a yes/no question about each passage alone, which
//! passages are judged ([`judge_plan`]: those that could hold the values, pre-ranked by the
//! words they share with the question), and the passages ranked by the model's margins
//! ([`rank`]).

use std::collections::{BTreeMap, HashMap};

use super::groups::{FieldGroup, Needs};
use super::judge::{Judge, Ranked};
use crate::extract::{ScoreRequest, ScoreResponse};
use crate::passage::Passage;
use crate::prompt::{Message, Messages};

/// The answers a judge's question is scored by.
pub const ANSWERS: [&str; 4] = ["yes", "Yes", "no", "No"];

/// The judge's prompt: the passage, then the question, then "Answer yes or no." (the question
/// after the passage: measured far better than before it, `docs/benchmarks.md`).
pub fn judge_prompt(passage: &str, question: &str) -> Messages {
    Messages(vec![Message::user(format!(
        "{}\n\nQuestion: {question} Answer yes or no.",
        passage.trim()
    ))])
}

/// The judge's margin from one prompt's scored [`ANSWERS`]: `log(P(yes) + P(Yes)) -
/// log(P(no) + P(No))` ([`judge::margin`](crate::judge::margin)).
pub fn margin(logprobs: &[f64]) -> f64 {
    crate::judge::margin(logprobs, &ANSWERS, &["yes", "Yes"], &["no", "No"])
}

/// Lower-cased words of at least three letters, a plural or verb ending taken off: what the
/// lexical pre-ranking compares.
fn stems(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| {
            let w = w.to_lowercase();
            let mut s = w.as_str();
            for suffix in ["ing", "ed", "es", "s"] {
                if s.len() > suffix.len() + 3 {
                    if let Some(t) = s.strip_suffix(suffix) {
                        s = t;
                        break;
                    }
                }
            }
            s.to_owned()
        })
        .collect()
}

/// Words too common in questions to tell passages apart.
const STOP: [&str; 24] = [
    "the", "this", "that", "doe", "does", "text", "give", "and", "for", "with", "which", "what",
    "whose", "from", "are", "was", "its", "any", "has", "have", "not", "who", "when", "how",
];

/// Each of `candidates` (passage indices) with the words it shares with `query`, weighted by
/// their inverse document frequency over the candidates, in the order given.
fn lexical_scores(candidates: &[usize], passages: &[Passage], query: &str) -> Vec<(usize, f64)> {
    let q: Vec<String> = stems(query)
        .into_iter()
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect();
    let docs: Vec<Vec<String>> = candidates
        .iter()
        .map(|&i| stems(&passages[i].text))
        .collect();
    let n = docs.len().max(1) as f64;
    let idf = |w: &str| {
        let df = docs.iter().filter(|d| d.iter().any(|x| x == w)).count() as f64;
        ((n + 1.0) / (df + 0.5)).ln()
    };
    let weights: HashMap<&str, f64> = q.iter().map(|w| (w.as_str(), idf(w))).collect();
    candidates
        .iter()
        .zip(&docs)
        .map(|(&i, d)| {
            let s: f64 = weights
                .iter()
                .filter(|(w, _)| d.iter().any(|x| x == *w))
                .map(|(_, v)| v)
                .sum();
            (i, s)
        })
        .collect()
}

/// Whether passage text could hold values with `needs`.
fn could_hold(text: &str, needs: Needs) -> bool {
    (!needs.digit || text.chars().any(|c| c.is_ascii_digit()))
        && (!needs.letter || text.chars().any(char::is_alphabetic))
}

/// What [`judge_plan`] gives.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgePlan {
    /// The prompts to score.
    pub request: ScoreRequest,
    /// For each prompt, the (group, passage) pairs it answers.
    pub owners: Vec<Vec<(usize, usize)>>,
    /// For each group, how many passages could hold its values.
    pub counts: Vec<usize>,
    /// For each group, each judged passage's share of the words of the group's question
    /// (IDF-weighted), from 0 to 1 (the passage sharing most); all 0 when none shares a word.
    pub lexical: Vec<BTreeMap<usize, f64>>,
}

/// The prompts of one [`ScoreRequest`] judging `passages` for every group: which passages each
/// group judges (candidates that could hold its values, capped at `max_judged` by the words
/// they share with the question), and for each prompt, the (group, passage) pairs it answers
/// (a passage's text asked the same question twice is asked once).
pub fn judge_plan(groups: &[FieldGroup], passages: &[Passage], max_judged: usize) -> JudgePlan {
    let mut prompts = Vec::new();
    let mut owners: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut seen: HashMap<(usize, String), usize> = HashMap::new();
    let mut counts = Vec::new();
    let mut lexical = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let candidates: Vec<usize> = (0..passages.len())
            .filter(|&i| could_hold(&passages[i].text, group.needs))
            .collect();
        counts.push(candidates.len());
        let mut scores = lexical_scores(&candidates, passages, &group.question);
        if scores.len() > max_judged {
            // The best by shared words (a stable sort: ties in document order), judged in
            // document order.
            scores.sort_by(|a, b| b.1.total_cmp(&a.1));
            scores.truncate(max_judged);
            scores.sort_unstable_by_key(|&(i, _)| i);
        }
        let top = scores.iter().map(|&(_, s)| s).fold(0.0, f64::max);
        lexical.push(
            scores
                .iter()
                .map(|&(i, s)| (i, if top > 0.0 { s / top } else { 0.0 }))
                .collect(),
        );
        let mut judged: Vec<usize> = scores.iter().map(|&(i, _)| i).collect();
        judged.dedup();
        for p in judged {
            let key = (g, passages[p].text.trim().to_owned());
            match seen.get(&key) {
                Some(&at) => owners[at].push((g, p)),
                None => {
                    seen.insert(key, prompts.len());
                    prompts.push(judge_prompt(&passages[p].text, &group.question));
                    owners.push(vec![(g, p)]);
                }
            }
        }
    }
    JudgePlan {
        request: ScoreRequest {
            prompts,
            answers: ANSWERS.iter().map(|a| (*a).to_owned()).collect(),
        },
        owners,
        counts,
        lexical,
    }
}

/// Each group's passages ranked by the judge's margins (`response` answers the request
/// `plan` made), each margin plus `lexical_weight` times the passage's share of the
/// question's words ([`JudgePlan::lexical`]): a tie-break worth up to `lexical_weight` nats
/// where the model barely separates the passages (see
/// [`Selection::lexical_weight`](super::Selection::lexical_weight)). The recorded margins are
/// the model's own. Equal scores keep document order. A margin that is not a number is an error
/// naming the prompt.
pub fn rank(
    plan: &JudgePlan,
    response: &ScoreResponse,
    lexical_weight: f64,
) -> Result<Vec<Ranked>, String> {
    let (owners, counts) = (&plan.owners, &plan.counts);
    let groups = counts.len();
    if response.logprobs.len() != owners.len() {
        return Err(format!(
            "the backend scored {} prompts of {}",
            response.logprobs.len(),
            owners.len()
        ));
    }
    let mut out: Vec<Ranked> = (0..groups)
        .map(|g| Ranked {
            order: Vec::new(),
            margins: BTreeMap::new(),
            candidates: counts.get(g).copied().unwrap_or(0),
            judge: Judge::Question,
            direct: Vec::new(),
        })
        .collect();
    for (prompt, owned) in owners.iter().enumerate() {
        let m = margin(&response.logprobs[prompt]);
        if m.is_nan() {
            return Err(format!(
                "the judge's margin for prompt {prompt} is not a number"
            ));
        }
        for &(g, p) in owned {
            if let Some(r) = out.get_mut(g) {
                r.margins.insert(p, m);
            }
        }
    }
    for (g, r) in out.iter_mut().enumerate() {
        let lexical = plan.lexical.get(g);
        let mut order: Vec<(usize, f64)> = r
            .margins
            .iter()
            .map(|(&p, &m)| {
                let shared = lexical.and_then(|l| l.get(&p)).copied().unwrap_or(0.0);
                (p, m + lexical_weight * shared)
            })
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        r.order = order.into_iter().map(|(p, _)| p).collect();
    }
    Ok(out)
}
