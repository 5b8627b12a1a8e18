//! Answers scored after many prompts at once ([`LocalBackend::score_prompts`], and
//! `Backend::score` on the worker thread): every prompt's tokens, and the answer tokens fed after
//! them, go into one token trie; each shared prefix (the chat template's head, a passage asked
//! several questions, an answer's first token) is computed once, and its KV cache is copied into
//! each sequence that continues it ([`Model::restore_from`]; the last one takes it without a
//! copy). The trie's segments are then fed several sequences a forward call
//! ([`Model::forward_batch`]: the weights are read once for all of them), at most
//! [`LocalOptions::score_batch`] sequences and [`LocalOptions::score_tokens`] tokens a call (a
//! longer segment is fed over several calls).
//!
//! The order is depth first (the last ready segment first): a prefix's cache is dropped as soon
//! as every sequence after it has taken its copy, so what is held at once stays near one batch of
//! sequences and the prefixes they continue, whatever the number of prompts.
//!
//! A log-probability comes out the same as [`LocalBackend::score_continuations`] computes it for
//! the prompt alone: the same tokens at the same positions, each row of a forward call computed
//! on its own by the engines that batch.
//!
//! [`LocalBackend::score_prompts`]: super::LocalBackend::score_prompts
//! [`LocalBackend::score_continuations`]: super::LocalBackend::score_continuations
//! [`LocalOptions::score_batch`]: super::LocalOptions::score_batch
//! [`LocalOptions::score_tokens`]: super::LocalOptions::score_tokens

use std::collections::HashMap;

use super::error::LocalError;
use super::model::{BatchItem, Model};

/// The tokens to compute and the log-probabilities to read, as a trie cut into segments: a
/// segment runs from a node where the trie branches, or where logits are read, to the next one.
#[derive(Debug)]
pub(crate) struct Plan {
    segs: Vec<Seg>,
    /// The segments that start at the empty sequence.
    roots: Vec<usize>,
    /// How many `(node, token)` log-probabilities are read.
    wants: usize,
    /// Per prompt, per answer: the ids of the log-probabilities whose sum is the answer's.
    terms: Vec<Vec<Vec<usize>>>,
}

/// One segment of a [`Plan`].
#[derive(Debug, Clone, PartialEq)]
struct Seg {
    /// The tokens fed after the parent segment's.
    tokens: Vec<u32>,
    parent: Option<usize>,
    children: Vec<usize>,
    /// `(token, id)`: the log-probability of `token` after the segment's last token, as the
    /// read `id`.
    wants: Vec<(u32, usize)>,
}

/// The trie, one node a token (node 0 is the empty sequence); a child's id is above its
/// parent's.
#[derive(Default)]
struct Trie {
    parent: Vec<usize>,
    token: Vec<u32>,
    children: Vec<u32>,
    edges: HashMap<(usize, u32), usize>,
    wants: Vec<Vec<(u32, usize)>>,
    want_ids: HashMap<(usize, u32), usize>,
}

impl Trie {
    fn new() -> Trie {
        Trie {
            parent: vec![0],
            token: vec![0],
            children: vec![0],
            wants: vec![Vec::new()],
            ..Trie::default()
        }
    }

    fn child(&mut self, node: usize, token: u32) -> usize {
        if let Some(&c) = self.edges.get(&(node, token)) {
            return c;
        }
        let c = self.parent.len();
        self.parent.push(node);
        self.token.push(token);
        self.children.push(0);
        self.wants.push(Vec::new());
        self.children[node] += 1;
        self.edges.insert((node, token), c);
        c
    }

    /// The id of `token`'s log-probability after `node`.
    fn want(&mut self, node: usize, token: u32) -> usize {
        let next = self.want_ids.len();
        *self.want_ids.entry((node, token)).or_insert_with(|| {
            self.wants[node].push((token, next));
            next
        })
    }
}

