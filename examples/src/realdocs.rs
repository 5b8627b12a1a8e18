//! Real documents: shop receipts (ICDAR 2019 SROIE) and non-disclosure agreements
//! (Kleister-NDA), each with a contract written as a new user would write it from the guide, and
//! the data sets' own scoring.
//!
//! The documents are not in the repository (they are public research data sets; see
//! `docs/benchmarks.md`, "Real documents"): `realdocs --receipts FILE --ndas FILE` reads JSON
//! lines `{id, text, truth}`.
//!
//! Scoring, per data set:
//! - receipts: `company` and `address` compared upper-cased with whitespace runs collapsed
//!   (`address` with all whitespace removed: the labels space commas differently from the OCR),
//!   `date` as a calendar date (the label read day-first, as Malaysian receipts write it),
//!   `total` as a number. A receipt is fully right when company, date and total are (the three
//!   fields the issue measured); all four is reported too.
//! - agreements: Kleister-NDA's metric, F1 per key over the (document, key, value) triples,
//!   values upper-cased (commas dropped from party names, as the labels drop them), micro-averaged.

use std::collections::BTreeMap;

use contract_core::{Amount, Contract, DateValue, DurationValue, NameValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A shop receipt, as a new user writes it from the guide.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// The name of the company or shop that issued the receipt, as printed.
    #[contract(grounded)]
    pub company: Option<String>,
    /// The date of the purchase.
    #[contract(grounded)]
    pub date: Option<DateValue>,
    /// The address of the shop, as printed.
    #[contract(grounded)]
    pub address: Option<String>,
    /// The total amount paid.
    #[contract(grounded)]
    pub total: Option<Amount>,
}

/// A non-disclosure agreement, as a new user writes it from the guide.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nda {
    /// The parties that sign the agreement (companies or people), each name as written.
    #[contract(grounded, len = 0..=8)]
    pub parties: Vec<NameValue>,
    /// The date the agreement takes effect.
    #[contract(grounded)]
    pub effective_date: Option<DateValue>,
    /// The US state or the country whose law governs the agreement.
    #[contract(grounded)]
    pub jurisdiction: Option<String>,
    /// How long the agreement lasts.
    #[contract(grounded)]
    pub term: Option<DurationValue>,
}

/// One labelled document.
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    /// Its id.
    pub id: String,
    /// Its text.
    pub text: String,
    /// The labels.
    pub truth: Value,
}

/// Reads JSON lines `{id, text, truth}`.
pub fn read_rows(path: &std::path::Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Which rows a run uses: the development rows (the first `dev`), the held-out rest, or all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// The first rows, used to develop.
    Dev,
    /// The rows after them, used to report.
    Test,
    /// Every row.
    All,
}

impl Split {
    /// The rows of `rows` in this split, the first `dev` being the development rows.
    pub fn pick<T: Clone>(self, rows: &[T], dev: usize) -> Vec<T> {
        let dev = dev.min(rows.len());
        match self {
            Split::Dev => rows[..dev].to_vec(),
            Split::Test => rows[dev..].to_vec(),
            Split::All => rows.to_vec(),
        }
    }
}

/// Development rows of the receipts file (the other 40 are held out).
pub const RECEIPTS_DEV: usize = 20;
/// Development rows of the agreements file (the other 28 are held out).
pub const NDAS_DEV: usize = 15;

/// Upper case, whitespace runs as one space, trimmed.
pub fn norm_text(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_uppercase()
}

