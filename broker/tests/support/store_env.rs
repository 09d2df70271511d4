//! Shared setup of `store.rs` and `store_open.rs`: private stores, raw SQL behind the broker's back, the schema's text.
#![allow(dead_code)]

use mosaic_bus::error::Code;
use mosaic_bus::store::{schema, Store};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

pub fn fresh() -> (tempfile::TempDir, PathBuf) {
    let (d, bus) = crate::common::private_bus();
    let db = bus.db_path();
    {
        let mut s = Store::open(&db).unwrap();
        s.write(|t| {
            let at = t.now();
            t.db().sql().execute(
                "INSERT INTO events(id, business, kind, body, at) VALUES ('e1', 'acme', 'x.y', '{}', ?1)",
                [at],
            )
            .map_err(|_| Code::StorageUnavailable)?;
            Ok(())
        })
        .unwrap();
    }
    bus.release();
    (d, db)
}

pub fn raw(db: &Path) -> Connection {
    Connection::open(db).unwrap()
}

pub fn open_code(db: &Path) -> Option<Code> {
    Store::open(db).err()
}

pub fn new_decision<'a>(
    question: &'a str,
    target: Option<&'a str>,
) -> mosaic_bus::store::decisions::NewDecision<'a> {
    mosaic_bus::store::decisions::NewDecision {
        business: "acme",
        raised_by_role: "pm",
        raised_by_run: "run-p",
        action: "prd.approve",
        target,
        class: mosaic_bus::policy::routing::Class::Gated,
        routed_to: "human",
        domain: None,
        question,
        options: r#"[{"key":"yes","text":"Yes"},{"key":"no","text":"No"}]"#,
        recommendation: "yes",
        approval_choice: "yes",
        blocking: false,
        project: None,
        task_ref: None,
        requirement_ref: None,
        supersedes: None,
        target_holder: None,
        spec_path: None,
        spec_commit: None,
    }
}

/// One valid row in every evidence table, written through the triggers.
pub fn populate_every_table(c: &Connection) {
    c.execute_batch(
        "INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action, class,
           routed_to, question, options, recommendation, approval_choice, blocking, at)
         VALUES ('d1', 'acme', 'pm', 'r1', 'x', 'gated', 'human', 'q', '[]', 'a', 'a', 0,
           '2099-01-01T00:00:01.000Z');
         INSERT INTO decision_events(decision, kind, by, at)
         VALUES ('d1', 'seen', 'human', '2099-01-01T00:00:02.000Z');
         INSERT INTO role_claims(business, role, run, op, at)
         VALUES ('acme', 'pm', 'r1', 'claim', '2099-01-01T00:00:03.000Z');
         INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
         VALUES ('m1', 'acme', 'pm', 'r1', 'cto', 'INFO', 'hi', '2099-01-01T00:00:04.000Z');
         INSERT INTO deliveries(message, run, at) VALUES ('m1', 'r2', '2099-01-01T00:00:05.000Z');
         INSERT INTO read_receipts(message, run, at) VALUES ('m1', 'r2', '2099-01-01T00:00:06.000Z');
         INSERT INTO task_snapshots(business, task_ref, read_at, tombstone, fields, at)
         VALUES ('acme', 'vikunja:3/41', '2099-01-01T00:00:00.000Z', 1, NULL,
           '2099-01-01T00:00:07.000Z');
         INSERT INTO projects(id, business, name, by, at)
         VALUES ('p1', 'acme', 'Site', 'Ada', '2099-01-01T00:00:08.000Z');
         INSERT INTO threads(id, business, project, instance, user, name, at)
         VALUES ('t1', 'acme', 'p1', 'pm', 'Ada', 'Plans', '2099-01-01T00:00:09.000Z');
         INSERT INTO thread_claims(business, thread, run, op, by, at)
         VALUES ('acme', 't1', 'r1', 'claim', 'r1', '2099-01-01T00:00:10.000Z');
         INSERT INTO message_threads(message, thread, at)
         VALUES ('m1', 't1', '2099-01-01T00:00:11.000Z');
         INSERT INTO thread_opens(thread, by, at)
         VALUES ('t1', 'Ada', '2099-01-01T00:00:12.000Z');
         INSERT INTO instance_names(business, instance, name, by_role, by_run, at)
         VALUES ('acme', 'pm', 'lead', 'human', 'human-cli', '2099-01-01T00:00:13.000Z');
         INSERT INTO usage_records(business, run, role, turn, source, kind, baseline, at)
         VALUES ('acme', 'r2', 'cto', 'm1', 'claude-code', 'baseline', '{\"bytes\":0}',
           '2099-01-01T00:00:14.000Z');",
    )
    .unwrap();
}

pub fn count(c: &Connection, table: &str) -> i64 {
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// Runs `sql` with the named trigger taken away and then put back with its
/// exact original text, so the `sqlite_master` digest still matches: what a
/// careful hand working behind the broker's back would do.
pub fn behind_the_guard(db: &Path, trigger: &str, sql: &str) {
    let c = raw(db);
    let original: String = c
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?1",
            [trigger],
            |r| r.get(0),
        )
        .unwrap();
    c.execute_batch(&format!("DROP TRIGGER {trigger};"))
        .unwrap();
    c.execute_batch(sql).unwrap();
    c.execute_batch(&format!("{original};")).unwrap();
    assert_eq!(schema::master_digest(&c).unwrap(), schema::MASTER_SHA256);
}
