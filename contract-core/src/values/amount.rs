use serde::{Deserialize, Serialize};

use crate::context::DocContext;
use crate::read::{read_currency, read_scale, CurrencyError, Scale, ScaleError};
use crate::validate::{Violation, ViolationKind};
use crate::Contract;

/// A money amount as the document writes it; code reads its currency and scale.
///
/// The model copies: `7.23`, `USD`, `billion` for "USD 7.23 billion"; `60.30`, `RM`, null for
/// "RM 60.30"; `1200`, null, null for "1,200" with no currency next to it. The library computes
/// [`Amount::code`], the ISO 4217 code, when it reads the amount (normalisation): from the
/// currency as written (`RM` is MYR, `€` EUR; an ambiguous `$` or `kr` by the currencies the
/// document names elsewhere, else the symbol's usual code), or, when none is written next to
/// the number, the one currency the document writes, if every currency mark it writes reads
/// as the same code (a receipt that writes `RM` in its header, a release that writes only `$`). A currency it
/// cannot read, or a scale word it does not know, is a violation, never a guess.
/// [`Amount::in_scale`] applies the scale word.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(normalize = Amount::read)]
pub struct Amount {
    /// The number as written, without thousands separators and without applying the scale word.
    #[contract(grounded(with_container))]
    pub value: f64,
    /// The currency as written next to the number (`$`, `RM`, `€`, `USD`, `euros`), or null when none is written there.
    #[contract(grounded(with_container), form = currency)]
    pub currency: Option<String>,
    /// The scale word as written after the number (`billion`, `million`, `mil millones`, `k`), or null.
    // At most 40 characters: a scale word is short, and the bound keeps a masked model from
    // writing one until its token limit (SmolLM2-135M did, once in 40 releases).
    #[contract(len = 1..=40, grounded(with_container), form = scale)]
    pub unit: Option<String>,
    /// The ISO 4217 code of the currency, computed by the library (null when the document
    /// tells none).
    #[contract(skip)]
    #[serde(default)]
    pub code: Option<String>,
}

impl Amount {
    /// An amount as written, not yet read (`code` is computed by [`Amount::read`]).
    pub fn new(value: f64, currency: Option<&str>, unit: Option<&str>) -> Amount {
        Amount {
            value,
            currency: currency.map(str::to_owned),
            unit: unit.map(str::to_owned),
            code: None,
        }
    }

    /// Computes [`Amount::code`] with the document's conventions and checks that the unit is
    /// a scale word: what the extractor and `from_json` run after decoding
    /// (`#[contract(normalize = ..)]`).
    pub fn read(&mut self, cx: &DocContext<'_>) -> Result<(), Violation> {
        let conventions = cx.conventions();
        self.code = match self.currency.as_deref().map(str::trim) {
            Some(c) if !c.is_empty() => match read_currency(c, conventions) {
                Ok(code) => Some(code.to_owned()),
                Err(e) => {
                    return Err(Violation::new(
                        "/currency",
                        ViolationKind::FormatMismatch,
                        currency_message(&e),
                    ))
                }
            },
            _ => document_currency(cx),
        };
        if let Some(u) = self.unit.as_deref() {
            if let Err(e) = read_scale(u) {
                return Err(Violation::new(
                    "/unit",
                    ViolationKind::FormatMismatch,
                    e.to_string(),
                ));
            }
        }
        Ok(())
    }

    /// The ISO 4217 code: [`Amount::code`] when computed, else the currency as written when it
    /// is already a three-letter code in capitals.
    pub fn currency_code(&self) -> Option<&str> {
        self.code.as_deref().or_else(|| {
            self.currency
                .as_deref()
                .map(str::trim)
                .filter(|c| c.len() == 3 && c.chars().all(|x| x.is_ascii_uppercase()))
        })
    }

    /// The value with its scale word applied (`7.23 billion` is 7,230,000,000).
    pub fn scaled(&self) -> Result<f64, ScaleError> {
        self.in_scale(Scale::Units)
    }
}

