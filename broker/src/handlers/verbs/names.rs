//! `name.set` and `names` (3i row 141, REQ-MSG-2): people and agents
//! address instances by name. A name is stored append-only in
//! `instance_names`; `message.send` resolves one before any check.

use super::messages::knows_definition;
use crate::core::{Caller, Core};
use crate::core::{HUMAN, HUMAN_RUN, TESTER};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{ReadVerb, Verb};
use crate::store::evidence::{self, Actor};
use crate::store::names;
use serde_json::{json, Value};

/// The action a role file grants within-role to name instances.
pub const INSTANCE_NAME: &str = "instance.name";

/// `name.set {instance, name}` → `{instance, name}`.
pub struct NameSet {
    instance: String,
    name: String,
}

impl Verb for NameSet {
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let instance = args.str("instance", 64)?;
        let name = args.str("name", 64)?;
        args.finish()?;
        if !crate::config::is_id(&name) {
            return Err(Code::InvalidRequest);
        }
        Ok(NameSet { instance, name })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let config = core.config.clone();
        let biz = config.business(caller.business())?;
        // Who: the human's CLI, or a role whose file grants instance.name
        // within its role; no decision sets a name.
        let (role, run) = match caller {
            Caller::Human { .. } => (HUMAN, HUMAN_RUN),
            Caller::Role { role, run, .. } => {
                let within = biz
                    .roles
                    .get(role.as_str())
                    .is_some_and(|r| r.within_role.iter().any(|a| a == INSTANCE_NAME));
                if !within {
                    return Err(Code::NotAuthorized);
                }
                (role.as_str(), run.as_str())
            }
            Caller::Reader { .. } => return Err(Code::ReadOnly),
            Caller::Tester { .. } => return Err(Code::TesterRefused),
        };
        let NameSet { instance, name } = self;
        if !biz.roles.contains_key(&instance) {
            return Err(Code::UnknownRole);
        }
        if biz.roles.contains_key(&name) || name == HUMAN || name == TESTER {
            return Err(Code::NameIsInstance);
        }
        if knows_definition(biz, &name) {
            return Err(Code::NameIsRole);
        }
        let business = biz.id.clone();
        core.store.write(|t| {
            if let Caller::Role { .. } = caller {
                if !t.holds(&business, role, run)? {
                    return Err(Code::NotHolder);
                }
            }
            if names::holder(t.db(), &business, &name)?.is_some_and(|h| h != instance) {
                return Err(Code::NameTaken);
            }
            names::insert_name(t, &business, &instance, &name, role, run)?;
            let (kind, body) = match caller {
                Caller::Human { .. } => (
                    "human.input",
                    json!({"verb": "name.set", "instance": instance, "name": name}),
                ),
                _ => (
                    "action.allowed",
                    json!({"action": INSTANCE_NAME, "target": instance, "name": name}),
                ),
            };
            evidence::insert_event(
                t,
                &business,
                kind,
                Actor::of(role, run),
                Some(&instance),
                &body,
            )?;
            Ok(json!({"instance": instance, "name": name}))
        })
    }
}

/// `names` → `[{instance, name, at}]`: every instance's current name.
pub struct Names;

impl ReadVerb for Names {
    fn parse(args: Fields) -> Result<Self, Code> {
        args.finish().map(|()| Names)
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let rows = names::current(core.store.db(), caller.business())?;
        Ok(Value::Array(
            rows.into_iter()
                .map(|n| json!({"instance": n.instance, "name": n.name, "at": n.at}))
                .collect(),
        ))
    }
}
