//! Schema snapshots for the example contracts, meta-schema validation, the OpenAI strict rules,
//! and sample values checked against each schema.
//!
//! Regenerate the snapshot files with `UPDATE_SNAPSHOTS=1 cargo test -p contract-tests --test snapshots`.

use std::path::PathBuf;

use contract_core::{Contract, Violations};
use contract_tests::openai_rules;
use examples::{Address, CoverageKind, Exclusions, FilingTable, Guidance, Policy};
use serde_json::{json, Value};

fn snapshot(name: &str, content: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, content).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; run with UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    assert_eq!(
        expected, content,
        "snapshot {name} is stale; rerun with UPDATE_SNAPSHOTS=1 and review the diff"
    );
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("serialize") + "\n"
}

fn meta_valid(schema: &Value) {
    if let Err(e) = jsonschema::meta::validate(schema) {
        panic!(
            "schema does not validate against its meta-schema: {e}\n{}",
            pretty(schema)
        );
    }
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("schema compiles")
}

/// Every rendering of `C`, snapshotted and checked; `samples` must be accepted by both the
/// schema and `from_json`, `rejects` by both.
fn check_contract<C: Contract>(stem: &str, samples: &[Value], rejects: &[Value]) {
    let schema = <C as Contract>::json_schema();
    meta_valid(&schema);
    snapshot(&format!("{stem}.schema.json"), &pretty(&schema));
    let signature = C::signature();
    snapshot(&format!("{stem}.signature.txt"), &format!("{signature}\n"));
    snapshot(&format!("{stem}.md"), &C::docs_markdown());
    if let Ok(strict) = C::try_strict_schema() {
        if let Err(problems) = openai_rules::check(&strict) {
            panic!(
                "strict schema of {stem} breaks the OpenAI rules: {problems:?}\n{}",
                pretty(&strict)
            );
        }
        snapshot(&format!("{stem}.strict.json"), &pretty(&strict));
    }
    let v = validator(&schema);
    for sample in samples {
        assert!(v.is_valid(sample), "{stem}: schema rejects sample {sample}");
        let parsed: Result<C, Violations> = C::from_json(&sample.to_string());
        let parsed =
            parsed.unwrap_or_else(|e| panic!("{stem}: from_json rejects sample {sample}: {e}"));
        assert!(parsed.validate().is_ok());
    }
    for reject in rejects {
        assert!(
            !v.is_valid(reject),
            "{stem}: schema accepts bad sample {reject}"
        );
        assert!(
            C::from_json(&reject.to_string()).is_err(),
            "{stem}: from_json accepts {reject}"
        );
    }
}

fn span(a: u32, b: u32) -> Value {
    json!({"start_line": a, "end_line": b, "quote": null})
}

#[test]
fn guidance() {
    check_contract::<Guidance>(
        "guidance",
        &[
            json!({"quarter": 3, "year": 2024, "low": 7230.0, "high": 7650.0}),
            json!({"quarter": null, "year": null, "low": null, "high": null}),
        ],
        &[
            json!({"quarter": 5, "year": 2024, "low": 1.0, "high": 2.0}),
            json!({"quarter": 1, "year": 2024, "low": 0, "high": 2.0}),
            json!({"quarter": 1, "year": 2024, "low": 1.0}),
            json!({"quarter": 1, "year": 2024, "low": 1.0, "high": 2.0, "note": "x"}),
        ],
    );
}

#[test]
fn signature_is_short() {
    let compact = serde_json::to_string(&<Guidance as Contract>::json_schema()).unwrap();
    let signature = Guidance::signature();
    assert!(
        signature.len() * 100 <= compact.len() * 40,
        "signature is {} chars, compact schema {}: more than 40%",
        signature.len(),
        compact.len()
    );
    assert!(signature.starts_with(
        r#"{"quarter": integer 1-4 | null, "year": integer 2018-2030 | null, "low": number > 0 (USD millions) | null, "high": number > 0 (USD millions) | null}"#
    ), "{signature}");
}

#[test]
fn address() {
    check_contract::<Address>(
        "address",
        &[
            json!({"street": "Calle Mayor 5", "postal_code": "28013", "city": "Madrid", "country": "ES"}),
        ],
        &[json!({"street": "x", "postal_code": "28013", "city": "Madrid", "country": "Spain"})],
    );
}

#[test]
fn policy() {
    let amount = json!({"value": 12.5, "currency": "JPY", "unit": "million"});
    check_contract::<Policy>(
        "policy",
        &[json!({
            "policy_number": "PX-1",
            "coverage": "business_interruption",
            "premium": {"value": amount, "evidence": [span(4, 4)]},
            "limit_per_claim": null,
            "effective_date": "2024-01-01",
            "expiry_date": "2024-12-31",
            "signed": {"original": "15 December 2023"}
        })],
        &[json!({
            "policy_number": "PX-1",
            "coverage": "fire",
            "premium": {"value": amount, "evidence": []},
            "limit_per_claim": null,
            "effective_date": "2024-02-30",
            "expiry_date": "2024-12-31",
            "signed": null
        })],
    );
}

#[test]
fn table() {
    check_contract::<FilingTable>(
        "table",
        &[
            json!({"caption": "Revenue", "table": {"headers": ["Q", "USD"], "rows": [["Q1", "1.2"]]}, "evidence": [span(10, 14)]}),
        ],
        &[json!({"caption": null, "table": {"headers": [], "rows": []}, "evidence": []})],
    );
}

#[test]
fn exclusions() {
    check_contract::<Exclusions>(
        "exclusions",
        &[json!({"items": [
            {"value": "War", "evidence": [span(40, 40)]},
            {"value": "Flood", "evidence": [span(41, 41), span(88, 89)]}
        ]})],
        &[json!({"items": [{"value": 3, "evidence": [span(1, 1)]}]})],
    );
}

#[test]
fn enum_contract() {
    let schema = <CoverageKind as Contract>::json_schema();
    meta_valid(&schema);
    snapshot("coverage_kind.schema.json", &pretty(&schema));
    snapshot(
        "coverage_kind.signature.txt",
        &format!("{}\n", CoverageKind::signature()),
    );
    assert_eq!(
        CoverageKind::from_json(r#""liability""#).ok(),
        Some(CoverageKind::Liability)
    );
    let err = CoverageKind::from_json(r#""Liability""#).unwrap_err();
    assert_eq!(err.0[0].kind, contract_core::ViolationKind::EnumMismatch);
    assert!(
        CoverageKind::try_strict_schema().is_err(),
        "a strict root must be an object"
    );
}
