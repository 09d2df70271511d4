//! The client socket: accept, frame, envelope, resolve the caller, dispatch
//! on the writer thread, reply once, close.
//!
//! Layering: `frame` turns bytes into one line, `envelope` turns the line
//! into an [`envelope::Envelope`], and only then does a verb see arguments.

pub mod admission;
pub mod envelope;
pub mod frame;

use crate::budget::Budget;
use crate::error::Code;
use crate::handlers::{self, Found, Serial, Slow};
use crate::proof::ProofGate;
use crate::transcripts::shared::{finished, Entered};
use crate::writer::Writer;
use envelope::{refusal, Auth};
use mosaic_proofd::procfs::{AcceptedPeer, PeerPin, ProcError};
use serde_json::Value;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// Held by an organization write from its prepare to the end of its file
/// step (see `staged`). One broker serves one process; embedded runtimes
/// sharing a process only wait on each other's organization writes.
static ORGANIZATION_WRITES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What every connection task shares.
pub struct Ctx {
    pub writer: Writer,
    pub proof: Arc<ProofGate>,
    /// Connections in flight (for an orderly close).
    pub active: AtomicUsize,
    /// Woken when the last connection in flight ends ([`Ctx::drained`]).
    pub idle: tokio::sync::Notify,
    /// Bounds open connections by shedding the oldest idle one.
    pub admission: Arc<admission::Admission>,
    /// The runs whose transcript a usage call is reading now: one reading
    /// per run at a time (`crate::transcripts::shared`).
    pub readings: Arc<crate::transcripts::shared::Readings>,
}

impl Ctx {
    /// Returns once no connection is in flight: waits on [`Ctx::idle`],
    /// registered before each look at the count so a wake-up between the
    /// look and the wait is not lost.
    pub async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.active.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// Most open connections at which a request offers the writer thread its
/// own duplicate of the socket to answer on (see [`crate::writer`]).
pub const DIRECT_REPLY_MAX_ACTIVE: usize = 8;

/// Accepts until `shutdown` turns true. Every connection is accepted at
/// once ([`admission`]); when the process runs out of descriptors, the
/// oldest idle connection is shed to make room, or, with none idle, the
/// loop waits a moment instead of spinning on `EMFILE`.
pub async fn serve(listener: UnixListener, ctx: Arc<Ctx>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        let out_of_fds = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                        if !(out_of_fds && ctx.admission.shed_oldest()) {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        } else {
                            // Let the shed connection's task close it.
                            tokio::task::yield_now().await;
                        }
                        continue;
                    }
                };
                let ticket = ctx.admission.admit();
                ctx.active.fetch_add(1, Ordering::SeqCst);
                let c = ctx.clone();
                tokio::spawn(async move {
                    handle(stream, &c, ticket).await;
                    if c.active.fetch_sub(1, Ordering::SeqCst) == 1 {
                        c.idle.notify_waiters();
                    }
                });
            }
        }
    }
}

/// A request's outcome: a reply for this task to write, or one the writer
/// thread has already written (all of it, or the first `written` bytes).
enum Answer {
    Reply(Value),
    Sent { line: Vec<u8>, written: usize },
}

/// The reply line. A reply that would not fit the client's cap (4 MiB with
/// its newline) is replaced by `response-too-large` ("oversized reads
/// refuse"). Only reads can get there, and they write nothing: every
/// mutation's reply is far smaller, and `message.receive` bounds its batch
/// to fit (`verbs::messages::RECEIVE_BYTES`).
fn line_of(reply: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(reply).unwrap_or_default();
    if line.len() + 1 > mosaic_wire::limits::RESPONSE_MAX {
        let id = reply.get("id").and_then(Value::as_i64);
        line = serde_json::to_vec(&refusal(Code::ResponseTooLarge, id)).unwrap_or_default();
    }
    line.push(b'\n');
    line
}

/// What the kernel says about the peer, read at accept.
struct Peer {
    /// The SO_PEERCRED pid.
    pid: Option<i32>,
    /// The peer as accept left it (see [`PeerPin::at_accept`]). Only shim
    /// requests turn it into a pin; capability requests never look at it.
    accepted: AcceptedPeer,
}

impl Peer {
    /// Reads SO_PEERCRED and, where the kernel does not hold the connecting
    /// process itself (no SO_PEERPIDFD), pins it before a byte is read, so
    /// a peer that exits while its frame is pending cannot hand its pid to
    /// a process it would like to be taken for.
    fn at_accept(stream: &UnixStream) -> Peer {
        let pid = stream.peer_cred().ok().and_then(|c| c.pid());
        let accepted = PeerPin::at_accept(stream, pid.unwrap_or(0));
        Peer { pid, accepted }
    }

