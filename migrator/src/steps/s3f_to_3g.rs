//! 3f → 3g (3i rows 140, 141): `instance_names` with its append-only and
//! name-taken guards, the nullable `messages.to_name` (null on every
//! existing message), and the class guard that admits `STAFF-REQUEST`.
//! No row changes.

use rusqlite::Connection;

/// The step's statements, as `schema.sql` has them after the 3f step.
pub const SQL: &str = include_str!("s3f_to_3g.sql");

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(SQL)?;
    Ok(Vec::new())
}
