//! The record of how an extraction's evidence was selected: every group's judge, question,
//! best passages, tries and [`Outcome`] ([`SelectionRecord`], [`GroupRecord`]), or why selection
//! did not run ([`Skipped`]).

use serde::Serialize;

use super::judge::Judge;

/// One group's part of an [`Extraction`](crate::Extraction): how its evidence was chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupRecord {
    /// The group's name.
    pub group: String,
    /// Its fields.
    pub fields: Vec<String>,
    /// The question asked of the passages.
    pub question: String,
    /// How its passages were judged.
    pub judge: Judge,
    /// Passages that could hold its values.
    pub candidates: usize,
    /// Passages judged.
    pub judged: usize,
    /// The best-judged passages (at most 5), best first: lines `[first, last]` and margin.
    pub best: Vec<RankedPassage>,
    /// The passages each try showed the model, in order: lines `[first, last]`.
    pub tries: Vec<Vec<[usize; 2]>>,
    /// How the group ended.
    pub outcome: Outcome,
}

/// A judged passage in a [`GroupRecord`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedPassage {
    /// Its first and last line (1-based).
    pub lines: [usize; 2],
    /// `log P(yes) - log P(no)` ([`Judge::Question`]), or its best value's log-likelihood
    /// minus `null`'s ([`Judge::Values`]).
    pub margin: f64,
}

/// How a group of a selected extraction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Filled from the last passage tried.
    Filled,
    /// No passage scored above the margin: not stated, left null.
    NotStated,
    /// No passage could hold its values: left null.
    NoCandidate,
    /// Every passage tried was refused: left null.
    Refused,
    /// Every passage tried was refused and the fields cannot be null: the last reply is kept,
    /// with its violations.
    Failed,
}

/// How an [`Extraction`](crate::Extraction)'s evidence was selected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectionRecord {
    /// Passages the document was cut into.
    pub passages: usize,
    /// Prompts the judge scored.
    pub judged: usize,
    /// Forward calls of the judging (a local backend).
    pub judge_forward_calls: Option<u32>,
    /// Wall time of the judging, in milliseconds.
    pub judge_ms: f64,
    /// Each group.
    pub groups: Vec<GroupRecord>,
}

/// Why selection did not run for an extraction that could have used it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The reason (the backend does not score answers, the document has no passage).
    pub reason: String,
}
