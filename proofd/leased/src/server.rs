//! Listener, one thread per connection, and the four verbs.
//!
//! Invariants: identity is read (SO_PEERCRED + pidfd) before any byte is
//! parsed; the reply is written only after newline + EOF; every state change
//! is durable before it is acknowledged (a failed save changes nothing).

use super::ancestry::{self, Peer};
use super::code::Code;
use super::frame;
use super::request::{self, Binding, Identity, Request};
use super::state::{self, Session, State, TokenRecord};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The per-connection deadline.
pub const DEADLINE: Duration = Duration::from_secs(1);
/// Descriptors kept out of the connection cap for the rest of the process
/// (the state file and its lock, the listener, `/proc` reads).
pub const RESERVE_FDS: u64 = 64;
/// Descriptors a connection may hold: its socket, the peer's pidfd, and one
/// `/proc` file open during the ancestry walk.
pub const FDS_PER_CONNECTION: u64 = 3;
/// Bounds on the cap, whatever the limit (one thread per connection).
pub const MIN_CONNECTIONS: usize = 16;
pub const MAX_CONNECTIONS: usize = 4096;
/// Stack of a connection thread: a frame is at most 64 KiB on the heap and
/// the JSON parser's recursion is bounded, so the default 2 MiB is waste
/// when a flood holds thousands of them.
const CONNECTION_STACK: usize = 256 * 1024;

pub struct Shared {
    pub state: Mutex<State>,
    pub state_path: PathBuf,
    pub in_flight: AtomicUsize,
    /// Test hook: stall between the ancestry walk and its re-read.
    pub walk_pause: Option<Duration>,
    /// Most connections open at once ([`connection_cap`]).
    pub cap: usize,
    /// Connections still reading their frame, oldest first.
    pub idle: Idle,
}

/// The cap for the soft `RLIMIT_NOFILE` in force now.
pub fn connection_cap() -> usize {
    mosaic_os::limits::connection_cap(
        mosaic_os::limits::soft_nofile(),
        RESERVE_FDS,
        FDS_PER_CONNECTION,
        MIN_CONNECTIONS,
        MAX_CONNECTIONS,
    )
}

/// The connections that have not delivered their frame yet (an idle client
/// and a slow writer alike), by accept order. Shedding one shuts its socket
/// down, which ends its blocked read; it is answered `busy`.
#[derive(Default)]
pub struct Idle {
    next: AtomicU64,
    conns: Mutex<BTreeMap<u64, Arc<UnixStream>>>,
}

impl Idle {
    fn insert(&self, stream: &Arc<UnixStream>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.insert(id, Arc::clone(stream));
        id
    }

    /// Takes `id` out; false when it was already shed.
    fn remove(&self, id: u64) -> bool {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.remove(&id).is_some()
    }

    /// Ends the oldest idle connection's read. False when none is idle.
    pub fn shed_oldest(&self) -> bool {
        let oldest = {
            let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            conns.pop_first()
        };
        match oldest {
            Some((_, stream)) => {
                // Only the read side: its thread still answers `busy`.
                let _ = stream.shutdown(std::net::Shutdown::Read);
                true
            }
            None => false,
        }
    }
}

type Reply = Result<Map<String, Value>, Code>;

