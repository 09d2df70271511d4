//! Verbs: one module per family. [`VERBS`] is the one table of every verb
//! the spec names: its name, which session classes may call it (and the
//! code each other class gets), and its handler.
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
mod names;
pub(crate) mod organization;
pub(crate) mod project;
mod reads;
pub(crate) mod reviews;
mod roles;
pub(crate) mod threads;
pub(crate) mod usage;

pub use args::Args;
/// A usage call's off-writer job (`Staged::Usage`).
pub use usage::Job as UsageJob;

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
/// The outside-agent human CLI only: a role and a reader get
/// `human-required`; the tester gets its general `tester-refused` (L218),
/// as its row names no code for it.
const HUMAN: Sessions = Sessions {
    role: Some(Code::HumanRequired),
    reader: Some(Code::HumanRequired),
    human: None,
    tester: Some(Code::TesterRefused),
};
/// Human-only verbs whose rows name the tester's code too (`instances*`
/// L214, `routes*` L216, the editor's `project.file*` L273): every other
/// class, the tester included, gets `human-required`; the specific row wins
/// over L218's general rule (docs/decisions.md).
const HUMAN_NAMED: Sessions = Sessions {
    tester: Some(Code::HumanRequired),
    ..HUMAN
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
/// Human and agent sessions (`names`, 3i L78): a reader's views are the ones
/// the spec lists for it (`read-only` otherwise, as for `requirements`), and
/// the tester's are L218's list (`tester-refused` otherwise).
const HUMAN_AND_AGENT: Sessions = Sessions {
    reader: Some(Code::ReadOnly),
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
    pub handler: Handler,
}

const fn served(name: &'static str, sessions: Sessions, handler: Handler) -> VerbEntry {
    VerbEntry {
        name,
        sessions,
        handler,
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
    served(
        "organization.set",
        ROLE,
        run::<organization::OrganizationSet>,
    ),
    served("limits", HUMAN, run::<organization::LimitsRead>),
    served("limits.set", HUMAN, run::<organization::LimitsSet>),
    served("name.set", CLOSER, run::<names::NameSet>),
    served("names", HUMAN_AND_AGENT, run::<names::Names>),
    served("usage", NO_TESTER, run::<reads::Usage>),
    served("seal", VIEWER_NO_TESTER, run::<reads::Seal>),
    served("assistant.stop", HUMAN, run::<threads::AssistantStop>),
    served("staff.request", ROLE, run::<messages::StaffRequest>),
    served("project.create", HUMAN, run::<threads::ProjectCreate>),
    served("project.list", HUMAN, run::<threads::ProjectList>),
    served("thread.create", HUMAN, run::<threads::ThreadCreate>),
    served("thread.list", HUMAN, run::<threads::ThreadList>),
    served("thread.open", HUMAN, run::<threads::ThreadOpen>),
    served("thread.send", HUMAN, run::<threads::ThreadSend>),
    served("thread.messages", HUMAN, run::<threads::ThreadMessages>),
    served("spec.read", ROLE, project::spec_read_inline),
    served("record.write", ROLE, project::record_write_inline),
    served("project.files", HUMAN_NAMED, project::files_inline),
    served("project.file", HUMAN_NAMED, project::file_inline),
    served("project.file.save", HUMAN_NAMED, project::save_inline),
    served("usage.begin", ROLE, usage::begin_inline),
    served("usage.end", ROLE, usage::end_inline),
    served("instances", HUMAN_NAMED, run::<organization::InstancesRead>),
    served(
        "instances.set",
        HUMAN_NAMED,
        run::<organization::InstancesSet>,
    ),
    served("routes", HUMAN_NAMED, run::<organization::RoutesRead>),
    served("routes.set", HUMAN_NAMED, run::<organization::RoutesSet>),
];

/// A verb's row in [`VERBS`].
pub fn lookup(verb: &str) -> Option<&'static VerbEntry> {
    VERBS.iter().find(|v| v.name == verb)
}

/// Every verb this build serves (every verb of the table), in table order.
pub fn served_verbs() -> impl Iterator<Item = &'static str> {
    VERBS.iter().map(|v| v.name)
}

/// Runs one verb for `caller`. Every refusal is a static code, and every
/// refusal of a resolved caller other than a reader leaves evidence (see
/// [`refused`]): this is the one place that writes it for the verbs.
pub fn dispatch(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    args: Option<Map<String, Value>>,
) -> Result<Value, Code> {
    // Taken before the handler consumes the args; only a refusal uses it.
    let subject = refusal_subject(args.as_ref());
    match run_verb(core, caller, verb, args) {
        Ok(reply) => Ok(reply),
        Err(code) => Err(refused(core, caller, verb, subject, code)),
    }
}

