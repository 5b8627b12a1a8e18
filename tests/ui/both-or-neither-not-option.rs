use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
#[contract(both_or_neither(low, high))]
struct Guidance {
    low: Option<f64>,
    high: f64,
}

fn main() {}
