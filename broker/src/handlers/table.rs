//! The one table of requests: [`VERBS`], every socket verb the spec
//! names, and [`HOST_OPS`], every host op. A verb's row says who may call
//! it (each other class's code) and how it runs: [`Run::Inline`] on the
//! writer, or [`Run::Staged`] with its slow part off the writer. A host
//! op's row is its type ([`Op`] carries the name and the reply key).
//!
//! Adding a verb is one row here and its handler in `verbs/`; adding a
//! host op is one row here and its [`Op`] in `ops/`.

use super::fields::Fields;
use super::handler::{answer, prepare, run, AnyOp, Handler, Op, Prepare, ReadHandler, Sessions};
use super::ops::{
    authority, credentials, landing, launches, pushes, records, seals, threads as thread_ops,
};
use super::staged::Serial;
use super::verbs::{
    decisions, events, launch, messages, names, organization, projects, reads, reviews, roles,
    threads, usage,
};
use crate::error::Code;
use serde_json::{Map, Value};

/// How a verb runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// On the writer thread, in one go.
    Inline(Handler),
    /// On the writer thread, from a shared `Core`: a read writes nothing.
    Read(ReadHandler),
    /// In three stages (see `super::staged`), ordered as [`Serial`] says.
    Staged(Prepare, Serial),
    /// Inline, unless the request's args say it has a slow part (a
    /// `decision.raise` that cites the spec): then staged.
    StagedWhen(fn(Option<&Map<String, Value>>) -> bool, Prepare, Handler),
}

/// One row of [`VERBS`].
pub struct VerbRow {
    pub name: &'static str,
    pub sessions: Sessions,
    pub run: Run,
}

const fn inline(name: &'static str, sessions: Sessions, handler: Handler) -> VerbRow {
    VerbRow {
        name,
        sessions,
        run: Run::Inline(handler),
    }
}

const fn read(name: &'static str, sessions: Sessions, handler: ReadHandler) -> VerbRow {
    VerbRow {
        name,
        sessions,
        run: Run::Read(handler),
    }
}

