//! `message.send`, `message.receive` and `message.read`.
//!
//! Recipients are the business's role instances, the reserved `human`, and
//! `tester` (only as a reply to a tester's message). Each verb is one
//! transaction: its checks, its evidence and its effects commit together.

use crate::config::Business;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::Verb;
use crate::ids;
use crate::policy::routing;
use crate::policy::threads::is_thread_instance;
use crate::store::evidence::{self, Actor};
use crate::store::messages::{self as msgs, NewMessage};
use crate::store::threads;
use crate::store::Db;
use crate::store::Tx;
use serde_json::{json, Value};

/// The classes `message.send` and `thread.send` take (3b core).
/// [`STAFF_REQUEST`] is not one of them: only `staff.request` writes it;
/// nor is [`BLOCK`], which only `message.send` takes, under its own rules.
pub const CLASSES: &[&str] = &[
    "REQUEST",
    "ASSIGNMENT",
    "REVIEW-REQUEST",
    "REVIEW-RESULT",
    "RESULT",
    "INFO",
    "DECISION",
    "REACTION",
];

/// The class only `staff.request` writes (3i row 140).
pub const STAFF_REQUEST: &str = "STAFF-REQUEST";

/// A pm's or cto's answer to a spec review notice that names conflicts (3i
/// row 143): `message.send` only, from an instance of [`BLOCK_SENDERS`], to
/// the chief of staff, in reply to a notice the bus sent that sender.
pub const BLOCK: &str = "BLOCK";

/// The definitions whose instances may send a BLOCK (the ones the spec
/// review notice goes to).
pub const BLOCK_SENDERS: &[&str] = &["pm", "cto"];

/// The class a send without `class` gets.
pub const DEFAULT_CLASS: &str = "INFO";

use crate::core::{HUMAN, HUMAN_ACTOR, HUMAN_RUN, TESTER, TESTER_RUN};
/// The prefix every tester message body starts with.
pub const TESTER_PREFIX: &str = "[mos test]";

/// Most messages one `message.receive` hands over.
pub const RECEIVE_BATCH: usize = 100;
/// Largest message body, in bytes (a frame is at most 64 KiB anyway).
pub const MAX_BODY: usize = 60 * 1024;
/// Most reply bytes one `message.receive` batch takes: the client's 4 MiB
/// reply cap less room for the envelope. A batch stops before the message
/// that would pass it (it always takes at least one, which fits), so a
/// backlog of large messages comes over in several batches instead of a
/// reply the client must refuse after the deliveries were written.
pub const RECEIVE_BYTES: usize = mosaic_wire::limits::RESPONSE_MAX - 64 * 1024;

/// Counts the bytes a value serializes to, without keeping them.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_len(v: &Value) -> usize {
    let mut n = ByteCount(0);
    match serde_json::to_writer(&mut n, v) {
        Ok(()) => n.0,
        Err(_) => usize::MAX,
    }
}

/// `message.send {to, body, class?, in_reply_to?, corrects?, decision?}` → `{id, request}`.
pub struct Send {
    to: String,
    body: String,
    class: String,
    in_reply_to: Option<String>,
    corrects: Option<String>,
    decision: Option<String>,
    /// `staff.request`'s fields for its `action.allowed` (none for a send).
    staff: Option<serde_json::Map<String, Value>>,
    /// The name `to` was sent as, once resolved to its instance.
    to_name: Option<String>,
}

