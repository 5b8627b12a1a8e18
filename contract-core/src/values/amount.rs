use serde::{Deserialize, Serialize};

use crate::Contract;

/// A money amount as the document writes it.
///
/// The model copies: `7.23`, `USD`, `billion` for "USD 7.23 billion"; `1200`, `USD`, `per claim`
/// for "USD 1,200 per claim". Code does the arithmetic with [`Amount::in_scale`].
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Amount {
    /// The number as written, without thousands separators and without applying the scale word.
    #[contract(grounded(with_container))]
    pub value: f64,
    /// ISO 4217 currency code.
    #[contract(pattern = "^[A-Z]{3}$")]
    pub currency: String,
    /// The scale or unit words as written after the number (`billion`, `million`, `mil millones`, `per claim`), or null.
    // At most 40 characters: a scale word is short, and the bound keeps a masked model from
    // writing one until its token limit (SmolLM2-135M did, once in 40 releases).
    #[contract(len = 1..=40, grounded(with_container))]
    pub unit: Option<String>,
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
pub(crate) fn scale_word(word: &str) -> Option<Scale> {
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
        Amount {
            value,
            currency: "USD".into(),
            unit: unit.map(str::to_owned),
        }
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
    fn amount_contract_checks_currency() {
        let err =
            Amount::from_json(r#"{"value": 1, "currency": "usd", "unit": null}"#).unwrap_err();
        assert_eq!(err.0[0].path, "/currency");
        assert!(
            Amount::from_json(r#"{"value": 7.23, "currency": "USD", "unit": "billion"}"#).is_ok()
        );
    }
}
