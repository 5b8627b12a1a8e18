//! The rule language of `contract`: one parser for the cross-field rules of derived contracts
//! (`#[contract(rule = "low <= high")]`, read at compile time by `contract-derive`) and of runtime
//! contracts (a schema's `x-rules`, read by `contract-core`).
//!
//! A crate of its own because a procedural macro crate cannot depend on the crate that re-exports
//! it: `contract-derive` and `contract-core` both depend on this one, so both read a rule with the
//! same code. `contract-core` re-exports [`Rule`] and [`CmpOp`].
//!
//! ```
//! use contract_rules::{CmpOp, Rule};
//!
//! assert_eq!(
//!     Rule::parse("low <= high"),
//!     Some(Rule::Compare { left: "low".into(), op: CmpOp::Le, right: "high".into() })
//! );
//! assert_eq!(
//!     Rule::parse("both_or_neither(low, high)"),
//!     Some(Rule::BothOrNeither(vec!["low".into(), "high".into()]))
//! );
//! assert_eq!(Rule::parse("low <= high + 1"), None);
//! ```

use std::fmt;

/// A comparison operator of a `rule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl CmpOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }

    /// Parses an operator.
    pub fn parse(text: &str) -> Option<CmpOp> {
        Some(match text {
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::Ge,
            "==" => CmpOp::Eq,
            "!=" => CmpOp::Ne,
            _ => return None,
        })
    }

    /// The operator with its sides swapped: `a < b` is `b > a`.
    pub fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq => CmpOp::Eq,
            CmpOp::Ne => CmpOp::Ne,
        }
    }

    /// Whether `ordering` (left compared with right) satisfies the operator.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Lt => ordering == Less,
            CmpOp::Le => ordering != Greater,
            CmpOp::Gt => ordering == Greater,
            CmpOp::Ge => ordering != Less,
            CmpOp::Eq => ordering == Equal,
            CmpOp::Ne => ordering != Equal,
        }
    }
}

/// A cross-field rule. Fields are JSON names of the same object.
///
/// Serialized as the text it is written as (`"low <= high"`, `"both_or_neither(a, b)"`), and
/// read back with [`Rule::parse`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Rule {
    /// `left op right`; holds when either side is null.
    Compare {
        /// Left field.
        left: String,
        /// Operator.
        op: CmpOp,
        /// Right field.
        right: String,
    },
    /// All of the fields are null, or none is.
    BothOrNeither(Vec<String>),
    /// At least one of the fields is not null.
    AtLeastOne(Vec<String>),
}

impl Rule {
    /// The fields the rule names, in the order written.
    pub fn fields(&self) -> Vec<&String> {
        match self {
            Rule::Compare { left, right, .. } => vec![left, right],
            Rule::BothOrNeither(names) | Rule::AtLeastOne(names) => names.iter().collect(),
        }
    }

    /// Parses a rule as written in `#[contract(rule = ..)]` and in a schema's `x-rules`:
    /// `low <= high` (any of `<`, `<=`, `>`, `>=`, `==`, `!=`), `both_or_neither(low, high)`,
    /// `at_least_one(a, b)`. `None` when the text is none of these.
    pub fn parse(text: &str) -> Option<Rule> {
        let text = text.trim();
        let name_ok = |s: &str| {
            !s.is_empty()
                && !s
                    .chars()
                    .any(|c| c.is_whitespace() || "<>=!(),".contains(c))
        };
        for (prefix, both) in [("both_or_neither(", true), ("at_least_one(", false)] {
            if let Some(inner) = text.strip_prefix(prefix).and_then(|t| t.strip_suffix(')')) {
                let names: Vec<String> = inner.split(',').map(|n| n.trim().to_owned()).collect();
                if names.iter().all(|n| name_ok(n)) {
                    return Some(if both {
                        Rule::BothOrNeither(names)
                    } else {
                        Rule::AtLeastOne(names)
                    });
                }
                return None;
            }
        }
        let (at, op) = ["<=", ">=", "==", "!=", "<", ">"]
            .into_iter()
            .filter_map(|op| text.find(op).map(|i| (i, op)))
            .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())))?;
        let left = text[..at].trim();
        let right = text[at + op.len()..].trim();
        if !(name_ok(left) && name_ok(right)) {
            return None;
        }
        Some(Rule::Compare {
            left: left.to_owned(),
            op: CmpOp::parse(op)?,
            right: right.to_owned(),
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Compare { left, op, right } => write!(f, "{left} {} {right}", op.as_str()),
            Rule::BothOrNeither(fields) => write!(f, "both_or_neither({})", fields.join(", ")),
            Rule::AtLeastOne(fields) => write!(f, "at_least_one({})", fields.join(", ")),
        }
    }
}

impl From<Rule> for String {
    fn from(rule: Rule) -> String {
        rule.to_string()
    }
}

/// Text that is not a rule ([`Rule::parse`] read none), as a deserializer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotARule(pub String);

impl fmt::Display for NotARule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a rule (`a <= b`, `both_or_neither(a, b)`, `at_least_one(a, b)`)",
            self.0
        )
    }
}

impl std::error::Error for NotARule {}

impl TryFrom<String> for Rule {
    type Error = NotARule;

    fn try_from(text: String) -> Result<Rule, NotARule> {
        Rule::parse(&text).ok_or(NotARule(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_serialized_as_its_text_and_read_back() {
        for text in [
            "low <= high",
            "a < b",
            "a > b",
            "end_line >= start_line",
            "a == b",
            "a != b",
            "both_or_neither(low, high)",
            "at_least_one(a, b, c)",
        ] {
            let rule = Rule::parse(text).expect(text);
            let json = serde_json::to_string(&rule).expect(text);
            assert_eq!(json, format!("\"{text}\""));
            let back: Rule = serde_json::from_str(&json).expect(text);
            assert_eq!(back, rule);
        }
        let err = serde_json::from_str::<Rule>("\"low <= high + 1\"").unwrap_err();
        assert!(err.to_string().contains("is not a rule"), "{err}");
        assert!(serde_json::from_str::<Rule>("3").is_err());
    }

    #[test]
    fn a_flipped_operator_holds_with_its_sides_swapped() {
        use std::cmp::Ordering::*;
        for op in [
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Gt,
            CmpOp::Ge,
            CmpOp::Eq,
            CmpOp::Ne,
        ] {
            for ord in [Less, Equal, Greater] {
                assert_eq!(
                    op.holds(ord),
                    op.flip().holds(ord.reverse()),
                    "{op:?} {ord:?}"
                );
            }
            assert_eq!(op.flip().flip(), op);
        }
    }
}
