//! `usage.begin` and `usage.end {turn}`: the managed runner's calls around
//! one harness turn (3i row 124). The bound role holder names a message
//! delivered to its run; `begin` stores what the run's transcript holds
//! before the turn (the baseline), `end` stores what the turn spent, or the
//! fixed code saying why that is unknown.
//!
//! Both are staged verbs: [`prepare`] checks the caller and looks for a
//! recorded result on the writer; the transcript is read off the writer
//! ([`Job::run`], `crate::usage`); [`finish`] writes the record on the
//! writer. A call whose result is already recorded (a replay) reads
//! nothing and answers that record again, so nothing is charged twice.

use super::{role_session, Args};
use crate::budget::Budget;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::policy::usage::exact;
use crate::store::evidence;
use crate::store::messages as msgs;
use crate::store::usage::{self as records, Kind, NewReading, NewUsageRecord, UsageRecord};
use crate::store::Tx;
use crate::usage::transcript::Baseline;
use crate::usage::{self, Reading};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The verbs this module stages.
pub const STAGED: &[&str] = &["usage.begin", "usage.end"];

pub fn is_staged(verb: &str) -> bool {
    STAGED.contains(&verb)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Begin,
    End,
}

/// Who and what a usage call is about, as the writer resolved it.
#[derive(Debug, Clone)]
pub struct Turn {
    phase: Phase,
    business: String,
    role: String,
    run: String,
    turn: String,
    /// The source: the run's harness.
    source: String,
    /// The run's transcript path (memory only).
    transcript: Option<PathBuf>,
    /// The run's account (3i row 126).
    account: Option<String>,
}

/// The off-writer part of a usage call.
#[derive(Debug)]
pub enum Job {
    /// Already recorded: the reply, nothing to read.
    Replay(Value),
    /// Take the turn's baseline.
    Begin(Turn),
    /// Read the turn's outcome against its baseline (`None`: none usable).
    End(Turn, Option<Baseline>),
}

/// What the off-writer part found.
#[derive(Debug)]
pub enum Worked {
    Replay(Value),
    Begun(Turn, Result<Baseline, Code>),
    Ended(Turn, Result<Reading, Code>),
}

impl Job {
    /// Reads the transcript within `budget` (past it, the source failed).
    /// Blocking: call it on a worker thread.
    pub fn run(self, budget: Budget) -> Worked {
        match self {
            Job::Replay(v) => Worked::Replay(v),
            Job::Begin(t) => {
                let r = usage::begin(&t.source, t.transcript.as_deref(), &budget);
                Worked::Begun(t, r)
            }
            Job::End(t, base) => {
                let r = usage::end(&t.source, t.transcript.as_deref(), base.as_ref(), &budget);
                Worked::Ended(t, r)
            }
        }
    }

    /// The run whose transcript this job reads (`None`: a replay, which
    /// reads nothing): the server lets one such job per run read at a
    /// time (`crate::usage::shared`).
    pub fn reads(&self) -> Option<&str> {
        match self {
            Job::Replay(_) => None,
            Job::Begin(t) | Job::End(t, _) => Some(&t.run),
        }
    }

    /// What the call settles to when its worker is lost (it never is: the
    /// reading returns codes, not panics): the source failed.
    pub fn lost(&self) -> Worked {
        match self {
            Job::Replay(v) => Worked::Replay(v.clone()),
            Job::Begin(t) => Worked::Begun(t.clone(), Err(Code::UsageSourceFailed)),
            Job::End(t, _) => Worked::Ended(t.clone(), Err(Code::UsageSourceFailed)),
        }
    }
}

/// The writer-side checks of `usage.begin`/`usage.end`, and the recorded
/// result when there is one.
pub fn prepare(core: &mut Core, caller: &Caller, verb: &str, mut args: Args) -> Result<Job, Code> {
    let phase = match verb {
        "usage.begin" => Phase::Begin,
        "usage.end" => Phase::End,
        _ => return Err(Code::UnknownVerb),
    };
    let turn = args.str("turn", 64)?;
    args.finish()?;
    let (business, role, run) = role_session(caller)?;
    let (record, _) = core.bound(business, run).ok_or(Code::UnknownRun)?;
    let t = Turn {
        phase,
        business: business.to_string(),
        role: role.to_string(),
        run: run.to_string(),
        turn,
        source: record.harness.clone(),
        transcript: record.transcript.as_ref().map(PathBuf::from),
        account: record.account.clone(),
    };
    core.store.write(|tx| {
        check_turn(tx, &t)?;
        let outcome = records::usage_outcome(&tx.tx, &t.run, &t.source, &t.turn)?;
        let baseline = records::usage_baseline(&tx.tx, &t.run, &t.source, &t.turn)?;
        Ok(match (phase, outcome, baseline) {
            (Phase::Begin, _, Some(b)) => Job::Replay(begin_reply(&t, &b)),
            (Phase::Begin, Some(o), None) => Job::Replay(begin_reply(&t, &o)),
            (Phase::Begin, None, None) => Job::Begin(t),
            (Phase::End, Some(o), _) => Job::Replay(end_reply(&t, &o)),
            (Phase::End, None, b) => {
                let base = b.and_then(|b| match b.kind {
                    Kind::Baseline(m) => Baseline::from_json(&Value::Object(m)),
                    _ => None,
                });
                Job::End(t, base)
            }
        })
    })
}

