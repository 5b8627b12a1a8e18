//! Typed nodes of the derive input; each keeps its syn node for spans.
//!
//! What `#[serde(..)]` means (names after `rename` and `rename_all`, skips, defaults) is serde's
//! own reading, `serde_derive_internals`, as schemars_derive reads it; `attr` reads only which
//! serde keys are given and where, for the spans of the derive's errors.

use proc_macro2::Span;
use serde_derive_internals as serde;
use syn::ext::IdentExt;
use syn::{GenericArgument, PathArguments, Type};

use super::attr;
use super::ctxt::Ctxt;

pub struct Container<'a> {
    pub ident: &'a syn::Ident,
    /// The contract's name: the type's, or serde's `rename`.
    pub name: String,
    pub attrs: attr::Container,
    pub data: Data<'a>,
    pub generics: &'a syn::Generics,
}

pub enum Data<'a> {
    Struct(Vec<Field<'a>>),
    Enum(Vec<Variant<'a>>),
}

pub struct Field<'a> {
    pub ident: &'a syn::Ident,
    /// The Rust name without `r#`.
    pub rust_name: String,
    /// The JSON key after serde renames.
    pub json_name: String,
    pub attrs: attr::Field,
    /// serde's reading of the field's `#[serde(..)]`.
    pub serde: serde::attr::Field,
    pub ty: &'a Type,
    pub info: TypeInfo<'a>,
}

impl Field<'_> {
    /// Whether the contract leaves the field out (`#[contract(skip)]`, or serde never reads it).
    pub fn skipped(&self) -> bool {
        self.attrs.skip.is_some() || self.serde.skip_deserializing()
    }
}

pub struct Variant<'a> {
    pub ident: &'a syn::Ident,
    pub json_name: String,
    pub attrs: attr::Variant,
    /// `#[serde(skip)]` or `#[serde(skip_deserializing)]`: the model cannot write it.
    pub skipped: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Wrapper {
    Option,
    Vec,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Integer,
    Float,
    String,
    Bool,
    /// A type the derive cannot recognise by its syntax (a contract, an alias, a parameter).
    Other,
}

/// What the syntax of a field type says: wrappers outermost first, then the scalar.
pub struct TypeInfo<'a> {
    pub wrappers: Vec<Wrapper>,
    pub inner: &'a Type,
    pub scalar: Scalar,
}

impl TypeInfo<'_> {
    pub fn of(ty: &Type) -> TypeInfo<'_> {
        let mut wrappers = Vec::new();
        let mut ty = ty;
        while let Some((name, inner)) = wrapped(ty) {
            match name {
                "Option" => wrappers.push(Wrapper::Option),
                "Vec" => wrappers.push(Wrapper::Vec),
                _ => {}
            }
            ty = inner;
        }
        TypeInfo {
            wrappers,
            inner: ty,
            scalar: scalar(ty),
        }
    }

    pub fn is_option(&self) -> bool {
        self.wrappers.first() == Some(&Wrapper::Option)
    }

    pub fn has_list(&self) -> bool {
        self.wrappers.contains(&Wrapper::Vec)
    }

    pub fn is_numeric(&self) -> bool {
        matches!(self.scalar, Scalar::Integer | Scalar::Float)
    }
}

/// `Option<T>`, `Vec<T>` or `Box<T>` (by last path segment): the wrapper name and `T`.
fn wrapped(ty: &Type) -> Option<(&'static str, &Type)> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() {
        return None;
    }
    let seg = p.path.segments.last()?;
    let name = ["Option", "Vec", "Box"]
        .into_iter()
        .find(|n| seg.ident == n)?;
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    if args.args.len() != 1 {
        return None;
    }
    match args.args.first()? {
        GenericArgument::Type(inner) => Some((name, inner)),
        _ => None,
    }
}

fn scalar(ty: &Type) -> Scalar {
    let Type::Path(p) = ty else {
        return Scalar::Other;
    };
    let Some(seg) = p.path.segments.last() else {
        return Scalar::Other;
    };
    if p.qself.is_some() || !seg.arguments.is_none() {
        return Scalar::Other;
    }
    match seg.ident.to_string().as_str() {
        "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize" => {
            Scalar::Integer
        }
        "f32" | "f64" => Scalar::Float,
        "String" => Scalar::String,
        "bool" => Scalar::Bool,
        _ => Scalar::Other,
    }
}

/// A type as written, without the spaces `to_string` puts in (`Option<u8>`).
pub fn type_text(ty: &Type) -> String {
    let mut s = quote::ToTokens::to_token_stream(ty).to_string();
    for (from, to) in [
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ::", "::"),
        (":: ", "::"),
        (" ,", ","),
        ("& ", "&"),
    ] {
        s = s.replace(from, to);
    }
    s
}

const SUPPORTED: &str =
    "`#[derive(Contract)]` supports structs with named fields and enums whose variants have no data";

