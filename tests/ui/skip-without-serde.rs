use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Filing {
    title: String,
    #[contract(skip)]
    internal_id: u64,
}

fn main() {}
