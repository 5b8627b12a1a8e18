//! The validators' messages: `message!`, `format!` into a buffer the size of a typical message.

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
