//! Lookups for the review loop (row 93): push records, review requests and
//! verdicts. All three are `events` rows; the review loop adds no event kind
//! beyond the spec's and no schema change.
//!
//! - A push record is an `action.allowed` event whose body's `action` is
//!   `git.push.working` and which names a `commit`, with the task as subject
//!   (only `recordPush` writes one; `recordEvent` refuses them).
//! - A review request is a `review.requested` event, a verdict a
//!   `review.verdict` event; both have the task as subject.

use super::map_sql_error;
use super::Db;
use crate::error::Code;
use rusqlite::{params, OptionalExtension};
use serde_json::Value;

fn sql(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

/// The latest push record of a task.
#[derive(Debug, Clone)]
pub struct Push {
    pub event: String,
    pub project: String,
    pub git_ref: String,
    pub commit: String,
}

/// The task's latest push record, if it has one.
pub fn latest_push(conn: &Db, business: &str, task_ref: &str) -> Result<Option<Push>, Code> {
    conn.prepare_cached(concat!(
        "SELECT id, json_extract(body, '$.project'), json_extract(body, '$.ref'),
           json_extract(body, '$.commit')
         FROM events WHERE business = ?1 AND subject = ?2 AND kind = 'action.allowed'
           AND json_extract(body, '$.action') = 'git.push.working'
           AND json_extract(body, '$.commit') IS NOT NULL AND ",
        crate::store::not_a_send!(),
        " ORDER BY seq DESC LIMIT 1"
    ))
    .and_then(|mut s| {
        s.query_row(params![business, task_ref], |r| {
            Ok(Push {
                event: r.get(0)?,
                project: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                git_ref: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                commit: r.get(3)?,
            })
        })
        .optional()
    })
    .map_err(sql)
}

/// True when `commit` was pushed for the task at any time.
pub fn was_pushed(conn: &Db, business: &str, task_ref: &str, commit: &str) -> Result<bool, Code> {
    conn.prepare_cached(concat!(
        "SELECT EXISTS (SELECT 1 FROM events WHERE business = ?1 AND subject = ?2
           AND kind = 'action.allowed'
           AND json_extract(body, '$.action') = 'git.push.working'
           AND json_extract(body, '$.commit') = ?3 AND ",
        crate::store::not_a_send!(),
        ")"
    ))
    .and_then(|mut s| s.query_row(params![business, task_ref, commit], |r| r.get(0)))
    .map_err(sql)
}

/// A `review.requested` event as the verdict and fetch paths need it.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: String,
    /// The requesting role (the event's actor).
    pub from_role: String,
    pub body: Value,
}

impl Request {
    fn field(&self, key: &str) -> String {
        self.body[key].as_str().unwrap_or_default().to_string()
    }
    /// The role the request is addressed to.
    pub fn to(&self) -> String {
        self.field("to")
    }
    pub fn commit(&self) -> String {
        self.field("commit")
    }
    pub fn project(&self) -> String {
        self.field("project")
    }
    pub fn git_ref(&self) -> String {
        self.field("ref")
    }
    /// The REVIEW-REQUEST message's id.
    pub fn message(&self) -> String {
        self.field("message")
    }
}

/// The `review.requested` event `id` on the task, if any.
pub fn request(
    conn: &Db,
    business: &str,
    task_ref: &str,
    id: &str,
) -> Result<Option<Request>, Code> {
    conn.prepare_cached(concat!(
        "SELECT id, role, body FROM events WHERE id = ?1 AND business = ?2 AND subject = ?3
               AND kind = 'review.requested' AND ",
        crate::store::not_a_send!()
    ))
    .and_then(|mut s| {
        s.query_row(params![id, business, task_ref], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .optional()
    })
    .map_err(sql)?
    .map(|(id, role, body)| {
        Ok(Request {
            id,
            from_role: role.unwrap_or_default(),
            body: serde_json::from_str(&body).map_err(|_| Code::StorageUnavailable)?,
        })
    })
    .transpose()
}

/// True when the request already has a `review.verdict` event.
pub fn has_verdict(conn: &Db, business: &str, request: &str) -> Result<bool, Code> {
    conn.prepare_cached(concat!(
        "SELECT EXISTS (SELECT 1 FROM events WHERE business = ?1 AND kind = 'review.verdict'
           AND json_extract(body, '$.request') = ?2 AND ",
        crate::store::not_a_send!(),
        ")"
    ))
    .and_then(|mut s| s.query_row(params![business, request], |r| r.get(0)))
    .map_err(sql)
}

/// The `review.verdict` event `id` on the task: `(verdict, commit)`.
pub fn verdict(
    conn: &Db,
    business: &str,
    task_ref: &str,
    id: &str,
) -> Result<Option<(String, String)>, Code> {
    conn.prepare_cached(
        "SELECT json_extract(body, '$.verdict'), json_extract(body, '$.commit') FROM events
         WHERE id = ?1 AND business = ?2 AND subject = ?3 AND kind = 'review.verdict'",
    )
    .and_then(|mut s| {
        s.query_row(params![id, business, task_ref], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            ))
        })
        .optional()
    })
    .map_err(sql)
}
