//! Currencies: [`find_currencies`] and [`read_currency`].
//!
//! The ISO code list comes from the [`iso_currency`] crate (generated from the ISO 4217 table
//! and kept current: 0.7 has 2024's `ZWG` and Bulgaria's 2026 move to the euro; codes
//! superseded since, like `HRK`, are still read): it has every code and one symbol per
//! currency, but no names in any language but English, and a symbol shared by many currencies
//! (`$` is the symbol of some twenty) is listed under each of them with nothing to choose
//! between them. So the symbols and names, which currencies each may stand for and which one
//! it stands for by default are a table here; a test checks that every code in it is one
//! [`iso_currency`] knows. (`rusty-money` has the same one-symbol-per-currency data, with a
//! decimal arithmetic this module does not need.)

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use iso_currency::Currency;

use super::conventions::Conventions;
use super::token::{scan, Kind, Toks};

/// What a symbol or a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// One currency.
    One(&'static str),
    /// Any of these, the default (when there is one) when the document names none of them.
    Several {
        candidates: &'static [&'static str],
        default: Option<&'static str>,
    },
}

use Reading::{One, Several};

/// Currencies written with `$`: the dollars, the pesos, and the ringgit (once the Malaysian
/// dollar, `$`).
const DOLLAR_SIGN: &[&str] = &[
    "USD", "CAD", "AUD", "NZD", "SGD", "HKD", "TWD", "MXN", "ARS", "CLP", "COP", "UYU", "CUP",
    "DOP", "MYR", "BND", "BSD", "BBD", "BZD", "BMD", "FJD", "GYD", "JMD", "KYD", "LRD", "NAD",
    "SBD", "SRD", "TTD", "XCD",
];
/// Currencies called dollars (and the ringgit, once the Malaysian dollar).
const DOLLAR_NAME: &[&str] = &[
    "USD", "CAD", "AUD", "NZD", "SGD", "HKD", "TWD", "MYR", "BND", "BSD", "BBD", "BZD", "BMD",
    "FJD", "GYD", "JMD", "KYD", "LRD", "NAD", "SBD", "SRD", "TTD", "XCD",
];
const PESOS: &[&str] = &["MXN", "ARS", "CLP", "COP", "UYU", "CUP", "DOP", "PHP"];
const POUNDS: &[&str] = &["GBP", "EGP", "GIP", "FKP", "SHP", "SYP", "LBP", "SSP"];
const YEN_SIGN: &[&str] = &["JPY", "CNY"];
const RUPEES: &[&str] = &["INR", "PKR", "LKR", "NPR", "MUR", "SCR"];
const KRONOR: &[&str] = &["SEK", "NOK", "DKK", "ISK"];
const KRONE: &[&str] = &["NOK", "DKK"];
const FRANCS: &[&str] = &["CHF", "XOF", "XAF", "XPF"];
const DINARS: &[&str] = &["KWD", "BHD", "JOD", "IQD", "DZD", "TND", "LYD", "RSD"];
const RIYALS: &[&str] = &["SAR", "QAR", "OMR", "YER"];
const DIRHAMS: &[&str] = &["AED", "MAD"];
const RUPIAS: &[&str] = &["INR", "IDR", "PKR", "LKR", "NPR"];

