//! The git socket's landing ops (3i row 137, #1631), run on the writer
//! thread: `checkLand` opens a landing and hands the host a ticket,
//! `recordLand` records it once main moved (spending the decision) and
//! `landRefused` ends it without; `landHeld` tells the launcher whether a
//! role holds an approval a landing could use.
//!
//! Tickets live in [`Core`]'s memory only, so an unknown one (never issued,
//! already ended, or issued before a restart) refuses `land-unknown`. A
//! refusal after the caller resolved (the capability, or the ticket's run)
//! is recorded as `action.refused` `{action, op, code}` on the task's trail.

use super::authority::{code_ok, role_of};
use crate::authorize::facts;
use crate::config::Business;
use crate::core::{Core, Ticket};
use crate::error::Code;
use crate::handlers::fields::{Fields, HOST_MAX};
use crate::handlers::handler::host_op;
use crate::handlers::refusal;
use crate::ids::{self, is_task_ref};
use crate::policy::landing::{self as rules, LandAsk, ACTION};
use crate::policy::routing::{self, Class};
use crate::store::decisions::{self, insert_decision_event};
use crate::store::evidence::{self, Actor};
use crate::store::landings;
use crate::store::messages::NewMessage;
use crate::store::reviews;
use crate::store::threads;
use crate::store::Db;
use crate::store::Tx;
use serde_json::{json, Map, Value};

/// Longest `detail` a `landRefused` carries.
pub const DETAIL_MAX: usize = 2000;

impl Ticket {
    /// The ticket as `checkLand` answers it.
    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "project": self.project,
            "ref": self.git_ref,
            "commit": self.commit,
            "verdict": self.verdict,
            "resolution": {"decision": self.decision, "option": self.option, "via": self.via},
        })
    }
}

/// What the landing checks found.
struct Checked {
    project: String,
    git_ref: String,
    commit: String,
    verdict: String,
    option: String,
    via: &'static str,
}

/// The landing checks, over `conn` (the store, or a write transaction's
/// connection for `recordLand`'s second look): the decision rule, then the
/// commit rule, then the project (declared, and the decision's own when it
/// was raised for one). Holding the claim is the caller's check.
fn check(
    conn: &Db,
    biz: &Business,
    role: &str,
    thread: Option<&str>,
    task_ref: &str,
    decision: &str,
) -> Result<Checked, Code> {
    if !ids::is_uuid(decision) {
        return Err(Code::DecisionNotFound);
    }
    let d = decisions::load(conn, &biz.id, decision)?.ok_or(Code::DecisionNotFound)?;
    let raised_in = threads::of_run(conn, &biz.id, &d.entry.raised_by_run)?;
    let ask = LandAsk {
        role,
        task_ref,
        thread,
        class: routing::classify(biz, role, ACTION),
    };
    rules::check_decision(&facts(&d)?, raised_in.as_deref(), &ask)?;
    let verdict = landings::latest_verdict(conn, &biz.id, task_ref)?;
    let push = reviews::latest_push(conn, &biz.id, task_ref)?;
    let commit = rules::check_commits(
        verdict
            .as_ref()
            .map(|v| (v.verdict.as_str(), v.commit.as_str())),
        push.as_ref().map(|p| p.commit.as_str()),
    )?
    .to_string();
    let (Some(push), Some(verdict)) = (push, verdict) else {
        return Err(Code::RefMoved);
    };
    if !biz.projects.contains_key(&push.project) {
        return Err(Code::UnknownProject);
    }
    rules::check_project(d.entry.project.as_deref(), &push.project)?;
    let human = decisions::closing_event(conn, decision)?.is_some_and(|e| e.input.is_some());
    Ok(Checked {
        project: push.project,
        git_ref: push.git_ref,
        commit,
        verdict: verdict.id,
        option: d.choice.unwrap_or_default(),
        via: rules::via(human),
    })
}

/// The thread `run` serves (its launch record's, for a thread instance's
/// run) and whether it holds its claim (that thread's, or its role's).
fn holds(
    core: &Core,
    business: &str,
    role: &str,
    run: &str,
) -> Result<(Option<String>, bool), Code> {
    let conn = core.store.db();
    match core.run_thread(business, run) {
        Some(th) => {
            let held = threads::holder(conn, &th)?.as_deref() == Some(run);
            Ok((Some(th), held))
        }
        None => Ok((
            None,
            evidence::holder(conn, business, role)?.as_deref() == Some(run),
        )),
    }
}

fn refused_body(op: &str, code: Code) -> Value {
    json!({"action": ACTION, "op": op, "code": code.as_str()})
}

