//! Argument parsing shared by the verbs: take what a verb knows, then refuse
//! anything left over.

use crate::error::Code;
use serde_json::{Map, Value};

pub struct Args(Map<String, Value>);

impl Args {
    pub fn new(args: Option<Map<String, Value>>) -> Args {
        Args(args.unwrap_or_default())
    }

    /// Takes a raw value (absent: `None`), for arguments with their own codes.
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key)
    }

    /// A required string of 1..=max bytes.
    pub fn str(&mut self, key: &str, max: usize) -> Result<String, Code> {
        self.opt_str(key, max)?.ok_or(Code::InvalidRequest)
    }

    /// An optional string of 1..=max bytes (null counts as absent).
    pub fn opt_str(&mut self, key: &str, max: usize) -> Result<Option<String>, Code> {
        match self.0.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.is_empty() && s.len() <= max && !s.contains('\0') => {
                Ok(Some(s))
            }
            Some(_) => Err(Code::InvalidRequest),
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

    /// Refuses any key not taken.
    pub fn finish(self) -> Result<(), Code> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Code::InvalidRequest)
        }
    }
}
