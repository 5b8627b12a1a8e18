use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
struct Flags {
    #[contract(one_of = [1, 2])]
    enabled: bool,
}

fn main() {}