/// The caller holds its role, and `turn` is a message of its business to
/// its role, delivered to this run (`message.read`'s codes).
fn check_turn(tx: &mut Tx<'_>, t: &Turn) -> Result<(), Code> {
    if !evidence::holds(&tx.tx, &t.business, &t.role, &t.run)? {
        return Err(Code::NotHolder);
    }
    let f = msgs::message_facts(&tx.tx, &t.business, &t.turn)?.ok_or(Code::MessageNotFound)?;
    if f.to_role != t.role {
        return Err(Code::MessageNotFound);
    }
    match f.delivered_to.as_deref() {
        None => Err(Code::NotDelivered),
        Some(r) if r != t.run => Err(Code::NotHolder),
        Some(_) => Ok(()),
    }
}

/// Writes what the worker found (unless a call that raced this one wrote
/// first: then that record is the answer) and returns the reply.
pub fn finish(core: &mut Core, worked: Worked) -> Result<Value, Code> {
    let (t, found) = match worked {
        Worked::Replay(v) => return Ok(v),
        Worked::Begun(t, r) => (t, r.map(|b| Found::Baseline(b.to_json()))),
        Worked::Ended(t, r) => (t, r.map(Found::Known)),
    };
    let written = core.store.write(|tx| {
        if !evidence::holds(&tx.tx, &t.business, &t.role, &t.run)? {
            return Err(Code::NotHolder);
        }
        // A begin answers its baseline, else an outcome settled without
        // one; an end answers its outcome.
        let baseline = match t.phase {
            Phase::Begin => records::usage_baseline(&tx.tx, &t.run, &t.source, &t.turn)?,
            Phase::End => None,
        };
        let recorded = match baseline {
            Some(b) => Some(b),
            None => records::usage_outcome(&tx.tx, &t.run, &t.source, &t.turn)?,
        };
        if let Some(r) = recorded {
            return Ok((r, false));
        }
        let reading = match &found {
            Ok(Found::Baseline(Value::Object(m))) => NewReading::Baseline(m),
            Ok(Found::Baseline(_)) => NewReading::Unknown(Code::UsageSourceFailed.as_str()),
            Ok(Found::Known(r)) => NewReading::Known(r.tokens),
            Err(code) => NewReading::Unknown(code.as_str()),
        };
        let (provider, model) = match &found {
            Ok(Found::Known(r)) => (r.provider.as_deref(), r.model.as_deref()),
            _ => (None, None),
        };
        let r = records::append_usage_record(
            tx,
            &NewUsageRecord {
                business: &t.business,
                run: &t.run,
                role: &t.role,
                turn: &t.turn,
                source: &t.source,
                provider,
                model,
                account: t.account.as_deref(),
                reading,
            },
        )?;
        Ok((r, true))
    })?;
    let (record, new) = written;
    if let (true, Kind::Unknown(code)) = (new, &record.kind) {
        tracing::warn!(
            business = %t.business, run = %t.run, turn = %t.turn, source = %t.source,
            code = %code, "usage unknown"
        );
    }
    Ok(match t.phase {
        Phase::Begin => begin_reply(&t, &record),
        Phase::End => end_reply(&t, &record),
    })
}

enum Found {
    Baseline(Value),
    Known(Reading),
}

/// `usage.begin`'s reply: `{turn, sources:[{source, baseline:true}]}` when
/// the turn has its baseline, else (the turn settled unknown without one)
/// `{source, baseline:false, code}`.
fn begin_reply(t: &Turn, r: &UsageRecord) -> Value {
    let entry = match &r.kind {
        Kind::Baseline(_) => json!({"source": r.source, "baseline": true}),
        Kind::Unknown(code) => json!({"source": r.source, "baseline": false, "code": code}),
        Kind::Known(_) => json!({"source": r.source, "baseline": false, "code": null}),
    };
    json!({"turn": t.turn, "sources": [entry]})
}

/// `usage.end`'s reply: `{turn, outcomes:[{source, known:true, provider,
/// model, account, input, output, cacheWrite, cacheRead}]}`, or
/// `{source, known:false, code}`; a count past 2^53-1 is a decimal string.
fn end_reply(t: &Turn, r: &UsageRecord) -> Value {
    let entry = match &r.kind {
        Kind::Known(k) => json!({
            "source": r.source, "known": true,
            "provider": r.provider, "model": r.model, "account": r.account,
            "input": exact(k.input.into()), "output": exact(k.output.into()),
            "cacheWrite": exact(k.cache_write.into()), "cacheRead": exact(k.cache_read.into()),
        }),
        Kind::Unknown(code) => json!({"source": r.source, "known": false, "code": code}),
        // `end` only answers outcomes; a baseline here would be a bug.
        Kind::Baseline(_) => json!({"source": r.source, "known": false, "code": null}),
    };
    json!({"turn": t.turn, "outcomes": [entry]})
}

/// `usage.begin`/`usage.end` in one go, for in-process dispatch (the
/// transcript is read on the calling thread).
pub fn begin_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    let job = prepare(core, caller, "usage.begin", args)?;
    finish(core, job.run(Budget::start()))
}

pub fn end_inline(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    let job = prepare(core, caller, "usage.end", args)?;
    finish(core, job.run(Budget::start()))
}
