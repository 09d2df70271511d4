//! Handing a proof helper to systemd's file descriptor store.
//!
//! A user unit that sandboxes the broker with namespaces also puts it in a
//! user namespace, and from there the kernel refuses to read another
//! process's `/proc/<pid>/environ` and `/proc/<pid>/exe`. So under systemd
//! the helper is started outside that sandbox (`ExecStartPre=+mosaic-proofd
//! --systemd-fdstore`): [`launch`] makes a socketpair, forks the helper onto
//! one end, and sends the other end to systemd with `FDSTORE=1` and
//! `FDNAME=mosaic-proofd`; systemd passes it to the broker's `ExecStart=`
//! process, which speaks the usual protocol over it. The channel never has a
//! path, so no other process can stand in for the helper.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// The descriptor's name in the store; the broker looks for it.
pub const NAME: &str = "mosaic-proofd";

/// How long [`barrier`] waits for systemd to take our messages.
pub const BARRIER_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds the `sockaddr_un` for `$NOTIFY_SOCKET` (a path, or `@name` for the
/// abstract namespace).
fn notify_addr(path: &OsStr) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_encoded_bytes();
    let (abstract_ns, name) = match bytes.strip_prefix(b"@") {
        Some(rest) => (true, rest),
        None => (false, bytes),
    };
    let start = usize::from(abstract_ns);
    // A path needs its terminating NUL inside sun_path.
    if name.is_empty() || start + name.len() + usize::from(!abstract_ns) > addr.sun_path.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    if !abstract_ns && name[0] != b'/' {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (i, b) in name.iter().enumerate() {
        addr.sun_path[start + i] = *b as libc::c_char;
    }
    let base = std::mem::size_of::<libc::sa_family_t>();
    let len = base + start + name.len() + usize::from(!abstract_ns);
    Ok((addr, len as libc::socklen_t))
}

/// Sends one datagram `msg` to `$NOTIFY_SOCKET`, with `fds` attached as
/// `SCM_RIGHTS` when there are any.
pub fn send(notify_socket: &OsStr, msg: &str, fds: &[RawFd]) -> io::Result<()> {
    let (mut addr, addr_len) = notify_addr(notify_socket)?;
    // SAFETY: plain socket(2) call; the fd is owned right after.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socket() succeeded; we own the fd.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    // u64 elements keep the control buffer aligned for cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: an all-zero msghdr is valid; every pointer set below outlives
    // the sendmsg call.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_name = &mut addr as *mut libc::sockaddr_un as *mut libc::c_void;
    hdr.msg_namelen = addr_len;
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    if !fds.is_empty() {
        hdr.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        hdr.msg_controllen = space as _;
        // SAFETY: msg_control points at `space` zeroed, aligned bytes, enough
        // for one cmsghdr carrying `fds`.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&hdr);
            if cmsg.is_null() {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr() as *const u8,
                libc::CMSG_DATA(cmsg),
                fd_bytes,
            );
        }
    }
    // SAFETY: hdr is fully initialised above.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &hdr, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `sd_notify_barrier`: sends `BARRIER=1` with the write end of a fresh pipe
/// and waits until systemd closes it, i.e. until it has processed every
/// message we sent before. Without it, systemd may see this process exit
/// before it reads the `FDSTORE=1` message and then drop it.
pub fn barrier(notify_socket: &OsStr, timeout: Duration) -> io::Result<()> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded; both fds are ours.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    send(notify_socket, "BARRIER=1", &[write.as_raw_fd()])?;
    drop(write);
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        let mut pfd = libc::pollfd {
            fd: read.as_raw_fd(),
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(60_000) as i32) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc > 0 && pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            return Ok(());
        }
    }
}

/// A fresh `socketpair(AF_UNIX, SOCK_STREAM)`, both ends close-on-exec.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::proof::client::socketpair_cloexec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn notify_addresses() {
        let (_, len) = notify_addr(&OsString::from("/run/user/1/systemd/notify")).unwrap();
        assert_eq!(len as usize, 2 + "/run/user/1/systemd/notify".len() + 1);
        let (a, len) = notify_addr(&OsString::from("@abc")).unwrap();
        assert_eq!(len as usize, 2 + 1 + 3);
        assert_eq!(a.sun_path[0], 0);
        assert_eq!(a.sun_path[1], b'a' as libc::c_char);
        for bad in ["", "@", "relative/path"] {
            assert!(notify_addr(&OsString::from(bad)).is_err(), "{bad:?}");
        }
        let long = format!("/{}", "x".repeat(200));
        assert!(notify_addr(&OsString::from(long)).is_err());
    }
}
