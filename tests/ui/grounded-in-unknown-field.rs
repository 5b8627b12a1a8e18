use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(grounded)]
    quote: Option<String>,
    #[contract(grounded(in = qoute))]
    low: Option<f64>,
}

fn main() {}
