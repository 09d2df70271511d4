//! What the built-in sources read of one transcript line, read without a
//! JSON tree.
//!
//! A line is walked once with serde's visitors over the line's own bytes:
//! the few fields a source looks at are kept (a string borrowed from the
//! line when it holds no escape), and every other value is skipped where it
//! stands (`IgnoredAny`: serde_json steps over it keeping one byte per open
//! bracket). So reading a line costs at most its own length again, whatever
//! it holds: before, each line became a `serde_json::Value` first, and a
//! 60 MiB array of zeros became a gigabyte of them (issue 29). Nothing here
//! decides what a line means; `claude_code` and `pi` do, over
//! [`LineFacts`]. Anything off is `usage-parse-failed`.
//!
//! A field named twice keeps its last value, as a parsed object would.

use crate::error::Code;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// A value a source reads, as far as it cares: a string, a non-negative
/// integer that fits in 64 bits, a boolean, null, or anything else
/// (another number, an array, an object), which no source reads as a
/// scalar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar<'a> {
    Str(Cow<'a, str>),
    Count(u64),
    Bool(bool),
    Null,
    Other,
}

/// The string of a field, if it is one (what `Value::as_str` gave).
pub fn as_str<'s>(v: &'s Option<Scalar<'_>>) -> Option<&'s str> {
    match v {
        Some(Scalar::Str(s)) => Some(s),
        _ => None,
    }
}

/// A field that should hold an object: absent, not an object, or what was
/// read of it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum Obj<T> {
    #[default]
    Absent,
    NotObject,
    Is(T),
}

impl<T> Obj<T> {
    /// The object, or `usage-parse-failed` (what `object_at` was).
    pub fn required(&self) -> Result<&T, Code> {
        match self {
            Obj::Is(t) => Ok(t),
            _ => Err(Code::UsageParseFailed),
        }
    }

    pub fn get(&self) -> Option<&T> {
        match self {
            Obj::Is(t) => Some(t),
            _ => None,
        }
    }
}

/// What a line's top-level object holds for the sources.
#[derive(Debug, Default)]
pub struct LineFacts<'a> {
    /// `type`.
    pub kind: Option<Scalar<'a>>,
    /// `isSidechain` (Claude Code).
    pub sidechain: Option<Scalar<'a>>,
    /// `id` (pi's entry id).
    pub id: Option<Scalar<'a>>,
    /// `timestamp` (pi).
    pub timestamp: Option<Scalar<'a>>,
    pub message: Obj<Message<'a>>,
}

/// What a line's `message` object holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Message<'a> {
    /// `id` (Claude Code's reply id).
    pub id: Option<Scalar<'a>>,
    pub model: Option<Scalar<'a>>,
    pub provider: Option<Scalar<'a>>,
    pub role: Option<Scalar<'a>>,
    /// `stop_reason` (Claude Code).
    pub stop_reason: Option<Scalar<'a>>,
    /// `stopReason` (pi).
    pub stop_reason_pi: Option<Scalar<'a>>,
    pub usage: Obj<Usage>,
    /// What `content` holds (see [`Content`]); `None` when there is none.
    pub content: Option<Content>,
}

/// The counts a `usage` object holds, by both sources' names.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: Option<Scalar<'static>>,
    pub output_tokens: Option<Scalar<'static>>,
    pub cache_creation_input_tokens: Option<Scalar<'static>>,
    pub cache_read_input_tokens: Option<Scalar<'static>>,
    pub input: Option<Scalar<'static>>,
    pub output: Option<Scalar<'static>>,
    pub cache_write: Option<Scalar<'static>>,
    pub cache_read: Option<Scalar<'static>>,
}

/// What a `content` value says, read as it streams by: a string, or an
/// array of blocks (each an object with a `type`, and for text a `text`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Content {
    /// Some block's `type` is `tool_use`.
    pub asks_tool: bool,
    /// The content is a string that starts with the marker, or some block
    /// of `type` `text` has a `text` that does.
    pub marked: bool,
}

/// Reads a line: a JSON object, and nothing after it but whitespace.
/// `marker` is the prefix [`Content::marked`] looks for; with none, a
/// message's `content` is skipped unread ([`Message::content`] `None`).
pub fn read_line<'a>(line: &'a [u8], marker: Option<&str>) -> Result<LineFacts<'a>, Code> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let facts = de
        .deserialize_map(LineV { marker })
        .map_err(|_| Code::UsageParseFailed)?;
    de.end().map_err(|_| Code::UsageParseFailed)?;
    Ok(facts)
}

