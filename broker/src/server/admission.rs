//! Admission on the client socket: every connection is accepted at once,
//! and the number kept open is bounded by shedding, not by waiting.
//!
//! A connection is *idle* from its accept until its frame is complete (an
//! idle client and a slow writer look alike: neither has asked anything
//! yet). When a new connection would pass the cap, the oldest idle one is
//! shed: its read ends and it is answered `request-timeout`, as if its
//! deadline had come, and closed. A connection whose frame is complete is
//! never shed; if none is idle, the new one is still served (the cap keeps
//! descriptors in reserve for that). So a good client never waits in the
//! backlog behind idle ones, and idle ones still end at the frame deadline.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Descriptors kept out of the cap for everything that is not a connection.
pub const RESERVE_FDS: u64 = 256;
/// Descriptors a connection may hold: its socket, the peer's pidfd, and the
/// duplicate the writer thread answers on.
pub const FDS_PER_CONNECTION: u64 = 3;
/// Bounds on the cap, whatever the limit: memory per open connection is
/// about 10 KiB, so the ceiling keeps a flood under about 100 MiB.
pub const MIN_CONNECTIONS: usize = 32;
pub const MAX_CONNECTIONS: usize = 8192;

/// The open connections and the idle ones among them, oldest first.
pub struct Admission {
    cap: usize,
    open: AtomicUsize,
    next: AtomicU64,
    idle: Mutex<BTreeMap<u64, oneshot::Sender<()>>>,
}

/// One admitted connection; dropping it gives its place back.
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    /// Fires when the connection is shed.
    pub shed: oneshot::Receiver<()>,
}

impl Admission {
    /// A cap sized from the soft `RLIMIT_NOFILE` in force now.
    pub fn from_limit() -> Admission {
        let soft = mosaic_proofd::limits::soft_nofile();
        Admission::with_cap(mosaic_proofd::limits::connection_cap(
            soft,
            RESERVE_FDS,
            FDS_PER_CONNECTION,
            MIN_CONNECTIONS,
            MAX_CONNECTIONS,
        ))
    }

    pub fn with_cap(cap: usize) -> Admission {
        Admission {
            cap,
            open: AtomicUsize::new(0),
            next: AtomicU64::new(0),
            idle: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Admits a connection just accepted: idle until [`Ticket::spoke`].
    /// Past the cap, the oldest idle connection is shed first.
    pub fn admit(self: &Arc<Self>) -> Ticket {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        let open = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if open > self.cap {
            if let Some((_, oldest)) = idle.pop_first() {
                let _ = oldest.send(());
            }
        }
        idle.insert(id, tx);
        drop(idle);
        Ticket {
            admission: self.clone(),
            id,
            shed: rx,
        }
    }

    /// Sheds the oldest idle connection (when the process is out of
    /// descriptors). False when none is idle.
    pub fn shed_oldest(&self) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        match idle.pop_first() {
            Some((_, oldest)) => {
                let _ = oldest.send(());
                true
            }
            None => false,
        }
    }
}

impl Ticket {
    /// The frame is in (or the read ended): never shed from here on.
    pub fn spoke(&self) {
        let mut idle = self
            .admission
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        idle.remove(&self.id);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.spoke();
        self.admission.open.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_idle_is_shed_and_a_speaker_never() {
        let a = Arc::new(Admission::with_cap(2));
        let mut first = a.admit();
        let mut second = a.admit();
        second.spoke();
        assert!(first.shed.try_recv().is_err());
        let mut third = a.admit();
        // The oldest idle one (first) goes; second had spoken.
        assert!(first.shed.try_recv().is_ok());
        assert!(second.shed.try_recv().is_err());
        assert!(third.shed.try_recv().is_err());
        drop(first);
        assert_eq!(a.open(), 2);
        // Nobody idle but third: shed_oldest takes it, then nothing is left.
        assert!(a.shed_oldest());
        assert!(third.shed.try_recv().is_ok());
        assert!(!a.shed_oldest());
        // Over the cap with nobody idle: the newcomer is still admitted.
        let _fourth = a.admit();
        assert_eq!(a.open(), 3);
    }
}
