//! Scale words: [`Scale`], [`find_scales`] and [`read_scale`], over the words
//! [`Scale::parse_unit`] reads (`thousand`, `million`, `billion`, `trillion`, `k`, `M`, `bn`,
//! `mn`, `mil`, `millones`, `mil millones`, `miles de millones`, `billones`, ...).
//!
//! Indian `lakh` and `crore` are not read: [`Scale`] has no variant for 10^5 and 10^7, and
//! adding one would break exhaustive matches on it.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::currency::currencies_in;
use super::token::{scan, Kind, Toks};

/// The longest scale word, in tokens (`miles de millones`).
const MAX_TOKENS: usize = 5;

/// Abbreviations that are also other words or units (`m` metres, `mm` millimetres, `k`,
/// Spanish `mil`): offered only on an amount of money.
fn is_abbreviation(word: &str) -> bool {
    word.chars().count() <= 3 || word == "m€"
}

/// The token before `i`, whitespace aside.
fn before(t: &Toks<'_>, i: usize) -> Option<usize> {
    let k = i.checked_sub(1)?;
    if t.kind(k) == Some(Kind::Space) {
        k.checked_sub(1)
    } else {
        Some(k)
    }
}

/// The first token of the number that ends at token `k` (`1,330.5`), if `k` ends one.
fn number_start(t: &Toks<'_>, k: usize) -> Option<usize> {
    if t.kind(k) != Some(Kind::Num) {
        return None;
    }
    let mut s = k;
    while s >= 2 && matches!(t.other(s - 1), Some('.' | ',')) && t.kind(s - 2) == Some(Kind::Num) {
        s -= 2;
    }
    Some(s)
}

fn scale_at(t: &Toks<'_>, i: usize, money: &[Range<usize>]) -> Option<(usize, Scale)> {
    if t.kind(i) != Some(Kind::Word) {
        return None;
    }
    let number = before(t, i).and_then(|k| number_start(t, k));
    let after_number = number.is_some();
    // A currency just before the number (`$5M`, `EUR 2.1bn`).
    let money_before = number
        .and_then(|s| before(t, s))
        .and_then(|p| t.t.get(p))
        .is_some_and(|tok| money.iter().any(|r| r.end == tok.end));
    let last = (i + MAX_TOKENS).min(t.len());
    for b in (i + 1..=last).rev() {
        if t.kind(b - 1) == Some(Kind::Space) || !t.end_ok(b) {
            continue;
        }
        let words = phrase(t, i, b);
        let Some(scale) = scale_word(&words) else {
            continue;
        };
        if scale == Scale::Units || words.ends_with(" of") {
            continue;
        }
        // `th` after a number is an ordinal (`18th`), not thousands.
        if words == "th" {
            continue;
        }
        if is_abbreviation(&words) {
            let money_after =
                t.t.get(t.sp(b))
                    .is_some_and(|tok| money.iter().any(|r| r.start == tok.start));
            if !after_number || !(money_before || money_after) {
                continue;
            }
        }
        // English `miles` is a distance: Spanish `miles` is offered only before `de` (`miles
        // de euros`) or after a number (`305.624 miles`, which English `10 miles` also is).
        if words == "miles" && !after_number && !t.sp_req(b).is_some_and(|k| t.is_word(k, "de")) {
            continue;
        }
        return Some((b, scale));
    }
    None
}

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

/// Every scale word `text` writes, as byte ranges: each the longest at its place (`miles de
/// millones` whole, not `miles` and `millones`), in order, not overlapping. Abbreviations
/// (`k`, `M`, `bn`, `mil`) are offered only on an amount of money: right after a number with a
/// currency before it or after them (`$5M`, `EUR 2.1bn`, `3,2 mil euros`; not `12M WIRE`,
/// `6.4MM`, `15/4B`); `th` never (`18th`); full words anywhere (`in millions`). Each reads with
/// [`read_scale`] and [`Scale::parse_unit`].
pub fn find_scales(text: &str) -> Vec<Range<usize>> {
    let t = Toks::new(text);
    let money: Vec<Range<usize>> = currencies_in(&t).into_iter().map(|(r, _)| r).collect();
    scan(&t, |t, i| scale_at(t, i, &money))
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

/// The scale one scale word names (as [`find_scales`] finds them; case, whitespace runs and a
/// final dot aside): [`Scale::parse_unit`] without a `per ...` qualifier.
pub fn read_scale(text: &str) -> Result<Scale, ScaleError> {
    match Scale::parse_unit(Some(text)) {
        Ok((scale, None)) if !text.trim().is_empty() => Ok(scale),
        Ok(_) => Err(ScaleError::Unknown(text.to_owned())),
        Err(e) => Err(e),
    }
}

/// A power-of-ten scale a document writes amounts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// 1.
    Units,
    /// 10^3.
    Thousands,
    /// 10^6.
    Millions,
    /// 10^9.
    Billions,
    /// 10^12.
    Trillions,
}

