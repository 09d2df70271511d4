//! The reads' queries: every SELECT the read verbs make, each returning
//! plain rows (`store::rows`) for `verbs::reads` to compose and
//! `handlers::views` to show. Nothing here writes or decides who may read.

use super::map_sql_error;
use super::rows::{
    ClaimRow, DecisionEntry, DecisionEventRow, EventRow, InputNeeded, MessageRow, ReceiptRow,
    TaskSnapshotRow, TrailRecord, CLAIM_COLUMNS, DECISION_COLUMNS, DECISION_EVENT_COLUMNS,
    EVENT_COLUMNS, MESSAGE_COLUMNS, MESSAGE_COLUMN_COUNT,
};
use super::Db;
use crate::error::Code;
use rusqlite::{params, OptionalExtension};
use serde_json::{Map, Value};

fn sql_err(e: rusqlite::Error) -> Code {
    map_sql_error(&e)
}

pub(crate) fn collect<T>(
    conn: &Db,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, Code> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt.query_map(p, f).map_err(sql_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql_err)
}

// --- decisions as the inbox shows them ------------------------------------

const OPEN: &str = "NOT EXISTS (SELECT 1 FROM decision_events e WHERE e.decision = d.id \
     AND e.kind IN ('resolved', 'withdrawn'))";

/// Where a page of decisions starts: after the decision of this `seq`
/// (and, for a list gated first, of this gatedness).
#[derive(Debug, Clone, Copy)]
pub struct DecisionCursor {
    pub gated: bool,
    pub seq: i64,
}

/// A decision of business `b` as a [`DecisionCursor`], if it is one.
pub fn decision_cursor(conn: &Db, b: &str, id: &str) -> Result<Option<DecisionCursor>, Code> {
    conn.prepare_cached(
        "SELECT class = 'gated', seq FROM decisions WHERE id = ?1 AND business = ?2",
    )
    .and_then(|mut s| {
        s.query_row(params![id, b], |r| {
            Ok(DecisionCursor {
                gated: r.get(0)?,
                seq: r.get(1)?,
            })
        })
        .optional()
    })
    .map_err(sql_err)
}

/// Open decisions routed to `route`, gated first and then oldest: at most
/// `limit`, after `after` in that order.
pub fn open_decisions(
    conn: &Db,
    business: &str,
    route: &str,
    after: Option<DecisionCursor>,
    limit: i64,
) -> Result<Vec<DecisionEntry>, Code> {
    let sql = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d
         WHERE d.business = ?1 AND d.routed_to = ?2 AND {OPEN}
           AND ((d.class = 'gated') < ?3 OR ((d.class = 'gated') = ?3 AND d.seq > ?4))
         ORDER BY d.class = 'gated' DESC, d.seq LIMIT ?5"
    );
    let (gated, seq) = after.map_or((2, i64::MIN), |c| (i64::from(c.gated), c.seq));
    collect(
        conn,
        &sql,
        params![business, route, gated, seq, limit],
        DecisionEntry::read,
    )
}

/// `decisions {list:'roles'}`: the business's open decisions routed to a
/// role (never the human), oldest first, at most `limit` after the one of
/// seq `after`. Each row is the decision row `trail` and `inbox` give for
/// its id.
pub fn open_for_roles(
    conn: &Db,
    business: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<DecisionEntry>, Code> {
    let sql = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d
         WHERE d.business = ?1 AND d.routed_to <> 'human' AND {OPEN} AND d.seq > ?2
         ORDER BY d.seq LIMIT ?3"
    );
    collect(
        conn,
        &sql,
        params![business, after, limit],
        DecisionEntry::read,
    )
}