/// True for a verb the server runs in stages (prepare on the writer, its
/// slow part on a blocking worker, finish on the writer): the verbs with a
/// Git side (`project::is_staged`, which looks at the args: only a cited
/// raise is staged), the usage verbs, which read a transcript, and the
/// organization writes, whose file is replaced after their receipt's
/// COMMIT ([`is_organization_write`]).
pub fn is_staged(verb: &str, args: Option<&Map<String, Value>>) -> bool {
    project::is_staged(verb, args) || usage::is_staged(verb) || organization::is_staged(verb)
}

/// True for a verb that writes the organization file: the server runs one
/// such write at a time, from its revision check to its file step.
pub fn is_organization_write(verb: &str) -> bool {
    organization::is_staged(verb)
}

/// True for the usage verbs, which read a transcript.
pub fn usage_is_staged(verb: &str) -> bool {
    usage::is_staged(verb)
}

/// A prepared staged verb.
pub enum Staged {
    /// A Git job and what the writer does with its outcome.
    Project(project::Staged),
    /// A transcript to read (or a recorded result to answer again).
    Usage(usage::Job),
    /// An organization write whose receipt is written: its file step.
    Organization(organization::Job),
}

/// Prepares a staged verb (see [`is_staged`]): the same checks and refusal
/// evidence as [`dispatch`], then the verb's writer-side part, returning
/// the work to run off the writer and what to do with its outcome.
pub fn prepare_staged(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    args: Option<Map<String, Value>>,
) -> Result<Staged, Code> {
    let subject = refusal_subject(args.as_ref());
    let prepared = check_entry(core, caller, verb, args.as_ref()).and_then(|()| {
        if usage::is_staged(verb) {
            usage::prepare(core, caller, verb, Args::new(args)).map(Staged::Usage)
        } else if organization::is_staged(verb) {
            organization::prepare(core, caller, verb, Args::new(args)).map(Staged::Organization)
        } else {
            // Its refusal after Git is filed where one before it is: under
            // the request's task ref (`task_ref`, or a `target` that is one).
            let subject = subject.clone();
            project::prepare(core, caller, verb, Args::new(args))
                .map(|p| Staged::Project(project::Staged { subject, ..p }))
        }
    });
    prepared.map_err(|code| refused(core, caller, verb, subject, code))
}

/// Finishes a staged verb on the writer side with what its Git side gave:
/// a commit's receipt (if it can't be stored, `outcome-unknown`: the commit
/// stands), what `then` says (a reply, or the cited raise with its checks run
/// again), the known-token check on the reply, or the refusal's evidence
/// (filed under `subject`).
pub fn finish_staged(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    (then, subject): (project::Then, Option<String>),
    outcome: Result<crate::project::Done, Code>,
) -> Result<Value, Code> {
    // A commit was made: a failure from here on is outcome-unknown, never
    // a plain refusal (the commit stands).
    let committed = matches!(&outcome, Ok(done) if done.receipt.is_some());
    let checked = project::finish(core, caller, then, outcome).and_then(|reply| {
        core.known_tokens().check(&reply)?;
        Ok(reply)
    });
    checked.map_err(|code| {
        let recorded = refused(core, caller, verb, subject, code);
        if committed {
            Code::OutcomeUnknown
        } else {
            recorded
        }
    })
}

/// Records that an organization write's file step failed after its
/// receipt was committed (`action.refused {action, code: outcome-unknown}`
/// against the caller, if it can be written); the caller's answer is
/// `outcome-unknown` either way: the receipt stands.
pub fn finish_organization(core: &mut Core, caller: &Caller, verb: &str, code: Code) -> Code {
    let _ = refused(core, caller, verb, None, code);
    Code::OutcomeUnknown
}

/// Finishes a usage verb on the writer side with what its transcript
/// reading found: the record written (or the one already there answered),
/// the known-token check on the reply, or the refusal's evidence.
pub fn finish_usage(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    worked: usage::Worked,
) -> Result<Value, Code> {
    let checked = usage::finish(core, worked).and_then(|reply| {
        core.known_tokens().check(&reply)?;
        Ok(reply)
    });
    checked.map_err(|code| refused(core, caller, verb, None, code))
}

