//! Contracts are schemars types: they nest inside other schemars types, and any schemars type
//! can be a contract field (`#[contract(json_schema)]`, see derive_smoke.rs).

use contract_core::Contract;
use examples::Guidance;
use serde_json::json;

#[derive(schemars::JsonSchema, serde::Serialize)]
#[allow(dead_code)]
struct Report {
    company: String,
    guidance: Option<Guidance>,
}

#[test]
fn a_contract_nests_in_a_schemars_type() {
    let schema = serde_json::to_value(schemars::schema_for!(Report)).unwrap();
    let guidance = &schema["$defs"]["Guidance"];
    assert_eq!(guidance["additionalProperties"], false);
    assert_eq!(guidance["properties"]["quarter"]["maximum"], 4);
    assert_eq!(guidance["x-rules"][0], "low <= high");
    // The nested definition is the contract's own schema body.
    let own = <Guidance as Contract>::json_schema();
    assert_eq!(guidance["properties"], own["properties"]);

    let validator = jsonschema::validator_for(&schema).unwrap();
    let good = json!({"company": "Acme", "guidance": {"quarter": 2, "year": 2025, "low": 1.0, "high": 2.0}});
    let bad = json!({"company": "Acme", "guidance": {"quarter": 9, "year": 2025, "low": 1.0, "high": 2.0}});
    assert!(validator.is_valid(&good));
    assert!(!validator.is_valid(&bad));
}
