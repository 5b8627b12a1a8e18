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

/// The legal forms an organisation's name ends with (compared without case, a trailing full
/// stop and surrounding punctuation): [`whole_name`] extends a copied name to one, and
/// [`name_part`] ends a name at a code written after one. Hand-written: no crate on crates.io
/// lists them (Python's `cleanco` keeps such a list); these are the common English, European
/// and South-East Asian forms.
#[rustfmt::skip]
const LEGAL_FORMS: [&str; 33] = [
    "inc", "incorporated", "llc", "l.l.c", "ltd", "limited", "corp", "corporation", "co",
    "company", "lp", "l.p", "llp", "l.l.p", "plc", "n.v", "b.v", "s.a", "s.l", "s.p.a", "sarl",
    "s.a.r.l", "ag", "gmbh", "kg", "pty", "pte", "sdn", "bhd", "berhad", "s/b", "a/s", "k.k",
];

/// The [`LEGAL_FORMS`] that are words or acronyms, not abbreviations: a full stop after one ends
/// the sentence, not the form.
#[rustfmt::skip]
const WHOLE_FORMS: [&str; 13] = [
    "incorporated", "limited", "corporation", "company", "llc", "lp", "llp", "plc", "ag", "gmbh",
    "kg", "sarl", "berhad",
];

/// Whether `word` is a legal form ([`LEGAL_FORMS`]), punctuation around it and a trailing full
/// stop aside (`Inc.`, `LTD`, `BHD,`).
fn is_legal_form(word: &str) -> bool {
    let bare = word
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != '/')
        .trim_end_matches('.')
        .to_lowercase();
    !bare.is_empty() && LEGAL_FORMS.contains(&bare.as_str())
}

/// The most words [`whole_name`] reads after a copied name for its legal form.
const MAX_FORM_WORDS: usize = 6;

/// The whole name of an organisation that the name `copied` begins, as `text` writes it:
/// `copied` followed by the words up to its legal form (`AHP Servicing LLC` for a copied `AHP
/// Servicing`; `Convergys Customer Management Group Inc.` for `Convergys Customer Management`,
/// the text having wrapped it over two lines). `None` when `copied` already holds a legal form
/// or no place `text` writes it goes on to one within six words of the name's own
/// kind: capitalised words, connectors (`of`, `&`; not `and`, which joins two names more often
/// than it sits inside one), a bracketed group without digits (`(M)`), a comma right before the
/// form (`Acme Holdings, Inc.`). A lower-case word, a digit, a colon, a semicolon or a blank line
/// ends the search, and so does the end of the line when the name starts its line (a heading, a
/// signature block, an address: `Peter Brent` above `MDS Inc.`), not when it sits in running
/// text that was wrapped. Where `text` writes `copied` several times, the place that needs the
/// fewest words wins.
///
/// Why: a small model copying a name stops early (on the development agreements and receipts:
/// `AHP Servicing`, `Convergys Customer Management`, `AIK HUAT HARDWARE`), and the legal form
/// is where an organisation's name ends.
pub fn whole_name(text: &str, copied: &str) -> Option<String> {
    let words: Vec<&str> = copied.split_whitespace().collect();
    if words.is_empty() || words.iter().any(|w| is_legal_form(w)) {
        return None;
    }
    let pattern = words
        .iter()
        .map(|w| regex::escape(w))
        .collect::<Vec<_>>()
        .join(r"\s+");
    let re = Regex::new(&pattern).ok()?;
    let word_char = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    let mut best: Option<(usize, String)> = None;
    for m in re.find_iter(text) {
        // Whole words only: not `Acme` inside `Acmeco`.
        if word_char(text[..m.start()].chars().next_back()) && word_char(copied.chars().next())
            || word_char(text[m.end()..].chars().next()) && word_char(copied.chars().next_back())
        {
            continue;
        }
        // A name that starts its line (a heading, a signature block, an address) is not read
        // on into the next line, which names someone else as often as not (`Peter Brent` above
        // `MDS Inc.`); a name inside running text is, the text having been wrapped.
        let line_start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let mut after = &text[m.end()..];
        if text[line_start..m.start()].trim().is_empty() {
            after = after.split('\n').next().unwrap_or("");
        }
        if let Some(added) = form_after(after) {
            if best.as_ref().is_none_or(|(n, _)| added.len() < *n) {
                let name = format!("{} {}", words.join(" "), collapse(&added.join(" ")));
                best = Some((added.len(), name.replace(" ,", ",")));
            }
        }
    }
    best.map(|(_, name)| name)
}

