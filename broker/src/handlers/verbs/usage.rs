//! `usage.begin` and `usage.end {turn}`: the managed runner's calls around
//! one harness turn (3i row 124). The bound role holder names a message
//! delivered to its run; `begin` stores what the run's transcript holds
//! before the turn (the baseline), `end` stores what the turn spent, or the
//! fixed code saying why that is unknown.
//!
//! Both are staged verbs ([`Call`]): the writer-side part checks the
//! caller and looks for a recorded result; the transcript is read off the
//! writer (`crate::transcripts`), one reading per run at a time; the finish
//! writes the record on the writer. A call whose result is already
//! recorded (a replay) reads nothing and answers that record again, so
//! nothing is charged twice.

use crate::budget::Budget;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::handlers::fields::Fields;
use crate::handlers::handler::role_session;
use crate::handlers::staged::{Prepared, Slow, Staged};
use crate::policy::usage::exact;
use crate::store::messages as msgs;
use crate::store::usage::{self as records, Kind, NewReading, NewUsageRecord, UsageRecord};
use crate::store::Tx;
use crate::transcripts::transcript::Baseline;
use crate::transcripts::{self, Reading};
use serde_json::{json, Value};
use std::path::PathBuf;

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

/// A prepared usage call.
#[derive(Debug)]
pub enum Call {
    /// Already recorded: the reply, nothing to read.
    Replay(Value),
    /// Take the turn's baseline.
    Begin(Turn),
    /// Read the turn's outcome against its baseline (`None`: none usable).
    End(Turn, Option<Baseline>),
}

impl Staged for Call {
    type Found = Found;
    /// A lost reading is a failed source (it never is lost: the reading
    /// returns codes, not panics).
    const LOST: Code = Code::UsageSourceFailed;

    /// The run whose transcript this call reads (`None`: a replay).
    fn reads(&self) -> Option<&str> {
        match self {
            Call::Replay(_) => None,
            Call::Begin(t) | Call::End(t, _) => Some(&t.run),
        }
    }

    /// Reads the transcript within the budget (past it, the source failed).
    fn slow(&mut self) -> Option<Slow<Found>> {
        let (source, transcript) = match self {
            Call::Replay(_) => return None,
            Call::Begin(t) | Call::End(t, _) => (t.source.clone(), t.transcript.clone()),
        };
        let run: Box<dyn FnOnce(Budget) -> Result<Found, Code> + Send> = match self {
            Call::End(_, base) => {
                let base = base.take();
                Box::new(move |budget| {
                    transcripts::end(&source, transcript.as_deref(), base.as_ref(), &budget)
                        .map(Found::Known)
                })
            }
            _ => Box::new(move |budget| {
                transcripts::begin(&source, transcript.as_deref(), &budget)
                    .map(|b| Found::Baseline(b.to_json()))
            }),
        };
        Some(Slow { run, fence: None })
    }

    fn finish(
        self,
        core: &mut Core,
        _caller: &Caller,
        found: Option<Result<Found, Code>>,
    ) -> Result<Value, Code> {
        match self {
            Call::Replay(v) => Ok(v),
            Call::Begin(t) | Call::End(t, _) => record(core, t, found.unwrap_or(Err(Self::LOST))),
        }
    }
}

/// `usage.begin {turn}`.
pub fn begin(core: &mut Core, caller: &Caller, args: Fields) -> Result<Prepared, Code> {
    prepare(core, caller, Phase::Begin, args).map(Prepared::new)
}

/// `usage.end {turn}`.
pub fn end(core: &mut Core, caller: &Caller, args: Fields) -> Result<Prepared, Code> {
    prepare(core, caller, Phase::End, args).map(Prepared::new)
}

/// The writer-side checks of `usage.begin`/`usage.end`, and the recorded
/// result when there is one.
fn prepare(core: &mut Core, caller: &Caller, phase: Phase, mut args: Fields) -> Result<Call, Code> {
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
        let outcome = records::usage_outcome(tx.db(), &t.run, &t.source, &t.turn)?;
        let baseline = records::usage_baseline(tx.db(), &t.run, &t.source, &t.turn)?;
        Ok(match (phase, outcome, baseline) {
            (Phase::Begin, _, Some(b)) => Call::Replay(begin_reply(&t, &b)),
            (Phase::Begin, Some(o), None) => Call::Replay(begin_reply(&t, &o)),
            (Phase::Begin, None, None) => Call::Begin(t),
            (Phase::End, Some(o), _) => Call::Replay(end_reply(&t, &o)),
            (Phase::End, None, b) => {
                let base = b.and_then(|b| match b.kind {
                    Kind::Baseline(m) => Baseline::from_json(&Value::Object(m)),
                    _ => None,
                });
                Call::End(t, base)
            }
        })
    })
}

/// The caller holds its role, and `turn` is a message of its business to
/// its role, delivered to this run (`message.read`'s codes).
fn check_turn(tx: &mut Tx<'_>, t: &Turn) -> Result<(), Code> {
    if !tx.holds(&t.business, &t.role, &t.run)? {
        return Err(Code::NotHolder);
    }
    let f = msgs::message_facts(tx.db(), &t.business, &t.turn)?.ok_or(Code::MessageNotFound)?;
    if f.to_role != t.role {
        return Err(Code::MessageNotFound);
    }
    match f.delivered_to.as_deref() {
        None => Err(Code::NotDelivered),
        Some(r) if r != t.run => Err(Code::NotHolder),
        Some(_) => Ok(()),
    }
}

/// Writes what the reading found (unless a call that raced this one wrote
/// first: then that record is the answer) and returns the reply.
fn record(core: &mut Core, t: Turn, found: Result<Found, Code>) -> Result<Value, Code> {
    let written = core.store.write(|tx| {
        if !tx.holds(&t.business, &t.role, &t.run)? {
            return Err(Code::NotHolder);
        }
        // A begin answers its baseline, else an outcome settled without
        // one; an end answers its outcome.
        let baseline = match t.phase {
            Phase::Begin => records::usage_baseline(tx.db(), &t.run, &t.source, &t.turn)?,
            Phase::End => None,
        };
        let recorded = match baseline {
            Some(b) => Some(b),
            None => records::usage_outcome(tx.db(), &t.run, &t.source, &t.turn)?,
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

/// What a usage call's reading found: the turn's baseline, or its outcome.
#[derive(Debug)]
pub enum Found {
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
