//! `threadsState` and `threadIdle`: the thread launcher's trusted ops
//! (3i row 121), not socket verbs. The launcher reads the state to start
//! and stop thread sessions; its idle stop releases a run's thread only when
//! nothing came in since its snapshot.

use crate::core::Core;
use crate::error::Code;
use crate::handlers::fields::{Fields, HOST_MAX};
use crate::handlers::handler::host_op;
use serde_json::Value;

/// `threadsState {business}` → per thread `{thread, instance, pending,
/// unread, lastMessage, lastOpen, lastClaim, holder}`.
pub struct ThreadsState {
    pub business: String,
}

impl ThreadsState {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let business = f.str("business", HOST_MAX)?;
        f.finish()?;
        Ok(ThreadsState { business })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        crate::handlers::verbs::threads::threads_state(core, &self.business)
    }
}

/// `threadIdle {business, thread, run}` → `{released:true}` or
/// `{released:false, pending, unread}`.
pub struct ThreadIdle {
    pub business: String,
    pub thread: String,
    pub run: String,
}

impl ThreadIdle {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let business = f.str("business", HOST_MAX)?;
        let thread = f.str("thread", HOST_MAX)?;
        let run = f.str("run", HOST_MAX)?;
        f.finish()?;
        Ok(ThreadIdle {
            business,
            thread,
            run,
        })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        crate::handlers::verbs::threads::thread_idle(core, &self.business, &self.thread, &self.run)
    }
}

host_op!(ThreadsState, "threadsState");
host_op!(ThreadIdle, "threadIdle");
