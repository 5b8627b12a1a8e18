use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
enum Answer {
    Missing,
    Found(String),
}

fn main() {}