/// Symbols, matched exactly as written (case included).
const SYMBOLS: &[(&str, Reading)] = &[
    (
        "$",
        Several {
            candidates: DOLLAR_SIGN,
            default: Some("USD"),
        },
    ),
    ("US$", One("USD")),
    ("U$S", One("USD")),
    ("U.S.$", One("USD")),
    ("CA$", One("CAD")),
    (
        "C$",
        Several {
            candidates: &["CAD", "NIO"],
            default: Some("CAD"),
        },
    ),
    ("A$", One("AUD")),
    ("AU$", One("AUD")),
    ("NZ$", One("NZD")),
    ("S$", One("SGD")),
    ("SG$", One("SGD")),
    ("HK$", One("HKD")),
    ("NT$", One("TWD")),
    ("MX$", One("MXN")),
    ("Mex$", One("MXN")),
    ("R$", One("BRL")),
    ("RD$", One("DOP")),
    ("J$", One("JMD")),
    ("TT$", One("TTD")),
    ("€", One("EUR")),
    (
        "£",
        Several {
            candidates: POUNDS,
            default: Some("GBP"),
        },
    ),
    (
        "¥",
        Several {
            candidates: YEN_SIGN,
            default: Some("JPY"),
        },
    ),
    (
        "￥",
        Several {
            candidates: YEN_SIGN,
            default: Some("JPY"),
        },
    ),
    ("JP¥", One("JPY")),
    ("CN¥", One("CNY")),
    ("円", One("JPY")),
    ("元", One("CNY")),
    ("RMB", One("CNY")),
    ("₹", One("INR")),
    (
        "₨",
        Several {
            candidates: RUPEES,
            default: Some("INR"),
        },
    ),
    (
        "Rs",
        Several {
            candidates: RUPEES,
            default: Some("INR"),
        },
    ),
    (
        "Rs.",
        Several {
            candidates: RUPEES,
            default: Some("INR"),
        },
    ),
    ("₽", One("RUB")),
    ("₺", One("TRY")),
    ("₴", One("UAH")),
    ("₪", One("ILS")),
    ("₦", One("NGN")),
    ("₱", One("PHP")),
    ("₫", One("VND")),
    ("฿", One("THB")),
    ("₡", One("CRC")),
    ("₲", One("PYG")),
    ("₵", One("GHS")),
    ("₸", One("KZT")),
    ("₼", One("AZN")),
    ("₾", One("GEL")),
    ("₭", One("LAK")),
    ("₮", One("MNT")),
    ("៛", One("KHR")),
    ("₩", One("KRW")),
    ("RM", One("MYR")),
    ("Rp", One("IDR")),
    ("Rp.", One("IDR")),
    ("zł", One("PLN")),
    ("Kč", One("CZK")),
    (
        "kr",
        Several {
            candidates: KRONOR,
            default: None,
        },
    ),
    (
        "kr.",
        Several {
            candidates: KRONOR,
            default: None,
        },
    ),
    (
        "Kr",
        Several {
            candidates: KRONOR,
            default: None,
        },
    ),
    (
        "Kr.",
        Several {
            candidates: KRONOR,
            default: None,
        },
    ),
];

