//! Parsing of `#[contract(..)]` and doc comments, one node at a time, and of which
//! `#[serde(..)]` keys are given where ([`SerdeKeys`]). The container's and variants' keys are
//! read here, a field's in `field`; the literal values keys take (numbers, ranges, lists) in
//! `values`.

mod field;
mod values;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::parse::Parse;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Token};

use super::ctxt::Ctxt;
use super::suggest;
use super::symbol::*;
use values::{lit_str, strip};

/// The string formats `format = ".."` accepts (the names of `contract_core::Format`).
pub const FORMATS: &[&str] = &[
    "date",
    "date-time",
    "time",
    "email",
    "uuid",
    "ipv4",
    "ipv6",
    "hostname",
];

/// The forms `form = ..` accepts (the names of `contract_core::Form`).
pub const FORMS: &[&str] = &["date", "currency", "scale", "period", "duration"];

/// A numeric literal of a bound.
#[derive(Clone, Copy, Debug)]
pub enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => write!(f, "{x:?}"),
        }
    }
}

/// One numeric bound of a field, with the key that set it (for messages and spans).
#[derive(Clone, Copy)]
pub struct Bound {
    pub value: Num,
    pub key: Symbol,
    pub span: Span,
}

/// The numeric bounds of a field after `range`, `min`, `max`, `exclusive_*` were combined.
#[derive(Default)]
pub struct Bounds {
    pub minimum: Option<Bound>,
    pub maximum: Option<Bound>,
    pub exclusive_minimum: Option<Bound>,
    pub exclusive_maximum: Option<Bound>,
}

pub enum OneOfValue {
    Str(String),
    Int(i64),
}

pub struct OneOf {
    pub values: Vec<OneOfValue>,
    pub all_strings: bool,
}

/// `len = ..`: a length range, in characters or items.
pub struct Len {
    pub min: Option<u64>,
    pub max: Option<u64>,
}

/// `rule = "left op right"`.
pub struct RuleAttr {
    pub left: String,
    pub op: &'static str,
    pub right: String,
    pub lit: LitStr,
}

impl RuleAttr {
    pub fn text(&self) -> String {
        format!("{} {} {}", self.left, self.op, self.right)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    BothOrNeither,
    AtLeastOne,
}

/// `both_or_neither(a, b)` or `at_least_one(a, b)`.
pub struct Group {
    pub key: Ident,
    pub fields: Vec<Ident>,
}

impl Group {
    pub fn text(&self) -> String {
        let names: Vec<String> = self.fields.iter().map(|f| f.to_string()).collect();
        format!("{}({})", self.key, names.join(", "))
    }
}

/// The attributes of a struct or enum.
pub struct Container {
    pub description: Option<String>,
    pub rules: Vec<RuleAttr>,
    pub groups: Vec<Group>,
    pub checks: Vec<syn::Path>,
    pub normalizers: Vec<syn::Path>,
    pub question: Option<String>,
    pub serde_keys: SerdeKeys,
}

/// The attributes of a named field.
pub struct Field {
    pub description: Option<String>,
    pub bounds: Bounds,
    pub len: Option<Len>,
    pub pattern: Option<LitStr>,
    pub one_of: Option<OneOf>,
    pub format: Option<LitStr>,
    pub unit: Option<String>,
    pub grounded: Option<Grounded>,
    pub skip: Option<Span>,
    pub json_schema: Option<Span>,
    /// `form = date`: the form's name, checked.
    pub form: Option<String>,
    pub question: Option<String>,
    pub group: Option<String>,
    /// Every `#[contract(..)]` key given, with the span of its path.
    pub keys: Vec<(Symbol, Span)>,
    pub serde_keys: SerdeKeys,
}

/// `#[contract(grounded..)]` as written; fields are Rust names, resolved by `check`.
pub enum GroundedKind {
    /// `grounded`: anywhere in the source.
    Source,
    /// `grounded(in = quote)`.
    In(syn::Ident),
    /// `grounded(in = start_line..=end_line)`.
    Lines(syn::Ident, syn::Ident),
    /// `grounded(with_container)`.
    WithContainer,
    /// `grounded(line)`.
    Line,
}

pub struct Grounded {
    pub kind: GroundedKind,
    /// The span of `grounded`.
    pub span: Span,
}

/// The attributes of an enum variant.
pub struct Variant {
    pub description: Option<String>,
    pub serde_keys: SerdeKeys,
}

/// Tracks which keys were seen, so that a repeated one is reported at its path.
struct Seen<'c> {
    cx: &'c Ctxt,
    keys: Vec<(Symbol, Span)>,
}

