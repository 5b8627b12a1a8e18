//! Where a checked value sits: a [`Path`] kept on the stack while the checker walks, turned into
//! a JSON pointer or a message's name only when a violation is reported.

use std::fmt::{self, Write as _};

use super::violation::push_segment;

/// Where a value sits, kept on the stack; turned into a JSON pointer or a display name only
/// when a violation is reported.
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
    /// The checked value: its pointer and the contract's name.
    Root(&'a str, &'a str),
    /// A key of an object.
    Key(&'a Path<'a>, &'a str),
    /// An item of an array.
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    pub(super) fn pointer(&self) -> String {
        // Room for most pointers, so that the pushes do not grow it.
        let mut out = String::with_capacity(32);
        self.write_pointer(&mut out);
        out
    }

    /// [`Path::pointer`], pushed onto `out`.
    fn write_pointer(&self, out: &mut String) {
        match self {
            Path::Root(pointer, _) => out.push_str(pointer),
            Path::Key(parent, key) => {
                parent.write_pointer(out);
                push_segment(out, key);
            }
            Path::Index(parent, i) => {
                parent.write_pointer(out);
                // Writing to a `String` cannot fail.
                let _ = write!(out, "/{i}");
            }
        }
    }

    /// The name messages use: `low`, `items[2]`, or the contract's name for the root.
    pub(super) fn label(&self) -> Label<'_> {
        Label(self)
    }

    /// [`Path::label`], written into `out`.
    pub(super) fn write_label(&self, out: &mut impl fmt::Write) -> fmt::Result {
        match self {
            Path::Root(_, name) => out.write_str(name),
            Path::Key(_, key) => out.write_str(key),
            Path::Index(parent, i) => {
                parent.write_label(out)?;
                write!(out, "[{i}]")
            }
        }
    }
}

/// [`Path::label`], written straight into a message.
pub(super) struct Label<'p>(&'p Path<'p>);

impl fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_label(f)
    }
}
