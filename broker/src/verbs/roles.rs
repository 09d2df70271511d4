//! `role.claim`, `role.release` and `role.revoke`.

use super::{role_session, Args};
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::store::decisions as dstore;
use crate::store::evidence;
use serde_json::{json, Value};

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

/// `role.revoke {role,decision}`: ends the target role's current holder with
/// an approved, unused decision for this exact target and the holder
/// recorded at the raise. The consumption, the `action.allowed` event and
/// the `revoke` claim row commit together.
pub fn revoke(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Value, Code> {
    let (business_id, role, run) = role_session(caller)?;
    let target = args.str("role", 64)?;
    let decision = args.str("decision", 64)?;
    args.finish()?;
    let config = core.config.clone();
    let business = config
        .businesses
        .get(business_id)
        .ok_or(Code::UnknownBusiness)?;
    if !business.roles.contains_key(&target) {
        return Err(Code::UnknownRole);
    }
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
