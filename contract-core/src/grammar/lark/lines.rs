//! Span-like objects: an object with a field grounded in the lines two of its fields name, read
//! by the entry points (which rules a segment can hold) and by the renderer.

use crate::attrs::{CmpOp, Grounding, Rule};
use crate::grammar::ObjectShape;

/// The two line fields of an object with a field grounded in the lines they name.
pub(super) fn line_fields(object: &ObjectShape) -> Option<(String, String)> {
    object.fields.iter().find_map(|f| match &f.grounded {
        Some(Grounding::Lines { start, end }) => Some((start.clone(), end.clone())),
        _ => None,
    })
}

/// Whether every rule of a span-like `object` is its line order (`start <= end`, or
/// `end >= start`), which enumerating the ranges `a <= b` holds.
pub(super) fn held_by_ranges(object: &ObjectShape) -> bool {
    let Some((start, end)) = line_fields(object) else {
        return false;
    };
    object.rules.iter().all(|r| {
        matches!(r, Rule::Compare { left, op, right }
            if (*op == CmpOp::Le && *left == start && *right == end)
                || (*op == CmpOp::Ge && *left == end && *right == start))
    })
}