/// `checkLand {cap, args: {task_ref, decision}}` → `{ticket}`. Records
/// nothing unless it refuses.
fn check_land(core: &mut Core, cap: &str, mut args: Map<String, Value>) -> Result<Value, Code> {
    let (business_id, role, run) = role_of(core, cap)?;
    let subject = match args.get("task_ref") {
        Some(Value::String(s)) if is_task_ref(s) => Some(s.clone()),
        _ => None,
    };
    let r = (|| {
        let task_ref = match args.remove("task_ref") {
            None | Some(Value::Null) => return Err(Code::NoSubject),
            Some(Value::String(s)) if is_task_ref(&s) => s,
            Some(_) => return Err(Code::InvalidRequest),
        };
        let decision = match args.remove("decision") {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => s,
            _ => return Err(Code::InvalidRequest),
        };
        if !args.is_empty() {
            return Err(Code::InvalidRequest);
        }
        let config = core.config.clone();
        let biz = config.business(&business_id)?;
        let (thread, held) = holds(core, &business_id, &role, &run)?;
        let conn = core.store.db();
        if !held {
            return Err(Code::NotHolder);
        }
        let c = check(conn, biz, &role, thread.as_deref(), &task_ref, &decision)?;
        Ok(Ticket {
            id: ids::uuid(),
            business: business_id.clone(),
            role: role.clone(),
            run: run.clone(),
            thread,
            task_ref,
            decision,
            project: c.project,
            git_ref: c.git_ref,
            commit: c.commit,
            verdict: c.verdict,
            option: c.option,
            via: c.via,
        })
    })();
    match r {
        Ok(ticket) => {
            let reply = json!({"ticket": ticket.to_json()});
            tracing::info!(business = %ticket.business, role = %ticket.role, run = %ticket.run,
                task = %ticket.task_ref, "landing opened");
            core.issue_ticket(ticket);
            Ok(reply)
        }
        Err(code) => {
            let body = refused_body("checkLand", code);
            refusal::record(
                core,
                &business_id,
                Actor::of(&role, &run),
                subject.as_deref(),
                &body,
            )?;
            Err(code)
        }
    }
}

/// A required Git object name (see [`rules::is_object_name`]).
fn object_name(m: &mut Map<String, Value>, key: &str) -> Result<String, Code> {
    match m.remove(key) {
        Some(Value::String(s)) if rules::is_object_name(&s) => Ok(s),
        _ => Err(Code::InvalidRequest),
    }
}

/// How `recordLand` and `landRefused` name their ticket: its `id`
/// (DESIGN.md), or the ticket object itself as `checkLand` returned it
/// (the spec's `ticket`), which must then be that ticket exactly.
pub struct TicketRef {
    pub id: String,
    pub whole: Option<Value>,
}

impl TicketRef {
    /// The ticket by its id (the embedded runtime's calls).
    pub fn by_id(id: &str) -> TicketRef {
        TicketRef {
            id: id.to_string(),
            whole: None,
        }
    }

    /// The id, or the object's `id`, under the one host string rule.
    fn parse(f: &mut Fields) -> Result<TicketRef, Code> {
        match f.take("ticket") {
            Some(whole @ Value::Object(_)) => Ok(TicketRef {
                id: crate::handlers::fields::host_str(whole.get("id").cloned())?,
                whole: Some(whole),
            }),
            id => Ok(TicketRef {
                id: crate::handlers::fields::host_str(id)?,
                whole: None,
            }),
        }
    }
}

/// The open ticket `r` names, or `land-unknown` (also for a ticket object
/// that is not the one `checkLand` issued under its id).
fn open_ticket(core: &Core, r: &TicketRef) -> Result<Ticket, Code> {
    let t = core.ticket(&r.id).cloned().ok_or(Code::LandUnknown)?;
    match &r.whole {
        Some(whole) if *whole != t.to_json() => Err(Code::LandUnknown),
        _ => Ok(t),
    }
}

/// Records a refusal of `op` against the ticket's run, on its task's trail.
fn refuse_on(core: &mut Core, t: &Ticket, op: &str, code: Code) -> Code {
    let body = refused_body(op, code);
    match refusal::record(
        core,
        &t.business,
        Actor::of(&t.role, &t.run),
        Some(&t.task_ref),
        &body,
    ) {
        Ok(_) => code,
        Err(e) => e,
    }
}

