//! The README's library examples are `src/bin/quickstart.rs` and `src/bin/stream.rs` as they
//! stand (the example binaries compile with the crate; this checks the README shows them
//! unchanged).

const README: &str = include_str!("../../README.md");

/// The part of `source` between its `// README:begin` and `// README:end` lines.
fn shown(source: &str) -> &str {
    let begin = source.find("// README:begin\n").expect("begin marker") + "// README:begin\n".len();
    let end = source.find("// README:end").expect("end marker");
    &source[begin..end]
}

#[test]
fn the_readme_shows_the_quickstart_binary() {
    let shown = shown(include_str!("../src/bin/quickstart.rs"));
    assert!(
        README.contains(&format!("```rust,no_run\n{shown}```")),
        "README.md does not show examples/src/bin/quickstart.rs between its markers"
    );
    assert!(README.contains("cargo run --release -p examples --bin quickstart"));
}

#[test]
fn the_readme_shows_the_stream_binary() {
    let shown = shown(include_str!("../src/bin/stream.rs"));
    assert!(shown.contains(".stream("), "the example streams");
    assert!(
        README.contains(&format!("```rust,no_run\n{shown}```")),
        "README.md does not show examples/src/bin/stream.rs between its markers"
    );
    assert!(README.contains("cargo run --release -p examples --bin stream"));
}
