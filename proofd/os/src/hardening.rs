//! Process hardening, one implementation for every Mosaic process: no new
//! privileges, no capabilities, not dumpable, and (for a helper) death with
//! its parent.
//!
//! `mosaic-bus` needs no privilege at all: it owns files under a data root
//! that belongs to its user and talks over Unix sockets. So before any other
//! thread exists (capabilities and `no_new_privs` are per thread and inherited
//! by threads created later) [`apply`]
//!
//! 1. sets `PR_SET_NO_NEW_PRIVS`, so nothing it or its proof helper execs
//!    can gain privileges through setuid bits or file capabilities;
//! 2. sheds every capability ([`shed_capabilities`]): the ambient set, the
//!    bounding set (needs `CAP_SETPCAP`; an unprivileged process has none to
//!    drop), then the inheritable, effective and permitted sets;
//! 3. marks itself not dumpable, so another process of the same user (an
//!    agent, say) cannot read capabilities out of its memory through
//!    `/proc/<pid>/mem` or `ptrace`, and a crash writes no core file with
//!    capabilities in it.
//!
//! The proof helper uses the same steps plus [`die_with_parent`]; the shims
//! shed their capabilities before their re-exec. `nix` makes the `prctl`
//! calls and `caps` the capability-set calls: nothing here is `unsafe`.

use caps::{CapSet, Capability};
use nix::errno::Errno;

/// What a step could not do, by step name and errno (empty when all worked).
#[derive(Debug, Default)]
pub struct Report {
    pub failed: Vec<(&'static str, i32)>,
}

/// The errno a `caps` call left behind (it reports failures as text only).
fn caps_errno() -> i32 {
    Errno::last_raw()
}

/// `PR_SET_NO_NEW_PRIVS`: nothing this process execs gains privileges.
pub fn no_new_privs() -> Result<(), i32> {
    nix::sys::prctl::set_no_new_privs().map_err(|e| e as i32)
}

/// `PR_SET_PDEATHSIG(SIGKILL)`: the kernel kills this process when the
/// thread that forked it exits.
pub fn die_with_parent() -> Result<(), i32> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(|e| e as i32)
}

/// `PR_SET_DUMPABLE(0)`: no core file, no `ptrace` or `/proc/<pid>/mem` by
/// processes of the same user.
pub fn not_dumpable() -> Result<(), i32> {
    nix::sys::prctl::set_dumpable(false).map_err(|e| e as i32)
}

/// Drops every capability this process holds, in an order that keeps the
/// rights each step needs until it has run: the ambient set; the bounding
/// set (needs `CAP_SETPCAP`, so while the effective set still has it), so
/// that an exec as root is not granted the full set again; then the
/// inheritable, effective and permitted sets (skipped when all three are
/// already empty: under systemd's `CapabilityBoundingSet=` they are, and its
/// seccomp filter may refuse the call). Steps that fail are returned by
/// name: `ambient`, `bounding-set`, `capset`.
pub fn shed_capabilities() -> Report {
    let mut report = Report::default();
    // EINVAL: a kernel without ambient capabilities (before 4.3) has none.
    if caps::clear(None, CapSet::Ambient).is_err() && caps_errno() != libc::EINVAL {
        report.failed.push(("ambient", caps_errno()));
    }
    let setpcap = caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false);
    if setpcap {
        let all = caps::runtime::procfs_all_supported(None).unwrap_or_else(|_| caps::all());
        for cap in all {
            if caps::drop(None, CapSet::Bounding, cap).is_err() {
                report.failed.push(("bounding-set", caps_errno()));
                break;
            }
        }
    }
    let held = [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted]
        .into_iter()
        .any(|set| caps::read(None, set).map_or(true, |s| !s.is_empty()));
    if held {
        for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
            if caps::clear(None, set).is_err() {
                report.failed.push(("capset", caps_errno()));
                break;
            }
        }
    }
    report
}

/// The broker's hardening: every step, none fatal (the broker is still
/// correct without one, and under systemd some calls answer `EPERM`
/// because systemd already did the same thing). Call it first thing in
/// `main`, before any thread starts.
pub fn apply() -> Report {
    let mut report = Report::default();
    if let Err(e) = no_new_privs() {
        report.failed.push(("no-new-privs", e));
    }
    report.failed.extend(shed_capabilities().failed);
    if let Err(e) = not_dumpable() {
        report.failed.push(("dumpable", e));
    }
    report
}
