//! Extract, then compute in code: explicit exchange rates, scale normalisation and threshold
//! decisions that keep every step auditable and can be recomputed without calling a model.
//!
//! ```
//! use contract_core::compute::{Rates, Threshold};
//! use contract_core::Amount;
//!
//! let rates: Rates = serde_json::from_str(
//!     r#"{"base": "USD", "date": "2026-11-02", "source": "example", "rates": {"JPY": 0.0067}}"#,
//! ).unwrap();
//! let premium = Amount::new(2.5, Some("JPY"), Some("billion"));
//! let t = Threshold::parse("premium > 1,000,000 USD").unwrap();
//! let d = t.decide(&premium, &rates).unwrap();
//! assert!(d.outcome); // 2.5e9 JPY × 0.0067 = 16,750,000 USD
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::values::{Amount, Scale, ScaleError};

/// An exchange-rate table: how many units of `base` one unit of each currency is worth, as of
/// `date`, from `source`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// The currency every rate is expressed in (`USD`).
    pub base: String,
    /// The date the rates are valid for (ISO 8601).
    pub date: String,
    /// Where the rates come from (a central bank, a data vendor).
    pub source: String,
    /// Units of `base` per one unit of the currency (`"JPY": 0.0067`). The base itself is 1.
    pub rates: BTreeMap<String, f64>,
}

impl Rates {
    /// Units of `base` per one unit of `currency`.
    pub fn to_base(&self, currency: &str) -> Option<f64> {
        if currency == self.base {
            Some(1.0)
        } else {
            self.rates
                .get(currency)
                .copied()
                .filter(|r| r.is_finite() && *r > 0.0)
        }
    }

    /// Units of `to` per one unit of `from`, through the base.
    pub fn rate(&self, from: &str, to: &str) -> Result<f64, ComputeError> {
        if from == to {
            return Ok(1.0);
        }
        let missing = |c: &str| ComputeError::NoRate {
            currency: c.to_owned(),
            base: self.base.clone(),
            date: self.date.clone(),
        };
        let from_base = self.to_base(from).ok_or_else(|| missing(from))?;
        let to_base = self.to_base(to).ok_or_else(|| missing(to))?;
        Ok(from_base / to_base)
    }
}

/// Why a computation could not be done. Never guessed around.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ComputeError {
    /// The amount's unit is not a scale word.
    #[error("{message}")]
    Scale {
        /// The scale error, in words.
        message: String,
    },
    /// The amount has no currency code to convert from (none written, none the document
    /// names).
    #[error("`{amount}` has no currency code")]
    NoCurrency {
        /// The amount, as written.
        amount: String,
    },
    /// The table has no rate for a currency.
    #[error("no rate for `{currency}` in the {base} table of {date}")]
    NoRate {
        /// The currency.
        currency: String,
        /// The table's base.
        base: String,
        /// The table's date.
        date: String,
    },
    /// A threshold that could not be read.
    #[error("cannot read threshold `{text}`: {why}")]
    Threshold {
        /// The text.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// The field a threshold names is not an amount in the record.
    #[error("`{pointer}` is not an amount in the record: {why}")]
    Field {
        /// JSON pointer tried.
        pointer: String,
        /// What is wrong.
        why: String,
    },
}

impl From<ScaleError> for ComputeError {
    fn from(e: ScaleError) -> Self {
        ComputeError::Scale {
            message: e.to_string(),
        }
    }
}

/// The rate a conversion used, with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateUsed {
    /// Converted from.
    pub from: String,
    /// Converted to.
    pub to: String,
    /// Units of `to` per one unit of `from`.
    pub rate: f64,
    /// The table's date.
    pub date: String,
    /// The table's source.
    pub source: String,
}

/// An amount converted to another currency, in units (scale words applied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Converted {
    /// The amount as extracted.
    pub original: Amount,
    /// The original value in units of its currency (scale word applied).
    pub original_units: f64,
    /// The converted value, in units of `currency`.
    pub value: f64,
    /// The target currency.
    pub currency: String,
    /// The rate used (`None` when no conversion was needed).
    pub rate_used: Option<RateUsed>,
    /// The arithmetic, for humans (`2.5 billion JPY = 2500000000 JPY × 0.0067 USD/JPY = ...`).
    pub formula: String,
}

