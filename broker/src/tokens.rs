//! The known-token check: no loaded credential token may appear in a
//! request's arguments, in evidence about to be written, or in a reply.
//!
//! The broker holds the tokens the host loaded (issue 6 fills them; until
//! then the set is empty). This is one function, [`KnownTokens::check`], used
//! by dispatch for requests and replies and by the evidence writers for every
//! row they store. It is not general secret redaction: it refuses exact
//! substrings of loaded tokens in JSON strings, keys and number texts.

use crate::error::Code;
use serde_json::Value;

/// The tokens the running broker loaded, never printed.
#[derive(Clone, Default)]
pub struct KnownTokens {
    tokens: Vec<String>,
}

impl std::fmt::Debug for KnownTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KnownTokens({} loaded)", self.tokens.len())
    }
}

impl KnownTokens {
    /// A set of loaded tokens. Empty strings are ignored (they would match everything).
    pub fn new(tokens: Vec<String>) -> KnownTokens {
        KnownTokens {
            tokens: tokens.into_iter().filter(|t| !t.is_empty()).collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// `known-token` when `text` contains a loaded token.
    pub fn check_str(&self, text: &str) -> Result<(), Code> {
        if self.tokens.iter().any(|t| text.contains(t.as_str())) {
            Err(Code::KnownToken)
        } else {
            Ok(())
        }
    }

    /// `known-token` when any string, key or number text in `v` contains a loaded token.
    pub fn check(&self, v: &Value) -> Result<(), Code> {
        if self.tokens.is_empty() {
            return Ok(());
        }
        match v {
            Value::String(s) => self.check_str(s),
            Value::Number(n) => self.check_str(&n.to_string()),
            Value::Array(a) => a.iter().try_for_each(|x| self.check(x)),
            Value::Object(m) => m.iter().try_for_each(|(k, x)| {
                self.check_str(k)?;
                self.check(x)
            }),
            Value::Null | Value::Bool(_) => Ok(()),
        }
    }

    /// Checks several optional strings (columns of one row).
    pub fn check_all(&self, texts: &[Option<&str>]) -> Result<(), Code> {
        if self.tokens.is_empty() {
            return Ok(());
        }
        texts.iter().flatten().try_for_each(|t| self.check_str(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_tokens_in_strings_keys_and_numbers() {
        let k = KnownTokens::new(vec!["secretTOKEN-123456".into(), "9999888877776666".into()]);
        assert_eq!(
            k.check(&json!({"a": "x secretTOKEN-123456 y"})),
            Err(Code::KnownToken)
        );
        assert_eq!(
            k.check(&json!({"secretTOKEN-123456": 1})),
            Err(Code::KnownToken)
        );
        assert_eq!(
            k.check(&json!([1, [9999888877776666u64]])),
            Err(Code::KnownToken)
        );
        assert_eq!(
            k.check(&json!({"a": ["secretTOKEN-12345"], "b": null})),
            Ok(())
        );
        assert_eq!(
            k.check_all(&[None, Some("..secretTOKEN-123456")]),
            Err(Code::KnownToken)
        );
        assert_eq!(KnownTokens::default().check(&json!("anything")), Ok(()));
        assert_eq!(format!("{k:?}"), "KnownTokens(2 loaded)");
    }

    /// `is_empty` says whether any token is loaded (an empty string is not
    /// one): the dispatch skips the argument check only then. (`cargo
    /// mutants`: docs/testing.md.)
    #[test]
    fn empty_means_no_token_loaded() {
        assert!(KnownTokens::default().is_empty());
        assert!(KnownTokens::new(vec![String::new()]).is_empty());
        assert!(!KnownTokens::new(vec!["secretTOKEN-123456".into()]).is_empty());
    }
}
