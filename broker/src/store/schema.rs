//! The pinned schema: its source, its digests and its version.

use sha2::{Digest, Sha256};

/// The schema this broker runs.
pub const SCHEMA_SQL: &str = include_str!("../../schema.sql");
/// The version string stored in `meta`.
pub const SCHEMA_VERSION: &str = "3i";
/// SHA-256 of `schema.sql`.
pub const SCHEMA_SHA256: &str = "7c63d02880d31b42a2f25d9a0d4f3e0f83bfc3007eca271256f01ab38cb6c73b";
/// SHA-256 of the `sqlite_master` that `schema.sql` produces (see [`master_digest`]).
pub const MASTER_SHA256: &str = "cf3aaa4310148ad8e52b850ed5c9677f65171a9081a163060752e3c149ff1614";

/// What a store at one schema version must show: its version string in
/// `meta`, the source text it was made from (and that text's SHA-256, also
/// in `meta`), and the digest of the `sqlite_master` it produces.
#[derive(Debug, Clone, Copy)]
pub struct Pin<'a> {
    pub version: &'a str,
    pub sql: &'a str,
    pub sha256: &'a str,
    pub master: &'a str,
}

/// The version this broker runs; the only one it opens.
pub const CURRENT: Pin<'static> = Pin {
    version: SCHEMA_VERSION,
    sql: SCHEMA_SQL,
    sha256: SCHEMA_SHA256,
    master: MASTER_SHA256,
};

/// Tables whose rows carry broker timestamps.
pub const EVIDENCE_TABLES: &[&str] = &[
    "events",
    "decisions",
    "decision_events",
    "role_claims",
    "messages",
    "deliveries",
    "read_receipts",
    "task_snapshots",
    "projects",
    "threads",
    "thread_claims",
    "message_threads",
    "thread_opens",
    "instance_names",
    "usage_records",
];

/// The evidence tables seals cover, in the order a seal hashes them
/// (ascending byte order of the name): every table of the schema but
/// `meta`, which holds the schema's own version and digest (a migration
/// rewrites them) and the store's id. Views are projections of these rows
/// and are not sealed. Every one is keyed by `seq`.
pub const SEALED_TABLES: &[&str] = &[
    "decision_events",
    "decisions",
    "deliveries",
    "events",
    "instance_names",
    "message_threads",
    "messages",
    "projects",
    "read_receipts",
    "role_claims",
    "task_comment_cursors",
    "task_snapshots",
    "thread_claims",
    "thread_opens",
    "threads",
    "usage_records",
];

pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Digest of every `sqlite_master` row in a fixed order.
pub fn master_digest(conn: &rusqlite::Connection) -> rusqlite::Result<String> {
    let mut stmt = conn.prepare(
        "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name",
    )?;
    let mut rows = stmt.query([])?;
    let mut h = Sha256::new();
    while let Some(r) = rows.next()? {
        for i in 0..4 {
            let s: String = r.get(i)?;
            h.update(s.as_bytes());
            h.update([0u8]);
        }
        h.update(b"\n");
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_digests_are_current() {
        assert_eq!(sha256_hex(SCHEMA_SQL.as_bytes()), SCHEMA_SHA256);
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        assert_eq!(master_digest(&conn).unwrap(), MASTER_SHA256);
    }

    /// Every table of the schema but `meta` is sealed, in byte order of
    /// its name, and each one's rows are keyed by `seq`: a table added by a
    /// later schema fails this until it is sealed (or its exclusion is
    /// decided and written down).
    #[test]
    fn sealed_tables_are_every_table_but_meta_in_name_order() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        let mut st = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table'
                 AND name NOT LIKE 'sqlite_%' AND name <> 'meta' ORDER BY name",
            )
            .unwrap();
        let tables: Vec<String> = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut sorted: Vec<&str> = SEALED_TABLES.to_vec();
        sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        assert_eq!(sorted, SEALED_TABLES);
        assert_eq!(tables, SEALED_TABLES);
        for t in SEALED_TABLES {
            let pk: String = conn
                .query_row(
                    &format!("SELECT name FROM pragma_table_info('{t}') WHERE pk = 1"),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(pk, "seq", "{t}");
        }
    }
}
