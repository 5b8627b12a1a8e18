//! Evidence selection: the model judges the document's passages (or the values it writes) for
//! each group of fields, and the values are copied from the best ones only.
//!
//! Why: asked to fill a contract from a whole document, a small model copies the wrong span
//! (a barcode as a receipt's total, a registration number as its date, the reported quarter
//! instead of the guidance): greedy decoding commits to the first tokens of an answer before
//! it has seen the rest of it. Scoring whole answers fixes most of that
//! (`docs/benchmarks.md`, "Passage choice"). So for a grounded contract the
//! [`Extractor`](crate::Extractor) by default:
//!
//! 1. cuts the document into passages ([`passage`](crate::passage): lines, sentences and
//!    entries that wrap over lines, pieces of long lines, every one bounded);
//! 2. groups the contract's fields ([`field_groups`]): fields tied by a rule or a grounding
//!    (`both_or_neither(period, low, high)`, `grounded(in = quote)`) or named in one
//!    `#[contract(group = "..")]` are judged and extracted together, every other field alone;
//! 3. judges, in [`Backend::score`](crate::Backend::score) requests (a local backend answers them in few forward
//!    calls, a server through log-probabilities):
//!    - [`Judge::Values`] (the default) for a group whose first field's values the document
//!      lets one list ([`value_candidates`]: the whole expressions of its form, the numbers it
//!      writes, its lines when they are short): every such value is scored as that field's
//!      answer over the whole document (by default as the sentence answering a question in
//!      words, [`ValuePrompt`]), and a passage ranks by the best value written in it;
//!    - a yes/no question about each passage alone for the other groups (and for documents
//!      longer than [`Selection::max_shown_chars`]): the group's
//!      `#[contract(question = "..")]`, else one made from the fields' doc comments;
//! 4. fills a group of one field whose whole value is such a value (a grounded string, a
//!    date's `original`) with the best value itself; extracts every other group from its best
//!    passage alone, under a mask that can only copy text of that passage (the request's
//!    source is an [excerpt](Source::excerpt)); a list from its best passages together;
//! 5. reads the whole contract back (normalised and checked against the document, the
//!    contract's own checks included); a group whose values are refused is tried again with
//!    its next value or passage, up to [`Selection::tries`], then left null;
//! 6. records every group's judge, question, scores, the passages used and every attempt in
//!    the [`Extraction`](crate::Extraction).
//!
//! A group whose best passage scores below [`Selection::min_margin`] is not stated in the
//! document: its fields are null (a list empty) without asking the model for them.

// The parts, re-exported here: the field groups and their questions, the question judge, the
// values judge, the record of a selection, and the merge of the groups' values.
mod groups;
mod judge;
mod merge;
mod question;
mod record;
mod values;

use std::collections::BTreeMap;
use std::ops::Range;

use crate::passage::{Cutter, Passage};
use crate::source::Source;

pub use groups::{field_groups, first_clause, FieldGroup, Needs};
pub use judge::{Judge, Ranked, ValuePrompt};
pub(crate) use merge::item_key;
pub use merge::{group_of_path, merge, merge_lists};
pub use question::{judge_plan, judge_prompt, margin, rank, JudgePlan, ANSWERS};
pub use record::{GroupRecord, Outcome, RankedPassage, SelectionRecord, Skipped};
pub use values::{line_values, value_candidates, ValueCandidates};

/// How a document is cut into the passages that are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Passages {
    /// Every non-empty line ([`Cutter::lines`]).
    Lines,
    /// Sentences and entries, wrapped lines joined ([`Cutter::sentences`], the default).
    Sentences,
    /// Runs of `lines` non-empty lines overlapping by `overlap` ([`Cutter::windows`]).
    Windows {
        /// Lines a window.
        lines: usize,
        /// Lines consecutive windows share (less than `lines`).
        overlap: usize,
    },
    /// One passage a page ([`Cutter::pages`]).
    Pages,
}

