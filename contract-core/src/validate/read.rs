//! A reader for the JSON that model output nearly always is, one object of scalars, onto the
//! stack (`from_json`'s fast path, `flat.rs`); whatever it is not sure of, it leaves to
//! serde_json.
//!
//! Why hand-written (the rules ask for a measured reason): serde_json reads the bench's 10,000
//! `Guidance` documents (60 bytes each) into `from_json`'s borrowed tree in 155-165 ns a
//! document, most of it the visitor's calls and the tree's allocation; this reader takes 87-89
//! on the same documents, with no allocation (a temporary timing loop over the bench's
//! documents, 2026-12-04, Intel Xeon). `from_json` on the valid documents went from 283 to 162
//! ns with it and the flat path (medians of ten alternated runs of `cargo bench -p
//! contract-core --bench from_json`, `docs/benchmarks.md`). A reader of the full grammar into
//! the same tree, tried first, was not faster than serde_json (168-171 against 161-165 ns: its
//! recursion moves each value through the stack), so nested documents stay with serde_json.
//!
//! What it reads: `{`, then keys and scalar values: `null`, `true`, `false`, strings without
//! escapes or control characters, numbers. A number is read as serde_json reads it (built with
//! the `float_roundtrip` feature, as this workspace does): an integer without fraction or
//! exponent is a `u64` (a negative one an `i64`); one with a fraction or exponent an `f64`,
//! correctly rounded. Anything else (a nested value, an escape, `-0`, an integer of more than 18
//! digits, a float out of range, a syntax error) gives `None`, and `from_json` reads the text
//! with serde_json, which then gives its tree or its error message. Tests hold the reader to
//! serde_json's values on every document it accepts.
//!
//! [`tree`] reads the whole grammar (nesting, escapes) with the same scanner into the borrowed
//! [`Doc`], each number with its literal text: `from_json_in` reads a reply once with it and
//! gives the one tree to the grounding check (which compares numbers by their literal) and to
//! the validator. serde_json gives no number's text without its `arbitrary_precision` feature,
//! which would change every `Number` in the workspace; a walk of `RawValue`s re-reads each
//! nested value once per level. What `tree` leaves (the same numbers as [`flat`], a lone
//! surrogate, nesting deeper than [`MAX_DEPTH`], any syntax error) goes to serde_json as before.

use std::borrow::Cow;

use serde_json::Number;

use super::doc::{Doc, Entries, Scalar};

/// The deepest nesting [`tree`] reads; deeper text is left to serde_json (which refuses 128).
const MAX_DEPTH: usize = 100;

