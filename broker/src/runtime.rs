//! The embedded runtime: `start_broker(config)` does everything a boot does
//! and returns a handle that runs any host op ([`Runtime::op`], or
//! [`Runtime::run`] for a typed one) and closes. The forked and systemd
//! modes drive this same handle from their host channel (`host::ops` only
//! parses and calls). The named methods below are the embedded API's
//! shorthands for the ops in-process hosts call most; each only builds the
//! typed op.

use crate::config::{BootConfig, LaunchRecord};
use crate::core::Core;
use crate::error::Code;
use crate::handlers::ops::{authority, credentials, landing, launches, pushes, records};
use crate::handlers::{HostOp, Op, Outside};
use crate::proof::{ProofGate, Verifier};
use crate::server::{self, Ctx};
use crate::store::root::BusDir;
use crate::store::Store;
use crate::writer::Writer;
use serde_json::{json, Map, Value};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A running broker.
pub struct Runtime {
    writer: Writer,
    writer_thread: Option<std::thread::JoinHandle<Core>>,
    rt: Option<tokio::runtime::Runtime>,
    shutdown: watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
    ctx: Arc<Ctx>,
    bus: BusDir,
    boot_reply: Value,
    credentials: crate::credentials::Adapters,
    sealer: Option<crate::sealer::Sealer>,
}

/// Starts a broker: data root, lock, store, launches, readers, socket.
/// A refusal leaves no lock behind (nothing was served) and leaves what it
/// found at `bus.sock` alone.
pub fn start_broker(config: BootConfig) -> Result<Runtime, Code> {
    start_with(config, crate::proof::spawn_default())
}

/// [`start_broker`] with a proof helper for human and tester sessions.
pub fn start_with(
    config: BootConfig,
    verifier: Option<Box<dyn Verifier>>,
) -> Result<Runtime, Code> {
    let bus = BusDir::acquire(&config.data_root)?;
    match start_locked(config, verifier, &bus) {
        Ok((writer, thread, rt, shutdown, server, ctx, reply, credentials, sealer)) => {
            Ok(Runtime {
                writer,
                writer_thread: Some(thread),
                rt: Some(rt),
                shutdown,
                server: Some(server),
                ctx,
                bus,
                boot_reply: reply,
                credentials,
                sealer: Some(sealer),
            })
        }
        Err(code) => {
            bus.release_lock();
            Err(code)
        }
    }
}

type Started = (
    Writer,
    std::thread::JoinHandle<Core>,
    tokio::runtime::Runtime,
    watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
    Arc<Ctx>,
    Value,
    crate::credentials::Adapters,
    crate::sealer::Sealer,
);

