//! sd_notify: readiness and status lines to systemd when `NOTIFY_SOCKET` is set.
//!
//! Only `--control` mode is systemd's: [`init`] takes the variable out of the
//! environment in every mode (as `sd_notify(unset_environment=1)` would), so
//! the proof helper never inherits it and a broker forked by a host that runs
//! under systemd never reports to the host's unit.

use std::ffi::OsString;
use std::sync::OnceLock;

static SOCKET: OnceLock<Option<OsString>> = OnceLock::new();

/// Takes `NOTIFY_SOCKET` out of the environment; keeps it when `enabled`.
/// Call once, before any other thread starts.
pub fn init(enabled: bool) {
    let path = std::env::var_os("NOTIFY_SOCKET");
    std::env::remove_var("NOTIFY_SOCKET");
    let _ = SOCKET.set(path.filter(|_| enabled));
}

/// `STATUS=` once a boot succeeded (control mode only; a no-op otherwise).
pub fn booted(socket: &std::path::Path) {
    send(&format!("STATUS=booted; serving {}", socket.display()));
}

/// Sends `msg` as one datagram to the notify socket; does nothing without one
/// or before [`init`].
pub fn send(msg: &str) {
    let Some(Some(path)) = SOCKET.get() else {
        return;
    };
    let _ = mosaic_os::notify::send(path, msg, &[]);
}
