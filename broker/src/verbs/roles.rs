//! `role.claim`, `role.release` and `role.revoke`.

use super::{role_session, Args, Verb};
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::policy::routing::Class;
use crate::store::decisions as dstore;
use crate::store::evidence::{self, ClaimRow};
use crate::store::threads;
use serde_json::{json, Value};

/// The longest `role.revoke` reason, in characters (3i, row 123).
const REASON_MAX: usize = 500;

/// `role.claim` (no args): claims the capability's role for its run: one
/// holder per role, never a revoked run, never an ended one.
pub struct Claim;

impl Verb for Claim {
    fn parse(args: Args) -> Result<Self, Code> {
        args.finish()?;
        Ok(Claim)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        claim(core, caller)
    }
}

fn claim(core: &mut Core, caller: &Caller) -> Result<Value, Code> {
    let (business, role, run) = role_session(caller)?;
    if let Some(thread) = core.run_thread(business, run) {
        return claim_thread(core, (business, role, run), &thread);
    }
    core.store.write(|t| {
        if evidence::session_of(&t.tx, business, run)?.1 {
            return Err(Code::RunEnded);
        }
        if evidence::revoked(&t.tx, business, role, run)? {
            return Err(Code::RunRevoked);
        }
        // One holder at a time, the claiming run included: a second claim is refused.
        if evidence::holder(&t.tx, business, role)?.is_some() {
            return Err(Code::RoleHeld);
        }
        let w = evidence::insert_claim(t, business, &ClaimRow::own(role, run, "claim"))?;
        Ok(json!({"business": business, "role": role, "run": run, "op": "claim", "at": w.at}))
    })
}

/// `role.release` (no args): releases the role; only its current holder may.
pub struct Release;

impl Verb for Release {
    fn parse(args: Args) -> Result<Self, Code> {
        args.finish()?;
        Ok(Release)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        release(core, caller)
    }
}

/// A thread run's claim (3i row 121): a `thread_claims` row for the
/// run's own thread, not a role claim. One run per thread
/// (`thread-already-held`, the claiming run included), never a revoked run.
fn claim_thread(
    core: &mut Core,
    (business, role, run): (&str, &str, &str),
    thread: &str,
) -> Result<Value, Code> {
    core.store.write(|t| {
        if evidence::session_of(&t.tx, business, run)?.1 {
            return Err(Code::RunEnded);
        }
        if threads::revoked(&t.tx, thread, run)? {
            return Err(Code::RunRevoked);
        }
        if threads::holder(&t.tx, thread)?.is_some() {
            return Err(Code::ThreadAlreadyHeld);
        }
        let at = threads::insert_claim(t, business, &threads::ClaimRow::own(thread, run, "claim"))?;
        Ok(
            json!({"business": business, "role": role, "run": run, "thread": thread,
                  "op": "claim", "at": at}),
        )
    })
}

fn release(core: &mut Core, caller: &Caller) -> Result<Value, Code> {
    let (business, role, run) = role_session(caller)?;
    if let Some(thread) = core.run_thread(business, run) {
        return core.store.write(|t| {
            if threads::holder(&t.tx, &thread)?.as_deref() != Some(run) {
                return Err(Code::NotHolder);
            }
            let at = threads::insert_claim(
                t,
                business,
                &threads::ClaimRow::own(&thread, run, "release"),
            )?;
            Ok(
                json!({"business": business, "role": role, "run": run, "thread": thread,
                      "op": "release", "at": at}),
            )
        });
    }
    core.store.write(|t| {
        if evidence::holder(&t.tx, business, role)?.as_deref() != Some(run) {
            return Err(Code::NotHolder);
        }
        let w = evidence::insert_claim(t, business, &ClaimRow::own(role, run, "release"))?;
        Ok(json!({"business": business, "role": role, "run": run, "op": "release", "at": w.at}))
    })
}

/// The definition of the business's thread instances (3i, row 121): such a
/// target is ended through its threads, which this build does not serve yet.
const THREAD_DEFINITION: &str = "assistant";

/// Whether `role`'s file lists `role.end` (the chief of staff's, 3i row 123).
fn lists_role_end(business: &crate::config::Business, role: &str) -> Option<Class> {
    let r = business.roles.get(role)?;
    if r.within_role.iter().any(|a| a == "role.end") {
        Some(Class::WithinRole)
    } else if r.cross_role.iter().any(|a| a == "role.end") {
        Some(Class::CrossRole)
    } else {
        None
    }
}