impl Verb for Send {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let to = args.str("to", 64)?;
        let body = args.str("body", MAX_BODY)?;
        let class = args.opt_str("class", 32)?;
        let in_reply_to = args.opt_str("in_reply_to", 64)?;
        let corrects = args.opt_str("corrects", 64)?;
        let decision = args.opt_str("decision", 64)?;
        args.finish()?;
        let class = class.unwrap_or_else(|| DEFAULT_CLASS.to_string());
        if !CLASSES.contains(&class.as_str()) && class != BLOCK {
            return Err(Code::InvalidClass);
        }
        Ok(Send {
            to,
            body,
            class,
            in_reply_to,
            corrects,
            decision,
            staff: None,
            to_name: None,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        self.send(core, caller)
    }
}

impl Send {
    fn send(mut self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        self.resolve_name(core, biz)?;
        let is_role = self.check(biz, caller)?;
        let id = ids::uuid();
        core.store.write(|t| {
            if self.class == BLOCK {
                self.check_block_reply(t, &biz.id, caller)?;
            }
            let reply_from = self.check_references(t, &biz.id)?;
            let sender = self.insert(t, biz, caller, &id, reply_from.as_deref())?;
            let mut result = json!({"id": id, "request": sender.request});
            // A message to the thread instance inside its thread waits for
            // the thread launcher, which reads `threadsState`: no notice.
            let in_thread = sender.thread.is_some() && is_thread_instance(biz, &self.to);
            if is_role && !in_thread {
                if let Some(waiting) = tell_waiting(t, biz, &self.to, sender.role, &id)? {
                    result["waiting"] = waiting;
                }
            }
            Ok(result)
        })
    }
}

/// Who sent a message, as its evidence names it, and where it was filed.
struct Sent<'a> {
    /// The `human.input` event behind a human's message.
    request: Option<String>,
    /// The sender the launch notice names (none for the tester).
    role: Option<&'a str>,
    /// The thread the message joined ([`post`]).
    thread: Option<String>,
}

impl Send {
    /// A name resolves to its instance before any check (3i row 141). An
    /// instance key, `human`, `tester` and a definition the business knows
    /// win over an equal name; a name nobody holds is left as sent, and
    /// the checks refuse it `unknown-role`.
    fn resolve_name(&mut self, core: &Core, biz: &Business) -> Result<(), Code> {
        let to = self.to.as_str();
        if biz.roles.contains_key(to) || to == HUMAN || to == TESTER || knows_definition(biz, to) {
            return Ok(());
        }
        if let Some(instance) = crate::store::names::holder(core.store.db(), &biz.id, to)? {
            self.to_name = Some(std::mem::replace(&mut self.to, instance));
        }
        Ok(())
    }

    /// Who may address whom, before the transaction: true when the
    /// recipient is one of the business's roles.
    fn check(&self, biz: &Business, caller: &Caller) -> Result<bool, Code> {
        if self.class == BLOCK {
            self.check_block(biz, caller)?;
        }
        let to = self.to.as_str();
        let is_role = biz.roles.contains_key(to);
        match caller {
            Caller::Reader { .. } => return Err(Code::ReadOnly),
            Caller::Tester { .. } => {
                if !is_role {
                    return Err(Code::UnknownRole);
                }
                if self.corrects.is_some() || self.decision.is_some() {
                    return Err(Code::InvalidRequest);
                }
                if !self.body.starts_with(TESTER_PREFIX) {
                    return Err(Code::TesterPrefix);
                }
            }
            // The human addresses roles only: not itself, and never the
            // tester; the thread instance only through `thread.send`.
            Caller::Human { .. } => {
                if !is_role {
                    return Err(Code::UnknownRole);
                }
                if is_thread_instance(biz, to) {
                    return Err(Code::ThreadRequiredUseThreadSend);
                }
            }
            Caller::Role { .. } => {
                if !is_role && to != HUMAN && to != TESTER {
                    return Err(Code::UnknownRole);
                }
            }
        }
        // The role definitions' messaging lists, when declared, bind the human
        // and the roles; the tester address and the tester's own messages are
        // outside them (a PM test's sender, answered only in reply).
        let sender = match caller {
            Caller::Human { .. } => Some(HUMAN),
            Caller::Role { role, .. } => Some(role.as_str()),
            Caller::Tester { .. } | Caller::Reader { .. } => None,
        };
        if let Some(from) = sender {
            if to != TESTER && !routing::messaging_allowed(biz, from, to) {
                return Err(Code::NotAuthorized);
            }
        }
        Ok(is_role)
    }

