//! `role.claim`, `role.release` and `role.revoke`.

use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{role_session, Verb};
use crate::policy::routing::Class;
use crate::policy::threads as rules;
use crate::store::decisions as dstore;
use crate::store::evidence::{self, ClaimRow};
use crate::store::threads;
use crate::store::Tx;
use serde_json::{json, Value};

/// The longest `role.revoke` reason, in characters (3i, row 123).
const REASON_MAX: usize = 500;

/// `role.claim` (no args): claims the capability's role for its run: one
/// holder per role, never a revoked run, never an ended one.
pub struct Claim;

impl Verb for Claim {
    fn parse(args: Fields) -> Result<Self, Code> {
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
        if evidence::session_of(t.db(), business, run)?.1 {
            return Err(Code::RunEnded);
        }
        if evidence::revoked(t.db(), business, role, run)? {
            return Err(Code::RunRevoked);
        }
        // One holder at a time, the claiming run included: a second claim is refused.
        if t.holder(business, role).is_some() {
            return Err(Code::RoleHeld);
        }
        let w = evidence::insert_claim(t, business, &ClaimRow::own(role, run, "claim"))?;
        Ok(json!({"business": business, "role": role, "run": run, "op": "claim", "at": w.at}))
    })
}

/// `role.release` (no args): releases the role; only its current holder may.
pub struct Release;