/// The words of `after` (the text right after a name) up to and including the last legal form
/// within [`MAX_FORM_WORDS`] words of the name's kind ([`whole_name`]); `None` without one.
fn form_after(after: &str) -> Option<Vec<&str>> {
    // Not past a blank line.
    let after = match after.find("\n\n") {
        Some(i) => &after[..i],
        None => after,
    };
    let mut units: Vec<&str> = Vec::new();
    let mut end = None;
    let mut rest = after.trim_start();
    while units.len() < MAX_FORM_WORDS && !rest.is_empty() {
        // A bracketed group is one unit: `(M)`, `(SETIA ALAM)` over a line break.
        let len = if rest.starts_with('(') {
            match rest.find(')') {
                Some(close) if rest[..close].split_whitespace().count() <= 3 => close + 1,
                _ => return end.map(|e| units[..e].to_vec()),
            }
        } else {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        };
        let unit = &rest[..len];
        rest = rest[len..].trim_start();
        if unit.chars().any(|c| c.is_ascii_digit()) {
            break;
        }
        if is_legal_form(unit) && !unit.starts_with('(') {
            // Without the punctuation that ends the name (`LLC,`, `Inc.;`), and without a full
            // stop after a form that is no abbreviation (`LLC.` ends a sentence; `Inc.` keeps it).
            let mut form = unit.trim_end_matches([',', ';', ':']);
            let bare = form.trim_end_matches('.').to_lowercase();
            if WHOLE_FORMS.contains(&bare.as_str()) {
                form = form.trim_end_matches('.');
            }
            units.push(form);
            end = Some(units.len());
            if unit.ends_with([',', ';', ':']) {
                break;
            }
            continue;
        }
        if unit.ends_with([':', ';']) {
            break;
        }
        let bare = unit.trim_matches(|c: char| !c.is_alphanumeric() && c != '&');
        // `and` joins two names more often than it is inside one.
        let connector = CONNECTORS.contains(&bare) && bare != "and";
        let capital = unit
            .trim_start_matches('(')
            .chars()
            .next()
            .is_some_and(|c| c.is_uppercase());
        if !(connector || capital || unit == ",") {
            break;
        }
        // A comma ends the name unless a legal form follows it (`Holdings, Inc.`).
        if unit == "," || unit.ends_with(',') {
            let next = rest.split_whitespace().next().unwrap_or("");
            if !is_legal_form(next) {
                break;
            }
        }
        // A full stop after a word that is no legal form ends a sentence.
        if unit.ends_with('.') && unit.trim_end_matches('.').chars().count() > 1 {
            break;
        }
        units.push(unit);
    }
    end.map(|e| units[..e].to_vec())
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
    let mut formed = false;
    for word in region.split_whitespace() {
        // A code after the legal form (`SDN BHD 862725-U`, `SDN BHD (139386 X)`) is not the
        // name's: a company's registration number follows its name.
        if formed && word.chars().any(|c| c.is_ascii_digit()) {
            break;
        }
        formed |= is_legal_form(word);
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
    fn a_copied_name_is_read_on_to_its_legal_form() {
        let text = "between AHP Servicing LLC, a Delaware company, and Convergys Customer \
                    Management\nGroup Inc. Later AHP Servicing shall pay.";
        assert_eq!(
            whole_name(text, "AHP Servicing").as_deref(),
            Some("AHP Servicing LLC")
        );
        assert_eq!(
            whole_name(text, "Convergys Customer Management").as_deref(),
            Some("Convergys Customer Management Group Inc.")
        );
        // A bracketed group on the way, over a line break in running text; a code after the
        // form is not read.
        let text = "sold by Aik Huat Hardware Enterprise (Setia\nAlam) Sdn Bhd 822737-X to us";
        assert_eq!(
            whole_name(text, "Aik Huat Hardware").as_deref(),
            Some("Aik Huat Hardware Enterprise (Setia Alam) Sdn Bhd")
        );
        // Where the name is written twice, the place that reaches a form, and of two that do,
        // the one that needs fewer words.
        let logo = "PREMIO\nPREMIO STATIONERY SDN BHD\n(CO.NO.: 123769-W)";
        assert_eq!(
            whole_name(logo, "PREMIO").as_deref(),
            Some("PREMIO STATIONERY SDN BHD")
        );
        let twice = "sold by Acme Incorporated and later by Acme New Co";
        assert_eq!(
            whole_name(twice, "Acme").as_deref(),
            Some("Acme Incorporated")
        );
        // A comma that brings the form.
        assert_eq!(
            whole_name("Acme Holdings, Inc. agrees", "Acme Holdings").as_deref(),
            Some("Acme Holdings, Inc.")
        );
    }

    #[test]
    fn a_name_is_not_read_on_past_its_kind() {
        for (text, copied) in [
            // Already a legal form.
            ("Acme Corp. Ltd", "Acme Corp."),
            // A lower-case word, a sentence's end, a digit, a colon before any form.
            ("Jane Roe shall sign for Acme Inc.", "Jane Roe"),
            ("Jane Roe. Acme Inc. agrees", "Jane Roe"),
            ("sold by Book Shop 12 Jalan Sdn Bhd", "Book Shop"),
            ("Seller: Acme Inc.", "Seller"),
            // A blank line, and more words than a name's.
            ("the seller ACME\n\nBETA SDN BHD", "ACME"),
            // A name that starts its line: not into the next one.
            (
                "Peter Brent\nMDS Inc.\n100 International Boulevard",
                "Peter Brent",
            ),
            ("AIK HUAT HARDWARE\nENTERPRISE SDN BHD", "AIK HUAT HARDWARE"),
            // `and` joins two names.
            (
                "shares in VimpelCom and Closed Joint Stock\nCompany",
                "VimpelCom",
            ),
            ("Acme One Two Three Four Five Six Seven Inc.", "Acme"),
            // Only whole words: `Acme` is not the start of `Acmeco`.
            ("Acmeco Ltd", "Acme"),
            // Not written at all, or nothing copied.
            ("Beta Inc.", "Acme"),
            ("Acme Inc.", ""),
        ] {
            assert_eq!(whole_name(text, copied), None, "{copied:?} in {text:?}");
        }
    }

    #[test]
    fn a_code_after_the_legal_form_is_not_the_names() {
        for (text, name) in [
            (
                "MOONLIGHT CAKE HOUSE SDN BHD 862725-U",
                "MOONLIGHT CAKE HOUSE SDN BHD",
            ),
            (
                "GARDENIA BAKERIES (KI ) SDN BHD (139386 X)",
                "GARDENIA BAKERIES (KI ) SDN BHD",
            ),
            // Digits before the form are the name's.
            ("99 SPEED MART S/B", "99 SPEED MART S/B"),
            ("3M Company", "3M Company"),
        ] {
            assert_eq!(name_part(text).as_deref(), Some(name), "{text}");
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
