//! sd_notify: readiness and status lines to systemd when `NOTIFY_SOCKET` is set.

use std::os::unix::net::UnixDatagram;

/// Sends `msg` to `$NOTIFY_SOCKET`; does nothing without one.
pub fn send(msg: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let _ = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        match std::os::unix::net::SocketAddr::from_abstract_name(name) {
            Ok(addr) => sock.send_to_addr(msg.as_bytes(), &addr),
            Err(e) => Err(e),
        }
    } else {
        sock.send_to(msg.as_bytes(), &path)
    };
}
