//! Process hardening at start: no new privileges, no capabilities, not dumpable.
//!
//! `mosaic-bus` needs no privilege at all: it owns files under a data root
//! that belongs to its user and talks over Unix sockets. So before any other
//! thread exists (capabilities and `no_new_privs` are per thread and inherited
//! by threads created later) it
//!
//! 1. sets `PR_SET_NO_NEW_PRIVS`, so nothing it or its proof helper execs
//!    can gain privileges through setuid bits or file capabilities;
//! 2. clears the ambient set;
//! 3. drops every capability from the bounding set (needs `CAP_SETPCAP`;
//!    an unprivileged broker gets `EPERM` and already has none to drop);
//! 4. empties the effective, permitted and inheritable sets with `capset`;
//! 5. marks itself not dumpable, so another process of the same user (an
//!    agent, say) cannot read capabilities out of its memory through
//!    `/proc/<pid>/mem` or `ptrace`, and a crash writes no core file with
//!    capabilities in it.
//!
//! A step that fails is reported, not fatal: the broker is still correct
//! without it, and under systemd's seccomp filter some calls answer `EPERM`
//! because systemd already did the same thing.

use std::io;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// What [`apply`] could not do, by step name and errno (empty when all worked).
#[derive(Debug, Default)]
pub struct Report {
    pub failed: Vec<(&'static str, i32)>,
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Applies every step; call it first thing in `main`, before any thread starts.
pub fn apply() -> Report {
    let mut report = Report::default();
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        report.failed.push(("no-new-privs", errno()));
    }
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    // EINVAL: a kernel without ambient capabilities (before 4.3) has none to clear.
    if rc != 0 && errno() != libc::EINVAL {
        report.failed.push(("ambient", errno()));
    }
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments only; EINVAL past the last cap.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            match errno() {
                libc::EINVAL => break,
                // Unprivileged: no CAP_SETPCAP, and then nothing to drop that matters.
                libc::EPERM => break,
                e => {
                    report.failed.push(("bounding-set", e));
                    break;
                }
            }
        }
    }
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut held = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget with a valid header and a two-element data array.
    let got = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            held.as_mut_ptr(),
        )
    } == 0;
    let none_held = got
        && held
            .iter()
            .all(|d| d.effective == 0 && d.permitted == 0 && d.inheritable == 0);
    // Under systemd with CapabilityBoundingSet= the sets are already empty
    // (and its seccomp filter may refuse capset): nothing to do then.
    if !none_held {
        let empty = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        header.version = LINUX_CAPABILITY_VERSION_3;
        header.pid = 0;
        // SAFETY: capset with a valid header and a two-element data array, as
        // _LINUX_CAPABILITY_VERSION_3 requires.
        if unsafe {
            libc::syscall(
                libc::SYS_capset,
                &mut header as *mut CapHeader,
                empty.as_ptr(),
            )
        } != 0
        {
            report.failed.push(("capset", errno()));
        }
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } != 0 {
        report.failed.push(("dumpable", errno()));
    }
    report
}
