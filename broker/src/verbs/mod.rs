//! Verbs: one module per family. [`dispatch`] is the single table from a
//! verb name to its handler and to who may call it.

mod args;
mod events;
mod reads;
mod roles;

pub use args::Args;

use crate::core::{Caller, Core};
use crate::error::Code;
use serde_json::{Map, Value};

/// Every verb the spec names that this build does not serve yet.
const PLANNED: &[&str] = &[
    "role.revoke",
    "decision.raise",
    "decision.resolve",
    "decision.seen",
    "decision.withdraw",
    "message.send",
    "message.receive",
    "message.read",
    "review.request",
    "review.verdict",
    "launch.revoke",
    "launch.restore",
    "inbox",
    "tasks",
    "agents",
    "decisions",
    "requirements",
    "state",
    "replies",
    "messages",
];

/// Verbs a tester session may use.
const TESTER_VERBS: &[&str] = &[
    "message.send",
    "message.receive",
    "message.read",
    "inbox",
    "agents",
    "tasks",
    "trail",
    "decisions",
    "messages",
    "replies",
];

/// Runs one verb for `caller`. Every refusal is a static code.
pub fn dispatch(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    args: Option<Map<String, Value>>,
) -> Result<Value, Code> {
    let known = matches!(
        verb,
        "role.claim" | "role.release" | "event.emit" | "trail" | "credentials"
    ) || PLANNED.contains(&verb);
    if !known {
        return Err(Code::UnknownVerb);
    }
    if matches!(caller, Caller::Tester { .. }) && !TESTER_VERBS.contains(&verb) {
        return Err(Code::TesterRefused);
    }
    let args = Args::new(args);
    match verb {
        "role.claim" => roles::claim(core, caller, args),
        "role.release" => roles::release(core, caller, args),
        "event.emit" => events::emit(core, caller, args),
        "trail" => reads::trail(core, caller, args),
        "credentials" => reads::credentials(core, caller, args),
        _ => Err(Code::NotImplemented),
    }
}

/// The role session behind a mutation, or the code for who may not mutate.
pub(crate) fn role_session(caller: &Caller) -> Result<(&str, &str, &str), Code> {
    match caller {
        Caller::Role {
            business,
            role,
            run,
        } => Ok((business, role, run)),
        Caller::Reader { .. } => Err(Code::ReadOnly),
        Caller::Human { .. } => Err(Code::AgentRequired),
        Caller::Tester { .. } => Err(Code::TesterRefused),
    }
}
