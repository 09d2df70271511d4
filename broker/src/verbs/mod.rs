//! Verbs: one module per family. [`VERBS`] is the one table of every verb
//! the spec names: its name, which session classes may call it (and the
//! code each other class gets), and its handler (none yet: `not-implemented`).
//!
//! A handler is [`run`] over a verb's typed arguments: `XxxArgs::parse`
//! takes what the verb knows from the request and refuses leftovers, then
//! [`Verb::apply`] checks and writes. No handler sees bytes or an untyped
//! argument map.

mod args;
pub(crate) mod decisions;
mod events;
pub(crate) mod launch;
pub mod messages;
mod reads;
pub(crate) mod reviews;
mod roles;
pub(crate) mod threads;

pub use args::Args;

use crate::core::{Caller, Core};
use crate::error::Code;
use serde_json::{Map, Value};

/// A verb's typed arguments: parsed whole before anything is read or written.
pub(crate) trait Verb: Sized {
    /// Takes every argument the verb knows and refuses any left over.
    fn parse(args: Args) -> Result<Self, Code>;
    /// Runs the verb for a caller the table let through.
    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code>;
}

/// What the table calls: parse, then apply.
pub type Handler = fn(&mut Core, &Caller, Args) -> Result<Value, Code>;

fn run<V: Verb>(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    V::parse(args)?.apply(core, caller)
}

/// Who may call a verb: `None` for a class that may, else the code that
/// class gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sessions {
    pub role: Option<Code>,
    pub reader: Option<Code>,
    pub human: Option<Code>,
    pub tester: Option<Code>,
}

impl Sessions {
    /// The code `caller`'s class gets, if it may not call the verb.
    pub fn refusal(&self, caller: &Caller) -> Option<Code> {
        match caller {
            Caller::Role { .. } => self.role,
            Caller::Reader { .. } => self.reader,
            Caller::Human { .. } => self.human,
            Caller::Tester { .. } => self.tester,
        }
    }
}

/// Every session class.
const ANY: Sessions = Sessions {
    role: None,
    reader: None,
    human: None,
    tester: None,
};
/// A role's run only (3i: mutations and role reads).
const ROLE: Sessions = Sessions {
    role: None,
    reader: Some(Code::ReadOnly),
    human: Some(Code::AgentRequired),
    tester: Some(Code::TesterRefused),
};
/// Everyone but a reader: the message verbs.
const SENDER: Sessions = Sessions {
    reader: Some(Code::ReadOnly),
    ..ANY
};
/// A role (the routed resolver or the raiser) or the human.
const CLOSER: Sessions = Sessions {
    reader: Some(Code::ReadOnly),
    tester: Some(Code::TesterRefused),
    ..ANY
};
/// The outside-agent human CLI only.
const HUMAN: Sessions = Sessions {
    role: Some(Code::HumanRequired),
    reader: Some(Code::HumanRequired),
    human: None,
    tester: Some(Code::TesterRefused),
};
/// Human and reader sessions; the tester has the reader's views.
const VIEWER: Sessions = Sessions {
    role: Some(Code::HumanRequired),
    ..ANY
};
/// Human and reader sessions, not the tester.
const VIEWER_NO_TESTER: Sessions = Sessions {
    role: Some(Code::HumanRequired),
    tester: Some(Code::TesterRefused),
    ..ANY
};
/// Every class but the tester.
const NO_TESTER: Sessions = Sessions {
    tester: Some(Code::TesterRefused),
    ..ANY
};

/// One row of [`VERBS`].
pub struct VerbEntry {
    pub name: &'static str,
    pub sessions: Sessions,
    /// `None`: a spec verb this build does not serve yet (`not-implemented`).
    pub handler: Option<Handler>,
}

const fn served(name: &'static str, sessions: Sessions, handler: Handler) -> VerbEntry {
    VerbEntry {
        name,
        sessions,
        handler: Some(handler),
    }
}

/// A verb the spec (`bus-3i.txt`) names that this build does not serve:
/// the tester may not call it; anyone else learns it is not built.
const fn planned(name: &'static str) -> VerbEntry {
    VerbEntry {
        name,
        sessions: NO_TESTER,
        handler: None,
    }
}