/// Names, lowercase, words separated by one space.
const NAMES: &[(&str, Reading)] = &[
    // English
    (
        "dollar",
        Several {
            candidates: DOLLAR_NAME,
            default: Some("USD"),
        },
    ),
    (
        "dollars",
        Several {
            candidates: DOLLAR_NAME,
            default: Some("USD"),
        },
    ),
    ("us dollar", One("USD")),
    ("us dollars", One("USD")),
    ("u.s. dollar", One("USD")),
    ("u.s. dollars", One("USD")),
    ("united states dollar", One("USD")),
    ("united states dollars", One("USD")),
    ("canadian dollar", One("CAD")),
    ("canadian dollars", One("CAD")),
    ("australian dollar", One("AUD")),
    ("australian dollars", One("AUD")),
    ("new zealand dollar", One("NZD")),
    ("new zealand dollars", One("NZD")),
    ("singapore dollar", One("SGD")),
    ("singapore dollars", One("SGD")),
    ("hong kong dollar", One("HKD")),
    ("hong kong dollars", One("HKD")),
    ("taiwan dollar", One("TWD")),
    ("taiwan dollars", One("TWD")),
    ("new taiwan dollar", One("TWD")),
    ("new taiwan dollars", One("TWD")),
    ("euro", One("EUR")),
    ("euros", One("EUR")),
    (
        "pound",
        Several {
            candidates: POUNDS,
            default: Some("GBP"),
        },
    ),
    (
        "pounds",
        Several {
            candidates: POUNDS,
            default: Some("GBP"),
        },
    ),
    ("pound sterling", One("GBP")),
    ("pounds sterling", One("GBP")),
    ("sterling", One("GBP")),
    ("british pound", One("GBP")),
    ("british pounds", One("GBP")),
    ("yen", One("JPY")),
    ("japanese yen", One("JPY")),
    ("yuan", One("CNY")),
    ("chinese yuan", One("CNY")),
    ("renminbi", One("CNY")),
    ("ringgit", One("MYR")),
    ("malaysian ringgit", One("MYR")),
    ("ringgit malaysia", One("MYR")),
    (
        "rupee",
        Several {
            candidates: RUPEES,
            default: Some("INR"),
        },
    ),
    (
        "rupees",
        Several {
            candidates: RUPEES,
            default: Some("INR"),
        },
    ),
    ("indian rupee", One("INR")),
    ("indian rupees", One("INR")),
    ("pakistani rupee", One("PKR")),
    ("pakistani rupees", One("PKR")),
    ("sri lankan rupee", One("LKR")),
    ("sri lankan rupees", One("LKR")),
    (
        "peso",
        Several {
            candidates: PESOS,
            default: None,
        },
    ),
    (
        "pesos",
        Several {
            candidates: PESOS,
            default: None,
        },
    ),
    ("mexican peso", One("MXN")),
    ("mexican pesos", One("MXN")),
    ("argentine peso", One("ARS")),
    ("argentine pesos", One("ARS")),
    ("chilean peso", One("CLP")),
    ("chilean pesos", One("CLP")),
    ("colombian peso", One("COP")),
    ("colombian pesos", One("COP")),
    ("philippine peso", One("PHP")),
    ("philippine pesos", One("PHP")),
    ("uruguayan peso", One("UYU")),
    ("uruguayan pesos", One("UYU")),
    (
        "franc",
        Several {
            candidates: FRANCS,
            default: None,
        },
    ),
    (
        "francs",
        Several {
            candidates: FRANCS,
            default: None,
        },
    ),
    ("swiss franc", One("CHF")),
    ("swiss francs", One("CHF")),
    ("brazilian real", One("BRL")),
    ("brazilian reais", One("BRL")),
    ("reais", One("BRL")),
    ("rand", One("ZAR")),
    ("south african rand", One("ZAR")),
    ("korean won", One("KRW")),
    ("south korean won", One("KRW")),
    ("rupiah", One("IDR")),
    ("indonesian rupiah", One("IDR")),
    ("baht", One("THB")),
    ("thai baht", One("THB")),
    ("vietnamese dong", One("VND")),
    ("lira", One("TRY")),
    ("turkish lira", One("TRY")),
    ("zloty", One("PLN")),
    ("zlotys", One("PLN")),
    ("złoty", One("PLN")),
    ("złotys", One("PLN")),
    ("forint", One("HUF")),
    ("forints", One("HUF")),
    ("ruble", One("RUB")),
    ("rubles", One("RUB")),
    ("rouble", One("RUB")),
    ("roubles", One("RUB")),
    ("shekel", One("ILS")),
    ("shekels", One("ILS")),
    ("new israeli shekel", One("ILS")),
    ("new israeli shekels", One("ILS")),
    (
        "dirham",
        Several {
            candidates: DIRHAMS,
            default: Some("AED"),
        },
    ),
    (
        "dirhams",
        Several {
            candidates: DIRHAMS,
            default: Some("AED"),
        },
    ),
    ("moroccan dirham", One("MAD")),
    ("moroccan dirhams", One("MAD")),
    (
        "riyal",
        Several {
            candidates: RIYALS,
            default: Some("SAR"),
        },
    ),
    (
        "riyals",
        Several {
            candidates: RIYALS,
            default: Some("SAR"),
        },
    ),
    ("saudi riyal", One("SAR")),
    ("saudi riyals", One("SAR")),
    ("qatari riyal", One("QAR")),
    ("qatari riyals", One("QAR")),
    ("naira", One("NGN")),
    (
        "krona",
        Several {
            candidates: &["SEK", "ISK"],
            default: Some("SEK"),
        },
    ),
    ("kronor", One("SEK")),
    ("swedish krona", One("SEK")),
    ("swedish kronor", One("SEK")),
    (
        "krone",
        Several {
            candidates: KRONE,
            default: None,
        },
    ),
    (
        "kroner",
        Several {
            candidates: KRONE,
            default: None,
        },
    ),
    ("norwegian krone", One("NOK")),
    ("norwegian kroner", One("NOK")),
    ("danish krone", One("DKK")),
    ("danish kroner", One("DKK")),
    ("koruna", One("CZK")),
    ("czech koruna", One("CZK")),
    ("hryvnia", One("UAH")),
    (
        "dinar",
        Several {
            candidates: DINARS,
            default: None,
        },
    ),
    (
        "dinars",
        Several {
            candidates: DINARS,
            default: None,
        },
    ),
    ("kuwaiti dinar", One("KWD")),
    ("kuwaiti dinars", One("KWD")),
    // Spanish
    (
        "dólar",
        Several {
            candidates: DOLLAR_NAME,
            default: Some("USD"),
        },
    ),
    (
        "dólares",
        Several {
            candidates: DOLLAR_NAME,
            default: Some("USD"),
        },
    ),
    (
        "dolar",
        Several {
            candidates: DOLLAR_NAME,
            default: Some("USD"),
        },
    ),
    (
        "dolares",
        Several {
            candidates: DOLLAR_NAME,
            default: Some("USD"),
        },
    ),
    ("dólar estadounidense", One("USD")),
    ("dólares estadounidenses", One("USD")),
    ("dolar estadounidense", One("USD")),
    ("dolares estadounidenses", One("USD")),
    ("dólares americanos", One("USD")),
    ("dólar canadiense", One("CAD")),
    ("dólares canadienses", One("CAD")),
    ("dólar australiano", One("AUD")),
    ("dólares australianos", One("AUD")),
    (
        "libra",
        Several {
            candidates: POUNDS,
            default: Some("GBP"),
        },
    ),
    (
        "libras",
        Several {
            candidates: POUNDS,
            default: Some("GBP"),
        },
    ),
    ("libra esterlina", One("GBP")),
    ("libras esterlinas", One("GBP")),
    ("yenes", One("JPY")),
    ("yuanes", One("CNY")),
    ("peso mexicano", One("MXN")),
    ("pesos mexicanos", One("MXN")),
    ("peso argentino", One("ARS")),
    ("pesos argentinos", One("ARS")),
    ("peso chileno", One("CLP")),
    ("pesos chilenos", One("CLP")),
    ("peso colombiano", One("COP")),
    ("pesos colombianos", One("COP")),
    ("peso uruguayo", One("UYU")),
    ("pesos uruguayos", One("UYU")),
    ("peso filipino", One("PHP")),
    ("pesos filipinos", One("PHP")),
    ("peso dominicano", One("DOP")),
    ("pesos dominicanos", One("DOP")),
    ("real brasileño", One("BRL")),
    ("reales brasileños", One("BRL")),
    ("franco suizo", One("CHF")),
    ("francos suizos", One("CHF")),
    (
        "franco",
        Several {
            candidates: FRANCS,
            default: None,
        },
    ),
    (
        "francos",
        Several {
            candidates: FRANCS,
            default: None,
        },
    ),
    (
        "rupia",
        Several {
            candidates: RUPIAS,
            default: None,
        },
    ),
    (
        "rupias",
        Several {
            candidates: RUPIAS,
            default: None,
        },
    ),
    ("rupias indias", One("INR")),
    ("rupias indonesias", One("IDR")),
    ("sol peruano", One("PEN")),
    ("soles peruanos", One("PEN")),
    ("nuevos soles", One("PEN")),
    ("colón", One("CRC")),
    ("colones", One("CRC")),
    ("quetzal", One("GTQ")),
    ("quetzales", One("GTQ")),
    ("guaraní", One("PYG")),
    ("guaraníes", One("PYG")),
    ("lempira", One("HNL")),
    ("lempiras", One("HNL")),
];

