//! Parsing of `#[contract(..)]` and doc comments, one node at a time, and of which
//! `#[serde(..)]` keys are given where ([`SerdeKeys`]).

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::parse::Parse;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, RangeLimits, Token, UnOp};

use super::ctxt::Ctxt;
use super::suggest;
use super::symbol::*;

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

fn lit_str(cx: &Ctxt, key: Symbol, expr: &Expr) -> Option<LitStr> {
    match strip(expr) {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s.clone()),
        other => {
            cx.error_spanned_by(other, format!("`{key}` takes a string literal"));
            None
        }
    }
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(g) => strip(&g.expr),
        Expr::Paren(p) => strip(&p.expr),
        other => other,
    }
}

/// A possibly negated integer or float literal.
fn num(expr: &Expr) -> Option<Num> {
    match strip(expr) {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse::<i128>().ok().map(Num::Int),
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => f.base10_parse::<f64>().ok().map(Num::Float),
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match num(&u.expr)? {
            Num::Int(i) => Some(Num::Int(-i)),
            Num::Float(f) => Some(Num::Float(-f)),
        },
        _ => None,
    }
}

fn expect_num(cx: &Ctxt, key: Symbol, expr: &Expr) -> Option<Num> {
    let n = num(expr);
    if n.is_none() {
        cx.error_spanned_by(
            expr,
            format!("`{key}` takes a number literal, like `{key} = 0`"),
        );
    }
    n
}