/// The one verb table.
pub const VERBS: &[VerbEntry] = &[
    served("role.claim", ROLE, run::<roles::Claim>),
    served("role.release", ROLE, run::<roles::Release>),
    served("role.revoke", ROLE, run::<roles::Revoke>),
    served("event.emit", ROLE, run::<events::Emit>),
    served("message.send", SENDER, run::<messages::Send>),
    served("message.receive", SENDER, run::<messages::Receive>),
    served("message.read", SENDER, run::<messages::Read>),
    served("decision.raise", ROLE, run::<decisions::Raise>),
    served("decision.resolve", CLOSER, run::<decisions::Resolve>),
    served("decision.seen", CLOSER, run::<decisions::Seen>),
    served("decision.withdraw", CLOSER, run::<decisions::Withdraw>),
    served("launch.revoke", HUMAN, run::<launch::Revoke>),
    served("launch.restore", HUMAN, run::<launch::Restore>),
    served("trail", ANY, run::<reads::Trail>),
    served("inbox", ANY, run::<reads::Inbox>),
    served("tasks", ANY, run::<reads::Tasks>),
    served("agents", ANY, run::<reads::Agents>),
    served("requirements", ROLE, run::<reads::Requirements>),
    served("state", NO_TESTER, run::<reads::State>),
    served("replies", VIEWER, run::<reads::Replies>),
    served("messages", VIEWER, run::<reads::Messages>),
    served("decisions", VIEWER, run::<decisions::List>),
    served("credentials", VIEWER_NO_TESTER, run::<reads::Credentials>),
    served("review.request", ROLE, run::<reviews::Request>),
    served("review.verdict", ROLE, run::<reviews::Verdict>),
    planned("organization.set"),
    planned("limits"),
    planned("limits.set"),
    planned("name.set"),
    planned("names"),
    served("assistant.stop", HUMAN, run::<threads::AssistantStop>),
    planned("staff.request"),
    served("project.create", HUMAN, run::<threads::ProjectCreate>),
    served("project.list", HUMAN, run::<threads::ProjectList>),
    served("thread.create", HUMAN, run::<threads::ThreadCreate>),
    served("thread.list", HUMAN, run::<threads::ThreadList>),
    served("thread.open", HUMAN, run::<threads::ThreadOpen>),
    served("thread.send", HUMAN, run::<threads::ThreadSend>),
    served("thread.messages", HUMAN, run::<threads::ThreadMessages>),
    planned("spec.read"),
    planned("record.write"),
    planned("project.files"),
    planned("project.file"),
    planned("project.file.save"),
    planned("usage.begin"),
    planned("usage.end"),
    planned("usage"),
    planned("instances"),
    planned("instances.set"),
    planned("routes"),
    planned("routes.set"),
];

/// A verb's row in [`VERBS`].
pub fn lookup(verb: &str) -> Option<&'static VerbEntry> {
    VERBS.iter().find(|v| v.name == verb)
}

/// Every verb this build serves, in table order.
pub fn served_verbs() -> impl Iterator<Item = &'static str> {
    VERBS.iter().filter(|v| v.handler.is_some()).map(|v| v.name)
}

/// Runs one verb for `caller`. Every refusal is a static code.
///
/// The order: unknown verb; a tester's class (before anything of the
/// request is looked at); the known-token check on the args; every other
/// class; then the handler (parse, apply) and the known-token check on the
/// reply.
pub fn dispatch(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    args: Option<Map<String, Value>>,
) -> Result<Value, Code> {
    let entry = lookup(verb).ok_or(Code::UnknownVerb)?;
    if let (Caller::Tester { .. }, Some(code)) = (caller, entry.sessions.tester) {
        return Err(code);
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
    let Some(handler) = entry.handler else {
        return Err(Code::NotImplemented);
    };
    if let Some(code) = entry.sessions.refusal(caller) {
        return Err(code);
    }
    let result = handler(core, caller, Args::new(args));
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