/// `decisions {list:'recent'}`: the business's last `limit` closed decisions
/// of every route, newest close first, each the decision row `trail` gives
/// plus `closed`, its closing `decision_events` row.
pub fn recent_closed(
    conn: &Db,
    business: &str,
    limit: i64,
) -> Result<Vec<(DecisionEntry, Option<DecisionEventRow>)>, Code> {
    let sql = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d JOIN decision_events e
           ON e.decision = d.id AND e.kind IN ('resolved', 'withdrawn')
         WHERE d.business = ?1 ORDER BY e.seq DESC LIMIT ?2"
    );
    let rows = collect(conn, &sql, params![business, limit], DecisionEntry::read)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let closed = crate::store::decisions::closing_event(conn, &row.id)?;
        out.push((row, closed));
    }
    Ok(out)
}

/// One message row by id (any business: the caller found the id in its own
/// business's unread index).
pub fn message_by_id(conn: &Db, id: &str) -> Result<MessageRow, Code> {
    let by_id = format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?1");
    let mut stmt = conn.prepare_cached(&by_id).map_err(sql_err)?;
    stmt.query_row([id], MessageRow::read).map_err(sql_err)
}

/// A role's latest `role_claims` row, if it ever had one.
pub fn latest_claim(conn: &Db, b: &str, role: &str) -> Result<Option<ClaimRow>, Code> {
    conn.prepare_cached(&format!(
        "SELECT {CLAIM_COLUMNS} FROM role_claims
         WHERE business = ?1 AND role = ?2 ORDER BY seq DESC LIMIT 1"
    ))
    .and_then(|mut s| s.query_row(params![b, role], ClaimRow::read).optional())
    .map_err(sql_err)
}

/// The open decisions `role` raised that wait on the human, gated first,
/// at most `limit` of them.
pub fn input_needed(conn: &Db, b: &str, role: &str, limit: i64) -> Result<Vec<InputNeeded>, Code> {
    collect(
        conn,
        &format!(
            "SELECT d.id, d.question, d.class, d.blocking, d.task_ref, d.at FROM decisions d
             WHERE d.business = ?1 AND d.routed_to = 'human' AND d.raised_by_role = ?2 AND {OPEN}
             ORDER BY d.class = 'gated' DESC, d.seq LIMIT ?3"
        ),
        params![b, role, limit],
        |r| {
            Ok(InputNeeded {
                id: r.get(0)?,
                question: r.get(1)?,
                class: r.get(2)?,
                blocking: r.get::<_, i64>(3)? == 1,
                task_ref: r.get(4)?,
                at: r.get(5)?,
            })
        },
    )
}

// --- trail ----------------------------------------------------------------

/// Where a page of `trail` starts and how many records each source may
/// give it (issue 34): records written after `after` (a broker timestamp,
/// the last `at` of the page before), at most `limit` from each source.
#[derive(Debug, Clone, Copy)]
pub struct TrailWindow<'a> {
    pub after: Option<&'a str>,
    pub limit: i64,
}

