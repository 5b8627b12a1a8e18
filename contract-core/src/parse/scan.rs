//! Locating objects in text in one pass.

/// The outermost balanced `{ .. }` spans of `s` (braces inside double-quoted strings within a
/// span do not count), in order, as `(start, end)` byte ranges with `end` past the `}`.
///
/// Spans after a `{` that never closes are left out: they may be members of a truncated object
/// (`{"a": {"b": 2}`), which the repair level reads whole. A stray `}` outside any span is
/// ignored. One pass, O(len).
pub(crate) fn outermost_objects(s: &str) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut open: Vec<usize> = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in b.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        match c {
            b'"' if !open.is_empty() => in_string = true,
            b'{' => open.push(i),
            b'}' => {
                if let Some(start) = open.pop() {
                    // A span that encloses earlier spans replaces them.
                    while spans.last().is_some_and(|&(s, _)| s > start) {
                        spans.pop();
                    }
                    spans.push((start, i + 1));
                }
            }
            _ => {}
        }
    }
    if let Some(&unclosed) = open.first() {
        spans.retain(|&(start, _)| start < unclosed);
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        let s = r#"a {"x": "}"} b {"y": {"z": 1}} {"#;
        let got: Vec<&str> = outermost_objects(s)
            .iter()
            .map(|&(a, b)| &s[a..b])
            .collect();
        assert_eq!(got, [r#"{"x": "}"}"#, r#"{"y": {"z": 1}}"#]);
        assert!(outermost_objects(r#"{"a": {"b": 2}"#).is_empty());
        assert!(outermost_objects(&"{".repeat(10_000)).is_empty());
    }
}
