//! Debug builds only: a test holds a race window open at a named point.
//!
//! `MOSAIC_PROOF_TEST_PAUSE=POINT:FIFO`. When a debug build reaches
//! `POINT` and `FIFO` exists and is a FIFO, it opens it for reading, which
//! blocks until the test opens it for writing, and reads it to its end. The
//! test knows the process is at the point once its own non-blocking open
//! for writing succeeds (ENXIO until then), does what the window is for
//! (kills the peer, lets its pid be reused), and closes its end to let the
//! process go on; it removes the FIFO before the next request that must not
//! wait. No FIFO there, another point named, or no variable: no pause.
//!
//! A release build compiles [`at`] to nothing and never reads the variable.
//! `docs/proof.md` ("Test hooks") lists the points and the tests that use
//! them.

/// The variable a debug build reads at each pause point.
pub const PAUSE_ENV: &str = "MOSAIC_PROOF_TEST_PAUSE";

/// In a pid pin ([`crate::procfs::PeerPin::by_pid`]): after the first
/// start-time read, before `pidfd_open`.
pub const PIN: &str = "pin";

/// In `mosaic-proofd`: after a `verify` request's checks all passed, before
/// its answer is written.
pub const PROVEN: &str = "proven";

/// Waits at `point` when the variable names it and its FIFO exists.
#[cfg(debug_assertions)]
pub fn at(point: &str) {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;
    let Some(value) = std::env::var_os(PAUSE_ENV) else {
        return;
    };
    let bytes = value.as_bytes();
    let Some(colon) = bytes.iter().position(|&b| b == b':') else {
        return;
    };
    let (Some(name), Some(path)) = (bytes.get(..colon), bytes.get(colon + 1..)) else {
        return;
    };
    if name != point.as_bytes() {
        return;
    }
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_fifo() => {}
        _ => return,
    }
    if let Ok(mut fifo) = std::fs::File::open(path) {
        let mut sink = Vec::new();
        let _ = fifo.read_to_end(&mut sink);
    }
}

/// A release build: no pause point.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn at(_point: &str) {}
