//! Projects and threads (schema 3e): the writers for `projects`, `threads`,
//! `thread_claims`, `message_threads` and `thread_opens`, and the lookups
//! the thread verbs, thread runs and the launcher's ops make.
//!
//! A message's thread is its `message_threads` row. A run holds at most one
//! thread: the thread whose latest claim row is that run's `claim`.

use super::rows::{MessageRow, ThreadClaimRow, ThreadState, MESSAGE_COLUMNS};
use super::{map_sql_error, Db, Tx};
use crate::error::Code;
use rusqlite::{params, OptionalExtension};

fn sql(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

/// A stored thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub id: String,
    pub business: String,
    pub project: String,
    pub instance: String,
    pub user: String,
    pub name: String,
    pub at: String,
}

/// Appends a project; returns its `at`.
pub fn insert_project(
    t: &mut Tx<'_>,
    business: &str,
    id: &str,
    name: &str,
    repo: Option<&str>,
    by: &str,
) -> Result<String, Code> {
    t.tokens.check_all(&[Some(name), repo, Some(by)])?;
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO projects(id, business, name, repo, by, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![id, business, name, repo, by, at]))
    .map_err(sql)?;
    Ok(at)
}

/// True when the business has a project of that name.
pub fn project_named(conn: &Db, business: &str, name: &str) -> Result<bool, Code> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM projects WHERE business = ?1 AND name = ?2)")
        .and_then(|mut s| s.query_row(params![business, name], |r| r.get(0)))
        .map_err(sql)
}

/// True when `id` is a project of the business.
pub fn project_exists(conn: &Db, business: &str, id: &str) -> Result<bool, Code> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM projects WHERE id = ?1 AND business = ?2)")
        .and_then(|mut s| s.query_row(params![id, business], |r| r.get(0)))
        .map_err(sql)
}

/// A project as its row holds it.
#[derive(Debug, Clone)]
pub struct ProjectRow {
    pub id: String,
    pub name: String,
    pub repo: Option<String>,
    pub by: String,
    pub at: String,
}

/// The business's projects, oldest first.
pub fn projects(conn: &Db, business: &str) -> Result<Vec<ProjectRow>, Code> {
    let mut s = conn
        .prepare_cached(
            "SELECT id, name, repo, by, at FROM projects WHERE business = ?1 ORDER BY seq",
        )
        .map_err(sql)?;
    let rows = s
        .query_map([business], |r| {
            Ok(ProjectRow {
                id: r.get(0)?,
                name: r.get(1)?,
                repo: r.get(2)?,
                by: r.get(3)?,
                at: r.get(4)?,
            })
        })
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
}

/// Appends a thread; returns its `at`.
pub fn insert_thread(t: &mut Tx<'_>, th: &Thread) -> Result<String, Code> {
    t.tokens
        .check_all(&[Some(&th.name), Some(&th.user), Some(&th.instance)])?;
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO threads(id, business, project, instance, user, name, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| {
        s.execute(params![
            th.id,
            th.business,
            th.project,
            th.instance,
            th.user,
            th.name,
            at
        ])
    })
    .map_err(sql)?;
    Ok(at)
}

/// True when the project has a thread of that name.
pub fn thread_named(conn: &Db, project: &str, name: &str) -> Result<bool, Code> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM threads WHERE project = ?1 AND name = ?2)")
        .and_then(|mut s| s.query_row(params![project, name], |r| r.get(0)))
        .map_err(sql)
}

/// A thread of the business by id.
pub fn thread(conn: &Db, business: &str, id: &str) -> Result<Option<Thread>, Code> {
    conn.prepare_cached(
        "SELECT id, business, project, instance, user, name, at FROM threads
         WHERE id = ?1 AND business = ?2",
    )
    .and_then(|mut s| s.query_row(params![id, business], thread_row).optional())
    .map_err(sql)
}

fn thread_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Thread> {
    Ok(Thread {
        id: r.get(0)?,
        business: r.get(1)?,
        project: r.get(2)?,
        instance: r.get(3)?,
        user: r.get(4)?,
        name: r.get(5)?,
        at: r.get(6)?,
    })
}

