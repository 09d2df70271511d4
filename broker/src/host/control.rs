//! `--control PATH`: the control socket's accept loop. One host at a time,
//! of the broker's own UID (`peer-uid` otherwise); the place goes to the
//! first connection that sends a byte (peeked, not read), so a connection
//! that closes without a word never holds it; a connection while a host
//! holds the place is answered `host-busy` at once; at most
//! [`MAX_PENDING_HOSTS`] may wait unspoken. Each host is served by
//! [`channel::serve`] on its own thread.

use super::channel::{self, End, Shared};
use crate::error::Code;
use crate::proof::VerifierFactory;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Binds the control socket at `path` (absolute, in a private directory of
/// ours). A stale socket nobody answers on is replaced; a live one refuses
/// `control-in-use` and is left alone.
pub fn bind(path: &Path) -> Result<UnixListener, Code> {
    if !path.is_absolute() {
        return Err(Code::Usage);
    }
    let me = nix::unistd::geteuid().as_raw();
    let parent_ok = path
        .parent()
        .and_then(|p| std::fs::symlink_metadata(p).ok())
        .is_some_and(|m| m.file_type().is_dir() && m.uid() == me && m.mode() & 0o077 == 0);
    if !parent_ok {
        return Err(Code::UnsafePath);
    }
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_socket() {
            return Err(Code::UnsafePath);
        }
        // A socket someone still listens on is a live broker's, not a
        // stale one: taking its path would cut that broker off from its
        // host. Only a socket nobody answers on is replaced.
        if UnixStream::connect(path).is_ok() {
            return Err(Code::ControlInUse);
        }
        if std::fs::remove_file(path).is_err() {
            return Err(Code::UnsafePath);
        }
    }
    let Ok(listener) = UnixListener::bind(path) else {
        return Err(Code::UnsafePath);
    };
    if std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).is_err() {
        let _ = std::fs::remove_file(path);
        return Err(Code::UnsafePath);
    }
    Ok(listener)
}

/// Accepts hosts on `listener` until one sends `close`. Connections are
/// accepted on their own thread (see [`accept_hosts`]).
pub fn serve(
    listener: UnixListener,
    shared: Shared,
    verifier: VerifierFactory,
) -> Result<(), Code> {
    // Connections are accepted on their own thread, so a connection that
    // arrives while a host is connected is answered at once (`host-busy`)
    // instead of waiting unanswered in the backlog; only `close` (or a
    // signal) ends the broker.
    let (closed_tx, closed_rx) = std::sync::mpsc::channel::<()>();
    let busy = Arc::new(AtomicBool::new(false));
    let accepting = std::thread::Builder::new()
        .name("bus-control".into())
        .spawn(move || accept_hosts(listener, shared, verifier, busy, closed_tx));
    if accepting.is_err() {
        return Err(Code::StorageUnavailable);
    }
    // Every sender gone (it cannot happen while the accept thread runs)
    // counts as a close too: the broker never outlives its control socket.
    let _ = closed_rx.recv();
    Ok(())
}

/// The control socket's accept loop: one host at a time, of our own UID.
fn accept_hosts(
    listener: UnixListener,
    shared: Shared,
    verifier: VerifierFactory,
    busy: Arc<AtomicBool>,
    closed: std::sync::mpsc::Sender<()>,
) {
    let me = nix::unistd::geteuid().as_raw();
    let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else {
            continue;
        };
        if peer_uid(&conn) != Some(me) {
            tracing::warn!(
                code = "peer-uid",
                "control connection from another user refused"
            );
            turn_away(conn, Code::PeerUid);
            continue;
        }
        if busy.load(Ordering::SeqCst) {
            host_busy(conn);
            continue;
        }
        if pending.fetch_add(1, Ordering::SeqCst) >= MAX_PENDING_HOSTS {
            pending.fetch_sub(1, Ordering::SeqCst);
            host_busy(conn);
            continue;
        }
        let (shared, taken, closed, waiting) = (
            shared.clone(),
            busy.clone(),
            closed.clone(),
            pending.clone(),
        );
        let served = std::thread::Builder::new()
            .name("bus-host".into())
            .spawn(move || {
                // The slot is taken by the first byte, not by the connect:
                // a connection that closes without a word (another broker
                // testing whether this socket is live) never holds it, so
                // it cannot turn a real host away.
                let spoke = first_byte_arrives(&conn);
                waiting.fetch_sub(1, Ordering::SeqCst);
                if !spoke {
                    return;
                }
                if taken.swap(true, Ordering::SeqCst) {
                    host_busy(conn);
                    return;
                }
                let end = channel::serve(conn, &shared, verifier);
                if end == End::Closed {
                    // Stays busy: nobody else is let in while closing.
                    let _ = closed.send(());
                    return;
                }
                // Free the slot and say so under the runtime's lock: a next
                // host is accepted from here on, but its boot (and the
                // status line that goes with it) waits for this line.
                let slot = shared.lock().unwrap_or_else(|p| p.into_inner());
                taken.store(false, Ordering::SeqCst);
                match end {
                    End::BootRefused(code) => {
                        crate::host::notify::send(&format!(
                            "STATUS=waiting for the host (boot refused: {code})"
                        ));
                        tracing::warn!(code = code.as_str(), "boot refused");
                    }
                    _ if slot.is_some() => crate::host::notify::send(
                        "STATUS=booted; host disconnected, waiting for the host",
                    ),
                    _ => crate::host::notify::send("STATUS=waiting for the host"),
                }
                drop(slot);
            });
        if served.is_err() {
            pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Waits until the peer sends its first byte (true) or closes or fails
/// (false), leaving the byte unread for the channel.
fn first_byte_arrives(conn: &UnixStream) -> bool {
    let mut byte = 0u8;
    loop {
        let peeked = nix::sys::socket::recv(
            conn.as_raw_fd(),
            std::slice::from_mut(&mut byte),
            nix::sys::socket::MsgFlags::MSG_PEEK,
        );
        match peeked {
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(n) => return n > 0,
            Err(_) => return false,
        }
    }
}

/// Most connections at once that have not said anything yet; more are
/// answered `host-busy`.
const MAX_PENDING_HOSTS: usize = 16;

fn host_busy(conn: UnixStream) {
    tracing::warn!(
        code = "host-busy",
        "a second host connection refused while one is connected"
    );
    turn_away(conn, Code::HostBusy);
}

/// Answers a connection the broker will not serve with its code, then
/// closes it. The reply is one short line, so the write does not block on
/// a peer that never reads; the timeout only guards against the odd case.
fn turn_away(mut conn: UnixStream, code: Code) {
    use std::io::Write;
    let _ = conn.set_write_timeout(Some(std::time::Duration::from_secs(1)));
    let reply = crate::server::envelope::refusal(code, None);
    let _ = writeln!(conn, "{reply}");
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

fn peer_uid(conn: &UnixStream) -> Option<u32> {
    mosaic_proofd::procfs::peer_cred(conn)
        .ok()
        .map(|(_, uid, _)| uid)
}
