//! Example contracts used by the demos, the snapshot tests and the docs.

pub mod filings;
pub mod policy;
pub mod realdocs;

use contract_core::{Amount, Contract, DateValue, Evidenced, TableValue};
use serde::{Deserialize, Serialize};

/// Next-quarter revenue guidance stated in an earnings release.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
pub struct Guidance {
    /// Fiscal quarter the guidance is for.
    #[contract(range = 1..=4)]
    pub quarter: Option<u8>,
    /// Fiscal year the guidance is for.
    #[contract(range = 2018..=2030)]
    pub year: Option<u16>,
    /// Low end of the range.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    pub low: Option<f64>,
    /// High end of the range.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    pub high: Option<f64>,
}

/// A postal address split into its parts.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(at_least_one(street, city))]
pub struct Address {
    /// Street and number.
    #[contract(len = 1..=120)]
    pub street: Option<String>,
    /// Postal code as written.
    #[contract(pattern = r"^[A-Za-z0-9 \-]{3,10}$")]
    pub postal_code: Option<String>,
    /// City or town.
    pub city: Option<String>,
    /// ISO 3166-1 alpha-2 country code.
    #[contract(pattern = "^[A-Z]{2}$")]
    pub country: Option<String>,
}

/// How a policy line is classified.
#[derive(Contract, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoverageKind {
    /// Damage to the insured's own property.
    Property,
    /// Claims by third parties.
    Liability,
    /// Loss of income after an insured event.
    BusinessInterruption,
}

/// The key terms of an insurance policy, each with its evidence.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[contract(rule = "effective_date <= expiry_date")]
pub struct Policy {
    /// The policy number as written.
    #[contract(len = 1..=40)]
    pub policy_number: String,
    /// What the policy covers.
    pub coverage: CoverageKind,
    /// Annual premium.
    pub premium: Evidenced<Amount>,
    /// Limit per claim.
    pub limit_per_claim: Option<Evidenced<Amount>>,
    /// First day of cover (ISO date).
    #[contract(format = "date")]
    pub effective_date: String,
    /// Last day of cover (ISO date).
    #[contract(format = "date")]
    pub expiry_date: String,
    /// When the policy was signed.
    pub signed: Option<DateValue>,
}

/// A table copied from a filing, with where it was found.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilingTable {
    /// The table's caption as written.
    pub caption: Option<String>,
    /// The table itself.
    pub table: TableValue,
    /// Lines the table spans.
    pub evidence: Vec<contract_core::Span>,
}

/// Every exclusion listed in a policy, each with its own evidence.
#[derive(Contract, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exclusions {
    /// One item per exclusion, in document order.
    #[contract(len = ..=50)]
    pub items: Vec<Evidenced<String>>,
}
