use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
#[contract(rule = "low <= hgih")]
struct Guidance {
    low: Option<f64>,
    high: Option<f64>,
}

fn main() {}