fn start_locked(
    config: BootConfig,
    verifier: Option<Box<dyn Verifier>>,
    bus: &BusDir,
) -> Result<Started, Code> {
    let requirements = match &config.requirements {
        Some(p) => Some(crate::config::load_requirements(p)?),
        None => None,
    };
    let organization = match &config.organization {
        Some(p) => Some(crate::orgfile::OrgFile::load(p)?.0),
        None => None,
    };
    let credentials = Arc::new(crate::credentials::Credentials::load(&config)?);
    let adapters = crate::credentials::Adapters::new(credentials.clone());
    let store = Store::open(&bus.db_path())?;
    // The seals file is checked (or made) before anything is written; the
    // sealer starts once nothing can refuse the start any more.
    let seals_file = crate::sealer::SealsFile::open(&bus.seals_path(), &store.id()?)?;
    let config = Arc::new(config);
    let gate = Arc::new(ProofGate::new(config.clone(), verifier));
    let mut core = Core::new(store, config.clone());
    core.requirements = requirements;
    core.organization = organization;
    core.set_known_tokens(crate::tokens::KnownTokens::new(
        credentials.tokens().map(str::to_string).collect(),
    ));
    core.credentials = credentials;
    let mut bound = Vec::new();
    for record in config.launches.clone() {
        let seen = start_time_of(record.pid);
        bound.push(launches::BindLaunch::new(record, seen).apply(&mut core)?);
    }
    gate.set_launches(&core.launch_identities());
    core.on_launches = Some(gate.launch_sink());
    let readers: Vec<Value> = core
        .readers
        .iter()
        .map(|(b, c)| json!({"business": b, "cap": c}))
        .collect();

    // One I/O worker: the socket side is light (frame, parse, reply) and the
    // writer thread is the one that must not wait for a core. A second
    // worker only woke up to steal tasks and competed with the writer
    // (32-client sends: about 18k/s with two workers, 20k/s with one, same
    // single-client latency). Nothing blocking runs on it: proofs go
    // through `spawn_blocking`, host ops through their own threads.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bus-io")
        .enable_all()
        .build()
        .map_err(|_| Code::StorageUnavailable)?;
    let path = bus.socket_path();
    clear_stale_socket(&path)?;
    let listener = {
        let _guard = rt.enter();
        tokio::net::UnixListener::bind(&path).map_err(|_| Code::UnsafePath)?
    };
    if std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).is_err() {
        let _ = std::fs::remove_file(&path);
        return Err(Code::UnsafePath);
    }
    // Seals what the last run left unsealed, then every `sealSeconds`.
    let sealer = seals_file.start(&bus.db_path(), Duration::from_secs(config.seal_seconds))?;
    core.seals = Some(crate::store::seals::SealsReader::open(&bus.seals_path())?);
    let (writer, thread) = Writer::spawn(core);
    let ctx = Arc::new(Ctx {
        writer: writer.clone(),
        proof: gate,
        active: AtomicUsize::new(0),
        idle: tokio::sync::Notify::new(),
        admission: Arc::new(server::admission::Admission::from_limit()),
        readings: Arc::default(),
    });
    tracing::debug!(
        cap = ctx.admission.cap(),
        "client socket: idle connections past the cap are shed, oldest first"
    );
    let (shutdown, rx) = watch::channel(false);
    let server = rt.spawn(server::serve(listener, ctx.clone(), rx));
    let reply = json!({
        "ok": true,
        "path": path.to_string_lossy(),
        "launches": bound,
        "readers": readers,
    });
    tracing::info!("broker serving");
    Ok((
        writer, thread, rt, shutdown, server, ctx, reply, adapters, sealer,
    ))
}

/// A process's start time as `/proc` gives it now (`None`: unreadable),
/// read here, before a `bindLaunch` reaches the writer.
fn start_time_of(pid: i32) -> Option<u64> {
    mosaic_proofd::procfs::read_stat(pid)
        .ok()
        .map(|s| s.start_time)
}

/// A socket left by a crashed broker (ours, private) may be replaced once we
/// hold the lock; anything else at that path refuses, a socket open to group
/// or others included ("symlinks or looser modes refuse the start").
fn clear_stale_socket(path: &PathBuf) -> Result<(), Code> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) => Err(Code::UnsafePath),
        Ok(md) => {
            let me = nix::unistd::geteuid().as_raw();
            if md.file_type().is_socket() && md.uid() == me && md.mode() & 0o077 == 0 {
                std::fs::remove_file(path).map_err(|_| Code::UnsafePath)
            } else {
                Err(Code::UnsafePath)
            }
        }
    }
}

impl Runtime {
    /// The boot reply: `{ok, path, launches, readers}`.
    pub fn boot_reply(&self) -> &Value {
        &self.boot_reply
    }

    /// The client socket path.
    pub fn socket_path(&self) -> PathBuf {
        self.bus.socket_path()
    }

    /// The writer handle (for host ops).
    pub fn writer(&self) -> &Writer {
        &self.writer
    }

    /// Runs one host op: what it must read off the writer first (a bind's
    /// `/proc` start time; the seals op's whole answer, from the seals
    /// file), then the op itself on the writer thread.
    pub fn op(&self, mut op: HostOp) -> Result<Value, Code> {
        let seals = self.bus.seals_path();
        let outside = Outside {
            start_time: &start_time_of,
            seals: &seals,
        };
        if let Some(answer) = op.observe(&outside) {
            return answer;
        }
        self.writer.run_blocking(move |c| op.apply(c))?
    }