/// A user's threads in the business (of one project, when given), oldest
/// first: `{id, project, instance, name, at}` of each (the business and the
/// user are the ones asked for).
pub fn threads_of(
    conn: &Db,
    business: &str,
    user: &str,
    project: Option<&str>,
) -> Result<Vec<Thread>, Code> {
    let mut s = conn
        .prepare_cached(
            "SELECT id, project, instance, name, at FROM threads
             WHERE business = ?1 AND user = ?2 AND (?3 IS NULL OR project = ?3) ORDER BY seq",
        )
        .map_err(sql)?;
    let rows = s
        .query_map(params![business, user, project], |r| {
            Ok(Thread {
                id: r.get(0)?,
                business: business.to_string(),
                project: r.get(1)?,
                instance: r.get(2)?,
                user: user.to_string(),
                name: r.get(3)?,
                at: r.get(4)?,
            })
        })
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
}

/// Appends a thread open; returns its `at`.
pub fn insert_open(t: &mut Tx<'_>, thread: &str, by: &str) -> Result<String, Code> {
    t.tokens.check_all(&[Some(by)])?;
    let at = t.now();
    t.tx.prepare_cached("INSERT INTO thread_opens(thread, by, at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![thread, by, at]))
        .map_err(sql)?;
    Ok(at)
}

/// A claim, release or revoke of a thread.
#[derive(Debug, Clone, Copy)]
pub struct ClaimRow<'a> {
    pub thread: &'a str,
    pub run: &'a str,
    pub op: &'a str,
    pub decision: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub by: Option<&'a str>,
}

impl<'a> ClaimRow<'a> {
    /// A run claiming or releasing its thread itself.
    pub fn own(thread: &'a str, run: &'a str, op: &'a str) -> ClaimRow<'a> {
        ClaimRow {
            thread,
            run,
            op,
            decision: None,
            reason: None,
            by: Some(run),
        }
    }
}

/// Appends a thread claim row; returns its `at`.
pub fn insert_claim(t: &mut Tx<'_>, business: &str, c: &ClaimRow<'_>) -> Result<String, Code> {
    t.tokens
        .check_all(&[Some(c.run), Some(c.op), c.decision, c.reason, c.by])?;
    let at = t.now();
    t.tx.prepare_cached(
        "INSERT INTO thread_claims(business, thread, run, op, decision, reason, by, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            business, c.thread, c.run, c.op, c.decision, c.reason, c.by, at
        ])
    })
    .map_err(sql)?;
    Ok(at)
}

/// The run holding a thread, if any.
pub fn holder(conn: &Db, thread: &str) -> Result<Option<String>, Code> {
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
    .map(|o| o.and_then(|(op, run)| (op == "claim").then_some(run)))
}

/// The thread `run` holds now in the business, if any.
pub fn held_by(conn: &Db, business: &str, run: &str) -> Result<Option<String>, Code> {
    conn.prepare_cached(
        "SELECT c.thread FROM thread_claims c
         WHERE c.run = ?1 AND c.business = ?2 AND c.op = 'claim'
           AND c.seq = (SELECT max(seq) FROM thread_claims d WHERE d.thread = c.thread)",
    )
    .and_then(|mut s| s.query_row(params![run, business], |r| r.get(0)).optional())
    .map_err(sql)
}

/// The thread `run` ever claimed (a run claims at most one), held or not.
pub fn of_run(conn: &Db, business: &str, run: &str) -> Result<Option<String>, Code> {
    conn.prepare_cached(
        "SELECT thread FROM thread_claims WHERE run = ?1 AND business = ?2 AND op = 'claim'
         ORDER BY seq LIMIT 1",
    )
    .and_then(|mut s| s.query_row(params![run, business], |r| r.get(0)).optional())
    .map_err(sql)
}

/// True when `run` was revoked from `thread`.
pub fn revoked(conn: &Db, thread: &str, run: &str) -> Result<bool, Code> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM thread_claims WHERE run = ?1 AND thread = ?2 AND op = 'revoke')",
    )
    .and_then(|mut s| s.query_row(params![run, thread], |r| r.get(0)))
    .map_err(sql)
}

