use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(min = 0, exclusive_min = 0)]
    low: f64,
}

fn main() {}