/// The checks before a verb's own: unknown verb, the tester's class, the
/// known-token check on the args, every other class.
fn check_entry(
    core: &Core,
    caller: &Caller,
    verb: &str,
    args: Option<&Map<String, Value>>,
) -> Result<(), Code> {
    let entry = lookup(verb).ok_or(Code::UnknownVerb)?;
    if let (Caller::Tester { .. }, Some(code)) = (caller, entry.sessions.tester) {
        return Err(code);
    }
    if let Some(a) = args.filter(|_| !core.known_tokens().is_empty()) {
        let tokens = core.known_tokens();
        a.iter()
            .try_for_each(|(k, v)| tokens.check_str(k).and_then(|()| tokens.check(v)))?;
    }
    if let Some(code) = entry.sessions.refusal(caller) {
        return Err(code);
    }
    Ok(())
}

/// The order: unknown verb; a tester's class (before anything of the
/// request is looked at); the known-token check on the args; every other
/// class; then the handler (parse, apply) and the known-token check on the
/// reply.
fn run_verb(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    args: Option<Map<String, Value>>,
) -> Result<Value, Code> {
    // The known-token check: the request's args here, the reply below.
    check_entry(core, caller, verb, args.as_ref())?;
    let handler = lookup(verb).ok_or(Code::UnknownVerb)?.handler;
    let reply = handler(core, caller, Args::new(args))?;
    core.known_tokens().check(&reply)?;
    Ok(reply)
}

/// The task a refusal is filed under: the request's `task_ref`, else a
/// `target` that is a task ref; anything else (or a malformed ref) is none.
fn refusal_subject(args: Option<&Map<String, Value>>) -> Option<String> {
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

/// The refusal evidence: `action.refused {action, code}` against the
/// caller, on `subject`'s trail, in a transaction of its own (the verb's
/// was rolled back before this runs; in the writer's batch it is a
/// savepoint of its own). A reader leaves none. A known token is recorded
/// by its code only, with no subject: nothing of the request is copied.
/// Returns the code the caller gets: `storage-unavailable` when the
/// evidence could not be written.
fn refused(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    subject: Option<String>,
    code: Code,
) -> Code {
    if written_elsewhere(code) {
        return code;
    }
    let Some((role, run)) = actor_of(caller) else {
        return code;
    };
    let (action, subject) = if code == Code::KnownToken {
        (action_name(verb).filter(|v| lookup(v).is_some()), None)
    } else {
        (action_name(verb), subject)
    };
    write_refusal(
        core,
        caller.business(),
        Some(role),
        Some(run),
        action,
        subject.as_deref(),
        code,
    )
}

/// The role and run a resolved caller's evidence is recorded under; none
/// for a reader, which never writes.
fn actor_of(caller: &Caller) -> Option<(&str, &str)> {
    match caller {
        Caller::Role { role, run, .. } => Some((role, run)),
        Caller::Human { .. } => Some((messages::HUMAN, messages::HUMAN_RUN)),
        Caller::Tester { .. } => Some((messages::TESTER, messages::TESTER_RUN)),
        Caller::Reader { .. } => None,
    }
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
    write_refusal(core, business, role, run, Some(action), None, code)
}

fn write_refusal(
    core: &mut Core,
    business: &str,
    role: Option<&str>,
    run: Option<&str>,
    action: Option<&str>,
    subject: Option<&str>,
    code: Code,
) -> Code {
    let body = serde_json::json!({"action": action, "code": code.as_str()});
    let written = core.store.write(|t| {
        crate::store::evidence::insert_event(
            t,
            business,
            "action.refused",
            crate::store::evidence::Actor { role, run },
            subject,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The client and the shims wait longer only for the verbs listed in
    /// the wire crate: every verb the server may stage must be there, or
    /// its client gives up (`outcome-unknown`) while the job still runs.
    #[test]
    fn every_staged_verb_gets_the_long_client_wait() {
        let long = mosaic_wire::limits::STAGED_VERBS;
        for v in project::STAGED.iter().chain(usage::STAGED) {
            assert!(long.contains(v), "{v}");
            assert!(is_staged(v, None), "{v}");
        }
        let mut cited = Map::new();
        cited.insert("spec_commit".into(), Value::from("x"));
        assert!(is_staged("decision.raise", Some(&cited)));
        assert!(long.contains(&"decision.raise"));
        // Nothing else is in the list: each one the server may stage.
        for v in long {
            assert!(is_staged(v, Some(&cited)), "{v}");
        }
    }
}
