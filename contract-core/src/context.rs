//! What a filled contract is read against: the document it came from.
//!
//! The model copies; code computes. Value types compute what the model must not be trusted to
//! write (a [`DateValue`](crate::DateValue)'s ISO date, an [`Amount`](crate::Amount)'s currency
//! code) from the text the model copied and from how the *document* writes things (day-first or
//! month-first dates, decimal commas, the currency it uses). A contract's own checks may need
//! the document too (is this guidance for a period after the one the release reports?). Both
//! get a [`DocContext`]: [`Contract::from_json`](crate::Contract::from_json) reads with an empty
//! one (no document: only what the value itself says), [`Contract::from_json_in`] and the
//! [`Extractor`](crate::Extractor) with the document.

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::ground::Numerals;
use crate::source::Source;

/// The document a filled contract is read against, and how it writes numbers and dates.
///
/// Cheap to build: the document's conventions are detected on first use.
///
/// ```
/// use contract_core::{DocContext, Source};
///
/// let source = Source::from_text("Total: 1.234,50 EUR\nFecha: 19/10/2018");
/// let cx = DocContext::of(&source);
/// assert!(cx.source().is_some());
/// assert!(DocContext::none().source().is_none());
/// ```
#[derive(Debug, Default)]
pub struct DocContext<'a> {
    source: Option<&'a Source>,
    text: OnceLock<String>,
    numerals: OnceLock<Numerals>,
}

impl<'a> DocContext<'a> {
    /// No document: values are read from what they say alone.
    pub fn none() -> DocContext<'static> {
        DocContext {
            source: None,
            text: OnceLock::new(),
            numerals: OnceLock::new(),
        }
    }

    /// The document `source`.
    pub fn of(source: &'a Source) -> DocContext<'a> {
        DocContext {
            source: Some(source),
            text: OnceLock::new(),
            numerals: OnceLock::new(),
        }
    }

    /// The document, when there is one.
    pub fn source(&self) -> Option<&'a Source> {
        self.source
    }

    /// The document's text (lines joined with `\n`), empty without a document.
    pub fn text(&self) -> Cow<'_, str> {
        match self.source {
            Some(s) => Cow::Borrowed(self.text.get_or_init(|| s.text()).as_str()),
            None => Cow::Borrowed(""),
        }
    }

    /// How the document writes numbers ([`Source::numerals`]); a decimal point without a
    /// document.
    pub fn numerals(&self) -> Numerals {
        *self
            .numerals
            .get_or_init(|| self.source.map_or(Numerals::Point, |s| s.numerals()))
    }
}
