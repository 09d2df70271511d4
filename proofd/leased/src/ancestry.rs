//! Peer identity and the walk from the peer up to the anchor.
//!
//! The peer's (pid, uid, gid) come from SO_PEERCRED; the peer is pinned at
//! accept ([`PeerPin`]: SO_PEERPIDFD, else `pidfd_open` between two
//! start-time reads that agree) and every walked parent with `pidfd_open`.
//! After the walk, every walked PID's stat (start time and parent) is read
//! again and every pin must still be alive, so neither a re-parented chain
//! nor a reused PID can pass. A kernel with no pidfd at all (before 5.3)
//! has nothing to pin the peer with: every request refuses
//! `peer-pin-unsupported` (docs/decisions.md).

use super::code::Code;
use mosaic_os::procfs::{self, PeerPin, PidFd, ProcError, Stat};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Longest parent chain walked before giving up (`not-descendant`).
pub const MAX_DEPTH: usize = 1024;

/// The connecting process, pinned where the kernel allows.
#[derive(Debug)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pin: PeerPin,
}

fn pin(pid: i32, gone: Code) -> Result<Option<PidFd>, Code> {
    match PidFd::open(pid) {
        Ok(p) => Ok(Some(p)),
        Err(ProcError::Unsupported) => Ok(None),
        Err(ProcError::Gone | ProcError::Changed) => Err(gone),
        Err(_) => Err(Code::ProcUnreadable),
    }
}

fn stat(pid: i32, gone: Code) -> Result<Stat, Code> {
    match procfs::read_stat(pid) {
        Ok(s) => Ok(s),
        Err(ProcError::Gone) => Err(gone),
        Err(_) => Err(Code::ProcUnreadable),
    }
}

fn alive(pin: &Option<PidFd>) -> bool {
    pin.as_ref().is_none_or(PidFd::is_alive)
}

/// Read the peer's kernel identity at accept time.
pub fn identify(stream: &UnixStream) -> Result<Peer, Code> {
    let (pid, uid, gid) = procfs::peer_cred(stream).map_err(|_| Code::PeerUnidentified)?;
    if pid <= 0 {
        return Err(Code::PeerUnidentified);
    }
    let pin = match PeerPin::take(stream, pid) {
        Ok(p) => p,
        Err(ProcError::Unsupported) => return Err(Code::PeerPinUnsupported),
        Err(ProcError::Gone | ProcError::Changed) => return Err(Code::PeerGone),
        Err(_) => return Err(Code::PeerUnidentified),
    };
    Ok(Peer { pid, uid, gid, pin })
}

impl Peer {
    /// The peer as an anchor: (pid, starttime), read while pinned.
    pub fn anchor_key(&self) -> Result<(i32, u64), Code> {
        let first = stat(self.pid, Code::PeerGone)?;
        let again = stat(self.pid, Code::PeerGone)?;
        if first != again || !self.pin.is_alive() {
            return Err(Code::PeerGone);
        }
        Ok((self.pid, first.start_time))
    }

    /// Accept only if the peer is the anchor or descends from it.
    pub fn walk_to(
        &self,
        anchor_pid: i32,
        anchor_start: u64,
        pause: Option<Duration>,
    ) -> Result<(), Code> {
        let anchor_pin = pin(anchor_pid, Code::AnchorGone)?;
        let anchor = stat(anchor_pid, Code::AnchorGone)?;
        if anchor.start_time != anchor_start || !alive(&anchor_pin) {
            return Err(Code::AnchorGone);
        }
        let mut chain: Vec<(Stat, Option<PidFd>)> = Vec::new();
        let mut pid = self.pid;
        let mut found = false;
        for depth in 0..MAX_DEPTH {
            let (st, p) = if depth == 0 {
                (stat(pid, Code::PeerGone)?, None)
            } else {
                let p = pin(pid, Code::AncestryChanged)?;
                (stat(pid, Code::AncestryChanged)?, p)
            };
            chain.push((st, p));
            if pid == anchor_pid {
                if st.start_time != anchor_start {
                    return Err(Code::AncestryChanged);
                }
                found = true;
                break;
            }
            if st.ppid <= 0 {
                break;
            }
            pid = st.ppid;
        }
        if !found {
            return Err(Code::NotDescendant);
        }
        if let Some(d) = pause {
            std::thread::sleep(d);
        }
        // Re-read every walked PID and confirm every pin is still alive.
        for (i, (st, p)) in chain.iter().enumerate() {
            let again = stat(st.pid, Code::AncestryChanged)?;
            let pinned_alive = if i == 0 {
                self.pin.is_alive()
            } else {
                alive(p)
            };
            if again != *st || !pinned_alive {
                return Err(Code::AncestryChanged);
            }
        }
        if !alive(&anchor_pin) {
            return Err(Code::AnchorGone);
        }
        Ok(())
    }
}
