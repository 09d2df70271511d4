//! The crate's bounded `/proc` layer.
//!
//! Invariants:
//! - Parsers (`parse_stat`, `parse_status_uid`, `parse_environ`) are pure
//!   functions over bytes, tested on fixture bytes; readers are thin wrappers
//!   that open one file, read at most a fixed number of bytes and parse.
//! - Every read is bounded (`STAT_MAX`, `STATUS_MAX`, `ENVIRON_MAX`); a file
//!   longer than its bound is `ProcError::TooLarge`, never truncated silently.
//! - Nothing here panics on `/proc` data: no `unwrap`/`expect`/indexing that
//!   can fail on what the kernel (or a hostile `comm`) wrote.
//! - `pid + starttime` alone is racy (PID reuse). Callers that need a stable
//!   identity pin the process with a [`PidFd`], read `/proc`, then check
//!   [`PidFd::is_alive`]: a live pidfd proves the PID was not reused in between.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// Upper bound for `/proc/<pid>/stat` (a real one is < 1 KiB).
pub const STAT_MAX: usize = 4096;
/// Upper bound for `/proc/<pid>/status`.
pub const STATUS_MAX: usize = 64 * 1024;
/// Upper bound for `/proc/<pid>/environ`.
pub const ENVIRON_MAX: usize = 1024 * 1024;
/// Upper bound for `/proc/<pid>/comm` (the kernel keeps 15 bytes).
pub const COMM_MAX: usize = 64;
/// Upper bound for `argv[0]` read from `/proc/<pid>/cmdline`.
pub const ARGV0_MAX: usize = 4096;

/// Why a `/proc` (or pidfd) operation failed. Kept small and `Copy`: callers
/// map it onto their own wire codes; no path or OS text leaks through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProcError {
    /// The process does not exist (ENOENT / ESRCH).
    #[error("process gone")]
    Gone,
    /// The kernel refused access (EACCES / EPERM).
    #[error("access denied")]
    Denied,
    /// The file did not have the expected shape.
    #[error("malformed /proc data")]
    Malformed,
    /// The file exceeded its read bound.
    #[error("/proc data exceeds bound")]
    TooLarge,
    /// The facility is not available on this kernel (pidfd, SO_PEERPIDFD).
    #[error("unsupported by kernel")]
    Unsupported,
    /// Any other I/O failure.
    #[error("I/O error")]
    Io,
    /// The pid named another process by the time it was pinned (its start
    /// time changed between two reads around the pin).
    #[error("pid changed hands")]
    Changed,
}

impl ProcError {
    /// Map an errno onto the error classes above.
    pub fn from_errno(errno: i32) -> ProcError {
        match errno {
            libc::ENOENT | libc::ESRCH => ProcError::Gone,
            libc::EACCES | libc::EPERM => ProcError::Denied,
            libc::ENOSYS | libc::ENOPROTOOPT => ProcError::Unsupported,
            _ => ProcError::Io,
        }
    }

    fn from_io(e: &io::Error) -> ProcError {
        match e.raw_os_error() {
            Some(errno) => ProcError::from_errno(errno),
            None => ProcError::Io,
        }
    }
}

/// The fields of `/proc/<pid>/stat` the crate needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 1.
    pub pid: i32,
    /// Field 4.
    pub ppid: i32,
    /// Field 22, in clock ticks since boot.
    pub start_time: u64,
}

fn parse_dec<T: std::str::FromStr>(bytes: &[u8]) -> Result<T, ProcError> {
    if bytes.is_empty() || bytes.len() > 20 {
        return Err(ProcError::Malformed);
    }
    let digits = match bytes.first() {
        Some(b'-') => bytes.get(1..).unwrap_or_default(),
        _ => bytes,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ProcError::Malformed);
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ProcError::Malformed)
}