/// The bus's RESULT to the landing role, filed in the ticket's thread when
/// it has one (through the one path of every message to a thread
/// instance, `verbs::messages::post`). Returns the message id.
fn result_message(
    t: &mut Tx<'_>,
    biz: &Business,
    ticket: &Ticket,
    body: &str,
) -> Result<String, Code> {
    let id = ids::uuid();
    crate::handlers::verbs::messages::post(
        t,
        biz,
        &NewMessage {
            id: &id,
            business: &ticket.business,
            from_role: routing::BUS_SENDER,
            from_run: routing::BUS_RUN,
            to_role: &ticket.role,
            class: "RESULT",
            body,
            decision: Some(&ticket.decision),
            ..Default::default()
        },
        ticket.thread.as_deref(),
    )?;
    Ok(id)
}

/// `recordLand {ticket, land: {commit, previous, reviewed, base, patch_id}}`
/// → `{event, message, at}`. Inside one transaction: the landing checks
/// again, `reviewed` must be the ticket's commit (`ref-moved`), then the
/// decision's `consumed` row, the `action.allowed` for `git.merge.protected`
/// on the task's trail and the RESULT to the role. A refusal keeps the
/// ticket open, so the host, having moved main back, can still end it with
/// `landRefused`.
fn record_land(
    core: &mut Core,
    ticket: &TicketRef,
    mut land: Map<String, Value>,
) -> Result<Value, Code> {
    let tk = open_ticket(core, ticket)?;
    let r = (|| {
        let commit = object_name(&mut land, "commit")?;
        let previous = object_name(&mut land, "previous")?;
        let reviewed = object_name(&mut land, "reviewed")?;
        let base = object_name(&mut land, "base")?;
        let patch_id = object_name(&mut land, "patch_id")?;
        if !land.is_empty() {
            return Err(Code::InvalidRequest);
        }
        let config = core.config.clone();
        let biz = config.business(&tk.business)?;
        let tk = &tk;
        core.store.write(|t| {
            let c = check(
                t.db(),
                biz,
                &tk.role,
                tk.thread.as_deref(),
                &tk.task_ref,
                &tk.decision,
            )?;
            if c.commit != tk.commit || reviewed != tk.commit {
                return Err(Code::RefMoved);
            }
            insert_decision_event(
                t,
                &tk.decision,
                "consumed",
                &tk.run,
                Some(&tk.run),
                None,
                None,
                None,
            )?;
            let w = evidence::insert_event(
                t,
                &tk.business,
                "action.allowed",
                Actor::of(&tk.role, &tk.run),
                Some(&tk.task_ref),
                &json!({
                    "action": ACTION,
                    "class": Class::CrossRole.as_str(),
                    "target": tk.task_ref,
                    "decision": tk.decision,
                    "via": tk.via,
                    "project": tk.project,
                    "ref": tk.git_ref,
                    "verdict": c.verdict,
                    "commit": commit,
                    "previous": previous,
                    "reviewed": reviewed,
                    "base": base,
                    "patch_id": patch_id,
                }),
            )?;
            let body =
                rules::landed_body(&tk.task_ref, &tk.project, &commit, &previous, &tk.decision);
            let message = result_message(t, biz, tk, &body)?;
            Ok(json!({"event": w.id, "message": message, "at": w.at}))
        })
    })();
    match r {
        Ok(v) => {
            core.end_ticket(&ticket.id);
            tracing::info!(business = %tk.business, role = %tk.role, task = %tk.task_ref,
                "landing recorded");
            Ok(v)
        }
        Err(code) => Err(refuse_on(core, &tk, "recordLand", code)),
    }
}

/// `landRefused {ticket, args: {code, detail?, notify}}` → `{event,
/// message}`: `action.refused` with the host's code (and detail) on the
/// task's trail, the landing ended, and with `notify` a RESULT to the role.
fn land_refused(
    core: &mut Core,
    ticket: &TicketRef,
    mut args: Map<String, Value>,
) -> Result<Value, Code> {
    let tk = open_ticket(core, ticket)?;
    let r = (|| {
        let code = match args.remove("code") {
            Some(Value::String(s)) if code_ok(&s) => s,
            _ => return Err(Code::InvalidRequest),
        };
        let detail = match args.remove("detail") {
            None | Some(Value::Null) => None,
            Some(Value::String(s))
                if !s.is_empty() && s.chars().count() <= DETAIL_MAX && !s.contains('\0') =>
            {
                Some(s)
            }
            Some(_) => return Err(Code::InvalidRequest),
        };
        let notify = match args.remove("notify") {
            Some(Value::Bool(b)) => b,
            _ => return Err(Code::InvalidRequest),
        };
        if !args.is_empty() {
            return Err(Code::InvalidRequest);
        }
        let config = core.config.clone();
        let biz = config.business(&tk.business)?;
        let tk = &tk;
        core.store.write(|t| {
            let mut body = json!({"action": ACTION, "op": "landRefused", "code": code});
            if let Some(d) = &detail {
                body["detail"] = json!(d);
            }
            let w = refusal::insert(
                t,
                &tk.business,
                Actor::of(&tk.role, &tk.run),
                Some(&tk.task_ref),
                &body,
            )?;
            let message = if notify {
                let text = rules::refused_body(&tk.task_ref, &tk.project, &code, detail.as_deref());
                Some(result_message(t, biz, tk, &text)?)
            } else {
                None
            };
            Ok(json!({"event": w.id, "message": message, "at": w.at}))
        })
    })();
    match r {
        Ok(v) => {
            core.end_ticket(&ticket.id);
            Ok(v)
        }
        Err(code) => Err(refuse_on(core, &tk, "landRefused", code)),
    }
}

