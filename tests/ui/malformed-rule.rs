use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
#[contract(rule = "low <= high + 1")]
struct Guidance {
    low: f64,
    high: f64,
}

fn main() {}
