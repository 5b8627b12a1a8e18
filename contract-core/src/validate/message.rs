//! The validators' messages: `message!` (`format!` into a buffer the size of a typical
//! message), [`Text`] (a message written piece by piece), and how a message shows a value, a
//! number, a string, a list of names or values, an integer type.

use std::fmt::{self, Write as _};

use serde_json::{Number, Value};

use super::doc::{Json, View};
use super::path::Path;

/// `format!` into a buffer the size of a typical message: `format!` starts from the length of
/// the literal pieces and grows as the arguments come, a reallocation or two per message.
macro_rules! message {
    ($($arg:tt)*) => {{
        let mut text = String::with_capacity(96);
        // Writing to a `String` cannot fail.
        let _ = ::std::fmt::Write::write_fmt(&mut text, format_args!($($arg)*));
        text
    }};
}

/// A message written piece by piece with `push_str`, for the messages refused model output
/// gets most (bounds, types, unknown, missing and repeated keys, a comparison rule).
/// `message!` runs `core::fmt::write` over a template, which costs more than the pieces: with
/// these, `from_json` on the bench's out-of-range documents runs 10% fewer instructions
/// (callgrind, 442.9 to 399.6 million, 2026-12-04).
pub(super) struct Text(String);

impl Text {
    pub(super) fn new() -> Text {
        Text(String::with_capacity(96))
    }

    #[inline]
    pub(super) fn s(mut self, piece: &str) -> Text {
        self.0.push_str(piece);
        self
    }

    /// The path's [`Path::label`].
    #[inline]
    pub(super) fn label(mut self, path: &Path<'_>) -> Text {
        // Writing to a `String` cannot fail.
        let _ = path.write_label(&mut self.0);
        self
    }

    /// A JSON number as serde_json displays it ([`write_number`]).
    #[inline]
    pub(super) fn number(mut self, value: &Number) -> Text {
        // Writing to a `String` cannot fail.
        let _ = write_number(&mut self.0, value);
        self
    }

    /// An integer bound.
    #[inline]
    pub(super) fn int(mut self, value: i128) -> Text {
        self.0.push_str(itoa::Buffer::new().format(value));
        self
    }

    /// [`write_value`] of `value`.
    #[inline]
    pub(super) fn value<J: Json>(mut self, value: &J, as_scalar: bool) -> Text {
        let _ = write_value(&mut self.0, value, as_scalar);
        self
    }

    /// Names as [`list_names`] writes them.
    pub(super) fn names<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Text {
        push_names(&mut self.0, names);
        self
    }

    pub(super) fn done(self) -> String {
        self.0
    }
}

/// A scalar as JSON text, long strings cut, written straight into a message.
pub(super) fn scalar<J: Json>(value: &J) -> Describe<'_, J> {
    Describe(value, true)
}

/// [`write_value`] as `Display`.
pub(super) struct Describe<'v, J>(&'v J, bool);

impl<J: Json> fmt::Display for Describe<'_, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_value(f, self.0, self.1)
    }
}

/// A value for a message: with `as_scalar`, a scalar as JSON text (long strings cut); without,
/// a short description (`a string ("..")`, `an array`).
fn write_value<J: Json>(out: &mut impl fmt::Write, value: &J, as_scalar: bool) -> fmt::Result {
    match value.view() {
        View::Null => out.write_str("null"),
        View::Bool(b) => out.write_str(if b { "true" } else { "false" }),
        View::Number(n) => write_number(out, n),
        View::String(s) if as_scalar => write_quoted(out, s),
        View::String(s) => {
            out.write_str("a string (")?;
            write_quoted(out, s)?;
            out.write_str(")")
        }
        View::Array(_) => out.write_str("an array"),
        View::Object(_) => out.write_str("an object"),
    }
}

/// `n` as serde_json's `Display` writes it (and so `Value::to_string`): an integer through
/// itoa, a float through zmij's shortest round-trip form, the two calls serde_json's own
/// `Display for Number` makes. Why not `write!(out, "{n}")` (the rules ask for a measured
/// reason): an out-of-range message shows two numbers, and `core::fmt`'s machinery around
/// serde_json's `Display` took about 270 of the 3,102 instructions `from_json` ran on an
/// out-of-range bench document; written so, 2,930 (callgrind, 2026-12-05). A test holds the two
/// to the same text for any integer and float.
fn write_number(out: &mut impl fmt::Write, n: &Number) -> fmt::Result {
    if let Some(u) = n.as_u64() {
        out.write_str(itoa::Buffer::new().format(u))
    } else if let Some(i) = n.as_i64() {
        out.write_str(itoa::Buffer::new().format(i))
    } else if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
        out.write_str(zmij::Buffer::new().format_finite(f))
    } else {
        // Not reached without serde_json's `arbitrary_precision` (a `Number` is an integer or
        // a finite float); its own `Display` then.
        write!(out, "{n}")
    }
}

