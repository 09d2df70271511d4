//! The organization verbs: `organization.set` (a role whose file lists
//! `organization.change`, the chief of staff), and the human's `limits`,
//! `limits.set`, `instances`, `instances.set`, `routes`, `routes.set`.
//!
//! Every write goes through [`change`]: read the file as it is now, refuse
//! a stale `revision` before anything is written, apply the change to a
//! copy, run the shape and route checks, then in one store transaction
//! record `organization.changed` with the actor and replace the file
//! (`crate::organization::write`). A refusal anywhere leaves the file and
//! the store as they were.

use super::{Args, Verb};
use crate::config::organization::{
    piece, Assistant, Instance, Limits, Model, Organization, Route, Vars, MAX_REVISION,
};
use crate::config::Business;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::organization::OrgFile;
use crate::policy::routing::definition_of;
use crate::store::evidence::{self, Actor};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The role action `organization.set` needs in the caller's file.
pub const ORGANIZATION_CHANGE: &str = "organization.change";

/// The keys `organization.set` and `limits.set` take besides `revision`.
const ORGANIZATION_KEYS: &[&str] = &["limits", "models", "instances", "assistants"];

fn org_file(core: &Core) -> Result<OrgFile, Code> {
    core.organization.clone().ok_or(Code::OrganizationOff)
}

/// A `revision`: a safe non-negative integer.
fn take_revision(args: &mut Args) -> Result<u64, Code> {
    args.take("revision")
        .and_then(|v| v.as_u64())
        .filter(|r| *r <= MAX_REVISION)
        .ok_or(Code::InvalidRequest)
}

/// The definitions the loaded business knows: each instance's definition,
/// its key when it has none.
fn definitions(b: &Business) -> BTreeSet<&str> {
    b.roles.keys().filter_map(|k| definition_of(b, k)).collect()
}

/// The definitions some instance declares credentials for.
fn credentialed(b: &Business) -> BTreeSet<&str> {
    b.roles
        .iter()
        .filter(|(_, r)| r.gitea.is_some() || r.vikunja.is_some())
        .filter_map(|(k, _)| definition_of(b, k))
        .collect()
}

/// An instance's definition must be one the business knows and declare no
/// credentials (those come only from the business file).
fn check_definition(b: &Business, definition: &str) -> Result<(), Code> {
    if !definitions(b).contains(definition) {
        return Err(Code::OrganizationUnknownDefinition);
    }
    if credentialed(b).contains(definition) {
        return Err(Code::OrganizationCredentialsOutOfScope);
    }
    Ok(())
}

/// Who a change is recorded under: `<definition>.<instance>` for a role,
/// `human` for the human's CLI.
struct Writer<'a> {
    role: &'a str,
    run: &'a str,
    actor: String,
    /// A role writer must hold its role when the write lands.
    holder: bool,
}

fn writer<'a>(core: &Core, caller: &'a Caller) -> Result<Writer<'a>, Code> {
    match caller {
        Caller::Role { role, run, .. } => {
            let b = core.config.business(caller.business())?;
            let r = b.roles.get(role.as_str()).ok_or(Code::UnknownRole)?;
            if !r.within_role.iter().any(|a| a == ORGANIZATION_CHANGE) {
                return Err(Code::NotAuthorized);
            }
            let def = definition_of(b, role).unwrap_or(role);
            Ok(Writer {
                role,
                run,
                actor: format!("{def}.{role}"),
                holder: true,
            })
        }
        Caller::Human { .. } => Ok(Writer {
            role: super::messages::HUMAN,
            run: super::messages::HUMAN_RUN,
            actor: super::messages::HUMAN.to_string(),
            holder: false,
        }),
        Caller::Reader { .. } => Err(Code::ReadOnly),
        Caller::Tester { .. } => Err(Code::TesterRefused),
    }
}

/// The one organization writer. `edit` changes a copy of the current file
/// and says whether the change waits for a restart.
fn change(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    revision: u64,
    keys: &[&str],
    edit: impl FnOnce(&mut Organization, &Business) -> Result<bool, Code>,
) -> Result<Value, Code> {
    let w = writer(core, caller)?;
    let file = org_file(core)?;
    let current = file.read()?;
    if current.revision != revision {
        return Err(Code::OrganizationStale);
    }
    let mut next = current.clone();
    let restart = edit(&mut next, core.config.business(caller.business())?)?;
    next.revision = revision + 1;
    next.check_shape()?;
    next.check_routes(&file.levels)?;
    let business = caller.business().to_string();
    let body = json!({"operation": verb, "revision": next.revision, "keys": keys,
                      "actor": w.actor, "restart": restart});
    core.store.write(|t| {
        if w.holder && !evidence::holds(&t.tx, &business, w.role, w.run)? {
            return Err(Code::NotHolder);
        }
        evidence::insert_event(
            t,
            &business,
            "organization.changed",
            Actor::of(w.role, w.run),
            None,
            &body,
        )?;
        crate::organization::write(&file.path, &next)
    })?;
    tracing::info!(%business, verb, revision = next.revision, "organization changed");
    Ok(json!({"revision": next.revision, "restart": restart, "actor": w.actor}))
}

