//! Writers for messages, deliveries, read receipts and task snapshots, and
//! the few lookups the message verbs make inside their transaction.
//!
//! Every writer takes its timestamp from the transaction's clock and runs the
//! known-token check on what it is about to store.

use super::rows::{MessageRow, MESSAGE_COLUMNS};
use super::{map_sql_error, Db, Tx};
use crate::error::Code;
use rusqlite::{params, OptionalExtension};
use serde_json::Value;

/// A message as the verbs hand it to [`insert_message`].
#[derive(Debug, Clone, Default)]
pub struct NewMessage<'a> {
    /// The id to store (callers make it first so a `human.input` can name it).
    pub id: &'a str,
    pub business: &'a str,
    pub from_role: &'a str,
    pub from_run: &'a str,
    pub to_role: &'a str,
    pub class: &'a str,
    pub body: &'a str,
    pub in_reply_to: Option<&'a str>,
    pub corrects: Option<&'a str>,
    pub decision: Option<&'a str>,
    pub request: Option<&'a str>,
    /// The name the sender addressed (3g `to_name`); none for a send by instance.
    pub to_name: Option<&'a str>,
}

fn sql(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

/// Appends one message; returns its `at`.
pub fn insert_message(t: &mut Tx<'_>, m: &NewMessage<'_>) -> Result<String, Code> {
    t.tokens.check_all(&[
        Some(m.from_role),
        Some(m.from_run),
        Some(m.to_role),
        Some(m.class),
        Some(m.body),
    ])?;
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body,
           in_reply_to, corrects, decision, request, at, to_name)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )
    .and_then(|mut s| {
        s.execute(params![
            m.id,
            m.business,
            m.from_role,
            m.from_run,
            m.to_role,
            m.class,
            m.body,
            m.in_reply_to,
            m.corrects,
            m.decision,
            m.request,
            at,
            m.to_name
        ])
    })
    .map_err(sql)?;
    Ok(at)
}

/// Records that `message` was handed to `run`; returns its `at`.
pub fn insert_delivery(t: &mut Tx<'_>, message: &str, run: &str) -> Result<String, Code> {
    t.tokens.check_all(&[Some(run)])?;
    let at = t.now();
    t.tx.prepare_cached("INSERT INTO deliveries(message, run, at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![message, run, at]))
        .map_err(sql)?;
    let seq = t.tx.last_insert_rowid();
    let (business, to_role, from_role): (String, String, String) =
        t.tx.prepare_cached("SELECT business, to_role, from_role FROM messages WHERE id = ?1")
            .and_then(|mut s| s.query_row([message], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
            .map_err(sql)?;
    t.unread.push(UnreadOp::Delivered {
        business,
        to_role,
        seq,
        entry: UnreadEntry {
            message: message.to_string(),
            from_role,
            run: run.to_string(),
            at: at.clone(),
        },
    });
    Ok(at)
}

/// Records `run`'s acknowledgement of `message`; returns its `at`.
pub fn insert_read_receipt(t: &mut Tx<'_>, message: &str, run: &str) -> Result<String, Code> {
    t.tokens.check_all(&[Some(run)])?;
    let at = t.now();
    t.tx.prepare_cached("INSERT INTO read_receipts(message, run, at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![message, run, at]))
        .map_err(sql)?;
    t.unread.push(UnreadOp::Read {
        message: message.to_string(),
    });
    Ok(at)
}

/// Appends one tracker snapshot (`fields` None is a tombstone); returns `(seq, at)`.
pub fn insert_task_snapshot(
    t: &mut Tx<'_>,
    business: &str,
    task_ref: &str,
    read_at: &str,
    fields: Option<&Value>,
) -> Result<(i64, String), Code> {
    if let Some(f) = fields {
        t.tokens.check(f)?;
    }
    t.tokens.check_all(&[Some(task_ref)])?;
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO task_snapshots(business, task_ref, read_at, tombstone, fields, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            business,
            task_ref,
            read_at,
            i64::from(fields.is_none()),
            fields.map(|f| f.to_string()),
            at
        ])
    })
    .map_err(sql)?;
    Ok((t.tx.last_insert_rowid(), at))
}

/// What the message verbs need to know about a stored message.
#[derive(Debug, Clone)]
pub struct MessageFacts {
    pub seq: i64,
    pub from_role: String,
    pub to_role: String,
    /// The run it was delivered to, if it was.
    pub delivered_to: Option<String>,
    /// The receipt's time, if it was read.
    pub read_at: Option<String>,
}

/// Looks a message up by id within one business.
pub fn message_facts(conn: &Db, business: &str, id: &str) -> Result<Option<MessageFacts>, Code> {
    conn.prepare_cached(
        "SELECT m.seq, m.from_role, m.to_role,
           (SELECT run FROM deliveries WHERE message = m.id),
           (SELECT at FROM read_receipts WHERE message = m.id)
         FROM messages m WHERE m.id = ?1 AND m.business = ?2",
    )
    .and_then(|mut s| {
        s.query_row(params![id, business], |r| {
            Ok(MessageFacts {
                seq: r.get(0)?,
                from_role: r.get(1)?,
                to_role: r.get(2)?,
                delivered_to: r.get(3)?,
                read_at: r.get(4)?,
            })
        })
        .optional()
    })
    .map_err(sql)
}

/// True when `id` names a decision of `business`.
pub fn decision_exists(conn: &Db, business: &str, id: &str) -> Result<bool, Code> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM decisions WHERE id = ?1 AND business = ?2)")
        .and_then(|mut s| s.query_row(params![id, business], |r| r.get(0)))
        .map_err(sql)
}