/// Upper case without any whitespace.
pub fn norm_tight(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_uppercase()
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// A receipt label's date read day-first (`19/10/2018`, `01-03-18`, `30 MAR 2018`,
/// `20180304`, `15.03.2018`), as ISO `YYYY-MM-DD`.
pub fn label_date(s: &str) -> Option<String> {
    let s = s.trim().to_uppercase();
    let year = |y: &str| -> Option<i32> {
        let n: i32 = y.parse().ok()?;
        Some(if y.len() == 2 { 2000 + n } else { n })
    };
    let iso =
        |y: i32, m: u32, d: u32| chrono_like(y, m, d).then(|| format!("{y:04}-{m:02}-{d:02}"));
    if s.len() == 8 && s.chars().all(|c| c.is_ascii_digit()) {
        return iso(
            s[..4].parse().ok()?,
            s[4..6].parse().ok()?,
            s[6..].parse().ok()?,
        );
    }
    let parts: Vec<&str> = s
        .split(|c: char| c == '/' || c == '-' || c == '.' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() != 3 {
        return None;
    }
    let d: u32 = parts[0].parse().ok()?;
    let m: u32 = match parts[1].parse() {
        Ok(m) => m,
        Err(_) => MONTHS.iter().position(|n| parts[1].starts_with(n))? as u32 + 1,
    };
    iso(year(parts[2])?, m, d)
}

fn chrono_like(y: i32, m: u32, d: u32) -> bool {
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// A label's amount as a number (`$8.20`, `RM 60.30`, `1,200.00`).
pub fn label_number(s: &str) -> Option<f64> {
    let t: String = s
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    t.parse().ok()
}

/// How one receipt's fields came out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReceiptScore {
    /// Company right.
    pub company: bool,
    /// Date right.
    pub date: bool,
    /// Address right.
    pub address: bool,
    /// Total right.
    pub total: bool,
}

impl ReceiptScore {
    /// Company, date and total right.
    pub fn three(&self) -> bool {
        self.company && self.date && self.total
    }

    /// All four right.
    pub fn four(&self) -> bool {
        self.three() && self.address
    }
}

/// The ISO date a filled [`DateValue`] stands for (what downstream code reads).
pub fn date_iso(d: &DateValue) -> Option<String> {
    (d.iso.len() == 10).then(|| d.iso.clone())
}

/// Scores a filled receipt against its labels.
pub fn score_receipt(value: Option<&Receipt>, truth: &Value) -> ReceiptScore {
    let t = |k: &str| truth.get(k).and_then(Value::as_str);
    let Some(v) = value else {
        return ReceiptScore::default();
    };
    ReceiptScore {
        company: match (v.company.as_deref(), t("company")) {
            (Some(a), Some(b)) => norm_text(a) == norm_text(b),
            _ => false,
        },
        address: match (v.address.as_deref(), t("address")) {
            (Some(a), Some(b)) => norm_tight(a) == norm_tight(b),
            _ => false,
        },
        date: match (
            v.date.as_ref().and_then(date_iso),
            t("date").and_then(label_date),
        ) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
        total: match (v.total.as_ref(), t("total").and_then(label_number)) {
            (Some(a), Some(b)) => (a.value - b).abs() < 0.005,
            _ => false,
        },
    }
}

/// An agreement's (key, value) pairs as Kleister-NDA scores them: values upper-cased, party
/// names without commas, whitespace runs collapsed.
pub fn nda_pairs(nda: &Nda) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in &nda.parties {
        out.push(("party".to_owned(), norm_party(p.full())));
    }
    if let Some(d) = nda.effective_date.as_ref().and_then(date_iso) {
        out.push(("effective_date".to_owned(), d));
    }
    if let Some(j) = &nda.jurisdiction {
        out.push(("jurisdiction".to_owned(), norm_text(j)));
    }
    if let Some(t) = nda.term.as_ref().and_then(|t| t.normalized.as_deref()) {
        out.push(("term".to_owned(), norm_text(t)));
    }
    out.sort();
    out.dedup();
    out
}

fn norm_party(p: &str) -> String {
    norm_text(&p.replace(',', " "))
}

/// The labels' (key, value) pairs, normalised as [`nda_pairs`].
pub fn nda_truth_pairs(truth: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(map) = truth.as_object() {
        for (k, vs) in map {
            for v in vs
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let v = if k == "party" {
                    norm_party(v)
                } else {
                    norm_text(v)
                };
                out.push((k.clone(), v));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// True positives, false positives and false negatives per key.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Per key: (tp, fp, fn).
    pub keys: BTreeMap<String, (usize, usize, usize)>,
}

impl Counts {
    /// Adds one document's predicted and true pairs.
    pub fn add(&mut self, predicted: &[(String, String)], truth: &[(String, String)]) {
        for key in ["effective_date", "jurisdiction", "party", "term"] {
            let p: Vec<_> = predicted.iter().filter(|(k, _)| k == key).collect();
            let t: Vec<_> = truth.iter().filter(|(k, _)| k == key).collect();
            let tp = p.iter().filter(|x| t.contains(x)).count();
            let e = self.keys.entry(key.to_owned()).or_default();
            e.0 += tp;
            e.1 += p.len() - tp;
            e.2 += t.len() - tp;
        }
    }

    /// F1 of one key, or of all keys together (`None`).
    pub fn f1(&self, key: Option<&str>) -> f64 {
        let (tp, fp, fneg) = self
            .keys
            .iter()
            .filter(|(k, _)| key.is_none_or(|want| want == k.as_str()))
            .fold((0, 0, 0), |a, (_, c)| (a.0 + c.0, a.1 + c.1, a.2 + c.2));
        if tp == 0 {
            return 0.0;
        }
        let p = tp as f64 / (tp + fp) as f64;
        let r = tp as f64 / (tp + fneg) as f64;
        2.0 * p * r / (p + r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_day_first() {
        assert_eq!(label_date("19/10/2018").as_deref(), Some("2018-10-19"));
        assert_eq!(label_date("01-03-18").as_deref(), Some("2018-03-01"));
        assert_eq!(label_date("30 MAR 2018").as_deref(), Some("2018-03-30"));
        assert_eq!(label_date("20180304").as_deref(), Some("2018-03-04"));
        assert_eq!(label_date("31/02/2018"), None);
        assert_eq!(label_number("$8.20"), Some(8.2));
        assert_eq!(label_number("RM 1,060.30"), Some(1060.3));
    }

    #[test]
    fn f1_per_key() {
        let mut c = Counts::default();
        let p = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        c.add(
            &[p("party", "A"), p("party", "B"), p("term", "3 YEARS")],
            &[p("party", "A"), p("term", "2 YEARS")],
        );
        assert_eq!(c.keys["party"], (1, 1, 0));
        assert_eq!(c.keys["term"], (0, 1, 1));
        assert!((c.f1(Some("party")) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.f1(Some("term")), 0.0);
    }
}
