//! 3g → 3h (3i row 124): the append-only `usage_records` table, its three
//! indexes and its three append-only guards. No row changes.

use rusqlite::Connection;

/// The step's statements, as `schema.sql` has them after the 3g step.
pub const SQL: &str = include_str!("s3g_to_3h.sql");

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(SQL)?;
    Ok(Vec::new())
}
