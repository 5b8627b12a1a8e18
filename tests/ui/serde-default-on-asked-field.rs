use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Filing {
    #[serde(default)]
    title: String,
}

fn main() {}
