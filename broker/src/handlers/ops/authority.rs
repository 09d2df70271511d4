//! The trusted authority ops the host reaches over its channel or in
//! process: `authorize`, `authorizeLaunch` and `refuse`, and the helpers
//! every capability-bearing op shares (the role a capability names, a
//! refusal recorded on its run).

use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::{Fields, HOST_MAX};
use crate::handlers::handler::host_op;
use crate::handlers::refusal;
use crate::ids::is_task_ref;
use crate::store::evidence::Actor;
use crate::store::Db;
use serde_json::{json, Value};

/// `authorize {cap, action, target?, decision?, verdict?}`.
pub struct Authorize {
    pub cap: String,
    pub action: String,
    pub target: Option<String>,
    pub decision: Option<String>,
    pub verdict: Option<String>,
}

impl Authorize {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let cap = f.str("cap", HOST_MAX)?;
        let action = f.str("action", HOST_MAX)?;
        let target = f.opt_str("target", HOST_MAX)?;
        let decision = f.opt_str("decision", HOST_MAX)?;
        let verdict = f.opt_str("verdict", HOST_MAX)?;
        f.finish()?;
        Ok(Authorize {
            cap,
            action,
            target,
            decision,
            verdict,
        })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        authorize(
            core,
            &self.cap,
            &self.action,
            self.target.as_deref(),
            self.decision.as_deref(),
            self.verdict.as_deref(),
        )
    }
}

/// `authorizeLaunch {cap, instance}`.
pub struct AuthorizeLaunch {
    pub cap: String,
    pub instance: String,
}

impl AuthorizeLaunch {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let cap = f.str("cap", HOST_MAX)?;
        let instance = f.str("instance", HOST_MAX)?;
        f.finish()?;
        Ok(AuthorizeLaunch { cap, instance })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        authorize_launch(core, &self.cap, &self.instance)
    }
}

/// `refuse {cap, code, subject?}`.
pub struct Refuse {
    pub cap: String,
    pub code: String,
    pub subject: Option<String>,
}

impl Refuse {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let cap = f.str("cap", HOST_MAX)?;
        let code = f.str("code", HOST_MAX)?;
        // Only a task ref files the refusal on a trail; any other subject (of
        // any JSON type, or none) records null, as the spec says, rather than
        // refusing the host's evidence.
        let subject = match f.take("subject") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        f.finish()?;
        Ok(Refuse { cap, code, subject })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        refuse(core, &self.cap, &self.code, self.subject.as_deref())
    }
}

/// The role session a host op's capability names.
pub fn role_of(core: &Core, cap: &str) -> Result<(String, String, String), Code> {
    match core.caller(cap) {
        Some(Caller::Role {
            business,
            role,
            run,
        }) => Ok((business, role, run)),
        Some(Caller::Reader { .. }) => Err(Code::ReadOnly),
        _ => Err(Code::UnknownCapability),
    }
}

/// The trusted `authorize(cap, action, {target, decision, verdict})`.
///
/// `task.close` on a task with a recorded push checks `verdict` in the same
/// transaction as the `action.allowed` (row 93): it must name a
/// `review.verdict` event on that task (`verdict-not-found`), `approve`
/// (`verdict-not-approve`), for the task's latest pushed commit
/// (`verdict-stale`); a refusal rolls the `action.allowed` (and any decision
/// consumption) back. Anywhere else `verdict` is a citation the broker
/// doesn't check.
pub fn authorize(
    core: &mut Core,
    cap: &str,
    action: &str,
    target: Option<&str>,
    decision: Option<&str>,
    verdict: Option<&str>,
) -> Result<Value, Code> {
    let (business_id, role, run) = role_of(core, cap)?;
    let config = core.config.clone();
    let business = config.business(&business_id)?;
    let r = core.store.write(|t| {
        let out =
            crate::authorize::authorize_in_tx(t, business, &role, &run, action, target, decision)?;
        if let (true, Some(task)) = (action == "task.close", target) {
            check_close_verdict(t.db(), &business.id, task, verdict)?;
        }
        Ok(json!({"allowed": true, "event": out.event.id}))
    });
    match r {
        // A refused task.close is filed on the task's trail, as a refused
        // review verb is (the dispatch does that for verbs; `authorize` is
        // the host's, so it does it here), after the transaction rolled back.
        Err(code) if action == "task.close" && code != Code::StorageUnavailable => {
            let subject = target.filter(|t| is_task_ref(t));
            let body = json!({"action": action, "code": code.as_str()});
            refusal::record(core, &business_id, Actor::of(&role, &run), subject, &body)?;
            Err(code)
        }
        other => other,
    }
}

/// The `task.close` verdict rule, for a task with a recorded push.
fn check_close_verdict(
    conn: &Db,
    business: &str,
    task: &str,
    verdict: Option<&str>,
) -> Result<(), Code> {
    let Some(push) = crate::store::reviews::latest_push(conn, business, task)? else {
        // No push: the verdict is a citation the broker doesn't check.
        return Ok(());
    };
    let id = verdict.ok_or(Code::VerdictNotFound)?;
    let (v, commit) =
        crate::store::reviews::verdict(conn, business, task, id)?.ok_or(Code::VerdictNotFound)?;
    if v != "approve" {
        return Err(Code::VerdictNotApprove);
    }
    if commit != push.commit {
        return Err(Code::VerdictStale);
    }
    Ok(())
}

/// `authorizeLaunch {cap, instance}`: `authorize(cap, 'role.launch',
/// {target: instance})`; a refusal is also recorded as `action.refused`.
pub fn authorize_launch(core: &mut Core, cap: &str, instance: &str) -> Result<Value, Code> {
    let (business_id, role, run) = role_of(core, cap)?;
    let known = core
        .config
        .businesses
        .get(&business_id)
        .is_some_and(|b| b.roles.contains_key(instance));
    let result = if known {
        authorize(core, cap, "role.launch", Some(instance), None, None)
    } else {
        Err(Code::UnknownRole)
    };
    match result {
        Ok(v) => Ok(v),
        Err(code) => {
            let body = json!({"action": "role.launch", "target": instance, "code": code.as_str()});
            refusal::record(core, &business_id, Actor::of(&role, &run), None, &body)?;
            Err(code)
        }
    }
}

/// True for a code a host hands over: kebab-case, 1 to 64 characters.
pub(crate) fn code_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// `refuse {cap, code, subject?}`: a refusal the host decided itself, the
/// code only; a task ref subject files it on that task's trail, any other
/// subject records null.
pub fn refuse(
    core: &mut Core,
    cap: &str,
    code: &str,
    subject: Option<&str>,
) -> Result<Value, Code> {
    let (business_id, role, run) = role_of(core, cap)?;
    if !code_ok(code) {
        return Err(Code::InvalidRequest);
    }
    let subject = subject.filter(|s| is_task_ref(s));
    let body = json!({"code": code});
    let event = refusal::record(core, &business_id, Actor::of(&role, &run), subject, &body)?;
    Ok(json!({"event": event.id}))
}

host_op!(Authorize, "authorize");
host_op!(AuthorizeLaunch, "authorizeLaunch");
host_op!(Refuse, "refuse");
