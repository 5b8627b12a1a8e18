use contract_core::Contract;
use serde::{Deserialize, Serialize};

/// Every mistake here is reported at once.
#[derive(Contract, Serialize, Deserialize)]
#[contract(rule = "low <= hgih", both_or_neither(low, year))]
struct Guidance {
    #[contract(range = 1..=4, pattern = "^Q[1-4]$")]
    quarter: Option<u8>,
    year: u16,
    #[contract(exclusive_min = 0, unit = "USD millions", unit = "USD")]
    low: Option<f64>,
    #[contract(format = "datetime")]
    high: Option<f64>,
}

fn main() {
    // The stub impls emitted with the errors keep this from adding more errors.
    let _ = Guidance::contract_spec();
}
