//! The client socket: accept, frame, envelope, resolve the caller, dispatch
//! on the writer thread, reply once, close.
//!
//! Layering: `frame` turns bytes into one line, `envelope` turns the line
//! into an [`envelope::Envelope`], and only then does a verb see arguments.

pub mod envelope;
pub mod frame;

use crate::error::Code;
use crate::proof::ProofGate;
use crate::verbs;
use crate::writer::Writer;
use envelope::{refusal, Auth};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{watch, Semaphore};

/// What every connection task shares.
pub struct Ctx {
    pub writer: Writer,
    pub proof: Arc<ProofGate>,
    /// Connections in flight (for an orderly close).
    pub active: AtomicUsize,
    /// Bounds concurrent connections.
    pub permits: Semaphore,
}

/// Most connections served at once; later ones wait in the accept queue.
pub const MAX_CONNECTIONS: usize = 512;

/// Accepts until `shutdown` turns true.
pub async fn serve(listener: UnixListener, ctx: Arc<Ctx>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let permit = tokio::select! {
            _ = shutdown.changed() => break,
            p = ctx.permits.acquire() => p,
        };
        let Ok(permit) = permit else { break };
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                permit.forget();
                ctx.active.fetch_add(1, Ordering::SeqCst);
                let c = ctx.clone();
                tokio::spawn(async move {
                    handle(stream, &c).await;
                    c.active.fetch_sub(1, Ordering::SeqCst);
                    c.permits.add_permits(1);
                });
            }
        }
    }
}

async fn handle(mut stream: UnixStream, ctx: &Ctx) {
    // Peer identity comes from the kernel before any byte is parsed.
    let peer = stream.peer_cred().ok();
    let reply =
        match frame::read_frame(&mut stream, frame::MAX_REQUEST, frame::FRAME_DEADLINE).await {
            Err(code) => refusal(code, None),
            Ok(bytes) => request(ctx, &stream, &bytes, peer.and_then(|p| p.pid())).await,
        };
    let mut line = reply.to_string().into_bytes();
    line.push(b'\n');
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = stream.write_all(&line).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn request(ctx: &Ctx, stream: &UnixStream, bytes: &[u8], peer_pid: Option<i32>) -> Value {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        return refusal(Code::InvalidRequest, None);
    };
    let id = envelope::safe_id(&v);
    let env = match envelope::parse(v) {
        Ok(e) => e,
        Err(code) => return refusal(code, id),
    };
    let verb = env.verb;
    let args = env.args;
    let result = match env.auth {
        Auth::Cap(cap) => {
            ctx.writer
                .run(move |core| {
                    let caller = core.caller(&cap).ok_or(Code::UnknownCapability)?;
                    verbs::dispatch(core, &caller, &verb, args)
                })
                .await
        }
        Auth::Shim {
            kind,
            proof,
            business,
        } => {
            // The kernel keeps the connecting process's identity on the
            // socket, so this pidfd names that process even when taken now:
            // if it has exited, the pidfd says so and the proof fails.
            let pidfd = mosaic_proofd::procfs::PidFd::from_peer(stream)
                .ok()
                .flatten();
            match ctx
                .proof
                .check(kind, &business, &proof, peer_pid, pidfd)
                .await
            {
                Err(code) => Ok(Err(code)),
                Ok(caller) => {
                    ctx.writer
                        .run(move |core| verbs::dispatch(core, &caller, &verb, args))
                        .await
                }
            }
        }
    };
    match result.and_then(|r| r) {
        Ok(v) => envelope::ok(v, id),
        Err(code) => refusal(code, id),
    }
}