/// Every record of business `b` linked to `subject` (a task ref, decision
/// id, message id or run id) written after `w.after`, in query order and
/// possibly more than once; `verbs::reads` keeps each once, sorts them into
/// write order and cuts the page. The sources a busy subject can fill (a
/// task's events, snapshots and decisions; a decision's events and the
/// messages citing it) each give at most `w.limit` rows, from the first
/// `seq` written after `w.after` on (found by time: [`last_seq_by_time`]),
/// so a page costs the same however deep into the history it is. The
/// others hold a few rows each and are given whole (the caller drops what
/// is not after `w.after`).
pub fn trail_records(
    conn: &Db,
    b: &str,
    subject: &str,
    w: TrailWindow<'_>,
) -> Result<Vec<TrailRecord>, Code> {
    let mut t = Vec::new();
    let floor = |table: Table| -> Result<i64, Code> {
        match w.after {
            None => Ok(i64::MIN),
            Some(after) => Ok(last_seq_by_time(conn, table, after, true)?.unwrap_or(i64::MIN)),
        }
    };

    // Events about the subject.
    t.extend(collect(
        conn,
        &format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE subject = ?2 AND business = ?1 AND {}
               AND seq > ?3 ORDER BY seq LIMIT ?4",
            crate::store::NOT_A_SEND
        ),
        params![b, subject, floor(Table::Events)?, w.limit],
        |r| EventRow::read(r).map(TrailRecord::Event),
    )?);
    // The subject event itself (a send's authorization is not found by its
    // id: see `NOT_A_SEND`; the message's trail gives it), a run's session
    // events.
    for filter in [
        concat!(
            "id = ?2 AND business = ?1 AND ",
            crate::store::not_a_send!()
        ),
        concat!(
            "business = ?1 AND run = ?2 AND kind IN ('session.launched', 'session.ended') AND ",
            crate::store::not_a_send!()
        ),
    ] {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE {filter}");
        t.extend(collect(conn, &sql, params![b, subject], |r| {
            EventRow::read(r).map(TrailRecord::Event)
        })?);
    }

    // Claim evidence of a run, and claims citing a decision.
    t.extend(collect(
        conn,
        &format!("SELECT {CLAIM_COLUMNS} FROM role_claims WHERE run = ?2 AND business = ?1"),
        params![b, subject],
        |r| ClaimRow::read(r).map(TrailRecord::Claim),
    )?);
    // Task snapshots, and decisions held on the task.
    t.extend(collect(
        conn,
        "SELECT seq, task_ref, read_at, tombstone, fields, at FROM task_snapshots
         WHERE business = ?1 AND task_ref = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4",
        params![b, subject, floor(Table::TaskSnapshots)?, w.limit],
        |r| {
            Ok(TrailRecord::Task(TaskSnapshotRow {
                seq: r.get(0)?,
                task_ref: r.get(1)?,
                read_at: r.get(2)?,
                tombstone: r.get::<_, i64>(3)? == 1,
                fields: r.get(4)?,
                at: r.get(5)?,
            }))
        },
    )?);
    let by_task = format!(
        "SELECT {DECISION_COLUMNS} FROM decisions d WHERE d.task_ref = ?2 AND d.business = ?1
           AND d.seq > ?3 ORDER BY d.seq LIMIT ?4"
    );
    t.extend(collect(
        conn,
        &by_task,
        params![b, subject, floor(Table::Decisions)?, w.limit],
        |r| DecisionEntry::read(r).map(TrailRecord::Decision),
    )?);

    // A decision: its row, its events, the human inputs they cite, claims and
    // messages citing it.
    let by_id =
        format!("SELECT {DECISION_COLUMNS} FROM decisions d WHERE d.id = ?2 AND d.business = ?1");
    let decision = collect(conn, &by_id, params![b, subject], |r| {
        DecisionEntry::read(r).map(TrailRecord::Decision)
    })?;
    if !decision.is_empty() {
        t.extend(decision);
        let events = format!(
            "SELECT {} FROM decision_events WHERE decision = ?1 AND seq > ?2
             ORDER BY seq LIMIT ?3",
            DECISION_EVENT_COLUMNS
        );
        t.extend(collect(
            conn,
            &events,
            params![subject, floor(Table::DecisionEvents)?, w.limit],
            |r| DecisionEventRow::read(r).map(TrailRecord::DecisionEvent),
        )?);
        t.extend(collect(
            conn,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE business = ?1 AND {NOT_A_SEND} AND id IN
                 (SELECT input FROM decision_events WHERE decision = ?2 AND input IS NOT NULL
                    AND seq > ?3 ORDER BY seq LIMIT ?4)",
                NOT_A_SEND = crate::store::NOT_A_SEND
            ),
            params![b, subject, floor(Table::DecisionEvents)?, w.limit],
            |r| EventRow::read(r).map(TrailRecord::Event),
        )?);
        t.extend(collect(
            conn,
            &format!(
                "SELECT {CLAIM_COLUMNS} FROM role_claims WHERE decision = ?2 AND business = ?1"
            ),
            params![b, subject],
            |r| ClaimRow::read(r).map(TrailRecord::Claim),
        )?);
        let citing = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.decision = ?2 AND m.business = ?1
               AND m.seq > ?3 ORDER BY m.seq LIMIT ?4"
        );
        t.extend(collect(
            conn,
            &citing,
            params![b, subject, floor(Table::Messages)?, w.limit],
            |r| MessageRow::read(r).map(TrailRecord::Message),
        )?);
    }

    // A message: its row, the request behind it, the send's authorization,
    // its delivery and its read receipt.
    let by_id =
        format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?2 AND m.business = ?1");
    if let Some(m) = collect(conn, &by_id, params![b, subject], MessageRow::read)?
        .into_iter()
        .next()
    {
        if let Some(req) = m.request.as_deref() {
            t.extend(collect(
                conn,
                &format!(
                    "SELECT {EVENT_COLUMNS} FROM events WHERE id = ?2 AND business = ?1
                       AND {NOT_A_SEND}",
                    NOT_A_SEND = crate::store::NOT_A_SEND
                ),
                params![b, req],
                |r| EventRow::read(r).map(TrailRecord::Event),
            )?);
        }
        t.extend(
            send_authorization(conn, b, &m, subject)?
                .into_iter()
                .map(TrailRecord::Event),
        );
        let receipt: fn(ReceiptRow) -> TrailRecord = TrailRecord::Delivery;
        let read: fn(ReceiptRow) -> TrailRecord = TrailRecord::Read;
        for (table, record) in [("deliveries", receipt), ("read_receipts", read)] {
            t.extend(collect(
                conn,
                &format!("SELECT seq, message, run, at FROM {table} WHERE message = ?1"),
                params![subject],
                |r| {
                    Ok(record(ReceiptRow {
                        seq: r.get(0)?,
                        message: r.get(1)?,
                        run: r.get(2)?,
                        at: r.get(3)?,
                    }))
                },
            )?);
        }
        t.push(TrailRecord::Message(m));
    }
    Ok(t)
}

