//! 3b → 3c: the task comment cursors (`task_comment_cursors`, append-only,
//! each task's last comment ID only moving forward) and the immutable
//! `comment_cursor_epoch` in `meta`: from then on comments are tracked by
//! ID, and comments from before it (less a minute) are the baseline.

use mosaic_bus::store::clock;
use rusqlite::Connection;

/// The step's statements, as `schema.sql` has them after the 3b core.
pub const SQL: &str = include_str!("s3b_to_3c.sql");

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(SQL)?;
    let epoch = clock::format_ms(clock::now_ms());
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('comment_cursor_epoch', ?1)",
        [epoch],
    )?;
    Ok(Vec::new())
}
