//! Field reference in Markdown, written from the IR ([`crate::ir`]) of a derived contract or of
//! a runtime schema ([`crate::DynContract::docs_markdown`]).
//!
//! One section per object or enum: the root first, then every nested contract (or schema
//! definition, by name, and inline object, by its JSON pointer) once, depth first, each where the
//! walk first reaches it. Object sections get a table of their fields and a list of their rules
//! (and a derived contract's custom checks); enum sections a list of their values. The output is
//! deterministic.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::attrs::Rule;
use crate::bounds::len_words;
use crate::ir::ContractSpec;
use crate::ir::{Document, JsonType, Node, Ref, Target};
use crate::signature::{
    external_words, fresh_name, integer_words, json, multiple_of, ref_name, types_of, ObjectView,
    Writer,
};

/// A Markdown field reference for `spec` and the contracts nested in it.
pub fn docs_markdown(spec: &ContractSpec) -> String {
    Docs::new(None, spec.node(), &spec.name).write()
}

/// The field reference of a runtime schema document.
pub(crate) fn document_docs(doc: &Document) -> String {
    Docs::new(Some(doc), doc.root(), &doc.name).write()
}

type Key = *const Node;

struct Docs<'a> {
    doc: Option<&'a Document>,
    root: &'a Node,
    root_name: &'a str,
    /// Every section's node and its title, in the order first linked.
    names: Vec<(Key, String)>,
    /// The nodes the section being written links to, in order.
    linked: Vec<&'a Node>,
    titles: HashSet<String>,
    /// Reference targets whose type is being named (a reference to itself ends there).
    refs: Vec<Key>,
}

impl<'a> Docs<'a> {
    fn new(doc: Option<&'a Document>, root: &'a Node, root_name: &'a str) -> Self {
        let mut d = Docs {
            doc,
            root,
            root_name,
            names: Vec::new(),
            linked: Vec::new(),
            titles: HashSet::new(),
            refs: Vec::new(),
        };
        d.names.push((root as Key, root_name.to_owned()));
        d.titles.insert(root_name.to_owned());
        d
    }

    /// Sections depth first, each at the first place the walk reaches it. An explicit stack, so
    /// a long chain of definitions cannot overflow the call stack.
    fn write(mut self) -> String {
        let mut placed: HashSet<Key> = HashSet::new();
        let mut stack: Vec<&'a Node> = vec![self.root];
        let mut out = String::new();
        while let Some(node) = stack.pop() {
            if !placed.insert(node as Key) {
                continue;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            let title = self.name_of(node).unwrap_or(self.root_name).to_owned();
            self.section(&title, node, &mut out);
            stack.extend(std::mem::take(&mut self.linked).into_iter().rev());
        }
        out
    }

    fn resolve(&self, r: &Ref) -> Option<&'a Node> {
        match r.target.as_ref()? {
            Target::Def(i) => self.doc?.nodes.get(*i),
            Target::Contract(c) => Some(c.spec().node()),
        }
    }