impl<'c> Seen<'c> {
    fn new(cx: &'c Ctxt) -> Self {
        Seen {
            cx,
            keys: Vec::new(),
        }
    }

    /// Records `key`; false (with an error) when it was already given.
    fn first(&mut self, key: Symbol, meta: &ParseNestedMeta) -> bool {
        if self.keys.iter().any(|(k, _)| *k == key) {
            self.cx.error_spanned_by(
                &meta.path,
                format!("duplicate `{key}` in `#[contract(..)]`"),
            );
            return false;
        }
        self.keys.push((key, meta.path.span()));
        true
    }

    fn span(&self, key: Symbol) -> Option<Span> {
        self.keys.iter().find(|(k, _)| *k == key).map(|(_, s)| *s)
    }
}

fn key_of(path: &syn::Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

/// Skips the rest of an item whose key is wrong: `= expr` or `(..)`.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<proc_macro2::Group>()?;
    }
    Ok(())
}

fn unknown_key(
    cx: &Ctxt,
    meta: &ParseNestedMeta,
    what: &str,
    expected: &[Symbol],
    elsewhere: &[(&[Symbol], &str)],
) {
    let key = key_of(&meta.path);
    let mut msg = format!("unknown {what} attribute `{key}`");
    if let Some((_, place)) = elsewhere
        .iter()
        .find(|(keys, _)| keys.iter().any(|k| k.0 == key))
    {
        msg = format!("`{key}` is {place}");
    } else if let Some(best) = suggest::closest(&key, expected.iter().map(|s| s.0)) {
        msg.push_str(&format!(", did you mean `{best}`?"));
    } else {
        let list: Vec<String> = expected.iter().map(|s| format!("`{s}`")).collect();
        msg.push_str(&format!(", expected one of {}", list.join(", ")));
    }
    cx.error_spanned_by(&meta.path, msg);
}

fn parse_value<T: Parse>(meta: &ParseNestedMeta) -> syn::Result<T> {
    meta.value()?.parse()
}

/// The doc comment of an item: lines trimmed and joined with a space, paragraphs with `\n\n`.
pub fn doc_comment(attrs: &[syn::Attribute]) -> Option<String> {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    for attr in attrs {
        if attr.path() != DOC {
            continue;
        }
        let syn::Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        let Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) = &nv.value
        else {
            continue;
        };
        for line in s.value().split('\n') {
            let line = line.trim();
            if line.is_empty() {
                if !current.is_empty() {
                    paragraphs.push(std::mem::take(&mut current));
                }
            } else {
                if !current.is_empty() {
                    current.push(' ');
                }
                current.push_str(line);
            }
        }
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    if paragraphs.is_empty() {
        None
    } else {
        Some(paragraphs.join("\n\n"))
    }
}

/// The keys of an item's `#[serde(..)]` attributes, each with the span of its path.
///
/// What the keys mean is serde's own reading (`serde_derive_internals`, in `ast`), but it keeps
/// no key's span, and the derive's errors point at the key (`tests/ui/serde-flatten.stderr`,
/// `serde-default-on-asked-field.stderr`): so the key names alone are read here, and a key
/// outside `supported` is an error.
pub struct SerdeKeys(Vec<(String, Span)>);

impl SerdeKeys {
    fn from_attrs(cx: &Ctxt, attrs: &[syn::Attribute], supported: &[&str]) -> Self {
        let mut keys = Vec::new();
        each_meta(cx, attrs, SERDE, |meta| {
            let key = key_of(&meta.path);
            if !supported.contains(&key.as_str()) {
                cx.error_spanned_by(
                    &meta.path,
                    format!("`#[serde({key})]` is not supported by `#[derive(Contract)]`: the contract could not describe the JSON shape"),
                );
            }
            keys.push((key, meta.path.span()));
            skip_value(meta)
        });
        SerdeKeys(keys)
    }

