use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Filing {
    #[serde(rename(serialize = "headline", deserialize = "title"))]
    title: String,
}

fn main() {}
