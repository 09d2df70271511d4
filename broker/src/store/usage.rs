//! Usage records (schemas 3h/3i, 3i rows 124 and 126): the append-only
//! `usage_records`, one row per baseline or outcome of a run's turn from one
//! usage source. The writer, the replay lookups `usage.begin`/`usage.end`
//! make, and the rows the `usage` read sums (`policy::usage`).
//!
//! Invariants: a row's `at` comes from the transaction's clock (the table has
//! no timestamp trigger, the open-time scan checks it); an unknown outcome's
//! code is a `&'static str`, so no transcript text can become one; a second
//! baseline or outcome for the same `(run, source, turn)` is refused by the
//! store's unique indexes (callers look the recorded one up first).

use super::{map_sql_error, Db, Tx};
use crate::error::Code;
use crate::policy::usage::{Outcome, Reading, Tokens};
use rusqlite::types::ValueRef;
use rusqlite::{params, OptionalExtension, Row};
use serde_json::{Map, Value};

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The source's position before the turn (a small object the source
    /// defines: sizes and digests, never transcript text).
    Baseline(Map<String, Value>),
    /// The turn's counted tokens.
    Known(Tokens),
    /// No reading, with the fixed code saying why.
    Unknown(String),
}

/// A record to append. `Unknown`'s code is static: a fixed code, never text
/// taken from a transcript.
#[derive(Debug, Clone, Copy)]
pub struct NewUsageRecord<'a> {
    pub business: &'a str,
    pub run: &'a str,
    /// The role instance the run holds.
    pub role: &'a str,
    /// The delivered message the turn answers (a `messages.id`).
    pub turn: &'a str,
    pub source: &'a str,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    /// The run's account from its launch record (null for a pi run).
    pub account: Option<&'a str>,
    pub reading: NewReading<'a>,
}

/// The kind-specific part of a [`NewUsageRecord`].
#[derive(Debug, Clone, Copy)]
pub enum NewReading<'a> {
    Baseline(&'a Map<String, Value>),
    Known(Tokens),
    Unknown(&'static str),
}

/// A stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    pub seq: i64,
    pub business: String,
    pub run: String,
    pub role: String,
    pub turn: String,
    pub source: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub account: Option<String>,
    pub kind: Kind,
    pub at: String,
}

const COLUMNS: &str = "seq, business, run, role, turn, source, kind, provider, model, \
     input, output, cache_write, cache_read, baseline, code, account, at";

/// Appends one record in the verb's transaction and returns it as stored.
/// A second baseline, or a second outcome, for the same `(run, source,
/// turn)` is refused by the store (`storage-unavailable`): callers replay
/// through [`usage_baseline`] / [`usage_outcome`] first.
pub fn append_usage_record(t: &mut Tx<'_>, r: &NewUsageRecord<'_>) -> Result<UsageRecord, Code> {
    t.tokens.check_all(&[
        Some(r.business),
        Some(r.run),
        Some(r.role),
        Some(r.turn),
        Some(r.source),
        r.provider,
        r.model,
        r.account,
    ])?;
    let (kind, tokens, baseline, code) = match r.reading {
        NewReading::Baseline(b) => {
            let v = Value::Object(b.clone());
            t.tokens.check(&v)?;
            ("baseline", None, Some(v.to_string()), None)
        }
        NewReading::Known(k) => ("known", Some(k), None, None),
        NewReading::Unknown(c) => ("unknown", None, None, Some(c)),
    };
    // SQLite holds i64; a count past it is no reading this store can keep.
    let column = |n: u64| i64::try_from(n).map_err(|_| Code::InvalidRequest);
    let (input, output, cache_write, cache_read) = match tokens {
        Some(k) => (
            Some(column(k.input)?),
            Some(column(k.output)?),
            Some(column(k.cache_write)?),
            Some(column(k.cache_read)?),
        ),
        None => (None, None, None, None),
    };
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO usage_records(business, run, role, turn, source, kind, provider, model,
           input, output, cache_write, cache_read, baseline, code, account, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )
    .and_then(|mut s| {
        s.execute(params![
            r.business,
            r.run,
            r.role,
            r.turn,
            r.source,
            kind,
            r.provider,
            r.model,
            input,
            output,
            cache_write,
            cache_read,
            baseline,
            code,
            r.account,
            at
        ])
    })
    .map_err(|e| map_sql_error(&e))?;
    let seq = t.tx.last_insert_rowid();
    Ok(UsageRecord {
        seq,
        business: r.business.to_string(),
        run: r.run.to_string(),
        role: r.role.to_string(),
        turn: r.turn.to_string(),
        source: r.source.to_string(),
        provider: r.provider.map(str::to_string),
        model: r.model.map(str::to_string),
        account: r.account.map(str::to_string),
        kind: match r.reading {
            NewReading::Baseline(b) => Kind::Baseline(b.clone()),
            NewReading::Known(k) => Kind::Known(k),
            NewReading::Unknown(c) => Kind::Unknown(c.to_string()),
        },
        at,
    })
}

