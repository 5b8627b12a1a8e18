//! `#[derive(Contract)]` builds the IR the attributes describe.

use contract_core::{CmpOp, Contract, Format, Rule, SpecKind, TypeSpec, Violation};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Next-quarter revenue guidance stated in an earnings release.
#[derive(Contract, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Guidance {
    #[contract(range = 1..=4)]
    quarter: Option<u8>,
    #[contract(range = 2018..=2030)]
    year: Option<u16>,
    /// Low end of the range.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    low: Option<f64>,
    #[contract(exclusive_min = 0, unit = "USD millions")]
    high: Option<f64>,
}

/// A currency.
#[derive(Contract, Serialize, Deserialize, PartialEq, Debug)]
#[serde(rename_all = "UPPERCASE")]
enum Currency {
    /// US dollar.
    Usd,
    Eur,
    #[serde(rename = "JPY")]
    Yen,
}

#[derive(schemars::JsonSchema, Serialize, Deserialize)]
struct Plain {
    note: String,
}

fn no_negative_total(order: &Order) -> Result<(), Violation> {
    if order.total_amount < 0.0 {
        return Err(Violation::cross_field("/totalAmount", "negative"));
    }
    Ok(())
}

/// An order
/// over several lines.
///
/// Second paragraph.
#[derive(Contract, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[contract(
    rule = "total_amount >= min_total",
    rule = "order_code != customer_name",
    at_least_one(email, phone),
    check = no_negative_total
)]
struct Order {
    #[contract(pattern = "^[A-Z]{3}-[0-9]+$", len = 5..=20)]
    order_code: String,
    customer_name: String,
    #[contract(format = "email")]
    email: Option<String>,
    phone: Option<String>,
    currency: Currency,
    #[contract(range = 0.0..1.0)]
    discount: f64,
    #[contract(min = -10, max = 1000000)]
    total_amount: f64,
    #[contract(exclusive_max = 1.5)]
    min_total: f64,
    #[contract(one_of = ["a", "b"], len = ..=3)]
    tags: Vec<String>,
    #[contract(one_of = [1, 2, 3])]
    priority: i32,
    guidance: Guidance,
    history: Vec<Guidance>,
    #[contract(json_schema)]
    extra: Option<Vec<Plain>>,
    #[serde(rename = "ID")]
    #[contract(len = 3)]
    id: String,
    #[serde(skip)]
    #[allow(dead_code)] // only here to show `#[serde(skip)]` keeps a field out of the contract
    cache: u32,
    #[serde(default)]
    #[contract(skip)]
    internal_note: String,
    #[serde(skip_deserializing)]
    computed: bool,
}

/// A wrapped value.
#[derive(Contract, Serialize, Deserialize)]
struct Wrapper<T> {
    value: T,
    #[contract(range = 0..)]
    count: u32,
}

#[derive(Contract, Serialize, Deserialize)]
#[contract(description = "Uses generics.")]
struct UsesWrapper {
    a: Wrapper<u8>,
    b: Wrapper<Guidance>,
}

fn object(spec: &contract_core::ContractSpec) -> &contract_core::ObjectSpec {
    spec.object().expect("object contract")
}

#[test]
fn guidance_spec() {
    let spec = Guidance::contract_spec();
    assert_eq!(spec.name, "Guidance");
    assert_eq!(
        spec.description.as_deref(),
        Some("Next-quarter revenue guidance stated in an earnings release.")
    );
    let obj = object(spec);
    let names: Vec<&str> = obj.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["quarter", "year", "low", "high"]);
    let quarter = spec.field("quarter").unwrap();
    assert_eq!(quarter.constraints.minimum, Some(1.into()));
    assert_eq!(quarter.constraints.maximum, Some(4.into()));
    assert!(matches!(
        &quarter.ty,
        TypeSpec::Nullable(inner) if matches!(**inner, TypeSpec::Integer { min: 0, max: 255 })
    ));
    let low = spec.field("low").unwrap();
    assert_eq!(low.description.as_deref(), Some("Low end of the range."));
    assert_eq!(low.unit.as_deref(), Some("USD millions"));
    assert_eq!(low.constraints.exclusive_minimum, Some(0.into()));
    assert!(low.constraints.minimum.is_none());
    assert_eq!(
        obj.rules,
        vec![
            Rule::Compare {
                left: "low".into(),
                op: CmpOp::Le,
                right: "high".into()
            },
            Rule::BothOrNeither(vec!["low".into(), "high".into()]),
        ]
    );
    assert!(obj.checks.is_empty());
    assert!(obj.skipped.is_empty());
    // Cached: the same IR every time.
    assert!(std::ptr::eq(spec, Guidance::contract_spec()));
}