/// Up to `limit` undelivered messages to `(business, to_role)`, oldest first.
///
/// Only `message.receive` writes deliveries and it always takes the oldest
/// undelivered messages first, so the delivered messages of a recipient are
/// a prefix of its messages by `seq`: the undelivered ones are exactly those
/// after the newest delivered one. The scan walks back from the newest
/// message to the first delivered one, so it costs the backlog, not the history.
pub fn undelivered(
    conn: &Db,
    business: &str,
    to_role: &str,
    limit: usize,
) -> Result<Vec<MessageRow>, Code> {
    let floor: i64 = conn
        .prepare_cached(
            "SELECT coalesce((SELECT m.seq FROM messages m
               WHERE m.business = ?1 AND m.to_role = ?2
                 AND EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id)
               ORDER BY m.seq DESC LIMIT 1), 0)",
        )
        .and_then(|mut s| s.query_row(params![business, to_role], |r| r.get(0)))
        .map_err(sql)?;
    let sql_text = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m
         WHERE m.business = ?1 AND m.to_role = ?2 AND m.seq > ?3
           AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id)
         ORDER BY m.seq LIMIT ?4"
    );
    let mut stmt = conn.prepare_cached(&sql_text).map_err(sql)?;
    let rows = stmt
        .query_map(
            params![
                business,
                to_role,
                floor,
                i64::try_from(limit).unwrap_or(100)
            ],
            MessageRow::read,
        )
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
}

/// One delivered, unread message, as the unread index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadEntry {
    pub message: String,
    pub from_role: String,
    pub run: String,
    pub at: String,
}

/// A change to the unread index a request makes; applied when the request
/// is kept (its savepoint released), so later requests of its batch see it.
#[derive(Debug, Clone)]
pub enum UnreadOp {
    Delivered {
        business: String,
        to_role: String,
        seq: i64,
        entry: UnreadEntry,
    },
    Read {
        message: String,
    },
}

/// Deliveries that have no read receipt, per `(business, to_role)` in
/// delivery order: the writer's in-memory projection behind `agents`'
/// `working` and `stranded`, so that read costs the unread set rather than
/// the whole delivery history. Built by one scan at open; every delivery and
/// receipt of a kept request updates it (a rolled-back request doesn't), and
/// a batch that fails to commit makes the store build it again.
#[derive(Debug, Default)]
pub struct Unread {
    by_role: std::collections::HashMap<(String, String), BTreeMap<i64, UnreadEntry>>,
    by_message: std::collections::HashMap<String, (String, String, i64)>,
}

