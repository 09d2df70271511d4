//! 3h → 3i (3i row 126): `usage_records` rebuilt so `account` may hold the
//! run's account (SQLite cannot drop the 3h `account IS NULL` CHECK). Every
//! row keeps its `seq`, the table's `sqlite_sequence` counter is carried,
//! and the indexes and guards come back with their 3h text. The runner's
//! one transaction covers it all: a failure leaves the store at 3h.

use rusqlite::Connection;

/// The step's statements, as `schema.sql` has them after the 3h step.
pub const SQL: &str = include_str!("s3h_to_3i.sql");

pub fn apply(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let count = |table: &str| -> rusqlite::Result<i64> {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
    };
    let sequence = || -> rusqlite::Result<Option<i64>> {
        conn.query_row(
            "SELECT max(seq) FROM sqlite_sequence WHERE name = 'usage_records'",
            [],
            |r| r.get(0),
        )
    };
    let rows = count("usage_records")?;
    let counter = sequence()?;
    conn.execute_batch(SQL)?;
    // The rebuild must hand back exactly what it took: the same rows and
    // the same counter. A mismatch fails the step (and rolls it back).
    if count("usage_records")? != rows || sequence()? != counter {
        return Err(rusqlite::Error::ExecuteReturnedResults);
    }
    Ok(Vec::new())
}
