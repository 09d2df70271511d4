//! 3h → 3i: `usage_records.account` may hold the run's account (3i row
//! 126), and the store takes the 3i physical layout (issue 34): every
//! evidence table rebuilt without `AUTOINCREMENT`, the three secondary
//! indexes of `events` leaving a send's authorization out, the guards made
//! again in their order. Every row keeps its `seq` and every column. The
//! runner's one transaction covers it all: a failure leaves the store at 3h.
//!
//! Without `AUTOINCREMENT` a table hands out its largest `seq` plus one.
//! Rows are never deleted, so that number was never used, unless a table's
//! `sqlite_sequence` counter is ahead of its rows: a `seq` was handed out
//! whose row is gone. Such a store is refused (the step fails) rather than
//! given a layout that could hand that `seq` out again.

use rusqlite::Connection;

/// The step's statements, as `schema.sql` has them after the 3h step.
pub const SQL: &str = include_str!("s3h_to_3i.sql");

/// Every table the step rebuilds, each with an integer `seq` key.
pub const TABLES: &[&str] = &[
    "events",
    "decisions",
    "decision_events",
    "role_claims",
    "messages",
    "deliveries",
    "read_receipts",
    "task_snapshots",
    "task_comment_cursors",
    "projects",
    "threads",
    "thread_claims",
    "message_threads",
    "thread_opens",
    "instance_names",
    "usage_records",
];

/// `(rows, largest seq)` of a table.
fn extent(conn: &Connection, table: &str) -> rusqlite::Result<(i64, Option<i64>)> {
    conn.query_row(
        &format!("SELECT count(*), max(seq) FROM {table}"),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// The table's `sqlite_sequence` counter, if it has one.
fn counter(conn: &Connection, table: &str) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT max(seq) FROM sqlite_sequence WHERE name = ?1",
        [table],
        |r| r.get(0),
    )
}

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut before = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let (rows, last) = extent(conn, table)?;
        // A counter ahead of the rows: a seq was handed out and its row is
        // gone. Without AUTOINCREMENT it could be handed out again.
        if counter(conn, table)?.unwrap_or(0) > last.unwrap_or(0) {
            return Err(rusqlite::Error::ExecuteReturnedResults);
        }
        before.push((rows, last));
    }
    // The runner opens the store with foreign keys off; the old tables
    // could not be dropped otherwise.
    let enforced: bool = conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
    if enforced {
        return Err(rusqlite::Error::ExecuteReturnedResults);
    }
    conn.execute_batch(SQL)?;
    // The rebuild must hand back exactly what it took, leave no counter,
    // and every reference must still find its row.
    for (table, was) in TABLES.iter().zip(before) {
        if extent(conn, table)? != was || counter(conn, table)?.is_some() {
            return Err(rusqlite::Error::ExecuteReturnedResults);
        }
    }
    if conn.prepare("PRAGMA foreign_key_check")?.exists([])? {
        return Err(rusqlite::Error::ExecuteReturnedResults);
    }
    Ok(Vec::new())
}
