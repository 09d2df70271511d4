//! Verbs: one module per family. [`dispatch`] is the single table from a
//! verb name to its handler and to who may call it.

mod args;
pub(crate) mod decisions;
mod events;
pub(crate) mod launch;
pub mod messages;
mod reads;
pub(crate) mod reviews;
mod roles;

pub use args::Args;

use crate::core::{Caller, Core};
use crate::error::Code;
use serde_json::{Map, Value};

/// Every verb this build serves.
pub const SERVED: &[&str] = &[
    "role.claim",
    "role.release",
    "role.revoke",
    "event.emit",
    "message.send",
    "message.receive",
    "message.read",
    "decision.raise",
    "decision.resolve",
    "decision.seen",
    "decision.withdraw",
    "launch.revoke",
    "launch.restore",
    "trail",
    "inbox",
    "tasks",
    "agents",
    "requirements",
    "state",
    "replies",
    "messages",
    "decisions",
    "credentials",
    "review.request",
    "review.verdict",
];

/// Verbs the spec (`bus-3i.txt`, the target) names that this build does not
/// serve yet: they answer `not-implemented`, never `unknown-verb`.
const PLANNED: &[&str] = &[
    "organization.set",
    "limits",
    "limits.set",
    "name.set",
    "names",
    "assistant.stop",
    "staff.request",
    "project.create",
    "project.list",
    "thread.create",
    "thread.list",
    "thread.open",
    "thread.send",
    "thread.messages",
    "spec.read",
    "record.write",
    "project.files",
    "project.file",
    "project.file.save",
    "usage.begin",
    "usage.end",
    "usage",
    "instances",
    "instances.set",
    "routes",
    "routes.set",
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
    let known = SERVED.contains(&verb) || PLANNED.contains(&verb);
    if !known {
        return Err(Code::UnknownVerb);
    }
    if matches!(caller, Caller::Tester { .. }) && !TESTER_VERBS.contains(&verb) {
        return Err(Code::TesterRefused);
    }
    // The known-token check: the request's args, then (below) the reply.
    if let Some(a) = args.as_ref().filter(|_| !core.known_tokens().is_empty()) {
        let tokens = core.known_tokens();
        let found = a
            .iter()
            .try_for_each(|(k, v)| tokens.check_str(k).and_then(|()| tokens.check(v)));
        if let Err(code) = found {
            return refuse_known_token(core, caller, verb, code);
        }
    }
    let args = Args::new(args);
    let result = match verb {
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
        "message.send" => messages::send(core, caller, args),
        "message.receive" => messages::receive(core, caller, args),
        "message.read" => messages::read(core, caller, args),
        "inbox" => reads::inbox(core, caller, args),
        "agents" => reads::agents(core, caller, args),
        "tasks" => reads::tasks(core, caller, args),
        "replies" => reads::replies(core, caller, args),
        "messages" => reads::messages(core, caller, args),
        "state" => reads::state(core, caller, args),
        "requirements" => reads::requirements(core, caller, args),
        "review.request" => reviews::request(core, caller, args),
        "review.verdict" => reviews::verdict(core, caller, args),
        _ => Err(Code::NotImplemented),
    };
    match result {
        Ok(reply) => match core.known_tokens().check(&reply) {
            Ok(()) => Ok(reply),
            Err(code) => refuse_known_token(core, caller, verb, code),
        },
        // An evidence writer found a token: the verb's transaction rolled back.
        Err(Code::KnownToken) => refuse_known_token(core, caller, verb, Code::KnownToken),
        Err(code) => Err(code),
    }
}

/// Records a known-token refusal as `action.refused` (the code only, never
/// the content) and refuses; if that evidence can't be written the caller
/// gets `storage-unavailable`.
fn refuse_known_token(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    code: Code,
) -> Result<Value, Code> {
    let (role, run) = match caller {
        Caller::Role { role, run, .. } => (Some(role.as_str()), Some(run.as_str())),
        Caller::Human { .. } => (Some(messages::HUMAN), Some(messages::HUMAN_RUN)),
        Caller::Tester { .. } => (Some(messages::TESTER), Some(messages::TESTER_RUN)),
        Caller::Reader { .. } => (None, None),
    };
    Err(record_refusal(
        core,
        caller.business(),
        role,
        run,
        verb,
        code,
    ))
}

/// Writes `action.refused {action, code}` for a refusal that must leave
/// evidence; returns the code to give the caller (`storage-unavailable` when
/// the evidence could not be written).
pub(crate) fn record_refusal(
    core: &mut Core,
    business: &str,
    role: Option<&str>,
    run: Option<&str>,
    action: &str,
    code: Code,
) -> Code {
    let body = serde_json::json!({"action": action, "code": code.as_str()});
    let written = core.store.write(|t| {
        crate::store::evidence::insert_event(
            t,
            business,
            "action.refused",
            crate::store::evidence::Actor { role, run },
            None,
            &body,
        )
    });
    match written {
        Ok(_) => code,
        Err(_) => Code::StorageUnavailable,
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
