use contract_core::Contract;
use serde::{Deserialize, Serialize};

// Every grounding mistake of a type is reported at once, each at its token.
#[derive(Contract, Serialize, Deserialize)]
struct Guidance {
    #[contract(grounded)]
    withdrawn: bool,
    #[contract(grounded(in = qoute))]
    period: Option<String>,
    #[contract(grounded(in = high))]
    low: Option<f64>,
    #[contract(grounded(in = start..=end))]
    text: Option<String>,
    high: Option<f64>,
    quote: Option<String>,
}

fn main() {}
