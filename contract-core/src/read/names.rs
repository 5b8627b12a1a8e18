//! Defined terms: the short names a document gives to the names it introduces.
//!
//! Agreements, filings and letters name a party once in full and define a short name for it
//! in parentheses, then use only the short name: `Acme Widgets, Inc., a Delaware corporation
//! (the “Company”), and Jane Roe (“Employee”)`. A model asked for the parties copies the short
//! names, which the rest of the document repeats (on the development agreements, with the
//! preamble shown: `EMPLOYEE`, `NIKE`; `Altimo`, `Telenor`). [`defined_terms`] finds each
//! definition and the name it stands for; [`full_name`] reads a copied name back to it.
//!
//! How a name is found before its definition: the text from the last boundary before the
//! parenthesis (a closing parenthesis, a colon, `between`, `among`, `by`, `with`, a sentence's
//! start, a blank line; when the text after a parenthesis that defines nothing or after `with`
//! holds no name, from the boundary before it: `Acme Corp. a California corporation having its
//! place of business at ... (and its subsidiaries), ("Acme")`), without a leading `and` or
//! comma, up to the first comma that is not followed by a company suffix (`, Inc.`, `, LLC`,
//! `, Limited`) and the first lower-case word that is neither a connector (`and`, `of`, `&`,
//! `de`) nor a suffix (`a Delaware corporation`, `d/b/a ...` are descriptions, not the name). A
//! name starts with a capital letter or a digit and has at most 12 words; a definition without
//! one is left out.
//!
//! Hand-written: no crate reads a drafting convention (NER models need weights this library
//! does not ship). Measured on the 15 development agreements (`../shared/data/real`, the same
//! rules as a Python sketch): the names of 13 of their 35 labelled parties are read exactly
//! (the labels normalise some names, `&` as `and`, `Limited` as `Ltd.`, which no copy gives).
//! That was before the walk past a description's parenthesis or `with`; end to end, with
//! `qwen2.5-coder-0.5b` filling a `Vec<NameValue>` on the same agreements, the parties' F1 went
//! from 0.553 to 0.676 with that walk (tp 21 to 25, fp 20 to 14; `realdocs --split dev`).

use regex::Regex;
use std::sync::OnceLock;

/// One short name a document defines, and the name it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinedTerm {
    /// The short name, as written inside the quotes (`Company`).
    pub term: String,
    /// The name it stands for, whitespace runs as one space (`Acme Widgets, Inc.`).
    pub name: String,
}

/// The most bytes before a definition searched for its name.
const LOOK_BACK: usize = 300;

fn definition() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // `(the “Company”)`, `("Buyer")`, `(hereinafter referred to as “X”)`, `(“A” or “B”)`.
        Regex::new(r#"\([^()]{0,40}?[“"]([^"“”()]{1,60})[”"][^()]{0,80}\)"#)
            .expect("a valid pattern")
    })
}

fn boundary() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // A sentence's end is a full stop, space and a capital letter (checked further in
        // `region_starts`: not after an initial or an abbreviation).
        Regex::new(r"(?i:\)|:|\bbetween\b|\bamong\b|\bby\b|\bwith\b|\n\s*\n)|(\.)\s+[A-Z]")
            .expect("a valid pattern")
    })
}

/// Words after which a full stop does not end a sentence.
const ABBREVIATIONS: [&str; 16] = [
    "inc", "corp", "co", "ltd", "mr", "mrs", "ms", "dr", "jr", "sr", "st", "no", "p", "v", "a", "n",
];

