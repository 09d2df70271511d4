//! `role.claim` and `role.release`.

use super::{role_session, Args};
use crate::core::{Caller, Core};
use crate::error::Code;
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
