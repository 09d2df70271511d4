//! The one argument reader, for a socket verb's `args` and a host op's
//! fields alike: take what the request knows, one key at a time, then
//! refuse anything left over. One string rule for both: 1 to `max` bytes
//! and no NUL (a host op's strings take [`HOST_MAX`]).

use crate::error::Code;
use serde_json::{Map, Value};

/// Longest host op string argument, in bytes.
pub const HOST_MAX: usize = 256;

/// The one string rule: a string of 1 to `max` bytes with no NUL.
pub fn string(v: Option<Value>, max: usize) -> Result<String, Code> {
    match v {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= max && !s.contains('\0') => Ok(s),
        _ => Err(Code::InvalidRequest),
    }
}

/// [`string`] for an optional argument: absent or null is `None`.
pub fn opt_string(v: Option<Value>, max: usize) -> Result<Option<String>, Code> {
    match v {
        None | Some(Value::Null) => Ok(None),
        other => string(other, max).map(Some),
    }
}

/// A host op's string (see [`HOST_MAX`]).
pub fn host_str(v: Option<Value>) -> Result<String, Code> {
    string(v, HOST_MAX)
}

/// A request's arguments, taken one by one.
pub struct Fields(Map<String, Value>);

impl Fields {
    pub fn new(m: Map<String, Value>) -> Fields {
        Fields(m)
    }

    /// A verb's `args` (absent: none).
    pub fn of(args: Option<Map<String, Value>>) -> Fields {
        Fields(args.unwrap_or_default())
    }

    /// Takes a raw value (absent: `None`), for arguments with their own codes.
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key)
    }

    /// Takes a key's raw value (null counts as absent).
    pub fn take_present(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key).filter(|v| !v.is_null())
    }

    /// A required string of 1..=max bytes.
    pub fn str(&mut self, key: &str, max: usize) -> Result<String, Code> {
        string(self.0.remove(key), max)
    }

    /// An optional string of 1..=max bytes (null counts as absent).
    pub fn opt_str(&mut self, key: &str, max: usize) -> Result<Option<String>, Code> {
        opt_string(self.0.remove(key), max)
    }

    /// A required JSON object.
    pub fn object(&mut self, key: &str) -> Result<Map<String, Value>, Code> {
        match self.0.remove(key) {
            Some(Value::Object(m)) => Ok(m),
            _ => Err(Code::InvalidRequest),
        }
    }

    /// An optional JSON object.
    pub fn opt_object(&mut self, key: &str) -> Result<Option<Map<String, Value>>, Code> {
        match self.0.remove(key) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(Code::InvalidRequest),
        }
    }

    /// True when no keys are left.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Refuses any key not taken.
    pub fn finish(self) -> Result<(), Code> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Code::InvalidRequest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_string_rule() {
        let ok = |s: &str| host_str(Some(json!(s)));
        assert_eq!(ok("a"), Ok("a".to_string()));
        assert_eq!(ok(&"x".repeat(HOST_MAX)).map(|s| s.len()), Ok(HOST_MAX));
        assert_eq!(ok(&"x".repeat(HOST_MAX + 1)), Err(Code::InvalidRequest));
        assert_eq!(ok(""), Err(Code::InvalidRequest));
        assert_eq!(ok("a\0b"), Err(Code::InvalidRequest));
        assert_eq!(host_str(Some(json!(1))), Err(Code::InvalidRequest));
        assert_eq!(host_str(None), Err(Code::InvalidRequest));
        assert_eq!(opt_string(None, HOST_MAX), Ok(None));
        assert_eq!(opt_string(Some(Value::Null), HOST_MAX), Ok(None));
        assert_eq!(
            opt_string(Some(json!("a\0")), HOST_MAX),
            Err(Code::InvalidRequest)
        );
    }
}
