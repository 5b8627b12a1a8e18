//! The filings study: revenue guidance from earnings releases, English and Spanish.
//!
//! The contracts ask the model to *copy*: each end of the guidance as an [`Amount`] (the number
//! as written, the currency and the scale word as written) and the period as written. The
//! library reads the rest: [`Period`] places "the upcoming quarter" against the quarter the
//! release reports on, [`Amount`] reads the currency's code and applies the scale word. The
//! model is never asked to convert billions or to work out which quarter "the quarter ending
//! September 30" is; measured here, small models asked to do that directly got 0-1 of 10
//! releases right.
//!
//! What the example owns is the contract ([`GroundedGuidance`], with its question and its
//! acceptance check [`coming_guidance`]) and the scoring ([`Expected`]); evidence selection,
//! grounding and reading the values are the library's.
//!
//! [`generate()`] writes synthetic releases with ground truth; [`study`] (feature `local`) runs the
//! reliability ladder's modes over them.

pub mod generate;
pub mod study;

use contract_core::read::read_period;
use contract_core::{Amount, CheckResult, Contract, DocContext, Period, Scale, Violation};
use serde::{Deserialize, Serialize};

pub use generate::{generate, Filing};

/// The seed of the default document set.
pub const DEFAULT_SEED: u64 = 2026;
/// Documents in the default set.
pub const DEFAULT_DOCS: usize = 40;

/// Revenue guidance for a coming period, copied from an earnings release exactly as written.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(both_or_neither(period, low, high))]
pub struct ReleaseGuidance {
    /// The period the revenue guidance is for, copied as written ("third quarter of 2024", "Q3 2024", "tercer trimestre de 2024"); null when the release gives no revenue guidance or withdraws it.
    #[contract(len = 1..=60)]
    pub period: Option<String>,
    /// Low end of the revenue guidance as written (for a single figure, the same as high).
    pub low: Option<Amount>,
    /// High end of the revenue guidance as written.
    pub high: Option<Amount>,
    /// Number of the line that states the guidance, or null.
    #[contract(min = 1)]
    pub line: Option<u32>,
}

/// Revenue guidance grounded in the release: the sentence that states it is copied first, and
/// every value is copied from inside that sentence.
///
/// Under the local backend's grounded mask the model cannot write a period, a number, a
/// currency or a scale word the quoted sentence does not contain, nor a quote the release does
/// not contain; with any backend a reply that does is rejected (`not_in_source`). The library
/// reads the period (placed against the quarter the release reports on) and each amount
/// (currency code, scale); [`coming_guidance`] refuses the quarter the release reports on (a
/// result, not guidance), so that the next passage is tried. The question the library asks of
/// each passage is the one measured best on the development releases (`docs/benchmarks.md`,
/// "Passage choice").
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(
    both_or_neither(period, low, high),
    question = "does this sentence say how much revenue the company expects to make in a future period?",
    check = coming_guidance
)]
pub struct GroundedGuidance {
    /// The line of the release that states its revenue guidance for a coming period, copied whole; null when the release gives no revenue guidance or withdraws it.
    // A whole line, not any substring: measured on the 40 development releases with
    // SmolLM2-135M, a free substring let the model stop after one word (`"quote": "2025"` in
    // most rows), leaving nothing to copy the values from.
    #[contract(grounded(line))]
    pub quote: Option<String>,
    /// The period the guidance is for, copied from the quote ("third quarter of 2024", "Q3 2024", "the upcoming quarter"); null when there is no guidance.
    #[contract(grounded(in = quote))]
    pub period: Option<Period>,
    /// Low end of the guidance, copied from the quote (for a single figure, the same as high).
    #[contract(grounded(in = quote))]
    pub low: Option<Amount>,
    /// High end of the guidance, copied from the quote.
    #[contract(grounded(in = quote))]
    pub high: Option<Amount>,
}

/// The acceptance check: guidance is for a period after the one the release reports on (the
/// first period it names with its year); the reported period itself, or an earlier one, is a
/// result. A check that reads the document (`check = fn(&Self, &DocContext)`): the library
/// tries the next passage when it refuses.
pub fn coming_guidance(g: &GroundedGuidance, cx: &DocContext<'_>) -> CheckResult {
    let (Some(period), Some(reported)) = (
        g.period.as_ref().and_then(Period::resolved),
        cx.conventions().reference_period(),
    ) else {
        return Ok(());
    };
    if period.is_after(&reported) {
        Ok(())
    } else {
        Err(Violation::new(
            "/period",
            contract_core::ViolationKind::CrossField,
            format!("{period} is not after {reported}, the period the release reports on: that is a result, not guidance"),
        ))
    }
}

/// Normalised guidance: quarter, year, and both ends in millions of `currency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    /// Fiscal quarter, 1-4.
    pub quarter: u8,
    /// Year.
    pub year: u16,
    /// Low end, millions.
    pub low: f64,
    /// High end, millions.
    pub high: f64,
    /// ISO 4217 code.
    pub currency: String,
}

