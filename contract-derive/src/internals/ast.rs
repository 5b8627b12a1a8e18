//! Typed nodes of the derive input; each keeps its syn node for spans.

use syn::ext::IdentExt;
use syn::{GenericArgument, PathArguments, Type};

use super::attr;
use super::ctxt::Ctxt;

pub struct Container<'a> {
    pub ident: &'a syn::Ident,
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
    pub ty: &'a Type,
    pub info: TypeInfo<'a>,
}

impl Field<'_> {
    /// Whether the contract leaves the field out (`#[contract(skip)]`, or serde never reads it).
    pub fn skipped(&self) -> bool {
        self.attrs.skip.is_some() || self.attrs.serde.skip_deserializing.is_some()
    }
}

pub struct Variant<'a> {
    pub ident: &'a syn::Ident,
    pub json_name: String,
    pub attrs: attr::Variant,
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
        let data = match &input.data {
            syn::Data::Struct(data) => match &data.fields {
                syn::Fields::Named(named) => Data::Struct(
                    named
                        .named
                        .iter()
                        .map(|f| Field::from_ast(cx, f, &attrs))
                        .collect(),
                ),
                syn::Fields::Unnamed(fields) => {
                    cx.error_spanned_by(fields, format!("{SUPPORTED}, not tuple structs"));
                    return None;
                }
                syn::Fields::Unit => {
                    cx.error_spanned_by(
                        input.ident.clone(),
                        format!("{SUPPORTED}, not unit structs"),
                    );
                    return None;
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
                    cx.error_spanned_by(
                        &input.ident,
                        "an enum contract needs at least one variant",
                    );
                    ok = false;
                }
                if !ok {
                    return None;
                }
                Data::Enum(
                    data.variants
                        .iter()
                        .map(|v| Variant::from_ast(cx, v, &attrs))
                        .collect(),
                )
            }
            syn::Data::Union(data) => {
                cx.error_spanned_by(data.union_token, format!("{SUPPORTED}, not unions"));
                return None;
            }
        };
        Some(Container {
            ident: &input.ident,
            attrs,
            data,
            generics: &input.generics,
        })
    }
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
    fn from_ast(cx: &Ctxt, field: &'a syn::Field, container: &attr::Container) -> Self {
        let ident = field.ident.as_ref().expect("named field");
        let attrs = attr::Field::from_ast(cx, field);
        let rust_name = ident.unraw().to_string();
        let json_name = match (&attrs.serde.rename, container.rename_all) {
            (Some(name), _) => name.clone(),
            (None, Some(rule)) => rule.apply_to_field(&rust_name),
            (None, None) => rust_name.clone(),
        };
        Field {
            ident,
            rust_name,
            json_name,
            attrs,
            ty: &field.ty,
            info: TypeInfo::of(&field.ty),
        }
    }
}

impl<'a> Variant<'a> {
    fn from_ast(cx: &Ctxt, variant: &'a syn::Variant, container: &attr::Container) -> Self {
        let attrs = attr::Variant::from_ast(cx, variant);
        let rust_name = variant.ident.unraw().to_string();
        let json_name = match (&attrs.rename, container.rename_all) {
            (Some(name), _) => name.clone(),
            (None, Some(rule)) => rule.apply_to_variant(&rust_name),
            (None, None) => rust_name,
        };
        Variant {
            ident: &variant.ident,
            json_name,
            attrs,
        }
    }
}