/// ISO codes [`find_currencies`] offers wherever they stand (`TOTAL (MYR)`): the most traded
/// currencies. Any other code is offered only next to a number, since three capitals are as
/// often a word (`ALL`, `TOP`, `PEN`) or an abbreviation (Malaysian `SDN BHD`, not Bahraini
/// dinars) as a currency.
const MAJOR_CODES: &[&str] = &[
    "USD", "EUR", "GBP", "JPY", "CNY", "CHF", "CAD", "AUD", "NZD", "SGD", "HKD", "MYR", "INR",
    "KRW", "BRL", "MXN", "SEK", "NOK", "DKK", "PLN", "RUB", "ZAR", "IDR", "THB", "TWD", "ARS",
    "CLP", "COP", "CZK", "HUF", "ILS", "AED", "SAR",
];

/// The longest name of a currency, in tokens (`u.s. dollars`).
const MAX_TOKENS: usize = 8;

fn symbols() -> &'static HashMap<&'static str, Reading> {
    static MAP: OnceLock<HashMap<&'static str, Reading>> = OnceLock::new();
    MAP.get_or_init(|| SYMBOLS.iter().copied().collect())
}

fn names() -> &'static HashMap<&'static str, Reading> {
    static MAP: OnceLock<HashMap<&'static str, Reading>> = OnceLock::new();
    MAP.get_or_init(|| NAMES.iter().copied().collect())
}