impl Expected {
    /// Equal quarter, year and currency, and both ends within a millionth (relative).
    pub fn matches(&self, other: &Expected) -> bool {
        self.quarter == other.quarter
            && self.year == other.year
            && self.currency == other.currency
            && same_millions(self.low, other.low)
            && same_millions(self.high, other.high)
    }
}

/// Two amounts in millions are the same within a millionth (relative).
pub(crate) fn same_millions(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// Whether an extraction's normalised value is the ground truth (`None` = no guidance).
pub fn is_correct(value: Option<&Expected>, truth: Option<&Expected>) -> bool {
    match (value, truth) {
        (None, None) => true,
        (Some(v), Some(t)) => v.matches(t),
        _ => false,
    }
}

/// Why a filled contract could not be normalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormalizeError {
    /// The period names no quarter, or no year.
    #[error("period `{0}` names no quarter and year the library can read")]
    Period(String),
    /// A unit is not a scale word.
    #[error("amount unit: {0}")]
    Unit(String),
    /// An amount has no currency code (none written, none the release names).
    #[error("an amount has no currency the library can read")]
    NoCurrency,
    /// The two ends are in different currencies.
    #[error("low is in {0} and high in {1}")]
    Currency(String, String),
    /// Only some of period, low and high are set (the contract's rule forbids it).
    #[error("period, low and high must be all set or all null")]
    Partial,
}

