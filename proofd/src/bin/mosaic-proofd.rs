//! `mosaic-proofd --fd N`: the broker's process-proof helper.
//!
//! Fd N is its end of a `socketpair(AF_UNIX, SOCK_STREAM)` the broker made.
//! At start it asks for SIGKILL when its parent dies, sets
//! `PR_SET_NO_NEW_PRIVS` and clears every capability set; then it answers
//! newline-delimited JSON (see `docs/proof.md`) until EOF, and exits 0.
//! It never opens a database and never logs a request (nonces stay out of
//! every log).
//!
//! `mosaic-proofd --systemd-fdstore` is the same helper started by systemd
//! outside the broker's sandbox (`ExecStartPre=+`): it makes the socketpair
//! itself, forks the helper onto one end and hands the other to systemd's
//! file descriptor store for the broker (see `mosaic_proofd::fdstore`). The
//! helper then serves until every copy of that end is closed.

use std::io::{BufReader, BufWriter};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use mosaic_proofd::fdstore;
use mosaic_proofd::proof::protocol::Server;
use mosaic_proofd::proof::table::ProcTable;

fn fail(code: &str) -> ExitCode {
    eprintln!("{{\"error\":\"{code}\"}}");
    ExitCode::from(2)
}

enum Mode {
    /// Serve on an inherited socket, dying with the parent.
    Fd(i32),
    /// Fork the helper and hand its channel to systemd.
    FdStore,
}

fn parse_args() -> Option<Mode> {
    // Not `env::args`: an argument that is not UTF-8 is a usage error, not a panic.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args.as_slice() {
        [flag, n] if flag == "--fd" => n
            .to_str()?
            .parse::<i32>()
            .ok()
            .filter(|n| *n > 2)
            .map(Mode::Fd),
        [flag] if flag == "--systemd-fdstore" => Some(Mode::FdStore),
        _ => None,
    }
}

/// PDEATHSIG (when `with_parent`), NO_NEW_PRIVS, then empty
/// effective/permitted/inheritable sets.
fn harden(with_parent: bool) -> Result<(), &'static str> {
    // SAFETY: prctl/capset/getppid with plain integer arguments and a valid
    // pointer to a local header/data array.
    unsafe {
        if with_parent
            && libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
        {
            return Err("pdeathsig");
        }
        // A parent that died before PDEATHSIG was armed closed its end of
        // the socketpair (CLOEXEC there), so the serve loop sees EOF.
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err("no-new-privs");
        }
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
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        ) != 0
        {
            return Err("capset");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match parse_args() {
        Some(Mode::Fd(fd)) => inherited(fd),
        Some(Mode::FdStore) => fdstore(),
        None => fail("usage"),
    }
}

fn inherited(fd: i32) -> ExitCode {
    if let Err(code) = harden(true) {
        return fail(code);
    }
    // SAFETY: fstat on an integer fd with a valid out-pointer.
    let is_socket = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFSOCK
    };
    if !is_socket {
        return fail("bad-fd");
    }
    // SAFETY: fd is an open socket handed to us by the broker; we own it now.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    // Keep it out of anything we might exec (we exec nothing, but be tidy).
    // SAFETY: fcntl on our own fd.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    serve(stream)
}

fn serve(stream: UnixStream) -> ExitCode {
    let Ok(writer) = stream.try_clone() else {
        return fail("io");
    };
    let mut server = Server::new(ProcTable);
    match server.serve(BufReader::new(stream), BufWriter::new(writer)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => fail("io"),
    }
}

fn fdstore() -> ExitCode {
    let Some(notify) = std::env::var_os("NOTIFY_SOCKET") else {
        return fail("no-notify-socket");
    };
    std::env::remove_var("NOTIFY_SOCKET");
    if let Err(code) = harden(false) {
        return fail(code);
    }
    let Ok((ours, theirs)) = fdstore::socketpair() else {
        return fail("io");
    };
    // SAFETY: no other thread exists yet, so the child is a plain copy.
    match unsafe { libc::fork() } {
        -1 => fail("fork"),
        0 => {
            drop(theirs);
            serve(UnixStream::from(ours))
        }
        helper => {
            drop(ours);
            let msg = format!("FDSTORE=1\nFDNAME={}", fdstore::NAME);
            let handed = fdstore::send(&notify, &msg, &[theirs.as_raw_fd()])
                .and_then(|()| fdstore::barrier(&notify, fdstore::BARRIER_TIMEOUT));
            if handed.is_err() {
                // SAFETY: kill/waitpid on the child we just forked.
                unsafe {
                    libc::kill(helper, libc::SIGKILL);
                    libc::waitpid(helper, std::ptr::null_mut(), 0);
                }
                return fail("notify");
            }
            ExitCode::SUCCESS
        }
    }
}
