//! JSON pointers in `$ref` fragments.

/// `segment` as it appears in a `$ref` fragment: pointer-escaped, then percent-encoded where a
/// URI fragment needs it (as schemars writes definition references).
pub(crate) fn encode_ref_segment(segment: &str) -> String {
    fn plain(byte: u8) -> bool {
        matches!(byte, b'!' | b'$' | b'&'..=b';' | b'=' | b'?'..=b'Z' | b'_' | b'a'..=b'z')
            && byte != b'/'
    }
    let mut out = String::new();
    for byte in segment.bytes() {
        match byte {
            b'~' => out.push_str("~0"),
            b'/' => out.push_str("~1"),
            b if plain(b) => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Decodes a `$ref` fragment pointer (`#/$defs/A%20B`) into its segments; `None` when it is not a
/// local fragment.
pub(crate) fn decode_ref(reference: &str) -> Option<Vec<String>> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let pointer = pointer.strip_prefix('/')?;
    pointer
        .split('/')
        .map(|segment| {
            let decoded = percent_decode(segment)?;
            Some(decoded.replace("~1", "/").replace("~0", "~"))
        })
        .collect()
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `#/$defs/<name>` as a `$ref`.
pub(crate) fn def_ref(name: &str) -> String {
    format!("#/$defs/{}", encode_ref_segment(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for name in [
            "Guidance",
            "Evidenced_for_Amount",
            "a/b~c",
            "A B",
            "Vec<String>",
        ] {
            let reference = def_ref(name);
            assert_eq!(
                decode_ref(&reference),
                Some(vec!["$defs".to_owned(), name.to_owned()])
            );
        }
        assert_eq!(decode_ref("#"), Some(vec![]));
        assert_eq!(decode_ref("http://x"), None);
    }
}
