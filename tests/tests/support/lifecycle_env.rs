//! Shared setup of `lifecycle.rs` and `data_root.rs`.
#![allow(dead_code)]

use mosaic_tests::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

pub fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// One request on its own connection, or None once the broker is gone.
pub fn try_call(socket: &std::path::Path, line: &[u8]) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(line).ok()?;
    s.shutdown(std::net::Shutdown::Write).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    serde_json::from_slice(out.trim_ascii_end()).ok()
}

/// Boots with `cfg` and expects the refusal `code`: the host's reply, exit 2,
/// and `{"error":CODE}` as the whole of stderr (DESIGN.md: one line; what the
/// broker logged before the refusal is not printed).
pub fn refused_with(root: &std::path::Path, cfg: serde_json::Value, code: &str) {
    let (mut b, reply) = Broker::spawn(root, cfg);
    assert_eq!(reply, json!({"ok": false, "error": code}));
    let s = b.wait(Duration::from_secs(10)).expect("exits");
    assert_eq!(s.code(), Some(2), "{code}");
    let err = b.stderr();
    let want = format!(r#"{{"error":"{code}"}}"#);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with(r#"{"error""#))
        .collect();
    assert_eq!(lines, vec![want.as_str()], "{err}");
    assert_eq!(err, format!("{want}\n"));
}

pub fn euid() -> u32 {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}
