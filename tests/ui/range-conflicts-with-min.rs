use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(range = 1..=4, min = 2)]
    quarter: u8,
}

fn main() {}
