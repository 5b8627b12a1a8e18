//! The library's value types named in a runtime schema: a property whose `$ref` ends in
//! `Amount`, `DateValue`, `Period`, `DurationValue` or `NameValue` (`#/$defs/DateValue`) is that
//! value type, as a derived contract's field of that type is: decoded under its shape (the model copies
//! `original`, the number and the currency as written), normalised by the library when it is
//! read (`DateValue::iso`, `Amount::code`, the period's quarter and year), its violations
//! reported at the property's pointer.
//!
//! Only the root's properties are read this way, directly, nullable (`anyOf` with `null`) or
//! as a list's items; the definition's body is not used (write `{}` or the type's shape).
//!
//! A `Period` property with `"x-period": "coming"` must be after the period the document reports
//! on ([`Conventions::reference_period`](crate::read::Conventions::reference_period), found in
//! the document): guidance, a forecast, a target, not a result. A period the library cannot
//! place, or a document whose own period it cannot find, is not refused.

use serde_json::Value;

use crate::contract::Contract;
use crate::ir::{ContractRef, ContractSpec};
use crate::ir::{Node, Ref, Target};
use crate::validate::{Violation, ViolationKind, Violations};
use crate::values::{Amount, DateValue, DurationValue, NameValue, Period};
use crate::DocContext;

/// Reads one value of a value type: normalised JSON, or its violations (pointers relative to
/// the value).
type Normalize = fn(&Value, &DocContext<'_>) -> Result<Value, Violations>;

fn normalize<C: Contract>(value: &Value, cx: &DocContext<'_>) -> Result<Value, Violations> {
    let read = C::from_value_in(value, cx)?;
    serde_json::to_value(&read).map_err(|e| {
        Violations::one(Violation::new(
            "",
            ViolationKind::TypeMismatch,
            format!("the value cannot be written back as JSON: {e}"),
        ))
    })
}

/// The value type a reference names, by the last segment of the reference as written.
fn named(reference: &Ref) -> Option<(ContractRef, Normalize, &'static str)> {
    if matches!(reference.target, Some(Target::Contract(_))) {
        return None;
    }
    let text = reference.text();
    let name = text.rsplit('/').next().unwrap_or_default();
    Some(match name {
        "Amount" => (
            ContractRef::of::<Amount>(),
            normalize::<Amount> as Normalize,
            "Amount",
        ),
        "DateValue" => (
            ContractRef::of::<DateValue>(),
            normalize::<DateValue>,
            "DateValue",
        ),
        "Period" => (ContractRef::of::<Period>(), normalize::<Period>, "Period"),
        "DurationValue" => (
            ContractRef::of::<DurationValue>(),
            normalize::<DurationValue>,
            "DurationValue",
        ),
        "NameValue" => (
            ContractRef::of::<NameValue>(),
            normalize::<NameValue>,
            "NameValue",
        ),
        _ => return None,
    })
}

/// Where a root property holds a value type.
#[derive(Clone)]
pub(crate) struct ValueField {
    name: String,
    list: bool,
    normalize: Normalize,
    /// `"x-period": "coming"`: a period after the one the document reports on.
    coming: bool,
}

/// Points the root's properties that name a value type at the library's type (in place), and
/// says which they are.
pub(crate) fn adopt_value_types(spec: &mut ContractSpec) -> Vec<ValueField> {
    let mut found = Vec::new();
    let Some(object) = spec.node.object.as_deref_mut() else {
        return found;
    };
    for field in &mut object.properties {
        let list = field.node.non_null().items().is_some();
        let coming = field
            .node
            .other
            .iter()
            .any(|(k, v)| k == "x-period" && v == "coming");
        if let Some((normalize, kind)) = adopt(&mut field.node) {
            found.push(ValueField {
                name: field.name.clone(),
                list,
                coming: coming && kind == "Period",
                normalize,
            });
        }
    }
    found
}

/// Re-targets `node`'s reference (or its nullable branch's, or its items') to the value type
/// it names.
fn adopt(node: &mut Node) -> Option<(Normalize, &'static str)> {
    if let Some(reference) = &node.reference {
        let (r, normalize, kind) = named(reference)?;
        node.reference = Some(Ref::contract(r));
        return Some((normalize, kind));
    }
    if let Some(branches) = node.any_of.as_mut() {
        if branches.len() == 2 && branches.iter().any(Node::is_null_only) {
            return branches
                .iter_mut()
                .find(|b| !b.is_null_only())
                .and_then(adopt);
        }
        return None;
    }
    let items = node.array.as_deref_mut()?.items.as_mut()?;
    adopt(items)
}

/// Whether `node` still holds a reference into the schema's definitions (one that is not an
/// adopted value type): such a node cannot be decoded or selected like a derived contract's.
pub(crate) fn has_def_refs(node: &Node) -> bool {
    let mut found = false;
    node.walk(&mut |n| {
        found |= n
            .reference
            .as_ref()
            .is_some_and(|r| !matches!(r.target, Some(Target::Contract(_))));
    });
    found
}

/// Normalises the value types of `json` in place (a reply that passed the schema); the
/// violations at their pointers.
pub(crate) fn normalize_values(
    fields: &[ValueField],
    json: &mut Value,
    cx: &DocContext<'_>,
) -> Violations {
    let mut out = Violations::new();
    let Some(map) = json.as_object_mut() else {
        return out;
    };
    for f in fields {
        let Some(value) = map.get_mut(&f.name) else {
            continue;
        };
        let mut one = |v: &mut Value, pointer: String| {
            if v.is_null() {
                return;
            }
            match (f.normalize)(v, cx) {
                Ok(read) => {
                    if f.coming {
                        if let Some(v) = not_coming(&read, cx, &pointer) {
                            out.0.push(v);
                        }
                    }
                    *v = read;
                }
                Err(violations) => out.0.extend(violations.0.into_iter().map(|mut x| {
                    x.path = format!("{pointer}{}", x.path);
                    x
                })),
            }
        };
        let base = format!("/{}", f.name.replace('~', "~0").replace('/', "~1"));
        match value {
            Value::Array(items) if f.list => {
                for (i, item) in items.iter_mut().enumerate() {
                    one(item, format!("{base}/{i}"));
                }
            }
            v => one(v, base),
        }
    }
    out
}

/// The violation of a period (`read`, normalised) that does not come after the one the
/// document reports on.
fn not_coming(read: &Value, cx: &DocContext<'_>, pointer: &str) -> Option<Violation> {
    let period: Period = serde_json::from_value(read.clone()).ok()?;
    let (period, reported) = (period.resolved()?, cx.conventions().reference_period()?);
    (!period.is_after(&reported)).then(|| {
        Violation::new(
            pointer,
            ViolationKind::CrossField,
            format!(
                "{period} is not after {reported}, the period the document reports on: a coming \
                 period is asked for (`x-period`)"
            ),
        )
    })
}
