//! 3c → 3d (3i row 123): a revoke needs a resolved decision or a reason.
//! Adds `role_claims.reason` and replaces `role_revoke_needs_decision`; no
//! row changes.

use rusqlite::Connection;

/// The step's statements, as `schema.sql` has them after the 3c step.
pub const SQL: &str = include_str!("s3c_to_3d.sql");

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(SQL)?;
    Ok(Vec::new())
}