/// Every thread of `instance` (made by `user`, when given) whose latest
/// claim is held, with its holder, oldest thread first.
pub fn held_threads(
    conn: &Db,
    business: &str,
    instance: &str,
    user: Option<&str>,
) -> Result<Vec<(String, String)>, Code> {
    let mut s = conn
        .prepare_cached(
            "SELECT t.id, c.run FROM threads t JOIN thread_claims c ON c.thread = t.id
             WHERE t.business = ?1 AND t.instance = ?2 AND (?3 IS NULL OR t.user = ?3)
               AND c.op = 'claim'
               AND c.seq = (SELECT max(seq) FROM thread_claims d WHERE d.thread = t.id)
             ORDER BY t.seq",
        )
        .map_err(sql)?;
    let rows = s
        .query_map(params![business, instance, user], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
}

/// The latest claim row of every held thread of `instance`, oldest thread
/// first, shaped as a role claim row with `thread` added: what `agents`
/// lists for a thread instance, which has no role claim.
pub fn held_claim_rows(
    conn: &Db,
    business: &str,
    instance: &str,
) -> Result<Vec<ThreadClaimRow>, Code> {
    let mut s = conn
        .prepare_cached(
            "SELECT c.seq, c.thread, c.run, c.op, c.decision, c.by, c.at
             FROM threads t JOIN thread_claims c ON c.thread = t.id
             WHERE t.business = ?1 AND t.instance = ?2 AND c.op = 'claim'
               AND c.seq = (SELECT max(seq) FROM thread_claims d WHERE d.thread = t.id)
             ORDER BY t.seq",
        )
        .map_err(sql)?;
    let rows = s
        .query_map(params![business, instance], |r| {
            Ok(ThreadClaimRow {
                seq: r.get(0)?,
                thread: r.get(1)?,
                run: r.get(2)?,
                op: r.get(3)?,
                decision: r.get(4)?,
                by: r.get(5)?,
                at: r.get(6)?,
            })
        })
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
}

/// The thread of `instance` made by `user` in a project whose `repo` is the
/// declared project `repo_key`, that `user` opened most recently (its
/// latest `thread_opens` row is the newest); none when no such thread was
/// ever opened. The relay of a spec review notice's answer is filed there.
pub fn latest_opened(
    conn: &Db,
    business: &str,
    user: &str,
    instance: &str,
    repo_key: &str,
) -> Result<Option<String>, Code> {
    conn.prepare_cached(
        "SELECT t.id FROM thread_opens o
           JOIN threads t ON t.id = o.thread
           JOIN projects p ON p.id = t.project
         WHERE t.business = ?1 AND t.user = ?2 AND t.instance = ?3 AND p.repo = ?4
           AND o.by = ?2
         ORDER BY o.seq DESC LIMIT 1",
    )
    .and_then(|mut s| {
        s.query_row(params![business, user, instance, repo_key], |r| r.get(0))
            .optional()
    })
    .map_err(sql)
}

/// Files a message under a thread; returns its `at`.
pub fn file_message(t: &mut Tx<'_>, message: &str, thread: &str) -> Result<String, Code> {
    let at = t.now();
    t.tx.prepare_cached("INSERT INTO message_threads(message, thread, at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![message, thread, at]))
        .map_err(sql)?;
    Ok(at)
}

/// The thread a message is filed under, if any.
pub fn of_message(conn: &Db, message: &str) -> Result<Option<String>, Code> {
    conn.prepare_cached("SELECT thread FROM message_threads WHERE message = ?1")
        .and_then(|mut s| s.query_row([message], |r| r.get(0)).optional())
        .map_err(sql)
}

/// Walks the `in_reply_to` chain from `start` (itself included) to the
/// nearest message filed under a thread, and returns that thread. The walk
/// ends where the chain does (every reply names an earlier message, so it
/// cannot loop).
pub fn reply_chain_thread(conn: &Db, business: &str, start: &str) -> Result<Option<Thread>, Code> {
    match super::messages::up_reply_chain(conn, business, start, |id| of_message(conn, id))? {
        Some(th) => thread(conn, business, &th),
        None => Ok(None),
    }
}

/// Up to `limit` messages of `thread` to `instance` not yet delivered,
/// oldest first (the thread run's `message.receive`).
///
/// Within a thread, deliveries to its instance come only from that
/// receive, which always takes the oldest first, so the delivered ones are
/// a prefix by `message_threads.seq`: the scan starts after the newest
/// delivered one (found walking back from the thread's newest message), so
/// it costs the thread's backlog, not its history.
pub fn undelivered(
    conn: &Db,
    thread: &str,
    instance: &str,
    limit: usize,
) -> Result<Vec<MessageRow>, Code> {
    let floor: i64 = conn
        .prepare_cached(
            "SELECT coalesce((SELECT mt.seq FROM message_threads mt JOIN messages m ON m.id = mt.message
               WHERE mt.thread = ?1 AND m.to_role = ?2
                 AND EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id)
               ORDER BY mt.seq DESC LIMIT 1), 0)",
        )
        .and_then(|mut s| s.query_row(params![thread, instance], |r| r.get(0)))
        .map_err(sql)?;
    let text = format!(
        "SELECT {MESSAGE_COLUMNS} FROM message_threads mt JOIN messages m ON m.id = mt.message
         WHERE mt.thread = ?1 AND mt.seq > ?3 AND m.to_role = ?2
           AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id)
         ORDER BY mt.seq LIMIT ?4"
    );
    let mut s = conn.prepare_cached(&text).map_err(sql)?;
    let rows = s
        .query_map(
            params![thread, instance, floor, i64::try_from(limit).unwrap_or(100)],
            MessageRow::read,
        )
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
}

