//! Handing a proof helper to systemd's file descriptor store.
//!
//! A user unit that sandboxes the broker with namespaces also puts it in a
//! user namespace, and from there the kernel refuses to read another
//! process's `/proc/<pid>/environ` and `/proc/<pid>/exe`. So under systemd
//! the helper is started outside that sandbox (`ExecStartPre=+mosaic-proofd
//! --systemd-fdstore`): [`launch`] makes a socketpair, forks the helper onto
//! one end, and sends the other end to systemd with `FDSTORE=1` and
//! `FDNAME=mosaic-proofd` (through `mosaic_os::notify`, the one sd_notify); systemd passes it to the broker's `ExecStart=`
//! process, which speaks the usual protocol over it. The channel never has a
//! path, so no other process can stand in for the helper.

use std::io;
use std::os::fd::OwnedFd;

/// The descriptor's name in the store; the broker looks for it.
pub const NAME: &str = "mosaic-proofd";

/// A fresh `socketpair(AF_UNIX, SOCK_STREAM)`, both ends close-on-exec.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::proof::client::socketpair_cloexec()
}
