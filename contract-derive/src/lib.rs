//! `#[derive(Contract)]`: see `contract_core` for the trait and the attribute reference below.

mod expand;
mod fallback;
mod internals;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

#[doc = include_str!("../../docs/attributes.md")]
#[proc_macro_derive(Contract, attributes(contract))]
pub fn derive_contract(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
