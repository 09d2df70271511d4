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

#![deny(unsafe_op_in_unsafe_fn)]

use std::io::{BufReader, BufWriter};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use mosaic_os::notify;
use mosaic_proofd::fdstore;
use mosaic_proofd::proof::protocol::Server;
use mosaic_proofd::proof::table::ProcTable;
use mosaic_wire::cli;

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

/// PDEATHSIG (when `with_parent`), NO_NEW_PRIVS, then no capability in
/// any set (`mosaic_os::hardening`, the broker's steps too). A failed step
/// is fatal here: the helper reads other processes' `/proc` and must not
/// do it with more than its user's rights.
fn harden(with_parent: bool) -> Result<(), &'static str> {
    use mosaic_os::hardening;
    // A parent that died before PDEATHSIG was armed closed its end of
    // the socketpair (CLOEXEC there), so the serve loop sees EOF.
    if with_parent && hardening::die_with_parent().is_err() {
        return Err("pdeathsig");
    }
    if hardening::no_new_privs().is_err() {
        return Err("no-new-privs");
    }
    match hardening::shed_capabilities().failed.first() {
        Some(("capset", _)) => Err("capset"),
        _ => Ok(()),
    }
}

const HELP: &str = "\
mosaic-proofd: the Mosaic bus's process-proof helper

Usage:
  mosaic-proofd --fd N
  mosaic-proofd --systemd-fdstore
  mosaic-proofd --help | --version

  --fd N              serve the broker on its inherited socketpair end N (> 2),
                      dying with the parent; started by mosaic-bus itself
  --systemd-fdstore   make the socketpair, fork the helper onto one end and
                      hand the other to systemd's fd store for the broker
                      (ExecStartPre=+ in the user unit; docs/operations.md)

Exit status: 0 at EOF on its channel, and for --help and --version; 2 with one
line {\"error\":CODE} on stderr when it can't start, or with one line naming
an unknown option.
";

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(ask) = cli::asked(&args) {
        return cli::answer(ask, "mosaic-proofd", env!("CARGO_PKG_VERSION"), HELP);
    }
    let known = |a: &std::ffi::OsString| a == "--fd" || a == "--systemd-fdstore";
    // Options stand first (`--fd N`): one there this binary doesn't know
    // is named on one line.
    if let Some(opt) = args.first().filter(|a| cli::is_option(a) && !known(a)) {
        return cli::unknown_option("mosaic-proofd", opt);
    }
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
    // SAFETY: `fd` came from our command line; nothing else in this process
    // uses that number. The borrow lasts for the two checks below only.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let is_socket = nix::sys::stat::fstat(borrowed).is_ok_and(|st| {
        nix::sys::stat::SFlag::from_bits_truncate(st.st_mode) & nix::sys::stat::SFlag::S_IFMT
            == nix::sys::stat::SFlag::S_IFSOCK
    });
    if !is_socket {
        return fail("bad-fd");
    }
    // Keep it out of anything we might exec (we exec nothing, but be tidy).
    let _ = nix::fcntl::fcntl(
        borrowed,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    // SAFETY: fd is an open socket (checked above) handed to us by the
    // broker; we own it from here on.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
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
    use nix::sys::signal::{kill, Signal};
    use nix::sys::wait::waitpid;
    use nix::unistd::{fork, ForkResult};
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
    match unsafe { fork() } {
        Err(_) => fail("fork"),
        Ok(ForkResult::Child) => {
            drop(theirs);
            serve(UnixStream::from(ours))
        }
        Ok(ForkResult::Parent { child }) => {
            drop(ours);
            let msg = format!("FDSTORE=1\nFDNAME={}", fdstore::NAME);
            let handed = notify::send(&notify, &msg, &[theirs.as_fd()])
                .and_then(|()| notify::barrier(&notify, notify::BARRIER_TIMEOUT));
            if handed.is_err() {
                let _ = kill(child, Signal::SIGKILL);
                let _ = waitpid(child, None);
                return fail("notify");
            }
            ExitCode::SUCCESS
        }
    }
}