/// How many characters of a string a message quotes before cutting it (with `…`).
const QUOTED_MAX: usize = 60;

/// `s` as a JSON string (as `Value::String` writes it), cut after [`QUOTED_MAX`] characters.
pub(super) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(4 * QUOTED_MAX) + 8);
    // Writing to a `String` cannot fail.
    let _ = write_quoted(&mut out, s);
    out
}

/// [`quoted`], written into `out`. A string with nothing to escape (no quote, backslash or
/// control character: the only characters serde_json escapes) is written between quotes as it
/// is, the text serde_json gives it, without building a `String` first; any other goes through
/// serde_json. Measured reason: on the bench's type-mismatch documents (a string for a number)
/// `from_json` ran 3,299 instructions a document, 2,844 so (callgrind, 2026-12-05, with
/// [`write_number`]). A test holds it to serde_json's text of any string.
fn write_quoted(out: &mut impl fmt::Write, s: &str) -> fmt::Result {
    let (s, cut) = match s.char_indices().nth(QUOTED_MAX) {
        Some((at, _)) => (&s[..at], true),
        None => (s, false),
    };
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // A string always serializes.
        out.write_str(&serde_json::to_string(s).unwrap_or_default())?;
    } else {
        out.write_char('"')?;
        out.write_str(s)?;
        out.write_char('"')?;
    }
    if cut {
        out.write_char('…')?;
    }
    Ok(())
}

/// `one_of` values as the message lists them: strings bare, others as JSON, in backticks.
pub(super) fn list_values(values: &[Value]) -> String {
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        // Writing to a `String` cannot fail.
        let _ = match v {
            Value::String(s) => write!(out, "{sep}`{s}`"),
            other => write!(out, "{sep}`{other}`"),
        };
    }
    out
}

pub(super) fn list_names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    push_names(&mut out, names);
    out
}

/// [`list_names`], pushed onto `out`.
fn push_names<'a>(out: &mut String, names: impl IntoIterator<Item = &'a str>) {
    for (i, name) in names.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('`');
        out.push_str(name);
        out.push('`');
    }
}

/// The Rust integer type with these bounds, for messages.
pub(super) fn integer_type_name(min: i128, max: i128) -> Option<&'static str> {
    Some(match (min, max) {
        (-128, 127) => "i8",
        (-32_768, 32_767) => "i16",
        (-2_147_483_648, 2_147_483_647) => "i32",
        (-9_223_372_036_854_775_808, 9_223_372_036_854_775_807) => "i64",
        (0, 255) => "u8",
        (0, 65_535) => "u16",
        (0, 4_294_967_295) => "u32",
        (0, 18_446_744_073_709_551_615) => "u64",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn quoted_strings_are_json_strings_cut_at_60_characters() {
        let long = "é".repeat(70);
        for s in [
            "",
            "plain",
            "a\"b\\c",
            "tab\tnew\nline\u{1}",
            "é€😀",
            long.as_str(),
        ] {
            assert_eq!(super::quoted(s), quoted_by_serde_json(s));
        }
    }

    /// [`super::quoted`] as it was written before it wrote plain strings itself: serde_json's
    /// text of the string, cut after 60 characters.
    fn quoted_by_serde_json(s: &str) -> String {
        match s.char_indices().nth(60) {
            Some((cut, _)) => format!("{}…", Value::String(s[..cut].to_owned())),
            None => Value::String(s.to_owned()).to_string(),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]

        /// Messages show a number as serde_json displays it, whichever kind it is.
        #[test]
        fn numbers_are_written_as_serde_json_displays_them(
            u in proptest::prelude::any::<u64>(),
            i in proptest::prelude::any::<i64>(),
            f in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL
                | proptest::num::f64::ZERO | proptest::num::f64::NEGATIVE,
            small in -1_000_000i64..1_000_000,
            scale in 0u32..8,
        ) {
            let decimal = small as f64 / 10f64.powi(scale as i32);
            use serde_json::Number;
            for n in [
                Number::from(u),
                Number::from(i),
                Number::from_f64(f).unwrap_or_else(|| Number::from(0)),
                Number::from_f64(decimal).unwrap_or_else(|| Number::from(0)),
            ] {
                let mut ours = String::new();
                super::write_number(&mut ours, &n).unwrap();
                proptest::prop_assert_eq!(ours, n.to_string());
            }
        }

        /// Quoted strings are serde_json's text of them, plain or with characters to escape,
        /// short or cut.
        #[test]
        fn quoted_strings_are_serde_jsons(
            s in proptest::string::string_regex("[a-z\"\\\\\t\n\u{1}\u{7f}é€😀 /]{0,80}").unwrap()
        ) {
            proptest::prop_assert_eq!(super::quoted(&s), quoted_by_serde_json(&s));
        }
    }
}
