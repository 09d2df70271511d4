//! The pinned schema: its source, its digests and its version.

use sha2::{Digest, Sha256};

/// The schema this broker runs.
pub const SCHEMA_SQL: &str = include_str!("../../schema.sql");
/// The version string stored in `meta`.
pub const SCHEMA_VERSION: &str = "3i";
/// SHA-256 of `schema.sql`.
pub const SCHEMA_SHA256: &str = "c7601871157db5f3bd923f0c2e76be56b5be89de5a9d1f7db5a8ef9d94131ae9";
/// SHA-256 of the `sqlite_master` that `schema.sql` produces (see [`master_digest`]).
pub const MASTER_SHA256: &str = "82c44a7df2f34fafe2bb057a7f7ee45d484bf63fbd6165b3ad85a1dd7cb50e3c";

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

    /// What the 3i timestamp guards test for the canonical form.
    const CANONICAL_3I: &str =
        "NEW.at < '0' OR NEW.at IS NOT replace(datetime(NEW.at, '+0 days', 'subsec'), ' ', 'T') || 'Z'";

    /// Schema 3i's timestamp guards test the canonical form with
    /// `datetime(x, '+0 days', 'subsec')` (a date taken apart and put
    /// together again, as the days since the epoch: out-of-range days and
    /// hours come back as another date) instead of the `strftime()` round
    /// trip the guards had through 3h, which formats through printf and is
    /// the dearer half of a guard. The rule they keep is the open's scan
    /// (`clock::parse_canonical`, the spec's full-scan check): for every
    /// text the guard refuses exactly what the scan refuses, and it refuses
    /// every other type. Canonical timestamps of every kind of date, every
    /// field past its range, other shapes, and random bytes changed.
    #[test]
    fn the_canonical_guard_refuses_exactly_what_the_open_scan_refuses() {
        use rusqlite::types::Value;
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        // Every *_at guard uses it, for `at` and for a snapshot's `read_at`.
        let mut guards = conn
            .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%\\_at' ESCAPE '\\'")
            .unwrap();
        let guards: Vec<(String, String)> = guards
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(guards.len(), 14, "{guards:?}");
        for (name, sql) in &guards {
            assert!(sql.contains(CANONICAL_3I), "{name}");
            assert!(!sql.contains("strftime"), "{name}");
        }
        let refuses = CANONICAL_3I.replace("NEW.at", "?1");
        let mut stmt = conn.prepare(&format!("SELECT {refuses}")).unwrap();
        let mut refused = |v: &Value| -> bool {
            stmt.query_row([v], |r| r.get::<_, Option<bool>>(0))
                .unwrap()
                // NULL is left to the NOT NULL constraint.
                .unwrap_or(true)
        };
        let mut texts: Vec<String> = [
            "2030-01-01T00:00:00.000Z",
            "0000-01-01T00:00:00.000Z",
            "9999-12-31T23:59:59.999Z",
            "2024-02-29T12:00:00.000Z",
            "2023-02-29T12:00:00.000Z",
            "2100-02-29T12:00:00.000Z",
            "2000-02-29T12:00:00.000Z",
            "2030-02-30T00:00:00.002Z",
            "2030-04-31T00:00:00.002Z",
            "2030-00-10T00:00:00.002Z",
            "2030-13-10T00:00:00.002Z",
            "2030-01-00T00:00:00.002Z",
            "2030-01-32T00:00:00.002Z",
            "2030-01-01T24:00:00.000Z",
            "2030-01-31T24:00:00.000Z",
            "2030-01-01T25:00:00.000Z",
            "2030-01-01T23:60:00.000Z",
            "2030-01-01T23:59:60.000Z",
            "2030-01-01T23:59:59.9999Z",
            "2030-01-01T23:59:59.99Z",
            "2030-01-01T23:59:59Z",
            "2030-01-01T23:59Z",
            "2030-01-01",
            "2030-01-01 00:00:00.000Z",
            "2030-01-01t00:00:00.000Z",
            "2030-01-01T00:00:00.000z",
            "2030-01-01T00:00:00.000",
            "2030-01-01T00:00:00.000+00:00",
            "2030-01-01T00:00:00.000+01:00",
            " 2030-01-01T00:00:00.000Z",
            "2030-01-01T00:00:00.000Z ",
            "-0001-01-01T00:00:00.000Z",
            "-001-01-01T00:00:00.000Z",
            "+2030-01-01T00:00:00.000Z",
            "10000-01-01T00:00:00.000Z",
            "999-01-01T00:00:00.000Z",
            "2030-1-01T00:00:00.000Z",
            "now",
            "",
            "garbage",
            "2460000.5",
            "1700000000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every field over its range and a little past it, in the
        // canonical shape, and each with one byte changed at random.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % n
        };
        for _ in 0..20_000 {
            let s = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                next(10_000),
                next(14),
                next(33),
                next(26),
                next(61),
                next(62),
                next(1000)
            );
            let mut b = s.clone().into_bytes();
            let i = next(b.len() as u64) as usize;
            b[i] = b" -:.TZ0123456789+z"[next(18) as usize];
            texts.push(s);
            texts.push(String::from_utf8(b).unwrap());
        }
        let mut canonical = 0;
        for t in &texts {
            let scan = super::super::clock::parse_canonical(t).is_none();
            assert_eq!(refused(&Value::Text(t.clone())), scan, "{t:?}");
            canonical += usize::from(!scan);
        }
        assert!(
            canonical > 1_000 && canonical < texts.len() / 2,
            "{canonical}"
        );
        for v in [
            Value::Null,
            Value::Integer(1_700_000_000),
            Value::Integer(2_460_000),
            Value::Real(2_460_000.5),
            Value::Blob(b"2030-01-01T00:00:00.000Z".to_vec()),
        ] {
            assert!(refused(&v), "{v:?}");
        }
    }

    /// Every index of `events` (its id's and the three secondary ones) is
    /// partial on exactly the condition the reads and the guards AND in
    /// (`store::NOT_A_SEND`), or SQLite would not use them there; the guards
    /// that find an event by id carry it too.
    #[test]
    fn the_events_indexes_are_partial_on_what_the_reads_say() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        let sql_of = |name: &str| -> String {
            conn.query_row(
                "SELECT sql FROM sqlite_master WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .unwrap()
        };
        for index in ["events_id", "events_subject", "events_run", "events_kind"] {
            let sql = sql_of(index);
            assert!(
                sql.ends_with(&format!("AND {}", super::super::NOT_A_SEND))
                    || sql.ends_with(&format!("WHERE {}", super::super::NOT_A_SEND)),
                "{index}: {sql}"
            );
        }
        let indexes: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            indexes,
            ["events_id", "events_subject", "events_run", "events_kind"],
            "no other index (an automatic one for a UNIQUE column) covers every event"
        );
        for trigger in [
            "events_no_replace",
            "messages_same_business",
            "decision_events_same_business",
        ] {
            let sql = sql_of(trigger);
            assert!(
                sql.contains(&format!("AND {}", super::super::NOT_A_SEND)),
                "{trigger}: {sql}"
            );
        }
    }
}