/// The evidence tables [`last_seq_by_time`] searches.
#[derive(Debug, Clone, Copy)]
pub enum Table {
    Events,
    TaskSnapshots,
    Decisions,
    DecisionEvents,
    Messages,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Events => "events",
            Table::TaskSnapshots => "task_snapshots",
            Table::Decisions => "decisions",
            Table::DecisionEvents => "decision_events",
            Table::Messages => "messages",
        }
    }
}

/// The largest `seq` of `table` whose `at` is before `at` (`or_equal`:
/// at or before), if any. Every evidence table is in `at` order by `seq`
/// (the timestamp guards, and every open's scan, hold that), so a binary
/// search over `seq` finds it in about log2(rows) lookups by key, however
/// large the table; rows missing from the key range (there are none in a
/// store this broker wrote) are stepped over.
pub fn last_seq_by_time(
    conn: &Db,
    table: Table,
    at: &str,
    or_equal: bool,
) -> Result<Option<i64>, Code> {
    let name = table.name();
    let (first, last): (Option<i64>, Option<i64>) = conn
        // One aggregate per subquery: SQLite reads a lone min() or max()
        // off the end of the key, but walks the table for the pair.
        .prepare_cached(&format!(
            "SELECT (SELECT min(seq) FROM {name}), (SELECT max(seq) FROM {name})"
        ))
        .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(sql_err)?;
    let (Some(mut lo), Some(mut hi)) = (first, last) else {
        return Ok(None);
    };
    let mut next = conn
        .prepare_cached(&format!(
            "SELECT seq, at FROM {name} WHERE seq >= ?1 ORDER BY seq LIMIT 1"
        ))
        .map_err(sql_err)?;
    let mut found = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let row: Option<(i64, String)> = next
            .query_row([mid], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(sql_err)?;
        match row {
            Some((seq, row_at)) if seq <= hi => {
                let before = row_at.as_str() < at || (or_equal && row_at == at);
                if before {
                    found = Some(seq);
                    lo = seq + 1;
                } else {
                    hi = mid - 1;
                }
            }
            // Nothing between mid and hi: look below mid.
            _ => hi = mid - 1,
        }
    }
    Ok(found)
}