/// What `organization.set` and `limits.set` take.
pub struct SetArgs {
    revision: u64,
    limits: Option<Limits>,
    models: Option<BTreeMap<String, Model>>,
    instances: Option<BTreeMap<String, Instance>>,
    assistants: Option<BTreeMap<String, Assistant>>,
    keys: Vec<&'static str>,
}

impl SetArgs {
    fn parse(mut args: Args) -> Result<Self, Code> {
        let revision = take_revision(&mut args)?;
        let mut keys = Vec::new();
        let mut take = |args: &mut Args, key: &'static str| {
            let v = args.take_present(key);
            if v.is_some() {
                keys.push(key);
            }
            v
        };
        let limits = take(&mut args, "limits");
        let models = take(&mut args, "models");
        let instances = take(&mut args, "instances");
        let assistants = take(&mut args, "assistants");
        // Any other key, the instance keys of instances.set and routes
        // among them, refuses before the writer runs.
        args.finish()?;
        if keys.is_empty() {
            return Err(Code::InvalidRequest);
        }
        debug_assert!(keys.iter().all(|k| ORGANIZATION_KEYS.contains(k)));
        Ok(SetArgs {
            revision,
            limits: limits.map(Limits::from_json).transpose()?,
            models: models.map(piece).transpose()?,
            instances: instances.map(piece).transpose()?,
            assistants: assistants.map(piece).transpose()?,
            keys,
        })
    }

    fn apply_as(self, core: &mut Core, caller: &Caller, verb: &str) -> Result<Value, Code> {
        let SetArgs {
            revision,
            limits,
            models,
            instances,
            assistants,
            keys,
        } = self;
        let b = caller.business().to_string();
        change(core, caller, verb, revision, &keys, |org, business| {
            let mut restart = false;
            if let Some(l) = limits {
                org.limits = l;
            }
            if let Some(m) = models {
                restart |= org.models != m;
                org.models = m;
            }
            if let Some(i) = instances {
                for inst in i.values() {
                    check_definition(business, &inst.definition)?;
                }
                restart |= org.instances.get(&b) != Some(&i);
                org.instances.insert(b.clone(), i);
            }
            if let Some(a) = assistants {
                restart |= org.assistants.get(&b) != Some(&a);
                org.assistants.insert(b.clone(), a);
            }
            Ok(restart)
        })
    }
}

/// `organization.set {revision, limits?, models?, instances?, assistants?}`.
pub struct OrganizationSet(SetArgs);

impl Verb for OrganizationSet {
    fn parse(args: Args) -> Result<Self, Code> {
        SetArgs::parse(args).map(OrganizationSet)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        self.0.apply_as(core, caller, "organization.set")
    }
}

/// `limits.set`: the keys `organization.set` takes, for the human.
pub struct LimitsSet(SetArgs);

impl Verb for LimitsSet {
    fn parse(args: Args) -> Result<Self, Code> {
        SetArgs::parse(args).map(LimitsSet)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        self.0.apply_as(core, caller, "limits.set")
    }
}

/// A read verb that takes no args.
fn no_args(args: Args) -> Result<(), Code> {
    args.finish()
}

/// `limits`: `{revision, limits, models, assistants}` (the business's assistants).
pub struct LimitsRead;

impl Verb for LimitsRead {
    fn parse(args: Args) -> Result<Self, Code> {
        no_args(args).map(|()| LimitsRead)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let org = org_file(core)?.read()?;
        let assistants = org
            .assistants
            .get(caller.business())
            .cloned()
            .unwrap_or_default();
        Ok(
            json!({"revision": org.revision, "limits": org.limits, "models": org.models,
                  "assistants": assistants}),
        )
    }
}

/// `instances`: the business's instances as the file holds them (what the
/// next start loads), the instances the running broker loaded, and the
/// definitions `instances.set` accepts.
pub struct InstancesRead;

