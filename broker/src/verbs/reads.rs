//! Reads: they write nothing. `trail` joins every record linked to a subject
//! in broker write order (timestamps strictly increase across all writes).

use super::Args;
use crate::core::{Caller, Core};
use crate::error::Code;
use crate::store::map_sql_error;
use rusqlite::params;
use serde_json::{json, Value};

fn json_col(s: Option<String>) -> Value {
    s.and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null)
}

/// `trail {subject}`: a task ref, decision id, message id or run id. An
/// unknown subject is an empty list.
pub fn trail(core: &mut Core, caller: &Caller, mut args: Args) -> Result<Value, Code> {
    let subject = args.str("subject", 256)?;
    args.finish()?;
    let business = caller.business();
    let conn = core.store.conn();
    let sql_err = |e: rusqlite::Error| map_sql_error(&e);
    let mut out: Vec<(String, Value)> = Vec::new();

    // Events about the subject, the subject event itself, and a run's session events.
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, kind, role, run, subject, body, at FROM events
             WHERE business = ?1 AND (subject = ?2 OR id = ?2
               OR (run = ?2 AND kind IN ('session.launched', 'session.ended')))
             ORDER BY seq",
        )
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![business, subject], |r| {
            Ok(json!({
                "record": "event",
                "id": r.get::<_, String>(0)?,
                "kind": r.get::<_, String>(1)?,
                "role": r.get::<_, Option<String>>(2)?,
                "run": r.get::<_, Option<String>>(3)?,
                "subject": r.get::<_, Option<String>>(4)?,
                "body": json_col(r.get(5)?),
                "at": r.get::<_, String>(6)?,
            }))
        })
        .map_err(sql_err)?;
    for row in rows {
        let v = row.map_err(sql_err)?;
        out.push((v["at"].as_str().unwrap_or_default().to_string(), v));
    }

    // Claim evidence of a run, or of claims citing a decision.
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, role, run, op, decision, by, at FROM role_claims
             WHERE business = ?1 AND (run = ?2 OR decision = ?2) ORDER BY seq",
        )
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![business, subject], |r| {
            Ok(json!({
                "record": "claim",
                "seq": r.get::<_, i64>(0)?,
                "role": r.get::<_, String>(1)?,
                "run": r.get::<_, String>(2)?,
                "op": r.get::<_, String>(3)?,
                "decision": r.get::<_, Option<String>>(4)?,
                "by": r.get::<_, Option<String>>(5)?,
                "at": r.get::<_, String>(6)?,
            }))
        })
        .map_err(sql_err)?;
    for row in rows {
        let v = row.map_err(sql_err)?;
        out.push((v["at"].as_str().unwrap_or_default().to_string(), v));
    }

    // Task snapshots.
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, task_ref, read_at, tombstone, fields, at FROM task_snapshots
             WHERE business = ?1 AND task_ref = ?2 ORDER BY seq",
        )
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![business, subject], |r| {
            Ok(json!({
                "record": "task",
                "seq": r.get::<_, i64>(0)?,
                "task_ref": r.get::<_, String>(1)?,
                "read_at": r.get::<_, String>(2)?,
                "tombstone": r.get::<_, i64>(3)? == 1,
                "fields": json_col(r.get(4)?),
                "at": r.get::<_, String>(5)?,
            }))
        })
        .map_err(sql_err)?;
    for row in rows {
        let v = row.map_err(sql_err)?;
        out.push((v["at"].as_str().unwrap_or_default().to_string(), v));
    }

    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Value::Array(out.into_iter().map(|(_, v)| v).collect()))
}

/// `credentials`: what the host loaded for the business, never a token,
/// path or variable name. Human and reader sessions only.
pub fn credentials(core: &mut Core, caller: &Caller, args: Args) -> Result<Value, Code> {
    if matches!(caller, Caller::Role { .. }) {
        return Err(Code::HumanRequired);
    }
    args.finish()?;
    let now = crate::store::clock::now_ms();
    Ok(Value::Array(core.credentials.rows(caller.business(), now)))
}