/// How many events on either side of the last one older than a message
/// [`send_authorization`] looks at.
const AUTHORIZATION_WINDOW: i64 = 8;

/// The `action.allowed` a role's send wrote for message `m` (id `id`): by
/// the sender's run, about the recipient, naming the message. Schema 3i
/// leaves a send's authorization out of the secondary indexes of `events`
/// (see [`crate::store::NOT_A_SEND`]), so it is found by time instead: the
/// send writes it in the message's transaction, immediately before the
/// message, so it is the last event older than the message
/// ([`last_seq_by_time`]); the rows around it (a few either side, in case
/// another writer ordered the two rows otherwise) are then read by key
/// range and matched exactly as before.
fn send_authorization(conn: &Db, b: &str, m: &MessageRow, id: &str) -> Result<Vec<EventRow>, Code> {
    let Some(before) = last_seq_by_time(conn, Table::Events, &m.at, false)? else {
        return Ok(Vec::new());
    };
    collect(
        conn,
        &format!(
            "SELECT {EVENT_COLUMNS} FROM events
             WHERE seq BETWEEN ?1 AND ?2 AND business = ?3 AND run = ?4
               AND kind = 'action.allowed' AND subject = ?5
               AND json_extract(body, '$.message') = ?6
             ORDER BY seq"
        ),
        params![
            before.saturating_sub(AUTHORIZATION_WINDOW),
            before.saturating_add(AUTHORIZATION_WINDOW),
            b,
            m.from_run,
            m.to_role,
            id
        ],
        EventRow::read,
    )
}

// --- replies, messages, state, tasks ---------------------------------------

/// Up to `limit` replies to message `id` of business `b`, oldest first.
pub fn replies(conn: &Db, b: &str, id: &str, limit: i64) -> Result<Vec<MessageRow>, Code> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.in_reply_to = ?1 AND m.business = ?2
         ORDER BY m.seq LIMIT ?3"
    );
    collect(conn, &sql, params![id, b, limit], MessageRow::read)
}

/// Up to `limit` messages to the human older than `before` (a seq), newest
/// first, each with `read`.
pub fn human_feed(
    conn: &Db,
    b: &str,
    before: i64,
    limit: i64,
) -> Result<Vec<(MessageRow, bool)>, Code> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, EXISTS (SELECT 1 FROM read_receipts r WHERE r.message = m.id)
         FROM messages m WHERE m.business = ?1 AND m.to_role = 'human' AND m.seq < ?2
         ORDER BY m.seq DESC LIMIT ?3"
    );
    collect(conn, &sql, params![b, before, limit], |r| {
        Ok((MessageRow::read(r)?, r.get(MESSAGE_COLUMN_COUNT)?))
    })
}

/// How many messages the human has, and how many of them were read.
pub fn human_counts(conn: &Db, b: &str) -> Result<(i64, i64), Code> {
    conn.prepare_cached(
        "SELECT count(*), count(r.message) FROM messages m
         LEFT JOIN read_receipts r ON r.message = m.id
         WHERE m.business = ?1 AND m.to_role = 'human'",
    )
    .and_then(|mut s| s.query_row(params![b], |r| Ok((r.get(0)?, r.get(1)?))))
    .map_err(sql_err)
}

