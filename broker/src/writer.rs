//! The writer thread: it owns the [`Core`] (and so the one read-write
//! connection) and runs jobs strictly in arrival order.
//!
//! Group commit: the jobs that queued up while the previous commit was
//! being made durable run next as one batch inside one transaction, each in
//! its own savepoint (see [`crate::store::Store::write`]), so a refusal rolls
//! back only its own request. Every reply of the batch is sent after the
//! batch's COMMIT returned, i.e. after its effects are durable; if that
//! COMMIT fails, every request of the batch answers `storage-unavailable`.
//!
//! Who writes the answer: when the batch was small (at most
//! [`DIRECT_REPLY_MAX_BATCH`] requests, i.e. the broker is not busy) the
//! writer thread writes each client's reply line itself, right after the
//! COMMIT, saving the hop back to an I/O thread on the way out; under load
//! it hands the results to the I/O threads, so that the writer can start the
//! next batch at once.

use crate::core::Core;
use crate::error::Code;
use std::sync::mpsc;
use std::thread;

/// Sends a job's answer once the batch is durable (or failed: `Some(code)`);
/// the flag says whether the writer may write a client's reply itself.
type Reply = Box<dyn FnOnce(Option<Code>, bool) + Send>;
type Job = Box<dyn FnOnce(&mut Core) -> Reply + Send>;

/// Most requests committed together.
pub const MAX_BATCH: usize = 256;

/// Largest batch whose replies the writer thread writes to the clients itself.
pub const DIRECT_REPLY_MAX_BATCH: usize = 2;

/// A cloneable handle to the writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
}

/// How long the writer keeps polling for the next job after a small batch
/// before it sleeps (see [`next_job`]).
pub const IDLE_SPIN: std::time::Duration = std::time::Duration::from_micros(SPIN_MICROS);
const SPIN_MICROS: u64 = 200;

/// The next job. After a small batch (`spin`) the writer polls the queue for
/// up to [`IDLE_SPIN`] before it blocks: a client that sends its next
/// request right after its reply (an agent's next call) then finds the
/// writer awake instead of paying a thread wake-up, which on a virtual
/// machine without halt polling costs tens of microseconds. Under load the
/// queue is never empty and this never spins; an idle broker spins at most
/// once per request.
fn next_job(rx: &mpsc::Receiver<Job>, spin: bool) -> Option<Job> {
    if spin && SPIN_MICROS > 0 {
        let until = std::time::Instant::now() + IDLE_SPIN;
        loop {
            match rx.try_recv() {
                Ok(j) => return Some(j),
                Err(mpsc::TryRecvError::Disconnected) => return None,
                Err(mpsc::TryRecvError::Empty) => {}
            }
            if std::time::Instant::now() >= until {
                break;
            }
            std::hint::spin_loop();
        }
    }
    rx.recv().ok()
}

fn serve(mut core: Core, rx: mpsc::Receiver<Job>) -> Core {
    let mut spin = false;
    while let Some(first) = next_job(&rx, spin) {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let grouped = core.begin_batch().is_ok();
        let replies: Vec<Reply> = batch.into_iter().map(|job| job(&mut core)).collect();
        let failed = if grouped {
            core.commit_batch().err()
        } else {
            None
        };
        let direct = replies.len() <= DIRECT_REPLY_MAX_BATCH;
        for r in replies {
            r(failed, direct);
        }
        spin = direct;
    }
    core
}

impl Writer {
    /// Moves `core` onto a new thread that serves jobs until every handle is dropped.
    pub fn spawn(core: Core) -> (Writer, thread::JoinHandle<Core>) {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = thread::Builder::new()
            .name("bus-writer".into())
            .spawn(move || serve(core, rx));
        match handle {
            Ok(h) => (Writer { tx }, h),
            Err(_) => {
                tracing::error!(code = "writer-spawn", "cannot start the writer thread");
                std::process::exit(2);
            }
        }
    }

    fn job<R: Send + 'static>(
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
        send: impl FnOnce(Result<R, Code>, bool) + Send + 'static,
    ) -> Job {
        Box::new(move |core| {
            let r = f(core);
            Box::new(move |failed: Option<Code>, direct: bool| match failed {
                None => send(Ok(r), direct),
                Some(code) => send(Err(code), direct),
            })
        })
    }

    /// Queues `f` for the writer thread; `answer` runs on the writer thread
    /// once the batch is durable (or failed), with the result and whether
    /// the batch was small enough for the writer to reply to the client
    /// itself. `answer` must not block.
    pub fn submit<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
        answer: impl FnOnce(Result<R, Code>, bool) + Send + 'static,
    ) -> Result<(), Code> {
        self.tx
            .send(Writer::job(f, answer))
            .map_err(|_| Code::StorageUnavailable)
    }

    /// Runs `f` on the writer thread and waits (async) for its durable result.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Result<R, Code> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Writer::job(f, move |r, _| {
            let _ = tx.send(r);
        });
        self.tx.send(job).map_err(|_| Code::StorageUnavailable)?;
        rx.await.map_err(|_| Code::StorageUnavailable)?
    }

    /// Runs `f` on the writer thread and blocks the calling thread for its durable result.
    pub fn run_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Result<R, Code> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job = Writer::job(f, move |r, _| {
            let _ = tx.send(r);
        });
        self.tx.send(job).map_err(|_| Code::StorageUnavailable)?;
        rx.recv().map_err(|_| Code::StorageUnavailable)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Box::new(|_core: &mut Core| -> Reply { Box::new(|_, _| {}) })
    }

    #[test]
    fn next_job_takes_a_job_that_arrives_while_spinning_or_after() {
        for spin in [true, false] {
            let (tx, rx) = mpsc::channel::<Job>();
            let sender = thread::spawn(move || {
                thread::sleep(IDLE_SPIN / 4);
                tx.send(job()).map_err(|_| ()).expect("send");
                thread::sleep(IDLE_SPIN * 4);
                tx.send(job()).map_err(|_| ()).expect("send");
                // Dropping the sender ends the writer's loop.
            });
            assert!(next_job(&rx, spin).is_some(), "during the spin");
            assert!(next_job(&rx, spin).is_some(), "after the spin, blocking");
            assert!(next_job(&rx, spin).is_none(), "every handle dropped");
            sender.join().expect("sender");
        }
    }
}
