use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Money {
    value: f64,
}

type Amount = Money;

#[derive(Contract, Serialize, Deserialize)]
struct Invoice {
    #[contract(min = 0)]
    total: Amount,
}

fn main() {}
