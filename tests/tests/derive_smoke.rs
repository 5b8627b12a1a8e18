//! `#[derive(Contract)]` builds the IR the attributes describe.

use contract_core::ir::{JsonType, Node};
use contract_core::{CmpOp, Contract, Rule, Violation};
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

fn object(spec: &contract_core::ContractSpec) -> &contract_core::ObjectNode {
    spec.object().expect("object contract")
}

#[test]
fn guidance_spec() {
    let spec = Guidance::contract_spec();
    assert_eq!(spec.name, "Guidance");
    assert_eq!(
        spec.description(),
        Some("Next-quarter revenue guidance stated in an earnings release.")
    );
    let obj = object(spec);
    let names: Vec<&str> = obj.properties.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["quarter", "year", "low", "high"]);
    let quarter = spec.field("quarter").unwrap();
    assert_eq!(quarter.node.number.bounds.minimum, Some(1.into()));
    assert_eq!(quarter.node.number.bounds.maximum, Some(4.into()));
    // `Option<u8>`: an integer of `u8`'s range, or null.
    assert_eq!(quarter.node.types, [JsonType::Integer, JsonType::Null]);
    assert_eq!(quarter.node.number.integer_type, Some((0, 255)));
    let low = spec.field("low").unwrap();
    assert_eq!(low.description(), Some("Low end of the range."));
    assert_eq!(low.unit(), Some("USD millions"));
    assert_eq!(low.node.number.bounds.exclusive_minimum, Some(0.into()));
    assert!(low.node.number.bounds.minimum.is_none());
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
    assert_eq!(spec.description(), Some("A currency."));
    let variants = spec.variants().expect("enum contract");
    let names: Vec<&str> = variants.iter().filter_map(|v| v.as_str()).collect();
    assert_eq!(names, ["USD", "EUR", "JPY"]);
    let docs = &spec.node.enum_descriptions;
    assert_eq!(docs[0].as_deref(), Some("US dollar."));
    assert_eq!(docs[1], None);
    assert_eq!(serde_json::to_value(Currency::Yen).unwrap(), json!("JPY"));
}

#[test]
fn order_spec() {
    let spec = Order::contract_spec();
    assert_eq!(
        spec.description(),
        Some("An order over several lines.\n\nSecond paragraph.")
    );
    let obj = object(spec);
    let names: Vec<&str> = obj.properties.iter().map(|f| f.name.as_str()).collect();
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
        code.node.string.pattern.as_ref().unwrap().as_str(),
        "^[A-Z]{3}-[0-9]+$"
    );
    assert_eq!(
        (code.node.string.min_length, code.node.string.max_length),
        (Some(5), Some(20))
    );
    assert_eq!(
        spec.field("email").unwrap().node.string.format.as_deref(),
        Some("email")
    );
    let discount = &spec.field("discount").unwrap().node.number.bounds;
    assert_eq!(discount.minimum.as_ref().unwrap().as_f64(), Some(0.0));
    assert_eq!(
        discount.exclusive_maximum.as_ref().unwrap().as_f64(),
        Some(1.0)
    );
    assert!(discount.maximum.is_none());
    let total = &spec.field("totalAmount").unwrap().node.number.bounds;
    assert_eq!(total.minimum, Some((-10).into()));
    assert_eq!(total.maximum, Some(1_000_000.into()));
    assert_eq!(
        spec.field("minTotal")
            .unwrap()
            .node
            .number
            .bounds
            .exclusive_maximum
            .as_ref()
            .unwrap()
            .as_f64(),
        Some(1.5)
    );
    // A list of strings: the length on the list, `one_of` on its items.
    let tags = &spec.field("tags").unwrap().node;
    assert_eq!(tags.types, [JsonType::Array]);
    let items = tags.items().unwrap();
    assert_eq!(items.types, [JsonType::String]);
    assert_eq!(items.enumeration, Some(vec![json!("a"), json!("b")]));
    assert_eq!(tags.array.as_ref().unwrap().max_items, Some(3));
    assert_eq!(
        spec.field("priority").unwrap().node.enumeration,
        Some(vec![json!(1), json!(2), json!(3)])
    );
    let id = spec.field("ID").unwrap();
    assert_eq!(
        (id.node.string.min_length, id.node.string.max_length),
        (Some(3), Some(3))
    );

    let contract_name = |node: &Node| node.contract().map(|c| c.name.as_str());
    let currency = &spec.field("currency").unwrap().node;
    assert_eq!(contract_name(currency), Some("Currency"));
    assert!(currency.types.is_empty() && !currency.is_nullable());
    let history = &spec.field("history").unwrap().node;
    assert_eq!(history.types, [JsonType::Array]);
    assert_eq!(contract_name(history.items().unwrap()), Some("Guidance"));
    let extra = &spec.field("extra").unwrap().node;
    assert_eq!(extra.types, [JsonType::Array, JsonType::Null]);
    let plain = extra
        .items()
        .unwrap()
        .external
        .as_ref()
        .expect("an external type");
    assert_eq!(plain.name(), "Plain");

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
    order.run_checks(&contract_core::DocContext::none(), "/orders/0", &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out.0[0].path, "/orders/0/totalAmount");
}

#[test]
fn generic_spec() {
    let spec = <Wrapper<u8> as Contract>::contract_spec();
    assert_eq!(spec.name, "Wrapper_for_uint8");
    assert_eq!(spec.description(), Some("A wrapped value."));
    let value = &spec.field("value").unwrap().node;
    assert_eq!(value.types, [JsonType::Integer]);
    assert_eq!(value.number.integer_type, Some((0, 255)));
    assert_eq!(
        spec.field("count").unwrap().node.number.bounds.minimum,
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
    assert_eq!(uses.description(), Some("Uses generics."));
    assert_eq!(
        uses.field("b")
            .unwrap()
            .node
            .contract()
            .map(|c| c.name.as_str()),
        Some("Wrapper_for_Guidance")
    );
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
