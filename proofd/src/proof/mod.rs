//! Process proof for the human and tester shims.
//!
//! The check is a pure function, [`verify`], over a [`ProcessTable`]: the
//! real table reads `/proc` (see [`table::ProcTable`]), tests use
//! [`table::FakeTable`]. Nothing here touches a socket or a database; the
//! wire side lives in [`protocol`] (the `mosaic-proofd` server) and
//! [`client`] (what the broker links).
//!
//! Invariants:
//! - every refusal is one static [`ProofCode`]; no path, nonce or OS error
//!   text leaves this module;
//! - the nonce is compared, never logged or formatted;
//! - every process read is bracketed by a pin ([`ProcessTable::pin`]) and a
//!   liveness re-check ([`ProcessTable::still_alive`]), so what was read
//!   belongs to the process that was pinned (polkit / dbus-broker style).

pub mod client;
pub mod protocol;
pub mod table;

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// The variables that carry the human and the tester shim's nonce (the wire
/// crate holds the names).
pub use mosaic_wire::env::{HUMAN_NONCE_VAR, TESTER_NONCE_VAR};

/// Markers of a managed Mosaic run. Any of them in the shim's own
/// environment or an ancestor's refuses a human (`proof-run-marker`) and a
/// tester (`tester-required`).
pub const MANAGED_RUN_MARKERS: &[&str] = &[
    "MOSAIC_RUN_ID",
    mosaic_wire::env::CAP_VAR,
    "MOSAIC_AGENT_RUN",
];

/// Markers of a coding-agent session (Claude Code, Codex, Pi). Any of them
/// refuses a human (`proof-run-marker`); a tester passes them, since a
/// tester runs from inside such a session.
///
/// This and [`MANAGED_RUN_MARKERS`] are the one place the marker list lives.
pub const AGENT_RUN_MARKERS: &[&str] = &[
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SSE_PORT",
    "CODEX_SANDBOX",
    "CODEX_SANDBOX_NETWORK_DISABLED",
    "CODEX_MANAGED_BY_NPM",
    "PI_CODING_AGENT",
];

/// Command names of coding agents. An ancestor going by one of them refuses
/// a human (`proof-run-marker`), even when its environment was cleared or
/// can't be read: the file name of its readable `/proc/<pid>/exe`, its
/// `comm`, and the file name of its `argv[0]` are each compared (the last
/// two stay readable when the environment and `exe` are denied, and they
/// carry the name a Node-based agent gives itself as its process title).
pub const AGENT_EXE_NAMES: &[&str] = &["claude", "codex", "pi"];

/// Longest ancestry walked before the walk is treated as a loop
/// (Linux `pid_max` is at most 2^22, real trees are a few dozen deep).
pub const MAX_ANCESTRY_DEPTH: usize = 4096;

/// Which shim a proof claims to come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Human,
    Tester,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Human => "human",
            Kind::Tester => "tester",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "human" => Some(Kind::Human),
            "tester" => Some(Kind::Tester),
            _ => None,
        }
    }

    /// The variable this shim's nonce must be under.
    pub fn nonce_var(self) -> &'static str {
        match self {
            Kind::Human => HUMAN_NONCE_VAR,
            Kind::Tester => TESTER_NONCE_VAR,
        }
    }
}

/// Static refusal codes. `as_str` is what goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofCode {
    /// `/proc/<pid>/exe` is not exactly the configured shim.
    Exe,
    /// The process's real UID differs from the expected one.
    Uid,
    /// The stat start time (field 22) differs from the claimed one.
    StartTime,
    /// The nonce is missing, wrong, repeated, or under the other shim's variable.
    Nonce,
    /// The claimed process (or one of its files) could not be read.
    Unreadable,
    /// The ancestry walk met a PID twice (or exceeded the depth bound).
    AncestryLoop,
    /// An ancestor disappeared or was replaced during the walk.
    AncestryVanished,
    /// The process or an ancestor is a known managed launch.
    LaunchAncestor,
    /// A run marker is in the process's or an ancestor's environment, or an
    /// ancestor is a coding agent's executable (human only).
    RunMarker,
    /// Tester: managed-run evidence in the process or its ancestry.
    TesterRequired,
    /// The helper request itself was malformed.
    InvalidRequest,
}