    /// A BLOCK's sender and recipient (3i row 143): a pm or cto instance
    /// (`block-sender`; the human and the tester are neither), to the chief
    /// of staff (`block-recipient`), replying to something
    /// (`block-reply-required`; what it replies to is checked in the
    /// transaction, [`Send::check_block_reply`]).
    fn check_block(&self, biz: &Business, caller: &Caller) -> Result<(), Code> {
        let sender_ok = match caller {
            Caller::Role { role, .. } => {
                routing::definition_of(biz, role).is_some_and(|d| BLOCK_SENDERS.contains(&d))
            }
            _ => false,
        };
        if !sender_ok {
            return Err(Code::BlockSender);
        }
        if routing::definition_of(biz, &self.to) != Some(routing::CHIEF_OF_STAFF) {
            return Err(Code::BlockRecipient);
        }
        if self.in_reply_to.is_none() {
            return Err(Code::BlockReplyRequired);
        }
        Ok(())
    }

    /// A BLOCK replies to a spec review notice the bus sent its sender
    /// (`block-reply-required` for anything else, an unknown id included).
    fn check_block_reply(&self, t: &Tx<'_>, b: &str, caller: &Caller) -> Result<(), Code> {
        let Caller::Role { role, .. } = caller else {
            return Err(Code::BlockSender);
        };
        let reply = self
            .in_reply_to
            .as_deref()
            .ok_or(Code::BlockReplyRequired)?;
        match msgs::spec_notice(t.db(), b, reply)? {
            Some(n) if n.to_role == *role => Ok(()),
            _ => Err(Code::BlockReplyRequired),
        }
    }

    /// The message's references stay inside the business; returns the
    /// sender of the message it replies to.
    fn check_references(&self, t: &Tx<'_>, b: &str) -> Result<Option<String>, Code> {
        let mut reply_from = None;
        if let Some(r) = &self.in_reply_to {
            let f = msgs::message_facts(t.db(), b, r)?.ok_or(Code::MessageNotFound)?;
            reply_from = Some(f.from_role);
        }
        if let Some(c) = &self.corrects {
            msgs::message_facts(t.db(), b, c)?.ok_or(Code::MessageNotFound)?;
        }
        if let Some(d) = &self.decision {
            if !msgs::decision_exists(t.db(), b, d)? {
                return Err(Code::DecisionNotFound);
            }
        }
        Ok(reply_from)
    }

