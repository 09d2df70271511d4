//! The broker's state on the writer thread: the store, the config, the
//! capabilities it issued and the runs it bound. Only the writer thread
//! touches a `Core`; everything else reaches it through [`crate::writer`].

use crate::config::{BootConfig, LaunchRecord};
use crate::error::Code;
use crate::ids;
use crate::store::evidence::{self, Actor, ClaimRow};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Who a request speaks for, resolved from its capability or proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A managed run holding (or entitled to claim) one role instance.
    Role {
        business: String,
        role: String,
        run: String,
    },
    /// A read-only capability for one business.
    Reader { business: String },
    /// The business's human, proven through the human shim.
    Human { business: String },
    /// A PM test's sender, proven through the tester shim.
    Tester { business: String },
}

impl Caller {
    pub fn business(&self) -> &str {
        match self {
            Caller::Role { business, .. }
            | Caller::Reader { business }
            | Caller::Human { business }
            | Caller::Tester { business } => business,
        }
    }
}

/// A run this broker bound: its record and its capability.
#[derive(Debug, Clone)]
struct Bound {
    record: LaunchRecord,
    cap: String,
}

/// A change to the bound runs made inside the open batch, undone if the
/// batch's COMMIT fails (its evidence is then not in the store).
enum Undo {
    /// A run was bound: forget it and its capability.
    Bound((String, String)),
    /// A run was ended: bind it again, with the capabilities it had.
    Ended {
        key: (String, String),
        bound: Box<Bound>,
        caps: Vec<(String, Caller)>,
    },
}

/// Receives the launch registry after every change.
pub type LaunchSink = Box<dyn FnMut(Vec<(i32, u64)>) + Send>;

pub struct Core {
    pub store: Store,
    pub config: Arc<BootConfig>,
    caps: HashMap<String, Caller>,
    runs: HashMap<(String, String), Bound>,
    /// Reader capabilities issued at boot, `(business, cap)`.
    pub readers: Vec<(String, String)>,
    /// Service credentials loaded at start (tokens in memory only).
    pub credentials: crate::credentials::Credentials,
    /// The requirements file, when one is configured.
    pub requirements: Option<Value>,
    /// Called with the (pid, start time) of every bound run after each change.
    pub on_launches: Option<LaunchSink>,
    /// What the open batch changed in memory (see [`Core::commit_batch`]).
    batch_undo: Vec<Undo>,
}

impl Core {
    pub fn new(store: Store, config: Arc<BootConfig>) -> Core {
        let mut core = Core {
            store,
            config,
            caps: HashMap::new(),
            runs: HashMap::new(),
            readers: Vec::new(),
            requirements: None,
            credentials: Default::default(),
            on_launches: None,
            batch_undo: Vec::new(),
        };
        let readers = core.config.readers.clone();
        for business in readers {
            let cap = ids::capability();
            core.caps.insert(
                cap.clone(),
                Caller::Reader {
                    business: business.clone(),
                },
            );
            core.readers.push((business, cap));
        }
        core
    }

    /// Replaces the loaded credential tokens the known-token check refuses
    /// (issue 6 loads them at boot; tests set them directly).
    pub fn set_known_tokens(&mut self, tokens: crate::tokens::KnownTokens) {
        self.store.tokens = tokens;
    }

    /// The loaded credential tokens.
    pub fn known_tokens(&self) -> &crate::tokens::KnownTokens {
        &self.store.tokens
    }

    /// The caller a capability names, if it is live.
    pub fn caller(&self, cap: &str) -> Option<Caller> {
        self.caps.get(cap).cloned()
    }

    /// Every bound run's process identity (the proof helper's launch registry).
    pub fn launch_identities(&self) -> Vec<(i32, u64)> {
        self.runs
            .values()
            .map(|b| (b.record.pid, b.record.start_time))
            .collect()
    }

    /// Opens the writer's batch transaction (see [`Store::begin_batch`]).
    pub fn begin_batch(&mut self) -> Result<(), Code> {
        self.batch_undo.clear();
        self.store.begin_batch()
    }

    /// Commits the batch. If the COMMIT fails, the runs the batch bound or
    /// ended in memory go back to how they were, as its evidence did.
    pub fn commit_batch(&mut self) -> Result<(), Code> {
        let r = self.store.commit_batch();
        let undo = std::mem::take(&mut self.batch_undo);
        if r.is_err() && !undo.is_empty() {
            for u in undo.into_iter().rev() {
                match u {
                    Undo::Bound(key) => {
                        if let Some(b) = self.runs.remove(&key) {
                            self.caps.remove(&b.cap);
                        }
                    }
                    Undo::Ended { key, bound, caps } => {
                        self.runs.insert(key, *bound);
                        self.caps.extend(caps);
                    }
                }
            }
            self.launches_changed();
        }
        r
    }

