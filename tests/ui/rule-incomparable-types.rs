use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
#[contract(rule = "amount < currency")]
struct Price {
    amount: f64,
    currency: String,
}

fn main() {}
