//! The broker's side of `mosaic-proofd`: spawn the helper over a CLOEXEC
//! socketpair (or adopt a connected helper systemd handed over, see
//! [`ProofdClient::adopt`]), handshake, then one blocking request/reply at a
//! time with a read deadline. Any transport failure (EOF, timeout, bad reply,
//! the child gone) makes the client unusable and returns
//! [`ProofdError::Unavailable`] so the broker can respawn.

use std::fmt;
use std::io::{self, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::protocol::{read_line_bounded, Line, MAX_LINE, VERSION};
use super::{Kind, ProofCode};

/// The fd number the helper finds its end of the socketpair at.
pub const CHILD_FD: i32 = 3;
/// How long the client waits for one reply.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// The reply deadline: [`REPLY_TIMEOUT`]; in a debug build run with a test's
/// pause point set (`mosaic_os::pause`), a minute, so that a helper a test
/// holds at the point is not taken for a dead one.
fn reply_timeout() -> Duration {
    #[cfg(debug_assertions)]
    if std::env::var_os(mosaic_os::pause::PAUSE_ENV).is_some() {
        return Duration::from_secs(60);
    }
    REPLY_TIMEOUT
}

/// Why a proofd call did not succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProofdError {
    /// proofd answered with a refusal code.
    Refused(ProofCode),
    /// proofd is dead, timed out or spoke nonsense (`proof-unavailable`).
    Unavailable,
}

impl ProofdError {
    /// The wire code the broker replies with.
    pub fn as_str(self) -> &'static str {
        match self {
            ProofdError::Refused(c) => c.as_str(),
            ProofdError::Unavailable => "proof-unavailable",
        }
    }
}

impl fmt::Display for ProofdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for ProofdError {}

/// A running `mosaic-proofd` and the broker's end of its socketpair.
pub struct ProofdClient {
    /// The helper when this client spawned it; `None` for an adopted one,
    /// whose lifetime belongs to whoever started it.
    child: Option<Child>,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: i64,
    broken: bool,
}

pub(crate) fn socketpair_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    Ok(socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?)
}

