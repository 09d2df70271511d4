//! `launch.revoke` and `launch.restore` (human only).

use crate::core::HUMAN_ACTOR;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::Verb;
use crate::store::evidence;
use serde_json::{json, Value};

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
    fn parse(args: Fields) -> Result<Self, Code> {
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
    fn parse(args: Fields) -> Result<Self, Code> {
        args.finish()?;
        Ok(Restore)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        toggle(core, caller, "launch.restore", "launch.restored")
    }
}
