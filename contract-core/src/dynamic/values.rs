//! The library's value types named in a runtime schema: a property whose `$ref` ends in
//! `Amount`, `DateValue`, `Period` or `DurationValue` (`#/$defs/DateValue`) is that value type,
//! as a derived contract's field of that type is: decoded under its shape (the model copies
//! `original`, the number and the currency as written), normalised by the library when it is
//! read (`DateValue::iso`, `Amount::code`, the period's quarter and year), its violations
//! reported at the property's pointer.
//!
//! Only the root's properties are read this way, directly, nullable (`anyOf` with `null`) or
//! as a list's items; the definition's body is not used (write `{}` or the type's shape).

use serde_json::Value;

use crate::contract::{Contract, ContractRef, ContractSpec};
use crate::ir::{Node, Ref, Target};
use crate::validate::{Violation, ViolationKind, Violations};
use crate::values::{Amount, DateValue, DurationValue, Period};
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
fn named(reference: &Ref) -> Option<(ContractRef, Normalize)> {
    if matches!(reference.target, Some(Target::Contract(_))) {
        return None;
    }
    let text = reference.text();
    let name = text.rsplit('/').next().unwrap_or_default();
    Some(match name {
        "Amount" => (
            ContractRef::of::<Amount>(),
            normalize::<Amount> as Normalize,
        ),
        "DateValue" => (ContractRef::of::<DateValue>(), normalize::<DateValue>),
        "Period" => (ContractRef::of::<Period>(), normalize::<Period>),
        "DurationValue" => (
            ContractRef::of::<DurationValue>(),
            normalize::<DurationValue>,
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
        if let Some(normalize) = adopt(&mut field.node) {
            found.push(ValueField {
                name: field.name.clone(),
                list,
                normalize,
            });
        }
    }
    found
}

/// Re-targets `node`'s reference (or its nullable branch's, or its items') to the value type
/// it names.
fn adopt(node: &mut Node) -> Option<Normalize> {
    if let Some(reference) = &node.reference {
        let (r, normalize) = named(reference)?;
        node.reference = Some(Ref::contract(r));
        return Some(normalize);
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

/// Whether every reference left in `node` (outside the value types adopted) is gone: the node
/// can be decoded and selected like a derived contract's.
pub(crate) fn has_def_refs(node: &Node) -> bool {
    let mut found = false;
    node.walk(&mut |n| {
        if matches!(
            n.reference.as_ref().and_then(|r| r.target.as_ref()),
            Some(Target::Def(_)) | None
        ) && n.reference.is_some()
        {
            found = true;
        }
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
                Ok(read) => *v = read,
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
