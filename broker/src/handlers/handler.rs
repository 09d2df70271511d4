//! What a handler is. A socket verb is a [`Verb`] (parse its typed
//! arguments, then apply them on the writer), a [`ReadVerb`] (parse, then
//! answer from a shared `Core`: it cannot write) or a [`StagedVerb`] (parse,
//! then prepare a [`Staged`] whose slow part runs off the writer); a host
//! op is an [`Op`]. [`Sessions`] says which session classes may call a
//! verb. Every argument reaches a handler through the one reader,
//! [`Fields`]: no handler sees bytes or an untyped argument map.

use super::fields::Fields;
use super::staged::{Prepared, Staged};
use crate::core::{Caller, Core};
use crate::error::Code;
use serde_json::Value;
use std::path::Path;

/// A socket verb's typed arguments, parsed whole before anything is read
/// or written.
pub(crate) trait Verb: Sized {
    /// Takes every argument the verb knows and refuses any left over.
    fn parse(args: Fields) -> Result<Self, Code>;
    /// Runs the verb for a caller the table let through.
    fn apply(self, core: &mut Core, caller: &Caller) -> Result<Value, Code>;
}

/// A read verb's typed arguments: it answers from a shared `Core`, so it
/// can write nothing (3i: a successful read writes nothing).
pub(crate) trait ReadVerb: Sized {
    /// Takes every argument the verb knows and refuses any left over.
    fn parse(args: Fields) -> Result<Self, Code>;
    /// Answers the read for a caller the table let through.
    fn answer(self, core: &Core, caller: &Caller) -> Result<Value, Code>;
}

/// A staged socket verb's typed arguments: parsed whole, then its
/// writer-side part, which hands back the work to run off the writer.
pub(crate) trait StagedVerb: Sized {
    type Staged: Staged;
    /// Takes every argument the verb knows and refuses any left over.
    fn parse(args: Fields) -> Result<Self, Code>;
    /// The writer-side part: the checks, the receipt written before the
    /// slow part if the verb has one, and what to do off the writer.
    fn stage(self, core: &mut Core, caller: &Caller) -> Result<Self::Staged, Code>;
}

/// What an inline row calls: parse, then apply.
pub type Handler = fn(&mut Core, &Caller, Fields) -> Result<Value, Code>;

/// What a read row calls: parse, then answer.
pub type ReadHandler = fn(&Core, &Caller, Fields) -> Result<Value, Code>;

/// What a staged row calls: parse, then prepare.
pub type Prepare = fn(&mut Core, &Caller, Fields) -> Result<Prepared, Code>;

pub(crate) fn run<V: Verb>(core: &mut Core, caller: &Caller, args: Fields) -> Result<Value, Code> {
    V::parse(args)?.apply(core, caller)
}

pub(crate) fn answer<V: ReadVerb>(
    core: &Core,
    caller: &Caller,
    args: Fields,
) -> Result<Value, Code> {
    V::parse(args)?.answer(core, caller)
}

pub(crate) fn prepare<V: StagedVerb>(
    core: &mut Core,
    caller: &Caller,
    args: Fields,
) -> Result<Prepared, Code> {
    Ok(Prepared::new(V::parse(args)?.stage(core, caller)?))
}

/// What an op may read off the writer thread before it is queued there:
/// the runtime supplies both (the writer never reads `/proc` or the seals
/// file for an op).
pub struct Outside<'a> {
    /// A process's start time as `/proc` gives it now (`None`: unreadable).
    pub start_time: &'a dyn Fn(i32) -> Option<u64>,
    /// The seals file.
    pub seals: &'a Path,
}

/// A host op: its name on the channel, its typed fields, and what it does.
pub trait Op: Sized + Send + 'static {
    /// The op's name on the host channel.
    const NAME: &'static str;
    /// The key its answer goes under in the channel's reply.
    const REPLY_KEY: &'static str = "result";
    /// Takes every field the op knows and refuses any left over.
    fn parse(f: Fields) -> Result<Self, Code>;
    /// What the op reads off the writer before it is queued there; `Some`
    /// is its whole answer, and it never reaches the writer.
    fn observe(&mut self, _outside: &Outside<'_>) -> Option<Result<Value, Code>> {
        None
    }
    /// Runs the op on the writer thread.
    fn apply(self, core: &mut Core) -> Result<Value, Code>;
}

/// An [`Op`] whose type the table no longer knows.
pub(crate) trait AnyOp: Send {
    fn observe(&mut self, outside: &Outside<'_>) -> Option<Result<Value, Code>>;
    fn apply(self: Box<Self>, core: &mut Core) -> Result<Value, Code>;
}

impl<O: Op> AnyOp for O {
    fn observe(&mut self, outside: &Outside<'_>) -> Option<Result<Value, Code>> {
        Op::observe(self, outside)
    }

    fn apply(self: Box<Self>, core: &mut Core) -> Result<Value, Code> {
        Op::apply(*self, core)
    }
}

/// Implements [`Op`] for a type whose inherent `parse` and `apply` are
/// the op's (the embedded runtime and the tests call them directly too).
macro_rules! host_op {
    ($t:ty, $name:literal) => {
        impl $crate::handlers::handler::Op for $t {
            const NAME: &'static str = $name;
            fn parse(f: $crate::handlers::fields::Fields) -> Result<Self, $crate::error::Code> {
                <$t>::parse(f)
            }
            fn apply(
                self,
                core: &mut $crate::core::Core,
            ) -> Result<serde_json::Value, $crate::error::Code> {
                <$t>::apply(self, core)
            }
        }
    };
}
pub(crate) use host_op;

/// Who may call a verb: `None` for a class that may, else the code that
/// class gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sessions {
    pub role: Option<Code>,
    pub reader: Option<Code>,
    pub human: Option<Code>,
    pub tester: Option<Code>,
}

impl Sessions {
    /// The code `caller`'s class gets, if it may not call the verb.
    pub fn refusal(&self, caller: &Caller) -> Option<Code> {
        match caller {
            Caller::Role { .. } => self.role,
            Caller::Reader { .. } => self.reader,
            Caller::Human { .. } => self.human,
            Caller::Tester { .. } => self.tester,
        }
    }
}

/// The role session behind a mutation, or the code for who may not mutate.
pub(crate) fn role_session(caller: &Caller) -> Result<(&str, &str, &str), Code> {
    caller.role_session()
}
