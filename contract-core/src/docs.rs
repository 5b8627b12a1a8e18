//! Field reference in Markdown.
//!
//! One section per contract: the root first, then every nested contract once, in the order
//! they are first met. Object contracts get a table of their fields and a list of their rules;
//! enum contracts a list of their values. The output is deterministic.

use std::fmt::Write as _;

use crate::contract::{Constraints, ContractSpec, Rule, SpecKind, TypeSpec};
use crate::schema::bounds::{integer_range, len_words, number_range};

/// A Markdown field reference for `spec` and the contracts nested in it.
pub fn docs_markdown(spec: &ContractSpec) -> String {
    let mut order: Vec<&'static ContractSpec> = Vec::new();
    let mut out = String::new();
    section(spec, &mut out);
    collect(spec, &mut order, &spec.name);
    for nested in order {
        out.push('\n');
        section(nested, &mut out);
    }
    out
}

/// Every contract reachable from `spec`'s fields, once each, depth first.
fn collect(spec: &ContractSpec, order: &mut Vec<&'static ContractSpec>, root: &str) {
    let Some(object) = spec.object() else {
        return;
    };
    for field in &object.fields {
        if let TypeSpec::Contract(r) = field.ty.innermost() {
            let nested = r.spec();
            if nested.name != root && !order.iter().any(|s| s.name == nested.name) {
                order.push(nested);
                collect(nested, order, root);
            }
        }
    }
}

fn section(spec: &ContractSpec, out: &mut String) {
    let _ = writeln!(out, "## {}\n", spec.name);
    if let Some(description) = &spec.description {
        let _ = writeln!(out, "{}\n", description.trim());
    }
    match &spec.kind {
        SpecKind::Enum(e) => {
            out.push_str("Values:\n\n");
            for v in &e.variants {
                match &v.description {
                    Some(d) => {
                        let _ = writeln!(out, "- `{}`: {}", v.name, one_line(d));
                    }
                    None => {
                        let _ = writeln!(out, "- `{}`", v.name);
                    }
                }
            }
        }
        SpecKind::Object(object) => {
            out.push_str("| field | type | constraint | unit | nullable | description |\n");
            out.push_str("|---|---|---|---|---|---|\n");
            for f in &object.fields {
                let (ty, nullable) = f.ty.strip_nullable();
                let row = [
                    format!("`{}`", f.name),
                    type_name(ty),
                    constraint_words(ty, &f.constraints),
                    f.unit.clone().unwrap_or_default(),
                    if nullable { "yes" } else { "no" }.to_owned(),
                    f.description.as_deref().map(one_line).unwrap_or_default(),
                ];
                let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
                let _ = writeln!(out, "| {} |", cells.join(" | "));
            }
            if !object.rules.is_empty() || !object.checks.is_empty() {
                out.push_str("\nRules:\n\n");
                for rule in &object.rules {
                    let _ = writeln!(out, "- {}", rule_line(rule));
                }
                for check in &object.checks {
                    let _ = writeln!(out, "- custom check `{check}`");
                }
            }
            if !object.skipped.is_empty() {
                let names: Vec<String> = object.skipped.iter().map(|s| format!("`{s}`")).collect();
                let _ = writeln!(out, "\nNot asked of the model: {}.", names.join(", "));
            }
        }
    }
}

pub(crate) fn rule_line(rule: &Rule) -> String {
    match rule {
        Rule::Compare { .. } => format!("`{rule}` (holds when either side is null)"),
        Rule::BothOrNeither(_) => format!("`{rule}`: all null or all set"),
        Rule::AtLeastOne(_) => format!("`{rule}`: at least one is set"),
    }
}

/// The type column: `integer`, `list of string`, a link to a nested contract's section.
fn type_name(ty: &TypeSpec) -> String {
    match ty {
        TypeSpec::Bool => "boolean".into(),
        TypeSpec::Integer { .. } => "integer".into(),
        TypeSpec::Number => "number".into(),
        TypeSpec::String => "string".into(),
        TypeSpec::Nullable(inner) => format!("{} or null", type_name(inner)),
        TypeSpec::List(item) => format!("list of {}", type_name(item)),
        TypeSpec::Contract(r) => {
            let name = &r.spec().name;
            format!("[`{name}`](#{})", anchor(name))
        }
        TypeSpec::External(r) => crate::signature::external_words(r),
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

/// The constraint column, `; `-separated.
fn constraint_words(ty: &TypeSpec, c: &Constraints) -> String {
    let mut parts = Vec::new();
    match ty {
        TypeSpec::List(item) => {
            if let Some(len) = len_words(c.min_len, c.max_len) {
                parts.push(format!("{len} items"));
            }
            let item_constraints = c.for_items();
            let items = constraint_words(item.strip_nullable().0, &item_constraints);
            if !items.is_empty() {
                parts.push(format!("items: {items}"));
            }
        }
        TypeSpec::Integer { min, max } => parts.extend(integer_range(*min, *max, c)),
        TypeSpec::Number => parts.extend(number_range(c)),
        TypeSpec::String => {
            if let Some(len) = len_words(c.min_len, c.max_len) {
                parts.push(format!("{len} chars"));
            }
            if let Some(p) = &c.pattern {
                parts.push(format!("pattern `{}`", p.as_str()));
            }
            if let Some(f) = c.format {
                parts.push(format!("format `{}`", f.as_str()));
            }
        }
        _ => {}
    }
    if !matches!(ty, TypeSpec::List(_)) {
        if let Some(values) = &c.one_of {
            let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
            parts.push(format!("one of {}", values.join(", ")));
        }
        if let Some(g) = &c.grounded {
            parts.push(g.words());
        }
    }
    parts.join("; ")
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