impl Plan {
    /// The plan for `answers` (tokens, each scored as a whole) after every one of `prompts`
    /// (tokens, none empty: the caller checks).
    pub(crate) fn new(prompts: &[Vec<u32>], answers: &[Vec<u32>]) -> Plan {
        let mut trie = Trie::new();
        let mut terms = Vec::with_capacity(prompts.len());
        // Nothing to read when every answer is empty: no prompt is computed.
        let any = answers.iter().any(|a| !a.is_empty());
        for prompt in prompts {
            let mut per_answer = Vec::with_capacity(answers.len());
            let end = if any {
                prompt.iter().fold(0, |n, &t| trie.child(n, t))
            } else {
                0
            };
            for answer in answers {
                let mut ids = Vec::with_capacity(answer.len());
                let mut node = end;
                for (k, &t) in answer.iter().enumerate() {
                    ids.push(trie.want(node, t));
                    if k + 1 < answer.len() {
                        node = trie.child(node, t);
                    }
                }
                per_answer.push(ids);
            }
            terms.push(per_answer);
        }
        let n = trie.parent.len();
        let stop: Vec<bool> = (0..n)
            .map(|i| i == 0 || !trie.wants[i].is_empty() || trie.children[i] != 1)
            .collect();
        let mut seg_of: Vec<Option<usize>> = vec![None; n];
        let mut segs: Vec<Seg> = Vec::new();
        let mut roots = Vec::new();
        // Ancestors come first (a child's id is above its parent's).
        for i in (1..n).filter(|&i| stop[i]) {
            let mut tokens = vec![trie.token[i]];
            let mut a = trie.parent[i];
            while !stop[a] {
                tokens.push(trie.token[a]);
                a = trie.parent[a];
            }
            tokens.reverse();
            let id = segs.len();
            let parent = seg_of[a];
            match parent {
                Some(p) => segs[p].children.push(id),
                None => roots.push(id),
            }
            segs.push(Seg {
                tokens,
                parent,
                children: Vec::new(),
                wants: std::mem::take(&mut trie.wants[i]),
            });
            seg_of[i] = Some(id);
        }
        Plan {
            segs,
            roots,
            wants: trie.want_ids.len(),
            terms,
        }
    }

    /// Tokens the plan feeds (each shared prefix once).
    pub(crate) fn tokens(&self) -> usize {
        self.segs.iter().map(|s| s.tokens.len()).sum()
    }
}

/// A segment ready to be fed (`done` of its tokens are), with its sequence's model once it has
/// one.
struct Task {
    seg: usize,
    done: usize,
    model: Option<Model>,
}

/// The forward calls of a [`Plan`], one [`Scorer::step`] at a time (the worker thread
/// interleaves them with its decode steps).
pub(crate) struct Scorer {
    plan: Plan,
    /// An empty model of the backend's load, copied for each new sequence.
    blank: Model,
    ready: Vec<Task>,
    /// Per segment with children: its model, and how many children have not taken a copy.
    states: Vec<Option<(Model, usize)>>,
    /// Models of finished sequences, whose buffers the next ones reuse.
    pool: Vec<Model>,
    results: Vec<f32>,
    calls: u32,
    max_seqs: usize,
    max_tokens: usize,
}

impl Scorer {
    /// Ready to run `plan` on copies of `blank` (an empty model that can snapshot), at most
    /// `max_seqs` sequences and `max_tokens` tokens a forward call (both at least 1).
    pub(crate) fn new(plan: Plan, blank: Model, max_seqs: usize, max_tokens: usize) -> Scorer {
        let ready = plan
            .roots
            .iter()
            .rev()
            .map(|&seg| Task {
                seg,
                done: 0,
                model: None,
            })
            .collect();
        Scorer {
            states: (0..plan.segs.len()).map(|_| None).collect(),
            results: vec![f32::NAN; plan.wants],
            plan,
            blank,
            ready,
            pool: Vec::new(),
            calls: 0,
            max_seqs: max_seqs.max(1),
            max_tokens: max_tokens.max(1),
        }
    }

    /// Whether every forward call has run.
    pub(crate) fn is_done(&self) -> bool {
        self.ready.is_empty()
    }

    /// Forward calls so far (a model that does not batch counts one per sequence).
    pub(crate) fn forward_calls(&self) -> u32 {
        self.calls
    }

