//! String formats.

use crate::contract::Format;

/// Whether `text` is a valid `format` value.
pub fn format_ok(format: Format, text: &str) -> bool {
    let _ = (format, text);
    todo!()
}