    /// The pin, or the code a shim request gets because there is none.
    fn pin(self, stream: &UnixStream) -> Result<PeerPin, Code> {
        if self.pid.is_none() {
            return Err(Code::ProofPid);
        }
        self.accepted.pin(stream).map_err(pin_code)
    }

    /// Takes the pin now (where accept left it to the kernel) and keeps it
    /// for the request: a frame's peer is checked before the frame is in
    /// ([`may_grow`]).
    fn pin_now(&mut self, stream: &UnixStream) -> Result<&PeerPin, Code> {
        if self.pid.is_none() {
            return Err(Code::ProofPid);
        }
        if let AcceptedPeer::Kernel(_) = self.accepted {
            let left = std::mem::replace(&mut self.accepted, AcceptedPeer::Failed(ProcError::Gone));
            self.accepted = match left.pin(stream) {
                Ok(p) => AcceptedPeer::Pinned(p),
                Err(e) => AcceptedPeer::Failed(e),
            };
        }
        match &self.accepted {
            AcceptedPeer::Pinned(p) => Ok(p),
            AcceptedPeer::Failed(e) => Err(pin_code(*e)),
            AcceptedPeer::Kernel(_) => Err(Code::ProofUnreadable),
        }
    }
}

/// What a shim request gets for a pin that failed.
fn pin_code(e: ProcError) -> Code {
    match e {
        ProcError::Unsupported => Code::PeerPinUnsupported,
        ProcError::Gone | ProcError::Changed => Code::ProofStartTime,
        _ => Code::ProofUnreadable,
    }
}

/// Whether a frame may grow past the ordinary cap: only the human's editor
/// sends one (the save verb, which only the human may call), so only a
/// peer the proof helper finds to be the human shim, outside every managed
/// run and agent session, gets past it; anyone else's frame is
/// `request-too-large` there and never takes one of the few large-frame
/// slots (issue 29: eight unauthenticated connections holding half a frame
/// each took them all and the human's save was refused). The check is the
/// proof's without the nonce, which is still in the unread frame: it
/// authenticates nothing, the whole request is checked once it is in.
async fn may_grow(ctx: &Ctx, peer: &mut Peer, stream: &UnixStream) -> bool {
    let Some(pid) = peer.pid else {
        return false;
    };
    let Ok(pin) = peer.pin_now(stream) else {
        return false;
    };
    let Ok(start_time) = pin.start_time() else {
        return false;
    };
    let checked = ctx
        .proof
        .check_peer(crate::server::envelope::ShimKind::Human, pid, start_time)
        .await;
    // The process checked must still be the peer.
    checked.is_ok() && pin.is_alive()
}