/// An ISO 4217 code (not a special one: `XXX`, `XAU`, `XDR`, ...), as its `'static` text.
fn iso_code(code: &str) -> Option<&'static str> {
    Currency::from_code(code)
        .filter(|c| !c.is_special())
        .map(|c| c.code())
}

/// Tokens `a..b` lowercased, whitespace runs as one space.
fn phrase(t: &Toks<'_>, a: usize, b: usize) -> String {
    let mut s = String::new();
    for k in a..b {
        match t.t.get(k) {
            Some(tok) if tok.kind == Kind::Space => s.push(' '),
            Some(tok) => s.push_str(&tok.lower),
            None => {}
        }
    }
    s
}

/// The reading of tokens `a..b` as one symbol, name or code.
fn reading(t: &Toks<'_>, a: usize, b: usize, near_number: bool) -> Option<Reading> {
    if let Some(r) = symbols().get(t.slice(a, b)) {
        return Some(*r);
    }
    if let Some(r) = names().get(phrase(t, a, b).as_str()) {
        return Some(*r);
    }
    if b == a + 1 && t.kind(a) == Some(Kind::Word) {
        let w = t.slice(a, b);
        let upper = w.len() == 3 && w.bytes().all(|c| c.is_ascii_uppercase());
        if upper && (near_number || MAJOR_CODES.contains(&w)) {
            return iso_code(w).map(One);
        }
    }
    None
}

/// Whether a number is next to tokens `a..b` (whitespace between allowed).
fn next_to_number(t: &Toks<'_>, a: usize, b: usize) -> bool {
    let after = t.sp(b);
    let before = a.checked_sub(1).map(|k| {
        if t.kind(k) == Some(Kind::Space) {
            k.checked_sub(1)
        } else {
            Some(k)
        }
    });
    t.kind(after) == Some(Kind::Num) || before.flatten().and_then(|k| t.kind(k)) == Some(Kind::Num)
}

fn currency_at(t: &Toks<'_>, i: usize) -> Option<(usize, Reading)> {
    let last = (i + MAX_TOKENS).min(t.len());
    for b in (i + 1..=last).rev() {
        if t.kind(b - 1) == Some(Kind::Space) {
            continue;
        }
        let near_number = next_to_number(t, i, b);
        if let Some(r) = reading(t, i, b, near_number) {
            return Some((b, r));
        }
    }
    None
}

/// Every currency `text` writes (ISO codes in capitals, symbols, names in English and
/// Spanish), as byte ranges: each the longest at its place (`US$` whole, not `$`; `pesos
/// mexicanos` whole), in order, not overlapping. A symbol may touch its number (`RM60.30`,
/// `AMT(RM)`); a code outside the most traded currencies (`ALL`, `TOP`, `PEN`, `BHD`) is
/// offered only next to a number.
pub fn find_currencies(text: &str) -> Vec<Range<usize>> {
    currencies_in(&Toks::new(text))
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

pub(crate) fn currencies_in(t: &Toks<'_>) -> Vec<(Range<usize>, Reading)> {
    scan(t, currency_at)
}

/// Why a text could not be read as a currency.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CurrencyError {
    /// The text is no currency symbol, ISO code or name the reader knows.
    #[error("`{0}` is not a currency symbol, ISO 4217 code or currency name")]
    NotACurrency(String),
    /// The symbol or name stands for several currencies and the document does not tell which.
    #[error("`{text}` may be any of {}: the document does not say which", .candidates.join(", "))]
    Ambiguous {
        /// The text.
        text: String,
        /// The currencies it may be (those the document names, when it names several).
        candidates: Vec<&'static str>,
    },
}