/// `landHeld {business, role, thread?}` → `{held}`: whether the role (in
/// that thread; `None` for a role run) holds an approval a landing could
/// use. Writes nothing.
fn land_held(
    core: &mut Core,
    business_id: &str,
    role: &str,
    thread: Option<&str>,
) -> Result<Value, Code> {
    let config = core.config.clone();
    let biz = config.business(business_id)?;
    if !biz.roles.contains_key(role) {
        return Err(Code::UnknownRole);
    }
    let class = routing::classify(biz, role, ACTION);
    let conn = core.store.db();
    let mut held = false;
    if class == Class::CrossRole {
        for d in landings::resolved_unused(conn, business_id, role, ACTION)? {
            let raised_in = threads::of_run(conn, business_id, &d.entry.raised_by_run)?;
            if rules::could_land(&facts(&d)?, raised_in.as_deref(), role, thread, class) {
                held = true;
                break;
            }
        }
    }
    Ok(json!({"held": held}))
}

/// `checkLand {cap, args: {task_ref, decision}}`. The `args` object is
/// read on the writer side, once the capability resolved, so its refusals
/// (`no-subject` among them) are recorded on the caller's run.
pub struct CheckLand {
    pub cap: String,
    pub args: Map<String, Value>,
}

impl CheckLand {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let cap = f.str("cap", HOST_MAX)?;
        let args = f.object("args")?;
        f.finish()?;
        Ok(CheckLand { cap, args })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        check_land(core, &self.cap, self.args)
    }
}

/// `recordLand {ticket, land: {commit, previous, reviewed, base, patch_id}}`;
/// `land` is read once the ticket is known, so its refusals are recorded
/// on the ticket's run.
pub struct RecordLand {
    pub ticket: TicketRef,
    pub land: Map<String, Value>,
}

impl RecordLand {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let ticket = TicketRef::parse(&mut f)?;
        let land = f.object("land")?;
        f.finish()?;
        Ok(RecordLand { ticket, land })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        record_land(core, &self.ticket, self.land)
    }
}

/// `landRefused {ticket, args: {code, detail?, notify}}`; like `recordLand`,
/// `args` is read once the ticket is known.
pub struct LandRefused {
    pub ticket: TicketRef,
    pub args: Map<String, Value>,
}

impl LandRefused {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let ticket = TicketRef::parse(&mut f)?;
        let args = f.object("args")?;
        f.finish()?;
        Ok(LandRefused { ticket, args })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        land_refused(core, &self.ticket, self.args)
    }
}

/// `landHeld {business, role, thread?}` (DESIGN.md), or the spec's
/// `landHeld {record: {business, role, thread?}}` (3i L53): the same
/// fields, flat or in `record`, never both.
pub struct LandHeld {
    pub business: String,
    pub role: String,
    pub thread: Option<String>,
}

impl LandHeld {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        if let Some(record) = f.take("record") {
            f.finish()?;
            let Value::Object(record) = record else {
                return Err(Code::InvalidRequest);
            };
            f = Fields::new(record);
        }
        let business = f.str("business", HOST_MAX)?;
        let role = f.str("role", HOST_MAX)?;
        let thread = f.opt_str("thread", HOST_MAX)?;
        f.finish()?;
        Ok(LandHeld {
            business,
            role,
            thread,
        })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        land_held(core, &self.business, &self.role, self.thread.as_deref())
    }
}

host_op!(CheckLand, "checkLand");
host_op!(RecordLand, "recordLand");
host_op!(LandRefused, "landRefused");
host_op!(LandHeld, "landHeld");