/// `text` as one object whose values are all scalars (the shape of most contracts' output), its
/// entries in document order; `None` for anything else, or where serde_json should read it.
/// The entries are pushed onto `entries` (given by the caller so that they are not moved).
///
/// `keys` are the keys expected, in order (the plan's fields): the key of entry `i` is first
/// compared with `keys[i]` whole, which is cheaper than scanning it byte by byte for its
/// closing quote; the entries whose key matched so are returned as bits, and their key is the
/// expected name itself: the same string the scan would read ([`Key::new`] takes no name that
/// the scan would read otherwise).
pub(crate) fn flat<'a>(text: &'a str, entries: &mut Entries<'a>, keys: &[Key]) -> Option<u64> {
    let mut reader = Reader { text, pos: 0 };
    let mut matched = 0u64;
    if !reader.eat(b'{') {
        return None;
    }
    if !reader.eat(b'}') {
        loop {
            reader.skip_space();
            if reader.peek()? != b'"' {
                return None;
            }
            let i = entries.len();
            let key = match keys.get(i) {
                // The bits hold 64 entries (a plan has at most 64 fields).
                Some(expected) if i < 64 && reader.key_is(expected) => {
                    matched |= 1 << i;
                    reader.key(expected)
                }
                _ => reader.string()?,
            };
            if !reader.eat(b':') {
                return None;
            }
            let value = reader.scalar()?;
            entries.push((key, value));
            reader.skip_space();
            match reader.peek()? {
                b',' => reader.pos += 1,
                b'}' => {
                    reader.pos += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    reader.skip_space();
    (reader.pos == text.len()).then_some(matched)
}

/// `text` as one JSON value, every number with its literal text; `None` for anything the
/// reader leaves to serde_json (see the module comment). The tree is serde_json's otherwise:
/// the same strings, the same numbers, repeated keys kept in order.
pub(crate) fn tree(text: &str) -> Option<Doc<'_>> {
    let mut reader = Reader { text, pos: 0 };
    let doc = reader.value(0)?;
    reader.skip_space();
    (reader.pos == text.len()).then_some(doc)
}

/// A key [`flat`] expects: a name and, when the name and its closing quote fit in 8 bytes, both
/// as one little-endian word with the mask of their bytes, compared with 8 bytes of the text
/// at once. Why (the rules ask for a measured reason): comparing a key of the bench's
/// documents by slice called `memcmp` four times a document, 6% of `from_json`'s samples in
/// `peers validate` under `perf`.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    name: &'static str,
    /// The name and its closing quote, little-endian (0 when `mask` is 0).
    word: u64,
    /// Ones over the bytes of `word` that count; 0 when the name is 8 bytes or longer.
    mask: u64,
}

impl Key {
    /// The key `name`, or `None` where the scan would read the text otherwise: a name with a
    /// quote, a backslash or a control character, which [`Reader::string`] stops at or
    /// refuses.
    pub(crate) fn new(name: &'static str) -> Option<Key> {
        if name.bytes().any(|b| matches!(b, b'"' | b'\\' | 0..=0x1f)) {
            return None;
        }
        let (mut word, mut mask) = (0u64, 0u64);
        if name.len() < 8 {
            for (i, b) in name.bytes().chain([b'"']).enumerate() {
                word |= u64::from(b) << (8 * i);
                mask |= 0xff << (8 * i);
            }
        }
        Some(Key { name, word, mask })
    }
}

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    #[inline]
    fn skip_space(&mut self) {
        let bytes = self.text.as_bytes();
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Skips white space, then takes `byte` if it comes next.
    #[inline]
    fn eat(&mut self, byte: u8) -> bool {
        // `byte` is most often right there, with no space to skip.
        if self.peek() != Some(byte) {
            self.skip_space();
            if self.peek() != Some(byte) {
                return false;
            }
        }
        self.pos += 1;
        true
    }

    /// A scalar (not an array or object), white space skipped before it.
    #[inline(always)]
    fn scalar(&mut self) -> Option<Scalar<'a>> {
        self.skip_space();
        match self.peek()? {
            b'"' => self.string().map(Scalar::String),
            b'n' => self.word("null").map(|()| Scalar::Null),
            b't' => self.word("true").map(|()| Scalar::Bool(true)),
            b'f' => self.word("false").map(|()| Scalar::Bool(false)),
            b'-' | b'0'..=b'9' => self.number().map(Scalar::Number),
            _ => None,
        }
    }

    /// Any value, white space skipped before it, nested `depth` deep.
    fn value(&mut self, depth: usize) -> Option<Doc<'a>> {
        self.skip_space();
        Some(match self.peek()? {
            b'"' => Doc::String(self.escaped()?),
            b'n' => self.word("null").map(|()| Doc::Null)?,
            b't' => self.word("true").map(|()| Doc::Bool(true))?,
            b'f' => self.word("false").map(|()| Doc::Bool(false))?,
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                let n = self.number()?;
                Doc::Number(n, self.text.get(start..self.pos))
            }
            b'[' if depth < MAX_DEPTH => {
                self.pos += 1;
                let mut items = Vec::new();
                if !self.eat(b']') {
                    loop {
                        items.push(self.value(depth + 1)?);
                        if !self.more(b']')? {
                            break;
                        }
                    }
                }
                Doc::Array(items)
            }
            b'{' if depth < MAX_DEPTH => {
                self.pos += 1;
                let mut entries = Vec::with_capacity(8);
                if !self.eat(b'}') {
                    loop {
                        self.skip_space();
                        if self.peek()? != b'"' {
                            return None;
                        }
                        let key = self.escaped()?;
                        if !self.eat(b':') {
                            return None;
                        }
                        entries.push((key, self.value(depth + 1)?));
                        if !self.more(b'}')? {
                            break;
                        }
                    }
                }
                Doc::Object(entries)
            }
            _ => return None,
        })
    }

    /// After an item of an array or object closed by `close`: `true` past a comma (another
    /// item comes), `false` past `close`, `None` for anything else.
    #[inline]
    fn more(&mut self, close: u8) -> Option<bool> {
        self.skip_space();
        let next = self.peek()?;
        self.pos += 1;
        match next {
            b',' => Some(true),
            b if b == close => Some(false),
            _ => None,
        }
    }

    /// A string at `pos` (on its opening quote), escapes read as serde_json reads them:
    /// borrowed from the text when it has none.
    fn escaped(&mut self) -> Option<Cow<'a, str>> {
        let bytes = self.text.as_bytes();
        let start = self.pos + 1;
        let mut at = start;
        loop {
            match *bytes.get(at)? {
                b'"' => {
                    self.pos = at + 1;
                    // Both ends sit next to an ASCII byte, so on character boundaries.
                    return self.text.get(start..at).map(Cow::Borrowed);
                }
                b'\\' => break,
                0..=0x1f => return None,
                _ => at += 1,
            }
        }
        let mut out = String::with_capacity(at - start + 8);
        out.push_str(self.text.get(start..at)?);
        loop {
            match *bytes.get(at)? {
                b'"' => {
                    self.pos = at + 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    let c = match *bytes.get(at + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let high = hex4(bytes.get(at + 2..at + 6)?)?;
                            at += 4;
                            match high {
                                0xD800..=0xDBFF => {
                                    // Only a pair; a lone half is serde_json's to report.
                                    if bytes.get(at + 2..at + 4)? != b"\\u" {
                                        return None;
                                    }
                                    let low = hex4(bytes.get(at + 4..at + 8)?)?;
                                    if !(0xDC00..=0xDFFF).contains(&low) {
                                        return None;
                                    }
                                    at += 6;
                                    char::from_u32(
                                        0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00),
                                    )?
                                }
                                0xDC00..=0xDFFF => return None,
                                _ => char::from_u32(high)?,
                            }
                        }
                        _ => return None,
                    };
                    out.push(c);
                    at += 2;
                }
                0..=0x1f => return None,
                _ => {
                    let run = at;
                    while let Some(&b) = bytes.get(at) {
                        if b == b'"' || b == b'\\' || b < 0x20 {
                            break;
                        }
                        at += 1;
                    }
                    out.push_str(self.text.get(run..at)?);
                }
            }
        }
    }

    #[inline(always)]
    fn word(&mut self, word: &str) -> Option<()> {
        let end = self.pos + word.len();
        if self.text.as_bytes().get(self.pos..end)? == word.as_bytes() {
            self.pos = end;
            Some(())
        } else {
            None
        }
    }

    /// Whether the string at `pos` (on its opening quote) is `key`'s name, closed right after
    /// it.
    #[inline]
    fn key_is(&self, key: &Key) -> bool {
        let bytes = self.text.as_bytes();
        let start = self.pos + 1;
        if key.mask != 0 {
            if let Some(Ok(chunk)) = bytes.get(start..start + 8).map(<[u8; 8]>::try_from) {
                return (u64::from_le_bytes(chunk) ^ key.word) & key.mask == 0;
            }
        }
        let end = start + key.name.len();
        bytes.get(start..end) == Some(key.name.as_bytes()) && bytes.get(end) == Some(&b'"')
    }

    /// The key [`Reader::key_is`] found: taken, its closing quote too. The entry's key is the
    /// name itself, the same bytes, so that the text is not sliced (`str` slicing checks both
    /// ends for character boundaries: 3% of `from_json`'s samples in `peers validate`).
    #[inline]
    fn key(&mut self, key: &Key) -> &'static str {
        self.pos += key.name.len() + 2;
        key.name
    }

    /// A string at `pos` (on its opening quote), without escapes or control characters.
    fn string(&mut self) -> Option<&'a str> {
        let bytes = self.text.as_bytes();
        let start = self.pos + 1;
        let mut end = start;
        loop {
            match *bytes.get(end)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => end += 1,
            }
        }
        self.pos = end + 1;
        // Both ends sit next to an ASCII quote, so on character boundaries.
        self.text.get(start..end)
    }

    /// Reads the digits from `pos` into `value` (times ten and plus each; wrapping, so only
    /// read it when there were few); returns how many there were.
    #[inline]
    fn digits(&mut self, value: &mut u64) -> usize {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        while let Some(&byte) = bytes.get(self.pos) {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                break;
            }
            *value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
            self.pos += 1;
        }
        self.pos - start
    }

    /// A number in JSON's grammar, read as serde_json reads it. Inlined into both readers:
    /// left to the compiler once [`tree`] called it too, [`flat`] lost 15% on the bench's
    /// valid documents (`cargo bench -p contract-core --bench from_json`, 175 against 152 ns).
    #[inline(always)]
    fn number(&mut self) -> Option<Number> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let negative = bytes[start] == b'-';
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        // The digits before and after the point, as one integer.
        let mut digits = 0u64;
        let int_digits = self.digits(&mut digits);
        // No leading zero (serde_json refuses `01`), at least one digit.
        if int_digits == 0 || (int_digits > 1 && bytes[int_start] == b'0') {
            return None;
        }
        let mut fraction = 0;
        let mut exponent = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            fraction = self.digits(&mut digits);
            if fraction == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits(&mut 0) == 0 {
                return None;
            }
            exponent = true;
        }
        if fraction > 0 || exponent {
            // Clinger's fast path: with at most 15 digits in all (below 2^53) and no exponent,
            // the digits and the power of ten are exact floats, so one division rounds
            // correctly, as serde_json's `float_roundtrip` does.
            let value = if !exponent && int_digits + fraction <= 15 {
                // Below 10^15, so an `i64`, which converts in one instruction (a `u64` takes
                // several on x86-64).
                let magnitude = digits as i64 as f64 / POW10[fraction];
                if negative {
                    -magnitude
                } else {
                    magnitude
                }
            } else {
                self.text[start..self.pos].parse().ok()?
            };
            // Out of range (`1e999`) is serde_json's error to report.
            return if value.is_finite() {
                Number::from_f64(value)
            } else {
                None
            };
        }
        // Up to 18 digits always fit; longer ones (and `-0`, a float in serde_json) are left
        // to serde_json.
        if int_digits > 18 {
            return None;
        }
        if !negative {
            Some(Number::from(digits))
        } else if digits == 0 {
            None
        } else {
            // Fewer than 19 digits: below 2^63.
            i64::try_from(digits).ok().map(|m| Number::from(-m))
        }
    }
}

