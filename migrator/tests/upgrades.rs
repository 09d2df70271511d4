//! Old stores made from the pinned fixtures (3b, 3d…3h) migrate to the current version like a new store and keep every row, every `seq` and every counter; the broker then serves them.

use mosaic_bus::core::{Caller, Core};
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::schema::{self, master_digest};
use mosaic_bus::store::Store;
use mosaic_migrate::lineage;
use mosaic_tests::data_root;
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
#[path = "support/migrate_env.rs"]
mod migrate_env;
use migrate_env::{
    cli, config, contents, counters, db, dump, hand_over, master_rows, path, rows_3b, store_3b,
    store_3h_with_usage, store_populated, this_broker_refuses, usage_rows, MESSAGE_COLUMNS_3F,
};

#[test]
fn a_3b_store_migrates_to_the_current_version_and_the_broker_serves_it() {
    let root = data_root();
    store_3b(root.path());
    let before = rows_3b(root.path());
    // The broker refuses the old store until it is migrated.
    this_broker_refuses(root.path());

    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The backup before the first step holds the store as it was.
    let (backup, r) = r.backed_up(root.path(), "3b");
    assert_eq!(rows_3b(&backup), before);
    let lines = r.json_lines();
    assert_eq!(
        lines,
        [
            json!({"step": "3b-to-3c", "from": "3b", "to": "3c"}),
            json!({"step": "3c-to-3d", "from": "3c", "to": "3d"}),
            // The 3b era's message to r0 was never delivered: kept, and counted.
            json!({"business": "acme", "role": "r0", "undelivered": 1}),
            json!({"step": "3d-to-3e", "from": "3d", "to": "3e"}),
            json!({"step": "3e-to-3f", "from": "3e", "to": "3f"}),
            json!({"step": "3f-to-3g", "from": "3f", "to": "3g"}),
            json!({"step": "3g-to-3h", "from": "3g", "to": "3h"}),
            json!({"step": "3h-to-3i", "from": "3h", "to": "3i"}),
            json!({"ok": true, "from": "3b", "to": "3i",
                   "steps": ["3b-to-3c", "3c-to-3d", "3d-to-3e", "3e-to-3f", "3f-to-3g",
                             "3g-to-3h", "3h-to-3i"]}),
        ]
    );
    // Same schema as a new store, every old row kept, the epoch recorded once.
    assert_eq!(contents(root.path()).0, schema::CURRENT.master);
    assert_eq!(rows_3b(root.path()), before);
    let c = db(root.path());
    let epoch: String = c
        .query_row(
            "SELECT value FROM meta WHERE key = 'comment_cursor_epoch'",
            [],
            |r| r.get(0),
        )
        .expect("epoch");
    assert!(
        mosaic_bus::store::clock::parse_canonical(&epoch).is_some(),
        "{epoch}"
    );
    let err = c
        .execute(
            "UPDATE meta SET value = '2000-01-01T00:00:00.000Z' WHERE key = 'comment_cursor_epoch'",
            [],
        )
        .expect_err("the epoch is immutable");
    assert!(err.to_string().contains("append-only"), "{err}");
    // 3c: a cursor only moves forward.
    c.execute(
        "INSERT INTO task_comment_cursors(business, task_id, last_comment) VALUES ('acme', 41, 7)",
        [],
    )
    .expect("cursor");
    let err = c
        .execute(
            "INSERT INTO task_comment_cursors(business, task_id, last_comment) VALUES ('acme', 41, 7)",
            [],
        )
        .expect_err("not forward");
    assert!(err.to_string().contains("cursor-not-increasing"), "{err}");
    drop(c);
    // Rerunning is a checked no-op.
    let again = cli(&[path(&root)]);
    assert_eq!(
        again.stdout,
        format!(
            "{}\n",
            json!({"ok": true, "from": "3i", "to": "3i", "steps": []})
        )
    );

    // The broker opens the migrated store and serves 3d's own path on the
    // 3b era's claim: the role.end holder ends run-old with a reason.
    let bus = BusDir::acquire(root.path()).expect("lock");
    let store = Store::open(&bus.db_path()).expect("the broker opens the migrated store");
    let mut core = Core::new(store, Arc::new(config(root.path())));
    let chief = Caller::Role {
        business: "acme".into(),
        role: "r0".into(),
        run: "run-chief".into(),
    };
    dispatch(&mut core, &chief, "role.claim", None).expect("claim");
    let Value::Object(args) = json!({"role": "r1", "reason": "left over from before the upgrade"})
    else {
        unreachable!()
    };
    let r = dispatch(&mut core, &chief, "role.revoke", Some(args)).expect("revoke");
    assert_eq!((&r["run"], &r["op"]), (&json!("run-old"), &json!("revoke")));
    drop(core);
    bus.release_lock();
}