impl Verb for InstancesRead {
    fn parse(args: Args) -> Result<Self, Code> {
        no_args(args).map(|()| InstancesRead)
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let org = org_file(core)?.read()?;
        let b = core.config.business(caller.business())?;
        let instances = org
            .instances
            .get(caller.business())
            .cloned()
            .unwrap_or_default();
        let credentialed = credentialed(b);
        let accepted: Vec<&str> = definitions(b)
            .into_iter()
            .filter(|d| !credentialed.contains(d))
            .collect();
        let loaded: Map<String, Value> = b
            .roles
            .keys()
            .map(|k| {
                let launch = b.launch.as_ref().is_some_and(|l| l.instances.contains(k));
                (
                    k.clone(),
                    json!({"definition": definition_of(b, k).unwrap_or(k), "launch": launch}),
                )
            })
            .collect();
        Ok(
            json!({"revision": org.revision, "instances": instances, "loaded": loaded,
                  "definitions": accepted}),
        )
    }
}

/// `instances.set {revision, instance, op, definition?, vars?, launch?}`.
pub struct InstancesSet {
    revision: u64,
    instance: String,
    add: bool,
    definition: Option<String>,
    vars: Option<Vars>,
    launch: Option<bool>,
}

impl Verb for InstancesSet {
    fn parse(mut args: Args) -> Result<Self, Code> {
        let revision = take_revision(&mut args)?;
        let instance = args.str("instance", 64)?;
        let op = args.str("op", 16)?;
        let definition = args.opt_str("definition", 64)?;
        let vars = args.take_present("vars");
        let launch = match args.take_present("launch") {
            None => None,
            Some(Value::Bool(b)) => Some(b),
            Some(_) => return Err(Code::InvalidRequest),
        };
        args.finish()?;
        let add = match op.as_str() {
            "add" => true,
            "change" => false,
            _ => return Err(Code::InvalidRequest),
        };
        if !crate::config::is_id(&instance) || (add && definition.is_none()) {
            return Err(Code::InvalidRequest);
        }
        Ok(InstancesSet {
            revision,
            instance,
            add,
            definition,
            vars: vars.map(piece).transpose()?,
            launch,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let InstancesSet {
            revision,
            instance,
            add,
            definition,
            vars,
            launch,
        } = self;
        let b = caller.business().to_string();
        let mut keys = vec!["instance"];
        keys.extend(definition.as_ref().map(|_| "definition"));
        keys.extend(vars.as_ref().map(|_| "vars"));
        keys.extend(launch.as_ref().map(|_| "launch"));
        let verb = "instances.set";
        let reply = change(core, caller, verb, revision, &keys, |org, business| {
            let map = org.instances.entry(b).or_default();
            if let Some(d) = &definition {
                check_definition(business, d)?;
            }
            let restart = match (add, map.get_mut(&instance)) {
                (true, Some(_)) => return Err(Code::OrganizationInstanceExists),
                (false, None) => return Err(Code::OrganizationUnknownInstance),
                (true, None) => {
                    let def = definition.ok_or(Code::InvalidRequest)?;
                    map.insert(
                        instance.clone(),
                        Instance {
                            definition: def,
                            vars: vars.unwrap_or_default(),
                            launch: launch.unwrap_or(false),
                        },
                    );
                    true
                }
                (false, Some(i)) => {
                    let mut restart = false;
                    if let Some(d) = definition {
                        restart = i.definition != d;
                        i.definition = d;
                    }
                    if let Some(v) = vars {
                        i.vars = v;
                    }
                    if let Some(l) = launch {
                        i.launch = l;
                    }
                    restart
                }
            };
            Ok(restart)
        })?;
        let mut reply = reply;
        reply["instance"] = json!(instance);
        Ok(reply)
    }
}

/// `routes`: `{revision, routes, models}`.
pub struct RoutesRead;

impl Verb for RoutesRead {
    fn parse(args: Args) -> Result<Self, Code> {
        no_args(args).map(|()| RoutesRead)
    }

    fn apply(self, core: &mut Core, _caller: &Caller) -> Result<Value, Code> {
        let org = org_file(core)?.read()?;
        Ok(json!({"revision": org.revision, "routes": org.routes, "models": org.models}))
    }
}

/// `routes.set {revision, routes}`: replaces the routing table; it counts
/// from the next start (`restart: true`).
pub struct RoutesSet {
    revision: u64,
    routes: BTreeMap<String, Route>,
}

impl Verb for RoutesSet {
    fn parse(mut args: Args) -> Result<Self, Code> {
        let revision = take_revision(&mut args)?;
        let routes = args.take("routes").ok_or(Code::InvalidRequest)?;
        args.finish()?;
        if !routes.is_object() {
            return Err(Code::InvalidRequest);
        }
        Ok(RoutesSet {
            revision,
            routes: piece(routes)?,
        })
    }

    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code> {
        let RoutesSet { revision, routes } = self;
        change(
            core,
            caller,
            "routes.set",
            revision,
            &["routes"],
            |org, _| {
                org.routes = routes;
                Ok(true)
            },
        )
    }
}