/// The ISO 4217 code of the currency `text` writes (one symbol, code or name, as
/// [`find_currencies`] finds them, surrounding whitespace aside; a code in any case), an
/// ambiguous one resolved by the document's `conventions`.
///
/// What is read: ISO 4217 codes written as words (`USD`, `MYR`; every code of the
/// [`iso_currency`] crate except its special ones, `XXX`, `XAU`, ...), symbols (`$`, `€`, `£`,
/// `¥`, `RM`, `S$`, `US$`, `A$`, `C$`, `HK$`, `R$`, `₹`, `₩`, `₽`, `₺`, `kr`, `zł`, `Rp`, `Rs`,
/// ...) and currency names in English and Spanish (`dollars`, `US dollars`, `euros`,
/// `pounds sterling`, `ringgit`, `yen`, `dólares`, `pesos mexicanos`, `libras esterlinas`, ...).
///
/// An ambiguous symbol or name (`$`, `kr`, `¥`, `dollars`, `pesos`) is resolved by the
/// currencies the document itself names unambiguously ([`Conventions::currencies`]: a `$` in
/// a document that writes `MXN` or `pesos mexicanos` is MXN, in one that writes `RM` it is MYR:
/// the ringgit was the Malaysian dollar, `$` its sign); when the document names none of the
/// symbol's currencies, by the symbol's default (`$` and `dollars` USD, `¥` JPY, `£` GBP,
/// `Rs` INR); when it names several, or the symbol has no default (`kr`, `pesos`, `francs`),
/// it is [`CurrencyError::Ambiguous`].
pub fn read_currency(text: &str, conventions: &Conventions) -> Result<&'static str, CurrencyError> {
    let t = Toks::new(text);
    let (a, b) = t.trimmed();
    let trimmed = text.trim();
    let not = || CurrencyError::NotACurrency(trimmed.to_owned());
    if a == b {
        return Err(not());
    }
    let r = reading(&t, a, b, true)
        .or_else(|| {
            let upper = trimmed.to_ascii_uppercase();
            (upper.len() == 3 && upper.bytes().all(|c| c.is_ascii_uppercase()))
                .then(|| iso_code(&upper).map(One))
                .flatten()
        })
        .ok_or_else(not)?;
    resolve(r, conventions, trimmed)
}

pub(crate) fn resolve(
    r: Reading,
    conventions: &Conventions,
    text: &str,
) -> Result<&'static str, CurrencyError> {
    let (candidates, default) = match r {
        One(code) => return Ok(code),
        Several {
            candidates,
            default,
        } => (candidates, default),
    };
    let named: Vec<&'static str> = conventions
        .currencies()
        .iter()
        .copied()
        .filter(|c| candidates.contains(c))
        .collect();
    match (named.as_slice(), default) {
        ([one], _) => Ok(one),
        ([], Some(d)) => Ok(d),
        ([], None) => Err(CurrencyError::Ambiguous {
            text: text.to_owned(),
            candidates: candidates.to_vec(),
        }),
        _ => Err(CurrencyError::Ambiguous {
            text: text.to_owned(),
            candidates: named,
        }),
    }
}

