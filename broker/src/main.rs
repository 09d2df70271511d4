//! `mosaic-bus`: the writer broker's process entry point.
//!
//! Modes: `--host-fd N` (forked by a host), `--control PATH` (systemd or an
//! operator), `--demo [DIR]` (the shipped example business, for trying it out).

#![deny(unsafe_op_in_unsafe_fn)]

mod demo;

use mosaic_bus::error::Code;
use mosaic_bus::host::channel::{self, End, Shared};
use mosaic_bus::host::control;
use mosaic_bus::proof::VerifierFactory;
use mosaic_wire::cli;
use serde_json::json;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const HELP: &str = "\
mosaic-bus: the Mosaic bus writer broker

Usage:
  mosaic-bus --host-fd N [--log-level LEVEL]
  mosaic-bus --control PATH [--proofd-from-systemd] [--log-level LEVEL]
  mosaic-bus --demo [DATA_ROOT] [--log-level LEVEL]
  mosaic-bus verify --data-root DIR [--anchor SEQ:ROOT]...
  mosaic-bus backup --data-root DIR DEST
  mosaic-bus export --data-root DIR [--after CURSOR] [--follow]
  mosaic-bus --help | --version

  --host-fd N       serve the host protocol on inherited socket fd N
  --control PATH    listen for one host connection at a time on PATH (0600);
                    reports to systemd via $NOTIFY_SOCKET (READY=1, STATUS=)
  --proofd-from-systemd
                    use the proof helper systemd passes as the descriptor named
                    mosaic-proofd (started by `mosaic-proofd --systemd-fdstore`)
                    instead of spawning one; see docs/operations.md
  --demo [DIR]      boot the shipped example business on DIR (default ./mosaic-data)
                    and serve until Ctrl-C
  --log-level LEVEL error, warn, info (default), debug or trace
  verify            recompute every seal of DIR's store (read-only, live or a
                    copy); exit 0 all match, 1 findings, 2 nothing to check
  backup            a consistent, verified copy of DIR as a new data root DEST
  export            evidence rows as JSON lines in commit order, resumable
                    (--after CURSOR); --follow keeps reading

