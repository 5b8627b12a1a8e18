//! `docs/fields.md`, the field reference of the example contracts, is generated from the
//! contracts themselves; this test fails when it is stale.
//!
//! Regenerate with `UPDATE_DOCS=1 cargo test -p examples --test field_docs`.

use std::path::PathBuf;

use contract_core::Contract;
use examples::filings::ReleaseGuidance;
use examples::{Address, CoverageKind, Exclusions, FilingTable, Guidance, Policy};

fn section<C: Contract>() -> String {
    let mut s = C::docs_markdown().replace("\n# ", "\n## ");
    if let Some(rest) = s.strip_prefix("# ") {
        s = format!("## {rest}");
    }
    let signature = C::signature();
    format!(
        "{}\nSignature (what the prompt carries):\n\n```text\n{}\n```\n",
        s.trim_end(),
        signature.trim_end()
    )
}

fn generated() -> String {
    let mut out = String::from(
        "# Field reference of the example contracts\n\n\
         Generated from the contracts in `examples/src` by `cargo test -p examples --test field_docs`\n\
         (`UPDATE_DOCS=1` rewrites it). Do not edit by hand.\n\n",
    );
    for s in [
        section::<Guidance>(),
        section::<ReleaseGuidance>(),
        section::<Address>(),
        section::<CoverageKind>(),
        section::<Policy>(),
        section::<FilingTable>(),
        section::<Exclusions>(),
    ] {
        out.push_str(&s);
        out.push('\n');
    }
    out
}

#[test]
fn field_docs_are_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/fields.md");
    let want = generated();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).expect("write docs/fields.md");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/fields.md is stale or missing: rerun with UPDATE_DOCS=1 and commit it"
    );
}

#[test]
fn every_documented_field_of_release_guidance_is_in_the_docs() {
    let docs = generated();
    for field in ["period", "low", "high", "line"] {
        assert!(docs.contains(&format!("`{field}`")), "{field} missing");
    }
}
