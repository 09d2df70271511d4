//! The whole-job budget of a staged request (`server::staged`): everything
//! its slow part runs, every step of a Git job (in process) or the whole
//! reading of a transcript, fits in [`JOB`] counted from when the server
//! took the request, so the broker answers before its client stops waiting
//! (`mosaic_wire::limits::call_timeout` is the budget plus a margin). Past
//! it the job ends with its own refusal (`project-unavailable` for Git,
//! `usage-source-failed` for a transcript) and nothing written: a Git job
//! writes only at its last step (`project::write::commit_file`'s move of
//! `HEAD`), a usage job only once it is back on the writer. A Git job the
//! server stops waiting for ([`GRACE`] past the budget) never starts that
//! step (`project::Fence`).

use std::time::{Duration, Instant};

/// The budget of one staged job (the wire crate's, which the client's wait
/// is made from).
pub const JOB: Duration = mosaic_wire::limits::STAGED_BUDGET;

/// How long past a job's budget the server still waits for its worker
/// before it answers for it (`server::staged`): a worker held up outside
/// the broker's control (the file system) never delays the reply longer.
pub const GRACE: Duration = Duration::from_secs(1);

/// When a staged job must be done by.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    end: Instant,
}

impl Budget {
    /// A fresh budget of [`JOB`] from now.
    pub fn start() -> Budget {
        Budget::ending(Instant::now() + JOB)
    }

    /// A budget that runs out at `end`.
    pub fn ending(end: Instant) -> Budget {
        Budget { end }
    }

    /// What is left of it (zero once it passed).
    pub fn left(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    /// True once nothing is left.
    pub fn passed(&self) -> bool {
        self.left().is_zero()
    }

    /// How long one step capped at `cap` may run now (see [`share`]).
    pub fn for_step(&self, cap: Duration) -> Option<Duration> {
        share(self.left(), cap)
    }
}

/// One step's time out of a budget with `left` remaining: what is left,
/// never more than the step's own `cap`; `None` when nothing is left (the
/// step is not started).
pub fn share(left: Duration, cap: Duration) -> Option<Duration> {
    if left.is_zero() {
        None
    } else {
        Some(left.min(cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_gets_what_is_left_never_more_than_its_cap() {
        let s = Duration::from_secs;
        let cap = s(10);
        // A fresh job: each step its own 10 s.
        assert_eq!(share(s(30), cap), Some(s(10)));
        assert_eq!(share(s(10), cap), Some(s(10)));
        // Late in the job: what is left.
        assert_eq!(share(s(4), cap), Some(s(4)));
        assert_eq!(
            share(Duration::from_millis(1), cap),
            Some(Duration::from_millis(1))
        );
        // Passed: not started.
        assert_eq!(share(Duration::ZERO, cap), None);
        // Three 10 s steps use the whole 30 s budget; a fourth is not run.
        let mut left = JOB;
        let mut given = Vec::new();
        while let Some(d) = share(left, cap) {
            given.push(d);
            left -= d;
        }
        assert_eq!(given, [s(10), s(10), s(10)]);
        assert_eq!(JOB, s(30));
    }

    #[test]
    fn a_budget_counts_down_from_its_end() {
        let before = Instant::now();
        let b = Budget::start();
        let after = Instant::now();
        // It ends JOB from when it was started, whatever the clock did since.
        assert!(before + JOB <= b.end && b.end <= after + JOB);
        assert!(!b.passed());
        assert!(b.left() <= JOB);
        assert_eq!(
            b.for_step(Duration::from_secs(10)),
            Some(Duration::from_secs(10))
        );
        let gone = Budget::ending(Instant::now());
        assert!(gone.passed());
        assert_eq!(gone.for_step(Duration::from_secs(10)), None);
    }
}
