//! 3e → 3f (3i row 138): `decisions.spec_path` and `decisions.spec_commit`,
//! nullable, null on every existing row, with the trigger that keeps a
//! citation whole. No row changes.

use rusqlite::Connection;

/// The step's statements, as `schema.sql` has them after the 3e step.
pub const SQL: &str = include_str!("s3e_to_3f.sql");

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(SQL)?;
    Ok(Vec::new())
}
