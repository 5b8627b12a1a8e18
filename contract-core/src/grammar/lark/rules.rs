//! The cross-field rules of one root segment: the joint choices of the rule fields' values
//! (grounded numbers and texts that satisfy every rule together), each written as one
//! alternative. Apart from the renderer, which writes a field alone.

use serde_json::{Map, Value};

use super::limits::CHAIN_MIN;
use super::text::{alternation, lit};
use crate::attrs::Rule;
use crate::ground::Decimal;
use crate::num::Num;

/// Most joint assignments the rules of one segment are composed into.
pub(super) const MAX_ASSIGNMENTS: usize = 512;

/// One field of the segment being rendered.
pub(super) struct SegField {
    pub(super) name: String,
    pub(super) nullable: bool,
    /// A non-null value's expression (`None`: no non-null value can be written).
    pub(super) non_null: Option<String>,
    /// A grounded number's candidates, for rules that compare it.
    pub(super) candidates: Option<Vec<Decimal>>,
    pub(super) place: String,
}

/// What an assignment asks of one field.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Choice {
    Any,
    Null,
    NonNull,
    /// Non-null, one of these numbers.
    Numbers(Vec<Decimal>),
}

impl SegField {
    pub(super) fn render(&self, choice: &Choice, lists: &mut NumberLists) -> Option<String> {
        let null = || self.nullable.then(|| lit("null"));
        match choice {
            Choice::Null => null(),
            Choice::NonNull => self.non_null.clone(),
            Choice::Any => match (null(), &self.non_null) {
                (Some(n), Some(v)) => Some(format!("({n} | {v})")),
                (Some(n), None) => Some(n),
                (None, v) => v.clone(),
            },
            Choice::Numbers(ds) => lists.render(ds),
        }
    }
}

/// Alternations of number literals for one segment. A long one is written as a chain of rules
/// `n_k: "x_k" | n_{k+1}` shared by every list with the same tail (hash-consed on the literal
/// and the rule after it), so the suffix lists a `start <= end` over `n` line numbers asks for
/// take `n` rules in all instead of `n * n / 2` literals.
#[derive(Default)]
pub(super) struct NumberLists {
    chains: std::collections::HashMap<(String, Option<String>), String>,
    pub(super) lines: Vec<String>,
}

impl NumberLists {
    fn render(&mut self, ds: &[Decimal]) -> Option<String> {
        let lits: Vec<String> = ds.iter().map(|d| lit(&d.to_json_literal())).collect();
        if lits.len() <= CHAIN_MIN {
            return alternation(lits);
        }
        let mut tail: Option<String> = None;
        for l in lits.into_iter().rev() {
            let key = (l, tail.take());
            let next = self.chains.len();
            let name = match self.chains.get(&key) {
                Some(name) => name.clone(),
                None => {
                    let name = format!("num_{next}");
                    let body = match &key.1 {
                        Some(t) => format!("{name}: {} | {t}", key.0),
                        None => format!("{name}: {}", key.0),
                    };
                    self.lines.push(body);
                    self.chains.insert(key, name.clone());
                    name
                }
            };
            tail = Some(name);
        }
        tail
    }
}

/// Whether the grammar can write `rule` out for this segment: each side of a comparison that
/// lies in the segment has a list of candidates, unless the other side was decoded as null
/// (then the rule holds whatever the segment writes).
pub(super) fn rule_writable(
    rule: &Rule,
    names: &[&str],
    fields: &[SegField],
    decoded: &Map<String, Value>,
) -> bool {
    let Rule::Compare { left, right, .. } = rule else {
        return true;
    };
    let listed = |name: &str| {
        names
            .iter()
            .position(|x| *x == name)
            .is_none_or(|i| fields[i].candidates.is_some())
    };
    let null_before = |name: &str| decoded.get(name).is_some_and(Value::is_null);
    (listed(left) && listed(right)) || null_before(left) || null_before(right)
}

fn merge_choice(a: &Choice, b: &Choice) -> Option<Choice> {
    use Choice::*;
    Some(match (a, b) {
        (Any, x) | (x, Any) => x.clone(),
        (Null, Null) => Null,
        (NonNull, NonNull) => NonNull,
        (NonNull, Numbers(d)) | (Numbers(d), NonNull) => Numbers(d.clone()),
        (Numbers(x), Numbers(y)) => {
            let both: Vec<Decimal> = x.iter().filter(|d| y.contains(d)).cloned().collect();
            if both.is_empty() {
                return None;
            }
            Numbers(both)
        }
        _ => return None,
    })
}

pub(super) fn merge(a: &[Choice], b: &[Choice]) -> Option<Vec<Choice>> {
    a.iter().zip(b).map(|(x, y)| merge_choice(x, y)).collect()
}

