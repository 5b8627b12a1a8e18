use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(rnage = 1..=4)]
    quarter: u8,
}

fn main() {}
