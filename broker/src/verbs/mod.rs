//! Verbs: one module per family. [`dispatch`] is the single table from a
//! verb name to its handler and to who may call it.

mod args;
pub(crate) mod decisions;
mod events;
pub(crate) mod launch;
mod reads;
mod roles;

pub use args::Args;

use crate::core::{Caller, Core};
use crate::error::Code;
use serde_json::{Map, Value};

/// Every verb the spec names that this build does not serve yet.
const PLANNED: &[&str] = &[
    "message.send",
    "message.receive",
    "message.read",
    "review.request",
    "review.verdict",
    "inbox",
    "tasks",
    "agents",
    "requirements",
    "state",
    "replies",
    "messages",
];

/// Decisions and authority (issue 5).
const DECISION_VERBS: &[&str] = &[
    "role.revoke",
    "decision.raise",
    "decision.resolve",
    "decision.seen",
    "decision.withdraw",
    "decisions",
    "launch.revoke",
    "launch.restore",
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
    ) || DECISION_VERBS.contains(&verb)
        || PLANNED.contains(&verb);
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
        "role.revoke" => roles::revoke(core, caller, args),
        "decision.raise" => decisions::raise(core, caller, args),
        "decision.resolve" => decisions::resolve(core, caller, args),
        "decision.seen" => decisions::seen(core, caller, args),
        "decision.withdraw" => decisions::withdraw(core, caller, args),
        "decisions" => decisions::list(core, caller, args),
        "launch.revoke" => launch::revoke(core, caller, args),
        "launch.restore" => launch::restore(core, caller, args),
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
