//! The one shape of a staged verb: a verb whose slow part (Git, a
//! transcript, the organization file) runs on a blocking worker, outside
//! every store transaction, so the writer never waits on it.
//!
//! Three stages, whatever the verb: its writer-side part
//! ([`super::handler::StagedVerb::stage`]) checks the caller and hands
//! back a [`Staged`]; [`Staged::slow`] takes out the blocking work, which
//! the server runs within the request's budget; [`Staged::finish`] runs on
//! the writer with what it found (a commit's receipt, a usage record, or
//! just the reply). The server ([`crate::server`]) and the in-process
//! dispatch ([`super::dispatch`]) drive every staged verb the same way,
//! through the type-erased [`Prepared`].

use crate::budget::Budget;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::git::Fence;
use serde_json::Value;
use std::any::Any;
use std::sync::Arc;

/// How the server orders the requests of one staged verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serial {
    /// Side by side.
    Free,
    /// One reading of a run's transcript at a time ([`Staged::reads`]): a
    /// request that waited for another of its run is prepared again.
    PerRun,
    /// One at a time across the broker, from the prepare to the end of the
    /// slow part (the organization file: a write that committed its
    /// receipt replaces the file before the next one reads it).
    Alone,
}

/// A staged verb's blocking work.
pub struct Slow<F> {
    /// Runs on a worker thread within the budget.
    pub run: Box<dyn FnOnce(Budget) -> Result<F, Code> + Send>,
    /// A Git job's fence: the server waits for the job only until its
    /// budget and `budget::GRACE` have passed, then abandons it through
    /// this. Without one, the work ends within its budget by itself.
    pub fence: Option<Arc<Fence>>,
}

/// A prepared staged verb, between its writer-side part and its finish.
pub trait Staged: Send + Sized + 'static {
    /// What the slow part finds.
    type Found: Send + 'static;
    /// What the request settles to when its worker is lost.
    const LOST: Code;
    /// The run whose transcript the slow part reads, if any (see
    /// [`Serial::PerRun`]).
    fn reads(&self) -> Option<&str> {
        None
    }
    /// Takes the slow part out; `None` when there is nothing to do off the
    /// writer (a replay, an uncited check).
    fn slow(&mut self) -> Option<Slow<Self::Found>>;
    /// True when a commit stands whatever happens next: a failure from
    /// here on answers `outcome-unknown`, never a plain refusal.
    fn committed(&self, _found: Option<Result<&Self::Found, Code>>) -> bool {
        false
    }
    /// Back on the writer with what the slow part found (`None`: it had
    /// none): the receipt or record, and the reply.
    fn finish(
        self,
        core: &mut Core,
        caller: &Caller,
        found: Option<Result<Self::Found, Code>>,
    ) -> Result<Value, Code>;
}

/// What a slow part found, its type known only to its [`Staged`].
pub struct Found(Box<dyn Any + Send>);

/// A [`Staged`] whose type the table no longer knows.
trait Erased: Send {
    fn reads(&self) -> Option<&str>;
    fn lost(&self) -> Code;
    fn slow(&mut self) -> Option<Slow<Found>>;
    fn committed(&self, found: Option<&Result<Found, Code>>) -> bool;
    fn finish(
        self: Box<Self>,
        core: &mut Core,
        caller: &Caller,
        found: Option<Result<Found, Code>>,
    ) -> Result<Value, Code>;
}

impl<S: Staged> Erased for S {
    fn reads(&self) -> Option<&str> {
        Staged::reads(self)
    }

    fn lost(&self) -> Code {
        S::LOST
    }

    fn slow(&mut self) -> Option<Slow<Found>> {
        Staged::slow(self).map(|s| {
            let run = s.run;
            Slow {
                run: Box::new(move |budget| run(budget).map(|f| Found(Box::new(f)))),
                fence: s.fence,
            }
        })
    }

    fn committed(&self, found: Option<&Result<Found, Code>>) -> bool {
        let found = found.map(|r| match r {
            Ok(f) => {
                f.0.downcast_ref::<S::Found>()
                    .ok_or(Code::StorageUnavailable)
            }
            Err(code) => Err(*code),
        });
        Staged::committed(self, found)
    }

    fn finish(
        self: Box<Self>,
        core: &mut Core,
        caller: &Caller,
        found: Option<Result<Found, Code>>,
    ) -> Result<Value, Code> {
        // The found value was made by this same type's slow part.
        let found = found.map(|r| {
            r.and_then(|f| {
                f.0.downcast::<S::Found>()
                    .map(|b| *b)
                    .map_err(|_| Code::StorageUnavailable)
            })
        });
        Staged::finish(*self, core, caller, found)
    }
}

/// A prepared staged verb as the dispatch hands it to the server, with
/// the task its refusal is filed under (taken from the request).
pub struct Prepared {
    inner: Box<dyn Erased>,
    pub(crate) subject: Option<String>,
}

impl Prepared {
    pub fn new<S: Staged>(staged: S) -> Prepared {
        Prepared {
            inner: Box::new(staged),
            subject: None,
        }
    }

    /// See [`Staged::reads`].
    pub fn reads(&self) -> Option<&str> {
        self.inner.reads()
    }

    /// See [`Staged::LOST`].
    pub fn lost(&self) -> Code {
        self.inner.lost()
    }

    /// See [`Staged::slow`].
    pub fn slow(&mut self) -> Option<Slow<Found>> {
        self.inner.slow()
    }

    /// Runs the slow part on the calling thread (in process), if any.
    pub fn run_here(&mut self, budget: Budget) -> Option<Result<Found, Code>> {
        self.slow().map(|s| (s.run)(budget))
    }

    /// See [`Staged::committed`].
    pub fn committed(&self, found: Option<&Result<Found, Code>>) -> bool {
        self.inner.committed(found)
    }

    pub(crate) fn finish(
        self,
        core: &mut Core,
        caller: &Caller,
        found: Option<Result<Found, Code>>,
    ) -> Result<Value, Code> {
        self.inner.finish(core, caller, found)
    }
}