    /// Runs a typed host op (see [`Runtime::op`]).
    pub fn run<O: Op>(&self, op: O) -> Result<Value, Code> {
        self.op(HostOp::new(op))
    }

    /// `bindLaunch`.
    pub fn bind_launch(&self, record: LaunchRecord) -> Result<Value, Code> {
        self.run(launches::BindLaunch::new(record, None))
    }

    /// `identity`.
    pub fn identity(&self, cap: &str) -> Result<Value, Code> {
        self.run(launches::Identity {
            cap: cap.to_string(),
        })
    }

    /// `endLaunch`.
    pub fn end_launch(
        &self,
        business: &str,
        run: &str,
        reason: &str,
        exit_code: Option<i64>,
    ) -> Result<Value, Code> {
        self.run(launches::EndLaunch {
            business: business.to_string(),
            run: run.to_string(),
            reason: reason.to_string(),
            exit_code,
        })
    }

    /// The trusted `authorize(cap, action, {target, decision, verdict})`:
    /// `{allowed: true, event}` or a refusal code. A decision is checked and
    /// consumed in the same transaction as the `action.allowed` event.
    pub fn authorize(
        &self,
        cap: &str,
        action: &str,
        target: Option<&str>,
        decision: Option<&str>,
        verdict: Option<&str>,
    ) -> Result<Value, Code> {
        self.run(authority::Authorize {
            cap: cap.to_string(),
            action: action.to_string(),
            target: target.map(str::to_string),
            decision: decision.map(str::to_string),
            verdict: verdict.map(str::to_string),
        })
    }

    /// `seals(after)`: the seals after `after` (all from the first when
    /// `None`), oldest first, at most [`crate::handlers::ops::seals::PAGE`] of them.
    pub fn seals(&self, after: Option<i64>) -> Result<Value, Code> {
        self.run(crate::handlers::ops::seals::Seals { after })
    }

    /// `threadsState(business)`: the launcher's view of every thread.
    pub fn threads_state(&self, business: &str) -> Result<Value, Code> {
        self.run(crate::handlers::ops::threads::ThreadsState {
            business: business.to_string(),
        })
    }

    /// `threadIdle({business, thread, run})`: the launcher's idle stop.
    pub fn thread_idle(&self, business: &str, thread: &str, run: &str) -> Result<Value, Code> {
        self.run(crate::handlers::ops::threads::ThreadIdle {
            business: business.to_string(),
            thread: thread.to_string(),
            run: run.to_string(),
        })
    }

    /// `authorizeLaunch`: `authorize(cap, 'role.launch', {target: instance})`,
    /// a refusal also recorded as `action.refused`.
    pub fn authorize_launch(&self, cap: &str, instance: &str) -> Result<Value, Code> {
        self.run(authority::AuthorizeLaunch {
            cap: cap.to_string(),
            instance: instance.to_string(),
        })
    }

    /// `refuse`: records a refusal the host decided itself as `action.refused`.
    pub fn refuse(&self, cap: &str, code: &str, subject: Option<&str>) -> Result<Value, Code> {
        self.run(authority::Refuse {
            cap: cap.to_string(),
            code: code.to_string(),
            subject: subject.map(str::to_string),
        })
    }

    /// The loaded credentials for the host's trusted in-process adapters
    /// (the spec's `runtime.credentials`): `credentials().use_token(
    /// "business/instance", "gitea", |token| ...)` hands the token to that
    /// callback alone (see [`crate::credentials::Adapters::use_token`]).
    /// There is no host op for it: a token never leaves the process, and a
    /// forked host's adapters hold their own references.
    pub fn credentials(&self) -> &crate::credentials::Adapters {
        &self.credentials
    }

    /// `credentialStatus`: the role's `{service, date, state}` rows (never a
    /// token). `role` may be `@sync`, the business's tracker sync identity.
    pub fn credential_status(&self, business: &str, role: &str) -> Result<Value, Code> {
        self.run(credentials::CredentialStatus {
            business: business.to_string(),
            role: role.to_string(),
        })
    }

