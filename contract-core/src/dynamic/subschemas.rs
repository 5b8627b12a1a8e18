//! Which schema keywords hold subschemas, and how: read by the keyword scan (`keywords`) and by
//! `$ref` resolution (`resolve`).

/// How a keyword's value holds subschemas.
pub(super) enum Holds {
    One,
    Map,
    List,
    /// `items` (a schema, or a list in drafts before 2020-12) and `dependencies` (a map of
    /// schemas or of property lists).
    Either,
    None,
}

pub(super) fn holds(key: &str) -> Holds {
    match key {
        "additionalProperties"
        | "unevaluatedProperties"
        | "unevaluatedItems"
        | "additionalItems"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "contentSchema" => Holds::One,
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
            Holds::Map
        }
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => Holds::List,
        "items" | "dependencies" => Holds::Either,
        _ => Holds::None,
    }
}