/// Parse `/proc/<pid>/stat`. `comm` (field 2) may contain spaces and `)`,
/// so fields 3.. are taken after the LAST `)`.
pub fn parse_stat(bytes: &[u8]) -> Result<Stat, ProcError> {
    if bytes.len() > STAT_MAX {
        return Err(ProcError::TooLarge);
    }
    let open = bytes
        .iter()
        .position(|&b| b == b'(')
        .ok_or(ProcError::Malformed)?;
    let close = bytes
        .iter()
        .rposition(|&b| b == b')')
        .ok_or(ProcError::Malformed)?;
    if close < open {
        return Err(ProcError::Malformed);
    }
    let head = bytes.get(..open).ok_or(ProcError::Malformed)?;
    let head = head.strip_suffix(b" ").ok_or(ProcError::Malformed)?;
    let pid: i32 = parse_dec(head)?;
    let rest = bytes.get(close + 1..).ok_or(ProcError::Malformed)?;
    let rest = rest.strip_prefix(b" ").ok_or(ProcError::Malformed)?;
    let rest = rest.strip_suffix(b"\n").unwrap_or(rest);
    // rest[0] is field 3 (state), rest[1] field 4 (ppid), rest[19] field 22.
    let mut fields = rest.split(|&b| b == b' ');
    let state = fields.next().ok_or(ProcError::Malformed)?;
    if state.len() != 1 {
        return Err(ProcError::Malformed);
    }
    let ppid: i32 = parse_dec(fields.next().ok_or(ProcError::Malformed)?)?;
    let start = fields.nth(17).ok_or(ProcError::Malformed)?;
    let start_time: u64 = parse_dec(start)?;
    if pid <= 0 || ppid < 0 {
        return Err(ProcError::Malformed);
    }
    Ok(Stat {
        pid,
        ppid,
        start_time,
    })
}

/// Real UID (first number of the `Uid:` line) from `/proc/<pid>/status` bytes.
pub fn parse_status_uid(bytes: &[u8]) -> Result<u32, ProcError> {
    if bytes.len() > STATUS_MAX {
        return Err(ProcError::TooLarge);
    }
    for line in bytes.split(|&b| b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"Uid:") {
            let real = rest
                .split(|&b| b == b'\t' || b == b' ')
                .find(|f| !f.is_empty())
                .ok_or(ProcError::Malformed)?;
            return parse_dec(real);
        }
    }
    Err(ProcError::Malformed)
}

/// One environment entry: `(name, value)` as raw bytes.
pub type EnvPair = (Vec<u8>, Vec<u8>);

/// Split `/proc/<pid>/environ` bytes into `(name, value)` pairs at the first
/// `=`. Empty entries and entries without `=` are skipped.
pub fn parse_environ(bytes: &[u8]) -> Vec<EnvPair> {
    bytes
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let eq = entry.iter().position(|&b| b == b'=')?;
            let (name, value) = entry.split_at(eq);
            let value = value.get(1..).unwrap_or_default();
            Some((name.to_vec(), value.to_vec()))
        })
        .collect()
}

/// Read at most `max` bytes of `path`; longer is `TooLarge`.
pub fn read_bounded(path: &Path, max: usize) -> Result<Vec<u8>, ProcError> {
    let file = File::open(path).map_err(|e| ProcError::from_io(&e))?;
    let mut buf = Vec::with_capacity(max.min(8192));
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit)
        .read_to_end(&mut buf)
        .map_err(|e| ProcError::from_io(&e))?;
    if buf.len() > max {
        return Err(ProcError::TooLarge);
    }
    Ok(buf)
}

fn proc_path(pid: i32, leaf: &str) -> Result<PathBuf, ProcError> {
    if pid <= 0 {
        return Err(ProcError::Gone);
    }
    Ok(PathBuf::from(format!("/proc/{pid}/{leaf}")))
}

/// Read and parse `/proc/<pid>/stat`; the parsed pid must equal `pid`.
pub fn read_stat(pid: i32) -> Result<Stat, ProcError> {
    let stat = parse_stat(&read_bounded(&proc_path(pid, "stat")?, STAT_MAX)?)?;
    if stat.pid != pid {
        return Err(ProcError::Malformed);
    }
    Ok(stat)
}

/// Real UID of `pid` from `/proc/<pid>/status`.
pub fn read_uid(pid: i32) -> Result<u32, ProcError> {
    parse_status_uid(&read_bounded(&proc_path(pid, "status")?, STATUS_MAX)?)
}

/// Target of `/proc/<pid>/exe` (bounded by the kernel's PATH_MAX).
pub fn read_exe(pid: i32) -> Result<PathBuf, ProcError> {
    std::fs::read_link(proc_path(pid, "exe")?).map_err(|e| ProcError::from_io(&e))
}

/// Environment of `pid`, at most `ENVIRON_MAX` bytes. EACCES/EPERM (another
/// user's process) is `ProcError::Denied`.
pub fn read_environ(pid: i32) -> Result<Vec<EnvPair>, ProcError> {
    Ok(parse_environ(&read_bounded(
        &proc_path(pid, "environ")?,
        ENVIRON_MAX,
    )?))
}

