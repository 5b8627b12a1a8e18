use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Meta {
    source: String,
}

#[derive(Contract, Serialize, Deserialize)]
struct Filing {
    title: String,
    #[serde(flatten)]
    meta: Meta,
}

fn main() {}
