//! The policy example end to end: extraction with evidence, completeness decided in code, a
//! threshold decided in code with a visible rate; prints the record as JSON.
//!
//! `cargo run -p examples --bin policy [-- --rates RATES.json] [-- --model MODEL.gguf]`
//!
//! Without `--model` the scripted replies play the model. `--model` needs the `local` feature
//! (`cargo run -p examples --features local --bin policy -- --model ...`).

use std::process::ExitCode;

use contract_backends::ScriptedBackend;
use contract_core::compute::Rates;
use examples::policy::{example_rates, run, PolicyRecord, SCRIPT};

fn usage() -> ExitCode {
    eprintln!("usage: policy [--rates RATES.json] [--model MODEL.gguf]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut rates = example_rates();
    let mut model: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--rates", Some(path)) => {
                let read = std::fs::read_to_string(&path).map_err(|e| e.to_string());
                match read
                    .and_then(|t| serde_json::from_str::<Rates>(&t).map_err(|e| e.to_string()))
                {
                    Ok(r) => rates = r,
                    Err(e) => {
                        eprintln!("cannot read rates from `{path}`: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            ("--model", Some(path)) => model = Some(path),
            _ => return usage(),
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let record = match model {
        None => runtime.block_on(run(ScriptedBackend::new(SCRIPT), rates)),
        Some(path) => match with_model(&runtime, &path, rates) {
            Ok(record) => record,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        },
    };
    match serde_json::to_string_pretty(&record) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot write the record: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "local")]
fn with_model(
    runtime: &tokio::runtime::Runtime,
    path: &str,
    rates: Rates,
) -> Result<PolicyRecord, String> {
    let backend = contract_backends::LocalBackend::new(path)
        .map_err(|e| format!("cannot load `{path}`: {e}"))?;
    Ok(runtime.block_on(run(backend, rates)))
}

#[cfg(not(feature = "local"))]
fn with_model(
    _runtime: &tokio::runtime::Runtime,
    path: &str,
    _rates: Rates,
) -> Result<PolicyRecord, String> {
    Err(format!(
        "`--model {path}` needs the local backend: build with `--features local`"
    ))
}