/// Accept until `stop` is set; then wait for in-flight connections.
///
/// Every connection is accepted at once. Past the cap, or when the process
/// is out of descriptors, the oldest connection still reading its frame is
/// shed to make room (answered `busy`). A new connection is refused `busy`
/// only when no thread can be started for it.
pub fn serve(listener: UnixListener, shared: Arc<Shared>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let mut pfd = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        if !matches!(poll(&mut pfd, PollTimeout::from(200u16)), Ok(n) if n > 0) {
            continue;
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                let out_of_fds = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                if !(out_of_fds && shared.idle.shed_oldest()) {
                    // Nothing to free: wait rather than spin on the error.
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
        };
        if shared.in_flight.fetch_add(1, Ordering::SeqCst) >= shared.cap {
            // Past the cap: make room by shedding the oldest idle connection.
            // With none idle, every open connection is being answered (or
            // was just shed and is closing) and ends within its deadline:
            // this one is served too; the reserve under the cap holds its
            // descriptors, and running out shows as EMFILE at accept.
            let _ = shared.idle.shed_oldest();
        }
        let stream = Arc::new(stream);
        let id = shared.idle.insert(&stream);
        let ours = Arc::clone(&stream);
        let sh = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                handle(&stream, &sh, id);
                sh.in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // No thread to be had (a task limit such as the unit's TasksMax):
            // free one for the next connection by shedding the oldest idle
            // one, and answer this one `busy` rather than close it mute.
            let _ = shared.idle.remove(id);
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            let _ = shared.idle.shed_oldest();
            let _ = ours.set_write_timeout(Some(DEADLINE));
            finish(&ours, Err(Code::Busy));
        }
    }
    let until = Instant::now() + DEADLINE * 3;
    while shared.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_reply(mut stream: &UnixStream, reply: Reply) -> std::io::Result<()> {
    let value = match reply {
        Ok(mut m) => {
            m.insert("ok".into(), Value::Bool(true));
            Value::Object(m)
        }
        Err(code) => json!({"ok": false, "code": code.as_str()}),
    };
    let mut line = serde_json::to_vec(&value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)?;
    stream.flush()
}

fn handle(stream: &UnixStream, shared: &Shared, id: u64) {
    let deadline = Instant::now() + DEADLINE;
    let _ = stream.set_write_timeout(Some(DEADLINE));
    let peer = ancestry::identify(stream);
    let frame = frame::read_frame(stream, deadline);
    // From here on this connection is being answered, never shed; if it was
    // shed first, the EOF that ended its read was ours, not the client's
    // half-close, so whatever it sent is not a frame.
    let shed_first = !shared.idle.remove(id);
    let reply = match frame {
        _ if shed_first => Err(Code::Busy),
        Err(code) => Err(code),
        Ok(bytes) => match peer {
            Err(code) => Err(code),
            Ok(peer) => request::parse(&bytes).and_then(|req| dispatch(req, &peer, shared)),
        },
    };
    finish(stream, reply);
}

/// Write the reply, half-close, and discard what the client already sent
/// but we did not read (bounded, non-blocking): closing a Unix socket with
/// unread input would make the client's read fail with ECONNRESET before it
/// sees the refusal.
fn finish(mut stream: &UnixStream, reply: Reply) {
    let _ = write_reply(stream, reply);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if stream.set_nonblocking(true).is_ok() {
        let mut sink = [0u8; 8192];
        let mut budget = 4 * frame::FRAME_MAX;
        while budget > 0 {
            match std::io::Read::read(&mut stream, &mut sink) {
                Ok(0) | Err(_) => break,
                Ok(n) => budget = budget.saturating_sub(n),
            }
        }
    }
}

fn dispatch(req: Request, peer: &Peer, shared: &Shared) -> Reply {
    let mut guard = match shared.state.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    let mut next = guard.clone();
    let mut dirty = false;
    let reply = apply(&mut next, &mut dirty, req, peer, shared.walk_pause);
    if dirty {
        if state::save(&shared.state_path, &next).is_err() {
            return Err(Code::StateWriteFailed);
        }
        *guard = next;
    }
    reply
}

fn apply(
    st: &mut State,
    dirty: &mut bool,
    req: Request,
    peer: &Peer,
    pause: Option<Duration>,
) -> Reply {
    match req {
        Request::RegisterAnchor { generation } => register(st, dirty, generation, peer),
        Request::Authenticate(id) => {
            let i = authenticate(st, dirty, &id, peer, pause)?;
            let mut m = Map::new();
            m.insert(
                "runtime_generation".into(),
                st.sessions[i].runtime_generation.into(),
            );
            Ok(m)
        }
        Request::MintToken(id, binding) => {
            let i = authenticate(st, dirty, &id, peer, pause)?;
            mint(&mut st.sessions[i], dirty, binding)
        }
        Request::ConsumeToken(id, token) => {
            let i = authenticate(st, dirty, &id, peer, pause)?;
            consume(&mut st.sessions[i], dirty, &token)
        }
    }
}

