//! `#[derive(Contract)]`. See `contract_core` for the trait and `docs/attributes.md`.
use proc_macro::TokenStream;

#[proc_macro_derive(Contract, attributes(contract))]
pub fn derive_contract(input: TokenStream) -> TokenStream {
    let _ = input;
    TokenStream::new()
}
