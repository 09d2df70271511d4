//! `bindLaunch`, `identity` and `endLaunch`: the runs the trusted host
//! launched, their evidence (`session.launched`, `session.ended`, the
//! release) and their capabilities (kept by [`Core`]).
//!
//! A bind's process check compares the record's start time with the one
//! the runtime read from `/proc` before the op reached the writer
//! ([`BindLaunch::set_start_seen`]): the writer thread itself never reads
//! `/proc`.

use crate::config::LaunchRecord;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::{Fields, HOST_MAX};
use crate::handlers::handler::{host_op, Op, Outside};
use crate::store::evidence::{self, Actor, ClaimRow};
use crate::store::threads;
use serde_json::{json, Value};

/// `bindLaunch {record}`: binds a run the trusted host launched and mints its capability.
pub struct BindLaunch {
    record: LaunchRecord,
    /// The process's start time as `/proc` gave it, read before the writer
    /// (`None`: not read, or unreadable).
    start_seen: Option<u64>,
}

impl BindLaunch {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let record = f.take("record").ok_or(Code::InvalidLaunch)?;
        f.finish()?;
        Ok(BindLaunch {
            record: LaunchRecord::from_json(record)?,
            start_seen: None,
        })
    }

    /// The pid whose start time must be read before the op reaches the writer.
    pub fn pid(&self) -> i32 {
        self.record.pid
    }

    /// The start time read for [`BindLaunch::pid`] off the writer (`None`:
    /// unreadable).
    pub fn set_start_seen(&mut self, start: Option<u64>) {
        self.start_seen = start;
    }

    /// A bind of `record` whose start time was read as `start_seen`.
    pub fn new(record: LaunchRecord, start_seen: Option<u64>) -> BindLaunch {
        BindLaunch { record, start_seen }
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        let BindLaunch { record, start_seen } = self;
        let business = core.config.business(&record.business)?;
        if !business.roles.contains_key(&record.role) {
            return Err(Code::UnknownRole);
        }
        // A thread instance's run serves one thread of that instance
        // (3i row 121); no other run names one.
        crate::policy::threads::launch_thread(business, &record.role, record.thread.as_deref())?;
        if let Some(th) = &record.thread {
            let known = threads::thread(core.store.db(), &record.business, th)?;
            if known.is_none_or(|t| t.instance != record.role) {
                return Err(Code::ThreadNotFound);
            }
        }
        let (launched, ended) =
            evidence::session_of(core.store.db(), &record.business, &record.run)?;
        if ended {
            return Err(Code::RunEnded);
        }
        if let Some(prior) = &launched {
            if *prior != record.identity_json() {
                return Err(Code::LaunchMismatch);
            }
        }
        if let Some((bound, cap)) = core.bound(&record.business, &record.run) {
            if bound.identity_json() != record.identity_json() {
                return Err(Code::LaunchMismatch);
            }
            return Ok(launch_reply(&record, cap));
        }
        // harnessOn (3i row 65): a new run binds only while the
        // organization file switches its harness on now; a run the store
        // already has binds again, so it can be ended. With no organization
        // file there is no harnessOn and every module name binds.
        if launched.is_none() {
            if let Some(org) = &core.organization {
                let on = org.read().is_ok_and(|o| o.harness_on(&record.harness));
                if !on {
                    return Err(Code::InvalidHarness);
                }
            }
        }
        if start_seen != Some(record.start_time) {
            return Err(Code::ProcessMismatch);
        }
        if launched.is_none() {
            let body = record.identity_json();
            let r = &record;
            core.store.write(|t| {
                evidence::insert_event(
                    t,
                    &r.business,
                    "session.launched",
                    Actor::of(&r.role, &r.run),
                    None,
                    &body,
                )
            })?;
        }
        tracing::info!(business = %record.business, role = %record.role, run = %record.run, "launch bound");
        let reply_of = |cap: &str| launch_reply(&record, cap);
        let cap = core.bind_run(record.clone());
        Ok(reply_of(&cap))
    }
}

fn launch_reply(r: &LaunchRecord, cap: &str) -> Value {
    json!({"business": r.business, "run": r.run, "cap": cap})
}