impl Verb for Release {
    fn parse(args: Fields) -> Result<Self, Code> {
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
        if evidence::session_of(t.db(), business, run)?.1 {
            return Err(Code::RunEnded);
        }
        if threads::revoked(t.db(), thread, run)? {
            return Err(Code::RunRevoked);
        }
        if threads::holder(t.db(), thread)?.is_some() {
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
            if threads::holder(t.db(), &thread)?.as_deref() != Some(run) {
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
        if t.holder(business, role).as_deref() != Some(run) {
            return Err(Code::NotHolder);
        }
        let w = evidence::insert_claim(t, business, &ClaimRow::own(role, run, "release"))?;
        Ok(json!({"business": business, "role": role, "run": run, "op": "release", "at": w.at}))
    })
}

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
    fn parse(mut args: Fields) -> Result<Self, Code> {
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
    let business = config.business(business_id)?;
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
            // Only the chief of staff ends an END_PROTECTED instance with
            // a reason (Q169).
            if rules::is_end_protected(business, &target) && !is_chief_of_staff(business, role) {
                return Err(Code::RoleEndRefused);
            }
            if rules::is_thread_instance(business, &target) {
                let grounds = Grounds::Reason(&reason, class);
                return revoke_threads(core, business, (role, run), &target, grounds);
            }
            return end_with_reason(core, business, (role, run), &target, &reason, class);
        }
    };
    if rules::is_thread_instance(business, &target) {
        return revoke_threads(
            core,
            business,
            (role, run),
            &target,
            Grounds::Decision(&decision),
        );
    }
    core.store.write(|t| {
        must_hold(t, business_id, (role, run))?;
        let d = dstore::load(t.db(), business_id, &decision)?.ok_or(Code::DecisionNotFound)?;
        // The approval's own facts before the target's: a spent one is
        // `decision-consumed` here as on every other path (L157), even once
        // its target is no longer held or held by another run.
        approval_stands(t, business, (role, run), &target, &decision)?;
        let current = t.holder(business_id, &target).ok_or(Code::NotHeld)?;
        // The approval names one holder incarnation: another run now
        // holding the target is a different revoke.
        if d.entry.target_holder.as_deref() != Some(current.as_str()) {
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

/// The caller's own run must hold its role, on every path of `role.revoke`
/// (3i L68, L237: a run whose role was released or revoked ends nobody,
/// though its capability is still bound): `not-holder`.
fn must_hold(t: &Tx<'_>, business: &str, (role, run): (&str, &str)) -> Result<(), Code> {
    if t.holds(business, role, run)? {
        Ok(())
    } else {
        Err(Code::NotHolder)
    }
}

/// The shared authority check of a `role.revoke` approval, without its
/// write: matching, resolution and single use (`decision-mismatch`,
/// `decision-not-approved`, `decision-consumed`), in the order every path
/// gives them.
fn approval_stands(
    t: &Tx<'_>,
    business: &crate::config::Business,
    (role, run): (&str, &str),
    target: &str,
    decision: &str,
) -> Result<(), Code> {
    crate::authorize::check(
        t.db(),
        business,
        role,
        run,
        "role.revoke",
        Some(target),
        Some(decision),
    )
    .map(|_| ())
}

/// The chief of staff: an instance whose definition is `chief-of-staff`.
fn is_chief_of_staff(business: &crate::config::Business, role: &str) -> bool {
    crate::policy::routing::definition_of(business, role)
        == Some(crate::policy::routing::CHIEF_OF_STAFF)
}

/// What a thread instance's end stands on.
enum Grounds<'a> {
    Decision(&'a str),
    Reason(&'a str, Class),
}

/// `role.revoke` of a thread instance (3i rows 121, 155): it has no role
/// claim, so the end revokes the current claim of each of its threads,
/// with the decision or the reason on every revoke row; none held is
/// `not-held`. A decision for it recorded a null holder at the raise (the
/// instance's role holder, read as null now too), and, the instance being
/// END_PROTECTED, it must have been resolved by the human through the CLI
/// (`role-end-refused` for an arbiter's resolution).
fn revoke_threads(
    core: &mut Core,
    business: &crate::config::Business,
    (role, run): (&str, &str),
    target: &str,
    grounds: Grounds<'_>,
) -> Result<Value, Code> {
    let b = business.id.as_str();
    core.store.write(|t| {
        must_hold(t, b, (role, run))?;
        let (decision, reason) = match grounds {
            Grounds::Decision(decision) => {
                let d = dstore::load(t.db(), b, decision)?.ok_or(Code::DecisionNotFound)?;
                if d.entry.target_holder.is_some() || t.holder(b, target).is_some() {
                    return Err(Code::DecisionMismatch);
                }
                let closed = dstore::closing_event(t.db(), decision)?;
                let via_cli = closed.is_some_and(|e| e.kind == "resolved" && e.input.is_some());
                if d.closed_kind.as_deref() == Some("resolved") && !via_cli {
                    return Err(Code::RoleEndRefused);
                }
                // A spent approval is `decision-consumed`, before `not-held`.
                approval_stands(t, business, (role, run), target, decision)?;
                if threads::held_threads(t.db(), b, target, None)?.is_empty() {
                    return Err(Code::NotHeld);
                }
                let out = crate::authorize::authorize_in_tx(
                    t,
                    business,
                    role,
                    run,
                    "role.revoke",
                    Some(target),
                    Some(decision),
                )?;
                let _allowed = out.event;
                (Some(decision), None)
            }
            Grounds::Reason(reason, class) => {
                if threads::held_threads(t.db(), b, target, None)?.is_empty() {
                    return Err(Code::NotHeld);
                }
                let body = json!({"action": "role.revoke", "class": class.as_str(),
                                  "target": target, "reason": reason});
                let actor = evidence::Actor::of(role, run);
                evidence::insert_event(t, b, "action.allowed", actor, Some(target), &body)?;
                (None, Some(reason))
            }
        };
        let held = threads::held_threads(t.db(), b, target, None)?;
        for (thread, holder) in &held {
            let row = threads::ClaimRow {
                thread,
                run: holder,
                op: "revoke",
                decision,
                reason,
                by: Some(run),
            };
            threads::insert_claim(t, b, &row)?;
        }
        Ok(json!({"revoked": true, "threads": held.len()}))
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
    core.store.write(|t| {
        must_hold(t, &business.id, (role, run))?;
        let current = t.holder(&business.id, target).ok_or(Code::NotHeld)?;
        if current == run {
            return Err(Code::RoleEndRefused);
        }
        let body = json!({"action": "role.revoke", "class": class.as_str(),
                          "target": target, "reason": reason});
        let event = evidence::insert_event(
            t,
            &business.id,
            "action.allowed",
            evidence::Actor::of(role, run),
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