/// Why a unit could not be read as a scale.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    /// The unit has words that are neither a scale nor a `per ...` qualifier.
    #[error(
        "unit `{0}` is not a known scale word (thousand, million, billion, mil millones, ...)"
    )]
    Unknown(String),
}

impl Scale {
    /// The factor to multiply by (`Millions` → 1e6).
    pub fn factor(self) -> f64 {
        match self {
            Scale::Units => 1.0,
            Scale::Thousands => 1e3,
            Scale::Millions => 1e6,
            Scale::Billions => 1e9,
            Scale::Trillions => 1e12,
        }
    }

    /// Reads a unit as written: a scale word (English or Spanish, long or abbreviated),
    /// optionally followed by a `per ...` / `por ...` qualifier, which is returned.
    ///
    /// `None` and a bare qualifier are [`Scale::Units`]. Spanish `billón` is 10^12, as in Spanish.
    /// Case and whitespace runs do not matter (`Mil\nmillones`); a final dot is dropped
    /// (`bn.`). [`crate::read::find_scales`] finds these words in a text.
    pub fn parse_unit(unit: Option<&str>) -> Result<(Scale, Option<String>), ScaleError> {
        let Some(raw) = unit else {
            return Ok((Scale::Units, None));
        };
        let text = raw
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        let text = text.trim_end_matches('.');
        let (scale_part, qualifier) = split_qualifier(text);
        let scale =
            scale_word(scale_part.trim()).ok_or_else(|| ScaleError::Unknown(raw.to_owned()))?;
        Ok((scale, qualifier.map(str::to_owned)))
    }
}

/// The scale a lowercase scale word names (whitespace runs as single spaces); `""` is
/// [`Scale::Units`].
fn scale_word(word: &str) -> Option<Scale> {
    Some(match word {
        "" | "units" | "unit" | "unidades" => Scale::Units,
        "thousand" | "thousands" | "k" | "th" | "mil" | "miles" | "thousand of" => Scale::Thousands,
        "million" | "millions" | "mn" | "mm" | "m" | "mio" | "mln" | "millón" | "millon"
        | "millones" | "m€" => Scale::Millions,
        "billion" | "billions" | "bn" | "bln" | "b" | "mil millones" | "miles de millones"
        | "millardo" | "millardos" | "milliard" | "milliards" | "mrd" => Scale::Billions,
        "trillion" | "trillions" | "tn" | "trn" | "billón" | "billon" | "billones" => {
            Scale::Trillions
        }
        _ => return None,
    })
}

fn split_qualifier(text: &str) -> (&str, Option<&str>) {
    for marker in ["per ", "por ", "/"] {
        if let Some(pos) = text.find(marker) {
            if pos == 0 || text[..pos].ends_with(' ') {
                return (&text[..pos], Some(text[pos..].trim()));
            }
        }
    }
    (text, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        find_scales(text)
            .into_iter()
            .map(|r| text.get(r).unwrap_or("?"))
            .collect()
    }

    #[test]
    fn scale_words_found_whole() {
        assert_eq!(
            found("entre 2,26 miles de millones y 2,28 mil millones, o 2.300 millones"),
            ["miles de millones", "mil millones", "millones"]
        );
        assert_eq!(
            found("$1.3 billion and $1,330 million"),
            ["billion", "million"]
        );
        assert_eq!(
            found("$5M, USD 10k, EUR 2.1bn, 3,2 mil euros"),
            ["M", "k", "bn", "mil"]
        );
        assert!(found("12M WIRE, 6.4MM (WHITE), JALAN 15/4B, 10k users, the 18th").is_empty());
        assert_eq!(found("(in millions)"), ["millions"]);
        assert_eq!(found("en miles de euros"), ["miles"]);
        // Abbreviations away from numbers, and English miles, are not scales.
        assert!(found("a mil of wire, miles away, a m b k").is_empty());
        assert!(found("units of 5 units").is_empty());
    }

    #[test]
    fn every_found_word_reads() {
        let text = "1 thousand $2 K $3 mn $4 MM $5 Mio $6 mln $7 bn $8 B $9 tn 10 mil € 11 millón \
                    12 Mil\nmillones 13 millardos 14 billones 15 trillion 16 m€ EUR";
        let ranges = find_scales(text);
        assert_eq!(ranges.len(), 16, "{:?}", found(text));
        for r in ranges {
            let word = text.get(r).unwrap_or("");
            assert!(read_scale(word).is_ok(), "{word}");
            assert!(Scale::parse_unit(Some(word)).is_ok(), "{word}");
        }
        assert_eq!(read_scale("Mil\nmillones"), Ok(Scale::Billions));
        assert_eq!(read_scale("bn."), Ok(Scale::Billions));
        assert!(read_scale("").is_err());
        assert!(read_scale("million per share").is_err());
        assert!(read_scale("lakh").is_err());
    }
}