impl Amount {
    /// Converts to `currency` with `rates`, applying the scale word first ([`Amount::in_scale`]).
    /// A `per ...` qualifier in the unit is kept out of the arithmetic.
    pub fn convert(&self, rates: &Rates, currency: &str) -> Result<Converted, ComputeError> {
        let units = self.in_scale(Scale::Units)?;
        let own = self
            .currency_code()
            .ok_or_else(|| ComputeError::NoCurrency {
                amount: format!("{} {}", num(self.value), self.unit.as_deref().unwrap_or(""))
                    .trim()
                    .to_owned(),
            })?
            .to_owned();
        let written = match self.unit.as_deref() {
            Some(u) if !u.trim().is_empty() => {
                format!("{} {} {own}", num(self.value), u.trim())
            }
            _ => format!("{} {own}", num(self.value)),
        };
        if own == currency {
            return Ok(Converted {
                original: self.clone(),
                original_units: units,
                value: units,
                currency: currency.to_owned(),
                rate_used: None,
                formula: format!("{written} = {} {currency}", num(units)),
            });
        }
        let rate = rates.rate(&own, currency)?;
        let value = units * rate;
        Ok(Converted {
            original: self.clone(),
            original_units: units,
            value,
            currency: currency.to_owned(),
            rate_used: Some(RateUsed {
                from: own.clone(),
                to: currency.to_owned(),
                rate,
                date: rates.date.clone(),
                source: rates.source.clone(),
            }),
            formula: format!(
                "{written} = {} {} × {} {currency}/{} ({} rate of {}) = {} {currency}",
                num(units),
                own,
                num(rate),
                own,
                rates.source,
                rates.date,
                num(value)
            ),
        })
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// `>`
    #[serde(rename = ">")]
    Gt,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
}

impl Op {
    /// The symbol.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }

    /// Applies the comparison.
    pub fn holds(self, left: f64, right: f64) -> bool {
        match self {
            Op::Gt => left > right,
            Op::Ge => left >= right,
            Op::Lt => left < right,
            Op::Le => left <= right,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule decided in code on an extracted amount: `premium > 1,000,000 USD`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    /// The field it applies to (a key of the contract, or a JSON pointer such as `/premium`).
    pub field: String,
    /// The comparison.
    pub op: Op,
    /// The threshold value, in units of `currency`.
    pub value: f64,
    /// The threshold's currency.
    pub currency: String,
}

/// What a decision looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionInputs {
    /// The field decided on.
    pub field: String,
    /// The amount as extracted.
    pub amount: Amount,
    /// The amount in units of the threshold's currency.
    pub converted: f64,
    /// The threshold.
    pub threshold: Threshold,
}

/// A decision computed in code, with everything needed to audit and recompute it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Whether the threshold holds.
    pub outcome: bool,
    /// What it was computed from.
    pub inputs: DecisionInputs,
    /// The exchange rate used, if a conversion was needed.
    pub rate_used: Option<RateUsed>,
    /// The arithmetic, for humans.
    pub formula: String,
}

impl Threshold {
    /// Reads `field op number [currency]` (`premium > 1,000,000 USD`); thousands separators
    /// are allowed in the number.
    pub fn parse(text: &str) -> Result<Threshold, ComputeError> {
        let bad = |why: &str| ComputeError::Threshold {
            text: text.to_owned(),
            why: why.to_owned(),
        };
        let (op_at, op, op_len) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
            .iter()
            .find_map(|(s, op)| text.find(s).map(|i| (i, *op, s.len())))
            .ok_or_else(|| bad("no comparison (>, >=, <, <=)"))?;
        let field = text[..op_at].trim();
        if field.is_empty() {
            return Err(bad("no field before the comparison"));
        }
        let mut rest = text[op_at + op_len..].split_whitespace();
        let number = rest.next().ok_or_else(|| bad("no number"))?;
        let value: f64 = number
            .replace([',', '_'], "")
            .parse()
            .map_err(|_| bad("the number is not a number"))?;
        let currency = rest.next().ok_or_else(|| bad("no currency"))?;
        if rest.next().is_some() {
            return Err(bad("text after the currency"));
        }
        Ok(Threshold {
            field: field.to_owned(),
            op,
            value,
            currency: currency.to_owned(),
        })
    }

    /// Decides on `amount`, converting it with `rates` when its currency differs.
    pub fn decide(&self, amount: &Amount, rates: &Rates) -> Result<Decision, ComputeError> {
        let c = amount.convert(rates, &self.currency)?;
        let outcome = self.op.holds(c.value, self.value);
        Ok(Decision {
            outcome,
            formula: format!(
                "{}: {} {} {} {} → {outcome}",
                self.field,
                c.formula,
                self.op,
                num(self.value),
                self.currency
            ),
            rate_used: c.rate_used,
            inputs: DecisionInputs {
                field: self.field.clone(),
                amount: amount.clone(),
                converted: c.value,
                threshold: self.clone(),
            },
        })
    }

