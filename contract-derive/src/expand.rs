//! The impls of `Contract`, `FieldType` and `schemars::JsonSchema`, from checked nodes only.

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

use crate::fallback;
use crate::internals::ast::{Container, Data, Field, Variant, Wrapper};
use crate::internals::attr::{respan, Grounded, GroundedKind, Num, OneOfValue};
use crate::internals::check::{self, Assertion};
use crate::internals::Ctxt;

pub fn derive(input: &syn::DeriveInput) -> syn::Result<TokenStream> {
    let cx = Ctxt::new();
    let cont = Container::from_ast(&cx, input);
    let assertions = match &cont {
        Some(cont) => check::check(&cx, cont),
        None => Vec::new(),
    };
    if let Err(err) = cx.check() {
        let errors = err.into_compile_error();
        let stub = fallback::stub(input);
        return Ok(quote!(#errors #stub));
    }
    let cont = cont.expect("no errors, so the shape is supported");
    Ok(expand(&cont, &assertions))
}

/// The input's generics with the bounds every emitted impl needs on each type parameter.
pub fn bounded_generics(generics: &syn::Generics) -> syn::Generics {
    let mut generics = generics.clone();
    let params: Vec<syn::Ident> = generics.type_params().map(|p| p.ident.clone()).collect();
    let where_clause = generics.make_where_clause();
    for param in params {
        where_clause.predicates.push(syn::parse_quote! {
            #param: ::contract_core::__private::FieldType
                + ::contract_core::__private::schemars::JsonSchema
                + ::contract_core::__private::serde::Serialize
                + ::contract_core::__private::serde::de::DeserializeOwned
                + 'static
        });
    }
    generics
}

fn opt_str(value: Option<&str>) -> TokenStream {
    match value {
        Some(s) => quote!(::contract_core::__private::Some(#s)),
        None => quote!(::contract_core::__private::None),
    }
}

fn expand(cont: &Container, assertions: &[Assertion]) -> TokenStream {
    let ident = cont.ident;
    let generics = bounded_generics(cont.generics);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let type_params: Vec<&syn::Ident> = cont.generics.type_params().map(|p| &p.ident).collect();

    let rust_name = ident.to_string();
    let name = &cont.name;
    let (schema_name, schema_id) = if type_params.is_empty() {
        (
            quote!(::contract_core::__private::Cow::Borrowed(#name)),
            quote!(::contract_core::__private::Cow::Borrowed(
                ::core::concat!(::core::module_path!(), "::", #rust_name)
            )),
        )
    } else {
        let name_fmt = format!("{name}_for_{}", vec!["{}"; type_params.len()].join("_and_"));
        let id_fmt = format!(
            "{{}}::{rust_name}<{}>",
            vec!["{}"; type_params.len()].join(", ")
        );
        (
            quote!(::contract_core::__private::Cow::Owned(::std::format!(
                #name_fmt,
                #(<#type_params as ::contract_core::__private::schemars::JsonSchema>::schema_name()),*
            ))),
            quote!(::contract_core::__private::Cow::Owned(::std::format!(
                #id_fmt,
                ::core::module_path!(),
                #(<#type_params as ::contract_core::__private::schemars::JsonSchema>::schema_id()),*
            ))),
        )
    };

    let description = opt_str(cont.attrs.description.as_deref());
    let asserts = assertions.iter().map(assertion);
    let (build, run_checks) = match &cont.data {
        Data::Struct(fields) => (
            object_spec(cont, fields, &description),
            run_checks(cont, fields),
        ),
        Data::Enum(variants) => (enum_spec(variants, &description), TokenStream::new()),
    };
    let build = quote! {
        || {
            #(#asserts)*
            #build
        }
    };
    let spec = if type_params.is_empty() {
        quote! {
            static SPEC: ::contract_core::__private::Lazy<::contract_core::__private::ContractSpec> =
                ::contract_core::__private::Lazy::new();
            SPEC.get_or_init(#build)
        }
    } else {
        quote!(::contract_core::__private::spec_cache::<Self>(#build))
    };

    quote! {
        const _: () = {
            #[automatically_derived]
            impl #impl_generics ::contract_core::__private::Contract for #ident #ty_generics #where_clause {
                fn contract_spec() -> &'static ::contract_core::__private::ContractSpec {
                    #spec
                }

                #run_checks
            }

            #[automatically_derived]
            impl #impl_generics ::contract_core::__private::FieldType for #ident #ty_generics #where_clause {
                fn type_spec() -> ::contract_core::__private::TypeSpec {
                    ::contract_core::__private::TypeSpec::Contract(
                        ::contract_core::__private::ContractRef::of::<Self>(),
                    )
                }

                fn run_nested_checks(
                    &self,
                    cx: &::contract_core::__private::DocContext<'_>,
                    parent: &str,
                    key: &str,
                    out: &mut ::contract_core::__private::Violations,
                ) {
                    ::contract_core::__private::Contract::run_checks(
                        self,
                        cx,
                        &::contract_core::__private::join_pointer(parent, key),
                        out,
                    )
                }

                fn normalize_nested(
                    &mut self,
                    cx: &::contract_core::__private::DocContext<'_>,
                    parent: &str,
                    key: &str,
                    out: &mut ::contract_core::__private::Violations,
                ) {
                    ::contract_core::__private::Contract::normalize(
                        self,
                        cx,
                        &::contract_core::__private::join_pointer(parent, key),
                        out,
                    )
                }
            }

            #[automatically_derived]
            impl #impl_generics ::contract_core::__private::schemars::JsonSchema for #ident #ty_generics #where_clause {
                fn schema_name() -> ::contract_core::__private::Cow<'static, str> {
                    #schema_name
                }

                fn schema_id() -> ::contract_core::__private::Cow<'static, str> {
                    #schema_id
                }

                fn json_schema(
                    generator: &mut ::contract_core::__private::schemars::SchemaGenerator,
                ) -> ::contract_core::__private::schemars::Schema {
                    ::contract_core::__private::schema_for_spec(
                        <Self as ::contract_core::__private::Contract>::contract_spec(),
                        generator,
                    )
                }
            }
        };
    }
}

/// A compile-time question about a type the derive could not recognise, asked at the attribute.
fn assertion(a: &Assertion) -> TokenStream {
    let span = a.span;
    let func = format_ident!("{}", a.func, span = span);
    let types = a.types.iter().map(|ty| respan(ty.to_token_stream(), span));
    quote_spanned!(span=> ::contract_core::__private::#func::<#(#types),*>();)
}

fn object_spec(cont: &Container, fields: &[Field], description: &TokenStream) -> TokenStream {
    let json_name = |rust: &str| -> String {
        fields
            .iter()
            .find(|f| f.rust_name == rust)
            .map(|f| f.json_name.clone())
            .expect("checked rule field")
    };
    let field_specs = fields
        .iter()
        .filter(|f| !f.skipped())
        .map(|f| field_spec(f, fields));
    let mut rules = Vec::new();
    for rule in &cont.attrs.rules {
        let left = json_name(&rule.left);
        let right = json_name(&rule.right);
        let op = format_ident!(
            "{}",
            match rule.op {
                "<" => "Lt",
                "<=" => "Le",
                ">" => "Gt",
                ">=" => "Ge",
                "==" => "Eq",
                _ => "Ne",
            }
        );
        rules.push(quote! {
            ::contract_core::__private::rule_compare(#left, ::contract_core::__private::CmpOp::#op, #right)
        });
    }
    for group in &cont.attrs.groups {
        let names = group.fields.iter().map(|f| json_name(&f.to_string()));
        let func = format_ident!("rule_{}", group.key);
        rules.push(quote!(::contract_core::__private::#func(&[#(#names),*])));
    }
    let checks = cont.attrs.checks.iter().map(path_text);
    let skipped = fields
        .iter()
        .filter(|f| f.skipped() && !f.serde.skip_serializing())
        .map(|f| &f.json_name);
    let spec = quote! {
        ::contract_core::__private::object_spec(
            &<Self as ::contract_core::__private::schemars::JsonSchema>::schema_name(),
            #description,
            ::contract_core::__private::Vec::from([#(#field_specs),*]),
            ::contract_core::__private::Vec::from([#(#rules),*]),
            &[#(#checks),*],
            &[#(#skipped),*],
        )
    };
    match &cont.attrs.question {
        Some(question) => quote!(::contract_core::__private::with_question(#spec, #question)),
        None => spec,
    }
}

fn path_text(path: &syn::Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

fn field_spec(field: &Field, fields: &[Field]) -> TokenStream {
    let json = &field.json_name;
    let rust = &field.rust_name;
    let ty = field.ty;
    let type_spec = if field.attrs.json_schema.is_some() {
        let inner = field.info.inner;
        let mut spec = quote_spanned! {inner.span()=>
            ::contract_core::__private::TypeSpec::External(
                ::contract_core::__private::ExternalRef::of::<#inner>(),
            )
        };
        for wrapper in field.info.wrappers.iter().rev() {
            let variant = match wrapper {
                Wrapper::Option => quote!(Nullable),
                Wrapper::Vec => quote!(List),
            };
            spec = quote! {
                ::contract_core::__private::TypeSpec::#variant(::contract_core::__private::Box::new(#spec))
            };
        }
        spec
    } else {
        quote_spanned!(ty.span()=> <#ty as ::contract_core::__private::FieldType>::type_spec())
    };
    let description = opt_str(field.attrs.description.as_deref());
    let unit = opt_str(field.attrs.unit.as_deref());
    let constraints = constraints(field, fields);
    quote! {
        ::contract_core::__private::field(#json, #rust, #type_spec, #description, #unit, #constraints)
    }
}

fn num(n: Num) -> TokenStream {
    match n {
        Num::Int(i) => {
            let lit = Literal::i128_suffixed(i);
            quote!(::contract_core::__private::int(#lit))
        }
        Num::Float(f) => {
            let lit = Literal::f64_suffixed(f);
            quote!(::contract_core::__private::float(#lit))
        }
    }
}

/// The JSON name of the field with Rust name `ident` (checked to exist before expanding).
fn json_name_of(fields: &[Field], ident: &syn::Ident) -> String {
    let rust = ident.to_string();
    fields
        .iter()
        .find(|f| f.rust_name == rust)
        .map_or(rust, |f| f.json_name.clone())
}

fn grounding(grounded: &Grounded, fields: &[Field]) -> TokenStream {
    let p = quote!(::contract_core::__private::Grounding);
    match &grounded.kind {
        GroundedKind::Source => quote!(#p::Source),
        GroundedKind::WithContainer => quote!(#p::WithContainer),
        GroundedKind::Line => quote!(#p::Line),
        GroundedKind::In(a) => {
            let a = json_name_of(fields, a);
            quote!(#p::In(::std::string::String::from(#a)))
        }
        GroundedKind::Lines(a, b) => {
            let (a, b) = (json_name_of(fields, a), json_name_of(fields, b));
            quote!(#p::Lines {
                start: ::std::string::String::from(#a),
                end: ::std::string::String::from(#b),
            })
        }
    }
}

fn constraints(field: &Field, fields: &[Field]) -> TokenStream {
    let a = &field.attrs;
    let mut items = Vec::new();
    if let Some(grounded) = &a.grounded {
        let g = grounding(grounded, fields);
        items.push(quote!(grounded: ::contract_core::__private::Some(#g)));
    }
    let b = &a.bounds;
    let bounds: Vec<TokenStream> = [
        ("minimum", b.minimum),
        ("maximum", b.maximum),
        ("exclusive_minimum", b.exclusive_minimum),
        ("exclusive_maximum", b.exclusive_maximum),
    ]
    .into_iter()
    .filter_map(|(name, bound)| {
        let name = format_ident!("{}", name);
        let value = num(bound?.value);
        Some(quote!(#name: ::contract_core::__private::Some(#value)))
    })
    .collect();
    if !bounds.is_empty() {
        items.push(quote! {
            bounds: ::contract_core::__private::NumberBounds {
                #(#bounds,)*
                ..<::contract_core::__private::NumberBounds as ::contract_core::__private::Default>::default()
            }
        });
    }
    if let Some(len) = &a.len {
        if let Some(min) = len.min {
            items.push(quote!(min_len: ::contract_core::__private::Some(#min)));
        }
        if let Some(max) = len.max {
            items.push(quote!(max_len: ::contract_core::__private::Some(#max)));
        }
    }
    if let Some(pattern) = &a.pattern {
        items.push(quote!(pattern: ::contract_core::__private::Some(::contract_core::__private::pattern(#pattern))));
    }
    if let Some(format) = &a.format {
        items.push(quote!(format: ::contract_core::__private::Some(::contract_core::__private::format(#format))));
    }
    if let Some(form) = &a.form {
        items.push(
            quote!(form: ::contract_core::__private::Some(::contract_core::__private::form(#form))),
        );
    }
    if let Some(question) = &a.question {
        items.push(quote!(question: ::contract_core::__private::Some(::std::string::String::from(#question))));
    }
    if let Some(group) = &a.group {
        items.push(
            quote!(group: ::contract_core::__private::Some(::std::string::String::from(#group))),
        );
    }
    if let Some(one_of) = &a.one_of {
        let values = one_of.values.iter().map(|v| match v {
            OneOfValue::Str(s) => quote!(::contract_core::__private::str_value(#s)),
            OneOfValue::Int(i) => quote!(::contract_core::__private::serde_json::Value::from(#i)),
        });
        items.push(quote! {
            one_of: ::contract_core::__private::Some(::contract_core::__private::Vec::from([#(#values),*]))
        });
    }
    if items.is_empty() {
        return quote!(<::contract_core::__private::FieldAttrs as ::contract_core::__private::Default>::default());
    }
    quote! {
        ::contract_core::__private::FieldAttrs {
            #(#items,)*
            ..<::contract_core::__private::FieldAttrs as ::contract_core::__private::Default>::default()
        }
    }
}

fn run_checks(cont: &Container, fields: &[Field]) -> TokenStream {
    let checks = cont.attrs.checks.iter().map(|path| {
        quote_spanned! {path.span()=>
            ::contract_core::__private::push_check_fn(#path, self, cx, pointer, out);
        }
    });
    let normalizers = cont.attrs.normalizers.iter().map(|path| {
        quote_spanned! {path.span()=>
            ::contract_core::__private::push_check(#path(self, cx), pointer, out);
        }
    });
    let walked: Vec<&Field> = fields
        .iter()
        .filter(|f| !f.skipped() && f.attrs.json_schema.is_none())
        .collect();
    let nested = walked.iter().map(|f| {
        let ident = f.ident;
        let json = &f.json_name;
        quote! {
            ::contract_core::__private::FieldType::run_nested_checks(
                &self.#ident,
                cx,
                pointer,
                #json,
                out,
            );
        }
    });
    let nested_normalize = walked.iter().map(|f| {
        let ident = f.ident;
        let json = &f.json_name;
        quote! {
            ::contract_core::__private::FieldType::normalize_nested(
                &mut self.#ident,
                cx,
                pointer,
                #json,
                out,
            );
        }
    });
    quote! {
        fn run_checks(
            &self,
            cx: &::contract_core::__private::DocContext<'_>,
            pointer: &str,
            out: &mut ::contract_core::__private::Violations,
        ) {
            let _ = (cx, pointer, &out);
            #(#checks)*
            #(#nested)*
        }

        fn normalize(
            &mut self,
            cx: &::contract_core::__private::DocContext<'_>,
            pointer: &str,
            out: &mut ::contract_core::__private::Violations,
        ) {
            let _ = (cx, pointer, &out);
            #(#nested_normalize)*
            #(#normalizers)*
        }
    }
}

fn enum_spec(variants: &[Variant], description: &TokenStream) -> TokenStream {
    let items = variants.iter().filter(|v| !v.skipped).map(|v| {
        let name = &v.json_name;
        let desc = opt_str(v.attrs.description.as_deref());
        quote!((#name, #desc))
    });
    quote! {
        ::contract_core::__private::enum_spec(
            &<Self as ::contract_core::__private::schemars::JsonSchema>::schema_name(),
            #description,
            &[#(#items),*],
        )
    }
}