/// A store as a 3d broker left it, made from the pinned 3d fixture: two
/// businesses, claims (one revoked with a reason, 3d's path), a resolved
/// decision, a comment cursor, and messages delivered, read and waiting.
fn store_3d(root: &Path) {
    let bus = BusDir::acquire(root).expect("lock");
    let c = Connection::open(bus.db_path()).expect("open");
    let pin = &lineage::VERSIONS[2];
    assert_eq!(pin.version, "3d");
    c.execute_batch("PRAGMA journal_mode = WAL;").expect("wal");
    c.execute_batch(pin.sql).expect("3d schema");
    c.execute(
        "INSERT INTO meta(key, value) VALUES ('schema_version', '3d'), ('schema_sha256', ?1),
           ('comment_cursor_epoch', '2026-11-01T09:00:00.000Z')",
        [pin.sha256],
    )
    .expect("meta");
    c.execute_batch(
        "INSERT INTO role_claims(business, role, run, op, by, at) VALUES
           ('acme', 'r1', 'run-1', 'claim', 'run-1', '2026-11-01T10:00:00.000Z'),
           ('acme', 'r0', 'run-0', 'claim', 'run-0', '2026-11-01T10:00:00.001Z'),
           ('acme', 'r2', 'run-2', 'claim', 'run-2', '2026-11-01T10:00:00.002Z');
         INSERT INTO role_claims(business, role, run, op, by, reason, at) VALUES
           ('acme', 'r2', 'run-2', 'revoke', 'run-0', 'done for today', '2026-11-01T10:00:00.003Z');
         INSERT INTO events(id, business, kind, role, run, subject, body, at) VALUES
           ('ev-1', 'acme', 'action.allowed', 'r1', 'run-1', 'r0',
            '{\"action\":\"message.send\"}', '2026-11-01T10:00:01.000Z'),
           ('ev-2', 'beta', 'human.input', 'human', 'human-cli', NULL,
            '{\"verb\":\"message.send\"}', '2026-11-01T10:00:01.001Z');
         INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action, target,
           class, routed_to, question, options, recommendation, approval_choice, blocking, at)
         VALUES ('d-1', 'acme', 'r1', 'run-1', 'prd.approve', NULL, 'gated', 'human', 'Ship?',
           '[{\"key\":\"yes\",\"text\":\"Yes\"},{\"key\":\"no\",\"text\":\"No\"}]',
           'yes', 'yes', 0, '2026-11-01T10:00:02.000Z');
         INSERT INTO decision_events(decision, kind, by, choice, at)
           VALUES ('d-1', 'resolved', 'Ada', 'yes', '2026-11-01T10:00:02.001Z');
         INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, request, at) VALUES
           ('m-1', 'acme', 'r1', 'run-1', 'r0', 'INFO', 'read one', NULL, '2026-11-01T10:00:03.000Z'),
           ('m-2', 'acme', 'r1', 'run-1', 'r0', 'INFO', 'waiting one', NULL, '2026-11-01T10:00:03.001Z'),
           ('m-3', 'acme', 'r1', 'run-1', 'r0', 'INFO', 'waiting two', NULL, '2026-11-01T10:00:03.002Z'),
           ('m-4', 'acme', 'r0', 'run-0', 'human', 'RESULT', 'for Ada', NULL, '2026-11-01T10:00:03.003Z'),
           ('m-5', 'beta', 'human', 'human-cli', 'helper', 'REQUEST', 'for a thread', 'ev-2',
            '2026-11-01T10:00:03.004Z');
         INSERT INTO deliveries(message, run, at) VALUES ('m-1', 'run-0', '2026-11-01T10:00:04.000Z');
         INSERT INTO read_receipts(message, run, at) VALUES ('m-1', 'run-0', '2026-11-01T10:00:05.000Z');
         INSERT INTO task_snapshots(business, task_ref, read_at, tombstone, fields, at) VALUES
           ('acme', 'vikunja:3/41', '2026-11-01T10:00:05.500Z', 0, '{\"title\":\"Site\"}',
            '2026-11-01T10:00:06.000Z');
         INSERT INTO task_comment_cursors(business, task_id, last_comment) VALUES ('acme', 41, 7);",
    )
    .expect("3d evidence");
    drop(c);
    hand_over(bus, root);
}

