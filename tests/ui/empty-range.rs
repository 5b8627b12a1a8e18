use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(range = 5..=1)]
    quarter: u8,
}

fn main() {}