    /// Keeps `u` for [`Core::commit_batch`] while a batch is open.
    fn remember(&mut self, u: Undo) {
        if self.store.in_batch() {
            self.batch_undo.push(u);
        }
    }

    fn launches_changed(&mut self) {
        let ids = self.launch_identities();
        if let Some(f) = self.on_launches.as_mut() {
            f(ids);
        }
    }

    /// `bindLaunch`: binds a run the trusted host launched and mints its capability.
    pub fn bind_launch(&mut self, record: LaunchRecord) -> Result<Value, Code> {
        let business = self
            .config
            .businesses
            .get(&record.business)
            .ok_or(Code::UnknownBusiness)?;
        if !business.roles.contains_key(&record.role) {
            return Err(Code::UnknownRole);
        }
        let (launched, ended) =
            evidence::session_of(self.store.conn(), &record.business, &record.run)?;
        if ended {
            return Err(Code::RunEnded);
        }
        if let Some(prior) = &launched {
            if *prior != record.identity_json() {
                return Err(Code::LaunchMismatch);
            }
        }
        let key = (record.business.clone(), record.run.clone());
        if let Some(b) = self.runs.get(&key) {
            if b.record.identity_json() != record.identity_json() {
                return Err(Code::LaunchMismatch);
            }
            return Ok(launch_reply(&record, &b.cap));
        }
        match mosaic_proofd::procfs::read_stat(record.pid) {
            Ok(stat) if stat.start_time == record.start_time => {}
            _ => return Err(Code::ProcessMismatch),
        }
        if launched.is_none() {
            let body = record.identity_json();
            let r = &record;
            self.store.write(|t| {
                evidence::insert_event(
                    t,
                    &r.business,
                    "session.launched",
                    Actor {
                        role: Some(&r.role),
                        run: Some(&r.run),
                    },
                    None,
                    &body,
                )
            })?;
        }
        let cap = ids::capability();
        self.caps.insert(
            cap.clone(),
            Caller::Role {
                business: record.business.clone(),
                role: record.role.clone(),
                run: record.run.clone(),
            },
        );
        let reply = launch_reply(&record, &cap);
        tracing::info!(business = %record.business, role = %record.role, run = %record.run, "launch bound");
        self.runs.insert(key.clone(), Bound { record, cap });
        self.remember(Undo::Bound(key));
        self.launches_changed();
        Ok(reply)
    }

    /// `identity`: the business, role and run a capability names.
    pub fn identity(&self, cap: &str) -> Result<Value, Code> {
        match self.caps.get(cap) {
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

    /// `endLaunch`: ends a bound run, releasing its claim and dropping its capability.
    pub fn end_launch(
        &mut self,
        business: &str,
        run: &str,
        reason: &str,
        exit_code: Option<i64>,
    ) -> Result<Value, Code> {
        if !self.config.businesses.contains_key(business) {
            return Err(Code::UnknownBusiness);
        }
        let (_, ended) = evidence::session_of(self.store.conn(), business, run)?;
        if ended {
            return Err(Code::RunEnded);
        }
        let key = (business.to_string(), run.to_string());
        let role = match self.runs.get(&key) {
            Some(b) => b.record.role.clone(),
            None => return Err(Code::UnknownRun),
        };
        let released = self.store.write(|t| {
            let held = evidence::holder(&t.tx, business, &role)?.as_deref() == Some(run);
            if held {
                evidence::insert_claim(t, business, &ClaimRow::own(&role, run, "release"))?;
            }
            let body = json!({"reason": reason, "exitCode": exit_code, "released": held});
            evidence::insert_event(
                t,
                business,
                "session.ended",
                Actor {
                    role: Some(&role),
                    run: Some(run),
                },
                None,
                &body,
            )?;
            Ok(held)
        })?;
        let of_run = |c: &Caller| matches!(c, Caller::Role { business: b, run: r, .. } if b == business && r == run);
        let caps: Vec<(String, Caller)> = self.caps.extract_if(|_, c| of_run(c)).collect();
        if let Some(bound) = self.runs.remove(&key) {
            self.remember(Undo::Ended {
                key,
                bound: Box::new(bound),
                caps,
            });
        }
        self.launches_changed();
        tracing::info!(%business, %run, %reason, released, "launch ended");
        Ok(json!({"business": business, "run": run, "released": released}))
    }
}

fn launch_reply(r: &LaunchRecord, cap: &str) -> Value {
    json!({"business": r.business, "run": r.run, "cap": cap})
}
