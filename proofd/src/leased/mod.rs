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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Environment variable (tests only): milliseconds to stall between the
/// ancestry walk and its re-read, to exercise the re-read. It only delays.
pub const WALK_PAUSE_ENV: &str = "MOSAIC_LEASED_TEST_WALK_PAUSE_MS";

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

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
    // SAFETY: umask has no failure mode.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
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
fn lock_state(state: &std::path::Path) -> Result<std::fs::File, StartupError> {
    use std::os::fd::AsRawFd;
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
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(StartupError::StateLocked);
    }
    Ok(file)
}

/// Run the daemon; returns the process exit code.
pub fn run(args: Args) -> Result<(), StartupError> {
    // The connection cap is sized from the soft descriptor limit: take all
    // the hard limit allows first.
    crate::limits::raise_nofile();
    // SAFETY: umask has no failure mode; sockets and files get 0600.
    unsafe { libc::umask(0o077) };
    let _lock = lock_state(&args.state)?;
    let loaded = state::load(&args.state)?;
    let listener = bind(&args.socket)?;
    // SAFETY: installing an async-signal-safe handler (one atomic store).
    unsafe {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let walk_pause = std::env::var(WALK_PAUSE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|ms| Duration::from_millis(ms.min(5000)));
    let shared = Arc::new(server::Shared {
        state: Mutex::new(loaded),
        state_path: args.state,
        in_flight: AtomicUsize::new(0),
        walk_pause,
        cap: server::connection_cap(),
        idle: server::Idle::default(),
    });
    notify_ready();
    server::serve(listener, shared, &STOP);
    let _ = std::fs::remove_file(&args.socket);
    Ok(())
}