/// A filled guidance contract as the scoring reads it: a quarter and a year, and both ends.
pub trait Guidance {
    /// The quarter and year of the period (read by the library), or why there is none; `None`
    /// when the contract says there is no guidance.
    fn quarter(&self, cx: &DocContext<'_>) -> Option<Result<(u8, u16), NormalizeError>>;
    /// Both ends, when set.
    fn ends(&self) -> (Option<&Amount>, Option<&Amount>);
}

impl Guidance for ReleaseGuidance {
    fn quarter(&self, cx: &DocContext<'_>) -> Option<Result<(u8, u16), NormalizeError>> {
        let p = self.period.as_deref()?;
        Some(
            read_period(p, cx.conventions())
                .ok()
                .and_then(|r| Some((r.quarter_number()?, u16::try_from(r.year()).ok()?)))
                .ok_or_else(|| NormalizeError::Period(p.to_owned())),
        )
    }
    fn ends(&self) -> (Option<&Amount>, Option<&Amount>) {
        (self.low.as_ref(), self.high.as_ref())
    }
}

impl Guidance for GroundedGuidance {
    fn quarter(&self, _: &DocContext<'_>) -> Option<Result<(u8, u16), NormalizeError>> {
        let p = self.period.as_ref()?;
        Some(
            p.quarter
                .zip(p.year.and_then(|y| u16::try_from(y).ok()))
                .ok_or_else(|| NormalizeError::Period(p.original.clone())),
        )
    }
    fn ends(&self) -> (Option<&Amount>, Option<&Amount>) {
        (self.low.as_ref(), self.high.as_ref())
    }
}

/// Normalises a filled contract with its release as context (`cx`): `Ok(None)` when it says
/// there is no guidance. The quarter and year are the library's reading of the period, the
/// ends are in millions with their scale words applied, the currency is the library's code.
pub fn normalize<G: Guidance>(
    g: &G,
    cx: &DocContext<'_>,
) -> Result<Option<Expected>, NormalizeError> {
    let (low, high) = g.ends();
    let (quarter, year) = match (g.quarter(cx), low, high) {
        (None, None, None) => return Ok(None),
        (Some(q), Some(_), Some(_)) => q?,
        _ => return Err(NormalizeError::Partial),
    };
    let (Some(low), Some(high)) = (low, high) else {
        return Err(NormalizeError::Partial);
    };
    let code = |a: &Amount| {
        a.currency_code()
            .map(str::to_owned)
            .ok_or(NormalizeError::NoCurrency)
    };
    let (lc, hc) = (code(low)?, code(high)?);
    if lc != hc {
        return Err(NormalizeError::Currency(lc, hc));
    }
    Ok(Some(Expected {
        quarter,
        year,
        low: millions(low)?,
        high: millions(high)?,
        currency: lc,
    }))
}

/// An amount in millions, its scale word applied.
pub fn millions(a: &Amount) -> Result<f64, NormalizeError> {
    let m = a
        .in_scale(Scale::Millions)
        .map_err(|e| NormalizeError::Unit(e.to_string()))?;
    // Round away binary noise (1.25 billion = 1250.0000000000002 million).
    Ok((m * 1e6).round() / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract_core::Source;

    fn amount(value: f64, currency: &str, unit: Option<&str>) -> Amount {
        let mut a = Amount::new(value, Some(currency), unit);
        a.code = Some(currency.to_owned());
        a
    }

    #[test]
    fn amounts_to_millions() {
        assert_eq!(millions(&amount(1.25, "USD", Some("billion"))), Ok(1250.0));
        assert_eq!(
            millions(&amount(3100.0, "EUR", Some("millones"))),
            Ok(3100.0)
        );
        assert_eq!(
            millions(&amount(1.3, "EUR", Some("miles de millones"))),
            Ok(1300.0)
        );
        assert_eq!(
            millions(&amount(2.0, "EUR", Some("mil millones"))),
            Ok(2000.0)
        );
        assert_eq!(
            millions(&amount(45210.0, "USD", Some("thousand"))),
            Ok(45.21)
        );
        assert!(matches!(
            millions(&amount(1.0, "USD", Some("bushels"))),
            Err(NormalizeError::Unit(_))
        ));
    }

    #[test]
    fn normalize_checks_every_part() {
        let doc = Source::from_text("Acme reports Q2 2024 results.");
        let cx = DocContext::of(&doc);
        let g = ReleaseGuidance {
            period: Some("Q3 2024".into()),
            low: Some(amount(1.25, "USD", Some("billion"))),
            high: Some(amount(1300.0, "USD", Some("million"))),
            line: Some(7),
        };
        let want = Expected {
            quarter: 3,
            year: 2024,
            low: 1250.0,
            high: 1300.0,
            currency: "USD".into(),
        };
        assert_eq!(normalize(&g, &cx), Ok(Some(want.clone())));
        assert!(is_correct(Some(&want), Some(&want)));
        assert!(!is_correct(None, Some(&want)));
        let mut other = g.clone();
        other.high = Some(amount(1300.0, "EUR", Some("million")));
        assert!(matches!(
            normalize(&other, &cx),
            Err(NormalizeError::Currency(..))
        ));
        let none = ReleaseGuidance {
            period: None,
            low: None,
            high: None,
            line: None,
        };
        assert_eq!(normalize(&none, &cx), Ok(None));
        assert!(is_correct(None, None));
    }

    #[test]
    fn a_perfect_copy_is_read_as_the_truth() {
        let docs = generate(DEFAULT_DOCS, DEFAULT_SEED);
        for doc in &docs {
            let source = Source::from_text(&doc.text);
            let cx = DocContext::of(&source);
            doc.answer
                .validate()
                .expect("the perfect copy fills the contract");
            // The grounded perfect copy: every value lies in the quoted sentence, which lies in
            // the release; the library reads it as the truth.
            let grounded = doc.grounded_answer();
            let json = grounded
                .to_model_json()
                .map(|v| v.to_string())
                .unwrap_or_default();
            let read = GroundedGuidance::from_json_in(&json, &source)
                .unwrap_or_else(|v| panic!("{}: {v}\n{json}", doc.id));
            assert_eq!(
                normalize(&read, &cx).as_ref(),
                Ok(&doc.truth),
                "{}: {json}\n{}",
                doc.id,
                doc.text
            );
        }
    }

    #[test]
    fn grounded_guidance_rejects_values_outside_the_quote_and_the_reported_quarter() {
        let docs = generate(DEFAULT_DOCS, DEFAULT_SEED);
        let doc = docs
            .iter()
            .find(|d| d.truth.is_some())
            .expect("a release with guidance");
        let source = Source::from_text(&doc.text);
        let mut g = doc.grounded_answer();
        // A number from elsewhere in the release, and a period that is not in the quote.
        if let Some(low) = &mut g.low {
            low.value = 1234567.5;
        }
        g.period = Some(Period::new("Q1 2031"));
        let json = g.to_model_json().map(|v| v.to_string()).unwrap_or_default();
        let err = GroundedGuidance::from_json_in(&json, &source).expect_err("invented values");
        let paths: Vec<&str> = err
            .iter()
            .filter(|v| v.kind == contract_core::ViolationKind::NotInSource)
            .map(|v| v.path.as_str())
            .collect();
        assert_eq!(paths, ["/period/original", "/low/value"], "{err}");
        // A quote the release does not contain.
        g = doc.grounded_answer();
        g.quote = Some("Revenue will double next quarter.".into());
        let json = g.to_model_json().map(|v| v.to_string()).unwrap_or_default();
        let err = GroundedGuidance::from_json_in(&json, &source).expect_err("invented quote");
        assert!(err.iter().any(|v| v.path == "/quote"), "{err}");
        // The quarter the release reports on is a result: the check refuses it.
        let release =
            "Acme Reports Third Quarter 2024 Results\nThird quarter 2024 revenue was $5 million.";
        let source = Source::from_text(release);
        let result = serde_json::json!({
            "quote": "Third quarter 2024 revenue was $5 million.",
            "period": {"original": "Third quarter 2024"},
            "low": {"value": 5, "currency": "$", "unit": "million"},
            "high": {"value": 5, "currency": "$", "unit": "million"},
        });
        let err = GroundedGuidance::from_json_in(&result.to_string(), &source)
            .expect_err("the reported quarter");
        assert_eq!(err.0[0].path, "/period", "{err}");
        assert!(err.0[0].message.contains("Q3 2024"), "{err}");
    }
}