    /// Decides on the amount stored in a record (a contract value as JSON, e.g. a stored
    /// extraction's `json`): the field `premium` is looked up at `/premium`, and an
    /// `Evidenced` amount at `/premium/value`. No model is called.
    pub fn decide_json(&self, record: &Value, rates: &Rates) -> Result<Decision, ComputeError> {
        let pointer = if self.field.starts_with('/') {
            self.field.clone()
        } else {
            format!("/{}", self.field)
        };
        let found = record
            .pointer(&pointer)
            .ok_or_else(|| ComputeError::Field {
                pointer: pointer.clone(),
                why: "not found".into(),
            })?;
        let found = match found.get("value") {
            Some(inner) if found.get("evidence").is_some() => inner,
            _ => found,
        };
        let amount: Amount =
            serde_json::from_value(found.clone()).map_err(|e| ComputeError::Field {
                pointer,
                why: e.to_string(),
            })?;
        self.decide(&amount, rates)
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.field,
            self.op,
            num(self.value),
            self.currency
        )
    }
}

/// A number as a human writes it: no exponent, no trailing zeros.
fn num(x: f64) -> String {
    if x.is_finite() && x == x.trunc() && x.abs() < 1e17 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.10}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(jpy: f64) -> Rates {
        Rates {
            base: "USD".into(),
            date: "2026-11-02".into(),
            source: "test".into(),
            rates: [("JPY".to_owned(), jpy), ("EUR".to_owned(), 1.1)].into(),
        }
    }

    fn amount(value: f64, currency: &str, unit: Option<&str>) -> Amount {
        Amount::new(value, Some(currency), unit)
    }

    #[test]
    fn converts_with_scale() {
        let c = amount(2.5, "JPY", Some("billion"))
            .convert(&rates(0.0067), "USD")
            .unwrap();
        assert!((c.value - 16_750_000.0).abs() < 1e-3);
        assert_eq!(c.original_units, 2.5e9);
        assert_eq!(c.rate_used.as_ref().unwrap().rate, 0.0067);
        assert!(
            c.formula
                .contains("2.5 billion JPY = 2500000000 JPY × 0.0067 USD/JPY"),
            "{}",
            c.formula
        );
        // Cross rate through the base.
        let c = amount(1.0, "EUR", Some("mil millones"))
            .convert(&rates(0.0055), "JPY")
            .unwrap();
        assert!((c.value - 1e9 * 1.1 / 0.0055).abs() < 1.0);
        let same = amount(1200.0, "USD", Some("per claim"))
            .convert(&rates(0.1), "USD")
            .unwrap();
        assert_eq!((same.value, same.rate_used), (1200.0, None));
    }

    #[test]
    fn errors_are_values() {
        let e = amount(1.0, "GBP", None)
            .convert(&rates(0.1), "USD")
            .unwrap_err();
        assert!(matches!(e, ComputeError::NoRate { .. }));
        let e = amount(1.0, "JPY", Some("lakh"))
            .convert(&rates(0.1), "USD")
            .unwrap_err();
        assert!(matches!(e, ComputeError::Scale { .. }));
        assert!(Threshold::parse("premium 5 USD").is_err());
        assert!(Threshold::parse("> 5 USD").is_err());
        assert!(Threshold::parse("premium > lots USD").is_err());
    }

    #[test]
    fn thresholds() {
        let t = Threshold::parse("premium > 1,000,000 USD").unwrap();
        assert_eq!(
            (t.field.as_str(), t.op, t.value, t.currency.as_str()),
            ("premium", Op::Gt, 1e6, "USD")
        );
        assert_eq!(Threshold::parse("limit <= 5_000 EUR").unwrap().op, Op::Le);
        let premium = amount(2.5, "JPY", Some("billion"));
        assert!(t.decide(&premium, &rates(0.0067)).unwrap().outcome);
        let d = t.decide(&premium, &rates(0.0003)).unwrap();
        assert!(!d.outcome, "750,000 USD");
        assert!(
            d.formula.ends_with("> 1000000 USD → false"),
            "{}",
            d.formula
        );
        let back: Decision = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back, d);
        let record = serde_json::json!({"premium": {"value": {"value": 2.5, "currency": "JPY",
            "unit": "billion"}, "evidence": []}});
        assert!(t.decide_json(&record, &rates(0.0067)).unwrap().outcome);
        assert!(matches!(
            Threshold::parse("limit > 1 USD")
                .unwrap()
                .decide_json(&record, &rates(1.0)),
            Err(ComputeError::Field { .. })
        ));
    }
}