    /// An empty model for a new sequence.
    fn fresh(&mut self) -> Result<Model, LocalError> {
        match self.pool.pop() {
            Some(mut m) => {
                m.reset();
                Ok(m)
            }
            None => self
                .blank
                .snapshot()
                .ok_or_else(|| LocalError::State("the model cannot copy its cache".into())),
        }
    }

    /// The model a segment starts from: its parent's cache (taken by the parent's last child,
    /// copied for the others), or an empty one.
    fn model_for(&mut self, parent: Option<usize>) -> Result<Model, LocalError> {
        let Some(p) = parent else {
            return self.fresh();
        };
        let left = match self.states.get_mut(p).and_then(Option::as_mut) {
            Some((_, left)) => {
                *left -= 1;
                *left
            }
            None => {
                return Err(LocalError::State(
                    "a segment's prefix was not computed before it".into(),
                ))
            }
        };
        if left == 0 {
            if let Some((m, _)) = self.states[p].take() {
                return Ok(m);
            }
        }
        let mut m = self.fresh()?;
        if let Some((src, _)) = &self.states[p] {
            m.restore_from(src)?;
        }
        Ok(m)
    }

    /// One forward call: the ready segments, the last ready first, up to the call's bounds.
    pub(crate) fn step(&mut self) -> Result<(), LocalError> {
        let mut picked: Vec<(usize, usize, usize, Model)> = Vec::new();
        let mut tokens = 0;
        while picked.len() < self.max_seqs && tokens < self.max_tokens {
            let Some(task) = self.ready.pop() else { break };
            let seg = &self.plan.segs[task.seg];
            let n = (seg.tokens.len() - task.done).min(self.max_tokens - tokens);
            let parent = seg.parent;
            let model = match task.model {
                Some(m) => m,
                None => self.model_for(parent)?,
            };
            tokens += n;
            picked.push((task.seg, task.done, n, model));
        }
        if picked.is_empty() {
            return Ok(());
        }
        let segs = &self.plan.segs;
        let mut items: Vec<BatchItem<'_>> = picked
            .iter_mut()
            .map(|(seg, done, n, model)| BatchItem {
                tokens: &segs[*seg].tokens[*done..*done + *n],
                model,
                allowed: None,
            })
            .collect();
        let batches = items.first().is_some_and(|i| i.model.batches());
        let logits = Model::forward_batch(&mut items)?;
        drop(items);
        self.calls += if batches { 1 } else { picked.len() as u32 };
        if logits.len() != picked.len() {
            return Err(LocalError::State(
                "a batched forward call returned another number of logits".into(),
            ));
        }
        for ((seg, done, n, model), logits) in picked.into_iter().zip(logits) {
            let s = &self.plan.segs[seg];
            let done = done + n;
            if done < s.tokens.len() {
                self.ready.push(Task {
                    seg,
                    done,
                    model: Some(model),
                });
                continue;
            }
            if !s.wants.is_empty() {
                let z = log_sum_exp(&logits);
                for &(t, id) in &s.wants {
                    let logit = logits.get(t as usize).copied().ok_or_else(|| {
                        LocalError::Tokenizer(format!(
                            "token {t} is outside the model's {} logits",
                            logits.len()
                        ))
                    })?;
                    self.results[id] = if z.is_finite() {
                        logit - z
                    } else {
                        f32::NEG_INFINITY
                    };
                }
            }
            if s.children.is_empty() {
                if self.pool.len() < self.max_seqs {
                    self.pool.push(model);
                }
            } else {
                self.states[seg] = Some((model, s.children.len()));
                self.ready.extend(s.children.iter().rev().map(|&seg| Task {
                    seg,
                    done: 0,
                    model: None,
                }));
            }
        }
        Ok(())
    }

    /// Each prompt's answers' log-probabilities (nats), once [`Scorer::is_done`].
    pub(crate) fn finish(self) -> Result<Vec<Vec<f64>>, LocalError> {
        let results = &self.results;
        self.plan
            .terms
            .iter()
            .map(|per_answer| {
                per_answer
                    .iter()
                    .map(|ids| {
                        let mut total = 0f64;
                        for &id in ids {
                            match results.get(id) {
                                Some(lp) if !lp.is_nan() => total += f64::from(*lp),
                                _ => {
                                    return Err(LocalError::State(
                                        "an answer's log-probability was not computed".into(),
                                    ))
                                }
                            }
                        }
                        Ok(total)
                    })
                    .collect()
            })
            .collect()
    }
}