    /// Writes the message and its evidence as the caller's class does.
    fn insert<'c>(
        &self,
        t: &mut Tx<'_>,
        biz: &Business,
        caller: &'c Caller,
        id: &str,
        reply_from: Option<&str>,
    ) -> Result<Sent<'c>, Code> {
        let b = biz.id.as_str();
        let to = self.to.as_str();
        let mut m = NewMessage {
            id,
            business: b,
            to_role: to,
            class: &self.class,
            body: &self.body,
            in_reply_to: self.in_reply_to.as_deref(),
            corrects: self.corrects.as_deref(),
            decision: self.decision.as_deref(),
            to_name: self.to_name.as_deref(),
            ..Default::default()
        };
        match caller {
            Caller::Reader { .. } => Err(Code::ReadOnly),
            Caller::Tester { .. } => {
                m.from_role = TESTER;
                m.from_run = TESTER_RUN;
                let thread = post(t, biz, &m, None)?;
                Ok(Sent {
                    request: None,
                    role: None,
                    thread,
                })
            }
            Caller::Human { .. } => {
                let input = evidence::insert_event(
                    t,
                    b,
                    "human.input",
                    HUMAN_ACTOR,
                    None,
                    &json!({"verb": "message.send", "to": to, "message": id}),
                )?;
                m.from_role = HUMAN;
                m.from_run = HUMAN_RUN;
                m.request = Some(&input.id);
                let thread = post(t, biz, &m, None)?;
                Ok(Sent {
                    request: Some(input.id.clone()),
                    role: Some(HUMAN),
                    thread,
                })
            }
            Caller::Role { role, run, .. } => {
                if to == TESTER && reply_from != Some(TESTER) {
                    return Err(Code::TesterReplyRequired);
                }
                if !t.holds(b, role, run)? {
                    return Err(Code::NotHolder);
                }
                let allowed = self.authorize(t, biz, role, run, id)?;
                evidence::insert_event(
                    t,
                    b,
                    "action.allowed",
                    Actor::of(role, run),
                    Some(to),
                    &allowed,
                )?;
                m.from_role = role;
                m.from_run = run;
                let thread = post(t, biz, &m, None)?;
                Ok(Sent {
                    request: None,
                    role: Some(role.as_str()),
                    thread,
                })
            }
        }
    }

    /// A role's send: within-role authority, or a decision consumed in this
    /// same transaction. Returns the `action.allowed` body.
    fn authorize(
        &self,
        t: &mut Tx<'_>,
        biz: &Business,
        role: &str,
        run: &str,
        id: &str,
    ) -> Result<Value, Code> {
        let within = biz
            .roles
            .get(role)
            .is_some_and(|r| r.within_role.iter().any(|a| a == "message.send"));
        let mut allowed = json!({"action": "message.send", "target": self.to, "message": id});
        if !within {
            // The shared authority-and-consumption helper: matching,
            // resolution and single use, in this same transaction.
            crate::authorize::consume_in_tx(
                t,
                biz,
                role,
                run,
                "message.send",
                Some(&self.to),
                self.decision.as_deref(),
            )?;
            // A decision that supplies authority is part of the evidence;
            // a within-role citation is not.
            if let Some(d) = &self.decision {
                allowed["decision"] = json!(d);
            }
        }
        if let (Some(extra), Some(body)) = (&self.staff, allowed.as_object_mut()) {
            body.extend(extra.clone());
        }
        Ok(allowed)
    }
}

/// The refusals of [`thread_for`]: no thread a message to or from a thread
/// instance could join.
const THREAD_REFUSALS: &[Code] = &[
    Code::NotHolder,
    Code::ThreadInstanceMismatch,
    Code::ThreadRequiredReplyToThreadMessage,
];

/// The one path every message to or from a thread instance takes into the
/// store (3i row 121, REQ-MSG-1): the verbs' messages, reviews, decision
/// closes, launch and spec review notices and landing results. It finds
/// the message's thread ([`thread_for`], or `known`: the thread a writer
/// already has the conversation in, `thread.send`'s, a thread run's
/// decision's, a landing ticket's), refuses a message that would have
/// none, and writes the message and its `message_threads` row together.
/// Returns the thread it joined.
pub(crate) fn post(
    t: &mut Tx<'_>,
    biz: &Business,
    m: &NewMessage<'_>,
    known: Option<&str>,
) -> Result<Option<String>, Code> {
    let thread = match known {
        Some(th) => Some(th.to_string()),
        None => thread_for(t, biz, m)?,
    };
    msgs::insert_message(t, m)?;
    if let Some(th) = &thread {
        threads::file_message(t, m.id, th)?;
    }
    Ok(thread)
}