impl<'a> Container<'a> {
    /// `None` when the shape is not supported (already reported to `cx`).
    pub fn from_ast(cx: &Ctxt, input: &'a syn::DeriveInput) -> Option<Container<'a>> {
        let attrs = attr::Container::from_ast(cx, input);
        check_generics(cx, &input.generics);
        if !check_shape(cx, input) {
            return None;
        }
        // serde's derive reports its own errors (every `#[serde(..)]` comes with one: `serde` is
        // its helper attribute); reporting them here too would show each twice.
        let serde_cx = serde::Ctxt::new();
        let private = syn::Ident::new("__private", Span::call_site());
        let serde =
            serde::ast::Container::from_ast(&serde_cx, input, serde::Derive::Deserialize, &private);
        let _ = serde_cx.check();
        let serde = serde?;
        let name = one_name(cx, serde.attrs.name(), &attrs.serde_keys);
        let rules = serde.attrs.rename_all_rules();
        if rules.serialize != rules.deserialize {
            attr::two_names(cx, &attrs.serde_keys, "rename_all");
        }
        let data = match serde.data {
            serde::ast::Data::Struct(_, fields) => {
                Data::Struct(fields.into_iter().map(|f| Field::from_ast(cx, f)).collect())
            }
            serde::ast::Data::Enum(variants) => Data::Enum(
                variants
                    .into_iter()
                    .map(|v| Variant::from_ast(cx, v))
                    .collect(),
            ),
        };
        Some(Container {
            ident: &input.ident,
            name,
            attrs,
            data,
            generics: &input.generics,
        })
    }
}

/// Structs with named fields and enums of unit variants; false after reporting any other shape.
fn check_shape(cx: &Ctxt, input: &syn::DeriveInput) -> bool {
    match &input.data {
        syn::Data::Struct(data) => match &data.fields {
            syn::Fields::Named(_) => true,
            syn::Fields::Unnamed(fields) => {
                cx.error_spanned_by(fields, format!("{SUPPORTED}, not tuple structs"));
                false
            }
            syn::Fields::Unit => {
                cx.error_spanned_by(
                    input.ident.clone(),
                    format!("{SUPPORTED}, not unit structs"),
                );
                false
            }
        },
        syn::Data::Enum(data) => {
            let mut ok = true;
            for variant in &data.variants {
                if !matches!(variant.fields, syn::Fields::Unit) {
                    cx.error_spanned_by(
                        &variant.fields,
                        format!("{SUPPORTED}, variant `{}` carries data", variant.ident),
                    );
                    ok = false;
                }
            }
            if data.variants.is_empty() {
                cx.error_spanned_by(&input.ident, "an enum contract needs at least one variant");
                ok = false;
            }
            ok
        }
        syn::Data::Union(data) => {
            cx.error_spanned_by(data.union_token, format!("{SUPPORTED}, not unions"));
            false
        }
    }
}

/// The one JSON name serde gives an item; two (`rename(serialize = .., deserialize = ..)` with
/// different names) is an error at `rename`.
fn one_name(cx: &Ctxt, name: &serde::name::MultiName, keys: &attr::SerdeKeys) -> String {
    let (ser, de) = (name.serialize_name(), name.deserialize_name());
    if ser.value != de.value {
        attr::two_names(cx, keys, "rename");
    }
    de.value.clone()
}

/// Type parameters are supported; lifetimes and const generics are not.
fn check_generics(cx: &Ctxt, generics: &syn::Generics) {
    for param in &generics.params {
        match param {
            syn::GenericParam::Lifetime(l) => cx.error_spanned_by(
                l,
                "`#[derive(Contract)]` does not support lifetime parameters: a contract owns its data",
            ),
            syn::GenericParam::Const(c) => cx.error_at(
                c.ident.span(),
                "`#[derive(Contract)]` does not support const generic parameters",
            ),
            syn::GenericParam::Type(_) => {}
        }
    }
}

/// Whether the generics make the input impossible to implement the traits for.
pub fn has_unsupported_generics(generics: &syn::Generics) -> bool {
    generics
        .params
        .iter()
        .any(|p| !matches!(p, syn::GenericParam::Type(_)))
}

impl<'a> Field<'a> {
    fn from_ast(cx: &Ctxt, serde: serde::ast::Field<'a>) -> Self {
        let field = serde.original;
        let ident = field.ident.as_ref().expect("named field");
        let attrs = attr::Field::from_ast(cx, field);
        Field {
            ident,
            rust_name: ident.unraw().to_string(),
            json_name: one_name(cx, serde.attrs.name(), &attrs.serde_keys),
            attrs,
            serde: serde.attrs,
            ty: &field.ty,
            info: TypeInfo::of(&field.ty),
        }
    }
}

impl<'a> Variant<'a> {
    fn from_ast(cx: &Ctxt, serde: serde::ast::Variant<'a>) -> Self {
        let attrs = attr::Variant::from_ast(cx, serde.original);
        Variant {
            ident: &serde.original.ident,
            json_name: one_name(cx, serde.attrs.name(), &attrs.serde_keys),
            attrs,
            skipped: serde.attrs.skip_deserializing(),
        }
    }
}