/// Whether and how an [`Extractor`](crate::Extractor) selects evidence.
#[derive(Debug, Clone)]
pub struct Selection {
    pub(crate) mode: SelectionMode,
    pub(crate) cutter: Cutter,
    pub(crate) passages: Passages,
    pub(crate) tries: usize,
    pub(crate) list_passages: usize,
    pub(crate) opening_chars: usize,
    pub(crate) min_margin: f64,
    pub(crate) min_value_margin: f64,
    pub(crate) max_judged: usize,
    pub(crate) lexical_weight: f64,
    pub(crate) questions: BTreeMap<String, String>,
    pub(crate) judge: Judge,
    pub(crate) max_shown_chars: usize,
    pub(crate) max_value_line_chars: usize,
    pub(crate) max_values: usize,
    pub(crate) value_prompt: ValuePrompt,
}

/// When selection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SelectionMode {
    /// For a grounded contract, when the backend scores answers.
    Auto,
    /// Never.
    Off,
}

impl Default for Selection {
    /// On for grounded contracts; passages cut by [`Cutter::default`]; values judged where a
    /// group's values can be enumerated ([`Judge::Values`], documents of up to 32,000
    /// characters, lines of up to 120 characters as values), else a question; 3 passages tried
    /// per group; lists from their best 4 passages and the document's first 1,000 characters
    /// ([`Selection::opening_chars`]); no group left null for its margins alone
    /// (see [`Selection::min_margin`]); at most 96 passages judged per group, 400 values.
    fn default() -> Self {
        Selection {
            mode: SelectionMode::Auto,
            cutter: Cutter::default(),
            passages: Passages::Sentences,
            tries: 3,
            list_passages: 4,
            opening_chars: 1_000,
            min_margin: f64::NEG_INFINITY,
            min_value_margin: f64::NEG_INFINITY,
            max_judged: 96,
            lexical_weight: 1.0,
            questions: BTreeMap::new(),
            judge: Judge::Values,
            max_shown_chars: 32_000,
            max_value_line_chars: 120,
            max_values: 400,
            value_prompt: ValuePrompt::Auto,
        }
    }
}

impl Selection {
    /// No selection: the model reads the whole document (within the budget, if any).
    pub fn off() -> Self {
        Selection {
            mode: SelectionMode::Off,
            ..Selection::default()
        }
    }

    /// Whether selection may run.
    pub fn is_on(&self) -> bool {
        self.mode != SelectionMode::Off
    }

    /// How the document is cut into passages.
    pub fn cutter(mut self, cutter: Cutter) -> Self {
        self.cutter = cutter;
        self
    }

    /// How the document is cut into passages (sentences by default).
    pub fn passages(mut self, passages: Passages) -> Self {
        self.passages = passages;
        self
    }

    /// The document's passages as this selection cuts them. Windows that do not advance
    /// (`overlap >= lines`) are cut as windows of `lines` lines overlapping by `lines - 1`.
    pub fn cut(&self, source: &Source) -> Vec<Passage> {
        match self.passages {
            Passages::Lines => self.cutter.lines(source),
            Passages::Sentences => self.cutter.sentences(source),
            Passages::Windows { lines, overlap } => {
                let lines = lines.max(1);
                self.cutter
                    .windows(source, lines, overlap.min(lines - 1))
                    .unwrap_or_default()
            }
            Passages::Pages => self.cutter.pages(source),
        }
    }

    /// At most `n` passages (at least 1) tried per group before its fields are left null.
    pub fn tries(mut self, n: usize) -> Self {
        self.tries = n.max(1);
        self
    }

    /// A list field is filled from at most its `n` best passages (at least 1), shown together.
    pub fn list_passages(mut self, n: usize) -> Self {
        self.list_passages = n.max(1);
        self
    }

    /// A list field's first try is shown, besides its best passages, the passages that start
    /// within the document's first `chars` characters (1,000 by default; 0 for none), in
    /// document order. Why: a document names what it is about at its start (an agreement's
    /// parties in its preamble, a letter's sender and addressee in its heading), and a list is
    /// filled from the passages shown together, so the opening must be among them; the
    /// question judge did not find it (on the development agreements the preamble naming all
    /// the parties ranked 25th of 68 and 15th of 96 for the 0.5B model, `docs/benchmarks.md`,
    /// "Agreements"). Later tries, after the contract's checks refused the first one's values,
    /// show the next best passages alone.
    pub fn opening_chars(mut self, chars: usize) -> Self {
        self.opening_chars = chars;
        self
    }

