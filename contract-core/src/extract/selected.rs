//! The extraction with evidence selection ([`crate::select`]): the groups' plans, the passages
//! or values judged, each group tried on its best ones, the whole contract read back and a
//! refused group sent to its next try.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use super::plan::GroupPlan;
use super::record::{accepted_repairs, ms, Attempt, AttemptError, Extraction};
use super::shown::GroupTry;
use super::{Backend, BackendError, Extractor, ScoreRequest, ScoreResponse};
use crate::constraint::Constraint;
use crate::context::DocContext;
use crate::ground::{check_reply, Grounds};
use crate::ir::ContractSpec;
use crate::parse::Level;
use crate::passage::Passage;
use crate::prompt::{Instructions, PromptParts};
use crate::select::{
    self, field_groups, group_of_path, judge_plan, rank, value_candidates, FieldGroup, GroupRecord,
    Judge, Outcome, Ranked, RankedPassage, SelectionRecord, ValueCandidates,
};
use crate::source::Source;
use crate::stream::{emit_field, Sink};
use crate::validate::{check_value, Violations};

/// A group's state while its evidence is tried.
struct GroupState {
    /// The next rank to try.
    next: usize,
    /// Whether the group waits for a try.
    pending: bool,
    /// The accepted values.
    value: Option<Map<String, Value>>,
    level: Level,
    outcome: Outcome,
    tries: Vec<Vec<[usize; 2]>>,
}

impl<C, B: Backend> Extractor<C, B> {
    /// The groups' plans, built on first use.
    fn plans(&self) -> &[GroupPlan] {
        self.plans.get_or_init(|| {
            let spec: &ContractSpec = &self.spec;
            field_groups(spec, &self.selection.questions)
                .into_iter()
                .map(|group| {
                    let names: Vec<&str> = group.fields.iter().map(String::as_str).collect();
                    let part = spec.subset(&names);
                    let mut constraint = Constraint::for_spec(&part);
                    if !self.grounding {
                        constraint = constraint.ungrounded();
                    }
                    let mut parts = PromptParts::for_spec(&part, Instructions::SignatureAndFields);
                    if let Some(think) = self.think {
                        parts = parts.with_think(think);
                    }
                    GroupPlan {
                        group,
                        spec: part,
                        constraint: Arc::new(constraint.with_think(self.think)),
                        parts,
                    }
                })
                .collect()
        })
    }

