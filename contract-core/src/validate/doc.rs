//! The parsed document `from_json` checks: a JSON tree that borrows its strings from the text
//! and keeps object entries in a plain vector, so parsing a small document costs one
//! allocation per object or array instead of a hash map and a `String` per key. It deserializes
//! directly into the contract type, without a second parse. Built by [`read::tree`](super::read::tree),
//! each number keeps its literal text, which the grounding check compares with the document
//! (`ground::from_json_in`); built by serde_json, it does not.
//!
//! The flat path's object (`flat.rs`) is here too: [`Entries`] of [`Scalar`]s, read onto the
//! stack by [`read::flat`](super::read::flat). The checker reads either tree through [`Json`].

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{Error, MapAccessDeserializer, MapDeserializer, SeqDeserializer};
use serde::de::{self, Deserialize, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use smallvec::SmallVec;

/// A JSON value as parsed by `from_json`. Duplicate keys are kept, in document order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Doc<'a> {
    Null,
    Bool(bool),
    /// A number and, where the reader kept it, its literal text (`4140.250`, `4.14025e3`);
    /// the tree is no larger for it.
    Number(Number, Option<&'a str>),
    String(Cow<'a, str>),
    Array(Vec<Doc<'a>>),
    Object(Vec<(Cow<'a, str>, Doc<'a>)>),
}

/// What the checker sees of a value, whichever tree it comes from.
pub(crate) enum View<'v, J: Json> {
    Null,
    Bool(bool),
    Number(&'v Number),
    String(&'v str),
    Array(&'v [J]),
    Object(&'v J::Map),
}

/// A JSON tree the checker can read.
pub(crate) trait Json: Sized {
    /// An object's entries.
    type Map: JsonMap<Self> + ?Sized;

    /// The value's type and content.
    fn view(&self) -> View<'_, Self>;
}

/// An object's entries.
pub(crate) trait JsonMap<J> {
    /// Every entry, in document order.
    fn entries<'s>(&'s self) -> impl Iterator<Item = (&'s str, &'s J)>
    where
        J: 's;

    /// The value of `key` (the last one when the key is repeated).
    fn get(&self, key: &str) -> Option<&J>;
}

impl Json for Value {
    type Map = Map<String, Value>;

    fn view(&self) -> View<'_, Self> {
        match self {
            Value::Null => View::Null,
            Value::Bool(b) => View::Bool(*b),
            Value::Number(n) => View::Number(n),
            Value::String(s) => View::String(s),
            Value::Array(items) => View::Array(items),
            Value::Object(map) => View::Object(map),
        }
    }
}

impl JsonMap<Value> for Map<String, Value> {
    fn entries<'s>(&'s self) -> impl Iterator<Item = (&'s str, &'s Value)>
    where
        Value: 's,
    {
        self.iter().map(|(k, v)| (k.as_str(), v))
    }

    fn get(&self, key: &str) -> Option<&Value> {
        Map::get(self, key)
    }
}

impl<'a> Json for Doc<'a> {
    type Map = [(Cow<'a, str>, Doc<'a>)];

    fn view(&self) -> View<'_, Self> {
        match self {
            Doc::Null => View::Null,
            Doc::Bool(b) => View::Bool(*b),
            Doc::Number(n, _) => View::Number(n),
            Doc::String(s) => View::String(s),
            Doc::Array(items) => View::Array(items),
            Doc::Object(entries) => View::Object(entries.as_slice()),
        }
    }
}

impl<'a> JsonMap<Doc<'a>> for [(Cow<'a, str>, Doc<'a>)] {
    fn entries<'s>(&'s self) -> impl Iterator<Item = (&'s str, &'s Doc<'a>)>
    where
        Doc<'a>: 's,
    {
        self.iter().map(|(k, v)| (k.as_ref(), v))
    }

    fn get(&self, key: &str) -> Option<&Doc<'a>> {
        self.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A key, borrowed from the text unless it has escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_str(DocVisitor)
            .and_then(|doc| match doc {
                Doc::String(s) => Ok(Key(s)),
                _ => Err(de::Error::custom("a key must be a string")),
            })
    }
}

struct DocVisitor;

impl<'de> Visitor<'de> for DocVisitor {
    type Value = Doc<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Doc<'de>, E> {
        Ok(Doc::Null)
    }

    fn visit_none<E>(self) -> Result<Doc<'de>, E> {
        Ok(Doc::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Doc<'de>, D::Error> {
        Doc::deserialize(d)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Doc<'de>, E> {
        Ok(Doc::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Doc<'de>, E> {
        Ok(Doc::Number(n.into(), None))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Doc<'de>, E> {
        Ok(Doc::Number(n.into(), None))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Doc<'de>, E> {
        Number::from_f64(n)
            .map(|n| Doc::Number(n, None))
            .ok_or_else(|| E::custom("a number must be finite"))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Doc<'de>, E> {
        Ok(Doc::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Doc<'de>, E> {
        Ok(Doc::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Doc<'de>, E> {
        Ok(Doc::String(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Doc::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc<'de>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8).min(64));
        while let Some(Key(key)) = map.next_key()? {
            entries.push((key, map.next_value()?));
        }
        Ok(Doc::Object(entries))
    }
}

impl<'de> Deserialize<'de> for Doc<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocVisitor)
    }
}

/// A number as the parsed trees give it to a visitor: `u64`, else `i64`, else `f64` (also
/// `flat`'s scalars, so that both paths decode alike).
pub(crate) fn visit_number<'de, V: Visitor<'de>>(
    n: &Number,
    visitor: V,
) -> Result<V::Value, Error> {
    if let Some(u) = n.as_u64() {
        visitor.visit_u64(u)
    } else if let Some(i) = n.as_i64() {
        visitor.visit_i64(i)
    } else {
        visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
    }
}

impl<'de> Deserializer<'de> for &'de Doc<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Doc::Null => visitor.visit_unit(),
            Doc::Bool(b) => visitor.visit_bool(*b),
            Doc::Number(n, _) => visit_number(n, visitor),
            Doc::String(s) => visitor.visit_borrowed_str(s),
            Doc::Array(items) => {
                let mut seq = SeqDeserializer::new(items.iter());
                let value = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
            Doc::Object(entries) => {
                let mut map = MapDeserializer::new(entries.iter().map(|(k, v)| (k.as_ref(), v)));
                let value = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(value)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Doc::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self {
            Doc::String(s) => visitor.visit_enum(s.as_ref().into_deserializer()),
            Doc::Object(entries) => visitor.visit_enum(MapAccessDeserializer::new(
                MapDeserializer::new(entries.iter().map(|(k, v)| (k.as_ref(), v))),
            )),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, Error> for &'de Doc<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// A scalar value of a flat object, borrowing its string from the text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(&'a str),
}

/// A flat object's entries in document order (repeated keys kept), on the stack up to 8.
pub(crate) type Entries<'a> = SmallVec<[(&'a str, Scalar<'a>); 8]>;

impl<'a> Json for Scalar<'a> {
    type Map = [(&'a str, Scalar<'a>)];

    fn view(&self) -> View<'_, Self> {
        match self {
            Scalar::Null => View::Null,
            Scalar::Bool(b) => View::Bool(*b),
            Scalar::Number(n) => View::Number(n),
            Scalar::String(s) => View::String(s),
        }
    }
}

impl<'a> JsonMap<Scalar<'a>> for [(&'a str, Scalar<'a>)] {
    fn entries<'s>(&'s self) -> impl Iterator<Item = (&'s str, &'s Scalar<'a>)>
    where
        Scalar<'a>: 's,
    {
        self.iter().map(|(k, v)| (*k, v))
    }

    fn get(&self, key: &str) -> Option<&Scalar<'a>> {
        self.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_borrowing_and_round_trips() {
        let text = r#"{"a": [1, -2, 2.5, true, null], "b\n": "x", "c": {"d": "é\"", "d": 1}}"#;
        let doc: Doc<'_> = serde_json::from_str(text).unwrap();
        let Doc::Object(entries) = &doc else {
            panic!("not an object")
        };
        assert!(matches!(entries[0].0, Cow::Borrowed("a")));
        assert!(matches!(entries[1].0, Cow::Owned(_)));
        assert_eq!(entries[2].1.view_len(), 2);
        let value = Value::deserialize(&doc).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"a": [1, -2, 2.5, true, null], "b\n": "x", "c": {"d": 1}})
        );
    }

    impl Doc<'_> {
        fn view_len(&self) -> usize {
            match self {
                Doc::Object(e) => e.len(),
                Doc::Array(i) => i.len(),
                _ => 0,
            }
        }
    }
}
