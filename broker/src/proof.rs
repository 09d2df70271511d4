//! The proof gate: binds a human or tester session to a business only after
//! the kernel's peer pid matches the proof and the proof helper (`mosaic-proofd`)
//! has checked the process and its ancestry. The peer is pinned at accept
//! ([`PeerPin`]: SO_PEERPIDFD, else `pidfd_open` between two start-time
//! reads) and must still be alive after the helper's answer, so the process
//! the helper read is the one that connected: a recycled pid cannot pass. A
//! kernel with no pidfd at all refuses every shim request
//! (`peer-pin-unsupported`).

use crate::config::BootConfig;
use crate::core::Caller;
use crate::error::Code;
use mosaic_proofd::procfs::PeerPin;
use mosaic_proofd::proof::client::{ProofdClient, ProofdError};
use mosaic_proofd::proof::Kind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};

/// A shim's process proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    pub pid: i32,
    pub start_time: u64,
    pub nonce: String,
}

/// Which shim a proof comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShimKind {
    Human,
    Tester,
}

/// The helper's side of a check, as the gate needs it.
pub trait Verifier: Send {
    /// Checks `proof` for a `kind` shim at `exe` run by `uid`.
    fn verify(
        &mut self,
        kind: ShimKind,
        proof: &Proof,
        exe: &std::path::Path,
        uid: u32,
    ) -> Result<(), Code>;
    /// Replaces the known-launch registry.
    fn set_launches(&mut self, launches: &[(i32, u64)]);
    /// Checks that the process `pid` (started at `start_time`) is a `kind`
    /// shim at `exe` run by `uid`, as [`Verifier::verify`] would but with
    /// no nonce: who may send a frame past the ordinary cap. A verifier
    /// that can't tell says `proof-unavailable`, and the frame is refused.
    fn verify_peer(
        &mut self,
        _kind: ShimKind,
        _pid: i32,
        _start_time: u64,
        _exe: &std::path::Path,
        _uid: u32,
    ) -> Result<(), Code> {
        Err(Code::ProofUnavailable)
    }
}

/// Starts a verifier (the proof helper), or `None` when it cannot run.
pub type VerifierFactory = fn() -> Option<Box<dyn Verifier>>;

/// The gate. Its verifier lives on its own thread (`bus-proof`), reached
/// by message only: a check is a job whose answer comes back on a oneshot,
/// and a launch-set change is a job the sender never waits for. So nothing
/// the writer thread does (bindLaunch, endLaunch, a batch's undo) waits on
/// a proof in flight or on the helper's respawn, and no I/O thread blocks
/// on a check either. Jobs run in the order sent, so a launch set changed
/// before a check is what that check sees.
pub struct ProofGate {
    config: Arc<BootConfig>,
    /// `None` when no verifier could be started: every check refuses
    /// `proof-unavailable`.
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A job for the proof thread.
enum Job {
    Verify {
        kind: ShimKind,
        proof: Proof,
        exe: PathBuf,
        uid: u32,
        answer: tokio::sync::oneshot::Sender<Result<(), Code>>,
    },
    /// A connection's peer, before its frame is in (see
    /// [`ProofGate::check_peer`]).
    Peer {
        kind: ShimKind,
        pid: i32,
        start_time: u64,
        exe: PathBuf,
        uid: u32,
        answer: tokio::sync::oneshot::Sender<Result<(), Code>>,
    },
    Launches(Vec<(i32, u64)>),
    Stop,
}

/// The proof thread: runs jobs in order; of launch sets queued back to
/// back only the last is sent to the helper.
fn run_jobs(mut verifier: Box<dyn Verifier>, jobs: mpsc::Receiver<Job>) {
    let mut next = None;
    loop {
        let job = match next.take() {
            Some(j) => j,
            None => match jobs.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
        };
        match job {
            Job::Stop => return,
            Job::Verify {
                kind,
                proof,
                exe,
                uid,
                answer,
            } => {
                let _ = answer.send(verifier.verify(kind, &proof, &exe, uid));
            }
            Job::Peer {
                kind,
                pid,
                start_time,
                exe,
                uid,
                answer,
            } => {
                let _ = answer.send(verifier.verify_peer(kind, pid, start_time, &exe, uid));
            }
            Job::Launches(mut set) => {
                while let Ok(j) = jobs.try_recv() {
                    match j {
                        Job::Launches(newer) => set = newer,
                        other => {
                            next = Some(other);
                            break;
                        }
                    }
                }
                verifier.set_launches(&set);
            }
        }
    }
}

impl ProofGate {
    pub fn new(config: Arc<BootConfig>, verifier: Option<Box<dyn Verifier>>) -> ProofGate {
        let (jobs, thread) = match verifier {
            None => (None, None),
            Some(v) => {
                let (tx, rx) = mpsc::channel();
                match std::thread::Builder::new()
                    .name("bus-proof".into())
                    .spawn(move || run_jobs(v, rx))
                {
                    Ok(t) => (Some(tx), Some(t)),
                    Err(_) => {
                        tracing::warn!(code = "proof-unavailable", "cannot start the proof thread");
                        (None, None)
                    }
                }
            }
        };
        ProofGate {
            config,
            jobs,
            thread,
        }
    }

