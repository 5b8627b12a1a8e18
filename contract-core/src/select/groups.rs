//! The contract's fields grouped for selection ([`field_groups`]), what a passage must hold for
//! a group ([`Needs`]), and the question asked of each passage, made from the fields' doc
//! comments when the contract states none.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::attrs::Form;
use crate::ir::ContractSpec;
use crate::ir::Node;

/// What a passage must contain to hold a group's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Needs {
    /// A digit: the group has a number to copy.
    pub digit: bool,
    /// A letter: the group has text to copy.
    pub letter: bool,
}

/// Fields judged and extracted together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldGroup {
    /// The group's name: its `#[contract(group = "..")]`, else its first field's.
    pub name: String,
    /// Its fields' JSON names, in the contract's order.
    pub fields: Vec<String>,
    /// The question asked of every passage.
    pub question: String,
    /// Whether a field is a list (filled from several passages).
    pub list: bool,
    /// Whether every field may be absent (null, or an empty list): the group may be "not
    /// stated".
    pub optional: bool,
    /// What a passage must contain to hold the values.
    pub needs: Needs,
}

/// The contract's root fields grouped for selection: fields tied by a cross-field rule, by a
/// grounding in another field (`grounded(in = quote)`, a span's lines) or by one
/// `#[contract(group = "..")]` are one group; a contract-level `#[contract(question = "..")]`
/// makes every field without its own `group` or `question` one group asked that question;
/// every other field is a group of its own. Groups come in the order of their first field.
/// `overrides` are questions by field name ([`Selection::question`](super::Selection::question)).
pub fn field_groups(spec: &ContractSpec, overrides: &BTreeMap<String, String>) -> Vec<FieldGroup> {
    let Some(object) = spec.object() else {
        return Vec::new();
    };
    let fields = &object.properties;
    let n = fields.len();
    let index = |name: &str| fields.iter().position(|f| f.name == name);
    // Union-find over field indices.
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], i: usize) -> usize {
        let mut i = i;
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let union = |parent: &mut Vec<usize>, a: usize, b: usize| {
        let (ra, rb) = (find(parent, a), find(parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    };
    for rule in &object.rules {
        let names: Vec<usize> = rule.fields().iter().filter_map(|f| index(f)).collect();
        for pair in names.windows(2) {
            union(&mut parent, pair[0], pair[1]);
        }
    }
    for (i, f) in fields.iter().enumerate() {
        if let Some(g) = &f.node.grounded {
            for d in g.depends_on() {
                if let Some(j) = index(d) {
                    union(&mut parent, i, j);
                }
            }
        }
    }
    let mut by_group: HashMap<&str, usize> = HashMap::new();
    for (i, f) in fields.iter().enumerate() {
        if let Some(g) = &f.node.group {
            match by_group.get(g.as_str()) {
                Some(&j) => union(&mut parent, i, j),
                None => {
                    by_group.insert(g, i);
                }
            }
        }
    }
    let contract_question = spec.node.question.as_deref();
    if contract_question.is_some() {
        let loose: Vec<usize> = (0..n)
            .filter(|&i| fields[i].node.group.is_none() && fields[i].node.question.is_none())
            .collect();
        for pair in loose.windows(2) {
            union(&mut parent, pair[0], pair[1]);
        }
    }
    let mut order: Vec<usize> = Vec::new();
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..n {
        let r = find(&mut parent, i);
        if !members.contains_key(&r) {
            order.push(r);
        }
        members.entry(r).or_default().push(i);
    }
    order
        .into_iter()
        .map(|r| {
            let idx = &members[&r];
            let names: Vec<String> = idx.iter().map(|&i| fields[i].name.clone()).collect();
            let name = idx
                .iter()
                .find_map(|&i| fields[i].node.group.clone())
                .unwrap_or_else(|| names[0].clone());
            let question = names
                .iter()
                .find_map(|f| overrides.get(f).cloned())
                .or_else(|| idx.iter().find_map(|&i| fields[i].node.question.clone()))
                .or_else(|| {
                    let all_loose = idx.iter().all(|&i| {
                        fields[i].node.group.is_none() && fields[i].node.question.is_none()
                    });
                    contract_question.filter(|_| all_loose).map(str::to_owned)
                })
                .unwrap_or_else(|| {
                    let described: Vec<&crate::ir::FieldSpec> =
                        idx.iter().map(|&i| &fields[i]).collect();
                    question_from_docs(spec, &described)
                });
            let mut needs = Needs::default();
            for &i in idx {
                let node = &fields[i].node;
                let (digit, letter) = node_needs(node, 0);
                needs.digit |= digit;
                needs.letter |= letter;
            }
            FieldGroup {
                name,
                list: idx.iter().any(|&i| is_list(&fields[i].node)),
                optional: idx
                    .iter()
                    .all(|&i| fields[i].node.is_nullable() || is_list(&fields[i].node)),
                fields: names,
                question: capitalise(question.trim()),
                needs,
            }
        })
        .collect()
}

/// Whether a field's value is a list.
pub(super) fn is_list(node: &Node) -> bool {
    node.non_null().array.is_some()
}

/// What a passage needs to hold a value of `node`: a digit (a number, a date, a period), a
/// letter (text, a currency, a duration).
fn node_needs(node: &Node, depth: usize) -> (bool, bool) {
    if depth > 8 {
        return (false, true);
    }
    let node = node.non_null();
    if let Some(items) = node.items() {
        return node_needs(items, depth + 1);
    }
    if let Some(spec) = node.contract() {
        let Some(object) = spec.object() else {
            return (false, true);
        };
        // The copied parts of a value type: a grounded number or a dated text needs a digit.
        let mut digit = false;
        let mut letter = false;
        for f in &object.properties {
            let copied = f.node.grounded.is_some();
            match f.node.form {
                Some(Form::Date) | Some(Form::Period) if copied => digit = true,
                _ => {}
            }
            let (d, l) = node_needs(&f.node, depth + 1);
            if copied && d && !f.node.is_nullable() {
                digit = true;
            }
            letter |= l && !f.node.is_nullable();
        }
        return (digit, letter || !digit);
    }
    if node.is_numeric() {
        return (true, false);
    }
    match node.form {
        Some(Form::Date) | Some(Form::Period) => (true, false),
        _ => (false, true),
    }
}

/// A question about one passage made from the fields' doc comments: "Does this text give
/// <first clause of the doc comment>?" for one field, the clauses joined for several (the
/// contract's description when the group is the whole contract); a field without a doc comment
/// by its name.
fn question_from_docs(spec: &ContractSpec, fields: &[&crate::ir::FieldSpec]) -> String {
    let clauses: Vec<String> = fields
        .iter()
        .map(|f| {
            f.description()
                .and_then(first_clause)
                .unwrap_or_else(|| format!("the {}", f.name.replace('_', " ")))
        })
        .collect();
    let whole = spec
        .object()
        .is_some_and(|o| o.properties.len() == fields.len() && fields.len() > 1);
    let what = match spec.description().and_then(first_clause) {
        Some(d) if whole => d,
        _ => join_and(&clauses),
    };
    format!("does this text give {what}?")
}

fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The first clause of a doc comment, as the object of "does this text give ...": cut at the
/// first sentence end, `;`, parenthesis or copy instruction (`, as written`, `, copied`), the
/// final punctuation dropped, the first letter lowered unless the first word is an acronym.
pub fn first_clause(doc: &str) -> Option<String> {
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut end = doc.len();
    for stop in [". ", "; ", " (", ", as ", ", copied", ": "] {
        if let Some(i) = doc.find(stop) {
            end = end.min(i);
        }
    }
    let clause = doc[..end]
        .trim()
        .trim_end_matches(|c: char| c.is_ascii_punctuation());
    if clause.is_empty() {
        return None;
    }
    let first_word = clause.split(' ').next().unwrap_or("");
    let acronym = first_word.len() > 1 && first_word.chars().all(|c| !c.is_lowercase());
    let mut chars = clause.chars();
    let first = chars.next()?;
    Some(if acronym {
        clause.to_owned()
    } else {
        first.to_lowercase().chain(chars).collect()
    })
}

pub(super) fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
