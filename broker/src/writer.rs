//! The writer thread: it owns the [`Core`] (and so the one read-write
//! connection) and runs jobs strictly in arrival order.
//!
//! Group commit: the jobs that queued up while the previous commit was
//! being made durable run next as one batch inside one transaction, each in
//! its own savepoint (see [`crate::store::Store::write`]), so a refusal rolls
//! back only its own request. Every reply of the batch is sent after the
//! batch's COMMIT returned, i.e. after its effects are durable; if that
//! COMMIT fails, every request of the batch answers `storage-unavailable`.

use crate::core::Core;
use crate::error::Code;
use std::sync::mpsc;
use std::thread;

/// Sends a job's answer once the batch is durable (or failed: `Some(code)`).
type Reply = Box<dyn FnOnce(Option<Code>) + Send>;
type Job = Box<dyn FnOnce(&mut Core) -> Reply + Send>;

/// Most requests committed together.
pub const MAX_BATCH: usize = 256;

/// A cloneable handle to the writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
}

fn serve(mut core: Core, rx: mpsc::Receiver<Job>) -> Core {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let grouped = core.store.begin_batch().is_ok();
        let replies: Vec<Reply> = batch.into_iter().map(|job| job(&mut core)).collect();
        let failed = if grouped {
            core.store.commit_batch().err()
        } else {
            None
        };
        for r in replies {
            r(failed);
        }
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
        send: impl FnOnce(Result<R, Code>) + Send + 'static,
    ) -> Job {
        Box::new(move |core| {
            let r = f(core);
            Box::new(move |failed: Option<Code>| match failed {
                None => send(Ok(r)),
                Some(code) => send(Err(code)),
            })
        })
    }

    /// Runs `f` on the writer thread and waits (async) for its durable result.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Result<R, Code> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Writer::job(f, move |r| {
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
        let job = Writer::job(f, move |r| {
            let _ = tx.send(r);
        });
        self.tx.send(job).map_err(|_| Code::StorageUnavailable)?;
        rx.recv().map_err(|_| Code::StorageUnavailable)?
    }
}
