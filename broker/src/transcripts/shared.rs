//! One transcript reading per run at a time.
//!
//! `usage.begin` and `usage.end` read the run's transcript off the writer
//! (`server::staged`). Calls that arrive together for one run do not each
//! read it: the first one in leads (it reads, and its record is written on
//! the writer), and every other call of that run waits for it to finish,
//! then starts again from the writer's side, where a call on the same turn
//! finds the leader's record and answers it (a replay: nothing read,
//! nothing charged twice) and a call on another turn leads in its turn. So
//! a run's transcript costs the broker one reading's memory at a time
//! (one line and a read buffer, `transcripts::transcript::LINE_MAX`), however
//! many calls its runner fires (issue 29: four concurrent ends on one turn
//! were four readings of it).
//!
//! This lives on the I/O side: the writer thread never waits here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The runs whose transcript is being read now.
#[derive(Default)]
pub struct Readings {
    runs: Mutex<HashMap<String, Flight>>,
    next: AtomicU64,
}

/// The reading in flight for one run.
struct Flight {
    id: u64,
    /// Closed when the leader is done (its sender dropped).
    done: watch::Receiver<()>,
}

/// What a call on a run gets: the lead, or the leader to wait for.
pub enum Entered {
    Lead(Lead),
    Wait(watch::Receiver<()>),
}

/// The lead on a run's reading. Dropping it (after the record is written,
/// or when the call is dropped on the way) lets every waiter go on.
pub struct Lead {
    readings: Arc<Readings>,
    run: String,
    id: u64,
    _done: watch::Sender<()>,
}

impl Readings {
    /// Takes the lead on `run`'s reading, or the leader to wait for.
    pub fn enter(self: &Arc<Self>, run: &str) -> Entered {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = runs.get(run) {
            // A leader that went away without its drop (it cannot, but a
            // closed channel is as good as done) leaves no one to wait for.
            if f.done.has_changed().is_ok() {
                return Entered::Wait(f.done.clone());
            }
        }
        let (tx, rx) = watch::channel(());
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        runs.insert(run.to_string(), Flight { id, done: rx });
        Entered::Lead(Lead {
            readings: self.clone(),
            run: run.to_string(),
            id,
            _done: tx,
        })
    }

    /// Runs with a reading in flight now.
    pub fn in_flight(&self) -> usize {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        let mut runs = self.readings.runs.lock().unwrap_or_else(|p| p.into_inner());
        if runs.get(&self.run).is_some_and(|f| f.id == self.id) {
            runs.remove(&self.run);
        }
        // `_done` drops after this: every waiter's `changed()` ends.
    }
}

/// Waits until the leader `done` belongs to is finished.
pub async fn finished(mut done: watch::Receiver<()>) {
    // Nothing is ever sent: the channel closes when the lead drops.
    while done.changed().await.is_ok() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn one_lead_per_run_and_waiters_go_on_when_it_ends() {
        let r = Arc::new(Readings::default());
        let Entered::Lead(lead) = r.enter("run-a") else {
            panic!("the first call leads")
        };
        let Entered::Wait(w1) = r.enter("run-a") else {
            panic!("a second call on the run waits")
        };
        let Entered::Wait(w2) = r.enter("run-a") else {
            panic!("so does a third")
        };
        // Another run is not held up.
        let Entered::Lead(other) = r.enter("run-b") else {
            panic!("another run leads at once")
        };
        assert_eq!(r.in_flight(), 2);
        let waiting = tokio::spawn(async move {
            finished(w1).await;
            finished(w2).await;
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(lead);
        waiting.await.unwrap();
        assert_eq!(r.in_flight(), 1);
        // The run is free again: the next call leads.
        assert!(matches!(r.enter("run-a"), Entered::Lead(_)));
        drop(other);
        assert_eq!(r.in_flight(), 0);
    }
}