/// The thread message `m` joins, by the rules of 3i row 121:
///
/// - a thread run's own message is in the thread it holds (`not-holder`
///   when it holds none); to another thread instance it could never be
///   received (`thread-instance-mismatch`);
/// - any other message to the thread instance replies to a chain that
///   reaches one of that instance's threads, and joins the nearest
///   (`thread-required-reply-to-thread-message` without one,
///   `thread-instance-mismatch` when the chain is another instance's),
///   but for the chief of staff's relay of an answer to a spec review
///   notice ([`relay_thread`]);
/// - any other message is in no thread.
pub(crate) fn thread_for(
    t: &Tx<'_>,
    biz: &Business,
    m: &NewMessage<'_>,
) -> Result<Option<String>, Code> {
    if is_thread_instance(biz, m.from_role) {
        let held = threads::held_by(t.db(), &biz.id, m.from_run)?.ok_or(Code::NotHolder)?;
        // Its thread is this instance's: another thread instance's runs
        // would never receive it (decisions.md).
        if m.to_role != m.from_role && is_thread_instance(biz, m.to_role) {
            return Err(Code::ThreadInstanceMismatch);
        }
        return Ok(Some(held));
    }
    if !is_thread_instance(biz, m.to_role) {
        return Ok(None);
    }
    let start = m
        .in_reply_to
        .ok_or(Code::ThreadRequiredReplyToThreadMessage)?;
    match threads::reply_chain_thread(t.db(), &biz.id, start)? {
        Some(th) if th.instance == m.to_role => Ok(Some(th.id)),
        Some(_) => Err(Code::ThreadInstanceMismatch),
        None => relay_thread(t, biz, m, start).map(Some),
    }
}

/// The chief of staff's relay to the thread instance of an answer to a
/// spec review notice (3i row 143): a reply chain with no thread message on
/// it that reaches the notice is filed in the user's most recently opened
/// thread of the notice's project whose instance is the recipient. From
/// anyone else, with no notice on the chain, or with no such thread:
/// `thread-required-reply-to-thread-message`.
fn relay_thread(
    t: &Tx<'_>,
    biz: &Business,
    m: &NewMessage<'_>,
    start: &str,
) -> Result<String, Code> {
    if routing::definition_of(biz, m.from_role) != Some(routing::CHIEF_OF_STAFF) {
        return Err(Code::ThreadRequiredReplyToThreadMessage);
    }
    let notice = msgs::reply_chain_notice(t.db(), &biz.id, start)?
        .ok_or(Code::ThreadRequiredReplyToThreadMessage)?;
    threads::latest_opened(t.db(), &biz.id, &biz.human, m.to_role, &notice.project)?
        .ok_or(Code::ThreadRequiredReplyToThreadMessage)
}

/// A message to a role no run holds: say so (the reply's `waiting`), and
/// tell the launcher (3i launch notices), in the send's transaction.
fn tell_waiting(
    t: &mut Tx<'_>,
    biz: &Business,
    to: &str,
    sender: Option<&str>,
    id: &str,
) -> Result<Option<Value>, Code> {
    let b = biz.id.as_str();
    if t.holder(b, to).is_some() {
        return Ok(None);
    }
    let launcher_running = match &biz.launch {
        Some(l) => t.holder(b, &l.by).is_some(),
        None => false,
    };
    let w = routing::waiting(biz, to, sender, launcher_running);
    let mut told = w.told;
    if let (true, Some(launcher), Some(from)) = (w.told, &w.launcher, sender) {
        let body = routing::launch_notice_body(id, from, to, w.launchable.unwrap_or(false));
        let notice_id = ids::uuid();
        let notice = NewMessage {
            id: &notice_id,
            business: b,
            from_role: routing::BUS_SENDER,
            from_run: routing::BUS_RUN,
            to_role: launcher,
            class: "RESULT",
            body: &body,
            in_reply_to: Some(id),
            ..Default::default()
        };
        // A launcher that is a thread instance hears of it only in a
        // thread the waiting message's chain reaches; with none the notice
        // is refused, and the send stands untold.
        match post(t, biz, &notice, None) {
            Ok(_) => {}
            Err(code) if THREAD_REFUSALS.contains(&code) => told = false,
            Err(code) => return Err(code),
        }
    }
    Ok(Some(json!({
        "role": to,
        "launcher": w.launcher,
        "told": told,
        "launcherRunning": w.launcher_running,
        "launchable": w.launchable,
    })))
}