const fn staged(name: &'static str, sessions: Sessions, p: Prepare, serial: Serial) -> VerbRow {
    VerbRow {
        name,
        sessions,
        run: Run::Staged(p, serial),
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

pub const VERBS: &[VerbRow] = &[
    inline("role.claim", ROLE, run::<roles::Claim>),
    inline("role.release", ROLE, run::<roles::Release>),
    inline("role.revoke", ROLE, run::<roles::Revoke>),
    inline("event.emit", ROLE, run::<events::Emit>),
    inline("message.send", SENDER, run::<messages::Send>),
    inline("message.receive", SENDER, run::<messages::Receive>),
    inline("message.read", SENDER, run::<messages::Read>),
    VerbRow {
        name: "decision.raise",
        sessions: ROLE,
        run: Run::StagedWhen(
            decisions::cites_spec,
            projects::cited_raise,
            run::<decisions::Raise>,
        ),
    },
    inline("decision.resolve", CLOSER, run::<decisions::Resolve>),
    inline("decision.seen", CLOSER, run::<decisions::Seen>),
    inline("decision.withdraw", CLOSER, run::<decisions::Withdraw>),
    inline("launch.revoke", HUMAN, run::<launch::Revoke>),
    inline("launch.restore", HUMAN, run::<launch::Restore>),
    read("trail", ANY, answer::<reads::Trail>),
    read("inbox", ANY, answer::<reads::Inbox>),
    read("tasks", ANY, answer::<reads::Tasks>),
    read("agents", ANY, answer::<reads::Agents>),
    read("requirements", ROLE, answer::<reads::Requirements>),
    read("state", NO_TESTER, answer::<reads::State>),
    read("replies", VIEWER, answer::<reads::Replies>),
    read("messages", VIEWER, answer::<reads::Messages>),
    read("decisions", VIEWER, answer::<decisions::List>),
    read(
        "credentials",
        VIEWER_NO_TESTER,
        answer::<reads::Credentials>,
    ),
    inline("review.request", ROLE, run::<reviews::Request>),
    inline("review.verdict", ROLE, run::<reviews::Verdict>),
    staged(
        "organization.set",
        ROLE,
        prepare::<organization::OrganizationSet>,
        Serial::Alone,
    ),
    read("limits", HUMAN, answer::<organization::LimitsRead>),
    staged(
        "limits.set",
        HUMAN,
        prepare::<organization::LimitsSet>,
        Serial::Alone,
    ),
    inline("name.set", CLOSER, run::<names::NameSet>),
    read("names", HUMAN_AND_AGENT, answer::<names::Names>),
    read("usage", NO_TESTER, answer::<reads::Usage>),
    read("seal", VIEWER_NO_TESTER, answer::<reads::Seal>),
    inline("assistant.stop", HUMAN, run::<threads::AssistantStop>),
    inline("staff.request", ROLE, run::<messages::StaffRequest>),
    inline("project.create", HUMAN, run::<projects::ProjectCreate>),
    read("project.list", HUMAN, answer::<projects::ProjectList>),
    inline("thread.create", HUMAN, run::<threads::ThreadCreate>),
    read("thread.list", HUMAN, answer::<threads::ThreadList>),
    inline("thread.open", HUMAN, run::<threads::ThreadOpen>),
    inline("thread.send", HUMAN, run::<threads::ThreadSend>),
    read("thread.messages", HUMAN, answer::<threads::ThreadMessages>),
    staged("spec.read", ROLE, projects::spec_read, Serial::Free),
    staged("record.write", ROLE, projects::record_write, Serial::Free),
    staged("project.files", HUMAN_NAMED, projects::files, Serial::Free),
    staged("project.file", HUMAN_NAMED, projects::file, Serial::Free),
    staged(
        "project.file.save",
        HUMAN_NAMED,
        projects::save,
        Serial::Free,
    ),
    staged("usage.begin", ROLE, usage::begin, Serial::PerRun),
    staged("usage.end", ROLE, usage::end, Serial::PerRun),
    read(
        "instances",
        HUMAN_NAMED,
        answer::<organization::InstancesRead>,
    ),
    staged(
        "instances.set",
        HUMAN_NAMED,
        prepare::<organization::InstancesSet>,
        Serial::Alone,
    ),
    read("routes", HUMAN_NAMED, answer::<organization::RoutesRead>),
    staged(
        "routes.set",
        HUMAN_NAMED,
        prepare::<organization::RoutesSet>,
        Serial::Alone,
    ),
];

/// One row of [`HOST_OPS`].
pub struct OpRow {
    pub name: &'static str,
    pub reply_key: &'static str,
    pub(crate) parse: fn(Fields) -> Result<Box<dyn AnyOp>, Code>,
}

fn parse_op<O: Op>(f: Fields) -> Result<Box<dyn AnyOp>, Code> {
    Ok(Box::new(O::parse(f)?))
}

const fn op<O: Op>() -> OpRow {
    OpRow {
        name: O::NAME,
        reply_key: O::REPLY_KEY,
        parse: parse_op::<O>,
    }
}

/// Every host op (`close` and `boot` are the channel's own).
pub const HOST_OPS: &[OpRow] = &[
    op::<launches::BindLaunch>(),
    op::<launches::Identity>(),
    op::<launches::EndLaunch>(),
    op::<authority::Authorize>(),
    op::<authority::AuthorizeLaunch>(),
    op::<authority::Refuse>(),
    op::<credentials::CredentialStatus>(),
    op::<records::RecordEvent>(),
    op::<records::RecordTask>(),
    op::<records::RecordComments>(),
    op::<records::CommentCursor>(),
    op::<pushes::CheckPush>(),
    op::<pushes::RecordPush>(),
    op::<pushes::ReviewFetch>(),
    op::<thread_ops::ThreadsState>(),
    op::<thread_ops::ThreadIdle>(),
    op::<landing::CheckLand>(),
    op::<landing::RecordLand>(),
    op::<landing::LandRefused>(),
    op::<landing::LandHeld>(),
    op::<seals::Seals>(),
];
