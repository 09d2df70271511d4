//! The organization verbs: `organization.set` (a role whose file lists
//! `organization.change`, the chief of staff), and the human's `limits`,
//! `limits.set`, `instances`, `instances.set`, `routes`, `routes.set`.
//! Each reads and writes its caller's business's part of the file only
//! (`config::organization::Part`).
//!
//! Every write goes through [`prepare_change`]: read the file as it is
//! now, refuse a stale `revision` of the caller's part before anything is
//! written, apply the change to a copy of the part, run the shape and route
//! checks, then write the receipt (`organization.changed`, with the actor)
//! in the store and hand back a [`FileStep`]: the file's replacement
//! (`crate::orgfile::write`), which the server runs off the writer
//! thread once the receipt's COMMIT is durable, one organization write at a
//! time (the file step of one write ends before the next reads the file). A
//! refusal before the receipt leaves the file and the store as they were; a
//! failed COMMIT leaves the file as it was; a file step that fails after the
//! receipt answers `outcome-unknown`. The four writes are
//! [`StagedVerb`]s: the table runs them one at a time (`Serial::Alone`).

use crate::config::organization::{
    piece, Assistant, Instance, Limits, Model, Organization, Part, Route, Vars, MAX_REVISION,
};
use crate::config::Business;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::{ReadVerb, StagedVerb};
use crate::handlers::staged::{Slow, Staged};
use crate::orgfile::OrgFile;
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
fn take_revision(args: &mut Fields) -> Result<u64, Code> {
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
            role: crate::core::HUMAN,
            run: crate::core::HUMAN_RUN,
            actor: crate::core::HUMAN.to_string(),
            holder: false,
        }),
        Caller::Reader { .. } => Err(Code::ReadOnly),
        Caller::Tester { .. } => Err(Code::TesterRefused),
    }
}

/// An organization write whose receipt is written: the file's replacement.
pub struct FileStep {
    path: std::path::PathBuf,
    next: Organization,
    reply: Value,
    business: String,
    verb: &'static str,
    revision: u64,
}

impl FileStep {
    /// Replaces the file (off the writer thread, after the receipt's
    /// COMMIT). A failure leaves a receipt whose change the file may not
    /// hold: `outcome-unknown`.
    pub fn run(self) -> Result<Value, Code> {
        let FileStep {
            path,
            next,
            reply,
            business,
            verb,
            revision,
        } = self;
        match crate::orgfile::write(&path, &next) {
            Ok(()) => {
                tracing::info!(%business, verb, revision, "organization changed");
                Ok(reply)
            }
            Err(code) => {
                tracing::warn!(%business, verb, revision, code = code.as_str(),
                    "organization change recorded, the file not replaced");
                Err(Code::OutcomeUnknown)
            }
        }
    }
}

/// A prepared organization write: its receipt is committed, its file
/// step is left.
pub struct Write(Option<FileStep>);

impl Staged for Write {
    type Found = Value;
    const LOST: Code = Code::OutcomeUnknown;

    fn slow(&mut self) -> Option<Slow<Value>> {
        let job = self.0.take()?;
        Some(Slow {
            run: Box::new(move |_| job.run()),
            fence: None,
        })
    }

    /// The receipt was committed in the prepare: a failure from here on
    /// is `outcome-unknown`.
    fn committed(&self, _found: Option<Result<&Value, Code>>) -> bool {
        true
    }

    fn finish(
        self,
        _core: &mut Core,
        _caller: &Caller,
        found: Option<Result<Value, Code>>,
    ) -> Result<Value, Code> {
        found.unwrap_or(Err(Self::LOST))
    }
}