/// A message's place in a thread (its `message_threads.seq`), if it is in it.
pub fn place(conn: &Db, thread: &str, message: &str) -> Result<Option<i64>, Code> {
    conn.prepare_cached("SELECT seq FROM message_threads WHERE thread = ?1 AND message = ?2")
        .and_then(|mut s| {
            s.query_row(params![thread, message], |r| r.get(0))
                .optional()
        })
        .map_err(sql)
}

/// Up to `limit` messages of a thread after place `after`, oldest first,
/// each with its thread; and whether more follow.
pub fn messages(
    conn: &Db,
    thread: &str,
    after: i64,
    limit: usize,
) -> Result<(Vec<MessageRow>, bool), Code> {
    let text = format!(
        "SELECT {MESSAGE_COLUMNS} FROM message_threads mt JOIN messages m ON m.id = mt.message
         WHERE mt.thread = ?1 AND mt.seq > ?2 ORDER BY mt.seq LIMIT ?3"
    );
    let mut s = conn.prepare_cached(&text).map_err(sql)?;
    let want = i64::try_from(limit).unwrap_or(50).saturating_add(1);
    let rows = s
        .query_map(params![thread, after, want], MessageRow::read)
        .map_err(sql)?;
    let mut out = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)?;
    let more = out.len() > limit;
    out.truncate(limit);
    Ok((out, more))
}

/// `(pending, unread)` of a thread: messages to its instance not yet
/// delivered, and those delivered to `holder` and not yet read. A message
/// delivered to a run that no longer holds the thread (stranded) counts as
/// neither.
pub fn counts(
    conn: &Db,
    thread: &str,
    instance: &str,
    holder: Option<&str>,
) -> Result<(i64, i64), Code> {
    conn.prepare_cached(
        "SELECT
           count(*) FILTER (WHERE d.message IS NULL),
           count(*) FILTER (WHERE d.run = ?3 AND NOT EXISTS
             (SELECT 1 FROM read_receipts r WHERE r.message = m.id))
         FROM message_threads mt JOIN messages m ON m.id = mt.message
           LEFT JOIN deliveries d ON d.message = m.id
         WHERE mt.thread = ?1 AND m.to_role = ?2",
    )
    .and_then(|mut s| {
        s.query_row(params![thread, instance, holder], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
    })
    .map_err(sql)
}

/// The launcher's view of every thread of the business (`threadsState`).
/// A thread's latest message and open are its rows with the largest `seq`
/// (`at` increases with `seq`), read off the end of its index rather than
/// by `max(at)` over all of them.
pub fn state(conn: &Db, business: &str) -> Result<Vec<ThreadState>, Code> {
    let mut s = conn
        .prepare_cached(
            "SELECT t.id, t.instance,
               (SELECT at FROM message_threads mt WHERE mt.thread = t.id
                  ORDER BY seq DESC LIMIT 1),
               (SELECT at FROM thread_opens o WHERE o.thread = t.id ORDER BY seq DESC LIMIT 1),
               (SELECT at FROM thread_claims c WHERE c.thread = t.id AND c.op = 'claim'
                  ORDER BY seq DESC LIMIT 1)
             FROM threads t WHERE t.business = ?1 ORDER BY t.seq",
        )
        .map_err(sql)?;
    let rows = s
        .query_map([business], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })
        .map_err(sql)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sql)?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, instance, last_message, last_open, last_claim) in rows {
        let h = holder(conn, &id)?;
        let (pending, unread) = counts(conn, &id, &instance, h.as_deref())?;
        out.push(ThreadState {
            thread: id,
            instance,
            pending,
            unread,
            last_message,
            last_open,
            last_claim,
            holder: h,
        });
    }
    Ok(out)
}
