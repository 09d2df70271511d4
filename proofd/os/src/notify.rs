//! `sd_notify`, written once: one datagram of `KEY=VALUE` lines to
//! `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace), with
//! descriptors attached as `SCM_RIGHTS` for `FDSTORE=1`, and
//! `sd_notify_barrier`.
//!
//! The `sd-notify` crate was the first choice; it does not do this job: it
//! connects to `$NOTIFY_SOCKET` as a filesystem path only (an `@` address,
//! which systemd uses in containers and the tests use, fails) and has no
//! barrier, which the fd-store handover needs. `nix` gives the same calls
//! without `unsafe`: `sendmsg` with `ControlMessage::ScmRights`, `pipe2`,
//! `poll`.

use nix::sys::socket::{sendmsg, socket, AddressFamily, ControlMessage, MsgFlags, SockFlag};
use nix::sys::socket::{SockType, UnixAddr};
use std::ffi::OsStr;
use std::io;
use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

/// How long [`barrier`] waits by default for systemd to take our messages.
pub const BARRIER_TIMEOUT: Duration = Duration::from_secs(5);

/// The address `$NOTIFY_SOCKET` names: an absolute path, or `@name` for the
/// abstract namespace. Anything else (empty, relative, too long) is refused.
pub fn address(notify_socket: &OsStr) -> io::Result<UnixAddr> {
    let bytes = notify_socket.as_encoded_bytes();
    let bad = || io::Error::from(io::ErrorKind::InvalidInput);
    match bytes.strip_prefix(b"@") {
        Some([]) => Err(bad()),
        Some(name) => UnixAddr::new_abstract(name).map_err(|_| bad()),
        None if bytes.first() == Some(&b'/') => {
            UnixAddr::new(std::path::Path::new(notify_socket)).map_err(|_| bad())
        }
        None => Err(bad()),
    }
}

/// Sends `msg` (newline-separated `KEY=VALUE` lines) as one datagram to
/// `notify_socket`, with `fds` attached as `SCM_RIGHTS` when there are any.
pub fn send(notify_socket: &OsStr, msg: &str, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let addr = address(notify_socket)?;
    let sock = socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let rights = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &rights };
    let iov = [IoSlice::new(msg.as_bytes())];
    sendmsg(
        sock.as_raw_fd(),
        &iov,
        cmsgs,
        MsgFlags::MSG_NOSIGNAL,
        Some(&addr),
    )?;
    Ok(())
}

/// `sd_notify_barrier`: sends `BARRIER=1` with the write end of a fresh pipe
/// and waits until systemd closes it, i.e. until it has processed every
/// message sent before. Without it, systemd may see the sender exit before
/// it reads an `FDSTORE=1` message and then drop the descriptors.
pub fn barrier(notify_socket: &OsStr, timeout: Duration) -> io::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    send(notify_socket, "BARRIER=1", &[write.as_fd()])?;
    drop(write);
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        let ms = u16::try_from(left.as_millis().min(60_000)).unwrap_or(60_000);
        let mut fds = [PollFd::new(read.as_fd(), PollFlags::empty())];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => {}
            Ok(_) => {
                let hup = PollFlags::POLLHUP | PollFlags::POLLERR;
                if fds[0].revents().is_some_and(|r| r.intersects(hup)) {
                    return Ok(());
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn notify_addresses() {
        let p = address(&OsString::from("/run/user/1/systemd/notify")).unwrap();
        assert_eq!(
            p.path(),
            Some(std::path::Path::new("/run/user/1/systemd/notify"))
        );
        let a = address(&OsString::from("@abc")).unwrap();
        assert_eq!(a.as_abstract(), Some(&b"abc"[..]));
        for bad in ["", "@", "relative/path"] {
            assert!(address(&OsString::from(bad)).is_err(), "{bad:?}");
        }
        let long = format!("/{}", "x".repeat(200));
        assert!(address(&OsString::from(long)).is_err());
    }

    /// A real datagram with a real descriptor attached arrives as sent.
    #[test]
    fn send_carries_the_message_and_the_descriptor() {
        use nix::sys::socket::{recvmsg, ControlMessageOwned};
        let dir = std::env::temp_dir().join(format!("mosaic-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        let (r, _w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        send(path.as_os_str(), "FDSTORE=1\nFDNAME=x", &[r.as_fd()]).unwrap();
        let mut buf = [0u8; 64];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        let msg = recvmsg::<UnixAddr>(
            rx.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        )
        .unwrap();
        let got: Vec<RawFd> = msg
            .cmsgs()
            .unwrap()
            .flat_map(|c| match c {
                ControlMessageOwned::ScmRights(fds) => fds,
                _ => Vec::new(),
            })
            .collect();
        let n = msg.bytes;
        assert_eq!(got.len(), 1);
        assert_eq!(&buf[..n], b"FDSTORE=1\nFDNAME=x");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
