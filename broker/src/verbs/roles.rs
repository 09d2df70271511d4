//! `role.claim`, `role.release` and `role.revoke`.

use super::{role_session, Args};
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::store::decisions as dstore;
use crate::store::evidence;
use serde_json::{json, Value};

/// The longest `role.revoke` reason, in characters (3i, row 123).
const REASON_MAX: usize = 500;

/// Claims the capability's role for its run: one holder per role, never a
/// revoked run, never an ended one.
pub fn claim(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    let (business, role, run) = role_session(caller)?;
    args.finish()?;
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
        let w = evidence::insert_claim(t, business, role, run, "claim", None, Some(run))?;
        Ok(json!({"business": business, "role": role, "run": run, "op": "claim", "at": w.at}))
    })
}

/// Releases the role; only its current holder may.
pub fn release(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    let (business, role, run) = role_session(caller)?;
    args.finish()?;
    core.store.write(|t| {
        if evidence::holder(&t.tx, business, role)?.as_deref() != Some(run) {
            return Err(Code::NotHolder);
        }
        let w = evidence::insert_claim(t, business, role, run, "release", None, Some(run))?;
        Ok(json!({"business": business, "role": role, "run": run, "op": "release", "at": w.at}))
    })
}

/// The spec's (3i, row 123) `role.revoke {role,reason}`: only a role whose
/// file lists `role.end` may end a role with a reason instead of a decision;
/// any other role gets `decision-required`. The reason path itself needs the
/// 3d schema (a revoke row with a reason and no decision), which this 3b
/// store refuses, so a `role.end` holder gets `not-implemented`.
fn reason_path(business: &crate::config::Business, role: &str, reason: &Value) -> Code {
    let ok = reason
        .as_str()
        .is_some_and(|r| (1..=REASON_MAX).contains(&r.chars().count()) && !r.contains('\0'));
    if !ok {
        return Code::InvalidRequest;
    }
    let lists_end = business.roles.get(role).is_some_and(|r| {
        r.within_role.iter().any(|a| a == "role.end")
            || r.cross_role.iter().any(|a| a == "role.end")
    });
    if lists_end {
        Code::NotImplemented
    } else {
        Code::DecisionRequired
    }
}

/// `role.revoke {role,decision}`: ends the target role's current holder with
/// an approved, unused decision for this exact target and the holder
/// recorded at the raise. The consumption, the `action.allowed` event and
/// the `revoke` claim row commit together.
pub fn revoke(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Value, Code> {
    let (business_id, role, run) = role_session(caller)?;
    let target = args.str("role", 64)?;
    let decision = args.opt_str("decision", 64)?;
    let reason = args.take("reason");
    args.finish()?;
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
        (None, Some(reason)) => return Err(reason_path(business, role, &reason)),
    };
    core.store.write(|t| {
        let d = dstore::load(&t.tx, business_id, &decision)?.ok_or(Code::DecisionNotFound)?;
        let current = evidence::holder(&t.tx, business_id, &target)?.ok_or(Code::NotHeld)?;
        // The approval names one holder incarnation: another run now
        // holding the target is a different revoke.
        if d.target_holder.as_deref() != Some(current.as_str()) {
            return Err(Code::DecisionMismatch);
        }
        let out = dstore::authorize_in_tx(
            t,
            business,
            role,
            run,
            "role.revoke",
            Some(&target),
            Some(&decision),
        )?;
        let w = evidence::insert_claim(
            t,
            business_id,
            &target,
            &current,
            "revoke",
            Some(&decision),
            Some(run),
        )?;
        Ok(
            json!({"role": target, "run": current, "op": "revoke", "decision": decision,
                  "event": out.event.id, "at": w.at}),
        )
    })
}
