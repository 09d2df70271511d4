//! The broker's state on the writer thread: the store, the config, the
//! capabilities it issued and the runs it bound. Only the writer thread
//! touches a `Core`; everything else reaches it through [`crate::writer`].

use crate::config::{BootConfig, LaunchRecord};
use crate::error::Code;
use crate::ids;
use crate::store::evidence::Actor;
use crate::store::Store;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The reserved human recipient (`policy::routing`'s) and the human
/// CLI's run: the actor of what a human session records.
pub use crate::policy::routing::HUMAN;
pub const HUMAN_RUN: &str = "human-cli";
/// The human's CLI as the actor of what it records.
pub const HUMAN_ACTOR: Actor<'static> = Actor::of(HUMAN, HUMAN_RUN);
/// The tester address and the tester shim's run.
pub const TESTER: &str = "tester";
pub const TESTER_RUN: &str = "tester-cli";

/// An open landing: who lands what, with which decision, as `checkLand`
/// found it.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub id: String,
    pub business: String,
    pub role: String,
    pub run: String,
    /// The thread the landing run serves (`None` for a role run).
    pub thread: Option<String>,
    pub task_ref: String,
    pub decision: String,
    pub project: String,
    /// The work ref the task was pushed to.
    pub git_ref: String,
    /// The reviewed commit: the task's latest push and the approved verdict's.
    pub commit: String,
    /// The approving `review.verdict` event.
    pub verdict: String,
    /// The approval option the decision was resolved with.
    pub option: String,
    /// `cli` or `broker` (see [`crate::policy::landing::via`]).
    pub via: &'static str,
}

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
    /// The role and run a session's evidence is recorded under; none for a
    /// reader, which never writes.
    pub fn actor(&self) -> Option<(&str, &str)> {
        match self {
            Caller::Role { role, run, .. } => Some((role, run)),
            Caller::Human { .. } => Some((HUMAN, HUMAN_RUN)),
            Caller::Tester { .. } => Some((TESTER, TESTER_RUN)),
            Caller::Reader { .. } => None,
        }
    }

    /// The role session behind a mutation, or the code for who may not
    /// mutate.
    pub fn role_session(&self) -> Result<(&str, &str, &str), Code> {
        match self {
            Caller::Role {
                business,
                role,
                run,
            } => Ok((business, role, run)),
            Caller::Reader { .. } => Err(Code::ReadOnly),
            Caller::Human { .. } => Err(Code::AgentRequired),
            Caller::Tester { .. } => Err(Code::TesterRefused),
        }
    }

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
    /// A landing ticket was issued: forget it.
    TicketIssued(String),
    /// A landing ticket was ended: keep it open again.
    TicketEnded(Box<Ticket>),
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
    /// Service credentials loaded at start (tokens in memory only), shared
    /// with the runtime's trusted adapters (`runtime::Runtime::credentials`).
    pub credentials: std::sync::Arc<crate::credentials::Credentials>,
    /// The requirements file, when one is configured.
    pub requirements: Option<Value>,
    /// The organization file and the harness levels read at start, when
    /// the boot names one (else every harness name binds: no `harnessOn`).
    pub organization: Option<crate::orgfile::OrgFile>,
    /// Called with the (pid, start time) of every bound run after each change.
    pub on_launches: Option<LaunchSink>,
    /// Open landings, by ticket id, from `checkLand` until `recordLand` or
    /// `landRefused` ends them. Memory only: a restart forgets them all.
    tickets: HashMap<String, Ticket>,
    /// What the open batch changed in memory (see [`Core::commit_batch`]).
    batch_undo: Vec<Undo>,
    /// A read-only connection to the seals file, for the `seal` verb
    /// (`None` in a core made without a runtime).
    pub seals: Option<crate::store::seals::SealsReader>,
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
            organization: None,
            credentials: Default::default(),
            on_launches: None,
            tickets: HashMap::new(),
            batch_undo: Vec::new(),
            seals: None,
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
                    Undo::TicketIssued(id) => {
                        self.tickets.remove(&id);
                    }
                    Undo::TicketEnded(ticket) => {
                        self.tickets.insert(ticket.id.clone(), *ticket);
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

    /// The bound run `run` of `business`: its record and capability.
    pub fn bound(&self, business: &str, run: &str) -> Option<(&LaunchRecord, &str)> {
        self.runs
            .get(&(business.to_string(), run.to_string()))
            .map(|b| (&b.record, b.cap.as_str()))
    }

    /// The thread a bound run serves (a thread instance's run), if any.
    pub fn run_thread(&self, business: &str, run: &str) -> Option<String> {
        self.bound(business, run)
            .and_then(|(r, _)| r.thread.clone())
    }

    /// Binds a run (its evidence already written): mints its capability,
    /// keeps the change for the batch's undo and tells the proof side.
    pub fn bind_run(&mut self, record: LaunchRecord) -> String {
        let cap = ids::capability();
        self.caps.insert(
            cap.clone(),
            Caller::Role {
                business: record.business.clone(),
                role: record.role.clone(),
                run: record.run.clone(),
            },
        );
        let key = (record.business.clone(), record.run.clone());
        self.runs.insert(
            key.clone(),
            Bound {
                record,
                cap: cap.clone(),
            },
        );
        self.remember(Undo::Bound(key));
        self.launches_changed();
        cap
    }

    /// Opens a landing (`checkLand`); its batch's failed COMMIT forgets it.
    pub fn issue_ticket(&mut self, ticket: Ticket) {
        let id = ticket.id.clone();
        self.tickets.insert(id.clone(), ticket);
        self.remember(Undo::TicketIssued(id));
    }

    /// The open landing `id`, if any.
    pub fn ticket(&self, id: &str) -> Option<&Ticket> {
        self.tickets.get(id)
    }

    /// Ends the landing `id` (`recordLand`, `landRefused`); its batch's
    /// failed COMMIT opens it again, as its evidence is then not stored.
    pub fn end_ticket(&mut self, id: &str) {
        if let Some(t) = self.tickets.remove(id) {
            self.remember(Undo::TicketEnded(Box::new(t)));
        }
    }

    /// Ends a bound run (its evidence already written): drops every
    /// capability naming it, keeps the change for the batch's undo and
    /// tells the proof side.
    pub fn unbind_run(&mut self, business: &str, run: &str) {
        let of_run = |c: &Caller| matches!(c, Caller::Role { business: b, run: r, .. } if b == business && r == run);
        let caps: Vec<(String, Caller)> = self.caps.extract_if(|_, c| of_run(c)).collect();
        let key = (business.to_string(), run.to_string());
        if let Some(bound) = self.runs.remove(&key) {
            self.remember(Undo::Ended {
                key,
                bound: Box::new(bound),
                caps,
            });
        }
        self.launches_changed();
    }
}
