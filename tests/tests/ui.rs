//! Mistakes in `#[derive(Contract)]` are compile errors at the exact token.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
