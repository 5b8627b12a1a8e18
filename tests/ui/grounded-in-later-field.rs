use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(grounded(in = quote))]
    low: Option<f64>,
    #[contract(grounded)]
    quote: Option<String>,
}

fn main() {}