/// The one organization writer's writer-side part: the caller's part of
/// the file as it is now, the revision check, the change (`edit` changes a
/// copy of the part and says whether it waits for a restart), the checks,
/// then the receipt. Returns the file step.
fn prepare_change(
    core: &mut Core,
    caller: &Caller,
    verb: &'static str,
    revision: u64,
    keys: &[&str],
    edit: impl FnOnce(&mut Part, &Business) -> Result<bool, Code>,
) -> Result<FileStep, Code> {
    let w = writer(core, caller)?;
    let file = org_file(core)?;
    let current = file.read()?;
    let business = caller.business().to_string();
    let mut part = current.part(&business);
    if part.revision != revision {
        return Err(Code::OrganizationStale);
    }
    let restart = edit(&mut part, core.config.business(&business)?)?;
    part.revision = revision + 1;
    part.check_shape()?;
    part.check_routes(&current, &file.levels)?;
    let next_revision = part.revision;
    let served = core.config.businesses.keys().map(String::as_str);
    let next = current.with_part(&business, part, served);
    next.check_shape()?;
    let reply = json!({"revision": next_revision, "restart": restart, "actor": w.actor});
    core.known_tokens().check(&reply)?;
    let body = json!({"operation": verb, "revision": next_revision, "keys": keys,
                      "actor": w.actor, "restart": restart});
    core.store.write(|t| {
        if w.holder && !t.holds(&business, w.role, w.run)? {
            return Err(Code::NotHolder);
        }
        evidence::insert_event(
            t,
            &business,
            "organization.changed",
            Actor::of(w.role, w.run),
            None,
            &body,
        )
    })?;
    Ok(FileStep {
        path: file.path,
        next,
        reply,
        business,
        verb,
        revision: next_revision,
    })
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
    fn parse(mut args: Fields) -> Result<Self, Code> {
        let revision = take_revision(&mut args)?;
        let mut keys = Vec::new();
        let mut take = |args: &mut Fields, key: &'static str| {
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

    fn file_step(
        self,
        core: &mut Core,
        caller: &Caller,
        verb: &'static str,
    ) -> Result<FileStep, Code> {
        let SetArgs {
            revision,
            limits,
            models,
            instances,
            assistants,
            keys,
        } = self;
        prepare_change(core, caller, verb, revision, &keys, |part, business| {
            let mut restart = false;
            if let Some(l) = limits {
                part.limits = l;
            }
            if let Some(m) = models {
                restart |= part.models != m;
                part.models = m;
            }
            if let Some(i) = instances {
                for inst in i.values() {
                    check_definition(business, &inst.definition)?;
                }
                restart |= part.instances != i;
                part.instances = i;
            }
            if let Some(a) = assistants {
                restart |= part.assistants != a;
                part.assistants = a;
            }
            Ok(restart)
        })
    }
}

/// `organization.set {revision, limits?, models?, instances?, assistants?}`.
pub struct OrganizationSet(SetArgs);

impl StagedVerb for OrganizationSet {
    type Staged = Write;

    fn parse(args: Fields) -> Result<Self, Code> {
        SetArgs::parse(args).map(OrganizationSet)
    }

    fn stage(self, core: &mut Core, caller: &Caller) -> Result<Write, Code> {
        self.0
            .file_step(core, caller, "organization.set")
            .map(|j| Write(Some(j)))
    }
}

/// `limits.set`: the keys `organization.set` takes, for the human.
pub struct LimitsSet(SetArgs);

impl StagedVerb for LimitsSet {
    type Staged = Write;

    fn parse(args: Fields) -> Result<Self, Code> {
        SetArgs::parse(args).map(LimitsSet)
    }

    fn stage(self, core: &mut Core, caller: &Caller) -> Result<Write, Code> {
        self.0
            .file_step(core, caller, "limits.set")
            .map(|j| Write(Some(j)))
    }
}

/// A read verb that takes no args.
fn no_args(args: Fields) -> Result<(), Code> {
    args.finish()
}

/// `limits`: `{revision, limits, models, assistants}` (the business's assistants).
pub struct LimitsRead;

impl ReadVerb for LimitsRead {
    fn parse(args: Fields) -> Result<Self, Code> {
        no_args(args).map(|()| LimitsRead)
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let part = org_file(core)?.read()?.part(caller.business());
        Ok(
            json!({"revision": part.revision, "limits": part.limits, "models": part.models,
                  "assistants": part.assistants}),
        )
    }
}

/// `instances`: the business's instances as the file holds them (what the
/// next start loads), the instances the running broker loaded, and the
/// definitions `instances.set` accepts.
pub struct InstancesRead;

impl ReadVerb for InstancesRead {
    fn parse(args: Fields) -> Result<Self, Code> {
        no_args(args).map(|()| InstancesRead)
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let part = org_file(core)?.read()?.part(caller.business());
        let b = core.config.business(caller.business())?;
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
            json!({"revision": part.revision, "instances": part.instances, "loaded": loaded,
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

impl StagedVerb for InstancesSet {
    type Staged = Write;

    fn parse(mut args: Fields) -> Result<Self, Code> {
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

    fn stage(self, core: &mut Core, caller: &Caller) -> Result<Write, Code> {
        self.file_step(core, caller).map(|j| Write(Some(j)))
    }
}

impl InstancesSet {
    fn file_step(self, core: &mut Core, caller: &Caller) -> Result<FileStep, Code> {
        let InstancesSet {
            revision,
            instance,
            add,
            definition,
            vars,
            launch,
        } = self;
        let mut keys = vec!["instance"];
        keys.extend(definition.as_ref().map(|_| "definition"));
        keys.extend(vars.as_ref().map(|_| "vars"));
        keys.extend(launch.as_ref().map(|_| "launch"));
        let verb = "instances.set";
        let name = instance.clone();
        let mut job = prepare_change(core, caller, verb, revision, &keys, |part, business| {
            let map = &mut part.instances;
            if let Some(d) = &definition {
                check_definition(business, d)?;
            }
            let restart = match (add, map.get_mut(&instance)) {
                (true, Some(_)) => return Err(Code::OrganizationInstanceExists),
                (false, None) => return Err(Code::OrganizationUnknownInstance),
                (true, None) => {
                    let def = definition.ok_or(Code::InvalidRequest)?;
                    map.insert(
                        instance,
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
        // The instance key came with the request (its known-token check
        // ran with the args').
        job.reply["instance"] = json!(name);
        Ok(job)
    }
}

/// `routes`: `{revision, routes, models}`.
pub struct RoutesRead;

impl ReadVerb for RoutesRead {
    fn parse(args: Fields) -> Result<Self, Code> {
        no_args(args).map(|()| RoutesRead)
    }

    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code> {
        let part = org_file(core)?.read()?.part(caller.business());
        Ok(json!({"revision": part.revision, "routes": part.routes, "models": part.models}))
    }
}

/// `routes.set {revision, routes}`: replaces the routing table; it counts
/// from the next start (`restart: true`).
pub struct RoutesSet {
    revision: u64,
    routes: BTreeMap<String, Route>,
}

impl StagedVerb for RoutesSet {
    type Staged = Write;

    fn parse(mut args: Fields) -> Result<Self, Code> {
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

    fn stage(self, core: &mut Core, caller: &Caller) -> Result<Write, Code> {
        self.file_step(core, caller).map(|j| Write(Some(j)))
    }
}

impl RoutesSet {
    fn file_step(self, core: &mut Core, caller: &Caller) -> Result<FileStep, Code> {
        let RoutesSet { revision, routes } = self;
        prepare_change(
            core,
            caller,
            "routes.set",
            revision,
            &["routes"],
            |part, _| {
                part.routes = routes;
                Ok(true)
            },
        )
    }
}