Exit status: 0 after close, SIGTERM or SIGINT, and for --help and --version;
2 on a refused start, a host-protocol failure or a lost host channel (one line
{\"error\":CODE} on stderr), on an unknown option (one line naming it), or on a
second signal while closing (the lock stays: see docs/operations.md).
";

/// The control socket, removed on every orderly exit (close op or signal).
static CONTROL_PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

enum Mode {
    HostFd(i32),
    /// `--host-fd`, checked and owned.
    Host(UnixStream),
    Control(PathBuf),
    Demo(PathBuf),
}

fn refuse(code: Code) -> ExitCode {
    eprintln!("{}", json!({"error": code.as_str()}));
    ExitCode::from(2)
}

struct Args {
    mode: Mode,
    level: String,
    proofd_from_systemd: bool,
}

/// The options this command line takes (a known one out of place, such
/// as a second mode, is a usage error, not an unknown option).
fn known_option(a: &std::ffi::OsStr) -> bool {
    let known = [
        "--host-fd",
        "--control",
        "--demo",
        "--log-level",
        "--proofd-from-systemd",
    ];
    known.iter().any(|k| a == *k)
}

fn parse_args() -> Result<Args, Option<ExitCode>> {
    // Not `env::args`: an argument that is not UTF-8 is a usage error (or,
    // for a path, a path), never a panic.
    let all: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // `--help` and `--version` anywhere win (mosaic_wire::cli).
    if let Some(ask) = cli::asked(&all) {
        return Err(Some(cli::answer(
            ask,
            "mosaic-bus",
            env!("CARGO_PKG_VERSION"),
            HELP,
        )));
    }
    let mut args = all.into_iter();
    let mut mode = None;
    let mut level = "info".to_string();
    let mut proofd_from_systemd = false;
    while let Some(a) = args.next() {
        match a.to_str().unwrap_or_default() {
            // Exactly one mode: a second one (or the same one twice) is a
            // usage error, not "the last one wins".
            "--host-fd" if mode.is_none() => {
                let n = args
                    .next()
                    .and_then(|n| n.to_str()?.parse::<i32>().ok())
                    .filter(|n| *n > 2);
                mode = Some(Mode::HostFd(n.ok_or(None)?));
            }
            "--control" if mode.is_none() => {
                mode = Some(Mode::Control(PathBuf::from(args.next().ok_or(None)?)))
            }
            "--demo" if mode.is_none() => {
                let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
                mode = Some(Mode::Demo(dir.join("mosaic-data")));
            }
            "--log-level" => level = args.next().ok_or(None)?.into_string().map_err(|_| None)?,
            "--proofd-from-systemd" => proofd_from_systemd = true,
            _ if matches!(mode, Some(Mode::Demo(_))) && !a.as_encoded_bytes().starts_with(b"-") => {
                let p = PathBuf::from(a);
                let p = if p.is_absolute() {
                    p
                } else {
                    std::env::current_dir().unwrap_or_default().join(p)
                };
                mode = Some(Mode::Demo(p));
            }
            // An option this binary does not know: one line naming it.
            _ if cli::is_option(&a) && !known_option(&a) => {
                return Err(Some(cli::unknown_option("mosaic-bus", &a)))
            }
            _ => return Err(None),
        }
    }
    if !matches!(
        level.as_str(),
        "error" | "warn" | "info" | "debug" | "trace"
    ) {
        return Err(None);
    }
    let mode = mode.ok_or(None)?;
    if proofd_from_systemd && matches!(mode, Mode::Demo(_)) {
        return Err(None);
    }
    Ok(Args {
        mode,
        level,
        proofd_from_systemd,
    })
}

fn main() -> ExitCode {
    // First, before anything changes the environment: what it held at exec
    // is the broker's, and a credential read from it leaves it
    // (`mosaic_bus::environ`).
    mosaic_bus::environ::own();
    // Before any thread exists: capabilities and no_new_privs are per thread.
    let hardening = mosaic_bus::hardening::apply();
    // Connection caps are sized from the soft descriptor limit: take all
    // the hard limit allows (docs/operations.md, "Connection limits").
    mosaic_proofd::limits::raise_nofile();
    // Every file we create is private.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    // The operator's tools (`verify`, `backup`, `export`) take the command line whole.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = mosaic_bus::tools::run(&argv) {
        return code;
    }
    let Args {
        mode,
        level,
        proofd_from_systemd,
    } = match parse_args() {
        Ok(v) => v,
        Err(Some(code)) => return code,
        Err(None) => {
            eprint!("{HELP}");
            return refuse(Code::Usage);
        }
    };
    // The host's fd is checked and taken before the broker opens anything
    // itself: a number that was not inherited open could otherwise name one
    // of the broker's own descriptors (the signal pipe, a log file) by the
    // time it is looked at.
    let mode = match mode {
        Mode::HostFd(fd) => match adopt_host_fd(fd) {
            Some(stream) => Mode::Host(stream),
            None => return refuse(Code::Usage),
        },
        other => other,
    };
    // Only control mode reports to systemd; the variable is taken out of the
    // environment either way, so neither the proof helper nor (in fd mode) a
    // broker forked by a host running under systemd talks to that manager.
    mosaic_bus::host::notify::init(matches!(mode, Mode::Control(_)));
    // A forked broker's refused boot prints its code as the only stderr
    // line; what it logs before the boot is settled waits (host::bootlog).
    if matches!(mode, Mode::Host(_)) {
        mosaic_bus::host::bootlog::hold();
    }
    init_logging(&level);
    for (step, errno) in &hardening.failed {
        tracing::warn!(step, errno, "hardening step failed");
    }
    // Before any thread: this reads and clears the LISTEN_* variables.
    let verifier: VerifierFactory = if proofd_from_systemd {
        if let Err(code) = mosaic_bus::proof::adopt_from_systemd() {
            return refuse(code);
        }
        mosaic_bus::proof::adopted
    } else {
        mosaic_bus::proof::spawn_default
    };
    let shared: Shared = Arc::new(Mutex::new(None));
    install_signals(shared.clone());
    match mode {
        Mode::Host(stream) => {
            let end = channel::serve(stream, &shared, verifier);
            finish(&shared, end)
        }
        Mode::HostFd(_) => refuse(Code::Usage),
        Mode::Control(path) => control(&path, &shared, verifier),
        Mode::Demo(dir) => demo(dir, &shared),
    }
}

/// One line per event on stderr, no colours. Under journald (which stamps
/// each line itself) the timestamp is left out.
fn init_logging(level: &str) {
    let builder = tracing_subscriber::fmt()
        .with_writer(|| mosaic_bus::host::bootlog::Writer)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new(level));
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().init();
    } else {
        builder.init();
    }
}