    /// Sends the launch registry to the proof side; never waits.
    pub fn set_launches(&self, launches: &[(i32, u64)]) {
        if let Some(tx) = &self.jobs {
            let _ = tx.send(Job::Launches(launches.to_vec()));
        }
    }

    /// What the writer calls after every change to the bound runs: it
    /// queues the new set for the proof side and returns at once.
    pub fn launch_sink(&self) -> crate::core::LaunchSink {
        let tx = self.jobs.clone();
        Box::new(move |ids| {
            if let Some(tx) = &tx {
                let _ = tx.send(Job::Launches(ids));
            }
        })
    }

    /// Checks that a connection's peer, pinned at accept, is a `kind` shim
    /// (the helper's checks without the nonce, which is still in the
    /// unread frame): what lets a frame grow past the ordinary cap. It
    /// authenticates nothing; the request is checked whole once it is in.
    pub async fn check_peer(
        self: &Arc<Self>,
        kind: ShimKind,
        pid: i32,
        start_time: u64,
    ) -> Result<(), Code> {
        let exe = match kind {
            ShimKind::Human => self.config.shims.human.clone(),
            ShimKind::Tester => self.config.shims.tester.clone(),
        };
        let uid = nix::unistd::geteuid().as_raw();
        let tx = self.jobs.as_ref().ok_or(Code::ProofUnavailable)?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        tx.send(Job::Peer {
            kind,
            pid,
            start_time,
            exe,
            uid,
            answer,
        })
        .map_err(|_| Code::ProofUnavailable)?;
        answered.await.map_err(|_| Code::ProofUnavailable)?
    }