fn expr_text(expr: &Expr) -> String {
    expr.to_token_stream()
        .to_string()
        .replace(" ..", "..")
        .replace(".. ", "..")
        .replace("- ", "-")
        .replace("= ", "=")
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

impl Field {
    pub fn from_ast(cx: &Ctxt, field: &syn::Field) -> Self {
        let mut seen = Seen::new(cx);
        let mut description = None;
        let mut range: Option<(RangeBounds, Span)> = None;
        let mut explicit: [Option<Bound>; 4] = [None; 4]; // min, max, exclusive_min, exclusive_max
        let mut len = None;
        let mut pattern = None;
        let mut one_of = None;
        let mut format = None;
        let mut unit = None;
        let mut grounded = None;
        let mut skip = None;
        let mut json_schema = None;
        let mut form = None;
        let mut question = None;
        let mut group = None;

        each_meta(cx, &field.attrs, CONTRACT, |meta| {
            let Some(key) = FIELD_KEYS.iter().copied().find(|k| meta.path == *k) else {
                unknown_key(
                    cx,
                    meta,
                    "field",
                    FIELD_KEYS,
                    &[(
                        CONTAINER_KEYS,
                        "a container attribute, put it on the struct",
                    )],
                );
                return skip_value(meta);
            };
            let first = seen.first(key, meta);
            let span = meta.path.span();
            if key == SKIP || key == JSON_SCHEMA {
                if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                    cx.error_spanned_by(&meta.path, format!("`{key}` takes no value"));
                    skip_value(meta)?;
                }
                if first {
                    if key == SKIP {
                        skip = Some(span);
                    } else {
                        json_schema = Some(span);
                    }
                }
                return Ok(());
            }
            if key == GROUNDED {
                let kind = parse_grounded(cx, meta)?;
                if first {
                    grounded = kind.map(|kind| Grounded { kind, span });
                }
                return Ok(());
            }
            let expr: Expr = parse_value(meta)?;
            if !first {
                return Ok(());
            }
            match key.0 {
                "description" => description = lit_str(cx, key, &expr).map(|s| s.value()),
                "unit" => unit = lit_str(cx, key, &expr).map(|s| s.value()),
                "range" => range = parse_range(cx, &expr).map(|r| (r, span)),
                "min" | "max" | "exclusive_min" | "exclusive_max" => {
                    let slot = match key.0 {
                        "min" => 0,
                        "max" => 1,
                        "exclusive_min" => 2,
                        _ => 3,
                    };
                    explicit[slot] =
                        expect_num(cx, key, &expr).map(|value| Bound { value, key, span });
                }
                "len" => len = parse_len(cx, &expr),
                "pattern" => {
                    if let Some(lit) = lit_str(cx, key, &expr) {
                        if let Err(err) = regex_syntax::Parser::new().parse(&lit.value()) {
                            let reason = match &err {
                                regex_syntax::Error::Parse(e) => e.kind().to_string(),
                                regex_syntax::Error::Translate(e) => e.kind().to_string(),
                                other => other.to_string(),
                            };
                            cx.error_spanned_by(
                                &lit,
                                format!("invalid regex `{}` in `pattern`: {reason}", lit.value()),
                            );
                        } else {
                            pattern = Some(lit);
                        }
                    }
                }
                "format" => {
                    if let Some(lit) = lit_str(cx, key, &expr) {
                        let name = lit.value();
                        if FORMATS.contains(&name.as_str()) {
                            format = Some(lit);
                        } else {
                            let list: Vec<String> =
                                FORMATS.iter().map(|f| format!("`{f}`")).collect();
                            let hint = suggest::closest(&name, FORMATS.iter().copied())
                                .map(|b| format!(", did you mean `{b}`?"))
                                .unwrap_or_default();
                            let list = list.join(", ");
                            cx.error_spanned_by(
                                &lit,
                                format!("unknown format `{name}`, expected one of {list}{hint}"),
                            );
                        }
                    }
                }
                "one_of" => one_of = parse_one_of(cx, &expr),
                "question" => question = lit_str(cx, key, &expr).map(|s| s.value()),
                "group" => group = lit_str(cx, key, &expr).map(|s| s.value()),
                "form" => {
                    let name = match strip(&expr) {
                        Expr::Path(p) if p.qself.is_none() => {
                            p.path.get_ident().map(|i| (i.to_string(), i.span()))
                        }
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(s), ..
                        }) => Some((s.value(), s.span())),
                        _ => None,
                    };
                    match name {
                        Some((name, _)) if FORMS.contains(&name.as_str()) => form = Some(name),
                        Some((name, span)) => {
                            let list: Vec<String> =
                                FORMS.iter().map(|f| format!("`{f}`")).collect();
                            let hint = suggest::closest(&name, FORMS.iter().copied())
                                .map(|b| format!(", did you mean `{b}`?"))
                                .unwrap_or_default();
                            cx.error_at(
                                span,
                                format!(
                                    "unknown form `{name}`, expected one of {}{hint}",
                                    list.join(", ")
                                ),
                            );
                        }
                        None => cx.error_spanned_by(
                            &expr,
                            "`form` takes a form name: `form = date`, `currency`, `scale`, `period` or `duration`",
                        ),
                    }
                }
                _ => unreachable!(),
            }
            Ok(())
        });

        // Combine `range` with the explicit bounds; a bound set twice is a conflict.
        let mut bounds = Bounds {
            minimum: explicit[0],
            maximum: explicit[1],
            exclusive_minimum: explicit[2],
            exclusive_maximum: explicit[3],
        };
        if let Some(((lo, hi), span)) = range {
            for b in explicit.iter().flatten() {
                cx.error_at(span, format!("`range` conflicts with `{}`", b.key));
                cx.error_at(b.span, format!("`{}` conflicts with `range`", b.key));
            }
            if explicit.iter().all(Option::is_none) {
                bounds.minimum = lo.map(|value| Bound {
                    value,
                    key: RANGE,
                    span,
                });
                match hi {
                    Some((value, true)) => {
                        bounds.maximum = Some(Bound {
                            value,
                            key: RANGE,
                            span,
                        })
                    }
                    Some((value, false)) => {
                        bounds.exclusive_maximum = Some(Bound {
                            value,
                            key: RANGE,
                            span,
                        })
                    }
                    None => {}
                }
            }
        }
        for (a, b) in [(MIN, EXCLUSIVE_MIN), (MAX, EXCLUSIVE_MAX)] {
            if let (Some(sa), Some(sb)) = (seen.span(a), seen.span(b)) {
                cx.error_at(sa, format!("`{a}` conflicts with `{b}`"));
                cx.error_at(sb, format!("`{b}` conflicts with `{a}`"));
            }
        }
        check_bounds_order(cx, &bounds);

        let serde_keys = SerdeKeys::from_attrs(cx, &field.attrs, SERDE_FIELD_KEYS);
        Field {
            description: description.or_else(|| doc_comment(&field.attrs)),
            bounds,
            len,
            pattern,
            one_of,
            format,
            unit,
            grounded,
            skip,
            json_schema,
            form,
            question,
            group,
            keys: seen.keys,
            serde_keys,
        }
    }
}

