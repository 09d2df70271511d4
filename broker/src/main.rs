//! `mosaic-bus`: the writer broker's process entry point.
//!
//! Modes: `--host-fd N` (forked by a host), `--control PATH` (systemd or an
//! operator), `--demo [DIR]` (the shipped example business, for trying it out).

mod demo;

use mosaic_bus::error::Code;
use mosaic_bus::host::channel::{self, End, Shared};
use mosaic_bus::proof::VerifierFactory;
use serde_json::json;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
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

Exit status: 0 after close, SIGTERM or SIGINT; 2 on a refused start, a
host-protocol failure or a lost host channel (one line {\"error\":CODE} on stderr),
or on a second signal while closing (the lock stays: see docs/operations.md).
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

fn parse_args() -> Result<Args, Option<ExitCode>> {
    // Not `env::args`: an argument that is not UTF-8 is a usage error (or,
    // for a path, a path), never a panic.
    let mut args = std::env::args_os().skip(1);
    let mut mode = None;
    let mut level = "info".to_string();
    let mut proofd_from_systemd = false;
    while let Some(a) = args.next() {
        match a.to_str().unwrap_or_default() {
            "--help" | "-h" => {
                print!("{HELP}");
                return Err(Some(ExitCode::SUCCESS));
            }
            "--version" | "-V" => {
                println!("mosaic-bus {}", env!("CARGO_PKG_VERSION"));
                return Err(Some(ExitCode::SUCCESS));
            }
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
    // Before any thread exists: capabilities and no_new_privs are per thread.
    let hardening = mosaic_bus::hardening::apply();
    // Connection caps are sized from the soft descriptor limit: take all
    // the hard limit allows (docs/operations.md, "Connection limits").
    mosaic_proofd::limits::raise_nofile();
    // SAFETY: umask has no preconditions; every file we create is private.
    unsafe { libc::umask(0o077) };
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
    // SAFETY: fstat writes into `st`, a valid stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return None;
    }
    // SAFETY: fcntl on an fd just checked to be open.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: fd is an open socket handed to us, owned from here on.
    Some(unsafe { UnixStream::from_raw_fd(fd) })
}

fn control(path: &std::path::Path, shared: &Shared, verifier: VerifierFactory) -> ExitCode {
    if !path.is_absolute() {
        return refuse(Code::Usage);
    }
    let parent_ok = path
        .parent()
        .and_then(|p| std::fs::symlink_metadata(p).ok())
        .is_some_and(|m| {
            m.file_type().is_dir() && m.uid() == unsafe { libc::geteuid() } && m.mode() & 0o077 == 0
        });
    if !parent_ok {
        return refuse(Code::UnsafePath);
    }
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_socket() {
            return refuse(Code::UnsafePath);
        }
        // A socket someone still listens on is a live broker's, not a
        // stale one: taking its path would cut that broker off from its
        // host. Only a socket nobody answers on is replaced.
        if UnixStream::connect(path).is_ok() {
            return refuse(Code::ControlInUse);
        }
        if std::fs::remove_file(path).is_err() {
            return refuse(Code::UnsafePath);
        }
    }
    let Ok(listener) = UnixListener::bind(path) else {
        return refuse(Code::UnsafePath);
    };
    if std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).is_err() {
        let _ = std::fs::remove_file(path);
        return refuse(Code::UnsafePath);
    }
    let _ = CONTROL_PATH.set(path.to_path_buf());
    mosaic_bus::host::notify::send("READY=1\nSTATUS=waiting for the host");
    // Connections are accepted on their own thread, so a connection that
    // arrives while a host is connected is answered at once (`host-busy`)
    // instead of waiting unanswered in the backlog; only `close` (or a
    // signal) ends the broker.
    let (closed_tx, closed_rx) = std::sync::mpsc::channel::<()>();
    let busy = Arc::new(AtomicBool::new(false));
    let accepting = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("bus-control".into())
            .spawn(move || accept_hosts(listener, shared, verifier, busy, closed_tx))
    };
    if accepting.is_err() {
        let _ = std::fs::remove_file(path);
        return refuse(Code::StorageUnavailable);
    }
    // Every sender gone (it cannot happen while the accept thread runs)
    // counts as a close too: the broker never outlives its control socket.
    let _ = closed_rx.recv();
    mosaic_bus::host::notify::send("STOPPING=1\nSTATUS=closing");
    let _ = std::fs::remove_file(path);
    finish(shared, End::Closed)
}

