//! What the proof helper's test files share (`mod common;` in each).

use std::process::{Command, Stdio};

/// Fails the test, saying why, unless this process may make a PID
/// namespace with its own `/proc` (`unshare -p -f --mount-proc`): the
/// cases that need one do not pass by skipping.
pub fn require_pid_namespace() {
    let probe = Command::new("unshare")
        .args(["-p", "-f", "--mount-proc", "true"])
        .stderr(Stdio::piped())
        .output()
        .expect("unshare(1) is installed");
    assert!(
        probe.status.success(),
        "unshare -p -f --mount-proc is not permitted here ({}): this case needs a PID namespace",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
}