/// The currencies `t` names unambiguously, most often named first (ties: first named first).
pub(crate) fn named_currencies(t: &Toks<'_>) -> Vec<&'static str> {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for (_, r) in currencies_in(t) {
        if let One(code) = r {
            match counts.iter_mut().find(|(c, _)| *c == code) {
                Some((_, n)) => *n += 1,
                None => counts.push((code, 1)),
            }
        }
    }
    // A stable sort keeps first-named first among equal counts.
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts.into_iter().map(|(c, _)| c).collect()
}

/// Whether `code` is an ISO 4217 code the readers accept, as its `'static` text.
pub(crate) fn known_code(code: &str) -> Option<&'static str> {
    iso_code(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        find_currencies(text)
            .into_iter()
            .map(|r| text.get(r).unwrap_or("?"))
            .collect()
    }

    #[test]
    fn every_code_in_the_tables_is_iso_4217() {
        let readings = SYMBOLS.iter().chain(NAMES).map(|(_, r)| *r);
        for r in readings {
            let codes: Vec<&str> = match r {
                One(c) => vec![c],
                Several {
                    candidates,
                    default,
                } => {
                    if let Some(d) = default {
                        assert!(candidates.contains(&d), "{d} not among {candidates:?}");
                    }
                    candidates.to_vec()
                }
            };
            for c in codes {
                assert!(iso_code(c).is_some(), "{c} is not an ISO 4217 code");
            }
        }
        for c in MAJOR_CODES {
            assert!(iso_code(c).is_some(), "{c}");
        }
    }

    #[test]
    fn symbols_codes_and_names() {
        let c = Conventions::new();
        for (text, want) in [
            ("USD", "USD"),
            ("myr", "MYR"),
            ("RM", "MYR"),
            ("$", "USD"),
            ("US$", "USD"),
            ("S$", "SGD"),
            ("A$", "AUD"),
            ("HK$", "HKD"),
            ("R$", "BRL"),
            ("€", "EUR"),
            ("£", "GBP"),
            ("¥", "JPY"),
            ("₹", "INR"),
            ("₩", "KRW"),
            ("₽", "RUB"),
            ("₺", "TRY"),
            ("zł", "PLN"),
            ("CHF", "CHF"),
            ("HRK", "HRK"),
            ("dollars", "USD"),
            ("US dollars", "USD"),
            ("U.S. Dollars", "USD"),
            ("euros", "EUR"),
            ("Pounds Sterling", "GBP"),
            ("ringgit", "MYR"),
            ("yen", "JPY"),
            ("dólares", "USD"),
            ("pesos mexicanos", "MXN"),
            ("libras esterlinas", "GBP"),
            (" EUR ", "EUR"),
        ] {
            assert_eq!(read_currency(text, &c), Ok(want), "{text}");
        }
        for text in ["", "XXX", "ABC", "RMX", "money", "SEKS", "$$"] {
            assert!(
                matches!(read_currency(text, &c), Err(CurrencyError::NotACurrency(_))),
                "{text}"
            );
        }
        for text in ["kr", "pesos", "francs"] {
            assert!(
                matches!(
                    read_currency(text, &c),
                    Err(CurrencyError::Ambiguous { .. })
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn the_document_settles_ambiguous_symbols() {
        let receipt = Conventions::detect("TOTAL AMT RM 60.31\nCASH $70.30\n");
        assert_eq!(receipt.currencies(), ["MYR"]);
        assert_eq!(read_currency("$", &receipt), Ok("MYR"));
        let mx = Conventions::detect("Ventas por 1.200 millones de pesos mexicanos ($1.200).");
        assert_eq!(read_currency("$", &mx), Ok("MXN"));
        assert_eq!(read_currency("pesos", &mx), Ok("MXN"));
        let se = Conventions::detect("Pris: 100 SEK, rabatt 20 kr");
        assert_eq!(read_currency("kr", &se), Ok("SEK"));
        // A euro amount says nothing about `$`.
        let us = Conventions::detect("EUR 5 million, or $5.4 million");
        assert_eq!(read_currency("$", &us), Ok("USD"));
        // Two dollars named: a bare `$` is ambiguous.
        let both = Conventions::detect("US$ 5 and C$ 7 and CAD 3 and $ 4");
        assert_eq!(
            read_currency("$", &both),
            Err(CurrencyError::Ambiguous {
                text: "$".into(),
                candidates: vec!["USD", "CAD"],
            })
        );
        let forced = Conventions::new().with_currencies(&["MYR"]);
        assert_eq!(forced.map(|c| read_currency("$", &c)), Ok(Ok("MYR")));
    }

    #[test]
    fn finders_take_the_longest_mark() {
        assert_eq!(found("TOTAL AMT(RM) RM60.30"), ["RM", "RM"]);
        assert_eq!(found("US$ 1,200 and $5"), ["US$", "$"]);
        assert_eq!(found("in U.S. dollars or euros"), ["U.S. dollars", "euros"]);
        assert_eq!(found("1.200 pesos mexicanos"), ["pesos mexicanos"]);
        // Codes that are words only next to numbers; other capitals are not codes.
        assert_eq!(found("ALL RIGHTS RESERVED, TOTAL 5 ALL"), ["ALL"]);
        assert!(found("FORM RMX USDA the ABC, ACME SDN BHD (1135772-K)").is_empty());
        assert_eq!(found("TOTAL (MYR) : 5.00, BHD 2.500"), ["MYR", "BHD"]);
        assert_eq!(found("USD1,200 or 1,200USD"), ["USD", "USD"]);
    }
}
