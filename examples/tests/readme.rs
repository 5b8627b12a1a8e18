//! The README's library example is `src/bin/quickstart.rs` as it stands (the example binary
//! compiles with the crate; this checks the README shows it unchanged).

#[test]
fn the_readme_shows_the_quickstart_binary() {
    let readme = include_str!("../../README.md");
    let source = include_str!("../src/bin/quickstart.rs");
    let begin = source.find("// README:begin\n").expect("begin marker") + "// README:begin\n".len();
    let end = source.find("// README:end").expect("end marker");
    let shown = &source[begin..end];
    assert!(
        readme.contains(&format!("```rust,no_run\n{shown}```")),
        "README.md does not show examples/src/bin/quickstart.rs between its markers"
    );
    assert!(readme.contains("cargo run --release -p examples --bin quickstart"));
}