async fn handle(mut stream: UnixStream, ctx: &Ctx, mut ticket: admission::Ticket) {
    // Peer identity comes from the kernel before any byte is parsed.
    let mut peer = Peer::at_accept(&stream);
    let frame = {
        let (mut read, write) = stream.split();
        let (sock, peer) = (write.as_ref(), &mut peer);
        tokio::select! {
            read = frame::read_frame(
                &mut read,
                frame::MAX_REQUEST,
                frame::MAX_SAVE_REQUEST,
                frame::FRAME_DEADLINE,
                || may_grow(ctx, peer, sock),
            ) => read,
            // Shed to make room for a newer connection: as if its deadline came.
            _ = &mut ticket.shed => Err(Code::RequestTimeout),
        }
    };
    ticket.spoke();
    let answer = match frame {
        Err(code) => Answer::Reply(refusal(code, None)),
        // The frame (and its large-frame slot) lives until the reply.
        Ok(frame) => request(ctx, &stream, &frame.bytes, peer).await,
    };
    let (line, written) = match answer {
        Answer::Reply(v) => (line_of(&v), 0),
        Answer::Sent { line, written } => (line, written),
    };
    if written == line.len() {
        // The writer thread wrote it all and shut the write side.
        return;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = stream.write_all(&line[written..]).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn request(ctx: &Ctx, stream: &UnixStream, bytes: &[u8], peer: Peer) -> Answer {
    // Past the ordinary envelope only the save verb's request is judged;
    // anything else is too large, whatever it is.
    let large = bytes.len() + 1 > frame::MAX_REQUEST;
    // Duplicate keys at any depth refuse: no request means two things.
    let Ok(v) = mosaic_client::json::from_slice(bytes) else {
        let code = if large {
            Code::RequestTooLarge
        } else {
            Code::InvalidRequest
        };
        return Answer::Reply(refusal(code, None));
    };
    if large && v.get("verb").and_then(Value::as_str) != Some(mosaic_wire::limits::SAVE_VERB) {
        return Answer::Reply(refusal(Code::RequestTooLarge, None));
    }
    let id = envelope::safe_id(&v);
    let env = match envelope::parse(v) {
        Ok(e) => e,
        Err(code) => return Answer::Reply(refusal(code, id)),
    };
    let verb = env.verb;
    let args = env.args;
    if let Some(serial) = handlers::staged_as(&verb, args.as_ref()) {
        return staged(ctx, stream, id, (env.auth, peer), (verb, args), serial).await;
    }
    match env.auth {
        Auth::Cap(cap) => {
            on_writer(ctx, stream, id, move |core| {
                let caller = core.caller(&cap).ok_or(Code::UnknownCapability)?;
                handlers::dispatch(core, &caller, &verb, args)
            })
            .await
        }
        Auth::Shim {
            kind,
            proof,
            business,
        } => {
            match ctx
                .proof
                .check(kind, &business, &proof, peer.pid, peer.pin(stream))
                .await
            {
                Err(code) => Answer::Reply(refusal(code, id)),
                Ok(caller) => {
                    on_writer(ctx, stream, id, move |core| {
                        handlers::dispatch(core, &caller, &verb, args)
                    })
                    .await
                }
            }
        }
    }
}

/// A staged verb (`handlers::staged`: a Git side, a transcript to read,
/// or an organization file to replace), every kind the same way: the
/// writer prepares it (caller, checks, what to read; an organization
/// write's receipt), a blocking worker does the slow part outside every
/// store transaction, and the writer finishes it with what it found.
/// The writer never waits on Git or a file, so other requests go on
/// meanwhile. How requests of one verb are ordered is its row's
/// [`Serial`]. The job's budget (`crate::budget`) counts from here, so the
/// proof check and the writer's queue before the job come out of it too:
/// the reply goes out before the client's wait for the verb
/// (`call_timeout`) ends.
async fn staged(
    ctx: &Ctx,
    stream: &UnixStream,
    id: Option<i64>,
    (auth, peer): (Auth, Peer),
    (verb, args): (String, Option<serde_json::Map<String, Value>>),
    serial: Serial,
) -> Answer {
    let budget = crate::budget::Budget::start();
    let caller = match auth {
        Auth::Cap(cap) => match ctx.writer.run(move |core| core.caller(&cap)).await {
            Ok(Some(caller)) => caller,
            Ok(None) => return Answer::Reply(refusal(Code::UnknownCapability, id)),
            Err(code) => return Answer::Reply(refusal(code, id)),
        },
        Auth::Shim {
            kind,
            proof,
            business,
        } => {
            let pid = peer.pid;
            let pin = peer.pin(stream);
            match ctx.proof.check(kind, &business, &proof, pid, pin).await {
                Ok(caller) => caller,
                Err(code) => return Answer::Reply(refusal(code, id)),
            }
        }
    };
    // One organization write at a time, from the revision check in its
    // prepare to the end of its file step.
    let _alone = if serial == Serial::Alone {
        Some(ORGANIZATION_WRITES.lock().await)
    } else {
        None
    };
    // A call that must wait for another of its run is prepared again then:
    // it needs its arguments again.
    let again = (serial == Serial::PerRun).then(|| args.clone());
    let prepare = |args| {
        let (c, v) = (caller.clone(), verb.clone());
        ctx.writer
            .run(move |core| handlers::prepare_staged(core, &c, &v, args))
    };
    let mut prepared = match prepare(args).await {
        Ok(Ok(p)) => p,
        Ok(Err(code)) | Err(code) => return Answer::Reply(refusal(code, id)),
    };
    // One reading of a run's transcript at a time (`crate::transcripts::shared`):
    // a call that finds another of its run reading waits for it, then is
    // prepared again, and a call on the same turn now finds that call's
    // record and answers it without reading anything. The lead is held
    // until the record is written.
    let mut lead = None;
    if serial == Serial::PerRun {
        while let Some(run) = prepared.reads() {
            match ctx.readings.enter(run) {
                Entered::Lead(l) => {
                    lead = Some(l);
                    break;
                }
                Entered::Wait(done) => {
                    finished(done).await;
                    prepared = match prepare(again.clone().flatten()).await {
                        Ok(Ok(p)) => p,
                        Ok(Err(code)) | Err(code) => return Answer::Reply(refusal(code, id)),
                    };
                }
            }
        }
    }
    let found = match prepared.slow() {
        Some(slow) => Some(run_slow(slow, prepared.lost(), budget).await),
        None => None,
    };
    let committed = prepared.committed(found.as_ref());
    let answer = ctx
        .writer
        .run(move |core| handlers::finish_staged(core, &caller, &verb, prepared, found))
        .await;
    drop(lead);
    match answer {
        Ok(Ok(v)) => Answer::Reply(envelope::ok(v, id)),
        Err(_) if committed => Answer::Reply(refusal(Code::OutcomeUnknown, id)),
        Ok(Err(code)) | Err(code) => Answer::Reply(refusal(code, id)),
    }
}

/// A staged verb's slow part on a blocking worker. Git runs in process: a
/// worker held up in the file system can't be killed, so a job with a
/// fence is not waited for past its budget. Abandoned before it started
/// moving HEAD, it never will (a plain refusal); already moving it, the
/// answer is outcome-unknown. A lost worker settles to `lost`.
async fn run_slow(slow: Slow<Found>, lost: Code, budget: Budget) -> Result<Found, Code> {
    let Slow { run, fence } = slow;
    let worker = tokio::task::spawn_blocking(move || run(budget));
    let Some(fence) = fence else {
        return worker.await.unwrap_or(Err(lost));
    };
    let wait = budget.left() + crate::budget::GRACE;
    match tokio::time::timeout(wait, worker).await {
        Ok(joined) => joined.unwrap_or(Err(lost)),
        Err(_) if fence.abandon() => {
            tracing::warn!(
                code = "project-unavailable",
                "a Git job passed its budget and was left"
            );
            Err(Code::ProjectUnavailable)
        }
        Err(_) => {
            tracing::warn!(
                code = "outcome-unknown",
                "a Git job passed its budget while moving HEAD"
            );
            Err(Code::OutcomeUnknown)
        }
    }
}

/// Runs a verb on the writer thread. Its reply is sent only once its batch
/// is durable: by the writer thread itself when the batch was small (on its
/// own duplicate of the socket, without blocking: whatever does not fit in
/// the socket buffer is left to this task), else by this task.
async fn on_writer(
    ctx: &Ctx,
    stream: &UnixStream,
    id: Option<i64>,
    f: impl FnOnce(&mut crate::core::Core) -> Result<Value, Code> + Send + 'static,
) -> Answer {
    // Only when few connections are open: under load the batches are too
    // big for the writer to answer itself, and a duplicate per connection
    // would double the descriptors the connection cap allows for.
    let fd = if ctx.active.load(Ordering::Relaxed) <= DIRECT_REPLY_MAX_ACTIVE {
        stream.as_fd().try_clone_to_owned().ok()
    } else {
        None
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let submitted = ctx.writer.submit(f, move |r, direct| {
        let reply = match r.and_then(|r| r) {
            Ok(v) => envelope::ok(v, id),
            Err(code) => refusal(code, id),
        };
        let answer = match fd {
            Some(fd) if direct => {
                let line = line_of(&reply);
                let written = send_now(&fd, &line);
                Answer::Sent { line, written }
            }
            // Closed on the I/O thread, not here.
            fd => {
                let _ = tx.send((Answer::Reply(reply), fd));
                return;
            }
        };
        let _ = tx.send((answer, None));
    });
    if let Err(code) = submitted {
        return Answer::Reply(refusal(code, id));
    }
    match rx.await {
        Ok((answer, _fd)) => answer,
        Err(_) => Answer::Reply(refusal(Code::StorageUnavailable, id)),
    }
}

/// Writes what the socket takes now, without blocking; when that is the
/// whole line, shuts the write side (the client reads to end of file).
/// Returns the bytes written.
fn send_now(fd: &OwnedFd, line: &[u8]) -> usize {
    let mut done = 0;
    while done < line.len() {
        let rest = &line[done..];
        use nix::sys::socket::MsgFlags;
        let sent = nix::sys::socket::send(
            fd.as_raw_fd(),
            rest,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        );
        match sent {
            Ok(n) if n > 0 => done += n,
            Err(nix::errno::Errno::EINTR) => continue,
            _ => break,
        }
    }
    if done == line.len() {
        let _ = nix::sys::socket::shutdown(fd.as_raw_fd(), nix::sys::socket::Shutdown::Write);
    }
    done
}
