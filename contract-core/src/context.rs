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
use std::sync::{Arc, OnceLock};

use crate::ground::Numerals;
use crate::read::{self, Conventions, DefinedTerm};
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
#[derive(Default)]
pub struct DocContext<'a> {
    source: Option<&'a Source>,
    text: OnceLock<String>,
    numerals: OnceLock<Numerals>,
    conventions: OnceLock<Conventions>,
    defined_terms: OnceLock<Vec<DefinedTerm>>,
    adjust: Option<Adjust>,
}

/// A change to the conventions detected in every document ([`DocContext::adjusted`],
/// [`Extractor::conventions`](crate::Extractor::conventions)): what a caller knows of its
/// documents that one document may not tell (the date order of a country's receipts).
pub type Adjust = Arc<dyn Fn(Conventions) -> Conventions + Send + Sync>;

impl std::fmt::Debug for DocContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocContext")
            .field("source", &self.source.map(Source::line_count))
            .field("conventions", &self.conventions.get())
            .field("adjusted", &self.adjust.is_some())
            .finish()
    }
}

impl<'a> DocContext<'a> {
    /// No document: values are read from what they say alone.
    pub fn none() -> DocContext<'static> {
        DocContext {
            source: None,
            text: OnceLock::new(),
            numerals: OnceLock::new(),
            conventions: OnceLock::new(),
            defined_terms: OnceLock::new(),
            adjust: None,
        }
    }

    /// The document `source`.
    pub fn of(source: &'a Source) -> DocContext<'a> {
        DocContext {
            source: Some(source),
            text: OnceLock::new(),
            numerals: OnceLock::new(),
            conventions: OnceLock::new(),
            defined_terms: OnceLock::new(),
            adjust: None,
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

    /// This context with `conventions` instead of those detected from the document (a
    /// receipt known to be Malaysian: `Conventions::new().with_currencies(&["MYR"])`).
    pub fn with_conventions(self, conventions: Conventions) -> DocContext<'a> {
        let cx = DocContext {
            conventions: OnceLock::new(),
            ..self
        };
        let _ = cx.conventions.set(conventions);
        cx
    }

    /// This context with the conventions detected from the document changed by `adjust`
    /// (`|c| c.with_date_order(DateOrder::DayFirst)` for receipts from a country that writes
    /// the day first, when a receipt's own dates do not tell).
    pub fn adjusted(self, adjust: Option<Adjust>) -> DocContext<'a> {
        DocContext {
            conventions: OnceLock::new(),
            adjust,
            ..self
        }
    }

    /// How the document writes dates, numbers and currencies, and its own date and period
    /// ([`Conventions::detect`] over its text, the numerals as [`Source::numerals`] says; the
    /// reference period is the first period the document names with its year, such as the
    /// quarter a release reports on); [`Conventions::new`] without a document.
    pub fn conventions(&self) -> &Conventions {
        self.conventions.get_or_init(|| {
            let detected = self.detect();
            match &self.adjust {
                Some(f) => f(detected),
                None => detected,
            }
        })
    }

    fn detect(&self) -> Conventions {
        match self.source {
            None => Conventions::new(),
            Some(_) => {
                let text = self.text();
                let detected = Conventions::detect(&text).with_numerals(self.numerals());
                let period = read::find_periods(&text)
                    .into_iter()
                    .find_map(|r| read::read_period(text.get(r)?, &Conventions::new()).ok());
                match period {
                    Some(p) => detected.with_reference_period(p),
                    None => detected,
                }
            }
        }
    }

    /// The short names the document defines and the names they stand for
    /// ([`read::defined_terms`] over its text, read once for every value that asks); none
    /// without a document.
    pub fn defined_terms(&self) -> &[DefinedTerm] {
        self.defined_terms
            .get_or_init(|| match self.source {
                Some(_) => read::defined_terms(&self.text()),
                None => Vec::new(),
            })
            .as_slice()
    }

    /// How the document writes numbers ([`Source::numerals`]); a decimal point without a
    /// document.
    pub fn numerals(&self) -> Numerals {
        *self
            .numerals
            .get_or_init(|| self.source.map_or(Numerals::Point, |s| s.numerals()))
    }
}