    /// The margin (`log P(yes) - log P(no)`, in nats) a group's best passage must exceed for
    /// the group to be stated in the document; below it the group is null without asking. Off
    /// by default (negative infinity): on filings releases the 0.5B model's margin for the right
    /// line was often just below 0 (-0.01 to -0.11 in 7 of 40 releases of one seed), so a
    /// group is left null only by the model (a null answer) or by the contract's checks
    /// refusing every passage tried.
    pub fn min_margin(mut self, margin: f64) -> Self {
        self.min_margin = margin;
        self
    }

    /// Under [`Judge::Values`], the margin (a value's log-likelihood minus `null`'s, in nats)
    /// the best value must exceed for the group to be stated; below it the group is null
    /// without asking. Off by default (negative infinity): on the development receipts the
    /// 0.5B model found `null` more likely than the right date on most of them.
    pub fn min_value_margin(mut self, margin: f64) -> Self {
        self.min_value_margin = margin;
        self
    }

    /// The margin below which a group judged by `judge` is not stated.
    pub(crate) fn floor(&self, judge: Judge) -> f64 {
        match judge {
            Judge::Values => self.min_value_margin,
            Judge::Question => self.min_margin,
        }
    }

    /// At most `n` passages (at least 1) judged per group: when more could hold the group's
    /// values, those sharing most words with its question are judged.
    pub fn max_judged(mut self, n: usize) -> Self {
        self.max_judged = n.max(1);
        self
    }

    /// What the words a passage shares with its group's question add to the question judge's
    /// margin, at most (nats; default 1, 0 for the model's margins alone; a value that is not
    /// a finite number, or below 0, counts as 0). The shares are IDF-weighted and scaled so
    /// that the passage sharing most gets all of it ([`JudgePlan::lexical`]). Why: on long
    /// prose the small model barely separates passages (on the development agreements its
    /// margins for the governing-law question spread 0.3 nats from the best passage to the
    /// median one, the governing-law clause ranked 4th to 66th), while the clause shares the
    /// most words with the question in each; a model that does separate passages, by several
    /// nats, still decides (`docs/benchmarks.md`, "Agreements").
    pub fn lexical_weight(mut self, nats: f64) -> Self {
        self.lexical_weight = if nats.is_finite() && nats > 0.0 {
            nats
        } else {
            0.0
        };
        self
    }

    /// How passages are judged ([`Judge::Values`] by default).
    pub fn judge(mut self, judge: Judge) -> Self {
        self.judge = judge;
        self
    }

    /// The longest document (in characters) [`Judge::Values`] shows whole to score values;
    /// a longer one is judged by question.
    pub fn max_shown_chars(mut self, chars: usize) -> Self {
        self.max_shown_chars = chars;
        self
    }

    /// The longest line (in characters) that is a candidate value of a grounded string under
    /// [`Judge::Values`]; a string field of a document whose lines are longer, or whose median
    /// line is longer than 40 characters (prose, whatever width it is wrapped at), is judged
    /// by question.
    pub fn max_value_line_chars(mut self, chars: usize) -> Self {
        self.max_value_line_chars = chars;
        self
    }

    /// The most values [`Judge::Values`] scores for one group (400 by default); a group whose
    /// field the document writes more values for is judged by question.
    pub fn max_values(mut self, n: usize) -> Self {
        self.max_values = n.max(1);
        self
    }

    /// How [`Judge::Values`] asks for a value when it scores them ([`ValuePrompt::Auto`] by
    /// default).
    pub fn value_prompt(mut self, prompt: ValuePrompt) -> Self {
        self.value_prompt = prompt;
        self
    }

    /// The question asked of every passage for the group holding `field` (a JSON name),
    /// instead of the contract's own (`#[contract(question = "..")]`) or the one made from the
    /// doc comments. Write it as a yes/no question about one passage ("Does this line give the
    /// total amount paid?").
    pub fn question(mut self, field: impl Into<String>, question: impl Into<String>) -> Self {
        self.questions.insert(field.into(), question.into());
        self
    }
}

/// What a model is shown for one try of a group: the passages' lines (and pieces of long
/// lines), for [`Source::excerpt`].
pub fn shown(passages: &[&Passage]) -> Vec<(Range<usize>, Option<Range<usize>>)> {
    passages
        .iter()
        .map(|p| (p.lines.clone(), p.chars.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
