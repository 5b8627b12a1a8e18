use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Price {
    #[contract(pattern = "^([A-Z]{3}$")]
    currency: String,
}

fn main() {}