/// Closes the runtime (if one is still there) and exits with `end`'s status.
///
/// The slot stays locked from the close until the process is gone, so a
/// signal's close and this one never overlap: whichever takes the runtime
/// closes it whole (socket and lock removed) while the other waits, and the
/// process exits only after that close. Without this, a host that sends
/// SIGTERM and then drops its channel got exit 2 while the signal's close
/// was still running, with the lock left behind.
fn finish(shared: &Shared, end: End) -> ExitCode {
    let mut slot = shared.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(rt) = slot.take() {
        rt.close();
    }
    // A channel lost after SIGTERM/SIGINT arrived (a host shutting down
    // signals its broker, then drops its end) is that signal's close.
    let signalled = SIGNALLED.get().is_some_and(|f| f.load(Ordering::SeqCst));
    let code = match end {
        End::Closed => 0,
        End::Lost if signalled => 0,
        End::Lost => {
            refuse(Code::ChannelLost);
            2
        }
        End::BootRefused(code) => {
            refuse(code);
            2
        }
    };
    // Exit with the slot still locked: a signal thread waiting for it must
    // not get to exit first with another status.
    std::process::exit(code)
}

/// Takes `--host-fd N`: it must be an open socket (the host's end of its
/// socketpair). It is marked close-on-exec, so the proof helper the broker
/// spawns never holds a copy of the host's channel.
fn adopt_host_fd(fd: i32) -> Option<UnixStream> {
    use nix::sys::stat::{fstat, SFlag};
    // SAFETY: `fd` came from our command line; nothing else in this process
    // uses that number. The borrow lasts for the two checks below only.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let st = fstat(borrowed).ok()?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFSOCK {
        return None;
    }
    let cloexec = nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC);
    nix::fcntl::fcntl(borrowed, cloexec).ok()?;
    // SAFETY: fd is an open socket handed to us, owned from here on.
    Some(unsafe { UnixStream::from_raw_fd(fd) })
}

/// `--control PATH`: the control socket, served until a host sends `close`
/// (a signal's close exits from its own thread).
fn control(path: &std::path::Path, shared: &Shared, verifier: VerifierFactory) -> ExitCode {
    let listener = match control::bind(path) {
        Ok(l) => l,
        Err(code) => return refuse(code),
    };
    let _ = CONTROL_PATH.set(path.to_path_buf());
    mosaic_bus::host::notify::send("READY=1\nSTATUS=waiting for the host");
    if let Err(code) = control::serve(listener, shared.clone(), verifier) {
        let _ = std::fs::remove_file(path);
        return refuse(code);
    }
    mosaic_bus::host::notify::send("STOPPING=1\nSTATUS=closing");
    let _ = std::fs::remove_file(path);
    finish(shared, End::Closed)
}

fn demo(dir: PathBuf, shared: &Shared) -> ExitCode {
    refuse(demo::run(dir, shared))
}

/// Set in the signal handler itself, at delivery: the first SIGTERM or
/// SIGINT has arrived (the close it starts runs on a thread, later).
static SIGNALLED: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

fn install_signals(shared: Shared) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [SIGTERM, SIGINT] {
        if signal_hook::flag::register(sig, flag.clone()).is_err() {
            tracing::warn!("cannot install signal handlers");
        }
    }
    let _ = SIGNALLED.set(flag);
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) else {
        return;
    };
    let closing = Arc::new(AtomicBool::new(false));
    let spawned = std::thread::Builder::new()
        .name("bus-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if closing.swap(true, Ordering::SeqCst) {
                    // A second signal while closing: give up at once. The
                    // lock stays, as after a crash (docs/operations.md).
                    tracing::warn!("second signal while closing: exiting without an orderly close");
                    std::process::exit(2);
                }
                let c = closing.clone();
                let s = shared.clone();
                std::thread::spawn(move || {
                    mosaic_bus::host::notify::send("STOPPING=1\nSTATUS=closing");
                    // Held until the exit (see `finish`): a close already
                    // under way elsewhere completes first, and nothing else
                    // can end the process while this close runs.
                    let mut slot = s.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(rt) = slot.take() {
                        demo::end_runs(&rt);
                        rt.close();
                    }
                    if let Some(p) = CONTROL_PATH.get() {
                        let _ = std::fs::remove_file(p);
                    }
                    let _ = c;
                    std::process::exit(0);
                });
            }
        });
    if spawned.is_err() {
        tracing::warn!("cannot install signal handlers");
    }
}
