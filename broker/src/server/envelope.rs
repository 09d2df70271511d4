//! The request envelope: who is asking (capability or shim proof), the verb,
//! its args, and the optional id to echo. Unknown keys refuse.

use crate::error::Code;
/// Defined beside the gate that checks them; re-exported where the envelope
/// has always carried them.
pub use crate::proof::{Proof, ShimKind};
use serde_json::{Map, Value};

use mosaic_wire::int::is_safe_i64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    Cap(String),
    Shim {
        kind: ShimKind,
        proof: Proof,
        business: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub auth: Auth,
    pub verb: String,
    pub args: Option<Map<String, Value>>,
}

/// The `id` to echo: a safe integer, else none.
pub fn safe_id(v: &Value) -> Option<i64> {
    v.get("id")
        .and_then(Value::as_i64)
        .filter(|n| is_safe_i64(*n))
}

fn proof(v: Value) -> Result<Proof, Code> {
    let Value::Object(mut m) = v else {
        return Err(Code::InvalidRequest);
    };
    let pid = m
        .remove("pid")
        .and_then(|p| p.as_i64())
        .and_then(|p| i32::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or(Code::InvalidRequest)?;
    let start_time = m
        .remove("startTime")
        .and_then(|p| p.as_u64())
        .ok_or(Code::InvalidRequest)?;
    let nonce = match m.remove("nonce") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => s,
        _ => return Err(Code::InvalidRequest),
    };
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    Ok(Proof {
        pid,
        start_time,
        nonce,
    })
}

/// Parses a frame's JSON into an envelope.
pub fn parse(v: Value) -> Result<Envelope, Code> {
    let Value::Object(mut m) = v else {
        return Err(Code::InvalidRequest);
    };
    if let Some(id) = m.remove("id") {
        if id.as_i64().filter(|n| is_safe_i64(*n)).is_none() {
            return Err(Code::InvalidRequest);
        }
    }
    let verb = match m.remove("verb") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => s,
        _ => return Err(Code::InvalidRequest),
    };
    let args = match m.remove("args") {
        None => None,
        Some(Value::Object(a)) => Some(a),
        Some(_) => return Err(Code::InvalidRequest),
    };
    let cap = m.remove("cap");
    let human = m.remove("human");
    let tester = m.remove("tester");
    let business = m.remove("business");
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    let business = match business {
        None => None,
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => Some(s),
        Some(_) => return Err(Code::InvalidRequest),
    };
    let auth = match (cap, human, tester, business) {
        (Some(Value::String(c)), None, None, None) if !c.is_empty() && c.len() <= 128 => {
            Auth::Cap(c)
        }
        (None, Some(p), None, Some(business)) => Auth::Shim {
            kind: ShimKind::Human,
            proof: proof(p)?,
            business,
        },
        (None, None, Some(p), Some(business)) => Auth::Shim {
            kind: ShimKind::Tester,
            proof: proof(p)?,
            business,
        },
        _ => return Err(Code::InvalidRequest),
    };
    Ok(Envelope { auth, verb, args })
}

/// `{"ok":true,"result":R}` plus the id.
pub fn ok(result: Value, id: Option<i64>) -> Value {
    let mut m = Map::new();
    m.insert("ok".into(), Value::Bool(true));
    m.insert("result".into(), result);
    if let Some(id) = id {
        m.insert("id".into(), Value::from(id));
    }
    Value::Object(m)
}

/// `{"ok":false,"error":CODE}` plus the id.
pub fn refusal(code: Code, id: Option<i64>) -> Value {
    let mut m = Map::new();
    m.insert("ok".into(), Value::Bool(false));
    m.insert("error".into(), Value::from(code.as_str()));
    if let Some(id) = id {
        m.insert("id".into(), Value::from(id));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes() {
        let e = parse(json!({"cap":"abc","verb":"inbox","id":7})).unwrap();
        assert_eq!(e.auth, Auth::Cap("abc".into()));
        assert!(e.args.is_none());
        for bad in [
            json!({"cap":"a","verb":"inbox","extra":1}),
            json!({"cap":"a","human":{"pid":1,"startTime":1,"nonce":"n"},"business":"b","verb":"x"}),
            json!({"cap":"a","business":"b","verb":"x"}),
            json!({"human":{"pid":1,"startTime":1,"nonce":"n"},"verb":"x"}),
            json!({"human":{"pid":1,"startTime":1,"nonce":"n","x":1},"business":"b","verb":"x"}),
            json!({"cap":"a","verb":"inbox","args":[]}),
            json!({"cap":"a","verb":"inbox","id":1.5}),
            json!({"cap":"a","verb":"inbox","id":9007199254740992i64}),
            json!([1]),
        ] {
            assert_eq!(parse(bad.clone()), Err(Code::InvalidRequest), "{bad}");
        }
        assert_eq!(
            safe_id(&json!({"id": 9007199254740991i64})),
            Some(9007199254740991)
        );
        assert_eq!(safe_id(&json!({"id": "1"})), None);
    }
}
