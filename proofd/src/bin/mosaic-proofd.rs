//! `mosaic-proofd --fd N`: the broker's process-proof helper.
//!
//! Fd N is its end of a `socketpair(AF_UNIX, SOCK_STREAM)` the broker made.
//! At start it asks for SIGKILL when its parent dies, sets
//! `PR_SET_NO_NEW_PRIVS` and clears every capability set; then it answers
//! newline-delimited JSON (see `docs/proof.md`) until EOF, and exits 0.
//! It never opens a database and never logs a request (nonces stay out of
//! every log).

use std::io::{BufReader, BufWriter};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use mosaic_proofd::proof::protocol::Server;
use mosaic_proofd::proof::table::ProcTable;

fn fail(code: &str) -> ExitCode {
    eprintln!("{{\"error\":\"{code}\"}}");
    ExitCode::from(2)
}

fn parse_args() -> Option<i32> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, n] if flag == "--fd" => n.parse::<i32>().ok().filter(|n| *n > 2),
        _ => None,
    }
}

/// PDEATHSIG, NO_NEW_PRIVS, then empty effective/permitted/inheritable sets.
fn harden() -> Result<(), &'static str> {
    // SAFETY: prctl/capset/getppid with plain integer arguments and a valid
    // pointer to a local header/data array.
    unsafe {
        if libc::prctl(
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
    let Some(fd) = parse_args() else {
        return fail("usage");
    };
    if let Err(code) = harden() {
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
    let Ok(writer) = stream.try_clone() else {
        return fail("io");
    };
    let mut server = Server::new(ProcTable);
    match server.serve(BufReader::new(stream), BufWriter::new(writer)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => fail("io"),
    }
}
