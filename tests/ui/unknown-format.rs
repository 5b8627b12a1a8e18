use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Filing {
    #[contract(format = "dat")]
    filed_on: String,
}

fn main() {}