/// The columns `decisions` had before 3f added the spec citation.
const DECISION_COLUMNS_3D: &str = "seq, id, business, raised_by_role, raised_by_run, action, \
     target, class, routed_to, domain, question, options, recommendation, approval_choice, \
     blocking, project, task_ref, requirement_ref, supersedes, target_holder, at";

/// Every row of table `t` as `t: row`: `decisions` by its 3d columns,
/// `messages` by its 3f ones, `meta` without the two rows a step rewrites.
fn table_rows(c: &Connection, t: &str) -> Vec<String> {
    let only = if t == "meta" {
        "WHERE key NOT IN ('schema_version', 'schema_sha256')"
    } else {
        ""
    };
    let cols = match t {
        "decisions" => DECISION_COLUMNS_3D,
        "messages" => MESSAGE_COLUMNS_3F,
        _ => "*",
    };
    dump(c, &format!("SELECT {cols} FROM {t} {only} ORDER BY rowid"))
        .into_iter()
        .map(|row| format!("{t}: {row}"))
        .collect()
}

/// The migrated store at `root`, after checking that its schema is,
/// entry by entry, that of a store the broker makes new.
fn same_schema_as_a_new_store(root: &Path) -> Connection {
    let fresh = data_root();
    let bus = BusDir::acquire(fresh.path()).expect("lock");
    drop(Store::open(&bus.db_path()).expect("a new store"));
    bus.release_lock();
    let migrated = db(root);
    assert_eq!(master_rows(&migrated), master_rows(&db(fresh.path())));
    // 3i has no AUTOINCREMENT: no counter is left, and each table goes on
    // from its largest seq.
    assert_eq!(counters(&migrated), []);
    migrated
}

/// Before 3i: every table's counter stands at its largest `seq`, as it does
/// in any store whose rows were never deleted (so dropping AUTOINCREMENT
/// hands out exactly the numbers it would have).
fn counters_at_their_rows(root: &Path) {
    let c = db(root);
    let all = counters(&c);
    assert!(!all.is_empty());
    for (table, counter) in all {
        let last: i64 = c
            .query_row(&format!("SELECT max(seq) FROM {table}"), [], |r| r.get(0))
            .expect("max");
        assert_eq!(counter, last, "{table}");
    }
}

/// Every row of the tables a 3d store has, by their 3d columns, `meta`
/// without the two rows a step rewrites. (`sqlite_sequence` is not one:
/// 3i drops `AUTOINCREMENT`, see [`counters_at_their_rows`].)
fn rows_3d(root: &Path) -> Vec<String> {
    let c = db(root);
    let mut out = Vec::new();
    for t in [
        "meta",
        "events",
        "decisions",
        "decision_events",
        "role_claims",
        "messages",
        "deliveries",
        "read_receipts",
        "task_snapshots",
        "task_comment_cursors",
    ] {
        out.extend(table_rows(&c, t));
    }
    out
}

