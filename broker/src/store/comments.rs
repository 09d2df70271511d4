//! The trusted task sync's comment cursors (3c, `task_comment_cursors`):
//! append-only `(business, task_id, last_comment)` rows, the latest per task
//! winning; the store's guard refuses one that does not move forward.

use super::{map_sql_error, Db, Tx};
use crate::error::Code;
use rusqlite::{params, OptionalExtension};

/// Appends the task's new cursor (`cursor-not-increasing` when it is not
/// above the stored one: the insert trigger's code).
pub fn insert_cursor(
    t: &mut Tx<'_>,
    business: &str,
    task_id: i64,
    last_comment: i64,
) -> Result<(), Code> {
    t.tx.prepare_cached(
        "INSERT INTO task_comment_cursors(business, task_id, last_comment) VALUES (?1, ?2, ?3)",
    )
    .and_then(|mut st| st.execute(params![business, task_id, last_comment]))
    .map(|_| ())
    .map_err(|e| map_sql_error(&e))
}

/// The task's latest cursor, if it has one.
pub fn latest_cursor(conn: &Db, business: &str, task_id: i64) -> Result<Option<i64>, Code> {
    conn.prepare_cached(
        "SELECT last_comment FROM task_comment_cursors WHERE business = ?1 AND task_id = ?2
         ORDER BY seq DESC LIMIT 1",
    )
    .and_then(|mut st| {
        st.query_row(params![business, task_id], |r| r.get(0))
            .optional()
    })
    .map_err(|e| map_sql_error(&e))
}

/// The store's immutable `comment_cursor_epoch` (written when the store, or
/// its 3b→3c step, began to keep cursors).
pub fn epoch(conn: &Db) -> Result<String, Code> {
    conn.prepare_cached("SELECT value FROM meta WHERE key = 'comment_cursor_epoch'")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .map_err(|e| map_sql_error(&e))
}