/// The control socket's accept loop: one host at a time, of our own UID.
fn accept_hosts(
    listener: UnixListener,
    shared: Shared,
    verifier: VerifierFactory,
    busy: Arc<AtomicBool>,
    closed: std::sync::mpsc::Sender<()>,
) {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else {
            continue;
        };
        if peer_uid(&conn) != Some(me) {
            tracing::warn!(
                code = "peer-uid",
                "control connection from another user refused"
            );
            turn_away(conn, Code::PeerUid);
            continue;
        }
        if busy.load(Ordering::SeqCst) {
            host_busy(conn);
            continue;
        }
        if pending.fetch_add(1, Ordering::SeqCst) >= MAX_PENDING_HOSTS {
            pending.fetch_sub(1, Ordering::SeqCst);
            host_busy(conn);
            continue;
        }
        let (shared, taken, closed, waiting) = (
            shared.clone(),
            busy.clone(),
            closed.clone(),
            pending.clone(),
        );
        let served = std::thread::Builder::new()
            .name("bus-host".into())
            .spawn(move || {
                // The slot is taken by the first byte, not by the connect:
                // a connection that closes without a word (another broker
                // testing whether this socket is live) never holds it, so
                // it cannot turn a real host away.
                let spoke = first_byte_arrives(&conn);
                waiting.fetch_sub(1, Ordering::SeqCst);
                if !spoke {
                    return;
                }
                if taken.swap(true, Ordering::SeqCst) {
                    host_busy(conn);
                    return;
                }
                let end = channel::serve(conn, &shared, verifier);
                if end == End::Closed {
                    // Stays busy: nobody else is let in while closing.
                    let _ = closed.send(());
                    return;
                }
                // Free the slot and say so under the runtime's lock: a next
                // host is accepted from here on, but its boot (and the
                // status line that goes with it) waits for this line.
                let slot = shared.lock().unwrap_or_else(|p| p.into_inner());
                taken.store(false, Ordering::SeqCst);
                match end {
                    End::BootRefused(code) => {
                        mosaic_bus::host::notify::send(&format!(
                            "STATUS=waiting for the host (boot refused: {code})"
                        ));
                        tracing::warn!(code = code.as_str(), "boot refused");
                    }
                    _ if slot.is_some() => mosaic_bus::host::notify::send(
                        "STATUS=booted; host disconnected, waiting for the host",
                    ),
                    _ => mosaic_bus::host::notify::send("STATUS=waiting for the host"),
                }
                drop(slot);
            });
        if served.is_err() {
            pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Waits until the peer sends its first byte (true) or closes or fails
/// (false), leaving the byte unread for the channel.
fn first_byte_arrives(conn: &UnixStream) -> bool {
    let mut byte = 0u8;
    loop {
        // SAFETY: `conn` is an open socket borrowed for the call; the buffer
        // is one live byte.
        let n = unsafe {
            libc::recv(
                conn.as_raw_fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK,
            )
        };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return n > 0;
    }
}

/// Most connections at once that have not said anything yet; more are
/// answered `host-busy`.
const MAX_PENDING_HOSTS: usize = 16;

fn host_busy(conn: UnixStream) {
    tracing::warn!(
        code = "host-busy",
        "a second host connection refused while one is connected"
    );
    turn_away(conn, Code::HostBusy);
}

/// Answers a connection the broker will not serve with its code, then
/// closes it. The reply is one short line, so the write does not block on
/// a peer that never reads; the timeout only guards against the odd case.
fn turn_away(mut conn: UnixStream, code: Code) {
    use std::io::Write;
    let _ = conn.set_write_timeout(Some(std::time::Duration::from_secs(1)));
    let reply = mosaic_bus::server::envelope::refusal(code, None);
    let _ = writeln!(conn, "{reply}");
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

fn peer_uid(conn: &UnixStream) -> Option<u32> {
    mosaic_proofd::procfs::peer_cred(conn)
        .ok()
        .map(|(_, uid, _)| uid)
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