#[test]
fn a_populated_3d_store_migrates_to_the_current_version_like_a_new_store_and_keeps_every_row() {
    let root = data_root();
    store_3d(root.path());
    let before = rows_3d(root.path());
    counters_at_their_rows(root.path());
    // The current broker refuses the 3d store.
    this_broker_refuses(root.path());
    assert_eq!(rows_3d(root.path()), before, "the refusal changed nothing");

    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The backup before the first step holds the store as it was.
    let (backup, r) = r.backed_up(root.path(), "3d");
    assert_eq!(rows_3d(&backup), before);
    let lines = r.json_lines();
    // The undelivered messages it kept, per business and recipient role,
    // before the step's line and the ready line.
    assert_eq!(
        lines,
        [
            json!({"business": "acme", "role": "human", "undelivered": 1}),
            json!({"business": "acme", "role": "r0", "undelivered": 2}),
            json!({"business": "beta", "role": "helper", "undelivered": 1}),
            json!({"step": "3d-to-3e", "from": "3d", "to": "3e"}),
            json!({"step": "3e-to-3f", "from": "3e", "to": "3f"}),
            json!({"step": "3f-to-3g", "from": "3f", "to": "3g"}),
            json!({"step": "3g-to-3h", "from": "3g", "to": "3h"}),
            json!({"step": "3h-to-3i", "from": "3h", "to": "3i"}),
            json!({"ok": true, "from": "3d", "to": "3i",
                   "steps": ["3d-to-3e", "3e-to-3f", "3f-to-3g", "3g-to-3h", "3h-to-3i"]}),
        ]
    );
    let migrated = same_schema_as_a_new_store(root.path());
    assert_eq!(
        master_digest(&migrated).expect("digest"),
        schema::CURRENT.master
    );
    // No row changed (every seq and sqlite_sequence counter kept), none was
    // added, no message was put in a thread, no name or usage record made.
    assert_eq!(rows_3d(root.path()), before);
    for t in [
        "projects",
        "threads",
        "thread_claims",
        "message_threads",
        "thread_opens",
        "instance_names",
        "usage_records",
    ] {
        let n: i64 = migrated
            .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
            .expect("count");
        assert_eq!(n, 0, "{t}");
    }
    drop(migrated);

    // The broker serves it: r0's new holder gets the messages kept for it,
    // oldest first, and only those.
    let bus = BusDir::acquire(root.path()).expect("lock");
    let store = Store::open(&bus.db_path()).expect("the broker opens the migrated store");
    let mut core = Core::new(store, Arc::new(config(root.path())));
    let holder = Caller::Role {
        business: "acme".into(),
        role: "r0".into(),
        run: "run-0".into(),
    };
    let got = dispatch(&mut core, &holder, "message.receive", None).expect("receive");
    let ids: Vec<&str> = got["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, ["m-2", "m-3"]);
    drop(core);
    bus.release_lock();
}

/// A store as a 3e broker left it, made from the pinned 3e fixture: the 3d
/// store's evidence plus a project, a thread, its claim, an opened thread,
/// a threaded message and a decision naming the project.
fn store_3e(root: &Path) {
    store_populated(root, "3e");
}

/// Every row of every table a 3e store has, `decisions` by its 3e columns
/// and `meta` without the two rows a step rewrites (`sqlite_sequence`
/// aside: see [`counters_at_their_rows`]).
fn rows_3e(root: &Path) -> Vec<String> {
    let c = db(root);
    let mut out = Vec::new();
    let mut tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("tables")
        .map(|r| r.expect("name"))
        .collect();
    tables.sort();
    tables.retain(|t| t != "sqlite_sequence");
    assert!(tables.len() >= 15, "{tables:?}");
    for t in &tables {
        out.extend(table_rows(&c, t));
    }
    out
}

#[test]
fn a_populated_3e_store_migrates_to_3f_with_null_citations_and_keeps_every_row() {
    let root = data_root();
    store_3e(root.path());
    let before = rows_3e(root.path());
    counters_at_their_rows(root.path());
    // The 3f broker refuses the 3e store, and the refusal changes nothing.
    this_broker_refuses(root.path());
    assert_eq!(rows_3e(root.path()), before);

    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The backup before the first step holds the store as it was.
    let (backup, r) = r.backed_up(root.path(), "3e");
    assert_eq!(rows_3e(&backup), before);
    let lines = r.json_lines();
    assert_eq!(
        lines,
        [
            json!({"step": "3e-to-3f", "from": "3e", "to": "3f"}),
            json!({"step": "3f-to-3g", "from": "3f", "to": "3g"}),
            json!({"step": "3g-to-3h", "from": "3g", "to": "3h"}),
            json!({"step": "3h-to-3i", "from": "3h", "to": "3i"}),
            json!({"ok": true, "from": "3e", "to": "3i",
                   "steps": ["3e-to-3f", "3f-to-3g", "3g-to-3h", "3h-to-3i"]}),
        ]
    );
    let migrated = same_schema_as_a_new_store(root.path());
    assert_eq!(
        master_digest(&migrated).expect("digest"),
        schema::CURRENT.master
    );
    // Every row as it was (no event, resolution or thread row touched, none
    // added), and every existing decision cites nothing.
    assert_eq!(rows_3e(root.path()), before);
    let cited: Vec<(String, Option<String>, Option<String>)> = migrated
        .prepare("SELECT id, spec_path, spec_commit FROM decisions ORDER BY seq")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(
        cited,
        [("d-1".into(), None, None), ("d-2".into(), None, None)]
    );
    // No spec or confirmation table came with the step.
    let extra: i64 = migrated
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE '%spec%'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(extra, 0);
    // The new columns are append-only like the rest of the row.
    let err = migrated
        .execute(
            "UPDATE decisions SET spec_path = 'spec/north-star.md' WHERE id = 'd-1'",
            [],
        )
        .expect_err("settled decisions are never rewritten");
    assert!(err.to_string().contains("append-only"), "{err}");
    // A citation is whole, names the one spec path and a full commit, and
    // stands only on a decision that names its project.
    let insert =
        |id: &str, at: &str, project: Option<&str>, path: Option<&str>, commit: Option<&str>| {
            migrated.execute(
                "INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action, class,
               routed_to, question, options, recommendation, approval_choice, blocking, project,
               spec_path, spec_commit, at)
             VALUES (?1, 'acme', 'r1', 'run-1', 'prd.approve', 'gated', 'r0', 'Cite?',
               '[{\"key\":\"yes\",\"text\":\"Yes\"}]', 'yes', 'yes', 0, ?2, ?3, ?4, ?5)",
                rusqlite::params![id, project, path, commit, at],
            )
        };
    let sha = "0123456789abcdef0123456789abcdef01234567";
    for (project, path, commit, why) in [
        (
            Some("site"),
            Some("spec/north-star.md"),
            None,
            "invalid-spec-citation",
        ),
        (Some("site"), None, Some(sha), "invalid-spec-citation"),
        (
            None,
            Some("spec/north-star.md"),
            Some(sha),
            "invalid-spec-citation",
        ),
        (Some("site"), Some("docs/plan.md"), Some(sha), "CHECK"),
        (
            Some("site"),
            Some("spec/north-star.md"),
            Some("0123456"),
            "CHECK",
        ),
        (
            Some("site"),
            Some("spec/north-star.md"),
            Some(&sha.to_uppercase()),
            "CHECK",
        ),
    ] {
        let err = insert("d-bad", "2026-11-02T10:00:00.000Z", project, path, commit)
            .expect_err("refused");
        assert!(err.to_string().contains(why), "{why}: {err}");
    }
    insert(
        "d-3",
        "2026-11-02T10:00:00.000Z",
        Some("site"),
        Some("spec/north-star.md"),
        Some(sha),
    )
    .expect("a whole citation");
    drop(migrated);
    // The broker opens the migrated store.
    let bus = BusDir::acquire(root.path()).expect("lock");
    Store::open(&bus.db_path()).expect("the broker opens the migrated store");
    bus.release_lock();
}

