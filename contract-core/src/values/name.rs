use serde::{Deserialize, Serialize};

use crate::context::DocContext;
use crate::ground::collapse;
use crate::read::{full_name_among, name_part, whole_name};
use crate::validate::Violation;
use crate::Contract;

/// A name of a person or an organisation as the document writes it; code reads the full name.
///
/// The model copies [`NameValue::original`]: a name the document writes, which may be a short
/// name the document defines for a longer one (`the Company` for `Acme Widgets, Inc., a
/// Delaware corporation (the “Company”)`). The library computes [`NameValue::name`] when it
/// reads the value: the name a short name the document defines stands for
/// ([`read::defined_terms`](crate::read::defined_terms)), else the name `original` begins
/// with, without the description written after it (`Acme Widgets, Inc.` of `Acme Widgets, Inc.,
/// a Delaware corporation`; [`read::name_part`](crate::read::name_part)) and read on to its
/// legal form where the document writes one right after it (`AHP Servicing LLC` of a copied
/// `AHP Servicing`; [`read::whole_name`](crate::read::whole_name)), else `original`.
///
/// Why: the parties of an agreement are named once, in its preamble, and everywhere else by
/// their short names, which is what a model asked for them copies (on the development
/// agreements: `EMPLOYEE` and `NIKE` for Eric Dean Sprunk and NIKE, Inc.).
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(normalize = NameValue::read)]
pub struct NameValue {
    /// The name exactly as the document writes it.
    #[contract(grounded(with_container))]
    pub original: String,
    /// The full name (computed): what a short name the document defines stands for, else the
    /// name as written without a description after it, read on to its legal form where the
    /// document writes one right after it; whitespace runs as one space.
    #[contract(skip)]
    #[serde(default)]
    pub name: Option<String>,
}

impl NameValue {
    /// A name as written, not yet read.
    pub fn new(original: impl Into<String>) -> NameValue {
        NameValue {
            original: original.into(),
            name: None,
        }
    }

    /// The full name, or the name as written when it has not been read.
    pub fn full(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.original)
    }

    /// Computes [`NameValue::name`] from `original` and the document's definitions and text: what the
    /// extractor and `from_json_in` run after decoding (`#[contract(normalize = ..)]`). Without
    /// a document, no short name is defined. Never refuses a value.
    pub fn read(&mut self, cx: &DocContext<'_>) -> Result<(), Violation> {
        let name = full_name_among(cx.defined_terms(), &self.original)
            .or_else(|| {
                let part = name_part(&self.original)?;
                Some(whole_name(&cx.text(), &part).unwrap_or(part))
            })
            .unwrap_or_else(|| collapse(&self.original));
        self.name = Some(name);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A contract with a list of the value type, as users write them.
    #[derive(crate::Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Parties {
        #[contract(grounded)]
        parties: Vec<NameValue>,
    }

    #[test]
    fn short_names_are_read_as_the_names_they_stand_for() {
        let source = crate::Source::from_text(
            "This Agreement is made by and between Acme Widgets, Inc., a Delaware\n\
             corporation (the “Company”), and Jane Roe (“Employee”).\n\
             The Employee shall not compete with the Company.",
        );
        let read = Parties::from_json_in(
            r#"{"parties": [{"original": "Company"}, {"original": "Employee"},
                {"original": "Acme Widgets, Inc., a Delaware\ncorporation"}]}"#,
            &source,
        )
        .expect("grounded names");
        let names: Vec<&str> = read.parties.iter().map(NameValue::full).collect();
        assert_eq!(
            names,
            ["Acme Widgets, Inc.", "Jane Roe", "Acme Widgets, Inc."]
        );
        assert_eq!(read.parties[0].original, "Company");
        // Grounded: a name the document does not write is refused.
        let err = Parties::from_json_in(r#"{"parties": [{"original": "Beta LLC"}]}"#, &source)
            .expect_err("not in the document");
        assert!(
            err.iter()
                .any(|v| v.kind == crate::ViolationKind::NotInSource),
            "{err:?}"
        );
        // The context reads the document's definitions once, for every name it reads.
        let cx = DocContext::of(&source);
        let terms: Vec<(&str, &str)> = cx
            .defined_terms()
            .iter()
            .map(|d| (d.term.as_str(), d.name.as_str()))
            .collect();
        assert_eq!(
            terms,
            [("Company", "Acme Widgets, Inc."), ("Employee", "Jane Roe")]
        );
        assert!(DocContext::none().defined_terms().is_empty());
        // A name copied without its legal form is read on to it where the document writes it.
        let source = crate::Source::from_text(
            "between DeAnn O'Donovan, AHP Servicing, LLC (\"Servicing\"), and AHP Capital\n\
             Management, LLC. AHP Servicing shall pay.",
        );
        let read = Parties::from_json_in(
            r#"{"parties": [{"original": "AHP Servicing"}, {"original": "AHP Capital Management"},
                {"original": "DeAnn O'Donovan"}]}"#,
            &source,
        )
        .expect("grounded names");
        let names: Vec<&str> = read.parties.iter().map(NameValue::full).collect();
        assert_eq!(
            names,
            [
                "AHP Servicing, LLC",
                "AHP Capital Management, LLC",
                "DeAnn O'Donovan"
            ]
        );
        // Without a document, the name as written.
        let alone = NameValue::from_json(r#"{"original": "Company"}"#).expect("a name");
        assert_eq!(alone.full(), "Company");
    }
}