/// The assignments of the segment's fields under which `rule` can still hold, given the values
/// decoded before the segment: `null` after a null partner, a value after a set one, the bound
/// of a compared number from the decoded side or, with both sides in the segment, every pair of
/// candidates that satisfies it.
pub(super) fn rule_options(
    rule: &Rule,
    names: &[&str],
    fields: &[SegField],
    decoded: &Map<String, Value>,
) -> Vec<Vec<Choice>> {
    let n = fields.len();
    let any = vec![Choice::Any; n];
    let pos = |name: &str| names.iter().position(|x| *x == name);
    let with = |assign: &[(usize, Choice)]| {
        let mut v = any.clone();
        for (i, c) in assign {
            v[*i] = c.clone();
        }
        v
    };
    match rule {
        Rule::BothOrNeither(group) => {
            let here: Vec<usize> = group.iter().filter_map(|g| pos(g)).collect();
            if here.is_empty() {
                return vec![any];
            }
            let before: Vec<&Value> = group.iter().filter_map(|g| decoded.get(g)).collect();
            let set = |c: Choice| with(&here.iter().map(|&i| (i, c.clone())).collect::<Vec<_>>());
            match before.first() {
                Some(v) if v.is_null() => vec![set(Choice::Null)],
                Some(_) => vec![set(Choice::NonNull)],
                None => vec![set(Choice::Null), set(Choice::NonNull)],
            }
        }
        Rule::AtLeastOne(group) => {
            let here: Vec<usize> = group.iter().filter_map(|g| pos(g)).collect();
            let some_before = group
                .iter()
                .any(|g| decoded.get(g).is_some_and(|v| !v.is_null()));
            let later = group
                .iter()
                .any(|g| pos(g).is_none() && !decoded.contains_key(g));
            if some_before || later || here.is_empty() {
                return vec![any];
            }
            // The first non-null field of the group is the k-th of those in the segment.
            (0..here.len())
                .map(|k| {
                    let mut assign: Vec<(usize, Choice)> =
                        here[..k].iter().map(|&i| (i, Choice::Null)).collect();
                    assign.push((here[k], Choice::NonNull));
                    with(&assign)
                })
                .collect()
        }
        Rule::Compare { left, op, right } => {
            let decoded_number = |name: &str| decoded.get(name)?.as_number().map(Num::of);
            // The numbers the validator compares: what each candidate's literal parses to
            // (`0.1000000000000000001` is the float `0.1`), compared exactly.
            let parsed = |d: &Decimal| d.to_json_number().map(|n| Num::of(&n));
            let holds = |l: Option<Num>, r: Option<Num>| match (l, r) {
                (Some(l), Some(r)) => l.cmp(r).is_some_and(|ord| op.holds(ord)),
                _ => false,
            };
            match (pos(left), pos(right)) {
                (Some(l), Some(r)) => {
                    let (Some(lc), Some(rc)) = (&fields[l].candidates, &fields[r].candidates)
                    else {
                        return vec![any];
                    };
                    let rn: Vec<Option<Num>> = rc.iter().map(parsed).collect();
                    // Either side null, or a pair that satisfies the rule.
                    let mut out = vec![with(&[(l, Choice::Null)]), with(&[(r, Choice::Null)])];
                    for a in lc {
                        let an = parsed(a);
                        let ok: Vec<Decimal> = rc
                            .iter()
                            .zip(&rn)
                            .filter(|(_, bn)| holds(an, **bn))
                            .map(|(b, _)| b.clone())
                            .collect();
                        if !ok.is_empty() {
                            out.push(with(&[
                                (l, Choice::Numbers(vec![a.clone()])),
                                (r, Choice::Numbers(ok)),
                            ]));
                        }
                    }
                    out
                }
                (None, Some(r)) => match (decoded_number(left), &fields[r].candidates) {
                    (Some(a), Some(rc)) => {
                        let ok: Vec<Decimal> = rc
                            .iter()
                            .filter(|b| holds(Some(a), parsed(b)))
                            .cloned()
                            .collect();
                        let mut out = vec![with(&[(r, Choice::Null)])];
                        if !ok.is_empty() {
                            out.push(with(&[(r, Choice::Numbers(ok))]));
                        }
                        out
                    }
                    _ => vec![any],
                },
                (Some(l), None) => match (decoded_number(right), &fields[l].candidates) {
                    (Some(b), Some(lc)) => {
                        let ok: Vec<Decimal> = lc
                            .iter()
                            .filter(|a| holds(parsed(a), Some(b)))
                            .cloned()
                            .collect();
                        let mut out = vec![with(&[(l, Choice::Null)])];
                        if !ok.is_empty() {
                            out.push(with(&[(l, Choice::Numbers(ok))]));
                        }
                        out
                    }
                    _ => vec![any],
                },
                (None, None) => vec![any],
            }
        }
    }
}