/// The baseline recorded for `(run, source, turn)`, if any.
pub fn usage_baseline(
    conn: &Db,
    run: &str,
    source: &str,
    turn: &str,
) -> Result<Option<UsageRecord>, Code> {
    lookup(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM usage_records
             WHERE run = ?1 AND source = ?2 AND turn = ?3 AND kind = 'baseline'"
        ),
        run,
        source,
        turn,
    )
}

/// The outcome (`known` or `unknown`) recorded for `(run, source, turn)`, if any.
pub fn usage_outcome(
    conn: &Db,
    run: &str,
    source: &str,
    turn: &str,
) -> Result<Option<UsageRecord>, Code> {
    lookup(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM usage_records
             WHERE run = ?1 AND source = ?2 AND turn = ?3 AND kind <> 'baseline'"
        ),
        run,
        source,
        turn,
    )
}

fn lookup(
    conn: &Db,
    sql: &str,
    run: &str,
    source: &str,
    turn: &str,
) -> Result<Option<UsageRecord>, Code> {
    let row = conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row([run, source, turn], stored).optional())
        .map_err(|e| map_sql_error(&e))?;
    row.transpose()
}

/// Hands `each` every record of `business` that counts in the `usage`
/// read, oldest first: each outcome, and each baseline no outcome has
/// followed yet (a pending turn, unknown until its end arrives). One row at
/// a time: the caller keeps only what it sums.
pub fn each_usage_reading(
    conn: &Db,
    business: &str,
    each: &mut dyn FnMut(&Reading),
) -> Result<(), Code> {
    let mut st = conn
        .prepare_cached(
            "SELECT u.run, u.role, u.turn, u.provider, u.model, u.account, u.kind,
               u.input, u.output, u.cache_write, u.cache_read
             FROM usage_records u
             WHERE u.business = ?1 AND (u.kind <> 'baseline' OR NOT EXISTS (
               SELECT 1 FROM usage_records o WHERE o.run = u.run AND o.source = u.source
                 AND o.turn = u.turn AND o.kind <> 'baseline'))
             ORDER BY u.seq",
        )
        .map_err(|e| map_sql_error(&e))?;
    let mut rows = st.query([business]).map_err(|e| map_sql_error(&e))?;
    while let Some(r) = rows.next().map_err(|e| map_sql_error(&e))? {
        let reading = (|| -> rusqlite::Result<Result<Reading, Code>> {
            let kind: String = r.get(6)?;
            let outcome = if kind == "known" {
                match tokens_of([r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?]) {
                    Ok(t) => Outcome::Known(t),
                    Err(c) => return Ok(Err(c)),
                }
            } else {
                Outcome::Unknown
            };
            Ok(Ok(Reading {
                run: r.get(0)?,
                instance: r.get(1)?,
                turn: r.get(2)?,
                provider: r.get(3)?,
                model: r.get(4)?,
                account: r.get(5)?,
                outcome,
            }))
        })()
        .map_err(|e| map_sql_error(&e))??;
        each(&reading);
    }
    Ok(())
}

/// Four stored counts as a reading; the schema keeps them non-negative,
/// and a row that is not is damage, not a number to sum.
fn tokens_of(t: [i64; 4]) -> Result<Tokens, Code> {
    let n = |v: i64| u64::try_from(v).map_err(|_| Code::Integrity);
    Ok(Tokens {
        input: n(t[0])?,
        output: n(t[1])?,
        cache_write: n(t[2])?,
        cache_read: n(t[3])?,
    })
}

/// A row in [`COLUMNS`] order. The outer `Result` is SQLite's, the inner
/// one a row the schema should have refused (`integrity`).
fn stored(r: &Row<'_>) -> rusqlite::Result<Result<UsageRecord, Code>> {
    let kind: String = r.get(6)?;
    let kind = match kind.as_str() {
        "baseline" => {
            let text = match r.get_ref(13)? {
                ValueRef::Text(b) => std::str::from_utf8(b).ok(),
                _ => None,
            };
            match text.and_then(|s| serde_json::from_str::<Value>(s).ok()) {
                Some(Value::Object(m)) => Ok(Kind::Baseline(m)),
                _ => Err(Code::Integrity),
            }
        }
        "known" => tokens_of([r.get(9)?, r.get(10)?, r.get(11)?, r.get(12)?]).map(Kind::Known),
        "unknown" => Ok(Kind::Unknown(r.get(14)?)),
        _ => Err(Code::Integrity),
    };
    let kind = match kind {
        Ok(k) => k,
        Err(c) => return Ok(Err(c)),
    };
    Ok(Ok(UsageRecord {
        seq: r.get(0)?,
        business: r.get(1)?,
        run: r.get(2)?,
        role: r.get(3)?,
        turn: r.get(4)?,
        source: r.get(5)?,
        provider: r.get(7)?,
        model: r.get(8)?,
        account: r.get(15)?,
        kind,
        at: r.get(16)?,
    }))
}
