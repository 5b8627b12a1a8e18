//! Hand-written contracts for the unit tests of the renderings (what the derive will emit).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::__private::{enum_spec, field, float, format, int, object_spec, pattern, str_value};
use crate::attrs::{CmpOp, FieldAttrs, Rule};
use crate::bounds::NumberBounds;
use crate::contract::{Contract, FieldType};
use crate::ir::{ContractRef, ContractSpec, ExternalRef, TypeSpec};

macro_rules! contract {
    ($ty:ident, $build:expr) => {
        impl Contract for $ty {
            fn contract_spec() -> &'static ContractSpec {
                static SPEC: OnceLock<ContractSpec> = OnceLock::new();
                SPEC.get_or_init($build)
            }
        }
        impl FieldType for $ty {
            fn type_spec() -> TypeSpec {
                TypeSpec::Contract(ContractRef::of::<$ty>())
            }
        }
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                crate::__private::schema_for_spec(<$ty as Contract>::contract_spec(), generator)
            }
        }
    };
}

/// The issue's `Guidance`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Guidance {
    pub quarter: Option<u8>,
    pub year: Option<u16>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

contract!(Guidance, || {
    let range = |lo, hi| FieldAttrs {
        bounds: NumberBounds {
            minimum: Some(int(lo)),
            maximum: Some(int(hi)),
            ..NumberBounds::default()
        },
        ..FieldAttrs::default()
    };
    let positive = || FieldAttrs {
        bounds: NumberBounds {
            exclusive_minimum: Some(int(0)),
            ..NumberBounds::default()
        },
        ..FieldAttrs::default()
    };
    object_spec(
        "Guidance",
        Some("Next-quarter revenue guidance stated in an earnings release."),
        vec![
            field(
                "quarter",
                "quarter",
                Option::<u8>::type_spec(),
                None,
                None,
                range(1, 4),
            ),
            field(
                "year",
                "year",
                Option::<u16>::type_spec(),
                None,
                None,
                range(2018, 2030),
            ),
            field(
                "low",
                "low",
                Option::<f64>::type_spec(),
                Some("Low end of the range."),
                Some("USD millions"),
                positive(),
            ),
            field(
                "high",
                "high",
                Option::<f64>::type_spec(),
                None,
                Some("USD millions"),
                positive(),
            ),
        ],
        vec![
            Rule::Compare {
                left: "low".into(),
                op: CmpOp::Le,
                right: "high".into(),
            },
            Rule::BothOrNeither(vec!["low".into(), "high".into()]),
        ],
        &[],
        &[],
    )
});

/// A string enum contract.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Currency {
    #[serde(rename = "USD")]
    Usd,
    #[serde(rename = "EUR")]
    Eur,
}

contract!(Currency, || enum_spec(
    "Currency",
    Some("An ISO 4217 currency."),
    &[("USD", Some("US dollar")), ("EUR", None)],
));

/// A nested contract.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Amount {
    pub value: f64,
    pub currency: Currency,
    pub unit: Option<String>,
}

contract!(Amount, || object_spec(
    "Amount",
    Some("A money amount as the document writes it."),
    vec![
        field(
            "value",
            "value",
            f64::type_spec(),
            Some("The number as written."),
            None,
            FieldAttrs::default()
        ),
        field(
            "currency",
            "currency",
            Currency::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
        field(
            "unit",
            "unit",
            Option::<String>::type_spec(),
            Some("Scale or basis: `billion`, `per claim`."),
            None,
            FieldAttrs {
                min_len: Some(1),
                max_len: Some(20),
                ..FieldAttrs::default()
            },
        ),
    ],
    vec![],
    &[],
    &[],
));

/// Every field shape the IR has.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Policy {
    pub name: String,
    pub insured: Amount,
    pub deductible: Option<Amount>,
    pub start: String,
    pub tags: Vec<String>,
    pub code: Option<String>,
    pub count: u32,
    pub ratio: f32,
    pub level: i8,
    pub active: bool,
    pub scores: Option<Vec<u8>>,
    pub server: std::net::Ipv4Addr,
    pub currencies: Vec<Currency>,
}