    /// Checks a shim request and returns the session it binds.
    pub async fn check(
        self: &Arc<Self>,
        kind: ShimKind,
        business: &str,
        proof: &Proof,
        peer_pid: Option<i32>,
        pin: Result<PeerPin, Code>,
    ) -> Result<Caller, Code> {
        if peer_pid != Some(proof.pid) {
            return Err(Code::ProofPid);
        }
        let pin = pin?;
        // The process pinned at accept must be the one the proof names,
        // and still there: a peer that is gone refuses before the helper.
        if pin.start_time().map_err(|_| Code::ProofStartTime)? != proof.start_time {
            return Err(Code::ProofStartTime);
        }
        let exe = match kind {
            ShimKind::Human => self.config.shims.human.clone(),
            ShimKind::Tester => self.config.shims.tester.clone(),
        };
        let uid = nix::unistd::geteuid().as_raw();
        let tx = self.jobs.as_ref().ok_or(Code::ProofUnavailable)?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        tx.send(Job::Verify {
            kind,
            proof: proof.clone(),
            exe,
            uid,
            answer,
        })
        .map_err(|_| Code::ProofUnavailable)?;
        answered.await.map_err(|_| Code::ProofUnavailable)??;
        // The process that was checked must still be the peer: while the
        // pin is alive the pid named it during every read the helper made.
        if !pin.is_alive() {
            return Err(Code::ProofStartTime);
        }
        // Only a proven shim learns whether the business is configured.
        let tester_on = self.config.business(business)?.tester_on();
        match kind {
            ShimKind::Human => Ok(Caller::Human {
                business: business.to_string(),
            }),
            ShimKind::Tester if tester_on => Ok(Caller::Tester {
                business: business.to_string(),
            }),
            ShimKind::Tester => Err(Code::TesterOff),
        }
    }
}

impl Drop for ProofGate {
    /// Stops the proof thread after the job it is on (the helper goes with
    /// its verifier) and waits for it.
    fn drop(&mut self) {
        if let Some(tx) = self.jobs.take() {
            let _ = tx.send(Job::Stop);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where the gate's helper comes from.
enum Source {
    /// The broker spawns `mosaic-proofd` at this path over a socketpair.
    Spawn(PathBuf),
    /// The helper was started outside the broker and handed over as a
    /// connected socket (see [`adopt_from_systemd`]). It cannot be replaced
    /// from in here: once its channel breaks, proofs refuse
    /// `proof-unavailable` until the service is restarted.
    Adopted(&'static Adopted),
}

/// The helper's channel taken from systemd, for the life of the process.
pub struct Adopted {
    stream: UnixStream,
    /// Set once a client on it broke or failed its handshake or registry:
    /// the channel may then hold half a reply, so it is never used again
    /// (by this runtime or a later boot's).
    lost: AtomicBool,
}

/// `mosaic-proofd` as the gate's verifier. A spawned helper that died or
/// misbehaved is replaced at once: the request that found it broken refuses
/// `proof-unavailable`, the next one meets a fresh helper.
pub struct Proofd {
    source: Source,
    client: Option<ProofdClient>,
    launches: Vec<(i32, u64)>,
}

impl Proofd {
    /// Starts the helper at `exe`.
    pub fn spawn(exe: PathBuf) -> Option<Proofd> {
        Proofd::start(Source::Spawn(exe))
    }

    fn start(source: Source) -> Option<Proofd> {
        let mut p = Proofd {
            source,
            client: None,
            launches: Vec::new(),
        };
        p.restart();
        p.client.is_some().then_some(p)
    }

    fn connect(&self) -> Option<ProofdClient> {
        match &self.source {
            Source::Spawn(exe) => ProofdClient::spawn(exe).ok(),
            Source::Adopted(a) if a.lost.load(Ordering::SeqCst) => None,
            Source::Adopted(a) => {
                let c = a
                    .stream
                    .try_clone()
                    .ok()
                    .and_then(|s| ProofdClient::adopt(s).ok());
                if c.is_none() {
                    a.lost.store(true, Ordering::SeqCst);
                }
                c
            }
        }
    }

    /// Marks an adopted channel unusable (see [`Adopted::lost`]).
    fn lose_adopted(&self) {
        if let Source::Adopted(a) = &self.source {
            if !a.lost.swap(true, Ordering::SeqCst) {
                tracing::error!(
                    code = "proof-unavailable",
                    "the proof helper systemd started is lost; restart the service"
                );
            }
        }
    }

    fn restart(&mut self) {
        // A client that is replaced broke (or failed its registry).
        if self.client.take().is_some() {
            self.lose_adopted();
        }
        match self.connect() {
            Some(mut c) => {
                if c.set_launches(&self.launches).is_ok() {
                    tracing::info!(pid = c.pid(), "proof helper started");
                    self.client = Some(c);
                } else {
                    self.lose_adopted();
                    tracing::warn!(
                        code = "proof-unavailable",
                        "proof helper refused its registry"
                    );
                }
            }
            None => tracing::warn!(code = "proof-unavailable", "cannot start the proof helper"),
        }
    }
}

impl Verifier for Proofd {
    fn verify(&mut self, kind: ShimKind, proof: &Proof, exe: &Path, uid: u32) -> Result<(), Code> {
        let alive = self.client.as_mut().is_some_and(|c| c.is_alive());
        if !alive {
            self.restart();
        }
        let Some(client) = self.client.as_mut() else {
            return Err(Code::ProofUnavailable);
        };
        let kind = match kind {
            ShimKind::Human => Kind::Human,
            ShimKind::Tester => Kind::Tester,
        };
        match client.verify(kind, proof.pid, proof.start_time, &proof.nonce, exe, uid) {
            Ok(()) => Ok(()),
            Err(ProofdError::Refused(c)) => {
                Err(Code::parse(c.as_str()).unwrap_or(Code::ProofUnreadable))
            }
            Err(ProofdError::Unavailable) => {
                tracing::warn!(
                    code = "proof-unavailable",
                    "proof helper lost; restarting it"
                );
                self.restart();
                Err(Code::ProofUnavailable)
            }
        }
    }

    fn verify_peer(
        &mut self,
        kind: ShimKind,
        pid: i32,
        start_time: u64,
        exe: &Path,
        uid: u32,
    ) -> Result<(), Code> {
        let alive = self.client.as_mut().is_some_and(|c| c.is_alive());
        if !alive {
            self.restart();
        }
        let Some(client) = self.client.as_mut() else {
            return Err(Code::ProofUnavailable);
        };
        let kind = match kind {
            ShimKind::Human => Kind::Human,
            ShimKind::Tester => Kind::Tester,
        };
        match client.verify_peer(kind, pid, start_time, exe, uid) {
            Ok(()) => Ok(()),
            Err(ProofdError::Refused(c)) => {
                Err(Code::parse(c.as_str()).unwrap_or(Code::ProofUnreadable))
            }
            Err(ProofdError::Unavailable) => {
                tracing::warn!(
                    code = "proof-unavailable",
                    "proof helper lost; restarting it"
                );
                self.restart();
                Err(Code::ProofUnavailable)
            }
        }
    }

    fn set_launches(&mut self, launches: &[(i32, u64)]) {
        self.launches = launches.to_vec();
        let ok = self
            .client
            .as_mut()
            .is_some_and(|c| c.set_launches(launches).is_ok());
        if !ok {
            self.restart();
        }
    }
}

/// The proof helper beside the running `mosaic-bus`, when it can be started.
pub fn spawn_default() -> Option<Box<dyn Verifier>> {
    let exe = std::env::current_exe()
        .ok()?
        .parent()?
        .join("mosaic-proofd");
    Proofd::spawn(exe).map(|p| Box::new(p) as Box<dyn Verifier>)
}

/// The helper systemd handed over, once [`adopt_from_systemd`] found it.
static ADOPTED: OnceLock<Adopted> = OnceLock::new();

/// The name `mosaic-proofd --systemd-fdstore` gives its socket in systemd's
/// file descriptor store; systemd passes it back under that name.
pub const FDSTORE_NAME: &str = "mosaic-proofd";

/// Takes the proof helper's socket from the descriptors systemd passed
/// (`LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`, fds from 3), and takes
/// those variables out of the environment. Every other passed descriptor is
/// closed. Call once, before any other thread starts.
pub fn adopt_from_systemd() -> Result<(), Code> {
    let pid = std::env::var("LISTEN_PID").ok();
    let count = std::env::var("LISTEN_FDS").ok();
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    for var in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(var);
    }
    let ours = pid.and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id());
    let count = count
        .and_then(|n| n.parse::<i32>().ok())
        .filter(|n| ours && (1..=64).contains(n))
        .ok_or(Code::ProofdSpawn)?;
    let names: Vec<&str> = names.split(':').collect();
    let mut found = None;
    for (i, fd) in (3..3 + count).enumerate() {
        let named = names.get(i) == Some(&FDSTORE_NAME);
        // SAFETY: systemd passed descriptors 3..3+LISTEN_FDS to this very
        // process (LISTEN_PID checked above) and nothing else here has
        // taken them: each is owned from here on, and dropped (closed)
        // unless it is the helper's channel.
        let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        use nix::sys::stat::{fstat, SFlag};
        let is_socket = fstat(&owned).is_ok_and(|st| {
            SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFSOCK
        });
        if named && is_socket && found.is_none() {
            found = Some(owned);
        }
    }
    let stream = UnixStream::from(found.ok_or(Code::ProofdSpawn)?);
    // Only the broker's own same-user helper may stand behind it.
    let peer = mosaic_proofd::procfs::peer_cred(&stream).map_err(|_| Code::ProofdSpawn)?;
    if peer.1 != nix::unistd::geteuid().as_raw() {
        return Err(Code::ProofdSpawn);
    }
    // Keep it out of anything we spawn.
    let cloexec = nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC);
    let _ = nix::fcntl::fcntl(&stream, cloexec);
    ADOPTED
        .set(Adopted {
            stream,
            lost: AtomicBool::new(false),
        })
        .map_err(|_| Code::ProofdSpawn)
}

/// The helper [`adopt_from_systemd`] took, as the gate's verifier.
pub fn adopted() -> Option<Box<dyn Verifier>> {
    Proofd::start(Source::Adopted(ADOPTED.get()?)).map(|p| Box::new(p) as Box<dyn Verifier>)
}