    /// Where `key` is given, if it is.
    pub fn span(&self, key: &str) -> Option<Span> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, s)| *s)
    }
}

/// serde gives an item two names (`key(serialize = .., deserialize = ..)`): an error at `key`.
pub fn two_names(cx: &Ctxt, keys: &SerdeKeys, key: &str) {
    if let Some(span) = keys.span(key) {
        cx.error_at(
            span,
            format!("`#[serde({key}(serialize = .., deserialize = ..))]` with different names is not supported by `#[derive(Contract)]`: the contract could not describe the JSON shape"),
        );
    }
}

/// Runs `f` on each item of each `#[name(..)]` attribute, reporting parse errors to `cx`.
fn each_meta(
    cx: &Ctxt,
    attrs: &[syn::Attribute],
    name: Symbol,
    mut f: impl FnMut(&ParseNestedMeta) -> syn::Result<()>,
) {
    for attr in attrs {
        if attr.path() != name {
            continue;
        }
        if let syn::Meta::List(list) = &attr.meta {
            if list.tokens.is_empty() {
                continue;
            }
        }
        if let Err(err) = attr.parse_nested_meta(|meta| f(&meta)) {
            cx.syn_error(err);
        }
    }
}

impl Container {
    pub fn from_ast(cx: &Ctxt, input: &syn::DeriveInput) -> Self {
        let mut seen = Seen::new(cx);
        let mut description = None;
        let mut rules = Vec::new();
        let mut groups = Vec::new();
        let mut checks = Vec::new();
        let mut normalizers = Vec::new();
        let mut question = None;
        let is_enum = matches!(input.data, syn::Data::Enum(_));

        each_meta(cx, &input.attrs, CONTRACT, |meta| {
            if meta.path == DESCRIPTION {
                let expr: Expr = parse_value(meta)?;
                if let Some(s) = lit_str(cx, DESCRIPTION, &expr) {
                    if seen.first(DESCRIPTION, meta) {
                        description = Some(s.value());
                    }
                }
            } else if meta.path == RULE && !is_enum {
                let expr: Expr = parse_value(meta)?;
                if let Some(lit) = lit_str(cx, RULE, &expr) {
                    match rule_attr(&lit) {
                        Some(RuleText::Compare(rule)) => rules.push(rule),
                        Some(RuleText::Group(group)) => groups.push(group),
                        None => cx.error_spanned_by(
                            &lit,
                            format!(
                                "expected `field op field` in rule `{}`, like `low <= high` (operators: `<` `<=` `>` `>=` `==` `!=`), or `both_or_neither(a, b)` / `at_least_one(a, ..)`",
                                lit.value()
                            ),
                        ),
                    }
                }
            } else if (meta.path == BOTH_OR_NEITHER || meta.path == AT_LEAST_ONE) && !is_enum {
                let key = meta.path.get_ident().cloned().unwrap();
                let kind = if key == BOTH_OR_NEITHER {
                    GroupKind::BothOrNeither
                } else {
                    GroupKind::AtLeastOne
                };
                if !meta.input.peek(syn::token::Paren) {
                    cx.error_spanned_by(&key, format!("expected `{key}(field, field, ..)`"));
                    return skip_value(meta);
                }
                let content;
                syn::parenthesized!(content in meta.input);
                let fields: Punctuated<Ident, Token![,]> =
                    content.parse_terminated(Ident::parse, Token![,])?;
                let fields: Vec<Ident> = fields.into_iter().collect();
                let needed = if kind == GroupKind::BothOrNeither {
                    2
                } else {
                    1
                };
                if fields.len() < needed {
                    cx.error_spanned_by(
                        &key,
                        format!(
                            "`{key}` needs at least {needed} field{}",
                            if needed == 1 { "" } else { "s" }
                        ),
                    );
                } else {
                    groups.push(Group { key, fields });
                }
            } else if meta.path == CHECK && !is_enum {
                let expr: Expr = parse_value(meta)?;
                match strip(&expr) {
                    Expr::Path(p) if p.qself.is_none() => checks.push(p.path.clone()),
                    other => cx.error_spanned_by(
                        other,
                        "`check` takes the path of a function `fn(&Self) -> Result<(), Violation>` or `fn(&Self, &DocContext) -> Result<(), Violation>`",
                    ),
                }
            } else if meta.path == QUESTION && !is_enum {
                let expr: Expr = parse_value(meta)?;
                if let Some(s) = lit_str(cx, QUESTION, &expr) {
                    if seen.first(QUESTION, meta) {
                        question = Some(s.value());
                    }
                }
            } else if meta.path == NORMALIZE && !is_enum {
                let expr: Expr = parse_value(meta)?;
                match strip(&expr) {
                    Expr::Path(p) if p.qself.is_none() => normalizers.push(p.path.clone()),
                    other => cx.error_spanned_by(
                        other,
                        "`normalize` takes the path of a function `fn(&mut Self, &DocContext) -> Result<(), Violation>`",
                    ),
                }
            } else if is_enum && CONTAINER_KEYS.iter().any(|k| meta.path == *k) {
                cx.error_spanned_by(
                    &meta.path,
                    format!(
                        "`{}` is for structs, an enum contract takes only `description`",
                        key_of(&meta.path)
                    ),
                );
                skip_value(meta)?;
            } else {
                unknown_key(
                    cx,
                    meta,
                    "container",
                    CONTAINER_KEYS,
                    &[(FIELD_KEYS, "a field attribute, put it on a field")],
                );
                skip_value(meta)?;
            }
            Ok(())
        });

        let serde_keys = SerdeKeys::from_attrs(cx, &input.attrs, SERDE_CONTAINER_KEYS);
        Container {
            description: description.or_else(|| doc_comment(&input.attrs)),
            rules,
            groups,
            checks,
            normalizers,
            question,
            serde_keys,
        }
    }
}

