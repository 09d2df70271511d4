//! Requests: the one way a socket verb or a host op is handled.
//!
//! - `table.rs`: [`VERBS`] and [`HOST_OPS`], one row per request
//! - `handler.rs`: what a handler is ([`Verb`], [`StagedVerb`], [`Op`]) and
//!   who may call a verb ([`Sessions`])
//! - `fields.rs`: [`Fields`], the one argument reader
//! - `refusal.rs`: the one writer of refusal evidence
//! - `staged.rs`: [`Staged`], the one shape of a verb with a slow part
//! - `verbs/`, `ops/`: the handlers, one module per family
//!
//! A verb's order: unknown verb; a tester's class (before anything of the
//! request is looked at); the known-token check on the args; every other
//! class; then the handler (parse, apply; or parse, prepare, the slow
//! part, finish) and the known-token check on the reply. Every refusal is
//! a static code, and every refusal of a resolved caller other than a
//! reader leaves evidence ([`refusal::refused`]), written here for every
//! verb.
//!
//! [`Verb`]: handler::Verb
//! [`StagedVerb`]: handler::StagedVerb
//! [`Op`]: handler::Op
//! [`Sessions`]: handler::Sessions

pub mod fields;
pub mod handler;
pub mod ops;
pub mod refusal;
pub mod staged;
pub mod table;
pub mod verbs;
pub mod views;

pub use fields::Fields;
pub use handler::{Op, Outside};
pub use staged::{Found, Prepared, Serial, Slow, Staged};
pub use table::{OpRow, Run, VerbRow, HOST_OPS, VERBS};

use crate::budget::Budget;
use crate::core::{Caller, Core};
use crate::error::Code;
use handler::AnyOp;
use serde_json::{json, Map, Value};

/// A verb's row in [`VERBS`].
pub fn lookup(verb: &str) -> Option<&'static VerbRow> {
    VERBS.iter().find(|v| v.name == verb)
}

/// Every verb this build serves (every verb of the table), in table order.
pub fn served_verbs() -> impl Iterator<Item = &'static str> {
    VERBS.iter().map(|v| v.name)
}

/// How the server orders a request of `verb` with these args, when it is
/// staged (`None`: it runs inline on the writer).
pub fn staged_as(verb: &str, args: Option<&Map<String, Value>>) -> Option<Serial> {
    serial_of(lookup(verb)?, args)
}

fn serial_of(row: &VerbRow, args: Option<&Map<String, Value>>) -> Option<Serial> {
    match row.run {
        Run::Inline(_) | Run::Read(_) => None,
        Run::Staged(_, serial) => Some(serial),
        Run::StagedWhen(when, _, _) => when(args).then_some(Serial::Free),
    }
}

/// True for a request the server runs in stages (see [`staged_as`]).
pub fn is_staged(verb: &str, args: Option<&Map<String, Value>>) -> bool {
    staged_as(verb, args).is_some()
}

/// Runs one verb for `caller` in one go on the calling thread: an inline
/// verb on the writer as the server runs it; a staged verb's three stages
/// one after the other (in process, for tests and benchmarks: the server
/// never runs a slow part on the writer).
pub fn dispatch(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    args: Option<Map<String, Value>>,
) -> Result<Value, Code> {
    let row = lookup(verb);
    if row.is_some_and(|r| serial_of(r, args.as_ref()).is_some()) {
        let mut prepared = prepare_staged(core, caller, verb, args)?;
        let found = prepared.run_here(Budget::start());
        return finish_staged(core, caller, verb, prepared, found);
    }
    // Taken before the handler consumes the args; only a refusal uses it.
    let subject = refusal::subject_of(args.as_ref());
    let ran = check_entry(core, caller, row, args.as_ref()).and_then(|()| {
        let reply = match row.map(|r| r.run) {
            Some(Run::Inline(h) | Run::StagedWhen(_, _, h)) => h(core, caller, Fields::of(args))?,
            Some(Run::Read(h)) => h(core, caller, Fields::of(args))?,
            Some(Run::Staged(..)) | None => return Err(Code::UnknownVerb),
        };
        core.known_tokens().check(&reply)?;
        Ok(reply)
    });
    ran.map_err(|code| refused(core, caller, verb, subject, code))
}

/// A staged verb's first stage, on the writer: the same checks and
/// refusal evidence as [`dispatch`], then the verb's writer-side part.
pub fn prepare_staged(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    args: Option<Map<String, Value>>,
) -> Result<Prepared, Code> {
    let subject = refusal::subject_of(args.as_ref());
    let row = lookup(verb);
    let prepared = check_entry(core, caller, row, args.as_ref()).and_then(|()| {
        let prepare = match row.map(|row| row.run) {
            Some(Run::Staged(p, _) | Run::StagedWhen(_, p, _)) => p,
            Some(Run::Inline(_) | Run::Read(_)) | None => return Err(Code::UnknownVerb),
        };
        prepare(core, caller, Fields::of(args))
    });
    match prepared {
        Ok(mut p) => {
            // Its refusal after the slow part is filed where one before it
            // is: under the request's task ref.
            p.subject = subject;
            Ok(p)
        }
        Err(code) => Err(refused(core, caller, verb, subject, code)),
    }
}

