//! The proof gate: binds a human or tester session to a business only after
//! the kernel's peer pid matches the proof and the proof helper (`mosaic-proofd`)
//! has checked the process and its ancestry. The peer stays pinned by a pidfd
//! from accept until the answer, so a recycled pid cannot pass.

use crate::config::BootConfig;
use crate::core::Caller;
use crate::error::Code;
use crate::server::envelope::{Proof, ShimKind};
use mosaic_proofd::procfs::PidFd;
use mosaic_proofd::proof::client::{ProofdClient, ProofdError};
use mosaic_proofd::proof::Kind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
}

/// Starts a verifier (the proof helper), or `None` when it cannot run.
pub type VerifierFactory = fn() -> Option<Box<dyn Verifier>>;

pub struct ProofGate {
    config: Arc<BootConfig>,
    verifier: Mutex<Option<Box<dyn Verifier>>>,
}

impl ProofGate {
    pub fn new(config: Arc<BootConfig>, verifier: Option<Box<dyn Verifier>>) -> ProofGate {
        ProofGate {
            config,
            verifier: Mutex::new(verifier),
        }
    }

    /// Forwards the launch registry to the helper.
    pub fn set_launches(&self, launches: &[(i32, u64)]) {
        if let Ok(mut v) = self.verifier.lock() {
            if let Some(v) = v.as_mut() {
                v.set_launches(launches);
            }
        }
    }

    /// Checks a shim request and returns the session it binds.
    pub async fn check(
        self: &Arc<Self>,
        kind: ShimKind,
        business: &str,
        proof: &Proof,
        peer_pid: Option<i32>,
        pidfd: Option<PidFd>,
    ) -> Result<Caller, Code> {
        let b = self
            .config
            .businesses
            .get(business)
            .ok_or(Code::UnknownBusiness)?;
        if peer_pid != Some(proof.pid) {
            return Err(Code::ProofPid);
        }
        let tester_on = b.tester_on();
        let gate = self.clone();
        let proof = proof.clone();
        let exe = match kind {
            ShimKind::Human => self.config.shims.human.clone(),
            ShimKind::Tester => self.config.shims.tester.clone(),
        };
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let checked = tokio::task::spawn_blocking(move || {
            let mut guard = gate.verifier.lock().map_err(|_| Code::ProofUnavailable)?;
            let v = guard.as_mut().ok_or(Code::ProofUnavailable)?;
            v.verify(kind, &proof, &exe, uid)
        })
        .await
        .map_err(|_| Code::ProofUnavailable)?;
        checked?;
        // The process that was checked must still be the peer.
        if let Some(fd) = pidfd {
            if !fd.is_alive() {
                return Err(Code::ProofStartTime);
            }
        }
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

/// `mosaic-proofd` as the gate's verifier. A helper that died or misbehaved
/// is replaced at once: the request that found it broken refuses
/// `proof-unavailable`, the next one meets a fresh helper.
pub struct Proofd {
    exe: PathBuf,
    client: Option<ProofdClient>,
    launches: Vec<(i32, u64)>,
}

impl Proofd {
    /// Starts the helper at `exe`.
    pub fn spawn(exe: PathBuf) -> Option<Proofd> {
        let mut p = Proofd {
            exe,
            client: None,
            launches: Vec::new(),
        };
        p.restart();
        p.client.is_some().then_some(p)
    }

    fn restart(&mut self) {
        self.client = None;
        match ProofdClient::spawn(&self.exe) {
            Ok(mut c) => {
                if c.set_launches(&self.launches).is_ok() {
                    tracing::info!(pid = c.pid(), "proof helper started");
                    self.client = Some(c);
                } else {
                    tracing::warn!(
                        code = "proof-unavailable",
                        "proof helper refused its registry"
                    );
                }
            }
            Err(_) => tracing::warn!(code = "proof-unavailable", "cannot start the proof helper"),
        }
    }

    /// The helper's pid, when one runs.
    pub fn pid(&self) -> Option<u32> {
        self.client.as_ref().map(|c| c.pid())
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