/// `identity {cap}`: the business, role and run a capability names (a
/// reader's: role and run null).
pub struct Identity {
    pub cap: String,
}

impl Identity {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let cap = f.str("cap", HOST_MAX)?;
        f.finish()?;
        Ok(Identity { cap })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        identity(core, &self.cap)
    }
}

/// The `identity` answer for `cap`.
pub fn identity(core: &Core, cap: &str) -> Result<Value, Code> {
    match core.caller(cap) {
        Some(Caller::Role {
            business,
            role,
            run,
        }) => Ok(json!({"business": business, "role": role, "run": run})),
        Some(Caller::Reader { business }) => {
            Ok(json!({"business": business, "role": null, "run": null}))
        }
        _ => Err(Code::UnknownCapability),
    }
}

/// `endLaunch {record: {business, run, reason, exitCode?}}`: ends a bound
/// run, releasing its claim and dropping its capability.
pub struct EndLaunch {
    pub business: String,
    pub run: String,
    pub reason: String,
    pub exit_code: Option<i64>,
}

impl EndLaunch {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let Some(Value::Object(rec)) = f.take("record") else {
            return Err(Code::InvalidRequest);
        };
        f.finish()?;
        let mut rec = Fields::new(rec);
        let business = rec.str("business", HOST_MAX)?;
        let run = rec.str("run", HOST_MAX)?;
        let reason = rec.str("reason", HOST_MAX)?;
        let exit_code = match rec.take("exitCode") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().ok_or(Code::InvalidRequest)?),
        };
        rec.finish()?;
        if !crate::config::is_reason(&reason) {
            return Err(Code::InvalidRequest);
        }
        Ok(EndLaunch {
            business,
            run,
            reason,
            exit_code,
        })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        let EndLaunch {
            business,
            run,
            reason,
            exit_code,
        } = self;
        let (business, run) = (business.as_str(), run.as_str());
        if !core.config.businesses.contains_key(business) {
            return Err(Code::UnknownBusiness);
        }
        let (_, ended) = evidence::session_of(core.store.db(), business, run)?;
        if ended {
            return Err(Code::RunEnded);
        }
        let (role, thread) = match core.bound(business, run) {
            Some((b, _)) => (b.role.clone(), b.thread.clone()),
            None => return Err(Code::UnknownRun),
        };
        let released = core.store.write(|t| {
            // A thread run releases its thread; any other run its role.
            let held = match &thread {
                Some(th) => {
                    let held = threads::holder(t.db(), th)?.as_deref() == Some(run);
                    if held {
                        let row = threads::ClaimRow::own(th, run, "release");
                        threads::insert_claim(t, business, &row)?;
                    }
                    held
                }
                None => {
                    let held = t.holder(business, &role).as_deref() == Some(run);
                    if held {
                        evidence::insert_claim(t, business, &ClaimRow::own(&role, run, "release"))?;
                    }
                    held
                }
            };
            let body = json!({"reason": reason, "exitCode": exit_code, "released": held});
            evidence::insert_event(
                t,
                business,
                "session.ended",
                Actor::of(&role, run),
                None,
                &body,
            )?;
            Ok(held)
        })?;
        core.unbind_run(business, run);
        tracing::info!(%business, %run, %reason, released, "launch ended");
        Ok(json!({"business": business, "run": run, "released": released}))
    }
}

impl Op for BindLaunch {
    const NAME: &'static str = "bindLaunch";
    const REPLY_KEY: &'static str = "launch";

    fn parse(f: Fields) -> Result<Self, Code> {
        BindLaunch::parse(f)
    }

    /// Reads the process's start time off the writer.
    fn observe(&mut self, outside: &Outside<'_>) -> Option<Result<Value, Code>> {
        self.set_start_seen((outside.start_time)(self.pid()));
        None
    }

    fn apply(self, core: &mut Core) -> Result<Value, Code> {
        BindLaunch::apply(self, core)
    }
}

host_op!(Identity, "identity");
host_op!(EndLaunch, "endLaunch");