/// The recipient address and delivery run a session receives and reads as;
/// a role session must be the role's current holder.
fn recipient(conn: &Db, caller: &Caller) -> Result<(String, String), Code> {
    match caller {
        Caller::Role {
            business,
            role,
            run,
        } => {
            if !evidence::holds(conn, business, role, run)? {
                return Err(Code::NotHolder);
            }
            Ok((role.clone(), run.clone()))
        }
        Caller::Human { .. } => Ok((HUMAN.into(), HUMAN_RUN.into())),
        Caller::Tester { .. } => Ok((TESTER.into(), TESTER_RUN.into())),
        Caller::Reader { .. } => Err(Code::ReadOnly),
    }
}

/// `message.receive`: up to 100 undelivered messages to the caller's address,
/// oldest first and at most [`RECEIVE_BYTES`] of reply, each recorded as
/// delivered to the caller's run.
pub struct Receive;

impl Verb for Receive {
    fn parse(args: Fields) -> Result<Self, Code> {
        args.finish()?;
        Ok(Receive)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        receive(core, caller)
    }
}

fn receive(core: &mut Core, caller: &Caller) -> Result<Value, Code> {
    let business = caller.business().to_string();
    let thread_run = match caller {
        Caller::Role { role, .. } => core
            .config
            .businesses
            .get(&business)
            .is_some_and(|b| is_thread_instance(b, role)),
        _ => false,
    };
    core.store.write(|t| {
        let (to, run) = recipient(t.db(), caller)?;
        // A thread run receives only its own thread's messages (3i row 121).
        let batch = if thread_run {
            let th = threads::held_by(t.db(), &business, &run)?.ok_or(Code::NotHolder)?;
            threads::undelivered(t.db(), &th, &to, RECEIVE_BATCH)?
        } else {
            msgs::undelivered(t.db(), &business, &to, RECEIVE_BATCH)?
        };
        let mut out = Vec::with_capacity(batch.len());
        let mut bytes = 0usize;
        for row in batch {
            let mut m = crate::handlers::views::message(&row);
            // The oldest first, and no gaps: a message that would pass the
            // reply cap waits for the next batch with every later one.
            // (`delivered_at` and the separator add well under 64 bytes.)
            bytes = bytes.saturating_add(json_len(&m).saturating_add(64));
            if !out.is_empty() && bytes > RECEIVE_BYTES {
                break;
            }
            let at = msgs::insert_delivery(t, &row.id, &run)?;
            m["delivered_at"] = json!(at);
            out.push(m);
        }
        Ok(json!({"messages": out}))
    })
}

/// `message.read {id}`: the recipient holder acknowledges its own delivery.
pub struct Read {
    id: String,
}

impl Verb for Read {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let id = args.str("id", 64)?;
        args.finish()?;
        Ok(Read { id })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        read(core, caller, self.id)
    }
}

fn read(core: &mut Core, caller: &Caller, id: String) -> Result<Value, Code> {
    let business = caller.business().to_string();
    core.store.write(|t| {
        let (to, run) = recipient(t.db(), caller)?;
        let f = msgs::message_facts(t.db(), &business, &id)?.ok_or(Code::MessageNotFound)?;
        if f.to_role != to {
            // Not addressed to this session: it has no such message.
            return Err(Code::MessageNotFound);
        }
        match f.delivered_to.as_deref() {
            None => return Err(Code::NotDelivered),
            Some(r) if r != run => return Err(Code::NotHolder),
            Some(_) => {}
        }
        // A second acknowledgement writes nothing and answers the first one.
        if let Some(at) = f.read_at {
            return Ok(json!({"id": id, "read_at": at, "already": true}));
        }
        let at = msgs::insert_read_receipt(t, &id, &run)?;
        Ok(json!({"id": id, "read_at": at, "already": false}))
    })
}

/// `staff.request {task_ref, roles, note?, decision?}` → `{message, to}`
/// (3i row 140): the pm asks the chief of staff for staff. A message of
/// class STAFF-REQUEST to the business's launcher, under `message.send`'s
/// authority and messaging lists, and an `action.allowed` with
/// `operation: staff.request`, `staff_for` and `roles`. It grants nothing.
pub struct StaffRequest {
    task_ref: String,
    roles: Vec<(String, u64)>,
    note: Option<String>,
    decision: Option<String>,
}