/// The latest event of `kind` in business `b`: `(seq, id, kind, at)`.
pub fn latest_event_of_kind(
    conn: &Db,
    b: &str,
    kind: &str,
) -> Result<Option<(i64, String, String, String)>, Code> {
    conn.prepare_cached(concat!(
        "SELECT seq, id, kind, at FROM events WHERE business = ?1 AND kind = ?2 AND ",
        crate::store::not_a_send!(),
        " ORDER BY seq DESC LIMIT 1"
    ))
    .and_then(|mut s| {
        s.query_row(params![b, kind], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()
    })
    .map_err(sql_err)
}

/// One `task_snapshots` row, its fields decoded.
pub struct TaskRow {
    pub seq: i64,
    pub task_ref: String,
    pub read_at: String,
    pub tombstone: bool,
    pub fields: Map<String, Value>,
    pub at: String,
}

/// One snapshot row selected as `seq, task_ref, read_at, tombstone, fields, at`.
fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    let fields: Option<String> = r.get(4)?;
    Ok(TaskRow {
        seq: r.get(0)?,
        task_ref: r.get(1)?,
        read_at: r.get(2)?,
        tombstone: r.get::<_, i64>(3)? == 1,
        fields: fields
            .and_then(|f| serde_json::from_str(&f).ok())
            .unwrap_or_default(),
        at: r.get(5)?,
    })
}

/// The `task_current` projection of a business, in `task_ref` text order.
/// It steps from one task ref to the next through the snapshots' index and
/// takes each one's latest snapshot, so it costs the board, not every
/// snapshot ever taken (a `GROUP BY` read them all).
pub fn current_tasks(conn: &Db, b: &str) -> Result<Vec<TaskRow>, Code> {
    let mut stmt = conn
        .prepare_cached(
            "WITH RECURSIVE task_refs(r) AS (
               SELECT (SELECT min(task_ref) FROM task_snapshots WHERE business = ?1)
               UNION ALL
               SELECT (SELECT min(task_ref) FROM task_snapshots WHERE business = ?1 AND task_ref > r)
                 FROM task_refs WHERE r IS NOT NULL
             )
             SELECT s.seq, s.task_ref, s.read_at, s.tombstone, s.fields, s.at
             FROM task_refs JOIN task_snapshots s ON s.seq = (SELECT max(seq) FROM task_snapshots
               WHERE business = ?1 AND task_ref = task_refs.r)
             ORDER BY s.task_ref",
        )
        .map_err(sql_err)?;
    let rows = stmt.query_map(params![b], task_row).map_err(sql_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql_err)
}

/// A task's latest snapshot.
pub fn latest_task(conn: &Db, b: &str, task_ref: &str) -> Result<Option<TaskRow>, Code> {
    conn.prepare_cached(
        "SELECT seq, task_ref, read_at, tombstone, fields, at FROM task_snapshots
         WHERE business = ?1 AND task_ref = ?2 ORDER BY seq DESC LIMIT 1",
    )
    .and_then(|mut s| s.query_row(params![b, task_ref], task_row).optional())
    .map_err(sql_err)
}

/// A `task.created` event's `(subject, requirement)`.
pub type TaskRequirement = (Option<String>, Option<String>);

/// `(subject, requirement)` of every `task.created` event, oldest first.
pub fn task_created_requirements(conn: &Db, b: &str) -> Result<Vec<TaskRequirement>, Code> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT subject, json_extract(body, '$.requirement') FROM events
             WHERE business = ?1 AND kind = 'task.created' AND ",
            crate::store::not_a_send!(),
            " ORDER BY seq"
        ))
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![b], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
            ))
        })
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql_err)
}

/// True when `id` is a `human.input` event of business `b` (a
/// `task.created`'s `request`).
pub fn is_human_input(conn: &Db, b: &str, id: &str) -> Result<bool, Code> {
    conn.query_row(
        concat!(
            "SELECT EXISTS (SELECT 1 FROM events WHERE id = ?1 AND business = ?2
               AND kind = 'human.input' AND ",
            crate::store::not_a_send!(),
            ")"
        ),
        params![id, b],
        |r| r.get(0),
    )
    .map_err(sql_err)
}
