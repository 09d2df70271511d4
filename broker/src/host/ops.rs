//! Host ops after boot: one request, one reply, the `id` echoed.

use crate::config::LaunchRecord;
use crate::error::Code;
use crate::runtime::Runtime;
use crate::server::envelope::{self, refusal};
use serde_json::{json, Map, Value};

/// Host ops the spec (bus-3i) names that this build does not serve yet:
/// the git socket's landing ops. They answer `not-implemented`, not
/// `unknown-op`, so a host can tell "not built" from "no such op".
const PLANNED: &[&str] = &["checkLand", "recordLand", "landRefused", "landHeld"];

/// What the channel loop should do after answering.
pub enum After {
    Continue,
    Close,
}

fn take_str(m: &mut Map<String, Value>, key: &str) -> Result<String, Code> {
    match m.remove(key) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Ok(s),
        _ => Err(Code::InvalidRequest),
    }
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
        "boot" => Err(Code::AlreadyBooted),
        "bindLaunch" => bind_launch(rt, m).map(|launch| json!({"ok": true, "launch": launch})),
        "identity" => take_str(&mut m, "cap").and_then(|cap| {
            if !m.is_empty() {
                return Err(Code::InvalidRequest);
            }
            rt.identity(&cap).map(|r| json!({"ok": true, "result": r}))
        }),
        "endLaunch" => end_launch(rt, m).map(|r| json!({"ok": true, "result": r})),
        "authorize" => authorize(rt, m).map(|r| json!({"ok": true, "result": r})),
        "authorizeLaunch" => authorize_launch(rt, m).map(|r| json!({"ok": true, "result": r})),
        "refuse" => refuse(rt, m).map(|r| json!({"ok": true, "result": r})),
        "credentialStatus" => credential_status(rt, m).map(|r| json!({"ok": true, "result": r})),
        "recordEvent" => record_event(rt, m).map(|r| json!({"ok": true, "result": r})),
        "recordTask" => record_task(rt, m).map(|r| json!({"ok": true, "result": r})),
        "checkPush" => check_push(rt, m).map(|r| json!({"ok": true, "result": r})),
        "recordPush" => record_push(rt, m).map(|r| json!({"ok": true, "result": r})),
        "reviewFetch" => review_fetch(rt, m).map(|r| json!({"ok": true, "result": r})),
        "close" => Err(Code::InvalidRequest),
        other if PLANNED.contains(&other) => Err(Code::NotImplemented),
        _ => Err(Code::UnknownOp),
    };
    match result {
        Ok(reply) => (with_id(reply), After::Continue),
        Err(code) => (refusal(code, id), After::Continue),
    }
}

fn bind_launch(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let record = m.remove("record").ok_or(Code::InvalidLaunch)?;
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.bind_launch(LaunchRecord::from_json(record)?)
}

fn end_launch(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let Some(Value::Object(mut rec)) = m.remove("record") else {
        return Err(Code::InvalidRequest);
    };
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    let business = take_str(&mut rec, "business")?;
    let run = take_str(&mut rec, "run")?;
    let reason = take_str(&mut rec, "reason")?;
    let exit_code = match rec.remove("exitCode") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_i64().ok_or(Code::InvalidRequest)?),
    };
    if !rec.is_empty() || !crate::config::is_reason(&reason) {
        return Err(Code::InvalidRequest);
    }
    rt.end_launch(&business, &run, &reason, exit_code)
}

/// An optional string of 1..=256 bytes (null counts as absent).
fn take_opt_str(m: &mut Map<String, Value>, key: &str) -> Result<Option<String>, Code> {
    match m.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Ok(Some(s)),
        Some(_) => Err(Code::InvalidRequest),
    }
}

fn authorize(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let cap = take_str(&mut m, "cap")?;
    let action = take_str(&mut m, "action")?;
    let target = take_opt_str(&mut m, "target")?;
    let decision = take_opt_str(&mut m, "decision")?;
    let verdict = take_opt_str(&mut m, "verdict")?;
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.authorize(
        &cap,
        &action,
        target.as_deref(),
        decision.as_deref(),
        verdict.as_deref(),
    )
}

fn authorize_launch(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let cap = take_str(&mut m, "cap")?;
    let instance = take_str(&mut m, "instance")?;
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.authorize_launch(&cap, &instance)
}

fn refuse(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let cap = take_str(&mut m, "cap")?;
    let code = take_str(&mut m, "code")?;
    // Only a task ref files the refusal on a trail; any other subject (of
    // any JSON type, or none) records null, as the spec says, rather than
    // refusing the host's evidence.
    let subject = match m.remove("subject") {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.refuse(&cap, &code, subject.as_deref())
}

fn credential_status(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let business = take_str(&mut m, "business")?;
    let role = take_str(&mut m, "role")?;
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.credential_status(&business, &role)
}

fn record_event(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let cap = take_str(&mut m, "cap")?;
    let kind = take_str(&mut m, "kind")?;
    let Some(Value::Object(body)) = m.remove("body") else {
        return Err(Code::InvalidRequest);
    };
    let subject = match m.remove("subject") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Some(s),
        Some(_) => return Err(Code::InvalidRequest),
    };
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.record_event(&cap, &kind, body, subject.as_deref())
}

fn record_task(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let business = take_str(&mut m, "business")?;
    let task_ref = take_str(&mut m, "task_ref")?;
    let read_at = take_str(&mut m, "read_at")?;
    let fields = match (m.remove("fields"), m.remove("tombstone")) {
        (Some(Value::Object(f)), None) => Some(f),
        (None, Some(Value::Bool(true))) => None,
        _ => return Err(Code::InvalidRequest),
    };
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.record_task(&business, &task_ref, &read_at, fields)
}

fn check_push(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let cap = take_str(&mut m, "cap")?;
    let task_ref = take_str(&mut m, "task_ref")?;
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.check_push(&cap, &task_ref)
}

fn record_push(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let cap = take_str(&mut m, "cap")?;
    let Some(Value::Object(push)) = m.remove("push") else {
        return Err(Code::InvalidRequest);
    };
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.record_push(&cap, push)
}

fn review_fetch(rt: &Runtime, mut m: Map<String, Value>) -> Result<Value, Code> {
    let cap = take_str(&mut m, "cap")?;
    let Some(Value::Object(args)) = m.remove("args") else {
        return Err(Code::InvalidRequest);
    };
    if !m.is_empty() {
        return Err(Code::InvalidRequest);
    }
    rt.review_fetch(&cap, args)
}
