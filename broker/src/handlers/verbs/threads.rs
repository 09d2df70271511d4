//! Threads (3i row 121): the human's `thread.create`, `thread.list`,
//! `thread.open`, `thread.send` and `thread.messages` (the launcher's
//! trusted `threadsState` and `threadIdle` are host ops, `ops/threads.rs`).
//!
//! A thread belongs to the business's human (its user) and to the
//! business's one thread instance. The human reaches only their own
//! threads: an unknown id is `thread-not-found`, another user's thread
//! `thread-not-owned`. Every verb is one transaction.

use super::messages::{CLASSES, DEFAULT_CLASS, MAX_BODY};
use crate::config::Business;
use crate::core::HUMAN_ACTOR;
use crate::core::{Caller, Core};
use crate::core::{HUMAN, HUMAN_RUN};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{ReadVerb, Verb};
use crate::ids;
use crate::policy::{routing, threads as rules};
use crate::store::evidence;
use crate::store::messages::NewMessage;
use crate::store::threads::{self as store, Thread};
use crate::store::Db;
use serde_json::{json, Value};

/// `thread.messages`' page size, by default and at most.
const PAGE: usize = 50;
const PAGE_MAX: usize = 200;

/// A name argument: a string of 1 to 200 printable characters.
pub(crate) fn name(args: &mut Fields, key: &str) -> Result<String, Code> {
    let n = args.str(key, rules::NAME_MAX * 4)?;
    if !rules::valid_name(&n) {
        return Err(Code::InvalidRequest);
    }
    Ok(n)
}

/// The caller's own thread: `thread-not-found` for an id the business
/// doesn't have, `thread-not-owned` for another user's.
fn own_thread(conn: &Db, biz: &Business, id: &str) -> Result<Thread, Code> {
    let th = store::thread(conn, &biz.id, id)?.ok_or(Code::ThreadNotFound)?;
    if th.user != biz.human {
        return Err(Code::ThreadNotOwned);
    }
    Ok(th)
}

/// `thread.create {project, name}` → `{id, instance}`.
pub struct ThreadCreate {
    project: String,
    name: String,
}

impl Verb for ThreadCreate {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let project = args.str("project", 64)?;
        let name = name(&mut args, "name")?;
        args.finish()?;
        Ok(ThreadCreate { project, name })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        let id = ids::uuid();
        core.store.write(|t| {
            if !store::project_exists(t.db(), &biz.id, &self.project)? {
                return Err(Code::ProjectNotFound);
            }
            if store::thread_named(t.db(), &self.project, &self.name)? {
                return Err(Code::ThreadExists);
            }
            let instance = rules::thread_instance(biz)?;
            let th = Thread {
                id: id.clone(),
                business: biz.id.clone(),
                project: self.project.clone(),
                instance: instance.to_string(),
                user: biz.human.clone(),
                name: self.name.clone(),
                at: String::new(),
            };
            let at = store::insert_thread(t, &th)?;
            Ok(json!({"id": id, "instance": instance, "at": at}))
        })
    }
}

/// `thread.list {project?}` → the caller's own threads, oldest first.
pub struct ThreadList {
    project: Option<String>,
}

impl ReadVerb for ThreadList {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let project = args.opt_str("project", 64)?;
        args.finish()?;
        Ok(ThreadList { project })
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        let conn = core.store.db();
        if let Some(p) = &self.project {
            if !store::project_exists(conn, &biz.id, p)? {
                return Err(Code::ProjectNotFound);
            }
        }
        let list = store::threads_of(conn, &biz.id, &biz.human, self.project.as_deref())?;
        Ok(list
            .into_iter()
            .map(|t| {
                json!({"id": t.id, "project": t.project, "instance": t.instance,
                       "name": t.name, "at": t.at})
            })
            .collect())
    }
}

/// `thread.open {thread}` → `{opened}`: asks the launcher to start the
/// thread's session.
pub struct ThreadOpen {
    thread: String,
}

impl Verb for ThreadOpen {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let thread = args.str("thread", 64)?;
        args.finish()?;
        Ok(ThreadOpen { thread })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        core.store.write(|t| {
            let th = own_thread(t.db(), biz, &self.thread)?;
            let at = store::insert_open(t, &th.id, &biz.human)?;
            Ok(json!({"thread": th.id, "opened": at}))
        })
    }
}

/// `thread.send {thread, body, class?}` → `{id, request}`: the human's
/// message to the thread's instance, in that thread, with its
/// `human.input` event as request. No launch notice: the thread launcher
/// starts the session from `threadsState`.
pub struct ThreadSend {
    thread: String,
    body: String,
    class: String,
}