/// `/proc/<pid>/comm` without its newline. Readable for any process the
/// reader can see, whatever its dumpability.
pub fn read_comm(pid: i32) -> Result<Vec<u8>, ProcError> {
    let mut raw = read_bounded(&proc_path(pid, "comm")?, COMM_MAX)?;
    if raw.last() == Some(&b'\n') {
        raw.pop();
    }
    Ok(raw)
}

/// `argv[0]` from `/proc/<pid>/cmdline` bytes: up to the first NUL, or the
/// whole text when a process rewrote its title without one. Longer than
/// [`ARGV0_MAX`] is `TooLarge`.
pub fn parse_argv0(bytes: &[u8]) -> Result<Vec<u8>, ProcError> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    if end > ARGV0_MAX {
        return Err(ProcError::TooLarge);
    }
    Ok(bytes.get(..end).unwrap_or_default().to_vec())
}

/// `argv[0]` of `pid` (empty for a process without a command line). Like
/// `comm`, readable whatever the process's dumpability.
pub fn read_argv0(pid: i32) -> Result<Vec<u8>, ProcError> {
    let file = File::open(proc_path(pid, "cmdline")?).map_err(|e| ProcError::from_io(&e))?;
    // Only the first ARGV0_MAX + 1 bytes matter: argv[0] ends within them or
    // is too long; the rest of the command line is never read.
    let mut buf = Vec::with_capacity(512);
    let limit = u64::try_from(ARGV0_MAX)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    file.take(limit)
        .read_to_end(&mut buf)
        .map_err(|e| ProcError::from_io(&e))?;
    parse_argv0(&buf)
}

/// Kernel-reported `(pid, uid, gid)` of a Unix socket peer (SO_PEERCRED).
pub fn peer_cred(sock: impl AsFd) -> Result<(i32, u32, u32), ProcError> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred =
        getsockopt(&sock.as_fd(), PeerCredentials).map_err(|e| ProcError::from_errno(e as i32))?;
    Ok((cred.pid(), cred.uid(), cred.gid()))
}

fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A pidfd: a reference to one process that cannot be confused with a later
/// process reusing the same PID.
#[derive(Debug)]
pub struct PidFd(OwnedFd);

impl PidFd {
    /// `pidfd_open(pid, 0)`. ENOSYS (a kernel before 5.3) → `Unsupported`,
    /// ESRCH → `Gone`. EINVAL is not "unsupported": with flags 0 and a
    /// positive pid the kernel says it only when `pid` is no thread-group
    /// leader, i.e. the number now names a thread of some other process.
    pub fn open(pid: i32) -> Result<PidFd, ProcError> {
        if pid <= 0 {
            return Err(ProcError::Gone);
        }
        // SAFETY: plain syscall with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(match last_errno() {
                libc::EINVAL => ProcError::Changed,
                e => ProcError::from_errno(e),
            });
        }
        let fd = i32::try_from(fd).map_err(|_| ProcError::Io)?;
        // SAFETY: the kernel just returned this fd to us; we own it.
        Ok(PidFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// A pidfd for the peer of a Unix socket (SO_PEERPIDFD, Linux 6.5).
    /// `Ok(None)` only when the kernel does not know the option
    /// (ENOPROTOOPT, or ENOSYS); the caller then pins by pid ([`PeerPin`]).
    /// A kernel that knows it answers EINVAL (6.5 to 6.8) or ESRCH (later)
    /// when the peer has already been reaped: `Err(Gone)`, never a fallback,
    /// since the pid may name another process by now. ENODATA (the socket
    /// has no peer pid) is `Err(Io)`.
    pub fn from_peer(sock: impl AsFd) -> Result<Option<PidFd>, ProcError> {
        use nix::errno::Errno;
        use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
        match getsockopt(&sock.as_fd(), PeerPidfd) {
            Ok(fd) => Ok(Some(PidFd(fd))),
            Err(Errno::ENOPROTOOPT | Errno::ENOSYS) => Ok(None),
            Err(Errno::EINVAL | Errno::ESRCH) => Err(ProcError::Gone),
            Err(Errno::ENODATA) => Err(ProcError::Io),
            Err(e) => Err(ProcError::from_errno(e as i32)),
        }
    }

    /// True while the pinned process has not been reaped (signal 0 via
    /// `pidfd_send_signal`; EPERM still means it exists).
    pub fn is_alive(&self) -> bool {
        // SAFETY: plain syscall; null siginfo is allowed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                0,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        rc == 0 || last_errno() == libc::EPERM
    }
}