    fn view(&self, node: &'a Node) -> Option<ObjectView<'a>> {
        ObjectView::with(&|r| self.resolve(r), node)
    }

    fn section(&mut self, title: &str, node: &'a Node, out: &mut String) {
        let _ = writeln!(out, "## {title}\n");
        if let Some(b) = node.boolean {
            let _ = writeln!(out, "Value: {}", if b { "any" } else { "none" });
            return;
        }
        if let Some(d) = &node.description {
            let _ = writeln!(out, "{}\n", d.trim());
        }
        let Some(view) = self.view(node) else {
            if let Some(values) = &node.enumeration {
                out.push_str("Values:\n\n");
                for (i, v) in values.iter().enumerate() {
                    let shown = match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    match node.enum_descriptions.get(i).and_then(Option::as_deref) {
                        Some(d) => {
                            let _ = writeln!(out, "- `{shown}`: {}", one_line(d));
                        }
                        None => {
                            let _ = writeln!(out, "- `{shown}`");
                        }
                    }
                }
            } else {
                let mut w = Writer::for_pieces(self.doc, self.root, self.root_name);
                let _ = writeln!(out, "Value: `{}`", w.value(node));
                let others = others(node);
                if !others.is_empty() {
                    let _ = writeln!(out, "\nAlso: {others}");
                }
            }
            return;
        };
        out.push_str("| field | type | constraint | unit | nullable | description |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        let prefix = if std::ptr::eq(node, self.root) {
            String::new()
        } else {
            title.to_owned()
        };
        for &(name, property) in &view.properties {
            let optional = if view.required.contains(&name) {
                ""
            } else {
                " (optional)"
            };
            let field = format!("`{name}`{optional}");
            self.row(&field, &format!("{prefix}/{name}"), property, out);
        }
        for &(pattern, property) in &view.patterns {
            let field = format!("keys matching `{pattern}`");
            self.row(&field, &format!("{prefix}/{pattern}"), property, out);
        }
        if let Some(extra) = view.additional {
            if extra.boolean.is_none() {
                self.row("other keys", &format!("{prefix}/*"), extra, out);
            }
        }
        let object = node.object.as_deref();
        let rules: Vec<String> = object
            .map(|o| o.rules.iter().map(rule_line).collect())
            .unwrap_or_default();
        let checks: &[String] = object.map_or(&[], |o| &o.checks);
        let mut extra = others(node);
        let mut w = Writer::for_pieces(self.doc, self.root, self.root_name);
        for (key, branches) in [("anyOf", &node.any_of), ("oneOf", &node.one_of)] {
            if let Some(branches) = branches {
                let words: Vec<String> = branches.iter().map(|b| w.value(b)).collect();
                extra.push_str(&format!("{}`{key}`: `{}`", sep(&extra), words.join(" | ")));
            }
        }
        if let Some(all) = &node.all_of {
            if !all
                .iter()
                .all(|p| p.boolean.is_none() && p.any_of.is_none() && p.one_of.is_none())
            {
                let words: Vec<String> = all.iter().map(|b| w.value(b)).collect();
                extra.push_str(&format!("{}`allOf`: `{}`", sep(&extra), words.join(" & ")));
            }
        }
        if !rules.is_empty() || !checks.is_empty() || !extra.is_empty() {
            out.push_str("\nRules:\n\n");
            for rule in rules {
                let _ = writeln!(out, "- {rule}");
            }
            for check in checks {
                let _ = writeln!(out, "- custom check `{check}`");
            }
            if !extra.is_empty() {
                let _ = writeln!(out, "- also: {extra}");
            }
        }
        if let Some(o) = object.filter(|o| !o.skipped.is_empty()) {
            let names: Vec<String> = o.skipped.iter().map(|s| format!("`{s}`")).collect();
            let _ = writeln!(out, "\nNot asked of the model: {}.", names.join(", "));
        }
    }

    fn row(&mut self, field: &str, path: &str, node: &'a Node, out: &mut String) {
        let (ty, nullable) = self.type_name(node, path);
        let unit = node.unit.clone().unwrap_or_default();
        let description = node
            .description
            .as_deref()
            .map(one_line)
            .unwrap_or_default();
        let constraint = self.constraints(node);
        let cells = [
            field.to_owned(),
            ty,
            constraint,
            unit,
            if nullable { "yes" } else { "no" }.to_owned(),
            description,
        ];
        let cells: Vec<String> = cells.iter().map(|c| cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }

    /// The type column (nested objects linked to their section) and whether `null` is allowed.
    fn type_name(&mut self, node: &'a Node, path: &str) -> (String, bool) {
        match node.boolean {
            Some(false) => return ("never".into(), false),
            Some(true) => return ("any".into(), true),
            None => {}
        }
        if let Some(r) = &node.external {
            return (external_words(r), node.is_nullable());
        }
        if let Some(r) = &node.reference {
            let Some(target) = self.resolve(r) else {
                return (ref_name(&r.text()), false);
            };
            let nullable = types_of(node).is_some_and(|(_, n)| n);
            let name = if std::ptr::eq(target, self.root) {
                self.root_name.to_owned()
            } else {
                ref_name(&r.text())
            };
            let documented = target.boolean.is_none()
                && (self.view(target).is_some() || target.enumeration.is_some());
            if documented {
                return (self.link(&name, target), nullable);
            }
            let key = target as Key;
            if self.refs.contains(&key) || self.refs.len() > 32 {
                return (name, nullable);
            }
            self.refs.push(key);
            let (inner, inner_null) = self.type_name(target, path);
            self.refs.pop();
            return (inner, nullable || inner_null);
        }
        for (key, branches) in [("anyOf", &node.any_of), ("oneOf", &node.one_of)] {
            if let Some(branches) = branches {
                let mut names: Vec<String> = Vec::new();
                let mut nullable = false;
                for (i, b) in branches.iter().enumerate() {
                    if b.is_null_only() {
                        nullable = true;
                        continue;
                    }
                    let (n, bn) = self.type_name(b, &format!("{path}/{key}/{i}"));
                    nullable |= bn;
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
                return (names.join(" or "), nullable);
            }
        }
        if self.view(node).is_some() {
            let nullable = types_of(node).is_some_and(|(_, n)| n);
            return (self.link(path, node), nullable);
        }
        if let Some(values) = &node.enumeration {
            let mut kinds: Vec<&str> = Vec::new();
            for v in values.iter().filter(|v| !v.is_null()) {
                let k = json_type(v);
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            return (kinds.join(" or "), values.iter().any(|v| v.is_null()));
        }
        if let Some(c) = &node.constant {
            return (json_type(c).to_owned(), c.is_null());
        }
        let Some((types, nullable)) = types_of(node) else {
            return ("any".into(), true);
        };
        let names: Vec<String> = types
            .iter()
            .map(|t| match t {
                JsonType::Array => match node.items() {
                    Some(items) => {
                        let (inner, _) = self.type_name(items, &format!("{path}/*"));
                        format!("list of {inner}")
                    }
                    None => "list".into(),
                },
                other => other.as_str().to_owned(),
            })
            .collect();
        (names.join(" or "), nullable)
    }

    fn link(&mut self, title: &str, target: &'a Node) -> String {
        self.linked.push(target);
        let name = match self.name_of(target) {
            Some(name) => name.to_owned(),
            None => {
                let name = fresh_name(title, &mut self.titles);
                self.names.push((target as Key, name.clone()));
                name
            }
        };
        format!("[`{name}`](#{})", anchor(&name))
    }

    /// The title given to `node`'s section, once it has one.
    fn name_of(&self, node: &Node) -> Option<&str> {
        self.names
            .iter()
            .find(|(s, _)| std::ptr::eq(*s, node))
            .map(|(_, n)| n.as_str())
    }

    /// The constraint column, `; `-separated.
    fn constraints(&mut self, node: &'a Node) -> String {
        let mut parts: Vec<String> = Vec::new();
        let types = types_of(node).map(|(t, _)| t).unwrap_or_default();
        if types.contains(&JsonType::Array) {
            if let Some(a) = node.array.as_deref() {
                if let Some(len) = len_words(a.min_items, a.max_items) {
                    parts.push(format!("{len} items"));
                }
                if a.unique_items {
                    parts.push("unique".into());
                }
                if let Some(items) = a.items.as_ref().filter(|i| i.boolean.is_none()) {
                    let inner = self.constraints(items);
                    if !inner.is_empty() {
                        parts.push(format!("items: {inner}"));
                    }
                }
            }
        }
        if types.contains(&JsonType::Integer) {
            parts.extend(integer_words(node));
        }
        if types.contains(&JsonType::Number) {
            parts.extend(node.number.bounds.number_words());
        }
        parts.extend(multiple_of(node));
        if types.contains(&JsonType::String) {
            let s = &node.string;
            if let Some(len) = len_words(s.min_length, s.max_length) {
                parts.push(format!("{len} chars"));
            }
            if let Some(p) = &s.pattern {
                parts.push(format!("pattern `{}`", p.as_str()));
            }
            if let Some(f) = &s.format {
                parts.push(format!("format `{f}`"));
            }
        }
        if let Some(values) = &node.enumeration {
            let shown: Vec<String> = values
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| format!("`{v}`"))
                .collect();
            parts.push(format!("one of {}", shown.join(", ")));
        }
        if let Some(c) = &node.constant {
            parts.push(format!("= `{c}`"));
        }
        if let Some(g) = &node.grounded {
            parts.push(g.words());
        }
        let others = others(node);
        if !others.is_empty() {
            parts.push(others);
        }
        parts.join("; ")
    }
}

/// One rule as the docs list it.
pub(crate) fn rule_line(rule: &Rule) -> String {
    match rule {
        Rule::Compare { .. } => format!("`{rule}` (holds when either side is null)"),
        Rule::BothOrNeither(_) => format!("`{rule}`: all null or all set"),
        Rule::AtLeastOne(_) => format!("`{rule}`: at least one is set"),
    }
}

/// Every keyword with a meaning the columns do not show, as written (`` `not`: `{..}` ``).
fn others(node: &Node) -> String {
    node.other
        .iter()
        .map(|(k, v)| format!("`{k}`: `{}`", short(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn sep(text: &str) -> &'static str {
    if text.is_empty() {
        ""
    } else {
        ", "
    }
}

/// Compact JSON, cut at 120 characters.
fn short(value: &serde_json::Value) -> String {
    let text = json(value);
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn json_type(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// A GitHub-style heading anchor.
pub(crate) fn anchor(name: &str) -> String {
    name.chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: pipes escaped, on one line.
pub(crate) fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::fixtures::Node;
    use crate::schema::fixtures::*;
    use crate::Contract;

    #[test]
    fn guidance() {
        let expected = "\
## Guidance

Next-quarter revenue guidance stated in an earnings release.

| field | type | constraint | unit | nullable | description |
|---|---|---|---|---|---|
| `quarter` | integer | 1-4 |  | yes |  |
| `year` | integer | 2018-2030 |  | yes |  |
| `low` | number | > 0 | USD millions | yes | Low end of the range. |
| `high` | number | > 0 | USD millions | yes |  |

Rules:

- `low <= high` (holds when either side is null)
- `both_or_neither(low, high)`: all null or all set
";
        assert_eq!(Guidance::docs_markdown(), expected);
        assert_eq!(docs_markdown(Guidance::contract_spec()), expected);
    }

    #[test]
    fn nested_contracts_once_each() {
        let docs = Policy::docs_markdown();
        let headings: Vec<&str> = docs.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(headings, ["## Policy", "## Amount", "## Currency"]);
        for line in [
            "| `name` | string | 1-80 chars |  | no | Name of the policy. |",
            "| `insured` | [`Amount`](#amount) |  |  | no | Sum insured. |",
            "| `deductible` | [`Amount`](#amount) |  |  | yes |  |",
            "| `tags` | list of string | 1-5 items; items: pattern `^[a-z]+$` |  | no |  |",
            "| `code` | string | one of `\"A\"`, `\"B\"` |  | yes |  |",
            "| `level` | integer | -128 to 9 |  | no |  |",
            "| `scores` | list of integer | <= 3 items; items: 0-100 |  | yes |  |",
            "| `server` | string (ipv4) |  |  | no |  |",
            "| `currencies` | list of [`Currency`](#currency) |  |  | no |  |",
            "- `at_least_one(code, scores)`: at least one is set",
            "- custom check `check_policy`",
            "Not asked of the model: `internal_id`.",
            "- `USD`: US dollar",
            "- `EUR`",
        ] {
            assert!(
                docs.lines().any(|l| l == line),
                "missing {line:?} in\n{docs}"
            );
        }
        assert_eq!(docs, Policy::docs_markdown(), "deterministic");
    }

    #[test]
    fn recursive_contracts_end() {
        let docs = Tree::docs_markdown();
        let headings: Vec<&str> = docs.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(headings, ["## Tree", "## Node"]);
        assert!(docs.contains("| `children` | list of [`Node`](#node) |  |  | no |  |"));
        let node = Node::docs_markdown();
        assert_eq!(node.matches("## ").count(), 1);
    }

    #[test]
    fn cells_are_escaped() {
        assert_eq!(cell("a | b\n c"), "a \\| b c");
        assert_eq!(anchor("Evidenced_for_Amount"), "evidenced_for_amount");
    }
}
