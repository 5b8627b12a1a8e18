use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(unit = "USD millions", unit = "USD")]
    low: f64,
}

fn main() {}
