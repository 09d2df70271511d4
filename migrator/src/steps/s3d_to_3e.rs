//! 3d → 3e (3i row 121): projects, threads, thread claims, message threads
//! and thread opens, with their guards. No row changes. A thread run only
//! ever receives its own thread's messages, so a message from before 3e
//! that waits for a thread instance is never delivered; the step leaves it
//! as written and says how many undelivered messages it kept, per business
//! and recipient role, so the human can send again what was meant for a
//! thread (`thread.send`).

use rusqlite::Connection;
use serde_json::json;

/// The step's statements, as `schema.sql` has them after the 3d step.
pub const SQL: &str = include_str!("s3d_to_3e.sql");

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(SQL)?;
    let mut stmt = conn.prepare(
        "SELECT business, to_role, count(*) FROM messages m
         WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id)
         GROUP BY business, to_role ORDER BY business, to_role",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(json!({
            "business": r.get::<_, String>(0)?,
            "role": r.get::<_, String>(1)?,
            "undelivered": r.get::<_, i64>(2)?,
        })
        .to_string())
    })?;
    rows.collect()
}