use std::collections::BTreeMap;

impl Unread {
    /// Scans the store once.
    pub fn load(conn: &Db) -> Result<Unread, Code> {
        let mut u = Unread::default();
        let mut stmt = conn
            .prepare(
                "SELECT d.seq, d.message, d.run, d.at, m.business, m.to_role, m.from_role
                 FROM deliveries d JOIN messages m ON m.id = d.message
                 WHERE NOT EXISTS (SELECT 1 FROM read_receipts r WHERE r.message = d.message)",
            )
            .map_err(sql)?;
        let mut rows = stmt.query([]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            u.apply(UnreadOp::Delivered {
                seq: r.get(0).map_err(sql)?,
                business: r.get(4).map_err(sql)?,
                to_role: r.get(5).map_err(sql)?,
                entry: UnreadEntry {
                    message: r.get(1).map_err(sql)?,
                    run: r.get(2).map_err(sql)?,
                    at: r.get(3).map_err(sql)?,
                    from_role: r.get(6).map_err(sql)?,
                },
            });
        }
        Ok(u)
    }

    pub fn apply(&mut self, op: UnreadOp) {
        match op {
            UnreadOp::Delivered {
                business,
                to_role,
                seq,
                entry,
            } => {
                self.by_message.insert(
                    entry.message.clone(),
                    (business.clone(), to_role.clone(), seq),
                );
                self.by_role
                    .entry((business, to_role))
                    .or_default()
                    .insert(seq, entry);
            }
            UnreadOp::Read { message } => {
                if let Some((b, r, seq)) = self.by_message.remove(&message) {
                    let key = (b, r);
                    if let Some(m) = self.by_role.get_mut(&key) {
                        m.remove(&seq);
                        if m.is_empty() {
                            self.by_role.remove(&key);
                        }
                    }
                }
            }
        }
    }

    /// Unread deliveries of messages to `(business, to_role)`, oldest delivery first.
    pub fn of_role<'a>(
        &'a self,
        business: &str,
        to_role: &str,
    ) -> impl Iterator<Item = &'a UnreadEntry> + 'a {
        self.by_role
            .get(&(business.to_string(), to_role.to_string()))
            .into_iter()
            .flat_map(|m| m.values())
    }
}

/// The first sentence of a spec review notice (3i row 143): the project
/// key, the save's commit and the editor's base. The notice's body begins
/// with it; [`spec_notice_project`] reads the project back from it.
pub fn spec_notice_lead(project: &str, commit: &str, base: &str) -> String {
    format!("{SPEC_NOTICE_PREFIX}{project}: commit {commit}, from the editor's base {base}.")
}

/// What every spec review notice's body starts with, before the project key.
pub const SPEC_NOTICE_PREFIX: &str = "The human saved spec/north-star.md in project ";

/// The project key a spec review notice's body names (see
/// [`spec_notice_lead`]); `None` for a body that is no spec notice. A
/// project key is an identifier (`config::is_id`: no `:`), so the key ends
/// at the first `:`.
pub fn spec_notice_project(body: &str) -> Option<&str> {
    let rest = body.strip_prefix(SPEC_NOTICE_PREFIX)?;
    let (key, after) = rest.split_once(':')?;
    (crate::config::is_id(key) && after.starts_with(" commit ")).then_some(key)
}

/// A notice from the bus itself (`_bus`, run `bus`) to role instance `to`:
/// class RESULT, replying to nothing. It waits like any message to a role
/// no run holds and is delivered at the next claim's receive. The spec
/// review notice (3i row 143) is one: its body begins with
/// [`spec_notice_lead`], and it is stored through the one path of every
/// message (`verbs::messages::post`), which files it in no thread (it goes
/// to a pm or a cto, never to the thread instance).
pub fn bus_notice<'a>(
    id: &'a str,
    business: &'a str,
    to: &'a str,
    body: &'a str,
) -> NewMessage<'a> {
    NewMessage {
        id,
        business,
        from_role: crate::policy::routing::BUS_SENDER,
        from_run: crate::policy::routing::BUS_RUN,
        to_role: to,
        class: "RESULT",
        body,
        ..Default::default()
    }
}

