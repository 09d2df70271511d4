//! `mosaic-leased`: the lease broker of `lease-broker-protocol.txt`.
//!
//! Layers: [`frame`] (bounded EOF framing) → [`request`] (envelope → typed
//! request, leftovers refused) → [`server`] (verbs) over [`state`] (durable
//! sessions and tokens) and [`ancestry`] (kernel identity and the walk).
//! Refusals are [`code::Code`]; startup failures are [`code::StartupError`].
//! Nothing here logs or prints a session ID, a token or a path.

pub mod ancestry;
pub mod code;
pub mod frame;
pub mod request;
pub mod server;
pub mod state;

use code::StartupError;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Environment variable (tests only): milliseconds to stall between the
/// ancestry walk and its re-read, to exercise the re-read. It only delays,
/// and only a debug build (what the tests run) reads it: a release build
/// never looks at it.
pub const WALK_PAUSE_ENV: &str = "MOSAIC_LEASED_TEST_WALK_PAUSE_MS";

/// Parsed command line.
#[derive(Debug)]
pub struct Args {
    pub socket: PathBuf,
    pub state: PathBuf,
}

/// `--socket PATH --state FILE`, each exactly once, nothing else.
pub fn parse_args(args: impl Iterator<Item = std::ffi::OsString>) -> Result<Args, StartupError> {
    let mut socket = None;
    let mut state = None;
    let mut it = args;
    while let Some(flag) = it.next() {
        let slot = match flag.to_str() {
            Some("--socket") => &mut socket,
            Some("--state") => &mut state,
            _ => return Err(StartupError::Usage),
        };
        let value = it.next().ok_or(StartupError::Usage)?;
        if slot.is_some() || value.is_empty() {
            return Err(StartupError::Usage);
        }
        *slot = Some(PathBuf::from(value));
    }
    match (socket, state) {
        (Some(socket), Some(state)) => Ok(Args { socket, state }),
        _ => Err(StartupError::Usage),
    }
}

fn bind(path: &std::path::Path) -> Result<UnixListener, StartupError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|_| StartupError::SocketBindFailed)?;
        }
        Ok(_) => return Err(StartupError::SocketPathOccupied),
        Err(_) => {}
    }
    // The socket is created 0600 (docs/leased.md): under umask 0077 bind()
    // would leave it 0700, so narrow the umask for the bind alone. Still
    // single-threaded here, so no other file sees the narrower mask.
    use nix::sys::stat::{umask, Mode};
    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    umask(old);
    bound.map_err(|_| StartupError::SocketBindFailed)
}

fn notify_ready() {
    let Some(addr) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let _ = mosaic_os::notify::send(&addr, "READY=1", &[]);
}

/// Takes an exclusive `flock` on `<state>.lock` (created 0600, never
/// followed through a symlink) for the life of the process, so two daemons
/// never share one state file: the second would replace the first one's
/// socket and each would hand out and consume tokens the other doesn't see.
/// The kernel drops the lock when the holder dies, so a crash needs no
/// cleanup.
fn lock_state(state: &std::path::Path) -> Result<nix::fcntl::Flock<std::fs::File>, StartupError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = state.as_os_str().to_owned();
    name.push(".lock");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&name)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => StartupError::StateSymlink,
            _ => StartupError::StateUnreadable,
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| StartupError::StateLocked)
}

/// Run the daemon; returns the process exit code.
pub fn run(args: Args) -> Result<(), StartupError> {
    // The connection cap is sized from the soft descriptor limit: take all
    // the hard limit allows first.
    mosaic_os::limits::raise_nofile();
    // Sockets and files get 0600.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let _lock = lock_state(&args.state)?;
    let loaded = state::load(&args.state)?;
    let listener = bind(&args.socket)?;
    // SIGTERM and SIGINT set the stop flag (signal-hook's handler is one
    // atomic store). SIGPIPE is already ignored: Rust's runtime does that
    // before `main`, so a peer that hung up is a write error, not a death.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    let walk_pause = if cfg!(debug_assertions) {
        std::env::var(WALK_PAUSE_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(|ms| Duration::from_millis(ms.min(5000)))
    } else {
        None
    };
    let shared = Arc::new(server::Shared {
        state: Mutex::new(loaded),
        state_path: args.state,
        in_flight: AtomicUsize::new(0),
        walk_pause,
        cap: server::connection_cap(),
        idle: server::Idle::default(),
    });
    notify_ready();
    server::serve(listener, shared, &stop);
    let _ = std::fs::remove_file(&args.socket);
    Ok(())
}
