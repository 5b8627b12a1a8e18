//! [`Checked`]: what the validator needs of a typed contract. The validator reads a derived
//! contract through it, not through the [`Contract`](crate::Contract) trait, whose methods call
//! the validator; every contract is one (a blanket implementation beside the trait).

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::violation::Violations;
use crate::context::DocContext;
use crate::ir::ContractSpec;

/// A typed value the validator can read, normalise and check: every
/// [`Contract`](crate::Contract) is one, through a blanket implementation, and the methods are
/// the contract's own.
pub trait Checked: Serialize + DeserializeOwned + Sized + 'static {
    /// The contract's IR ([`Contract::contract_spec`](crate::Contract::contract_spec)).
    fn checked_spec() -> &'static ContractSpec;

    /// Computes what code derives from the copied values
    /// ([`Contract::normalize`](crate::Contract::normalize)).
    fn checked_normalize(&mut self, cx: &DocContext<'_>, pointer: &str, out: &mut Violations);

    /// Runs the custom checks ([`Contract::run_checks`](crate::Contract::run_checks)).
    fn checked_run_checks(&self, cx: &DocContext<'_>, pointer: &str, out: &mut Violations);
}