impl AsFd for PidFd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// How a [`PeerPin`] was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinRoute {
    /// The kernel's own pidfd for the process that connected (SO_PEERPIDFD).
    PeerPidfd,
    /// `pidfd_open` on the SO_PEERCRED pid, between two `/proc/<pid>/stat`
    /// reads that agree (kernels 5.3 to 6.4, or SO_PEERPIDFD refused).
    PidfdOpen,
}

/// The process at the other end of a Unix socket, pinned at accept.
///
/// Where the kernel has SO_PEERPIDFD the pin is the very process that
/// connected. Elsewhere it is taken with `pidfd_open(pid)` at once, and the
/// start time of `/proc/<pid>/stat` is read before and after: if they
/// differ, the pid changed hands around the pin and it refuses
/// ([`ProcError::Changed`]). A kernel with no pidfd at all gets
/// [`ProcError::Unsupported`]: there is nothing to pin with, and the caller
/// refuses whatever needs the pin.
///
/// While [`PeerPin::is_alive`] holds, the pid still names the pinned
/// process, so whatever was read from `/proc/<pid>` before that check was
/// read from it.
#[derive(Debug)]
pub struct PeerPin {
    pid: i32,
    fd: PidFd,
    route: PinRoute,
    /// The start time read around a `pidfd_open` pin.
    start_time: Option<u64>,
}

/// Whether this kernel answers SO_PEERPIDFD: 0 not known yet, 1 yes, 2 no.
/// A property of the running kernel (and of any seccomp filter, which is
/// fixed for the process's life), learnt from the first pin that tells.
static PEER_PIDFD: AtomicU8 = AtomicU8::new(0);

/// A connection's peer as left at accept (see [`PeerPin::at_accept`]).
#[derive(Debug)]
pub enum AcceptedPeer {
    /// The kernel answers SO_PEERPIDFD: it recorded the connecting process
    /// at `connect()` and names that very process whenever asked (or says
    /// it is gone), so the pidfd is taken only by a request that needs it.
    Kernel(i32),
    /// Pinned now, by the pid (or by SO_PEERPIDFD on the first connection).
    Pinned(PeerPin),
    /// The pin failed; a request that needs it refuses.
    Failed(ProcError),
}

impl AcceptedPeer {
    /// The pin, for a request that needs one.
    pub fn pin(self, sock: impl AsFd) -> Result<PeerPin, ProcError> {
        match self {
            AcceptedPeer::Kernel(pid) => PeerPin::take(sock, pid),
            AcceptedPeer::Pinned(p) => Ok(p),
            AcceptedPeer::Failed(e) => Err(e),
        }
    }
}

impl PeerPin {
    /// Pins the peer of `sock`, whose SO_PEERCRED pid is `pid`.
    pub fn take(sock: impl AsFd, pid: i32) -> Result<PeerPin, ProcError> {
        if pid <= 0 {
            return Err(ProcError::Gone);
        }
        let taken = match PidFd::from_peer(sock) {
            Ok(Some(fd)) => Ok(PeerPin {
                pid,
                fd,
                route: PinRoute::PeerPidfd,
                start_time: None,
            }),
            Ok(None) => {
                PEER_PIDFD.store(2, Ordering::Relaxed);
                PeerPin::by_pid(pid)
            }
            Err(e) => Err(e),
        };
        if matches!(&taken, Ok(p) if p.route == PinRoute::PeerPidfd) {
            PEER_PIDFD.store(1, Ordering::Relaxed);
        }
        taken
    }

    /// What accept must do, at the least cost on each kernel: where
    /// SO_PEERPIDFD is known to work, nothing (the kernel already holds the
    /// connector; [`AcceptedPeer::pin`] takes its pidfd later); elsewhere
    /// the pin itself ([`PeerPin::take`]), since by the time a request
    /// needs it the pid may name another process.
    pub fn at_accept(sock: impl AsFd, pid: i32) -> AcceptedPeer {
        if pid > 0 && PEER_PIDFD.load(Ordering::Relaxed) == 1 {
            return AcceptedPeer::Kernel(pid);
        }
        match PeerPin::take(sock, pid) {
            Ok(p) => AcceptedPeer::Pinned(p),
            Err(e) => AcceptedPeer::Failed(e),
        }
    }

