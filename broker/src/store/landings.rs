//! Lookups and the one writer the landing ops need (3i row 137): a task's
//! latest review verdict, the merge approvals a role holds, the thread a run
//! serves, and filing a landing's RESULT in a thread. It decides nothing:
//! the rules are `policy::landing`, the transaction `host::landing`.

use super::decisions::{self, DecisionRow};
use super::{map_sql_error, Tx};
use crate::error::Code;
use rusqlite::{params, Connection, OptionalExtension};

fn sql(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

/// A task's latest `review.verdict` event.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub id: String,
    /// `approve` or `changes`.
    pub verdict: String,
    pub commit: String,
}

/// The task's latest review verdict, if it has one.
pub fn latest_verdict(
    conn: &Connection,
    business: &str,
    task_ref: &str,
) -> Result<Option<Verdict>, Code> {
    conn.prepare_cached(
        "SELECT id, json_extract(body, '$.verdict'), json_extract(body, '$.commit')
         FROM events WHERE business = ?1 AND subject = ?2 AND kind = 'review.verdict'
         ORDER BY seq DESC LIMIT 1",
    )
    .and_then(|mut s| {
        s.query_row(params![business, task_ref], |r| {
            Ok(Verdict {
                id: r.get(0)?,
                verdict: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                commit: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            })
        })
        .optional()
    })
    .map_err(sql)
}

/// The role's decisions for `action` that are resolved and unused, oldest
/// first (the candidates `landHeld` weighs).
pub fn resolved_unused(
    conn: &Connection,
    business: &str,
    role: &str,
    action: &str,
) -> Result<Vec<DecisionRow>, Code> {
    decisions::select_where(
        conn,
        "business = ?1 AND raised_by_role = ?2 AND action = ?3
         AND closed_kind = 'resolved' AND NOT consumed",
        &[business, role, action],
    )
}

/// The thread `run` serves: the thread it claimed (a run claims at most one,
/// schema guard `thread_one_per_run`), `None` for a run that never claimed a
/// thread (every role run).
///
/// THREAD HOOK (issue 20): a decision is bound to the thread its raising
/// run served, read here from that run's thread claim; when thread runs
/// land with their own record of a run's thread (the launch record's
/// `thread`), this is the one place to switch to it.
pub fn run_thread(conn: &Connection, business: &str, run: &str) -> Result<Option<String>, Code> {
    conn.prepare_cached(
        "SELECT thread FROM thread_claims WHERE business = ?1 AND run = ?2 AND op = 'claim'
         ORDER BY seq LIMIT 1",
    )
    .and_then(|mut s| s.query_row(params![business, run], |r| r.get(0)).optional())
    .map_err(sql)
}

/// The run holding `thread` now, if any.
pub fn thread_holder(conn: &Connection, thread: &str) -> Result<Option<String>, Code> {
    conn.prepare_cached(
        "SELECT op, run FROM thread_claims WHERE thread = ?1 ORDER BY seq DESC LIMIT 1",
    )
    .and_then(|mut s| {
        s.query_row([thread], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .optional()
    })
    .map_err(sql)
    .map(|row| row.filter(|(op, _)| op == "claim").map(|(_, run)| run))
}

/// Files `message` under `thread` (the schema's `message_threads_match`
/// guard refuses a thread whose instance neither sent nor receives it).
pub fn insert_message_thread(t: &mut Tx<'_>, message: &str, thread: &str) -> Result<(), Code> {
    let at = t.now();
    t.tx.prepare_cached("INSERT INTO message_threads(message, thread, at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![message, thread, at]))
        .map_err(sql)?;
    Ok(())
}