impl ProofCode {
    pub const ALL: &'static [ProofCode] = &[
        ProofCode::Exe,
        ProofCode::Uid,
        ProofCode::StartTime,
        ProofCode::Nonce,
        ProofCode::Unreadable,
        ProofCode::AncestryLoop,
        ProofCode::AncestryVanished,
        ProofCode::LaunchAncestor,
        ProofCode::RunMarker,
        ProofCode::TesterRequired,
        ProofCode::InvalidRequest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProofCode::Exe => "proof-exe",
            ProofCode::Uid => "proof-uid",
            ProofCode::StartTime => "proof-start-time",
            ProofCode::Nonce => "proof-nonce",
            ProofCode::Unreadable => "proof-unreadable",
            ProofCode::AncestryLoop => "proof-ancestry-loop",
            ProofCode::AncestryVanished => "proof-ancestry-vanished",
            ProofCode::LaunchAncestor => "proof-launch-ancestor",
            ProofCode::RunMarker => "proof-run-marker",
            ProofCode::TesterRequired => "tester-required",
            ProofCode::InvalidRequest => "invalid-request",
        }
    }

    pub fn parse(s: &str) -> Option<ProofCode> {
        ProofCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ProofCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for ProofCode {}

/// Why a `/proc` read failed, as far as the proof cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadErr {
    /// No such process (any more).
    Gone,
    /// EACCES / EPERM.
    Denied,
    /// Anything else: malformed, too large, other I/O.
    Other,
}

/// The three stat fields the proof uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    /// Field 22, clock ticks since boot.
    pub start_time: u64,
}

/// Environment as read from `/proc/<pid>/environ`: `(name, value)` pairs.
pub type Environ = Vec<(Vec<u8>, Vec<u8>)>;

/// What the proof reads about a process.
pub trait ProcessTable {
    /// A handle that keeps identifying one process (a pidfd, or a
    /// pid + start time where pidfds are unavailable).
    type Pin;
    fn pin(&self, pid: i32) -> Result<Self::Pin, ReadErr>;
    /// `Ok(true)` when the pinned process has not exited since [`pin`](Self::pin).
    fn still_alive(&self, pin: &Self::Pin) -> Result<bool, ReadErr>;
    fn stat(&self, pid: i32) -> Result<ProcStat, ReadErr>;
    fn uid(&self, pid: i32) -> Result<u32, ReadErr>;
    fn exe(&self, pid: i32) -> Result<PathBuf, ReadErr>;
    fn environ(&self, pid: i32) -> Result<Environ, ReadErr>;
    /// The names the process goes by: its `comm` and its `argv[0]` (both
    /// raw bytes, as the kernel reports them).
    fn names(&self, pid: i32) -> Result<Vec<Vec<u8>>, ReadErr>;
}

/// A proof to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyRequest {
    pub kind: Kind,
    pub pid: i32,
    pub start_time: u64,
    pub nonce: String,
    pub expected_exe: PathBuf,
    pub expected_uid: u32,
}

/// Known managed launches: `(pid, start_time)` of every bound run.
pub type LaunchSet = HashSet<(i32, u64)>;