/// `grounded`, `grounded(in = field)`, `grounded(in = start..=end)` or
/// `grounded(with_container)`; `None` after reporting a mistake.
fn parse_grounded(cx: &Ctxt, meta: &ParseNestedMeta) -> syn::Result<Option<GroundedKind>> {
    if meta.input.is_empty() || meta.input.peek(Token![,]) {
        return Ok(Some(GroundedKind::Source));
    }
    if !meta.input.peek(syn::token::Paren) {
        cx.error_spanned_by(
            &meta.path,
            "`grounded` takes no value: write `grounded`, `grounded(in = field)` or `grounded(with_container)`",
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let mut kind = None;
    meta.parse_nested_meta(|inner| {
        if inner.path == WITH_CONTAINER {
            kind = Some(GroundedKind::WithContainer);
            return Ok(());
        }
        if inner.path == LINE {
            kind = Some(GroundedKind::Line);
            return Ok(());
        }
        if inner.path != IN {
            cx.error_spanned_by(
                &inner.path,
                format!(
                    "unknown key `{}` in `grounded`, expected `in = field`, `line` or `with_container`",
                    key_of(&inner.path)
                ),
            );
            return skip_value(&inner);
        }
        let expr: Expr = parse_value(&inner)?;
        let ident = |e: &Expr| match strip(e) {
            Expr::Path(p) if p.qself.is_none() => p.path.get_ident().cloned(),
            _ => None,
        };
        match strip(&expr) {
            Expr::Range(r) => {
                let closed = matches!(r.limits, syn::RangeLimits::Closed(_));
                match (
                    r.start.as_deref().and_then(ident),
                    r.end.as_deref().and_then(ident),
                ) {
                    (Some(a), Some(b)) if closed => kind = Some(GroundedKind::Lines(a, b)),
                    _ => cx.error_spanned_by(
                        &expr,
                        "`in` takes a field name or line fields `start..=end`",
                    ),
                }
            }
            other => match ident(other) {
                Some(i) => kind = Some(GroundedKind::In(i)),
                None => cx.error_spanned_by(
                    &expr,
                    "`in` takes a field name or line fields `start..=end`",
                ),
            },
        }
        Ok(())
    })?;
    Ok(kind)
}

/// `min > max` (or an exclusive bound that leaves nothing) is an error on both bounds.
fn check_bounds_order(cx: &Ctxt, b: &Bounds) {
    let lowers = [(b.minimum, false), (b.exclusive_minimum, true)];
    let uppers = [(b.maximum, false), (b.exclusive_maximum, true)];
    for (lo, lo_excl) in lowers {
        for (hi, hi_excl) in uppers {
            let (Some(lo), Some(hi)) = (lo, hi) else {
                continue;
            };
            let (l, h) = (lo.value.as_f64(), hi.value.as_f64());
            let empty = l > h || (l == h && (lo_excl || hi_excl));
            // `range` reports its own empty ranges.
            if empty && !(lo.key == RANGE && hi.key == RANGE) {
                let (lo_text, hi_text) = (
                    format!("`{} = {}`", lo.key, lo.value),
                    format!("`{} = {}`", hi.key, hi.value),
                );
                let msg = if l > h {
                    format!("{lo_text} is greater than {hi_text}")
                } else {
                    format!("{lo_text} and {hi_text} leave no value")
                };
                cx.error_at(lo.span, &msg);
                cx.error_at(hi.span, &msg);
            }
        }
    }
}

type RangeBounds = (Option<Num>, Option<(Num, bool)>);

/// `a..=b`, `a..b`, `a..`, `..=b`, `..b`: (start, (end, inclusive)).
fn parse_range(cx: &Ctxt, expr: &Expr) -> Option<RangeBounds> {
    let Expr::Range(r) = strip(expr) else {
        cx.error_spanned_by(
            expr,
            "`range` takes a range of number literals, like `range = 1..=4` or `range = 0.0..1.0`",
        );
        return None;
    };
    let bound = |e: &Option<Box<Expr>>| -> Result<Option<Num>, ()> {
        match e {
            None => Ok(None),
            Some(e) => match num(e) {
                Some(n) => Ok(Some(n)),
                None => {
                    cx.error_spanned_by(e, "`range` bounds must be number literals");
                    Err(())
                }
            },
        }
    };
    let start = bound(&r.start).ok()?;
    let end = bound(&r.end).ok()?;
    let inclusive = matches!(r.limits, RangeLimits::Closed(_));
    if start.is_none() && end.is_none() {
        cx.error_spanned_by(expr, "`range` needs at least one bound, like `range = 0..`");
        return None;
    }
    if let (Some(s), Some(e)) = (start, end) {
        let (s, e) = (s.as_f64(), e.as_f64());
        if s > e || (s == e && !inclusive) {
            cx.error_spanned_by(
                expr,
                format!("empty range `{}`: no value is in it", expr_text(expr)),
            );
            return None;
        }
    }
    Some((start, end.map(|e| (e, inclusive))))
}

/// `len = 3`, `len = 1..=80`, `len = ..=10`, `len = 2..`, `len = 1..10`.
fn parse_len(cx: &Ctxt, expr: &Expr) -> Option<Len> {
    let count = |e: &Expr| -> Option<u64> {
        match strip(e) {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => i.base10_parse::<u64>().ok(),
            _ => None,
        }
        .or_else(|| {
            cx.error_spanned_by(e, "`len` bounds must be non-negative integer literals");
            None
        })
    };
    match strip(expr) {
        Expr::Range(r) => {
            let min = match &r.start {
                Some(e) => Some(count(e)?),
                None => None,
            };
            let max = match &r.end {
                Some(e) => {
                    let end = count(e)?;
                    if matches!(r.limits, RangeLimits::Closed(_)) {
                        Some(end)
                    } else if end == 0 {
                        cx.error_spanned_by(
                            expr,
                            format!("empty range `{}`: no length is in it", expr_text(expr)),
                        );
                        return None;
                    } else {
                        Some(end - 1)
                    }
                }
                None => None,
            };
            if min.is_none() && max.is_none() {
                cx.error_spanned_by(expr, "`len` needs at least one bound, like `len = 1..`");
                return None;
            }
            if let (Some(lo), Some(hi)) = (min, max) {
                if lo > hi {
                    cx.error_spanned_by(
                        expr,
                        format!("empty range `{}`: no length is in it", expr_text(expr)),
                    );
                    return None;
                }
            }
            Some(Len { min, max })
        }
        _ => {
            let n = count(expr)?;
            Some(Len {
                min: Some(n),
                max: Some(n),
            })
        }
    }
}

/// `one_of = ["USD", "EUR"]` or `one_of = [1, 2, 3]`.
fn parse_one_of(cx: &Ctxt, expr: &Expr) -> Option<OneOf> {
    let Expr::Array(array) = strip(expr) else {
        cx.error_spanned_by(expr, "`one_of` takes a list of string or integer literals, like `one_of = [\"USD\", \"EUR\"]`");
        return None;
    };
    let mut values = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut kind: Option<bool> = None; // Some(true): strings
    let mut ok = true;
    for elem in &array.elems {
        let (value, is_str, text) = match (strip(elem), num(elem)) {
            (
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }),
                _,
            ) => (OneOfValue::Str(s.value()), true, format!("{:?}", s.value())),
            (_, Some(Num::Int(i))) => match i64::try_from(i) {
                Ok(i) => (OneOfValue::Int(i), false, i.to_string()),
                Err(_) => {
                    cx.error_spanned_by(elem, "`one_of` integers must fit in `i64`");
                    ok = false;
                    continue;
                }
            },
            _ => {
                cx.error_spanned_by(elem, "`one_of` takes string or integer literals");
                ok = false;
                continue;
            }
        };
        match kind {
            Some(k) if k != is_str => {
                cx.error_spanned_by(elem, "`one_of` values must be all strings or all integers");
                ok = false;
                continue;
            }
            _ => kind = Some(is_str),
        }
        if texts.contains(&text) {
            cx.error_spanned_by(elem, format!("duplicate value {text} in `one_of`"));
            ok = false;
            continue;
        }
        texts.push(text);
        values.push(value);
    }
    if array.elems.is_empty() {
        cx.error_spanned_by(expr, "`one_of` needs at least one value");
        return None;
    }
    ok.then_some(OneOf {
        values,
        all_strings: kind.unwrap_or(true),
    })
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
