//! What is emitted next to the errors: impls with the right signatures and no bodies, so that
//! code using the type as a contract type-checks and the user sees one error, not twenty.

use proc_macro2::TokenStream;
use quote::quote;

use crate::expand::bounded_generics;
use crate::internals::ast;

/// The stub impls, or nothing when the input cannot have them (unions, lifetimes).
pub fn stub(input: &syn::DeriveInput) -> TokenStream {
    if matches!(input.data, syn::Data::Union(_)) || ast::has_unsupported_generics(&input.generics) {
        return TokenStream::new();
    }
    let ident = &input.ident;
    let name = ident.to_string();
    let generics = bounded_generics(&input.generics);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        const _: () = {
            #[automatically_derived]
            impl #impl_generics ::contract_core::__private::Contract for #ident #ty_generics #where_clause {
                fn contract_spec() -> &'static ::contract_core::__private::ContractSpec {
                    ::core::unimplemented!()
                }
            }

            #[automatically_derived]
            impl #impl_generics ::contract_core::__private::FieldType for #ident #ty_generics #where_clause {
                fn type_spec() -> ::contract_core::__private::TypeSpec {
                    ::core::unimplemented!()
                }
            }

            #[automatically_derived]
            impl #impl_generics ::contract_core::__private::schemars::JsonSchema for #ident #ty_generics #where_clause {
                fn schema_name() -> ::contract_core::__private::Cow<'static, str> {
                    ::contract_core::__private::Cow::Borrowed(#name)
                }

                fn json_schema(
                    _: &mut ::contract_core::__private::schemars::SchemaGenerator,
                ) -> ::contract_core::__private::schemars::Schema {
                    ::core::unimplemented!()
                }
            }
        };
    }
}