/// True when `nonce` has the shape the shims produce: 16 to 128 bytes of
/// base64url / hex alphabet.
pub fn nonce_well_formed(nonce: &str) -> bool {
    (16..=128).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks a request's own shape (not the process): pid > 0, absolute exe,
/// well-formed nonce.
pub fn request_well_formed(req: &VerifyRequest) -> bool {
    req.pid > 0 && req.expected_exe.is_absolute() && nonce_well_formed(&req.nonce)
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The nonce must be under `kind`'s variable exactly once and equal.
fn nonce_ok(env: &Environ, kind: Kind, nonce: &str) -> bool {
    let var = kind.nonce_var().as_bytes();
    let mut found = None;
    for (k, v) in env {
        if k.as_slice() == var {
            if found.is_some() {
                return false;
            }
            found = Some(v);
        }
    }
    matches!(found, Some(v) if ct_eq(v, nonce.as_bytes()))
}

/// The refusal an environment earns for `kind`, if any.
fn marker_refusal(env: &Environ, kind: Kind) -> Option<ProofCode> {
    let has = |list: &[&str]| {
        env.iter()
            .any(|(k, _)| list.iter().any(|m| m.as_bytes() == k.as_slice()))
    };
    match kind {
        Kind::Human if has(MANAGED_RUN_MARKERS) || has(AGENT_RUN_MARKERS) => {
            Some(ProofCode::RunMarker)
        }
        Kind::Tester if has(MANAGED_RUN_MARKERS) => Some(ProofCode::TesterRequired),
        _ => None,
    }
}

fn launch_refusal(kind: Kind) -> ProofCode {
    match kind {
        Kind::Human => ProofCode::LaunchAncestor,
        Kind::Tester => ProofCode::TesterRequired,
    }
}

fn is_agent_exe(exe: &Path) -> bool {
    exe.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| AGENT_EXE_NAMES.contains(&n))
}

/// A `comm` or `argv[0]` whose file name (after the last `/`) is an agent's.
fn is_agent_name(name: &[u8]) -> bool {
    let base = match name.iter().rposition(|&b| b == b'/') {
        Some(i) => name.get(i + 1..).unwrap_or_default(),
        None => name,
    };
    AGENT_EXE_NAMES.iter().any(|n| n.as_bytes() == base)
}

/// Maps a read failure on an ancestor: gone → vanished, else unreadable.
fn ancestor_err(e: ReadErr) -> ProofCode {
    match e {
        ReadErr::Gone => ProofCode::AncestryVanished,
        ReadErr::Denied | ReadErr::Other => ProofCode::Unreadable,
    }
}

/// Checks one proof. The order is the order of `docs/proof.md`:
/// request shape; pin; exe; UID; start time; nonce; the process's own
/// markers and launch record; liveness; then each ancestor up to PID 1.
pub fn verify<T: ProcessTable>(
    table: &T,
    launches: &LaunchSet,
    req: &VerifyRequest,
) -> Result<(), ProofCode> {
    check(table, launches, req, true)
}

/// Checks a connection's peer as [`verify`] checks a proof, but without a
/// nonce (`req.nonce` is not looked at): whether the process is a `kind`
/// shim outside every managed run and agent session. The broker asks this
/// before it takes in a frame past its ordinary cap (only the human's
/// editor sends one), so a process that is no shim can't hold the bus's
/// few large-frame slots; it never authenticates a request: the request
/// itself is checked with its nonce once its frame is in.
pub fn verify_peer<T: ProcessTable>(
    table: &T,
    launches: &LaunchSet,
    req: &VerifyRequest,
) -> Result<(), ProofCode> {
    check(table, launches, req, false)
}

fn check<T: ProcessTable>(
    table: &T,
    launches: &LaunchSet,
    req: &VerifyRequest,
    with_nonce: bool,
) -> Result<(), ProofCode> {
    let shaped = if with_nonce {
        request_well_formed(req)
    } else {
        req.pid > 0 && req.expected_exe.is_absolute()
    };
    if !shaped {
        return Err(ProofCode::InvalidRequest);
    }
    let kind = req.kind;

    // The claimed process itself: every read failure refuses.
    let pin = table.pin(req.pid).map_err(|_| ProofCode::Unreadable)?;
    let stat = table.stat(req.pid).map_err(|_| ProofCode::Unreadable)?;
    let exe = table.exe(req.pid).map_err(|_| ProofCode::Unreadable)?;
    if exe != req.expected_exe {
        return Err(ProofCode::Exe);
    }
    let uid = table.uid(req.pid).map_err(|_| ProofCode::Unreadable)?;
    if uid != req.expected_uid {
        return Err(ProofCode::Uid);
    }
    if stat.start_time != req.start_time || stat.pid != req.pid {
        return Err(ProofCode::StartTime);
    }
    let env = table.environ(req.pid).map_err(|_| ProofCode::Unreadable)?;
    if with_nonce && !nonce_ok(&env, kind, &req.nonce) {
        return Err(ProofCode::Nonce);
    }
    if let Some(code) = marker_refusal(&env, kind) {
        return Err(code);
    }
    if launches.contains(&(req.pid, stat.start_time)) {
        return Err(launch_refusal(kind));
    }
    if !table.still_alive(&pin).map_err(|_| ProofCode::Unreadable)? {
        return Err(ProofCode::Unreadable);
    }

    // The ancestry.
    let mut seen: HashSet<i32> = HashSet::new();
    seen.insert(req.pid);
    let mut child_start = stat.start_time;
    let mut cur = stat.ppid;
    while cur > 0 {
        if !seen.insert(cur) || seen.len() > MAX_ANCESTRY_DEPTH {
            return Err(ProofCode::AncestryLoop);
        }
        let pin = table.pin(cur).map_err(ancestor_err)?;
        let st = table.stat(cur).map_err(ancestor_err)?;
        // A parent starts before its child; a later start means the parent
        // exited and its pid was reused between the child's read and ours.
        if st.start_time > child_start || st.pid != cur {
            return Err(ProofCode::AncestryVanished);
        }
        if launches.contains(&(cur, st.start_time)) {
            return Err(launch_refusal(kind));
        }
        match table.exe(cur) {
            Ok(path) => {
                if kind == Kind::Human && is_agent_exe(&path) {
                    return Err(ProofCode::RunMarker);
                }
            }
            // Another user's process (e.g. root's init or sshd), or one that
            // made itself undumpable: the command names below still apply.
            Err(ReadErr::Denied) => {}
            Err(e) => return Err(ancestor_err(e)),
        }
        if kind == Kind::Human {
            let names = table.names(cur).map_err(ancestor_err)?;
            if names.iter().any(|n| is_agent_name(n)) {
                return Err(ProofCode::RunMarker);
            }
        }
        match table.environ(cur) {
            Ok(env) => {
                if let Some(code) = marker_refusal(&env, kind) {
                    return Err(code);
                }
            }
            // EACCES skips only the marker check for this ancestor.
            Err(ReadErr::Denied) => {}
            Err(e) => return Err(ancestor_err(e)),
        }
        if !table.still_alive(&pin).map_err(ancestor_err)? {
            return Err(ProofCode::AncestryVanished);
        }
        if cur == 1 {
            break;
        }
        child_start = st.start_time;
        cur = st.ppid;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