    /// The fallback on its own: `pidfd_open(pid)` between two start-time
    /// reads that must agree, and the pidfd still alive after the second.
    pub fn by_pid(pid: i32) -> Result<PeerPin, ProcError> {
        let before = read_stat(pid)?;
        crate::pause::at(crate::pause::PIN);
        let fd = PidFd::open(pid)?;
        let after = read_stat(pid)?;
        if before.start_time != after.start_time {
            return Err(ProcError::Changed);
        }
        if !fd.is_alive() {
            return Err(ProcError::Gone);
        }
        Ok(PeerPin {
            pid,
            fd,
            route: PinRoute::PidfdOpen,
            start_time: Some(after.start_time),
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn route(&self) -> PinRoute {
        self.route
    }

    /// True while the pinned process has not been reaped.
    pub fn is_alive(&self) -> bool {
        self.fd.is_alive()
    }

    /// The pinned process's start time (`/proc/<pid>/stat` field 22),
    /// confirmed by the pin being alive after the read. `Gone` once the
    /// pinned process has exited.
    pub fn start_time(&self) -> Result<u64, ProcError> {
        let start = match self.start_time {
            Some(s) => s,
            None => read_stat(self.pid)?.start_time,
        };
        if !self.is_alive() {
            return Err(ProcError::Gone);
        }
        Ok(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(comm: &str, ppid: i32, start: u64) -> Vec<u8> {
        // 52 fields as in a real 6.x kernel; field 22 is start.
        let mut s = format!(
            "4242 ({comm}) S {ppid} 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start}"
        );
        for _ in 23..=52 {
            s.push_str(" 0");
        }
        s.push('\n');
        s.into_bytes()
    }

    #[test]
    fn stat_plain() {
        let st = parse_stat(&stat_line("bash", 17, 123456)).unwrap();
        assert_eq!(
            st,
            Stat {
                pid: 4242,
                ppid: 17,
                start_time: 123456
            }
        );
    }

    #[test]
    fn stat_comm_with_spaces_and_parens() {
        let st = parse_stat(&stat_line("a) S 1 2 3 (b) ) x", 99, 7)).unwrap();
        assert_eq!((st.pid, st.ppid, st.start_time), (4242, 99, 7));
    }

    #[test]
    fn stat_comm_with_newline_and_nonutf8() {
        let mut line = b"5 (\xff\n) ".to_vec();
        line.extend_from_slice(b"R 1 5 5 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 88 0 0\n");
        let st = parse_stat(&line).unwrap();
        assert_eq!((st.pid, st.ppid, st.start_time), (5, 1, 88));
    }

    #[test]
    fn stat_truncated() {
        let full = stat_line("x", 1, 55);
        // Cut inside the fields before field 22.
        let cut = full.iter().position(|&b| b == b'4').unwrap() + 40;
        assert_eq!(parse_stat(&full[..cut]), Err(ProcError::Malformed));
        assert_eq!(parse_stat(b"4242 (x"), Err(ProcError::Malformed));
        assert_eq!(parse_stat(b""), Err(ProcError::Malformed));
        assert_eq!(parse_stat(b"4242 (x) S"), Err(ProcError::Malformed));
    }

    #[test]
    fn stat_bad_numbers() {
        assert_eq!(
            parse_stat(&stat_line("x", 1, 0)).map(|s| s.start_time),
            Ok(0)
        );
        let bad = String::from_utf8(stat_line("x", 1, 5))
            .unwrap()
            .replace(" 1 4242", " 1x 4242");
        assert_eq!(parse_stat(bad.as_bytes()), Err(ProcError::Malformed));
        let neg = String::from_utf8(stat_line("x", 1, 5))
            .unwrap()
            .replacen("4242", "-3", 1);
        assert_eq!(parse_stat(neg.as_bytes()), Err(ProcError::Malformed));
        assert_eq!(
            parse_stat(b"abc (x) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 9"),
            Err(ProcError::Malformed)
        );
        let huge = vec![b'1'; STAT_MAX + 1];
        assert_eq!(parse_stat(&huge), Err(ProcError::TooLarge));
    }

    #[test]
    fn status_uid() {
        let s = b"Name:\tbash\nUmask:\t0022\nState:\tS\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_status_uid(s), Ok(1000));
        assert_eq!(parse_status_uid(b"Name:\tx\n"), Err(ProcError::Malformed));
        assert_eq!(parse_status_uid(b"Uid:\t\n"), Err(ProcError::Malformed));
        assert_eq!(parse_status_uid(b"Uid:\tx1\n"), Err(ProcError::Malformed));
    }

    #[test]
    fn argv0_split() {
        assert_eq!(parse_argv0(b"claude\0--resume\0").unwrap(), b"claude");
        assert_eq!(parse_argv0(b"node /x/cli.js").unwrap(), b"node /x/cli.js");
        assert_eq!(parse_argv0(b"").unwrap(), b"");
        let long = vec![b'a'; ARGV0_MAX + 1];
        assert_eq!(parse_argv0(&long), Err(ProcError::TooLarge));
        let mut ok = vec![b'a'; ARGV0_MAX];
        ok.push(0);
        assert_eq!(parse_argv0(&ok).unwrap().len(), ARGV0_MAX);
    }

    #[test]
    fn environ_split() {
        let env = parse_environ(b"A=1\0B==2\0\0NOEQ\0C=\0");
        assert_eq!(
            env,
            vec![
                (b"A".to_vec(), b"1".to_vec()),
                (b"B".to_vec(), b"=2".to_vec()),
                (b"C".to_vec(), b"".to_vec()),
            ]
        );
        assert!(parse_environ(b"").is_empty());
    }

    #[test]
    fn real_self() {
        let me = std::process::id() as i32;
        let st = read_stat(me).unwrap();
        assert_eq!(st.pid, me);
        assert_eq!(st.ppid, nix::unistd::getppid().as_raw());
        assert_eq!(read_uid(me).unwrap(), nix::unistd::getuid().as_raw());
        assert!(read_exe(me).unwrap().is_absolute());
        assert!(read_environ(me).is_ok());
        let fd = PidFd::open(me).unwrap();
        assert!(fd.is_alive());
        assert_eq!(read_stat(i32::MAX).err(), Some(ProcError::Gone));
        assert_eq!(PidFd::open(0).err(), Some(ProcError::Gone));
    }

    #[test]
    fn reaped_child_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let fd = PidFd::open(child.id() as i32).unwrap();
        child.wait().unwrap();
        assert!(!fd.is_alive());
    }

    #[test]
    fn peer_cred_and_pidfd_on_socketpair() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (pid, uid, gid) = peer_cred(&a).unwrap();
        assert_eq!(pid, std::process::id() as i32);
        assert_eq!(uid, nix::unistd::getuid().as_raw());
        assert_eq!(gid, nix::unistd::getgid().as_raw());
        let pin = PidFd::from_peer(&a).unwrap();
        // SO_PEERPIDFD exists since Linux 6.5: on such kernels it must work.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release.split(|c: char| !c.is_ascii_digit());
        let major: u32 = v.next().unwrap().parse().unwrap();
        let minor: u32 = v.next().unwrap().parse().unwrap();
        if (major, minor) >= (6, 5) {
            assert!(pin.as_ref().is_some_and(PidFd::is_alive));
        }
    }

    #[test]
    fn peer_pin_both_routes_name_the_live_peer() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let me = std::process::id() as i32;
        let mine = read_stat(me).unwrap().start_time;
        let pin = PeerPin::take(&a, me).unwrap();
        assert_eq!(pin.pid(), me);
        assert!(pin.is_alive());
        assert_eq!(pin.start_time(), Ok(mine));
        let by_pid = PeerPin::by_pid(me).unwrap();
        assert_eq!(by_pid.route(), PinRoute::PidfdOpen);
        assert_eq!(by_pid.start_time(), Ok(mine));
        assert_eq!(PeerPin::take(&a, 0).err(), Some(ProcError::Gone));
        // At accept: pinned now, or left to the kernel once it has shown it
        // answers SO_PEERPIDFD; either way the pin names the live peer.
        let later = PeerPin::at_accept(&a, me);
        if pin.route() == PinRoute::PeerPidfd {
            assert!(matches!(later, AcceptedPeer::Kernel(p) if p == me));
        }
        assert_eq!(later.pin(&a).and_then(|p| p.start_time()), Ok(mine));
        assert!(matches!(
            PeerPin::at_accept(&a, 0),
            AcceptedPeer::Failed(ProcError::Gone)
        ));
    }

    #[test]
    fn peer_pin_of_a_reaped_process_refuses() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let pin = PeerPin::by_pid(pid).unwrap();
        child.wait().unwrap();
        assert!(!pin.is_alive());
        assert_eq!(pin.start_time(), Err(ProcError::Gone));
        // Reaped before the pin: nothing to pin (unless the pid was reused
        // at once, in which case the pin names that process, which is why
        // the caller must pin at accept).
        match PeerPin::by_pid(pid) {
            Err(ProcError::Gone) => {}
            Ok(p) => assert!(p.start_time().is_ok()),
            Err(e) => panic!("{e:?}"),
        }
    }
}
