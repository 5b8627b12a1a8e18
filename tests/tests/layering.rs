//! `contract-core` has no import circle among its source files: `scripts/import_cycles.py` finds
//! none there, and finds the one a fixture crate is written with, so the check can fail.
//!
//! The script needs Python 3, as the model fetch does (`python3 -m pip download`).

use std::path::Path;
use std::process::{Command, Output};

fn import_cycles(crate_dir: &Path) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = root.join("scripts/import_cycles.py");
    Command::new("python3")
        .arg(&script)
        .arg(crate_dir)
        .output()
        .unwrap_or_else(|e| panic!("python3 {} did not start: {e}", script.display()))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_core_has_no_import_circle() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contract-core");
    let out = import_cycles(&core);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("no import circle"), "{said}");
}

#[test]
fn a_circle_is_found_and_fails_the_check() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/import-circle");
    let out = import_cycles(&fixture);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("circle 1: 2 files: a.rs, b.rs"), "{said}");
}
