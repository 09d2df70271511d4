//! Request envelope → typed request. Every request parses its own fields and
//! refuses leftovers; duplicate keys are refused at every nesting level.

use super::code::Code;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Largest integer accepted for generations and epochs (JSON safe integer).
pub use mosaic_wire::int::MAX_SAFE_INTEGER as MAX_INT;
/// Longest `h_source` / `h_payload`.
pub const MAX_HASH_LEN: usize = 256;

/// The persisted binding of a token.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    pub compaction_epoch: u64,
    pub request_epoch: u64,
    pub h_source: String,
    pub h_payload: String,
    pub schema_version: u64,
}

impl Binding {
    /// Range and shape checks shared by request parsing and state validation.
    pub fn is_valid(&self) -> bool {
        let hash_ok = |h: &str| {
            !h.is_empty() && h.len() <= MAX_HASH_LEN && h.bytes().all(|b| b.is_ascii_graphic())
        };
        self.compaction_epoch <= MAX_INT
            && self.request_epoch <= MAX_INT
            && self.schema_version <= MAX_INT
            && hash_ok(&self.h_source)
            && hash_ok(&self.h_payload)
    }
}

/// `session_id` + `runtime_generation`, as in `authenticate`.
#[derive(Debug, Clone)]
pub struct Identity {
    pub session_id: String,
    pub generation: u64,
}

#[derive(Debug, Clone)]
pub enum Request {
    RegisterAnchor { generation: u64 },
    Authenticate(Identity),
    MintToken(Identity, Binding),
    ConsumeToken(Identity, String),
}

/// Parse one frame (without its newline).
pub fn parse(bytes: &[u8]) -> Result<Request, Code> {
    let text = std::str::from_utf8(bytes).map_err(|_| Code::MalformedRequest)?;
    let value: Value = serde_json::from_str(text).map_err(|_| Code::MalformedRequest)?;
    if !value.is_object() {
        return Err(Code::MalformedRequest);
    }
    // Valid JSON that fails the strict pass can only have duplicate keys.
    let value = mosaic_client::json::from_slice(bytes).map_err(|_| Code::DuplicateField)?;
    let Value::Object(obj) = value else {
        return Err(Code::MalformedRequest);
    };
    let action = match obj.get("action") {
        None => return Err(Code::MissingField),
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(Code::InvalidField),
    };
    match action {
        "register_anchor" => {
            if obj.contains_key("session_id") {
                return Err(Code::SessionIdForbidden);
            }
            only(&obj, &["action", "runtime_generation"])?;
            Ok(Request::RegisterAnchor {
                generation: generation(&obj)?,
            })
        }
        "authenticate" => {
            only(&obj, &["action", "session_id", "runtime_generation"])?;
            Ok(Request::Authenticate(identity(&obj)?))
        }
        "mint_token" => {
            only(
                &obj,
                &["action", "session_id", "runtime_generation", "binding"],
            )?;
            let id = identity(&obj)?;
            let raw = obj.get("binding").ok_or(Code::MissingField)?;
            Ok(Request::MintToken(id, binding(raw)?))
        }
        "consume_token" => {
            only(
                &obj,
                &["action", "session_id", "runtime_generation", "token"],
            )?;
            let id = identity(&obj)?;
            let token = match obj.get("token") {
                None => return Err(Code::MissingField),
                Some(Value::String(s)) => s.clone(),
                Some(_) => return Err(Code::InvalidField),
            };
            Ok(Request::ConsumeToken(id, token))
        }
        _ => Err(Code::UnknownAction),
    }
}

fn only(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), Code> {
    if obj.keys().all(|k| allowed.contains(&k.as_str())) {
        Ok(())
    } else {
        Err(Code::UnknownField)
    }
}

fn generation(obj: &Map<String, Value>) -> Result<u64, Code> {
    match obj.get("runtime_generation") {
        None => Err(Code::MissingField),
        Some(v) => v
            .as_u64()
            .filter(|g| *g <= MAX_INT)
            .ok_or(Code::InvalidField),
    }
}

fn identity(obj: &Map<String, Value>) -> Result<Identity, Code> {
    let session_id = match obj.get("session_id") {
        None => return Err(Code::MissingField),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(Code::InvalidField),
    };
    Ok(Identity {
        session_id,
        generation: generation(obj)?,
    })
}

fn binding(raw: &Value) -> Result<Binding, Code> {
    let b: Binding = serde_json::from_value(raw.clone()).map_err(|_| Code::InvalidBinding)?;
    if !b.is_valid() {
        return Err(Code::InvalidBinding);
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(s: &str) -> Code {
        parse(s.as_bytes()).err().unwrap()
    }

    #[test]
    fn field_rules() {
        assert!(matches!(
            parse(br#"{"action":"register_anchor","runtime_generation":0}"#),
            Ok(Request::RegisterAnchor { generation: 0 })
        ));
        assert_eq!(
            code(r#"{"action":"register_anchor","runtime_generation":0,"session_id":null}"#),
            Code::SessionIdForbidden
        );
        assert_eq!(
            code(r#"{"action":"register_anchor","runtime_generation":-1}"#),
            Code::InvalidField
        );
        assert_eq!(
            code(r#"{"action":"register_anchor","runtime_generation":1.0}"#),
            Code::InvalidField
        );
        assert_eq!(
            code(r#"{"action":"register_anchor","runtime_generation":9007199254740992}"#),
            Code::InvalidField
        );
        assert_eq!(
            code(r#"{"action":"register_anchor","runtime_generation":1,"runtime_generation":2}"#),
            Code::DuplicateField
        );
        assert_eq!(code(r#"[1]"#), Code::MalformedRequest);
        assert_eq!(code(r#"{"action":"nope"}"#), Code::UnknownAction);
        assert_eq!(
            code(
                r#"{"action":"mint_token","session_id":"x","runtime_generation":0,"binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"a","h_payload":"b","schema_version":1,"h_source":"c"}}"#
            ),
            Code::DuplicateField
        );
        assert_eq!(
            code(
                r#"{"action":"mint_token","session_id":"x","runtime_generation":0,"binding":{"compaction_epoch":1,"request_epoch":1,"h_source":"a","h_payload":"b"}}"#
            ),
            Code::InvalidBinding
        );
    }
}
