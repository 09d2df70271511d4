//! `event.emit`: routine observations by the role's holder.

use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{role_session, Verb};
use crate::store::evidence::{self, Actor};
use serde_json::{json, Value};

/// `event.emit {kind: 'action.allowed', body: {action: 'routine', target?}, subject?}`.
pub struct Emit {
    target: Option<String>,
    subject: Option<String>,
}

impl Verb for Emit {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let kind = args.str("kind", 64)?;
        let body = args.opt_object("body")?.ok_or(Code::InvalidRequest)?;
        let subject = args.opt_str("subject", 256)?;
        args.finish()?;
        if kind != "action.allowed" {
            return Err(Code::InvalidRequest);
        }
        let mut body = Fields::new(body);
        let action = body.str("action", 64)?;
        let target = body.opt_str("target", 256)?;
        body.finish()?;
        if action != "routine" {
            return Err(Code::InvalidRequest);
        }
        Ok(Emit { target, subject })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        emit(core, caller, self)
    }
}

fn emit(core: &mut Core, caller: &Caller, args: Emit) -> Result<Value, Code> {
    let (business, role, run) = role_session(caller)?;
    let Emit { target, subject } = args;
    let mut stored = json!({"action": "routine"});
    if let Some(t) = &target {
        stored["target"] = json!(t);
    }
    core.store.write(|t| {
        if !t.holds(business, role, run)? {
            return Err(Code::NotHolder);
        }
        let w = evidence::insert_event(
            t,
            business,
            "action.allowed",
            Actor::of(role, run),
            subject.as_deref(),
            &stored,
        )?;
        Ok(json!({"event": w.id, "at": w.at}))
    })
}