/// Four hexadecimal digits (either case) as a number.
fn hex4(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        Some(n * 16 + u32::from(v))
    })
}

/// Powers of ten up to 10^15, exact as floats.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A number as serde_json reads it, or the reader: its kind and bits.
    fn shape(n: &Number) -> String {
        match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => format!("u{u}"),
            (None, Some(i), _) => format!("i{i}"),
            (None, None, Some(f)) => format!("f{:x}", f.to_bits()),
            _ => "?".into(),
        }
    }

    fn scalar(value: &serde_json::Value) -> String {
        match value {
            serde_json::Value::Number(n) => shape(n),
            other => other.to_string(),
        }
    }

    /// The reader's entries are serde_json's whenever it gives them; returns whether it did.
    fn agrees(text: &str) -> bool {
        let mut entries = Entries::new();
        if read(text, &mut entries).is_none() {
            return false;
        }
        // serde_json's own entries, repeated keys kept (a `Map` keeps the last one); it must
        // take the text too.
        let theirs = entries_of(text);
        let ours: Vec<String> = entries
            .iter()
            .map(|(k, v)| match v {
                Scalar::Null => format!("{k}=null"),
                Scalar::Bool(b) => format!("{k}={b}"),
                Scalar::Number(n) => format!("{k}={}", shape(n)),
                Scalar::String(s) => format!("{k}={}", serde_json::Value::from(*s)),
            })
            .collect();
        let theirs: Vec<String> = theirs
            .iter()
            .map(|(k, v)| format!("{k}={}", scalar(v)))
            .collect();
        assert_eq!(ours, theirs, "on {text:?}");
        true
    }

    /// An object's entries in document order, repeated keys kept, through serde_json.
    fn entries_of(text: &str) -> Vec<(String, serde_json::Value)> {
        struct Pairs(Vec<(String, serde_json::Value)>);
        impl<'de> serde::Deserialize<'de> for Pairs {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = Pairs;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("an object")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<Pairs, A::Error> {
                        let mut out = Vec::new();
                        while let Some(entry) = map.next_entry()? {
                            out.push(entry);
                        }
                        Ok(Pairs(out))
                    }
                }
                d.deserialize_map(V)
            }
        }
        match serde_json::from_str::<Pairs>(text) {
            Ok(pairs) => pairs.0,
            Err(e) => panic!("serde_json refuses {text:?}: {e}"),
        }
    }

    fn read<'a>(text: &'a str, entries: &mut Entries<'a>) -> Option<()> {
        super::flat(text, entries, &[]).map(|_| ())
    }

    /// Each value as the only entry of an object.
    fn one(value: &str) -> String {
        format!("{{\"a\": {value}}}")
    }

    #[test]
    fn reads_plain_json_as_serde_json_does() {
        for text in [
            r#"{"quarter": 3, "year": 2024, "low": 7230.5, "high": 7650}"#,
            " {\t\"a\" :\r\n 1 ,\"b\":\"d é\",\"c\":true,\"d\":false,\"e\":null} ",
            "{}",
            "{\"a\":1,\"a\":2}",
        ] {
            assert!(agrees(text), "the reader left {text:?} to serde_json");
        }
        for value in [
            "0",
            "-1",
            "1e3",
            "1E-3",
            "2.5e+2",
            "-0.0",
            "0.1",
            "0.3",
            "-7230.55",
            "123456789.123456",
            "1234567890.123456",
            "0.000000000000001",
            "123456789012345678",
            "-123456789012345678",
            "9007199254740993.0",
            "1.7976931348623157e308",
            "4.9e-324",
            "1e-400",
            "\"\"",
            "\"x\"",
        ] {
            assert!(
                agrees(&one(value)),
                "the reader left {value:?} to serde_json"
            );
        }
    }

    #[test]
    fn leaves_the_rest_to_serde_json() {
        for text in [
            "",
            "{",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{} x",
            "[1]",
            "1",
            "{\"a\\u0062\":1}",
        ] {
            assert!(!agrees(text), "the reader took {text:?}");
        }
        for value in [
            "01",
            "-",
            "-0",
            "1.",
            ".5",
            "1e",
            "+1",
            "1e999",
            "1234567890123456789",
            "\"a\\nb\"",
            "\"tab\there\"",
            "nul",
            "truex",
            "NaN",
            "[1]",
            "{}",
        ] {
            assert!(!agrees(&one(value)), "the reader took {value:?}");
        }
    }

    proptest::proptest! {
        /// On any object built from JSON's pieces, the reader gives serde_json's entries or
        /// nothing.
        #[test]
        fn agrees_with_serde_json_on_any_mix(parts in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("{".to_owned()),
                proptest::strategy::Just("}".to_owned()),
                proptest::strategy::Just(",".to_owned()),
                proptest::strategy::Just(":".to_owned()),
                proptest::strategy::Just(" ".to_owned()),
                proptest::strategy::Just("null".to_owned()),
                proptest::strategy::Just("true".to_owned()),
                "\"[a-z\\\\\"é\n]{0,4}\"",
                "-?[0-9]{1,20}(\\.[0-9]{0,6})?([eE][-+]?[0-9]{1,3})?",
            ],
            0..16,
        )) {
            agrees(&format!("{{{}", parts.concat()));
        }

        /// Objects of well-formed entries, which the reader mostly takes.
        #[test]
        fn agrees_with_serde_json_on_objects(entries in proptest::collection::vec(
            (
                "[a-z]{1,3}",
                proptest::prop_oneof![
                    proptest::strategy::Just("null".to_owned()),
                    proptest::strategy::Just("false".to_owned()),
                    "\"[a-z é]{0,4}\"",
                    "-?(0|[1-9][0-9]{0,19})(\\.[0-9]{1,17})?([eE][-+]?[0-9]{1,3})?",
                ],
            ),
            0..6,
        )) {
            let body: Vec<String> =
                entries.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
            agrees(&format!("{{{}}}", body.join(", ")));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// The keys expected change nothing read: the same entries, or the same refusal; the
        /// bits returned are exactly the entries whose key is the name at their position.
        #[test]
        fn expected_keys_change_nothing_read(
            keys in proptest::collection::vec("[ab\\\\\"é]{0,3}", 0..5),
            names in proptest::collection::vec("[abé]{0,2}", 0..5),
            spaced in proptest::bool::ANY,
            value in proptest::prop_oneof![
                proptest::strategy::Just("1"),
                proptest::strategy::Just("123456789"),
            ],
        ) {
            let sep = if spaced { " " } else { "" };
            let body: Vec<String> =
                keys.iter().map(|k| format!("\"{k}\":{sep}{value}")).collect();
            let text = format!("{{{}}}", body.join(","));
            // Leaked: a key's name is `'static` (the plan's field names); a few bytes a case.
            let names: Vec<&'static str> =
                names.iter().map(|n| &*Box::leak(n.clone().into_boxed_str())).collect();
            let expected: Vec<Key> = names.iter().filter_map(|n| Key::new(n)).collect();
            let mut plain = Entries::new();
            let mut hinted = Entries::new();
            let without = super::flat(&text, &mut plain, &[]);
            let with = super::flat(&text, &mut hinted, &expected);
            proptest::prop_assert_eq!(without.is_some(), with.is_some(), "on {:?}", text);
            if let Some(bits) = with {
                proptest::prop_assert_eq!(&plain, &hinted);
                let want = hinted.iter().enumerate().fold(0u64, |bits, (i, (key, _))| {
                    if names.get(i) == Some(key) { bits | 1 << i } else { bits }
                });
                proptest::prop_assert_eq!(bits, want, "on {:?}", text);
                proptest::prop_assert_eq!(without, Some(0));
            }
        }
    }

    #[test]
    fn a_name_with_a_quote_backslash_or_control_is_no_key() {
        for name in ["quarter", "", "é-1", "a b", "eightchr", "a longer name"] {
            assert!(Key::new(name).is_some(), "{name:?}");
        }
        for name in ["a\"b", "a\\b", "a\nb", "\u{1f}"] {
            assert!(Key::new(name).is_none(), "{name:?}");
        }
    }

    /// Past 64 entries the keys are still read, only not reported as matched.
    #[test]
    fn more_than_64_expected_keys() {
        let names: Vec<&'static str> = (0..70)
            .map(|i| &*Box::leak(format!("k{i}").into_boxed_str()))
            .collect();
        let keys: Vec<Key> = names.iter().filter_map(|n| Key::new(n)).collect();
        let body: Vec<String> = names.iter().map(|n| format!("\"{n}\": 1")).collect();
        let text = format!("{{{}}}", body.join(", "));
        let mut entries = Entries::new();
        assert_eq!(super::flat(&text, &mut entries, &keys), Some(u64::MAX));
        assert_eq!(entries.len(), 70);
        assert_eq!(entries[69].0, "k69");
    }

    /// Names of 7 and 8 bytes (the last compared as one word, and the first too long for one),
    /// a name that is a prefix of the key and a key that is a prefix of the name, near the end
    /// of the text and far from it.
    #[test]
    fn keys_are_matched_whole() {
        let keys: Vec<Key> = ["quarter", "eightchr", "low", "hi"]
            .into_iter()
            .filter_map(Key::new)
            .collect();
        for (text, bits) in [
            (r#"{"quarter":1,"eightchr":2,"low":3,"hi":4}"#, 0b1111),
            (
                r#"{"quarter": 1, "eightchr": 2, "lower": 3, "h": 4}"#,
                0b0011,
            ),
            (
                r#"{"quarters":1,"eightchrs":2,"lo":3,"hi":4444444444}"#,
                0b1000,
            ),
            (r#"{"quarte":1,"eightch":2,"low":3,"hi":4}"#, 0b1100),
            (r#"{"quarter":1}"#, 0b0001),
            (r#"{"q":1,"eightchr":2}"#, 0b0010),
        ] {
            let mut entries = Entries::new();
            assert_eq!(super::flat(text, &mut entries, &keys), Some(bits), "{text}");
            let mut plain = Entries::new();
            assert_eq!(super::flat(text, &mut plain, &[]), Some(0), "{text}");
            assert_eq!(entries, plain, "{text}");
        }
    }

    /// The tree with its literals dropped (serde_json's tree has none).
    fn unwritten(doc: Doc<'_>) -> Doc<'_> {
        match doc {
            Doc::Number(n, _) => Doc::Number(n, None),
            Doc::Array(items) => Doc::Array(items.into_iter().map(unwritten).collect()),
            Doc::Object(entries) => Doc::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, unwritten(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    /// Every literal `tree` kept, in document order.
    fn literals<'a>(doc: &Doc<'a>, out: &mut Vec<&'a str>) {
        match doc {
            Doc::Number(_, literal) => out.push(literal.unwrap_or("?")),
            Doc::Array(items) => items.iter().for_each(|v| literals(v, out)),
            Doc::Object(entries) => entries.iter().for_each(|(_, v)| literals(v, out)),
            _ => {}
        }
    }

    /// Whether `tree` read `text`; where it did, its tree is serde_json's (repeated keys,
    /// escapes, numbers to the bit) and each number's literal reads back as that number.
    fn tree_agrees(text: &str) -> bool {
        let Some(ours) = tree(text) else {
            return false;
        };
        let mut written = Vec::new();
        literals(&ours, &mut written);
        for literal in written {
            let n: Number = serde_json::from_str(literal)
                .unwrap_or_else(|e| panic!("{literal:?} in {text:?}: {e}"));
            assert!(text.contains(literal), "{literal:?} in {text:?}");
            assert!(n.is_f64() || n.is_u64() || n.is_i64());
        }
        let theirs: Doc<'_> = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("serde_json refuses {text:?}: {e}"));
        let ours = unwritten(ours);
        assert_eq!(ours, theirs, "on {text:?}");
        // Bit for bit: `PartialEq` on `Number` compares floats as floats.
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "on {text:?}");
        true
    }

    #[test]
    fn the_tree_is_serde_jsons_with_the_literals() {
        for text in [
            r#"{"quarter": 3, "year": 2024, "low": 7230.50, "high": 4.14025e3}"#,
            r#"{"a": [1, -2, 2.5, true, null, [], {}], "b\n": "x", "c": {"d": "é\"", "d": 1}}"#,
            r#" [ {"quote": "a \"b\" \\ \/ \b\f\n\r\t \u00e9 \u0000 \ud83d\ude00 z"} , "" ] "#,
            r#""just a string""#,
            "12",
            "-7.5e-3",
            "null",
            "[[[[[[1]]]]]]",
            r#"{"k": {"span": {"start_line": 3, "end_line": 4, "quote": "x"}}, "n": 0.1}"#,
        ] {
            assert!(tree_agrees(text), "the reader left {text:?} to serde_json");
        }
        let Some(doc) = tree(r#"{"low": 4065.50, "xs": [1, -2e3]}"#) else {
            panic!("not read")
        };
        let mut written = Vec::new();
        literals(&doc, &mut written);
        assert_eq!(written, ["4065.50", "1", "-2e3"]);
    }

    #[test]
    fn the_tree_leaves_the_rest_to_serde_json() {
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        let deep_enough = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(tree_agrees(&deep_enough));
        for text in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "[1 2]",
            "{} x",
            "nul",
            "\"a\\u12\"",
            "\"\\x\"",
            "\"\\ud83d\"",
            "\"\\ude00\"",
            "\"\\ud83d\\u0041\"",
            "\"tab\there\"",
            "01",
            "-0",
            "1e999",
            "12345678901234567890",
            deep.as_str(),
        ] {
            assert!(tree(text).is_none(), "{text:?}");
        }
    }

    /// A random JSON value (pieces of the grammar the reader reads, with random white space),
    /// from `state`.
    fn random_json(state: &mut u64, depth: usize, out: &mut String) {
        fn below(state: &mut u64, n: u64) -> u64 {
            *state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (*state >> 33) % n
        }
        let space = [" ", "", "\n ", "\t"];
        out.push_str(space[below(state, 4) as usize]);
        let pick = below(state, if depth > 3 { 8 } else { 10 });
        match pick {
            8 | 9 => {
                let (open, close) = if pick == 8 { ('[', ']') } else { ('{', '}') };
                out.push(open);
                let n = below(state, 4);
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    if pick == 9 {
                        let keys = ["\"k\"", "\"k\"", "\"a\\\"b\"", "\"\\u00e9\"", "\"\""];
                        out.push_str(keys[below(state, 5) as usize]);
                        out.push_str(space[below(state, 4) as usize]);
                        out.push(':');
                    }
                    random_json(state, depth + 1, out);
                }
                out.push_str(space[below(state, 4) as usize]);
                out.push(close);
            }
            _ => {
                let scalars = [
                    "1",
                    "-2.50",
                    "3e2",
                    "true",
                    "null",
                    "\"x y\"",
                    "0.1",
                    "\"\\n\\/\"",
                ];
                out.push_str(scalars[pick as usize]);
            }
        }
        out.push_str(space[below(state, 4) as usize]);
    }

    /// Random documents, and each with one byte cut: whatever the reader takes, serde_json
    /// reads the same; whatever it leaves, serde_json refuses (none of these is one of the
    /// numbers it leaves).
    #[test]
    fn random_documents_read_as_serde_json_reads_them() {
        let mut state = 0x5EED_u64;
        let (mut read, mut left) = (0, 0);
        for i in 0..5_000 {
            let mut text = String::new();
            random_json(&mut state, 0, &mut text);
            assert!(tree_agrees(&text), "the reader left {text:?} to serde_json");
            read += 1;
            // Cut one ASCII byte (every byte of these documents is ASCII but `é`'s escape).
            let at = i % text.len().max(1);
            if text.is_char_boundary(at) && text.is_char_boundary(at + 1) {
                let mut cut = text.clone();
                cut.remove(at);
                if !tree_agrees(&cut) {
                    assert!(
                        serde_json::from_str::<serde_json::Value>(&cut).is_err(),
                        "the reader left valid {cut:?} to serde_json"
                    );
                    left += 1;
                }
            }
        }
        assert!(read == 5_000 && left > 1_000, "{read} read, {left} left");
    }
}