    /// The passages of rank `r` onwards a try shows: one passage, or for a list group its
    /// stated passages (above the margin), at most `list_passages` of them, and on its first
    /// try the document's `opening` passages too ([`Selection::opening_chars`]), in document
    /// order.
    ///
    /// [`Selection::opening_chars`]: crate::select::Selection::opening_chars
    fn try_passages<'p>(
        &self,
        group: &FieldGroup,
        ranked: &Ranked,
        passages: &'p [Passage],
        opening: &[usize],
        r: usize,
    ) -> Vec<&'p Passage> {
        if group.list {
            let n = self.selection.list_passages;
            let stated: Vec<usize> = ranked
                .order
                .iter()
                .copied()
                .filter(|p| {
                    ranked
                        .margins
                        .get(p)
                        .is_some_and(|m| *m > self.selection.floor(ranked.judge))
                })
                .collect();
            let mut chunk: Vec<usize> = stated.iter().copied().skip(r * n).take(n).collect();
            if r == 0 && !chunk.is_empty() {
                chunk.extend_from_slice(opening);
            }
            chunk.sort_unstable();
            chunk.dedup();
            chunk.iter().filter_map(|&p| passages.get(p)).collect()
        } else {
            // An optional group tries only passages judged to state it.
            ranked
                .order
                .get(r)
                .filter(|p| {
                    !group.optional
                        || ranked
                            .margins
                            .get(p)
                            .is_some_and(|m| *m > self.selection.floor(ranked.judge))
                })
                .and_then(|&p| passages.get(p))
                .into_iter()
                .collect()
        }
    }

    /// Whether rank `r` of a group has a try: a value of its own ([`Ranked::direct`]) or
    /// passages to show.
    fn has_try(&self, group: &FieldGroup, ranked: &Ranked, passages: &[Passage], r: usize) -> bool {
        if ranked.direct.is_empty() {
            !self
                .try_passages(group, ranked, passages, &[], r)
                .is_empty()
        } else {
            self.direct_value(group, ranked, r).is_some()
        }
    }

    /// The value of rank `r` of a group filled by its values alone (an optional group only
    /// while the value is more likely than `null` by the margin).
    fn direct_value(
        &self,
        group: &FieldGroup,
        ranked: &Ranked,
        r: usize,
    ) -> Option<(Map<String, Value>, Vec<usize>)> {
        let (map, margin, lines) = ranked.direct.get(r)?;
        (!group.optional || *margin > self.selection.floor(ranked.judge))
            .then(|| (map.clone(), lines.clone()))
    }

    /// A try of a group filled by a value the judge scored best ([`Judge::Values`]): no
    /// generation; the value is checked as a reply would be, against the whole document.
    fn try_value(
        &self,
        plan: &GroupPlan,
        map: Map<String, Value>,
        lines: Vec<usize>,
        source: &Source,
    ) -> GroupTry {
        let t0 = Instant::now();
        let json = Value::Object(map);
        let raw = json.to_string();
        let mut violations = Violations::new();
        check_value(&plan.spec, &json, "", &mut violations);
        if self.grounding {
            violations
                .0
                .extend(check_reply(&plan.spec, &json, &raw, &Grounds::new(source)).0);
        }
        let value = match &json {
            Value::Object(map) if violations.is_empty() => Some(map.clone()),
            _ => None,
        };
        let mut attempt = Attempt::empty();
        attempt.raw = Some(raw);
        attempt.level = Some(Level::Strict);
        attempt.json = Some(json);
        attempt.violations = violations;
        attempt.group = Some(plan.group.name.clone());
        attempt.lines = lines.iter().map(|&l| [l, l]).collect();
        attempt.forward_calls = Some(0);
        attempt.ms = ms(t0);
        GroupTry {
            attempts: vec![attempt],
            value,
            level: Level::Strict,
            backend_error: false,
        }
    }

    /// One try of one group: the passages shown alone, the group's part of the contract asked
    /// for under a mask grounded in them, the reply read and checked against them; a refused
    /// reply is fed back on the same passage up to [`Extractor::max_attempts`] attempts (a
    /// server without a mask can copy a value wrong).
    async fn try_group(&self, plan: &GroupPlan, shown: &[&Passage], source: &Source) -> GroupTry {
        let mut tried = self
            .try_shown(
                &plan.spec,
                &plan.constraint,
                &plan.parts,
                &select::shown(shown),
                source,
            )
            .await;
        for attempt in &mut tried.attempts {
            attempt.group = Some(plan.group.name.clone());
        }
        tried
    }

    /// The extraction with evidence selection ([`select`]); `Err` with the reason when it
    /// cannot run (the backend does not score answers, the document has no passage), and the
    /// caller reads the whole document instead.
    pub(super) async fn extract_selected(
        &self,
        source: &Source,
        started: Instant,
        sink: Option<&Sink<'_>>,
    ) -> Result<Extraction<C>, String> {
        let spec: &ContractSpec = &self.spec;
        let plans = self.plans();
        let groups: Vec<FieldGroup> = plans.iter().map(|p| p.group.clone()).collect();
        if groups.is_empty() {
            return Err("the contract has no fields to select evidence for".into());
        }
        let passages = self.selection.cut(source);
        if passages.is_empty() {
            return Err("the document has no passage".into());
        }
        let opening = crate::passage::opening(&passages, source, self.selection.opening_chars);
        // Groups whose values can be enumerated are judged by their values over the whole
        // document; the others by a question about each passage.
        let shown_whole = self.selection.judge == Judge::Values
            && source.char_count() <= self.selection.max_shown_chars;
        // Under a budget, only a document whose whole prompt fits it is shown whole.
        let fits_whole = |parts: &PromptParts| {
            self.budget.is_none() || self.fits_budget(&parts.messages_for_excerpt(source))
        };
        let candidates: Vec<Option<ValueCandidates>> = plans
            .iter()
            .map(|plan| {
                (shown_whole && fits_whole(&plan.parts))
                    .then(|| {
                        value_candidates(
                            &plan.spec,
                            &plan.group,
                            source,
                            self.selection.max_value_line_chars,
                            self.selection.max_values,
                        )
                    })
                    .flatten()
            })
            .collect();
        let asked: Vec<usize> = (0..groups.len())
            .filter(|&g| candidates[g].is_none())
            .collect();
        let asked_groups: Vec<FieldGroup> = asked.iter().map(|&g| groups[g].clone()).collect();
        let mut plan = judge_plan(&asked_groups, &passages, self.selection.max_judged);
        let request = std::mem::take(&mut plan.request);
        let t0 = Instant::now();
        let score = |request: ScoreRequest| async move {
            if request.prompts.is_empty() {
                return Ok(ScoreResponse {
                    logprobs: Vec::new(),
                    exact: true,
                    forward_calls: Some(0),
                });
            }
            self.backend.score(&request).await.map_err(|e| match e {
                BackendError::Unsupported { message } => message,
                other => format!("judging the passages failed: {other}"),
            })
        };
        let scored = score(request).await?;
        let mut forward_calls = scored.forward_calls;
        let mut judged_prompts = plan.owners.len();
        let asked_ranked = rank(&plan, &scored, self.selection.lexical_weight)?;
        let mut ranked: Vec<Option<Ranked>> = vec![None; groups.len()];
        for (&g, r) in asked.iter().zip(asked_ranked) {
            ranked[g] = Some(r);
        }
        for (g, c) in candidates.iter().enumerate() {
            let Some(c) = c else { continue };
            let request = c.request(self.selection.value_prompt, &plans[g].parts, source);
            let response = score(request).await?;
            judged_prompts += 1;
            forward_calls = match (forward_calls, response.forward_calls) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            let logprobs = response
                .logprobs
                .first()
                .ok_or_else(|| "the backend scored no prompt for the values".to_owned())?;
            ranked[g] = Some(c.rank(&passages, logprobs));
        }
        let judge_ms = ms(t0);
        let ranked: Vec<Ranked> = ranked.into_iter().flatten().collect();
        if ranked.len() != groups.len() {
            return Err("a group was not judged".into());
        }
        let mut states: Vec<GroupState> = groups
            .iter()
            .zip(&ranked)
            .map(|(g, r)| {
                let best = r.order.first().and_then(|p| r.margins.get(p)).copied();
                let (pending, outcome) = match best {
                    None => (false, Outcome::NoCandidate),
                    Some(m) if g.optional && m <= self.selection.floor(r.judge) => {
                        (false, Outcome::NotStated)
                    }
                    Some(_) => (true, Outcome::Filled),
                };
                GroupState {
                    next: 0,
                    pending,
                    value: None,
                    level: Level::Strict,
                    outcome,
                    tries: Vec::new(),
                }
            })
            .collect();

        let mut out = Extraction::empty(spec);
        out.prompt_tokens = None;
        let cx = DocContext::of(source).adjusted(self.adjust.clone());
        let tries = self.selection.tries;
        let mut backend_failed: Option<AttemptError> = None;
        loop {
            // Every pending group's next try, together (a local backend decodes them as one
            // batch).
            let pending: Vec<(usize, Vec<&Passage>)> = states
                .iter()
                .enumerate()
                .filter(|(_, s)| s.pending)
                .map(|(g, s)| {
                    (
                        g,
                        self.try_passages(&groups[g], &ranked[g], &passages, &opening, s.next),
                    )
                })
                .collect();
            if !pending.is_empty() {
                let results =
                    futures_util::future::join_all(pending.iter().map(|(g, shown)| async {
                        match self.direct_value(&groups[*g], &ranked[*g], states[*g].next) {
                            Some((map, lines)) => self.try_value(&plans[*g], map, lines, source),
                            None => self.try_group(&plans[*g], shown, source).await,
                        }
                    }))
                    .await;
                for ((g, shown), result) in pending.iter().zip(results) {
                    let state = &mut states[*g];
                    state.tries.push(
                        result
                            .attempts
                            .first()
                            .map(|a| a.lines.clone())
                            .unwrap_or_default(),
                    );
                    for attempt in result.attempts {
                        if out.prompt_tokens.is_none() {
                            out.prompt_tokens = attempt.prompt_tokens;
                        }
                        out.timings.attempts_ms.push(attempt.ms);
                        if let Some(e) = &attempt.error {
                            backend_failed = Some(e.clone());
                        }
                        out.attempts.push(attempt);
                    }
                    state.next += 1;
                    let more = state.next < tries
                        && self.has_try(&groups[*g], &ranked[*g], &passages, state.next)
                        && !result.backend_error;
                    match result.value {
                        Some(v) => {
                            if let Some(sink) = sink {
                                emit_group(sink, spec, &groups[*g], &v, out.attempts.len());
                            }
                            state.value = Some(v);
                            state.level = result.level;
                            state.pending = false;
                            state.outcome = Outcome::Filled;
                        }
                        None if more => state.pending = true,
                        None => {
                            state.pending = false;
                            state.value = None;
                            state.outcome = if groups[*g].optional && !result.backend_error {
                                Outcome::Refused
                            } else {
                                Outcome::Failed
                            };
                        }
                    }
                    let _ = shown;
                }
                if states.iter().any(|s| s.pending) {
                    continue;
                }
            }
            // Every group settled: the whole contract read back, normalised and checked
            // against the document.
            let values: Vec<Option<Map<String, Value>>> =
                states.iter().map(|s| s.value.clone()).collect();
            let merged = select::merge(spec, &values, &groups);
            match self.read_value(&merged, &cx) {
                Ok(value) => {
                    out.value = Some(value);
                    out.violations = Violations::new();
                    out.json = Some(merged);
                    break;
                }
                Err(violations) => {
                    // The groups the violations belong to try their next passage.
                    let mut moved = false;
                    let mut blamed: Vec<usize> = violations
                        .iter()
                        .filter_map(|v| group_of_path(&groups, &v.path))
                        .collect();
                    if blamed.is_empty() {
                        // A violation of the whole object: every filled group is a suspect.
                        blamed = (0..groups.len())
                            .filter(|&g| states[g].value.is_some())
                            .collect();
                    }
                    blamed.sort_unstable();
                    blamed.dedup();
                    for g in blamed {
                        let state = &mut states[g];
                        if state.value.is_none() {
                            continue;
                        }
                        let more = state.next < tries
                            && self.has_try(&groups[g], &ranked[g], &passages, state.next);
                        if let Some(last) = out
                            .attempts
                            .iter_mut()
                            .rev()
                            .find(|a| a.group.as_deref() == Some(groups[g].name.as_str()))
                        {
                            last.violations.0.extend(
                                violations
                                    .iter()
                                    .filter(|v| group_of_path(&groups, &v.path) == Some(g))
                                    .cloned(),
                            );
                        }
                        if more {
                            state.value = None;
                            state.pending = true;
                            moved = true;
                        } else if groups[g].optional {
                            state.value = None;
                            state.outcome = Outcome::Refused;
                            moved = true;
                            if let Some(sink) = sink {
                                emit_group(sink, spec, &groups[g], &Map::new(), out.attempts.len());
                            }
                        }
                    }
                    if !moved {
                        out.violations = violations;
                        out.json = Some(merged);
                        break;
                    }
                }
            }
        }
        out.level = states
            .iter()
            .filter(|s| s.value.is_some())
            .map(|s| s.level)
            .max()
            .unwrap_or(Level::Strict);
        if let Some(error) = backend_failed {
            // A group the backend did not answer is not a value the document leaves out: no
            // value, the backend's error (the record keeps what the other groups gave).
            out.value = None;
            out.error = Some(error);
        }
        out.repairs = accepted_repairs(&out.attempts);
        out.selection = Some(SelectionRecord {
            passages: passages.len(),
            judged: judged_prompts,
            judge_forward_calls: forward_calls,
            judge_ms,
            groups: groups
                .iter()
                .zip(&ranked)
                .zip(&states)
                .enumerate()
                .map(|(i, ((g, r), s))| GroupRecord {
                    group: g.name.clone(),
                    fields: g.fields.clone(),
                    question: match &candidates[i] {
                        Some(c)
                            if r.judge == Judge::Values
                                && c.in_words(self.selection.value_prompt) =>
                        {
                            format!("what is {}?", c.clause)
                        }
                        _ => g.question.clone(),
                    },
                    judge: r.judge,
                    candidates: r.candidates,
                    judged: r.margins.len(),
                    best: r
                        .order
                        .iter()
                        .take(5)
                        .filter_map(|&p| {
                            let passage = passages.get(p)?;
                            Some(RankedPassage {
                                lines: [
                                    passage.lines.start,
                                    passage.lines.end.saturating_sub(1).max(passage.lines.start),
                                ],
                                margin: *r.margins.get(&p)?,
                            })
                        })
                        .collect(),
                    tries: s.tries.clone(),
                    outcome: s.outcome,
                })
                .collect(),
        });
        out.timings.total_ms = ms(started);
        Ok(out)
    }
}

/// Emits a settled group's fields (`null` for a field the value lacks), a list field's items
/// before the list.
fn emit_group(
    sink: &Sink<'_>,
    spec: &ContractSpec,
    group: &FieldGroup,
    value: &Map<String, Value>,
    attempt: usize,
) {
    for name in &group.fields {
        emit_field(
            sink,
            spec,
            name,
            value.get(name).cloned().unwrap_or(Value::Null),
            attempt,
            Some(group.name.clone()),
        );
    }
}
