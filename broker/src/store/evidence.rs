//! The append-only writer: one function per kind of row. Every row gets its
//! timestamp from the transaction's clock; nothing here updates or deletes.

use super::{map_sql_error, Db, Tx};
use crate::error::Code;
use crate::ids;
use rusqlite::{params, OptionalExtension};
use serde_json::Value;
use std::collections::HashMap;

/// Who acted: the role and run recorded on an event (`human`/`human-cli` for the CLI).
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub role: Option<&'a str>,
    pub run: Option<&'a str>,
}

impl<'a> Actor<'a> {
    /// No role and no run: the trusted host's own records.
    pub const NOBODY: Actor<'static> = Actor {
        role: None,
        run: None,
    };

    /// `run` acting as `role`.
    pub const fn of(role: &'a str, run: &'a str) -> Actor<'a> {
        Actor {
            role: Some(role),
            run: Some(run),
        }
    }
}

/// A stored event's id and timestamp.
#[derive(Debug, Clone)]
pub struct Written {
    pub id: String,
    pub at: String,
}

pub fn insert_event(
    t: &mut Tx<'_>,
    business: &str,
    kind: &str,
    actor: Actor<'_>,
    subject: Option<&str>,
    body: &Value,
) -> Result<Written, Code> {
    t.tokens.check(body)?;
    t.tokens
        .check_all(&[Some(kind), subject, actor.role, actor.run])?;
    // Straight into a buffer: `Value`'s `Display` (`to_string`) writes the
    // same compact text through a formatter, token by token, at about three
    // times the cost. Serializing a `Value` can't fail.
    let text = serde_json::to_string(body).map_err(|_| Code::StorageUnavailable)?;
    let id = ids::uuid();
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO events(id, business, kind, role, run, subject, body, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut st| {
        st.execute(params![
            id, business, kind, actor.role, actor.run, subject, text, at
        ])
    })
    .map_err(|e| map_sql_error(&e))?;
    Ok(Written { id, at })
}

/// A claim, release or revoke row: who the role goes to or leaves, and
/// on what grounds (a revoke's decision or, from 3d, its reason).
#[derive(Debug, Clone, Copy)]
pub struct ClaimRow<'a> {
    pub role: &'a str,
    pub run: &'a str,
    pub op: &'a str,
    pub decision: Option<&'a str>,
    pub by: Option<&'a str>,
    pub reason: Option<&'a str>,
}