    /// The trusted `recordEvent(cap, {kind, body, subject})`: `{event, at}`.
    pub fn record_event(
        &self,
        cap: &str,
        kind: &str,
        body: Map<String, Value>,
        subject: Option<&str>,
    ) -> Result<Value, Code> {
        self.run(records::RecordEvent {
            cap: cap.to_string(),
            kind: kind.to_string(),
            body,
            subject: subject.map(str::to_string),
        })
    }

    /// `recordTask`: one task snapshot as task sync stores it; `fields: None`
    /// is a tombstone. `{task_ref, seq, at}`.
    pub fn record_task(
        &self,
        business: &str,
        task_ref: &str,
        read_at: &str,
        fields: Option<Map<String, Value>>,
    ) -> Result<Value, Code> {
        self.run(records::RecordTask {
            business: business.to_string(),
            task_ref: task_ref.to_string(),
            read_at: read_at.to_string(),
            fields,
        })
    }

    /// `checkPush`: the caller's `git.push.working` authority before a push.
    pub fn check_push(&self, cap: &str, task_ref: &str) -> Result<Value, Code> {
        self.run(pushes::CheckPush {
            cap: cap.to_string(),
            task_ref: task_ref.to_string(),
        })
    }

    /// `recordPush`: the push record once the work ref moved.
    pub fn record_push(&self, cap: &str, push: Map<String, Value>) -> Result<Value, Code> {
        self.run(pushes::RecordPush::new(cap.to_string(), push))
    }

    /// `reviewFetch`: the requested review's `{project, commit, ref}`.
    pub fn review_fetch(&self, cap: &str, args: Map<String, Value>) -> Result<Value, Code> {
        self.run(pushes::ReviewFetch::new(cap.to_string(), args))
    }

    /// `checkLand`: opens a landing and returns its ticket, or a refusal
    /// recorded on the task's trail.
    pub fn check_land(&self, cap: &str, args: Map<String, Value>) -> Result<Value, Code> {
        self.run(landing::CheckLand {
            cap: cap.to_string(),
            args,
        })
    }

    /// `recordLand`: records a landing once main moved (spends the decision).
    pub fn record_land(&self, ticket: &str, land: Map<String, Value>) -> Result<Value, Code> {
        self.run(landing::RecordLand {
            ticket: landing::TicketRef::by_id(ticket),
            land,
        })
    }

    /// `landRefused`: ends a landing with the host's refusal code.
    pub fn land_refused(&self, ticket: &str, args: Map<String, Value>) -> Result<Value, Code> {
        self.run(landing::LandRefused {
            ticket: landing::TicketRef::by_id(ticket),
            args,
        })
    }

    /// `landHeld`: `{held}`, whether the role (in `thread`) holds an
    /// approval a landing could use.
    pub fn land_held(
        &self,
        business: &str,
        role: &str,
        thread: Option<&str>,
    ) -> Result<Value, Code> {
        self.run(landing::LandHeld {
            business: business.to_string(),
            role: role.to_string(),
            thread: thread.map(str::to_string),
        })
    }

    /// Closes in order: stop accepting, let in-flight requests finish (up to
    /// five seconds), stop the writer (closing the database), then remove the
    /// socket and the lock.
    pub fn close(mut self) {
        let _ = self.shutdown.send(true);
        if let (Some(rt), Some(server)) = (self.rt.as_ref(), self.server.take()) {
            let _ = rt.block_on(server);
        }
        // The connections in flight finish (at most 5 s): woken by the last
        // one to end, no polling.
        if let Some(rt) = self.rt.as_ref() {
            let ctx = &self.ctx;
            let _ = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), ctx.drained()).await
            });
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        let Runtime {
            writer,
            writer_thread,
            ctx,
            bus,
            sealer,
            ..
        } = self;
        drop(writer);
        drop(ctx);
        let core = writer_thread.and_then(|t| t.join().ok());
        // The writer has stopped: the last seal covers every commit. Its
        // connection closes last, after every reader of the store and of
        // the seals file, so SQLite folds each WAL back in and removes it.
        let core = core.map(|mut c| {
            c.seals = None;
            c
        });
        if let Some(s) = sealer {
            s.close();
        }
        drop(core);
        bus.release();
        tracing::info!("broker closed");
    }
}