/// Where the name before a definition may start in `before`: after each boundary, the last
/// first, each with whether the walk may go on past it when the text after it holds no name.
/// It may go on past a parenthesis that defines nothing and past `with`, which a description
/// after the name holds (`Acme Corp. a California corporation having its place of business at
/// ... (and its subsidiaries), ("Acme")`, `Acme Corp, with principal offices at ...
/// ("Acme")`); it stops at another definition, a colon, `between`, `among`, `by`, a sentence's
/// start and a blank line. The last start is always 0, the look-back's beginning, which ends
/// the walk.
fn region_starts(before: &str) -> Vec<(usize, bool)> {
    let mut starts = vec![(0, false)];
    for m in boundary().captures_iter(before) {
        let (Some(whole), stop) = (m.get(0), m.get(1)) else {
            continue;
        };
        match stop {
            None => {
                let word = whole.as_str();
                let crossable = if word == ")" {
                    // The parenthesis this one closes, if it opens within the look-back.
                    before[..whole.start()]
                        .rfind('(')
                        .map(|open| &before[open..whole.start()])
                        .is_some_and(|inside| !inside.contains(['“', '”', '"']))
                } else {
                    word.eq_ignore_ascii_case("with")
                };
                starts.push((whole.end(), crossable));
            }
            Some(stop) => {
                let word = before[..stop.start()]
                    .rsplit(|c: char| !c.is_alphanumeric())
                    .next()
                    .unwrap_or_default();
                let initial = word.chars().count() == 1;
                if !initial && !ABBREVIATIONS.contains(&word.to_lowercase().as_str()) {
                    // The capital letter (one byte) starts the next sentence.
                    starts.push((whole.end() - 1, false));
                }
            }
        }
    }
    starts.reverse();
    starts
}

fn suffix() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)^,?\s*(inc|incorporated|llc|l\.l\.c|ltd|limited|corp|corporation|co|company|lp|l\.p|llp|plc|n\.v|s\.a|ag|gmbh|pty|jr|sr)\b\.?",
        )
        .expect("a valid pattern")
    })
}

/// Lower-case words a name may hold.
const CONNECTORS: [&str; 9] = ["and", "of", "&", "de", "del", "la", "y", "the", "for"];

/// Every short name `text` defines for a name, in order, each term once (its first definition
/// with a name).
pub fn defined_terms(text: &str) -> Vec<DefinedTerm> {
    let mut out: Vec<DefinedTerm> = Vec::new();
    for m in definition().captures_iter(text) {
        let (Some(whole), Some(term)) = (m.get(0), m.get(1)) else {
            continue;
        };
        let term = collapse(term.as_str());
        if term.is_empty() || out.iter().any(|d| d.term.eq_ignore_ascii_case(&term)) {
            continue;
        }
        if let Some(name) = name_before(text, whole.start()) {
            if !name.eq_ignore_ascii_case(&term) {
                out.push(DefinedTerm { term, name });
            }
        }
    }
    out
}

/// The name `copied` stands for when it is a short name `text` defines (compared without case,
/// quotes or a leading `the`); `None` otherwise. [`full_name_among`] looks it up in terms
/// already read.
pub fn full_name(text: &str, copied: &str) -> Option<String> {
    if term_key(copied).is_empty() {
        return None;
    }
    full_name_among(&defined_terms(text), copied)
}

/// The name `copied` stands for when it is one of `terms` (a document's [`defined_terms`],
/// compared as [`full_name`] compares them); `None` otherwise.
pub fn full_name_among(terms: &[DefinedTerm], copied: &str) -> Option<String> {
    let key = term_key(copied);
    if key.is_empty() {
        return None;
    }
    terms
        .iter()
        .find(|d| term_key(&d.term) == key)
        .map(|d| d.name.clone())
}

/// A term as compared: quotes and a leading `the` dropped, whitespace collapsed, lower case.
fn term_key(s: &str) -> String {
    let s = collapse(s.trim_matches(|c: char| c.is_whitespace() || "“”\"'‘’".contains(c)));
    let lower = s.to_lowercase();
    lower
        .strip_prefix("the ")
        .map(str::to_owned)
        .unwrap_or(lower)
}