/// A staged verb's last stage, on the writer, with what its slow part
/// found: the verb's finish, the known-token check on the reply, or the
/// refusal's evidence. Once a commit stands ([`Staged::committed`]), a
/// failure answers `outcome-unknown`.
pub fn finish_staged(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    prepared: Prepared,
    found: Option<Result<Found, Code>>,
) -> Result<Value, Code> {
    let committed = prepared.committed(found.as_ref());
    let subject = prepared.subject.clone();
    let checked = prepared.finish(core, caller, found).and_then(|reply| {
        core.known_tokens().check(&reply)?;
        Ok(reply)
    });
    checked.map_err(|code| {
        let recorded = refused(core, caller, verb, subject, code);
        if committed {
            Code::OutcomeUnknown
        } else {
            recorded
        }
    })
}

fn refused(
    core: &mut Core,
    caller: &Caller,
    verb: &str,
    subject: Option<String>,
    code: Code,
) -> Code {
    let served = lookup(verb).is_some();
    refusal::refused(core, caller, (verb, served), subject, code)
}

/// The checks before a verb's own: unknown verb, the tester's class, the
/// known-token check on the args, every other class.
fn check_entry(
    core: &Core,
    caller: &Caller,
    row: Option<&VerbRow>,
    args: Option<&Map<String, Value>>,
) -> Result<(), Code> {
    let entry = row.ok_or(Code::UnknownVerb)?;
    if let (Caller::Tester { .. }, Some(code)) = (caller, entry.sessions.tester) {
        return Err(code);
    }
    if let Some(a) = args.filter(|_| !core.known_tokens().is_empty()) {
        let tokens = core.known_tokens();
        a.iter()
            .try_for_each(|(k, v)| tokens.check_str(k).and_then(|()| tokens.check(v)))?;
    }
    if let Some(code) = entry.sessions.refusal(caller) {
        return Err(code);
    }
    Ok(())
}

/// One parsed host op: its row and its typed fields.
pub struct HostOp {
    name: &'static str,
    reply_key: &'static str,
    op: Box<dyn AnyOp>,
}

impl HostOp {
    /// Parses op `name` with its fields `m` (the request without `op` and
    /// `id`). An unknown op is `unknown-op`.
    pub fn parse(name: &str, m: Map<String, Value>) -> Result<HostOp, Code> {
        let row = HOST_OPS
            .iter()
            .find(|r| r.name == name)
            .ok_or(Code::UnknownOp)?;
        Ok(HostOp {
            name: row.name,
            reply_key: row.reply_key,
            op: (row.parse)(Fields::new(m))?,
        })
    }

    /// A typed op, built in process (the embedded runtime).
    pub fn new<O: Op>(op: O) -> HostOp {
        HostOp {
            name: O::NAME,
            reply_key: O::REPLY_KEY,
            op: Box::new(op),
        }
    }

    /// The op's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The key the op's answer goes under in the channel's reply.
    pub fn reply_key(&self) -> &'static str {
        self.reply_key
    }

    /// What the op reads off the writer first; `Some` is its whole answer.
    pub fn observe(&mut self, outside: &Outside<'_>) -> Option<Result<Value, Code>> {
        self.op.observe(outside)
    }

    /// Runs the op on the writer thread.
    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        self.op.apply(core)
    }
}

/// The channel's success reply for an op's answer.
pub fn ok_reply(key: &str, v: Value) -> Value {
    let mut reply = json!({"ok": true});
    reply[key] = v;
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client and the shims wait longer only for the verbs listed in
    /// the wire crate: every verb the server may stage within a budget
    /// must be there, or its client gives up (`outcome-unknown`) while the
    /// job still runs; and nothing else is.
    #[test]
    fn every_staged_verb_gets_the_long_client_wait() {
        let long = mosaic_wire::limits::STAGED_VERBS;
        let mut cited = Map::new();
        cited.insert("spec_commit".into(), Value::from("x"));
        for row in VERBS {
            match staged_as(row.name, Some(&cited)) {
                None | Some(Serial::Alone) => {}
                Some(_) => assert!(long.contains(&row.name), "{}", row.name),
            }
        }
        assert!(!is_staged("decision.raise", None));
        assert!(is_staged("decision.raise", Some(&cited)));
        for v in long {
            assert!(is_staged(v, Some(&cited)), "{v}");
        }
    }
}