/// The one currency a document writes: every currency mark it writes (`RM`, `$`, `euros`)
/// read as the same code with its conventions; `None` when it writes none, or several.
fn document_currency(cx: &DocContext<'_>) -> Option<String> {
    let conventions = cx.conventions();
    if let [only] = conventions.currencies() {
        return Some((*only).to_owned());
    }
    if !conventions.currencies().is_empty() {
        return None;
    }
    let text = cx.text();
    let mut code: Option<&'static str> = None;
    for r in crate::read::find_currencies(&text) {
        let c = read_currency(text.get(r)?, conventions).ok()?;
        match code {
            Some(seen) if seen != c => return None,
            _ => code = Some(c),
        }
    }
    code.map(str::to_owned)
}

fn currency_message(e: &CurrencyError) -> String {
    format!("{e}: copy the currency as the document writes it, or null")
}

impl Amount {
    /// The value expressed in `scale`: 7.23 `billion` in [`Scale::Millions`] is 7230.
    ///
    /// Fails when the unit is not a scale word the code knows; it never guesses.
    pub fn in_scale(&self, scale: Scale) -> Result<f64, ScaleError> {
        let (own, _) = Scale::parse_unit(self.unit.as_deref())?;
        Ok(self.value * own.factor() / scale.factor())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(value: f64, unit: Option<&str>) -> Amount {
        Amount::new(value, Some("USD"), unit)
    }

    #[test]
    fn billions_become_millions() {
        let a = amount(7.23, Some("billion"));
        assert!((a.in_scale(Scale::Millions).unwrap() - 7230.0).abs() < 1e-9);
    }

    #[test]
    fn spanish_scales() {
        let a = amount(1.5, Some("miles de millones"));
        assert!((a.in_scale(Scale::Millions).unwrap() - 1500.0).abs() < 1e-9);
        let b = amount(2.0, Some("billones"));
        assert!((b.in_scale(Scale::Billions).unwrap() - 2000.0).abs() < 1e-9);
        let c = amount(3.0, Some("mil millones"));
        assert!((c.in_scale(Scale::Millions).unwrap() - 3000.0).abs() < 1e-9);
    }

    #[test]
    fn qualifier_is_not_a_scale() {
        let a = amount(1200.0, Some("per claim"));
        assert_eq!(a.in_scale(Scale::Units).unwrap(), 1200.0);
        let (scale, q) = Scale::parse_unit(Some("million per year")).unwrap();
        assert_eq!(scale, Scale::Millions);
        assert_eq!(q.as_deref(), Some("per year"));
    }

    #[test]
    fn unknown_units_are_errors() {
        assert_eq!(
            amount(5.0, Some("lakh")).in_scale(Scale::Millions),
            Err(ScaleError::Unknown("lakh".into()))
        );
    }

    #[test]
    fn the_library_reads_the_currency() {
        let source = crate::Source::from_text("TOTAL RM 60.30\nCASH RM 70.30");
        let a = Amount::from_json_in(
            r#"{"value": 60.30, "currency": "RM", "unit": null}"#,
            &source,
        )
        .unwrap();
        assert_eq!(a.code.as_deref(), Some("MYR"));
        // None written next to the number: the document's one currency.
        let b = Amount::from_json_in(
            r#"{"value": 70.30, "currency": null, "unit": null}"#,
            &source,
        )
        .unwrap();
        assert_eq!(b.code.as_deref(), Some("MYR"));
        // Without a document, no code to compute.
        let c = Amount::from_json(r#"{"value": 1, "currency": null, "unit": null}"#).unwrap();
        assert_eq!(c.code, None);
        let d =
            Amount::from_json(r#"{"value": 7.23, "currency": "USD", "unit": "billion"}"#).unwrap();
        assert_eq!(d.code.as_deref(), Some("USD"));
        assert!((d.scaled().unwrap() - 7.23e9).abs() < 1.0);
        // A currency or a unit the library cannot read is a violation, not a guess.
        let err =
            Amount::from_json(r#"{"value": 1, "currency": "XQZ", "unit": null}"#).unwrap_err();
        assert_eq!(err.0[0].path, "/currency");
        let err = Amount::from_json(r#"{"value": 1, "currency": null, "unit": "lakh crore blah"}"#)
            .unwrap_err();
        assert_eq!(err.0[0].path, "/unit");
        // The model cannot write the code.
        let err =
            Amount::from_json(r#"{"value": 1, "currency": null, "unit": null, "code": "USD"}"#)
                .unwrap_err();
        assert_eq!(err.0[0].path, "/code");
    }
}