/// Whitespace runs as one space, trimmed: `ground::collapse`, written again here so that this
/// module imports nothing of the crate (`ground` lies in `contract-core`'s import circle,
/// `scripts/import_cycles.py`).
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The name written before a definition that opens at byte `at`: [`name_part`] of the text
/// after the last boundary before it, or, when that holds no name and the boundary is one a
/// description may hold ([`region_starts`]), of the text after the boundary before that.
fn name_before(text: &str, at: usize) -> Option<String> {
    let mut lo = at.saturating_sub(LOOK_BACK);
    while !text.is_char_boundary(lo) {
        lo += 1;
    }
    let before = text.get(lo..at)?;
    for (start, crossable) in region_starts(before) {
        if let Some(name) = before.get(start..).and_then(name_part) {
            return Some(name);
        }
        if !crossable {
            break;
        }
    }
    None
}

/// The name a piece of text begins with, without the description written after it
/// (`Acme Widgets, Inc.` of `Acme Widgets, Inc., a Delaware corporation`; `Tyco Healthcare
/// Group LP` of `Tyco Healthcare Group LP d/b/a Covidien`): up to the first comma that does not
/// bring a company suffix and the first lower-case word that is neither a connector nor a
/// suffix, a leading `and` or comma left out. `None` when what is left does not start with a
/// capital letter or a digit, or has more than 12 words.
pub fn name_part(text: &str) -> Option<String> {
    let mut region = text;
    // A leading `and`, comma or ampersand joins this name to the one before.
    loop {
        let trimmed = region.trim_start_matches(|c: char| c.is_whitespace() || ",;&".contains(c));
        match trimmed.get(..4) {
            Some(w) if w.eq_ignore_ascii_case("and ") || w.eq_ignore_ascii_case("and\n") => {
                region = &trimmed[4..];
            }
            _ => {
                region = trimmed;
                break;
            }
        }
    }
    // Up to the first comma that does not bring a company suffix.
    let mut end = region.len();
    for (i, _) in region.match_indices(',') {
        if !suffix().is_match(&region[i..]) {
            end = i;
            break;
        }
    }
    let region = &region[..end];
    // Up to the first lower-case word that is neither a connector nor a suffix.
    let mut words: Vec<&str> = Vec::new();
    for word in region.split_whitespace() {
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '&');
        let lower = bare.chars().next().is_some_and(char::is_lowercase);
        if lower && !CONNECTORS.contains(&bare) && !suffix().is_match(bare) && !bare.is_empty() {
            break;
        }
        if word.eq_ignore_ascii_case("d/b/a") {
            break;
        }
        words.push(word);
    }
    while words
        .last()
        .is_some_and(|w| CONNECTORS.contains(&w.trim_end_matches(',')))
    {
        words.pop();
    }
    // A space the text puts before a full stop or a comma (`TITANIC , INC .`, as text drawn
    // from a PDF often has it) is not the name's.
    let name = words.join(" ").replace(" .", ".").replace(" ,", ",");
    let name = name.trim_end_matches([',', ';', ':']).trim();
    let first = name.chars().next()?;
    let ok = (first.is_uppercase() || first.is_ascii_digit())
        && name.split_whitespace().count() <= 12
        && name.chars().any(char::is_alphabetic);
    ok.then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<(String, String)> {
        defined_terms(text)
            .into_iter()
            .map(|d| (d.term, d.name))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(t, n)| (t.to_string(), n.to_string()))
            .collect()
    }

    #[test]
    fn a_preamble_defines_its_parties() {
        let text = "This Agreement is made as of May 1, 2020 by and between Acme Widgets, Inc., \
                    a Delaware corporation (the “Company”), and Jane Q. Roe (“Employee”).";
        assert_eq!(
            terms(text),
            pairs(&[
                ("Company", "Acme Widgets, Inc."),
                ("Employee", "Jane Q. Roe")
            ])
        );
        assert_eq!(
            full_name(text, "the Company").as_deref(),
            Some("Acme Widgets, Inc.")
        );
        assert_eq!(full_name(text, "EMPLOYEE").as_deref(), Some("Jane Q. Roe"));
        assert_eq!(full_name(text, "Acme Widgets, Inc."), None);
    }

    #[test]
    fn names_over_lines_with_suffixes_and_connectors() {
        // A list after a colon, a name wrapped over lines, a description after a comma.
        let text = "PARTIES:\nEric Dean Sprunk (“EMPLOYEE”)\nand\nNIKE, Inc., divisions, \
                    subsidiaries\nand affiliates. (“NIKE”):";
        assert_eq!(
            terms(text),
            pairs(&[("EMPLOYEE", "Eric Dean Sprunk"), ("NIKE", "NIKE, Inc.")])
        );
        let text = "between LEGGETT & PLATT, INCORPORATED, a Missouri corporation (\"Company\") \
                    and Boston Safe Deposit and Trust\nCompany d/b/a BSD (“Bank”).";
        assert_eq!(
            terms(text),
            pairs(&[
                ("Company", "LEGGETT & PLATT, INCORPORATED"),
                ("Bank", "Boston Safe Deposit and Trust Company"),
            ])
        );
    }

    #[test]
    fn a_description_between_a_name_and_its_definition() {
        // A parenthesis that defines nothing, and `with`, inside the description: the name
        // before them.
        let text = "entered into between Acme Tools, Inc. a Nevada corporation having its office \
                    at\n12 Main Street, Reno, Nevada 89501 (and its affiliates), (\"Acme\") and \
                    Borealis Ltd, with offices at Oslo in the Kingdom of\nNorway (the \"Partner\").";
        assert_eq!(
            terms(text),
            pairs(&[("Acme", "Acme Tools, Inc."), ("Partner", "Borealis Ltd")])
        );
        // Another definition is not crossed: the text after it names nothing.
        let text = "This AGREEMENT (the \"Agreement\") is made as of June 1 (the \"Start\").";
        assert_eq!(terms(text), pairs(&[("Agreement", "This AGREEMENT")]));
        assert_eq!(full_name(text, "Start"), None);
    }

    #[test]
    fn a_name_without_its_description() {
        for (text, name) in [
            ("NIKE, Inc., divisions, subsidiaries", Some("NIKE, Inc.")),
            (
                "Tyco Healthcare Group LP d/b/a Covidien",
                Some("Tyco Healthcare Group LP"),
            ),
            (
                "Acme Widgets, Inc., a Delaware corporation",
                Some("Acme Widgets, Inc."),
            ),
            (
                "and Boston Safe Deposit and Trust Company",
                Some("Boston Safe Deposit and Trust Company"),
            ),
            ("Jane Q. Roe", Some("Jane Q. Roe")),
            ("AZZ incorporated", Some("AZZ incorporated")),
            ("RMS TITANIC , INC .", Some("RMS TITANIC, INC.")),
            ("the receiving party", None),
            ("", None),
        ] {
            assert_eq!(name_part(text).as_deref(), name, "{text}");
        }
    }

    #[test]
    fn definitions_without_a_name_are_left_out() {
        // Lower case before the definition, a term defined twice, no definition at all.
        let text = "information that is not public (“Confidential Information”). Acme Corp \
                    (“Acme”) and Acme Corp (“Acme”) agree; nothing here (see Section 2).";
        assert_eq!(terms(text), pairs(&[("Acme", "Acme Corp")]));
        assert_eq!(full_name(text, "Confidential Information"), None);
        assert_eq!(full_name(text, ""), None);
        assert_eq!(full_name("", "Acme"), None);
    }

    #[test]
    fn any_text_is_read_without_a_panic() {
        for text in [
            "(“”)",
            "((“a”))",
            "é(“X”)",
            "é Name (“X”)",
            "and\n(“X”)",
            ", , and (\"Y\")",
        ] {
            let _ = defined_terms(text);
            let _ = full_name(text, "X");
        }
        // A definition far into a text of multi-byte characters: the look-back starts on a
        // character's boundary.
        let long = format!("{}. Acme Corp (“Acme”)", "é".repeat(400));
        assert_eq!(full_name(&long, "Acme").as_deref(), Some("Acme Corp"));
    }
}