/// Drop every prior token's usability: the new incarnation starts clean.
fn bump(s: &mut Session, generation: u64) {
    s.runtime_generation = generation;
    for t in &mut s.tokens {
        t.consumed = true;
    }
    prune_consumed(s);
}

fn prune_consumed(s: &mut Session) {
    let consumed = s.tokens.iter().filter(|t| t.consumed).count();
    let mut excess = consumed.saturating_sub(state::MAX_CONSUMED_TOKENS);
    s.tokens.retain(|t| {
        if t.consumed && excess > 0 {
            excess -= 1;
            false
        } else {
            true
        }
    });
}

fn anchor_alive(s: &Session) -> bool {
    match mosaic_os::procfs::read_stat(s.anchor_pid) {
        Ok(st) => st.start_time == s.anchor_starttime,
        Err(mosaic_os::procfs::ProcError::Gone) => false,
        Err(_) => true,
    }
}

fn register(st: &mut State, dirty: &mut bool, generation: u64, peer: &Peer) -> Reply {
    let (pid, start) = peer.anchor_key()?;
    let new_id = state::random_id().ok_or(Code::Internal)?;
    let mut m = Map::new();
    m.insert("runtime_generation".into(), generation.into());
    if let Some(s) = st
        .sessions
        .iter_mut()
        .find(|s| s.anchor_pid == pid && s.anchor_starttime == start)
    {
        if generation < s.runtime_generation {
            return Err(Code::StaleGeneration);
        }
        if generation == s.runtime_generation {
            return Err(Code::AlreadyRegistered);
        }
        // New incarnation: fresh session_id, all prior tokens consumed.
        bump(s, generation);
        s.session_id = new_id.clone();
        *dirty = true;
        m.insert("session_id".into(), new_id.into());
        return Ok(m);
    }
    let before = st.sessions.len();
    st.sessions.retain(anchor_alive);
    if st.sessions.len() != before {
        *dirty = true;
    }
    if st.sessions.len() >= state::MAX_SESSIONS {
        return Err(Code::TooManySessions);
    }
    st.sessions.push(Session {
        session_id: new_id.clone(),
        anchor_pid: pid,
        anchor_starttime: start,
        uid: peer.uid,
        runtime_generation: generation,
        tokens: Vec::new(),
    });
    *dirty = true;
    m.insert("session_id".into(), new_id.into());
    Ok(m)
}

fn authenticate(
    st: &mut State,
    dirty: &mut bool,
    id: &Identity,
    peer: &Peer,
    pause: Option<Duration>,
) -> Result<usize, Code> {
    let i = st.find(&id.session_id).ok_or(Code::UnknownSession)?;
    let s = &mut st.sessions[i];
    peer.walk_to(s.anchor_pid, s.anchor_starttime, pause)?;
    if id.generation < s.runtime_generation {
        return Err(Code::StaleGeneration);
    }
    if id.generation > s.runtime_generation {
        bump(s, id.generation);
        *dirty = true;
    }
    Ok(i)
}

fn mint(s: &mut Session, dirty: &mut bool, binding: Binding) -> Reply {
    if s.tokens.iter().filter(|t| !t.consumed).count() >= state::MAX_LIVE_TOKENS {
        return Err(Code::TooManyTokens);
    }
    let token = state::random_id().ok_or(Code::Internal)?;
    s.tokens.push(TokenRecord {
        token: token.clone(),
        runtime_generation: s.runtime_generation,
        binding,
        consumed: false,
    });
    *dirty = true;
    let mut m = Map::new();
    m.insert("token".into(), token.into());
    Ok(m)
}

fn consume(s: &mut Session, dirty: &mut bool, token: &str) -> Reply {
    let t = s
        .tokens
        .iter_mut()
        .find(|t| state::ct_eq(&t.token, token))
        .ok_or(Code::UnknownToken)?;
    if t.consumed {
        return Err(Code::TokenConsumed);
    }
    t.consumed = true;
    let binding = serde_json::to_value(&t.binding).map_err(|_| Code::Internal)?;
    let generation = t.runtime_generation;
    prune_consumed(s);
    *dirty = true;
    let mut m = Map::new();
    m.insert("binding".into(), binding);
    m.insert("runtime_generation".into(), generation.into());
    Ok(m)
}
