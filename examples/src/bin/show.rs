//! Prints a contract's signature, JSON Schema, strict schema and field docs.
//!
//! `cargo run -p examples --bin show -- [guidance|address|policy|table|exclusions]`

use contract_core::Contract;
use examples::{Address, Exclusions, FilingTable, Guidance, Policy};

fn print<C: Contract>() {
    let schema = <C as Contract>::json_schema();
    let compact = serde_json::to_string(&schema).unwrap_or_default();
    let signature = C::signature();
    println!("# {}\n", C::contract_spec().name);
    println!(
        "signature ({} chars, {:.0}% of the compact schema's {}):\n{signature}\n",
        signature.len(),
        100.0 * signature.len() as f64 / compact.len() as f64,
        compact.len()
    );
    println!(
        "JSON Schema (draft 2020-12):\n{}\n",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    );
    match C::try_strict_schema() {
        Ok(strict) => println!(
            "strict schema:\n{}\n",
            serde_json::to_string_pretty(&strict).unwrap_or_default()
        ),
        Err(e) => println!("no strict schema: {e}\n"),
    }
    println!("{}", C::docs_markdown());
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "guidance".into());
    match which.as_str() {
        "guidance" => print::<Guidance>(),
        "address" => print::<Address>(),
        "policy" => print::<Policy>(),
        "table" => print::<FilingTable>(),
        "exclusions" => print::<Exclusions>(),
        other => {
            eprintln!(
                "unknown contract `{other}`; try guidance, address, policy, table or exclusions"
            );
            std::process::exit(2);
        }
    }
}
