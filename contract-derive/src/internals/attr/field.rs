//! A field's `#[contract(..)]` attribute: the most keys of any node (bounds, lengths, formats,
//! grounding, forms), read into one [`Field`]. Apart from the container's and variant's readers
//! in the parent, which take a handful of keys each.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, Token};

use super::values::{
    check_bounds_order, expect_num, lit_str, parse_len, parse_one_of, parse_range, strip,
    RangeBounds,
};
use super::{
    doc_comment, each_meta, key_of, parse_value, skip_value, unknown_key, Bound, Bounds, Field,
    Grounded, GroundedKind, Seen, SerdeKeys, FORMATS, FORMS,
};
use crate::internals::ctxt::Ctxt;
use crate::internals::suggest;
use crate::internals::symbol::*;

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