impl ProofdClient {
    /// Spawns `exe --fd 3` with its end of a fresh socketpair at fd 3 and
    /// performs the `hello` handshake.
    pub fn spawn(exe: &Path) -> io::Result<ProofdClient> {
        let (ours, theirs) = socketpair_cloexec()?;
        let their_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(exe);
        // The helper needs nothing from the environment (it reads `/proc`
        // and its socket; `NOTIFY_SOCKET` only in its systemd mode, which
        // the broker never spawns), so it gets none: not a credential the
        // broker was handed in a variable, nor anything else of the
        // broker's.
        cmd.env_clear()
            .arg("--fd")
            .arg(CHILD_FD.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // Debug builds only: a test's pause point reaches the helper too
        // (`mosaic_os::pause`).
        #[cfg(debug_assertions)]
        if let Some(v) = std::env::var_os(mosaic_os::pause::PAUSE_ENV) {
            cmd.env(mosaic_os::pause::PAUSE_ENV, v);
        }
        // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if their_fd == CHILD_FD {
                    let flags = libc::fcntl(CHILD_FD, libc::F_GETFD);
                    if flags < 0
                        || libc::fcntl(CHILD_FD, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                } else if libc::dup2(their_fd, CHILD_FD) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        drop(theirs);
        ProofdClient::handshake(Some(child), UnixStream::from(ours))
    }

    /// Talks to a helper that is already running on the other end of
    /// `stream` (started outside the broker, e.g. by systemd; see
    /// `docs/operations.md`). Dropping the client leaves the socket and the
    /// helper alone.
    pub fn adopt(stream: UnixStream) -> io::Result<ProofdClient> {
        ProofdClient::handshake(None, stream)
    }

    fn handshake(child: Option<Child>, stream: UnixStream) -> io::Result<ProofdClient> {
        stream.set_read_timeout(Some(reply_timeout()))?;
        stream.set_write_timeout(Some(reply_timeout()))?;
        let mut client = ProofdClient {
            child,
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            next_id: 0,
            broken: false,
        };
        let reply = client
            .call(json!({"op": "hello", "version": VERSION}), None)
            .map_err(|_| io::Error::other("proofd handshake failed"))?;
        if reply.get("ok") != Some(&Value::Bool(true))
            || reply.get("version").and_then(Value::as_u64) != Some(VERSION)
        {
            client.kill();
            return Err(io::Error::other("proofd handshake refused"));
        }
        Ok(client)
    }

    /// The helper's process id, when this client spawned it.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// False once a call failed for transport reasons or the child exited.
    pub fn is_alive(&mut self) -> bool {
        !self.broken
            && self
                .child
                .as_mut()
                .is_none_or(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Replaces proofd's known-launch registry with `set` of `(pid, start_time)`.
    pub fn set_launches(&mut self, set: &[(i32, u64)]) -> Result<(), ProofdError> {
        let items: Vec<Value> = set
            .iter()
            .map(|(pid, st)| json!({"pid": pid, "startTime": st}))
            .collect();
        let id = self.fresh_id();
        self.expect_ok(json!({"op": "launches", "id": id, "set": items}), id)
    }

    /// Asks proofd to check one shim proof.
    pub fn verify(
        &mut self,
        kind: Kind,
        pid: i32,
        start_time: u64,
        nonce: &str,
        exe: &Path,
        uid: u32,
    ) -> Result<(), ProofdError> {
        let exe = exe
            .to_str()
            .ok_or(ProofdError::Refused(ProofCode::InvalidRequest))?;
        let id = self.fresh_id();
        self.expect_ok(
            json!({"op": "verify", "id": id, "kind": kind.as_str(), "pid": pid,
                   "startTime": start_time, "nonce": nonce, "exe": exe, "uid": uid}),
            id,
        )
    }

    /// Asks proofd whether a connection's peer is a `kind` shim, as
    /// [`ProofdClient::verify`] would, without a nonce (`peer`).
    pub fn verify_peer(
        &mut self,
        kind: Kind,
        pid: i32,
        start_time: u64,
        exe: &Path,
        uid: u32,
    ) -> Result<(), ProofdError> {
        let exe = exe
            .to_str()
            .ok_or(ProofdError::Refused(ProofCode::InvalidRequest))?;
        let id = self.fresh_id();
        self.expect_ok(
            json!({"op": "peer", "id": id, "kind": kind.as_str(), "pid": pid,
                   "startTime": start_time, "exe": exe, "uid": uid}),
            id,
        )
    }

    fn fresh_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    fn expect_ok(&mut self, req: Value, id: i64) -> Result<(), ProofdError> {
        let reply = self.call(req, Some(id))?;
        match reply.get("ok") {
            Some(Value::Bool(true)) => Ok(()),
            Some(Value::Bool(false)) => {
                let code = reply
                    .get("error")
                    .and_then(Value::as_str)
                    .and_then(ProofCode::parse);
                match code {
                    Some(c) => Err(ProofdError::Refused(c)),
                    None => self.fail(),
                }
            }
            _ => self.fail(),
        }
    }

    fn fail<T>(&mut self) -> Result<T, ProofdError> {
        self.kill();
        Err(ProofdError::Unavailable)
    }

    fn kill(&mut self) {
        self.broken = true;
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn call(&mut self, req: Value, id: Option<i64>) -> Result<Value, ProofdError> {
        if self.broken {
            return Err(ProofdError::Unavailable);
        }
        let mut line = req.to_string();
        line.push('\n');
        if line.len() > MAX_LINE {
            return Err(ProofdError::Refused(ProofCode::InvalidRequest));
        }
        if self.writer.write_all(line.as_bytes()).is_err() {
            return self.fail();
        }
        let bytes = match read_line_bounded(&mut self.reader, MAX_LINE) {
            Ok(Line::Data(b)) => b,
            _ => return self.fail(),
        };
        let Ok(reply) = serde_json::from_slice::<Value>(&bytes) else {
            return self.fail();
        };
        if reply.get("id").and_then(Value::as_i64) != id {
            return self.fail();
        }
        Ok(reply)
    }
}

impl Drop for ProofdClient {
    fn drop(&mut self) {
        // An adopted helper is not ours to stop.
        let Some(child) = self.child.as_mut() else {
            return;
        };
        // Closing our end makes proofd see EOF and exit 0; reap it.
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
        match child.try_wait() {
            Ok(Some(_)) => {}
            _ => {
                let deadline = std::time::Instant::now() + Duration::from_millis(500);
                while std::time::Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
