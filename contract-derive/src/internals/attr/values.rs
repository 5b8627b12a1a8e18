//! The values an attribute key takes: string and number literals, `range`, `len` and `one_of`,
//! each read with its own mistakes reported at the literal. Apart from the per-node readers in
//! the parent, which decide which key is where.

use quote::ToTokens;
use syn::{Expr, ExprLit, Lit, LitStr, RangeLimits, UnOp};

use super::{Bounds, Len, Num, OneOf, OneOfValue};
use crate::internals::ctxt::Ctxt;
use crate::internals::symbol::{Symbol, RANGE};

pub(super) fn lit_str(cx: &Ctxt, key: Symbol, expr: &Expr) -> Option<LitStr> {
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

pub(super) fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(g) => strip(&g.expr),
        Expr::Paren(p) => strip(&p.expr),
        other => other,
    }
}

/// A possibly negated integer or float literal.
pub(super) fn num(expr: &Expr) -> Option<Num> {
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

pub(super) fn expect_num(cx: &Ctxt, key: Symbol, expr: &Expr) -> Option<Num> {
    let n = num(expr);
    if n.is_none() {
        cx.error_spanned_by(
            expr,
            format!("`{key}` takes a number literal, like `{key} = 0`"),
        );
    }
    n
}

pub(super) fn expr_text(expr: &Expr) -> String {
    expr.to_token_stream()
        .to_string()
        .replace(" ..", "..")
        .replace(".. ", "..")
        .replace("- ", "-")
        .replace("= ", "=")
}

/// `min > max` (or an exclusive bound that leaves nothing) is an error on both bounds.
pub(super) fn check_bounds_order(cx: &Ctxt, b: &Bounds) {
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

pub(super) type RangeBounds = (Option<Num>, Option<(Num, bool)>);

/// `a..=b`, `a..b`, `a..`, `..=b`, `..b`: (start, (end, inclusive)).
pub(super) fn parse_range(cx: &Ctxt, expr: &Expr) -> Option<RangeBounds> {
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
pub(super) fn parse_len(cx: &Ctxt, expr: &Expr) -> Option<Len> {
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
pub(super) fn parse_one_of(cx: &Ctxt, expr: &Expr) -> Option<OneOf> {
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
