//! JSON request bodies: objects only.
//!
//! serde's derived `Deserialize` for a struct also accepts a positional array: `["B-1", 1, 2,
//! "1.00", "EUR"]` reads as a `TransferRequest`, fields in declaration order. That is a second,
//! unnamed shape of every request — `deny_unknown_fields` does not cover it (an array has no
//! names), no client means it, and a reordering of a struct's fields would silently change what
//! such a request says. [`from_slice`] reads through a deserializer that asks for a map wherever a
//! struct is expected, at every depth (a batch's transfers, an order's customer), so a struct
//! given as anything but an object is refused with a message containing [`NOT_AN_OBJECT`]
//! (`checks::parse_json` answers it 400 `not_an_object`). Arrays stay arrays where a field is a
//! list.
//!
//! Limit: an enum's struct *variant* is read by serde_json itself (no request has one).

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};
use std::fmt;

/// What the error of a struct given as anything but an object says it expected.
pub const NOT_AN_OBJECT: &str = "a JSON object";

/// `T` from JSON text, every struct in it from an object (see the module docs); trailing
/// non-whitespace is an error, as in `serde_json::from_slice`.
pub fn from_slice<T: DeserializeOwned>(body: &[u8]) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = T::deserialize(ObjectsOnly(&mut de))?;
    de.end()?;
    Ok(value)
}

/// A deserializer whose structs are maps; everything it hands out is wrapped the same way.
struct ObjectsOnly<D>(D);

/// A visitor whose nested deserializers are wrapped; `object` names the struct it reads.
struct Wrap<V> {
    inner: V,
    object: Option<&'static str>,
}

impl<V> Wrap<V> {
    fn new(inner: V) -> Self {
        Wrap { inner, object: None }
    }
}

struct Seed<S>(S);
struct Seq<A>(A);
struct Map<A>(A);
struct Enum<A>(A);
struct Variant<A>(A);

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
                self.0.$method($($arg,)* Wrap::new(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectsOnly<D> {
    type Error = D::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        // serde_json's `deserialize_map` takes `{` only; its `deserialize_struct` also takes `[`.
        self.0.deserialize_map(Wrap { inner: visitor, object: Some(name) })
    }

    forward_deserialize! {
        deserialize_any(), deserialize_bool(), deserialize_i8(), deserialize_i16(), deserialize_i32(),
        deserialize_i64(), deserialize_i128(), deserialize_u8(), deserialize_u16(), deserialize_u32(),
        deserialize_u64(), deserialize_u128(), deserialize_f32(), deserialize_f64(), deserialize_char(),
        deserialize_str(), deserialize_string(), deserialize_bytes(), deserialize_byte_buf(),
        deserialize_option(), deserialize_unit(), deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str), deserialize_seq(), deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize), deserialize_map(),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(), deserialize_ignored_any(),
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.object {
            Some(name) => write!(f, "{NOT_AN_OBJECT} ({name})"),
            None => self.inner.expecting(f),
        }
    }

    forward_visit! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char), visit_str(&str),
        visit_borrowed_str(&'de str), visit_string(String), visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<V::Value, D2::Error> {
        self.inner.visit_some(ObjectsOnly(d))
    }
    fn visit_newtype_struct<D2: Deserializer<'de>>(self, d: D2) -> Result<V::Value, D2::Error> {
        self.inner.visit_newtype_struct(ObjectsOnly(d))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(Seq(seq))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Map(map))
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Enum(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(ObjectsOnly(d))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Seq<A> {
    type Error = A::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Map<A> {
    type Error = A::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Seed(seed))
    }
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Enum<A> {
    type Error = A::Error;
    type Variant = Variant<A::Variant>;
    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(Seed(seed))?;
        Ok((value, Variant(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Variant<A> {
    type Error = A::Error;
    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Seed(seed))
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap::new(visitor))
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Wrap::new(visitor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Leg {
        bmi: String,
        amount: u64,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Batch {
        legs: Vec<Leg>,
        first: Option<Leg>,
        tags: Vec<String>,
        kind: Kind,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Plain,
        Urgent,
    }

    fn refused<T: DeserializeOwned + fmt::Debug>(text: &str) -> String {
        match from_slice::<T>(text.as_bytes()) {
            Ok(v) => panic!("{text} was read as {v:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn objects_read_as_serde_would() {
        let text = r#"{"legs":[{"bmi":"A","amount":1},{"amount":2,"bmi":"B"}],"first":{"bmi":"C","amount":3},
                       "tags":["x","y"],"kind":"urgent"}"#;
        let batch: Batch = from_slice(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let plain: Batch = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(batch, plain);
        assert_eq!(batch.kind, Kind::Urgent);
        let none: Batch = from_slice(br#"{"legs":[],"first":null,"tags":[],"kind":"plain"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(none.first, None);
    }

    #[test]
    fn a_struct_given_as_an_array_is_refused_at_every_depth() {
        // serde_json alone reads each of these.
        let top = r#"["A", 1]"#;
        assert!(serde_json::from_str::<Leg>(top).is_ok());
        let in_list = r#"{"legs":[["A",1]],"first":null,"tags":[],"kind":"plain"}"#;
        assert!(serde_json::from_str::<Batch>(in_list).is_ok());
        let in_option = r#"{"legs":[],"first":["A",1],"tags":[],"kind":"plain"}"#;
        let whole = r#"[[], null, [], "plain"]"#;
        for (text, e) in [
            (top, refused::<Leg>(top)),
            (in_list, refused::<Batch>(in_list)),
            (in_option, refused::<Batch>(in_option)),
            (whole, refused::<Batch>(whole)),
            ("1", refused::<Leg>("1")),
        ] {
            assert!(e.contains(NOT_AN_OBJECT), "{text}: {e}");
        }
    }

    #[test]
    fn other_errors_keep_serdes_words() {
        assert!(refused::<Leg>(r#"{"bmi":"A"}"#).starts_with("missing field"));
        assert!(refused::<Leg>(r#"{"bmi":"A","amount":1,"x":0}"#).starts_with("unknown field"));
        assert!(refused::<Leg>(r#"{"bmi":"A","amount":1} x"#).contains("trailing characters"));
        assert!(refused::<Leg>(r#"{"bmi":"A","amount":"1"}"#).starts_with("invalid type"));
    }
}