contract!(Policy, || object_spec(
    "Policy",
    Some("An insurance policy | with a pipe."),
    vec![
        field(
            "name",
            "name",
            String::type_spec(),
            Some("Name of the\npolicy."),
            None,
            FieldAttrs {
                min_len: Some(1),
                max_len: Some(80),
                ..FieldAttrs::default()
            },
        ),
        field(
            "insured",
            "insured",
            Amount::type_spec(),
            Some("Sum insured."),
            None,
            FieldAttrs::default()
        ),
        field(
            "deductible",
            "deductible",
            Option::<Amount>::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
        field(
            "start",
            "start",
            String::type_spec(),
            None,
            None,
            FieldAttrs {
                format: Some(format("date")),
                ..FieldAttrs::default()
            },
        ),
        field(
            "tags",
            "tags",
            Vec::<String>::type_spec(),
            None,
            None,
            FieldAttrs {
                min_len: Some(1),
                max_len: Some(5),
                pattern: Some(pattern("^[a-z]+$")),
                ..FieldAttrs::default()
            },
        ),
        field(
            "code",
            "code",
            Option::<String>::type_spec(),
            None,
            None,
            FieldAttrs {
                one_of: Some(vec![str_value("A"), str_value("B")]),
                ..FieldAttrs::default()
            },
        ),
        field(
            "count",
            "count",
            u32::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
        field(
            "ratio",
            "ratio",
            f32::type_spec(),
            None,
            Some("share"),
            FieldAttrs {
                bounds: NumberBounds {
                    minimum: Some(int(0)),
                    maximum: Some(int(1)),
                    ..NumberBounds::default()
                },
                ..FieldAttrs::default()
            },
        ),
        field(
            "level",
            "level",
            i8::type_spec(),
            None,
            None,
            FieldAttrs {
                bounds: NumberBounds {
                    exclusive_minimum: Some(float(-200.5)),
                    exclusive_maximum: Some(int(10)),
                    ..NumberBounds::default()
                },
                ..FieldAttrs::default()
            },
        ),
        field(
            "active",
            "active",
            bool::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
        field(
            "scores",
            "scores",
            Option::<Vec<u8>>::type_spec(),
            None,
            None,
            FieldAttrs {
                bounds: NumberBounds {
                    maximum: Some(int(100)),
                    ..NumberBounds::default()
                },
                max_len: Some(3),
                ..FieldAttrs::default()
            },
        ),
        field(
            "server",
            "server",
            TypeSpec::External(ExternalRef::of::<std::net::Ipv4Addr>()),
            None,
            None,
            FieldAttrs::default(),
        ),
        field(
            "currencies",
            "currencies",
            Vec::<Currency>::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
    ],
    vec![Rule::AtLeastOne(vec!["code".into(), "scores".into()])],
    &["check_policy"],
    &["internal_id"],
));

/// A recursive contract.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Node {
    pub name: String,
    pub children: Vec<Node>,
    pub parent: Option<Box<Node>>,
}

contract!(Node, || object_spec(
    "Node",
    None,
    vec![
        field(
            "name",
            "name",
            String::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
        field(
            "children",
            "children",
            Vec::<Node>::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
        field(
            "parent",
            "parent",
            Option::<Box<Node>>::type_spec(),
            None,
            None,
            FieldAttrs::default()
        ),
    ],
    vec![],
    &[],
    &[],
));

/// A contract that holds a recursive one.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Tree {
    pub root: Node,
}

contract!(Tree, || object_spec(
    "Tree",
    None,
    vec![field(
        "root",
        "root",
        Node::type_spec(),
        Some("The top node."),
        None,
        FieldAttrs::default()
    )],
    vec![],
    &[],
    &[],
));
