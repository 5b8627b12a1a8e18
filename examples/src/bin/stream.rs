//! The README's streaming example as it stands (a test checks the README shows this file):
//! each field of a contract handed on as soon as the model has closed it and it passed its
//! checks, then the whole record.
//!
//! ```text
//! cargo run --release -p examples --bin stream
//! ```
// README:begin
use contract_backends::LocalBackend;
use contract_core::extract::StreamEvent;
use contract_core::select::Selection;
use contract_core::{Contract, Extractor};
use futures_util::StreamExt;

/// Who reports, and for which quarter.
#[derive(Contract, Debug, serde::Serialize, serde::Deserialize)]
struct Report {
    /// The company that reports, copied from the document.
    #[contract(grounded)]
    company: Option<String>,
    /// The quarter the results are for (1 to 4).
    #[contract(range = 1..=4)]
    quarter: Option<u8>,
    /// The city of its headquarters, copied from the document.
    #[contract(grounded)]
    city: Option<String>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let document =
        "Acme Corp, based in Springfield, reported second-quarter revenue of $1.2 billion.";
    let backend = LocalBackend::default_model()?; // or OpenAiBackend, AnthropicBackend: all stream
    let extractor = Extractor::<Report, _>::new(backend)
        .selection(Selection::off()) // one request for the whole contract, streamed as decoded
        .max_tokens(80);
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    runtime.block_on(async {
        let mut events = extractor.stream(document); // dropping it cancels the request
        while let Some(event) = events.next().await {
            match event {
                // Closed in the reply and checked (grounded: found in the document).
                StreamEvent::Field(f) => println!("{} = {}", f.path, f.value),
                StreamEvent::Done(record) => println!("{}", record.to_json_line()?),
            }
        }
        Ok(())
    })
}
// README:end
