//! Lookups the landing ops need (3i row 137): a task's latest review
//! verdict and the merge approvals a role holds (threads, holders and
//! filing a message in a thread are `store::threads`'). It decides nothing:
//! the rules are `policy::landing`, the transaction `ops::landing`.

use super::decisions::{self, DecisionRow};
use super::map_sql_error;
use super::Db;
use crate::error::Code;
use rusqlite::{params, OptionalExtension};

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
pub fn latest_verdict(conn: &Db, business: &str, task_ref: &str) -> Result<Option<Verdict>, Code> {
    conn.prepare_cached(concat!(
        "SELECT id, json_extract(body, '$.verdict'), json_extract(body, '$.commit')
         FROM events WHERE business = ?1 AND subject = ?2 AND kind = 'review.verdict' AND ",
        crate::store::not_a_send!(),
        " ORDER BY seq DESC LIMIT 1"
    ))
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
    conn: &Db,
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