/// 3f → 3g (3i rows 140, 141): a populated 3f store gains `instance_names`
/// (empty, append-only, one holder per name) and `messages.to_name` (null
/// on every message), and its class guard admits STAFF-REQUEST; every row
/// is kept and the schema matches a new store's.
#[test]
fn a_populated_3f_store_migrates_to_3g_with_null_names_and_keeps_every_row() {
    let root = data_root();
    store_populated(root.path(), "3f");
    let before = rows_3e(root.path());
    counters_at_their_rows(root.path());
    this_broker_refuses(root.path());
    assert_eq!(rows_3e(root.path()), before);
    // The 3f store refuses a staff request's class.
    let staff = "INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
                 VALUES ('m-s', 'acme', 'r1', 'run-1', 'r0', 'STAFF-REQUEST', 'staff', ?1)";
    let err = db(root.path())
        .execute(staff, ["2026-11-03T10:00:00.000Z"])
        .expect_err("3f has no STAFF-REQUEST");
    assert!(err.to_string().contains("invalid-class"), "{err}");

    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The backup before the first step holds the store as it was.
    let (backup, r) = r.backed_up(root.path(), "3f");
    assert_eq!(rows_3e(&backup), before);
    let lines = r.json_lines();
    assert_eq!(
        lines,
        [
            json!({"step": "3f-to-3g", "from": "3f", "to": "3g"}),
            json!({"step": "3g-to-3h", "from": "3g", "to": "3h"}),
            json!({"step": "3h-to-3i", "from": "3h", "to": "3i"}),
            json!({"ok": true, "from": "3f", "to": "3i",
                   "steps": ["3f-to-3g", "3g-to-3h", "3h-to-3i"]}),
        ]
    );
    let migrated = same_schema_as_a_new_store(root.path());
    assert_eq!(
        master_digest(&migrated).expect("digest"),
        schema::CURRENT.master
    );
    assert_eq!(rows_3e(root.path()), before);
    let names: Vec<(String, Option<String>)> = migrated
        .prepare("SELECT id, to_name FROM messages ORDER BY seq")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(names, [("m-1".into(), None), ("m-2".into(), None)]);
    let held: i64 = migrated
        .query_row("SELECT count(*) FROM instance_names", [], |r| r.get(0))
        .expect("count");
    assert_eq!(held, 0);
    // The new class, and the names' guards.
    migrated
        .execute(staff, ["2026-11-03T10:00:00.000Z"])
        .expect("STAFF-REQUEST is a class now");
    let name = |instance: &str, name: &str, at: &str| {
        migrated.execute(
            "INSERT INTO instance_names(business, instance, name, by_role, by_run, at)
             VALUES ('acme', ?1, ?2, 'human', 'human-cli', ?3)",
            [instance, name, at],
        )
    };
    name("r1", "lead", "2026-11-03T10:00:01.000Z").expect("a name");
    let err = name("r0", "lead", "2026-11-03T10:00:02.000Z").expect_err("held");
    assert!(err.to_string().contains("name-taken"), "{err}");
    name("r1", "chief", "2026-11-03T10:00:03.000Z").expect("renamed");
    name("r0", "lead", "2026-11-03T10:00:04.000Z").expect("free again");
    for sql in [
        "UPDATE instance_names SET name = 'x'",
        "DELETE FROM instance_names",
    ] {
        let err = migrated.execute(sql, []).expect_err("append-only");
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    drop(migrated);
    let bus = BusDir::acquire(root.path()).expect("lock");
    Store::open(&bus.db_path()).expect("the broker opens the migrated store");
    bus.release_lock();
}

/// 3g → 3h (3i row 124): a populated 3g store (names, a message sent by
/// name) gains the empty, append-only `usage_records`; every row is kept
/// and the schema after 3h → 3i matches a new store's.
#[test]
fn a_populated_3g_store_migrates_through_3h_to_3i_and_keeps_every_row() {
    let root = data_root();
    store_populated(root.path(), "3g");
    db(root.path())
        .execute_batch(
            "INSERT INTO instance_names(business, instance, name, by_role, by_run, at) VALUES
               ('acme', 'r1', 'lead', 'human', 'human-cli', '2026-11-01T10:00:05.000Z');
             INSERT INTO messages(id, business, from_role, from_run, to_role, to_name, class,
               body, at) VALUES ('m-3', 'acme', 'r0', 'run-0', 'r1', 'lead', 'STAFF-REQUEST',
               'two devs', '2026-11-01T10:00:05.001Z');",
        )
        .expect("3g evidence");
    let before = rows_3e(root.path());
    counters_at_their_rows(root.path());
    this_broker_refuses(root.path());
    assert_eq!(rows_3e(root.path()), before, "the refusal changed nothing");

    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The backup before the first step holds the store as it was.
    let (backup, r) = r.backed_up(root.path(), "3g");
    assert_eq!(rows_3e(&backup), before);
    let lines = r.json_lines();
    assert_eq!(
        lines,
        [
            json!({"step": "3g-to-3h", "from": "3g", "to": "3h"}),
            json!({"step": "3h-to-3i", "from": "3h", "to": "3i"}),
            json!({"ok": true, "from": "3g", "to": "3i", "steps": ["3g-to-3h", "3h-to-3i"]}),
        ]
    );
    let migrated = same_schema_as_a_new_store(root.path());
    // Every row as it was (rows_3e lists every table; usage_records is empty
    // and has no counter yet).
    assert_eq!(rows_3e(root.path()), before);
    assert_eq!(usage_rows(&migrated), (Vec::new(), None));
    drop(migrated);
    let bus = BusDir::acquire(root.path()).expect("lock");
    Store::open(&bus.db_path()).expect("the broker opens the migrated store");
    bus.release_lock();
}

/// 3h → 3i (3i row 126, L289; issue 34): usage records written at 3h come
/// through the rebuild with their `seq` and every column; the table keeps
/// no counter and the next record follows the last one; the account may
/// then be set; nothing of the old table is left.
#[test]
fn usage_records_made_at_3h_keep_their_seq_through_3i_and_the_next_follows_the_last() {
    let root = data_root();
    store_3h_with_usage(root.path());
    let before = rows_3e(root.path());
    counters_at_their_rows(root.path());
    let usage_before = usage_rows(&db(root.path()));
    assert_eq!(usage_before.0.len(), 4);
    assert_eq!(usage_before.1, Some(18));
    this_broker_refuses(root.path());

    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The backup before the first step holds the store as it was.
    let (backup, r) = r.backed_up(root.path(), "3h");
    assert_eq!(rows_3e(&backup), before);
    assert_eq!(
        r.stdout,
        format!(
            "{}\n{}\n",
            json!({"step": "3h-to-3i", "from": "3h", "to": "3i"}),
            json!({"ok": true, "from": "3h", "to": "3i", "steps": ["3h-to-3i"]})
        )
    );
    let migrated = same_schema_as_a_new_store(root.path());
    assert_eq!(
        master_digest(&migrated).expect("digest"),
        schema::CURRENT.master
    );
    // Every row of every table (usage_records' too, seq first) as before,
    // no counter left; no usage_records_3h or _3i table anywhere.
    assert_eq!(rows_3e(root.path()), before);
    assert_eq!(usage_rows(&migrated), (usage_before.0.clone(), None));
    let seqs: Vec<i64> = migrated
        .prepare("SELECT seq FROM usage_records ORDER BY seq")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(|r| r.expect("seq"))
        .collect();
    assert_eq!(seqs, [1, 2, 17, 18]);
    let accounts: i64 = migrated
        .query_row(
            "SELECT count(*) FROM usage_records WHERE account IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(accounts, 0, "3h records keep a null account");
    let leftovers: i64 = migrated
        .query_row(
            "SELECT (SELECT count(*) FROM sqlite_master WHERE name LIKE '%\\_3h%' ESCAPE '\\'
                     OR name LIKE '%\\_3i%' ESCAPE '\\')
                  + (SELECT count(*) FROM sqlite_sequence)",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(leftovers, 0);
    // The next record follows the last one and may carry an account of 1
    // to 256 characters.
    let insert = |account: &str, at: &str| {
        migrated.execute(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, code, account, at)
             VALUES ('acme', 'run-0', 'r0', 'm-2', 'pi', 'unknown', 'usage-source-absent', ?1, ?2)",
            [account, at],
        )
    };
    let long = "a".repeat(257);
    for bad in ["", long.as_str()] {
        let err = insert(bad, "2026-11-02T10:00:00.000Z").expect_err("bad account");
        assert!(err.to_string().contains("CHECK"), "{err}");
    }
    insert("work", "2026-11-02T10:00:00.000Z").expect("an account");
    let (seq, account): (i64, String) = migrated
        .query_row(
            "SELECT seq, account FROM usage_records ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("last");
    assert_eq!((seq, account.as_str()), (19, "work"));
    // The guards came back, and the unique indexes still stop a second outcome.
    for sql in [
        "UPDATE usage_records SET account = 'x'",
        "DELETE FROM usage_records",
        "INSERT OR REPLACE INTO usage_records SELECT * FROM usage_records WHERE seq = 1",
    ] {
        let err = migrated.execute(sql, []).expect_err("append-only");
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    let err = migrated
        .execute(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, code, at)
             VALUES ('acme', 'run-0', 'r0', 'm-1', 'claude-code', 'unknown', 'x',
               '2026-11-02T10:00:01.000Z')",
            [],
        )
        .expect_err("a second outcome");
    assert!(err.to_string().contains("UNIQUE"), "{err}");
    drop(migrated);
    let bus = BusDir::acquire(root.path()).expect("lock");
    Store::open(&bus.db_path()).expect("the broker opens the migrated store");
    bus.release_lock();
}
