use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Order {
    #[contract(len = 1..=3)]
    quantity: u32,
}

fn main() {}
