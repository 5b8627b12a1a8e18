use contract_core::Contract;
use serde::{Deserialize, Serialize};

#[derive(Contract, Serialize, Deserialize)]
#[contract(descripton = "Revenue guidance")]
struct Guidance {
    low: f64,
}

fn main() {}
