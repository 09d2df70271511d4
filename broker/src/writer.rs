//! The writer thread: it owns the [`Core`] (and so the one read-write
//! connection) and runs jobs strictly in arrival order. Async code sends a
//! closure and awaits its answer; blocking code can wait the same way.

use crate::core::Core;
use crate::error::Code;
use std::sync::mpsc;
use std::thread;

type Job = Box<dyn FnOnce(&mut Core) + Send>;

/// A cloneable handle to the writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
}

impl Writer {
    /// Moves `core` onto a new thread that serves jobs until every handle is dropped.
    pub fn spawn(core: Core) -> (Writer, thread::JoinHandle<Core>) {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = thread::Builder::new()
            .name("bus-writer".into())
            .spawn(move || {
                let mut core = core;
                while let Ok(job) = rx.recv() {
                    job(&mut core);
                }
                core
            });
        match handle {
            Ok(h) => (Writer { tx }, h),
            Err(_) => {
                tracing::error!(code = "writer-spawn", "cannot start the writer thread");
                std::process::exit(2);
            }
        }
    }

    /// Runs `f` on the writer thread and waits (async) for its result.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Result<R, Code> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |core| {
            let _ = tx.send(f(core));
        });
        self.tx.send(job).map_err(|_| Code::StorageUnavailable)?;
        rx.await.map_err(|_| Code::StorageUnavailable)
    }

    /// Runs `f` on the writer thread and blocks the calling thread for its result.
    pub fn run_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Result<R, Code> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |core| {
            let _ = tx.send(f(core));
        });
        self.tx.send(job).map_err(|_| Code::StorageUnavailable)?;
        rx.recv().map_err(|_| Code::StorageUnavailable)
    }
}
