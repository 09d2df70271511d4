//! Host ops after boot, at the channel's edge: one request line, one reply,
//! the `id` echoed. The op is parsed here into a typed [`HostOp`]
//! (`crate::handlers::ops`) and handed to the runtime, which applies it on the
//! writer thread.

use crate::error::Code;
use crate::handlers::{ok_reply, HostOp};
use crate::runtime::Runtime;
use crate::server::envelope::{self, refusal};
use serde_json::{json, Value};

/// What the channel loop should do after answering.
pub enum After {
    Continue,
    Close,
}

/// Answers one host op.
pub fn handle(rt: &Runtime, v: Value) -> (Value, After) {
    let id = envelope::safe_id(&v);
    let Value::Object(mut m) = v else {
        return (refusal(Code::InvalidRequest, None), After::Continue);
    };
    m.remove("id");
    let op = match m.remove("op") {
        Some(Value::String(s)) => s,
        _ => return (refusal(Code::InvalidRequest, id), After::Continue),
    };
    let with_id = |mut reply: Value| {
        if let (Some(id), Some(o)) = (id, reply.as_object_mut()) {
            o.insert("id".into(), json!(id));
        }
        reply
    };
    let result = match op.as_str() {
        "close" if m.is_empty() => return (with_id(json!({"ok": true})), After::Close),
        "close" => Err(Code::InvalidRequest),
        "boot" => Err(Code::AlreadyBooted),
        other => HostOp::parse(other, m).and_then(|op| {
            let key = op.reply_key();
            rt.op(op).map(|r| ok_reply(key, r))
        }),
    };
    match result {
        Ok(reply) => (with_id(reply), After::Continue),
        Err(code) => (refusal(code, id), After::Continue),
    }
}