/// A spec review notice as the BLOCK and relay rules need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecNotice {
    pub id: String,
    /// The role instance the bus sent it to.
    pub to_role: String,
    /// The project key its body names.
    pub project: String,
}

/// Message `id` of `business` when it is a spec review notice: sent by the
/// bus (`_bus`, run `bus`), class RESULT, replying to nothing, in no
/// thread, with a body that begins as [`spec_notice_lead`] writes it.
/// Launch notices (`_bus` too) reply to the waiting message, so they are
/// never taken for one.
pub fn spec_notice(conn: &Db, business: &str, id: &str) -> Result<Option<SpecNotice>, Code> {
    let row: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT m.to_role, m.body FROM messages m
             WHERE m.id = ?1 AND m.business = ?2 AND m.from_role = ?3 AND m.from_run = ?4
               AND m.class = 'RESULT' AND m.in_reply_to IS NULL
               AND NOT EXISTS (SELECT 1 FROM message_threads mt WHERE mt.message = m.id)",
        )
        .and_then(|mut s| {
            s.query_row(
                params![
                    id,
                    business,
                    crate::policy::routing::BUS_SENDER,
                    crate::policy::routing::BUS_RUN
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
        .map_err(sql)?;
    Ok(row.and_then(|(to_role, body)| {
        spec_notice_project(&body).map(|p| SpecNotice {
            id: id.to_string(),
            to_role,
            project: p.to_string(),
        })
    }))
}

/// Walks the `in_reply_to` chain from `start` (itself included) and returns
/// the spec review notice it reaches, if any. Every reply names an earlier
/// message, so the walk ends.
pub fn reply_chain_notice(
    conn: &Db,
    business: &str,
    start: &str,
) -> Result<Option<SpecNotice>, Code> {
    up_reply_chain(conn, business, start, |id| spec_notice(conn, business, id))
}

/// The first `Some` that `find` gives for a message of the `in_reply_to`
/// chain from `start` (itself included), nearest first; `None` where the
/// chain ends first. Every reply names an earlier message, so the walk ends.
pub fn up_reply_chain<T>(
    conn: &Db,
    business: &str,
    start: &str,
    mut find: impl FnMut(&str) -> Result<Option<T>, Code>,
) -> Result<Option<T>, Code> {
    let mut at = Some(start.to_string());
    while let Some(id) = at {
        if let Some(found) = find(&id)? {
            return Ok(Some(found));
        }
        at = conn
            .prepare_cached("SELECT in_reply_to FROM messages WHERE id = ?1 AND business = ?2")
            .and_then(|mut s| {
                s.query_row(params![id, business], |r| r.get::<_, Option<String>>(0))
                    .optional()
            })
            .map_err(sql)?
            .flatten();
    }
    Ok(None)
}

#[cfg(test)]
mod notice_tests {
    use super::*;

    #[test]
    fn a_spec_notice_lead_names_its_project_and_nothing_else_does() {
        let c = "0123456789abcdef0123456789abcdef01234567";
        let lead = spec_notice_lead("site", c, c);
        assert!(lead.starts_with("The human saved spec/north-star.md in project site: commit "));
        assert_eq!(spec_notice_project(&lead), Some("site"));
        let body = format!("{lead}\nRead the change with read_spec.");
        assert_eq!(spec_notice_project(&body), Some("site"));
        for other in [
            "Message x from pm to cto waits",
            "The human saved spec/north-star.md in project : commit x",
            "The human saved spec/north-star.md in project a b: commit x",
            "The human saved spec/north-star.md in project site commit x",
            "The human saved docs/plan.md in project site: commit x",
        ] {
            assert_eq!(spec_notice_project(other), None, "{other}");
        }
    }
}