/// `log(sum(exp(x)))`, computed stably; -inf when every logit is -inf.
pub(crate) fn log_sum_exp(logits: &[f32]) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return max;
    }
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    max + sum.ln() as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(plan: &Plan, i: usize) -> (&[u32], Option<usize>, &[usize], Vec<u32>) {
        let s = &plan.segs[i];
        (
            &s.tokens,
            s.parent,
            &s.children,
            s.wants.iter().map(|w| w.0).collect(),
        )
    }

    #[test]
    fn shared_prefixes_are_one_segment() {
        // Two passages, two questions each: the head once, each passage once.
        let prompts = vec![
            vec![1, 2, 10, 11, 20, 9],
            vec![1, 2, 10, 11, 21, 9],
            vec![1, 2, 12, 20, 9],
            vec![1, 2, 12, 21, 9],
        ];
        let answers = vec![vec![5], vec![6]];
        let plan = Plan::new(&prompts, &answers);
        assert_eq!(plan.roots, [0]);
        assert_eq!(seg(&plan, 0), (&[1, 2][..], None, &[1, 4][..], vec![]));
        assert_eq!(seg(&plan, 1), (&[10, 11][..], Some(0), &[2, 3][..], vec![]));
        assert_eq!(seg(&plan, 2), (&[20, 9][..], Some(1), &[][..], vec![5, 6]));
        assert_eq!(seg(&plan, 4), (&[12][..], Some(0), &[5, 6][..], vec![]));
        assert_eq!(plan.tokens(), 2 + 2 + 2 + 2 + 1 + 2 + 2);
        assert_eq!(plan.wants, 8);
        // Each answer is one read, each prompt its own.
        let ids: Vec<usize> = plan.terms.iter().flatten().flatten().copied().collect();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn answers_of_several_tokens_share_their_first() {
        // `7 8` and `7 9` share the step after 7; `7` alone reads the same logits as their first
        // token; a prompt that is a prefix of another reads logits in the middle of it.
        let prompts = vec![vec![1, 2, 3], vec![1, 2]];
        let answers = vec![vec![7, 8], vec![7, 9], vec![7], vec![]];
        let plan = Plan::new(&prompts, &answers);
        assert_eq!(seg(&plan, 0), (&[1, 2][..], None, &[1, 3][..], vec![7]));
        assert_eq!(seg(&plan, 1), (&[3][..], Some(0), &[2][..], vec![7]));
        assert_eq!(seg(&plan, 2), (&[7][..], Some(1), &[][..], vec![8, 9]));
        assert_eq!(seg(&plan, 3), (&[7][..], Some(0), &[][..], vec![8, 9]));
        assert_eq!(plan.terms[0][0].len(), 2);
        assert_eq!(plan.terms[0][0][0], plan.terms[0][2][0]);
        assert!(plan.terms[0][3].is_empty());
        assert_ne!(plan.terms[0][0][0], plan.terms[1][0][0]);
        assert_eq!(plan.wants, 6);
    }

    #[test]
    fn nothing_is_fed_for_empty_answers() {
        let plan = Plan::new(&[vec![1, 2]], &[vec![], vec![]]);
        assert!(plan.segs.is_empty() && plan.roots.is_empty());
        assert_eq!(plan.terms, vec![vec![Vec::<usize>::new(), Vec::new()]]);
        let plan = Plan::new(&[vec![1, 2]], &[]);
        assert!(plan.segs.is_empty());
        assert_eq!(plan.terms, vec![Vec::<Vec<usize>>::new()]);
    }

    #[test]
    fn log_sum_exp_is_stable() {
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY; 3]), f32::NEG_INFINITY);
        let l = log_sum_exp(&[1000.0, 1000.0]);
        assert!((l - (1000.0 + 2f32.ln())).abs() < 1e-3, "{l}");
    }
}