/// Most entries in `roles`, and most of one role asked for.
const STAFF_ROLES: usize = 10;
const STAFF_COUNT: u64 = 20;
/// Longest note.
const STAFF_NOTE: usize = 2000;

impl Verb for StaffRequest {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let task_ref = args.str("task_ref", 256)?;
        let roles = args.take("roles").ok_or(Code::InvalidRequest)?;
        let note = args.opt_str("note", STAFF_NOTE)?;
        let decision = args.opt_str("decision", 64)?;
        args.finish()?;
        if !ids::is_task_ref(&task_ref) {
            return Err(Code::InvalidRequest);
        }
        let list = roles.as_array().ok_or(Code::InvalidRequest)?;
        if list.is_empty() || list.len() > STAFF_ROLES {
            return Err(Code::InvalidRequest);
        }
        let mut parsed: Vec<(String, u64)> = Vec::with_capacity(list.len());
        for entry in list {
            let mut e = Fields::of(entry.as_object().cloned());
            if !entry.is_object() {
                return Err(Code::InvalidRequest);
            }
            let role = e.str("role", 64)?;
            let count = e
                .take("count")
                .and_then(|c| c.as_u64())
                .filter(|c| (1..=STAFF_COUNT).contains(c))
                .ok_or(Code::InvalidRequest)?;
            e.finish()?;
            if !crate::config::is_id(&role) || parsed.iter().any(|(r, _)| *r == role) {
                return Err(Code::InvalidRequest);
            }
            parsed.push((role, count));
        }
        Ok(StaffRequest {
            task_ref,
            roles: parsed,
            note,
            decision,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let (_, role, _) = crate::handlers::handler::role_session(caller)?;
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        if routing::definition_of(biz, role) != Some(PM_DEFINITION) {
            return Err(Code::StaffRequestRefused);
        }
        let launcher = biz
            .launch
            .as_ref()
            .map(|l| l.by.clone())
            .filter(|by| routing::definition_of(biz, by) == Some(routing::CHIEF_OF_STAFF))
            .ok_or(Code::NoChiefOfStaff)?;
        // The roles asked for are definitions the business knows.
        if !self.roles.iter().all(|(r, _)| knows_definition(biz, r)) {
            return Err(Code::UnknownRole);
        }
        let wanted: Vec<String> = self.roles.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let mut body = format!(
            "Staff request from {role} for task {}: {}.",
            self.task_ref,
            wanted.join(", ")
        );
        if let Some(n) = &self.note {
            body.push_str("\nNote: ");
            body.push_str(n);
        }
        let roles: Vec<Value> = self
            .roles
            .iter()
            .map(|(r, n)| json!({"role": r, "count": n}))
            .collect();
        let mut staff = serde_json::Map::new();
        staff.insert("operation".into(), json!("staff.request"));
        staff.insert("staff_for".into(), json!(self.task_ref));
        staff.insert("roles".into(), json!(roles));
        let send = Send {
            to: launcher.clone(),
            body,
            class: STAFF_REQUEST.to_string(),
            in_reply_to: None,
            corrects: None,
            decision: self.decision,
            staff: Some(staff),
            to_name: None,
        };
        let sent = send.send(core, caller)?;
        // The row's reply is exactly {message, to} (L80): no `waiting`,
        // even when no run holds the launcher.
        Ok(json!({"message": sent["id"], "to": launcher}))
    }
}

/// The definition whose instances may ask for staff.
pub const PM_DEFINITION: &str = "pm";

/// True when `name` is a role definition the business knows: one an
/// instance uses (its key when it has none).
pub fn knows_definition(biz: &Business, name: &str) -> bool {
    biz.roles
        .keys()
        .any(|k| routing::definition_of(biz, k) == Some(name))
}