/// What a `rule = ".."` string says.
enum RuleText {
    Compare(RuleAttr),
    Group(Group),
}

/// Reads a `rule = ".."` string with the one rule parser ([`contract_rules::Rule::parse`], the
/// one `x-rules` are read with); `None` when it is no rule, or names something that is not a
/// field identifier, or a group with too few fields.
fn rule_attr(lit: &LitStr) -> Option<RuleText> {
    let ident = |name: &str| {
        syn::parse_str::<Ident>(name)
            .ok()
            .map(|i| Ident::new(&i.to_string(), lit.span()))
    };
    let group = |key: &str, names: Vec<String>, needed: usize| {
        let fields = names.iter().map(|n| ident(n)).collect::<Option<Vec<_>>>()?;
        (fields.len() >= needed).then(|| {
            RuleText::Group(Group {
                key: Ident::new(key, lit.span()),
                fields,
            })
        })
    };
    match contract_rules::Rule::parse(&lit.value())? {
        contract_rules::Rule::Compare { left, op, right } => {
            ident(&left)?;
            ident(&right)?;
            Some(RuleText::Compare(RuleAttr {
                left,
                op: op.as_str(),
                right,
                lit: lit.clone(),
            }))
        }
        contract_rules::Rule::BothOrNeither(names) => group("both_or_neither", names, 2),
        contract_rules::Rule::AtLeastOne(names) => group("at_least_one", names, 1),
    }
}

impl Variant {
    pub fn from_ast(cx: &Ctxt, variant: &syn::Variant) -> Self {
        let mut seen = Seen::new(cx);
        let mut description = None;
        each_meta(cx, &variant.attrs, CONTRACT, |meta| {
            if meta.path == DESCRIPTION {
                let expr: Expr = parse_value(meta)?;
                if seen.first(DESCRIPTION, meta) {
                    description = lit_str(cx, DESCRIPTION, &expr).map(|s| s.value());
                }
            } else {
                unknown_key(cx, meta, "variant", VARIANT_KEYS, &[]);
                skip_value(meta)?;
            }
            Ok(())
        });
        Variant {
            description: description.or_else(|| doc_comment(&variant.attrs)),
            serde_keys: SerdeKeys::from_attrs(cx, &variant.attrs, SERDE_VARIANT_KEYS),
        }
    }
}

/// Sets every span in `tokens` to `span`, so that a type error lands on an attribute.
pub fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let proc_macro2::TokenTree::Group(g) = &tt {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tt = proc_macro2::TokenTree::Group(group);
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}