/// A reason of 1 to 500 characters (3i, row 123).
fn valid_reason(reason: &Value) -> Result<String, Code> {
    match reason.as_str() {
        Some(r) if (1..=REASON_MAX).contains(&r.chars().count()) && !r.contains('\0') => {
            Ok(r.to_string())
        }
        _ => Err(Code::InvalidRequest),
    }
}

/// `role.revoke {role,decision}`: ends the target role's current holder with
/// an approved, unused decision for this exact target and the holder
/// recorded at the raise. `role.revoke {role,reason}` (3i, row 123): a role
/// whose file lists `role.end` ends it with a reason instead, logged in the
/// `action.allowed` body and on the revoke row; any other role gets
/// `decision-required`, and ending the caller's own run `role-end-refused`.
/// Either way the evidence and the `revoke` claim row commit together.
pub struct Revoke {
    target: String,
    decision: Option<String>,
    reason: Option<Value>,
}

impl Verb for Revoke {
    fn parse(mut args: Args) -> Result<Self, Code> {
        let target = args.str("role", 64)?;
        let decision = args.opt_str("decision", 64)?;
        let reason = args.take("reason");
        args.finish()?;
        Ok(Revoke {
            target,
            decision,
            reason,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        revoke(core, caller, self)
    }
}

fn revoke(core: &mut Core, caller: &Caller, args: Revoke) -> Result<Value, Code> {
    let (business_id, role, run) = role_session(caller)?;
    let Revoke {
        target,
        decision,
        reason,
    } = args;
    let config = core.config.clone();
    let business = config
        .businesses
        .get(business_id)
        .ok_or(Code::UnknownBusiness)?;
    if !business.roles.contains_key(&target) {
        return Err(Code::UnknownRole);
    }
    let decision = match (decision, reason) {
        (Some(d), None) => d,
        // Both, or neither: a malformed request.
        (Some(_), Some(_)) | (None, None) => return Err(Code::InvalidRequest),
        (None, Some(reason)) => {
            let reason = valid_reason(&reason)?;
            let class = lists_role_end(business, role).ok_or(Code::DecisionRequired)?;
            return end_with_reason(core, business, (role, run), &target, &reason, class);
        }
    };
    core.store.write(|t| {
        let d = dstore::load(&t.tx, business_id, &decision)?.ok_or(Code::DecisionNotFound)?;
        let current = evidence::holder(&t.tx, business_id, &target)?.ok_or(Code::NotHeld)?;
        // The approval names one holder incarnation: another run now
        // holding the target is a different revoke.
        if d.target_holder.as_deref() != Some(current.as_str()) {
            return Err(Code::DecisionMismatch);
        }
        let out = crate::authorize::authorize_in_tx(
            t,
            business,
            role,
            run,
            "role.revoke",
            Some(&target),
            Some(&decision),
        )?;
        let row = ClaimRow {
            role: &target,
            run: &current,
            op: "revoke",
            decision: Some(&decision),
            by: Some(run),
            reason: None,
        };
        let w = evidence::insert_claim(t, business_id, &row)?;
        Ok(
            json!({"role": target, "run": current, "op": "revoke", "decision": decision,
                  "event": out.event.id, "at": w.at}),
        )
    })
}

/// The `role.end` path of `role.revoke`: no decision, the reason in the
/// `action.allowed` body and on the revoke row.
fn end_with_reason(
    core: &mut Core,
    business: &crate::config::Business,
    (role, run): (&str, &str),
    target: &str,
    reason: &str,
    class: Class,
) -> Result<Value, Code> {
    let thread_instance = business
        .roles
        .get(target)
        .and_then(|r| r.definition.as_deref())
        == Some(THREAD_DEFINITION);
    if thread_instance {
        // Ended through its threads (3i rows 121, 155): not served yet.
        return Err(Code::NotImplemented);
    }
    core.store.write(|t| {
        let current = evidence::holder(&t.tx, &business.id, target)?.ok_or(Code::NotHeld)?;
        if current == run {
            return Err(Code::RoleEndRefused);
        }
        let body = json!({"action": "role.revoke", "class": class.as_str(),
                          "target": target, "reason": reason});
        let event = evidence::insert_event(
            t,
            &business.id,
            "action.allowed",
            evidence::Actor {
                role: Some(role),
                run: Some(run),
            },
            Some(target),
            &body,
        )?;
        let row = ClaimRow {
            role: target,
            run: &current,
            op: "revoke",
            decision: None,
            by: Some(run),
            reason: Some(reason),
        };
        let w = evidence::insert_claim(t, &business.id, &row)?;
        Ok(
            json!({"role": target, "run": current, "op": "revoke", "reason": reason,
                  "event": event.id, "at": w.at}),
        )
    })
}
