//! JSON requests with no duplicate keys.
//!
//! `serde_json::Value` keeps the last of two equal keys in one object, so
//! `{"verb":"a","verb":"b"}` would mean whatever the last writer chose. Every
//! request this workspace reads from a socket or a host channel goes through
//! [`Strict`] instead: a value is built exactly as `Value` would build it,
//! except that a key seen twice in one object, at any depth, fails the parse.
//! Callers map that failure onto their own static code (the bus answers
//! `invalid-request`, the lease broker `duplicate-field`).

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::fmt;

/// A JSON value whose objects never had duplicate keys.
pub struct Strict(pub Value);

/// Parses `bytes` as one JSON value, refusing duplicate keys at any depth.
/// The error is serde_json's; it never reaches a wire.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(bytes).map(|Strict(v)| v)
}

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Strict(Value::Array(out)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if out.insert(key, v).is_some() {
                return Err(de::Error::custom("duplicate key"));
            }
        }
        Ok(Strict(Value::Object(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::from_slice;
    use serde_json::{json, Value};

    #[test]
    fn same_value_as_serde_json_without_duplicates() {
        let text =
            br#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":{"d":[]},"e":18446744073709551615}"#;
        let plain: Value = serde_json::from_slice(text).unwrap();
        assert_eq!(from_slice(text).unwrap(), plain);
        assert_eq!(from_slice(b"[]").unwrap(), json!([]));
        assert_eq!(from_slice(br#""s""#).unwrap(), json!("s"));
    }

    #[test]
    fn duplicate_keys_refuse_at_any_depth() {
        for text in [
            r#"{"a":1,"a":1}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{"x":{"a":1,"a":2}}"#,
            r#"{"x":[{"k":{"a":1,"a":{}}}]}"#,
            r#"[[{"a":null,"a":null}]]"#,
            // Equal after JSON unescaping is equal.
            r#"{"a":1,"\u0061":2}"#,
        ] {
            assert!(serde_json::from_str::<Value>(text).is_ok(), "{text}");
            assert!(from_slice(text.as_bytes()).is_err(), "{text}");
        }
    }

    #[test]
    fn malformed_still_refuses() {
        for text in ["", "{", r#"{"a":}"#, "[1,]", "{} x"] {
            assert!(from_slice(text.as_bytes()).is_err(), "{text}");
        }
    }
}
