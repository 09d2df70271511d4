//! `launch.revoke` and `launch.restore` (human only), and the trusted
//! authority ops the host reaches over its channel or in process:
//! `authorize`, `authorizeLaunch` and `refuse`.

use super::decisions::HUMAN_RUN;
use super::{Args, Verb};
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::ids::is_task_ref;
use crate::policy::routing::HUMAN;
use crate::store::evidence::{self, Actor};
use serde_json::{json, Value};

const HUMAN_ACTOR: Actor<'static> = Actor {
    role: Some(HUMAN),
    run: Some(HUMAN_RUN),
};

fn toggle(core: &mut Core, caller: &Caller, verb: &str, kind: &str) -> Result<Value, Code> {
    let Caller::Human { business } = caller else {
        return Err(Code::HumanRequired);
    };
    core.store.write(|t| {
        let input = evidence::insert_event(
            t,
            business,
            "human.input",
            HUMAN_ACTOR,
            None,
            &json!({"verb": verb}),
        )?;
        let w = evidence::insert_event(
            t,
            business,
            kind,
            HUMAN_ACTOR,
            None,
            &json!({"input": input.id}),
        )?;
        let state = if kind == "launch.revoked" {
            "revoked"
        } else {
            "allowed"
        };
        Ok(json!({"state": state, "event": w.id, "input": input.id, "at": w.at}))
    })
}

/// `launch.revoke` (no args): the human stops every `role.launch` of the business.
pub struct Revoke;

impl Verb for Revoke {
    fn parse(args: Args) -> Result<Self, Code> {
        args.finish()?;
        Ok(Revoke)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        toggle(core, caller, "launch.revoke", "launch.revoked")
    }
}

/// `launch.restore` (no args): the human allows `role.launch` again.
pub struct Restore;

impl Verb for Restore {
    fn parse(args: Args) -> Result<Self, Code> {
        args.finish()?;
        Ok(Restore)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        toggle(core, caller, "launch.restore", "launch.restored")
    }
}

/// The role session a host op's capability names.
pub(crate) fn role_of(core: &Core, cap: &str) -> Result<(String, String, String), Code> {
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
    let business = config
        .businesses
        .get(&business_id)
        .ok_or(Code::UnknownBusiness)?;
    core.store.write(|t| {
        let out =
            crate::authorize::authorize_in_tx(t, business, &role, &run, action, target, decision)?;
        if let (true, Some(task)) = (action == "task.close", target) {
            check_close_verdict(&t.tx, &business.id, task, verdict)?;
        }
        Ok(json!({"allowed": true, "event": out.event.id}))
    })
}

/// The `task.close` verdict rule, for a task with a recorded push.
fn check_close_verdict(
    conn: &rusqlite::Connection,
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

/// Records `action.refused` `body` against the capability's run, in its own transaction.
pub(crate) fn record_refusal(
    core: &mut Core,
    business: &str,
    role: &str,
    run: &str,
    subject: Option<&str>,
    body: &Value,
) -> Result<String, Code> {
    core.store
        .write(|t| {
            evidence::insert_event(
                t,
                business,
                "action.refused",
                Actor {
                    role: Some(role),
                    run: Some(run),
                },
                subject,
                body,
            )
        })
        .map(|w| w.id)
        // Failing to write refusal evidence is reported as such.
        .map_err(|_| Code::StorageUnavailable)
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
            record_refusal(core, &business_id, &role, &run, None, &body)?;
            Err(code)
        }
    }
}

fn code_ok(s: &str) -> bool {
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
    let event = record_refusal(
        core,
        &business_id,
        &role,
        &run,
        subject,
        &json!({"code": code}),
    )?;
    Ok(json!({"event": event}))
}
