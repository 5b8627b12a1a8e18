//! How a group's passages are judged ([`Judge`], and [`ValuePrompt`] for how values are asked
//! for) and what judging one group gives ([`Ranked`]): read by the selection's settings
//! ([`Selection`](super::Selection)), the question judge (`question`), the value judge
//! (`values`) and the record (`record`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

/// How a group's passages are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Judge {
    /// The default. When the group's first field has values the document lets one enumerate
    /// ([`value_candidates`](super::value_candidates): the expressions of its form, the numbers the
    /// document writes, its lines; not a `grounded(line)` quote of evidence) and the whole document
    /// fits [`Selection::max_shown_chars`](super::Selection::max_shown_chars), each such value is
    /// scored as the field's answer over the whole document (as
    /// [`Selection::value_prompt`](super::Selection::value_prompt) asks), and `null` with it; a
    /// passage ranks by its best value, its margin that value's log-likelihood minus `null`'s. A
    /// grounded string's values are the document's short lines, each line's value after a label, a
    /// name and its bracketed code as two values ([`line_values`](super::line_values)), and each
    /// line joined to the next (a name the layout wrapped). A group of one field whose value is
    /// that whole copy (a date's `original`, a number, a grounded string) takes the values
    /// themselves, best first, without generating. Every other group is judged by
    /// [`Judge::Question`].
    Values,
    /// A yes/no question about each passage alone ([`judge_prompt`](super::judge_prompt)).
    Question,
}

/// How [`Judge::Values`] asks the model for a field's value when it scores the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ValuePrompt {
    /// The default: [`ValuePrompt::Question`] for a number (an amount, a count),
    /// [`ValuePrompt::Contract`] for a string or an expression of a form (a name, a date). Measured
    /// on the 20 development receipts with the 0.5B model (`docs/benchmarks.md`, "Receipts"): asked
    /// in words, the best value was the right total in 12 of 20 (13 since each sentence ends in a
    /// line break), as the JSON reply in 8; for the shop's name the words lost one the JSON reply
    /// had right (a document number, `SO00022185`, was the best sentence) and gained none in the
    /// receipts compared.
    #[default]
    Auto,
    /// A question in words after the document, made from the field's doc comment ("Question: what
    /// is the total amount paid? Answer in one sentence."), and each value scored as the sentence
    /// that answers it ("The total amount paid is 60.30.", then a line break;
    /// [`ValueCandidates::question`](super::ValueCandidates::question),
    /// [`ValueCandidates::sentences`](super::ValueCandidates::sentences)).
    Question,
    /// The contract's own extraction prompt, each value scored as the JSON reply starts (`{"total":
    /// {"value": 60.30,`; [`ValueCandidates::answers`](super::ValueCandidates::answers)).
    Contract,
}

/// One group's judged passages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// Indices into the passages, best first.
    pub order: Vec<usize>,
    /// The margin of each judged passage, by passage index.
    pub margins: BTreeMap<usize, f64>,
    /// Passages that could hold the group's values (before the cap on those judged).
    pub candidates: usize,
    /// How the passages were judged.
    pub judge: Judge,
    /// For a group filled by its values alone
    /// ([`ValueCandidates::direct`](super::ValueCandidates::direct)): the group's JSON object for
    /// each value, best first, with its margin and the lines it is written on.
    pub direct: Vec<(Map<String, Value>, f64, Vec<usize>)>,
}
