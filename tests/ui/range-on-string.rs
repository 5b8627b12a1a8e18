use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Person {
    #[contract(range = 1..=80)]
    name: String,
}

fn main() {}