/// A reply id: a string of 1 to 256 bytes.
pub fn reply_id<'s>(v: &'s Option<Scalar<'_>>) -> Result<&'s str, Code> {
    as_str(v)
        .filter(|s| !s.is_empty() && s.len() <= 256)
        .ok_or(Code::UsageParseFailed)
}

/// A token count: a non-negative integer up to 2^63-1; an `optional` one
/// may be absent or null (0: Claude Code's API leaves the cache counts out
/// when no cache was used).
pub fn count(v: &Option<Scalar<'_>>, optional: bool) -> Result<u64, Code> {
    match v {
        None | Some(Scalar::Null) if optional => Ok(0),
        Some(Scalar::Count(n)) if *n <= super::COUNT_MAX => Ok(*n),
        _ => Err(Code::UsageParseFailed),
    }
}

/// The keys the visitors know; anything else is skipped.
enum Key {
    Type,
    IsSidechain,
    Id,
    Timestamp,
    Message,
    Model,
    Provider,
    Role,
    StopReason,
    StopReasonPi,
    Usage,
    Content,
    Text,
    InputTokens,
    OutputTokens,
    CacheCreation,
    CacheReadTokens,
    Input,
    Output,
    CacheWrite,
    CacheRead,
    Other,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct KeyV;
        impl Visitor<'_> for KeyV {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                Ok(match s {
                    "type" => Key::Type,
                    "isSidechain" => Key::IsSidechain,
                    "id" => Key::Id,
                    "timestamp" => Key::Timestamp,
                    "message" => Key::Message,
                    "model" => Key::Model,
                    "provider" => Key::Provider,
                    "role" => Key::Role,
                    "stop_reason" => Key::StopReason,
                    "stopReason" => Key::StopReasonPi,
                    "usage" => Key::Usage,
                    "content" => Key::Content,
                    "text" => Key::Text,
                    "input_tokens" => Key::InputTokens,
                    "output_tokens" => Key::OutputTokens,
                    "cache_creation_input_tokens" => Key::CacheCreation,
                    "cache_read_input_tokens" => Key::CacheReadTokens,
                    "input" => Key::Input,
                    "output" => Key::Output,
                    "cacheWrite" => Key::CacheWrite,
                    "cacheRead" => Key::CacheRead,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(KeyV)
    }
}

/// Skips every element of an array or entry of an object.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Reads one value as a [`Scalar`] (an array or object is skipped).
struct ScalarV;

impl<'de> Visitor<'de> for ScalarV {
    type Value = Scalar<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Owned(s.to_string())))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Count(n))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Scalar<'de>, E> {
        Ok(u64::try_from(n).map_or(Scalar::Other, Scalar::Count))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Bool(b))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar<'de>, A::Error> {
        drain_seq(seq).map(|()| Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar<'de>, A::Error> {
        drain_map(map).map(|()| Scalar::Other)
    }
}

impl<'de> DeserializeSeed<'de> for ScalarV {
    type Value = Scalar<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scalar<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

/// A count keeps no string: a string there is no count.
fn owned(s: Scalar<'_>) -> Scalar<'static> {
    match s {
        Scalar::Str(_) | Scalar::Other => Scalar::Other,
        Scalar::Count(n) => Scalar::Count(n),
        Scalar::Bool(b) => Scalar::Bool(b),
        Scalar::Null => Scalar::Null,
    }
}

/// Reads a value that should be an object with `V`, or notes that it is
/// not one (skipping it).
struct ObjSeed<V>(V);

impl<'de, V> DeserializeSeed<'de> for ObjSeed<V>
where
    V: Visitor<'de>,
{
    type Value = Obj<V::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(ObjV(self.0))
    }
}

struct ObjV<V>(V);

impl<'de, V> Visitor<'de> for ObjV<V>
where
    V: Visitor<'de>,
{
    type Value = Obj<V::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map).map(Obj::Is)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq).map(|()| Obj::NotObject)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Obj::NotObject)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Obj::NotObject)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Obj::NotObject)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Obj::NotObject)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Obj::NotObject)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Obj::NotObject)
    }
}

/// The top-level object.
struct LineV<'m> {
    marker: Option<&'m str>,
}

