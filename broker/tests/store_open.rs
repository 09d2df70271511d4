//! What opening a store checks: metadata, version and schema, foreign keys, stored timestamps, the file's integrity and each tampering with its code, WAL with synchronous FULL.

mod common;
use mosaic_bus::error::Code;
use mosaic_bus::store::{full_timestamp_scan, Db, Store};
use std::os::unix::fs::PermissionsExt;
#[path = "support/store_env.rs"]
mod store_env;
use store_env::{behind_the_guard, count, fresh, open_code, populate_every_table, raw};

#[test]
fn open_refuses_missing_metadata_other_versions_and_changed_schema() {
    // A database file with no metadata is never initialized over.
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("bus.sqlite");
    {
        let c = raw(&db);
        c.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x);")
            .unwrap();
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(open_code(&db), Some(Code::SchemaMetadata));
    let c = raw(&db);
    let tables: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0, "not reinitialized");

    // An empty existing file is not initialized either.
    let d2 = tempfile::tempdir().unwrap();
    let empty = d2.path().join("bus.sqlite");
    std::fs::write(&empty, b"").unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(open_code(&empty), Some(Code::SchemaMetadata));
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);

    // Another schema version (metadata rewritten behind the guard's back).
    let (_d3, db3) = fresh();
    {
        let c = raw(&db3);
        c.execute_batch(
            "DROP TRIGGER meta_no_update; UPDATE meta SET value = '3a' WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    assert_eq!(open_code(&db3), Some(Code::SchemaVersion));

    // A dropped guard changes sqlite_master: the digest refuses.
    let (_d4, db4) = fresh();
    raw(&db4)
        .execute_batch("DROP TRIGGER events_no_delete;")
        .unwrap();
    assert_eq!(open_code(&db4), Some(Code::SchemaDigest));

    // An extra index too.
    let (_d5, db5) = fresh();
    raw(&db5)
        .execute_batch("CREATE INDEX sneaky ON events(kind);")
        .unwrap();
    assert_eq!(open_code(&db5), Some(Code::SchemaDigest));

    // Not WAL.
    let (_d6, db6) = fresh();
    raw(&db6)
        .execute_batch("PRAGMA journal_mode=DELETE;")
        .unwrap();
    assert_eq!(open_code(&db6), Some(Code::JournalMode));
}

#[test]
fn open_refuses_a_broken_foreign_key_and_a_bad_stored_timestamp() {
    let (_d, db) = fresh();
    {
        let c = raw(&db);
        // A careless tool with foreign keys off.
        c.execute_batch("PRAGMA foreign_keys=OFF;").unwrap();
        c.execute(
            "INSERT INTO deliveries(message, run, at) VALUES ('no-such-message', 'r', '2099-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
    }
    assert_eq!(open_code(&db), Some(Code::Integrity));

    let (_d2, db2) = fresh();
    {
        let c = raw(&db2);
        c.execute_batch(
            "DROP TRIGGER events_at;
             INSERT INTO events(id, business, kind, body, at) VALUES ('e2','acme','x.y','{}','2099-01-01 00:00:00');",
        )
        .unwrap();
    }
    // The dropped trigger alone already fails the digest check.
    assert_eq!(open_code(&db2), Some(Code::SchemaDigest));
}

/// The open store runs WAL with synchronous=FULL and foreign keys on.
#[test]
fn an_open_store_is_wal_with_synchronous_full() {
    let (_d, db) = fresh();
    let s = Store::open(&db).unwrap();
    let c = s.db().sql();
    let mode: String = c
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let sync: i64 = c
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 2, "FULL");
    let fk: i64 = c
        .pragma_query_value(None, "foreign_keys", |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
}

#[test]
fn each_tampering_of_the_store_file_refuses_with_its_code() {
    // A trigger changed in place (same name, weaker body).
    let (_d, db) = fresh();
    raw(&db)
        .execute_batch(
            "DROP TRIGGER events_at;
             CREATE TRIGGER events_at BEFORE INSERT ON events
               WHEN NEW.at IS NULL BEGIN SELECT RAISE(ABORT, 'timestamp'); END;",
        )
        .unwrap();
    assert_eq!(open_code(&db), Some(Code::SchemaDigest));

    // A missing meta row, each of the two.
    for key in ["schema_version", "schema_sha256"] {
        let (_d, db) = fresh();
        behind_the_guard(
            &db,
            "meta_no_delete",
            &format!("DELETE FROM meta WHERE key = '{key}';"),
        );
        assert_eq!(open_code(&db), Some(Code::SchemaMetadata), "{key}");
        assert_eq!(open_code(&db), Some(Code::SchemaMetadata), "{key}: again");
        assert_eq!(count(&raw(&db), "events"), 1, "{key}: never reinitialized");
    }

    // The meta table itself gone.
    let (_d, db) = fresh();
    raw(&db)
        .execute_batch("PRAGMA foreign_keys=OFF; DROP TABLE meta;")
        .unwrap();
    assert_eq!(open_code(&db), Some(Code::SchemaMetadata));

    // An older and a newer version, the schema otherwise intact.
    for version in ["3a", "3g", "3h", "3j", ""] {
        let (_d, db) = fresh();
        behind_the_guard(
            &db,
            "meta_no_update",
            &format!("UPDATE meta SET value = '{version}' WHERE key = 'schema_version';"),
        );
        assert_eq!(open_code(&db), Some(Code::SchemaVersion), "{version:?}");
    }

    // A wrong recorded source digest.
    let (_d, db) = fresh();
    behind_the_guard(
        &db,
        "meta_no_update",
        "UPDATE meta SET value = 'ab' || substr(value, 3) WHERE key = 'schema_sha256';",
    );
    assert_eq!(open_code(&db), Some(Code::SchemaDigest));

    // Not WAL: each of the rollback-journal modes.
    for mode in ["DELETE", "TRUNCATE", "PERSIST"] {
        let (_d, db) = fresh();
        raw(&db)
            .execute_batch(&format!("PRAGMA journal_mode={mode};"))
            .unwrap();
        assert_eq!(open_code(&db), Some(Code::JournalMode), "{mode}");
    }

    // A row breaking a CHECK constraint: quick_check finds it.
    let (_d, db) = fresh();
    raw(&db)
        .execute_batch(
            "PRAGMA ignore_check_constraints=ON;
             INSERT INTO role_claims(business, role, run, op, at)
             VALUES ('acme', 'pm', 'r1', 'bogus', '2099-01-01T00:00:00.000Z');",
        )
        .unwrap();
    assert_eq!(open_code(&db), Some(Code::Integrity));
}

/// A row with a non-canonical or out-of-order timestamp, written with its
/// table's timestamp trigger taken away and put back (the digest matches),
/// refuses the open wherever it sits: as the newest row, behind later good
/// rows, or in `task_snapshots.read_at`.
#[test]
fn a_bad_timestamp_written_behind_the_brokers_back_refuses_the_open() {
    let bad_ats = [
        "2099-01-01 00:00:00",
        "2099-01-01T00:00:00Z",
        "2099-01-01T00:00:00.000",
        "2099-02-30T00:00:00.000Z",
        "2000-01-01",
        "garbage",
    ];
    for at in bad_ats {
        // The newest row of its table.
        let (_d, db) = fresh();
        behind_the_guard(
            &db,
            "events_at",
            &format!(
                "INSERT INTO events(id, business, kind, body, at) VALUES ('e2','acme','x.y','{{}}','{at}');"
            ),
        );
        assert_eq!(open_code(&db), Some(Code::Timestamp), "newest {at}");

        // Behind a later good row.
        let (_d, db) = fresh();
        behind_the_guard(
            &db,
            "role_claims_at",
            &format!(
                "INSERT INTO role_claims(business, role, run, op, at) VALUES ('acme','pm','r1','claim','{at}');
                 INSERT INTO role_claims(business, role, run, op, at)
                 VALUES ('acme','pm','r1','release','2999-01-01T00:00:00.000Z');"
            ),
        );
        assert_eq!(open_code(&db), Some(Code::Timestamp), "middle {at}");

        // A snapshot's read_at (its `at` canonical).
        let (_d, db) = fresh();
        behind_the_guard(
            &db,
            "task_snapshots_at",
            &format!(
                "INSERT INTO task_snapshots(business, task_ref, read_at, tombstone, fields, at)
                 VALUES ('acme','vikunja:3/41','{at}',1,NULL,'2099-01-01T00:00:00.000Z');"
            ),
        );
        assert_eq!(open_code(&db), Some(Code::Timestamp), "read_at {at}");
    }

    // Canonical but not later than the row before it, with a good row after.
    let (_d, db) = fresh();
    raw(&db)
        .execute_batch(
            "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
             VALUES ('m1','acme','pm','r1','cto','INFO','hi','2099-01-01T00:00:05.000Z');",
        )
        .unwrap();
    behind_the_guard(
        &db,
        "messages_at",
        "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
         VALUES ('m2','acme','pm','r1','cto','INFO','hi','2099-01-01T00:00:04.000Z');",
    );
    raw(&db)
        .execute_batch(
            "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
             VALUES ('m3','acme','pm','r1','cto','INFO','hi','2099-01-01T00:00:06.000Z');",
        )
        .unwrap();
    assert_eq!(open_code(&db), Some(Code::Timestamp), "out of order");
    assert_eq!(
        full_timestamp_scan(&Db::new(raw(&db))).unwrap(),
        vec![("messages".to_string(), 2)]
    );

    // The same store with good rows only opens.
    let (_d, db) = fresh();
    populate_every_table(&raw(&db));
    assert_eq!(open_code(&db), None);
}

/// The whole-store checks run side by side at open, but their refusals keep
/// the order of the checks: a broken foreign key (integrity) is reported
/// before a bad timestamp in the same store, and the timestamp alone after.
#[test]
fn open_reports_integrity_before_a_bad_timestamp() {
    let (_d, db) = fresh();
    behind_the_guard(
        &db,
        "events_at",
        "INSERT INTO events(id, business, kind, body, at) VALUES ('e2','acme','x.y','{}','garbage');",
    );
    assert_eq!(open_code(&db), Some(Code::Timestamp));
    raw(&db)
        .execute_batch(
            "PRAGMA foreign_keys=OFF;
             INSERT INTO deliveries(message, run, at)
             VALUES ('no-such-message', 'r', '2999-01-01T00:00:00.000Z');",
        )
        .unwrap();
    assert_eq!(open_code(&db), Some(Code::Integrity));
}
