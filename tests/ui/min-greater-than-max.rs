use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Order {
    #[contract(min = 10, max = 1)]
    quantity: u32,
}

fn main() {}