impl<'de> Visitor<'de> for LineV<'_> {
    type Value = LineFacts<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LineFacts<'de>, A::Error> {
        let mut l = LineFacts::default();
        while let Some(k) = map.next_key::<Key>()? {
            match k {
                Key::Type => l.kind = Some(map.next_value_seed(ScalarV)?),
                Key::IsSidechain => l.sidechain = Some(map.next_value_seed(ScalarV)?),
                Key::Id => l.id = Some(map.next_value_seed(ScalarV)?),
                Key::Timestamp => l.timestamp = Some(map.next_value_seed(ScalarV)?),
                Key::Message => {
                    l.message = map.next_value_seed(ObjSeed(MessageV {
                        marker: self.marker,
                    }))?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(l)
    }
}

struct MessageV<'m> {
    marker: Option<&'m str>,
}

impl<'de> Visitor<'de> for MessageV<'_> {
    type Value = Message<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message<'de>, A::Error> {
        let mut m = Message::default();
        while let Some(k) = map.next_key::<Key>()? {
            match k {
                Key::Id => m.id = Some(map.next_value_seed(ScalarV)?),
                Key::Model => m.model = Some(map.next_value_seed(ScalarV)?),
                Key::Provider => m.provider = Some(map.next_value_seed(ScalarV)?),
                Key::Role => m.role = Some(map.next_value_seed(ScalarV)?),
                Key::StopReason => m.stop_reason = Some(map.next_value_seed(ScalarV)?),
                Key::StopReasonPi => m.stop_reason_pi = Some(map.next_value_seed(ScalarV)?),
                Key::Usage => m.usage = map.next_value_seed(ObjSeed(UsageV))?,
                Key::Content => match self.marker {
                    Some(marker) => m.content = Some(map.next_value_seed(ContentV { marker })?),
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(m)
    }
}

struct UsageV;

impl<'de> Visitor<'de> for UsageV {
    type Value = Usage;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Usage, A::Error> {
        let mut u = Usage::default();
        while let Some(k) = map.next_key::<Key>()? {
            let slot = match k {
                Key::InputTokens => &mut u.input_tokens,
                Key::OutputTokens => &mut u.output_tokens,
                Key::CacheCreation => &mut u.cache_creation_input_tokens,
                Key::CacheReadTokens => &mut u.cache_read_input_tokens,
                Key::Input => &mut u.input,
                Key::Output => &mut u.output,
                Key::CacheWrite => &mut u.cache_write,
                Key::CacheRead => &mut u.cache_read,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(owned(map.next_value_seed(ScalarV)?));
        }
        Ok(u)
    }
}

/// A `content` value: a string, or an array of blocks.
struct ContentV<'m> {
    marker: &'m str,
}

impl<'de> DeserializeSeed<'de> for ContentV<'_> {
    type Value = Content;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Content, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ContentV<'_> {
    type Value = Content;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Content, E> {
        Ok(Content {
            asks_tool: false,
            marked: s.starts_with(self.marker),
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
        let mut c = Content::default();
        while let Some(b) = seq.next_element_seed(ObjSeed(BlockV {
            marker: self.marker,
        }))? {
            if let Obj::Is(b) = b {
                let kind = as_str(&b.kind);
                c.asks_tool |= kind == Some("tool_use");
                c.marked |= kind == Some("text") && b.text_marked;
            }
        }
        Ok(c)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Content, A::Error> {
        drain_map(map).map(|()| Content::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Content, E> {
        Ok(Content::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Content, E> {
        Ok(Content::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Content, E> {
        Ok(Content::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Content, E> {
        Ok(Content::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
        Ok(Content::default())
    }
}

/// One content block: its `type`, and whether its `text` starts with the
/// marker (the text itself is never kept).
#[derive(Default)]
struct Block<'a> {
    kind: Option<Scalar<'a>>,
    text_marked: bool,
}

struct BlockV<'m> {
    marker: &'m str,
}

impl<'de> Visitor<'de> for BlockV<'_> {
    type Value = Block<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block<'de>, A::Error> {
        let mut b = Block::default();
        while let Some(k) = map.next_key::<Key>()? {
            match k {
                Key::Type => b.kind = Some(map.next_value_seed(ScalarV)?),
                Key::Text => {
                    b.text_marked = map.next_value_seed(MarkedV {
                        marker: self.marker,
                    })?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(b)
    }
}

/// Whether a value is a string starting with the marker.
struct MarkedV<'m> {
    marker: &'m str,
}

impl<'de> DeserializeSeed<'de> for MarkedV<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MarkedV<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
        Ok(s.starts_with(self.marker))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        drain_seq(seq).map(|()| false)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        drain_map(map).map(|()| false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_and_everything_else_skipped() {
        let line = br#"{"pad":[0,[1,{"a":"b"}],"x"],"type":"assistant","isSidechain":true,
            "message":{"id":"m\u005f1","model":"m","usage":{"input_tokens":3,"output_tokens":-1,
            "cache_read_input_tokens":1.5,"cacheWrite":null,"junk":{"deep":[[[]]]}},
            "content":[{"type":"tool_use","input":{"text":"[Stop"}},"text",{"text":"[Stop here","type":"text"}]}}"#;
        let f = read_line(line, Some("[Stop")).unwrap();
        assert_eq!(as_str(&f.kind), Some("assistant"));
        assert_eq!(f.sidechain, Some(Scalar::Bool(true)));
        let m = f.message.required().unwrap();
        assert_eq!(reply_id(&m.id), Ok("m_1"));
        let u = m.usage.required().unwrap();
        assert_eq!(count(&u.input_tokens, false), Ok(3));
        assert_eq!(u.output_tokens, Some(Scalar::Other));
        assert_eq!(u.cache_read_input_tokens, Some(Scalar::Other));
        assert_eq!(count(&u.cache_write, true), Ok(0));
        assert_eq!(count(&u.cache_read, true), Ok(0));
        assert_eq!(
            m.content,
            Some(Content {
                asks_tool: true,
                marked: true
            })
        );
    }

    #[test]
    fn the_last_of_a_repeated_field_wins_and_shapes_are_noted() {
        let f = read_line(
            br#"{"type":"user","type":"assistant","message":[1]}"#,
            Some("x"),
        )
        .unwrap();
        assert_eq!(as_str(&f.kind), Some("assistant"));
        assert_eq!(f.message, Obj::NotObject);
        let f = read_line(
            br#"{"type":7,"message":{"usage":"x","content":"x!"}}"#,
            Some("x"),
        )
        .unwrap();
        assert_eq!(as_str(&f.kind), None);
        let m = f.message.get().unwrap();
        assert_eq!(m.usage, Obj::NotObject);
        assert_eq!(m.content.map(|c| c.marked), Some(true));
        assert_eq!(
            f.message.get().unwrap().content.map(|c| c.asks_tool),
            Some(false)
        );
    }

    #[test]
    fn with_no_marker_content_is_not_read() {
        let line = br#"{"message":{"content":[{"type":"tool_use"}],"model":"m"}}"#;
        let f = read_line(line, None).unwrap();
        let m = f.message.get().unwrap();
        assert_eq!((m.content, as_str(&m.model)), (None, Some("m")));
        let f = read_line(line, Some("x")).unwrap();
        assert_eq!(
            f.message.get().unwrap().content.map(|c| c.asks_tool),
            Some(true)
        );
    }

    #[test]
    fn lines_that_are_not_one_object_fail() {
        for bad in [
            &b"not json"[..],
            b"[1]",
            b"\"x\"",
            b"{\"a\":1} {}",
            b"{\"a\":1",
            b"{\"a\":\"\x01\"}",
            b"",
        ] {
            assert_eq!(
                read_line(bad, Some("x")).map(|_| ()),
                Err(Code::UsageParseFailed),
                "{bad:?}"
            );
        }
        assert!(read_line(b" {} \t", Some("x")).is_ok());
    }

    #[test]
    fn a_huge_ignored_value_costs_no_tree() {
        // Deeper than serde_json's recursion limit, and long: skipped.
        let mut line = b"{\"type\":\"user\",\"pad\":".to_vec();
        line.extend(std::iter::repeat_n(b'[', 10_000));
        line.extend(std::iter::repeat_n(b']', 10_000));
        line.extend_from_slice(b",\"zeros\":[0");
        line.extend(std::iter::repeat_n(&b",0"[..], 100_000).flatten());
        line.extend_from_slice(b"]}");
        let f = read_line(&line, Some("x")).unwrap();
        assert_eq!(as_str(&f.kind), Some("user"));
    }
}