impl<'a> ClaimRow<'a> {
    /// A run claiming or releasing a role itself.
    pub fn own(role: &'a str, run: &'a str, op: &'a str) -> ClaimRow<'a> {
        ClaimRow {
            role,
            run,
            op,
            decision: None,
            by: Some(run),
            reason: None,
        }
    }
}

/// Inserts a claim, release or revoke row.
pub fn insert_claim(t: &mut Tx<'_>, business: &str, c: &ClaimRow<'_>) -> Result<Written, Code> {
    let ClaimRow {
        role,
        run,
        op,
        decision,
        by,
        reason,
    } = *c;
    t.tokens
        .check_all(&[Some(role), Some(run), Some(op), decision, by, reason])?;
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO role_claims(business, role, run, op, decision, by, at, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut st| st.execute(params![business, role, run, op, decision, by, at, reason]))
    .map_err(|e| map_sql_error(&e))?;
    t.claims.push(HolderOp {
        business: business.to_string(),
        role: role.to_string(),
        run: (op == "claim").then(|| run.to_string()),
    });
    Ok(Written {
        id: t.tx.last_insert_rowid().to_string(),
        at,
    })
}

/// Who holds each role now, kept in memory beside the store: for each
/// `(business, role)` the run of its latest `role_claims` row when that
/// row is a claim. Loaded at open; a verb's claim rows change it when the
/// verb's changes are kept ([`Tx`] gathers them as [`HolderOp`]s), and a
/// batch whose COMMIT fails has it loaded again, as the unread index is.
/// The same answer as [`holder`] at every point a verb can see
/// (`broker/tests/holders.rs`), without a lookup in SQLite.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Holders(HashMap<String, HashMap<String, String>>);

/// One claim row's effect on [`Holders`]: `run` is who holds `role` after
/// it (none after a release or a revoke).
#[derive(Debug, Clone)]
pub(super) struct HolderOp {
    business: String,
    role: String,
    run: Option<String>,
}

impl Holders {
    /// Every role's holder, from the latest claim row of each role.
    pub(super) fn load(conn: &Db) -> Result<Holders, Code> {
        let mut stmt = conn
            .prepare(
                "SELECT c.business, c.role, c.op, c.run FROM role_claims c
                 WHERE c.seq = (SELECT max(seq) FROM role_claims d
                                WHERE d.business = c.business AND d.role = c.role)",
            )
            .map_err(|e| map_sql_error(&e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| map_sql_error(&e))?;
        let mut h = Holders::default();
        for row in rows {
            let (business, role, op, run) = row.map_err(|e| map_sql_error(&e))?;
            if op == "claim" {
                h.0.entry(business).or_default().insert(role, run);
            }
        }
        Ok(h)
    }

    /// The run holding `(business, role)`, if any.
    pub fn get(&self, business: &str, role: &str) -> Option<&str> {
        self.0
            .get(business)
            .and_then(|roles| roles.get(role))
            .map(String::as_str)
    }

    /// Takes in a kept claim row.
    pub(super) fn apply(&mut self, op: HolderOp) {
        let roles = self.0.entry(op.business).or_default();
        match op.run {
            Some(run) => {
                roles.insert(op.role, run);
            }
            None => {
                roles.remove(&op.role);
            }
        }
    }
}

/// The run holding `(business, role)` by the verb's own transaction: its
/// claim rows so far, else the kept ones ([`Holders`]).
pub(super) fn holder_in(t: &Tx<'_>, business: &str, role: &str) -> Option<String> {
    match t
        .claims
        .iter()
        .rev()
        .find(|op| op.business == business && op.role == role)
    {
        Some(op) => op.run.clone(),
        None => t.holders.get(business, role).map(str::to_string),
    }
}

/// The run holding `(business, role)`, if any, read from the store (what
/// [`Holders`] keeps in memory; a read outside a verb's transaction uses
/// this).
pub fn holder(tx: &Db, business: &str, role: &str) -> Result<Option<String>, Code> {
    tx.prepare_cached(
        "SELECT op, run FROM role_claims WHERE business = ?1 AND role = ?2 ORDER BY seq DESC LIMIT 1",
    )
    .and_then(|mut s| {
        s.query_row(params![business, role], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .optional()
    })
    .map_err(|e| map_sql_error(&e))
    .map(|o| o.and_then(|(op, run)| (op == "claim").then_some(run)))
}

/// True when `run` holds `role` now: the role's claim, or (for a run of a
/// thread instance, which claims a thread instead, schema 3e) a thread's.
pub fn holds(conn: &Db, business: &str, role: &str, run: &str) -> Result<bool, Code> {
    holds_given(
        conn,
        holder(conn, business, role)?.as_deref(),
        business,
        run,
    )
}

/// [`holds`] once the role's holder is known (from the store or from
/// [`Holders`]): `run` is it, or holds a thread of the business.
pub(super) fn holds_given(
    conn: &Db,
    role_holder: Option<&str>,
    business: &str,
    run: &str,
) -> Result<bool, Code> {
    if role_holder == Some(run) {
        return Ok(true);
    }
    Ok(super::threads::held_by(conn, business, run)?.is_some())
}

/// True when `run` was revoked from `(business, role)`.
pub fn revoked(tx: &Db, business: &str, role: &str, run: &str) -> Result<bool, Code> {
    tx.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM role_claims WHERE run = ?1 AND business = ?2 AND role = ?3 AND op = 'revoke')",
    )
    .and_then(|mut s| s.query_row(params![run, business, role], |r| r.get(0)))
    .map_err(|e| map_sql_error(&e))
}

/// The body of a run's `session.launched` and whether it has `session.ended`.
pub fn session_of(conn: &Db, business: &str, run: &str) -> Result<(Option<Value>, bool), Code> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT kind, body FROM events WHERE business = ?1 AND run = ?2
             AND kind IN ('session.launched', 'session.ended') AND ",
            crate::store::not_a_send!(),
            " ORDER BY seq"
        ))
        .map_err(|e| map_sql_error(&e))?;
    let rows = stmt
        .query_map(params![business, run], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(|e| map_sql_error(&e))?;
    let mut launched = None;
    let mut ended = false;
    for row in rows {
        let (kind, body) = row.map_err(|e| map_sql_error(&e))?;
        if kind == "session.launched" && launched.is_none() {
            launched = serde_json::from_str(&body).ok();
        } else if kind == "session.ended" {
            ended = true;
        }
    }
    Ok((launched, ended))
}