#[test]
fn enum_spec() {
    let spec = Currency::contract_spec();
    assert_eq!(spec.description.as_deref(), Some("A currency."));
    let SpecKind::Enum(e) = &spec.kind else {
        panic!("enum contract")
    };
    let names: Vec<&str> = e.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["USD", "EUR", "JPY"]);
    assert_eq!(e.variants[0].description.as_deref(), Some("US dollar."));
    assert_eq!(e.variants[1].description, None);
    assert_eq!(serde_json::to_value(Currency::Yen).unwrap(), json!("JPY"));
}

#[test]
fn order_spec() {
    let spec = Order::contract_spec();
    assert_eq!(
        spec.description.as_deref(),
        Some("An order over several lines.\n\nSecond paragraph.")
    );
    let obj = object(spec);
    let names: Vec<&str> = obj.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "orderCode",
            "customerName",
            "email",
            "phone",
            "currency",
            "discount",
            "totalAmount",
            "minTotal",
            "tags",
            "priority",
            "guidance",
            "history",
            "extra",
            "ID"
        ]
    );
    let code = spec.field("orderCode").unwrap();
    assert_eq!(code.rust_name, "order_code");
    assert_eq!(
        code.constraints.pattern.as_ref().unwrap().as_str(),
        "^[A-Z]{3}-[0-9]+$"
    );
    assert_eq!(
        (code.constraints.min_len, code.constraints.max_len),
        (Some(5), Some(20))
    );
    assert_eq!(
        spec.field("email").unwrap().constraints.format,
        Some(Format::Email)
    );
    let discount = &spec.field("discount").unwrap().constraints;
    assert_eq!(discount.minimum.as_ref().unwrap().as_f64(), Some(0.0));
    assert_eq!(
        discount.exclusive_maximum.as_ref().unwrap().as_f64(),
        Some(1.0)
    );
    assert!(discount.maximum.is_none());
    let total = &spec.field("totalAmount").unwrap().constraints;
    assert_eq!(total.minimum, Some((-10).into()));
    assert_eq!(total.maximum, Some(1_000_000.into()));
    assert_eq!(
        spec.field("minTotal")
            .unwrap()
            .constraints
            .exclusive_maximum
            .as_ref()
            .unwrap()
            .as_f64(),
        Some(1.5)
    );
    let tags = &spec.field("tags").unwrap();
    assert_eq!(tags.constraints.one_of, Some(vec![json!("a"), json!("b")]));
    assert_eq!(tags.constraints.max_len, Some(3));
    assert!(matches!(&tags.ty, TypeSpec::List(inner) if matches!(**inner, TypeSpec::String)));
    assert_eq!(
        spec.field("priority").unwrap().constraints.one_of,
        Some(vec![json!(1), json!(2), json!(3)])
    );
    let id = spec.field("ID").unwrap();
    assert_eq!(
        (id.constraints.min_len, id.constraints.max_len),
        (Some(3), Some(3))
    );

    match &spec.field("currency").unwrap().ty {
        TypeSpec::Contract(c) => assert_eq!(c.spec().name, "Currency"),
        other => panic!("{other:?}"),
    }
    match &spec.field("history").unwrap().ty {
        TypeSpec::List(inner) => match &**inner {
            TypeSpec::Contract(c) => assert_eq!(c.spec().name, "Guidance"),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    match &spec.field("extra").unwrap().ty {
        TypeSpec::Nullable(inner) => match &**inner {
            TypeSpec::List(inner) => match &**inner {
                TypeSpec::External(e) => assert_eq!(e.name(), "Plain"),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }

    assert_eq!(
        obj.rules,
        vec![
            Rule::Compare {
                left: "totalAmount".into(),
                op: CmpOp::Ge,
                right: "minTotal".into()
            },
            Rule::Compare {
                left: "orderCode".into(),
                op: CmpOp::Ne,
                right: "customerName".into()
            },
            Rule::AtLeastOne(vec!["email".into(), "phone".into()]),
        ]
    );
    assert_eq!(obj.checks, ["no_negative_total"]);
    // `cache` is never serialized; `internalNote` and `computed` are, so the validator strips them.
    assert_eq!(obj.skipped, ["internalNote", "computed"]);
}

#[test]
fn custom_checks_run_with_pointer() {
    let order = Order {
        order_code: "ABC-1".into(),
        customer_name: "x".into(),
        email: None,
        phone: None,
        currency: Currency::Usd,
        discount: 0.1,
        total_amount: -1.0,
        min_total: 0.0,
        tags: vec![],
        priority: 1,
        guidance: Guidance {
            quarter: None,
            year: None,
            low: None,
            high: None,
        },
        history: vec![],
        extra: None,
        id: "abc".into(),
        cache: 0,
        internal_note: String::new(),
        computed: false,
    };
    let mut out = contract_core::Violations::new();
    order.run_checks("/orders/0", &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out.0[0].path, "/orders/0/totalAmount");
}

#[test]
fn generic_spec() {
    let spec = <Wrapper<u8> as Contract>::contract_spec();
    assert_eq!(spec.name, "Wrapper_for_uint8");
    assert_eq!(spec.description.as_deref(), Some("A wrapped value."));
    assert!(matches!(
        spec.field("value").unwrap().ty,
        TypeSpec::Integer { min: 0, max: 255 }
    ));
    assert_eq!(
        spec.field("count").unwrap().constraints.minimum,
        Some(0.into())
    );
    let other = <Wrapper<Guidance> as Contract>::contract_spec();
    assert_eq!(other.name, "Wrapper_for_Guidance");
    assert!(!std::ptr::eq(spec, other));
    assert!(std::ptr::eq(
        other,
        <Wrapper<Guidance> as Contract>::contract_spec()
    ));
    let uses = UsesWrapper::contract_spec();
    assert_eq!(uses.description.as_deref(), Some("Uses generics."));
    match &uses.field("b").unwrap().ty {
        TypeSpec::Contract(c) => assert_eq!(c.spec().name, "Wrapper_for_Guidance"),
        other => panic!("{other:?}"),
    }
}

/// Groups written as rule strings, in the form a schema's `x-rules` carries them.
#[derive(Contract, Serialize, Deserialize)]
#[contract(rule = "both_or_neither(low, high)", rule = "at_least_one(low, note)")]
struct GroupsByRule {
    low: Option<f64>,
    high: Option<f64>,
    #[serde(rename = "remark")]
    note: Option<String>,
}

/// The same groups as attributes.
#[derive(Contract, Serialize, Deserialize)]
#[contract(both_or_neither(low, high), at_least_one(low, note))]
struct GroupsByAttribute {
    low: Option<f64>,
    high: Option<f64>,
    #[serde(rename = "remark")]
    note: Option<String>,
}

/// The derive reads `rule = ".."` with the parser runtime contracts read `x-rules` with: a group
/// written as a rule is the group written as an attribute (JSON names after renames).
#[test]
fn rule_strings_and_group_attributes_are_one_language() {
    let by_rule = &object(GroupsByRule::contract_spec()).rules;
    let by_attribute = &object(GroupsByAttribute::contract_spec()).rules;
    assert_eq!(by_rule, by_attribute);
    assert_eq!(
        by_rule,
        &[
            Rule::BothOrNeither(vec!["low".into(), "high".into()]),
            Rule::AtLeastOne(vec!["low".into(), "remark".into()]),
        ]
    );
    let half = r#"{"low": 1, "high": null, "remark": null}"#;
    let kinds = |e: contract_core::Violations| -> Vec<String> {
        e.iter().map(|v| v.kind.as_str().to_owned()).collect()
    };
    assert_eq!(
        GroupsByRule::from_json(half).map_err(kinds).err(),
        GroupsByAttribute::from_json(half).map_err(kinds).err()
    );
    assert!(GroupsByRule::from_json(half).is_err());
    assert!(GroupsByRule::from_json(r#"{"low": null, "high": null, "remark": "n/a"}"#).is_ok());
}