impl Verb for ThreadSend {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let thread = args.str("thread", 64)?;
        let body = args.str("body", MAX_BODY)?;
        let class = args.opt_str("class", 32)?;
        args.finish()?;
        let class = class.unwrap_or_else(|| DEFAULT_CLASS.to_string());
        if !CLASSES.contains(&class.as_str()) {
            return Err(Code::InvalidClass);
        }
        Ok(ThreadSend {
            thread,
            body,
            class,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        let id = ids::uuid();
        core.store.write(|t| {
            let th = own_thread(t.db(), biz, &self.thread)?;
            if !routing::messaging_allowed(biz, HUMAN, &th.instance) {
                return Err(Code::NotAuthorized);
            }
            let input = evidence::insert_event(
                t,
                &biz.id,
                "human.input",
                HUMAN_ACTOR,
                None,
                &json!({"verb": "thread.send", "thread": th.id, "to": th.instance, "message": id}),
            )?;
            super::messages::post(
                t,
                biz,
                &NewMessage {
                    id: &id,
                    business: &biz.id,
                    from_role: HUMAN,
                    from_run: HUMAN_RUN,
                    to_role: &th.instance,
                    class: &self.class,
                    body: &self.body,
                    request: Some(&input.id),
                    ..Default::default()
                },
                Some(&th.id),
            )?;
            Ok(json!({"id": id, "request": input.id}))
        })
    }
}

/// `thread.messages {thread, after?, limit?}` → `{messages, next}`: the
/// thread's messages oldest first, after the message `after` names;
/// `next` is the last one returned when more follow. Writes nothing.
pub struct ThreadMessages {
    thread: String,
    after: Option<String>,
    limit: usize,
}

impl ReadVerb for ThreadMessages {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let thread = args.str("thread", 64)?;
        let after = args.opt_str("after", 64)?;
        let limit = match args.take_present("limit") {
            None => PAGE,
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|l| usize::try_from(l).ok())
                .filter(|l| (1..=PAGE_MAX).contains(l))
                .ok_or(Code::InvalidRequest)?,
            Some(_) => return Err(Code::InvalidRequest),
        };
        args.finish()?;
        Ok(ThreadMessages {
            thread,
            after,
            limit,
        })
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        let conn = core.store.db();
        let th = own_thread(conn, biz, &self.thread)?;
        let after = match &self.after {
            None => 0,
            Some(m) => store::place(conn, &th.id, m)?.ok_or(Code::MessageNotFound)?,
        };
        let (rows, more) = store::messages(conn, &th.id, after, self.limit)?;
        let next = if more {
            rows.last().map(|m| m.id.clone())
        } else {
            None
        };
        let messages: Vec<Value> = rows
            .iter()
            .map(|m| crate::handlers::views::thread_message(m, &th.id))
            .collect();
        Ok(json!({"messages": messages, "next": next}))
    }
}

/// `threadsState(business)`: per thread `{thread, instance, pending,
/// unread, lastMessage, lastOpen, lastClaim, holder}`, for the launcher.
pub fn threads_state(core: &Core, business: &str) -> Result<Value, Code> {
    if !core.config.businesses.contains_key(business) {
        return Err(Code::UnknownBusiness);
    }
    Ok(Value::Array(
        store::state(core.store.db(), business)?
            .iter()
            .map(crate::handlers::views::thread_state)
            .collect(),
    ))
}

/// `threadIdle({business, thread, run})`: the launcher's idle stop. In
/// one transaction it checks the run still holds the thread and that
/// nothing came in since the launcher's snapshot, then releases the
/// claim: `{released:true}`, or `{released:false, pending, unread}`.
pub fn thread_idle(
    core: &mut Core,
    business: &str,
    thread: &str,
    run: &str,
) -> Result<Value, Code> {
    if !core.config.businesses.contains_key(business) {
        return Err(Code::UnknownBusiness);
    }
    core.store.write(|t| {
        if evidence::session_of(t.db(), business, run)?.1 {
            return Err(Code::RunEnded);
        }
        let th = store::thread(t.db(), business, thread)?.ok_or(Code::ThreadNotFound)?;
        if store::holder(t.db(), &th.id)?.as_deref() != Some(run) {
            return Err(Code::NotHolder);
        }
        let (pending, unread) = store::counts(t.db(), &th.id, &th.instance, Some(run))?;
        if pending > 0 || unread > 0 {
            return Ok(json!({"released": false, "pending": pending, "unread": unread}));
        }
        store::insert_claim(t, business, &store::ClaimRow::own(&th.id, run, "release"))?;
        Ok(json!({"released": true}))
    })
}

/// The reason an `assistant.stop` writes on each revoke row.
pub const STOP_REASON: &str = "stopped by the human";

/// `assistant.stop {instance}` → `{stopped:[{thread, run}]}` (3i row 155):
/// the human revokes the current claim of every thread of that assistant
/// instance the human made, with the human as `by` and the reason
/// [`STOP_REASON`]. Each stopped run gets `not-holder` at its next call
/// and can't claim its thread again (`run-revoked`). An instance the
/// business lacks is `unknown-role`, one of another definition
/// `not-assistant`; none held is `not-held`.
pub struct AssistantStop {
    instance: String,
}

impl Verb for AssistantStop {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let instance = args.str("instance", 64)?;
        args.finish()?;
        Ok(AssistantStop { instance })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        if !biz.roles.contains_key(&self.instance) {
            return Err(Code::UnknownRole);
        }
        if !rules::is_thread_instance(biz, &self.instance) {
            return Err(Code::NotAssistant);
        }
        core.store.write(|t| {
            let held = store::held_threads(t.db(), &biz.id, &self.instance, Some(&biz.human))?;
            if held.is_empty() {
                return Err(Code::NotHeld);
            }
            evidence::insert_event(
                t,
                &biz.id,
                "human.input",
                HUMAN_ACTOR,
                None,
                &json!({"verb": "assistant.stop", "instance": self.instance}),
            )?;
            let mut stopped = Vec::with_capacity(held.len());
            for (thread, run) in &held {
                let row = store::ClaimRow {
                    thread,
                    run,
                    op: "revoke",
                    decision: None,
                    reason: Some(STOP_REASON),
                    by: Some(&biz.human),
                };
                store::insert_claim(t, &biz.id, &row)?;
                stopped.push(json!({"thread": thread, "run": run}));
            }
            Ok(json!({"stopped": stopped}))
        })
    }
}
