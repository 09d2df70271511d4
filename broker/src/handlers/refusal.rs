//! The one writer of refusal evidence: every `action.refused` event, a
//! refused verb's (through the dispatch, [`refused`]) and a host op's
//! (with the op's own body), is written here. Nothing else names the kind.

use crate::core::{Caller, Core};
use crate::error::Code;
use crate::store::evidence::{self, Actor, Written};
use crate::store::Tx;
use serde_json::{json, Map, Value};

/// The kind every refusal is recorded as.
const KIND: &str = "action.refused";

/// Writes a refusal inside the caller's transaction (with what else that
/// transaction writes, such as a landing's result message).
pub fn insert(
    t: &mut Tx<'_>,
    business: &str,
    actor: Actor<'_>,
    subject: Option<&str>,
    body: &Value,
) -> Result<Written, Code> {
    evidence::insert_event(t, business, KIND, actor, subject, body)
}

/// Writes a refusal in a transaction of its own (the refused request's
/// was rolled back before this runs; in the writer's batch it is a
/// savepoint of its own). Failing to write it is `storage-unavailable`.
pub fn record(
    core: &mut Core,
    business: &str,
    actor: Actor<'_>,
    subject: Option<&str>,
    body: &Value,
) -> Result<Written, Code> {
    core.store
        .write(|t| insert(t, business, actor, subject, body))
        .map_err(|_| Code::StorageUnavailable)
}

/// `{action, code}` against `actor`: returns the code the caller gets
/// (`storage-unavailable` when the evidence could not be written).
pub fn record_code(
    core: &mut Core,
    business: &str,
    actor: Actor<'_>,
    action: Option<&str>,
    subject: Option<&str>,
    code: Code,
) -> Code {
    let body = json!({"action": action, "code": code.as_str()});
    match record(core, business, actor, subject, &body) {
        Ok(_) => code,
        Err(e) => e,
    }
}

/// The task a verb's refusal is filed under: the request's `task_ref`,
/// else a `target` that is a task ref; anything else (or a malformed ref)
/// is none.
pub fn subject_of(args: Option<&Map<String, Value>>) -> Option<String> {
    let a = args?;
    ["task_ref", "target"]
        .iter()
        .filter_map(|k| a.get(*k).and_then(Value::as_str))
        .find(|s| crate::ids::is_task_ref(s))
        .map(str::to_string)
}

/// Codes whose evidence is already written where they arise, with more
/// than the code: `decision-route-refused` (the raise's authorization).
/// And `storage-unavailable`, which is not written: the store just failed.
fn written_elsewhere(code: Code) -> bool {
    matches!(code, Code::DecisionRouteRefused | Code::StorageUnavailable)
}

/// A verb's name as the evidence records it: the name as sent when it is
/// shaped like one (an unknown verb's too), else null, so a refusal never
/// copies arbitrary request text into the store.
fn action_name(verb: &str) -> Option<&str> {
    let b = verb.as_bytes();
    let shaped = !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'_')
        });
    shaped.then_some(verb)
}

/// A refused verb's evidence: `action.refused {action, code}` against the
/// caller, on `subject`'s trail. A reader leaves none. A known token is
/// recorded by its code only, with no subject (and the verb's name only
/// when it is a served verb, `served`): nothing of the request is copied.
/// Returns the code the caller gets.
pub fn refused(
    core: &mut Core,
    caller: &Caller,
    (verb, served): (&str, bool),
    subject: Option<String>,
    code: Code,
) -> Code {
    if written_elsewhere(code) {
        return code;
    }
    let Some((role, run)) = caller.actor() else {
        return code;
    };
    let (action, subject) = if code == Code::KnownToken {
        (action_name(verb).filter(|_| served), None)
    } else {
        (action_name(verb), subject)
    };
    let actor = Actor::of(role, run);
    let business = caller.business();
    record_code(core, business, actor, action, subject.as_deref(), code)
}
