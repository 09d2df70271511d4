//! Shared setup of the migrator's tests (`before_any_step.rs`, `upgrades.rs`, `steps.rs`): the business the stores serve, a store the broker made, stores at old versions made from the pinned fixtures, `mosaic-migrate` run as a child, and readers of a store's rows, counters and schema.
#![allow(dead_code)]

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::schema::{self, master_digest};
use mosaic_bus::store::Store;
use mosaic_bus::Code;
use mosaic_migrate::lineage;
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// The business these stores serve: r1 sends to r0; r0 may end a role
/// with a reason (`role.end`).
pub fn config(root: &Path) -> BootConfig {
    BootConfig::from_json(json!({
        "dataRoot": root.to_str().expect("utf-8 path"),
        "businesses": {"acme": {"id": "acme", "human": "Ada",
            "arbiters": {"technical": "r0", "delivery": "r0"},
            "roles": {
                "r0": {"authority": {"withinRole": ["message.send", "role.end"], "crossRole": []}},
                "r1": {"authority": {"withinRole": ["message.send"], "crossRole": []}}
            }}},
    }))
    .expect("config")
}

/// A store the broker made, holding evidence: a claim, two messages and
/// their `action.allowed` events. The lock is given back, as after a stop.
pub fn broker_store(root: &Path) {
    let bus = BusDir::acquire(root).expect("lock");
    let store = Store::open(&bus.db_path()).expect("store");
    let mut core = Core::new(store, Arc::new(config(root)));
    let caller = Caller::Role {
        business: "acme".into(),
        role: "r1".into(),
        run: "run-1".into(),
    };
    dispatch(&mut core, &caller, "role.claim", None).expect("claim");
    for body in ["one", "two"] {
        let args = json!({"to": "r0", "body": body});
        let Value::Object(args) = args else {
            unreachable!()
        };
        dispatch(&mut core, &caller, "message.send", Some(args)).expect("send");
    }
    drop(core);
    bus.release_lock();
}

/// Every row `sql` selects, its columns debug-printed and joined by ` | `.
pub fn dump(c: &Connection, sql: &str) -> Vec<String> {
    let mut s = c.prepare(sql).expect("prepare");
    let n = s.column_count();
    let mut q = s.query([]).expect("query");
    let mut rows = Vec::new();
    while let Some(r) = q.next().expect("row") {
        let v: Vec<String> = (0..n)
            .map(|i| format!("{:?}", r.get_ref(i).expect("col")))
            .collect();
        rows.push(v.join(" | "));
    }
    rows
}

pub fn db(root: &Path) -> Connection {
    Connection::open(root.join("bus/bus.sqlite")).expect("open")
}

/// Everything a store holds that a migration must keep: the schema digest
/// and every evidence row, in order.
pub fn contents(root: &Path) -> (String, Vec<String>) {
    let c = db(root);
    let mut rows = Vec::new();
    for t in schema::EVIDENCE_TABLES.iter().chain(&["meta"]) {
        rows.extend(
            dump(&c, &format!("SELECT * FROM {t} ORDER BY rowid"))
                .into_iter()
                .map(|row| format!("{t}: {row}")),
        );
    }
    (master_digest(&c).expect("digest"), rows)
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The backup line a migration prints before its first step: checks
    /// the copy is a private data root named for the version `from` inside
    /// `root`, and returns its path and the run without that line.
    pub fn backed_up(&self, root: &Path, from: &str) -> (std::path::PathBuf, Run) {
        let (first, rest) = self.stdout.split_once('\n').expect("a first line");
        let line: Value = serde_json::from_str(first).expect("JSON");
        let path = std::path::PathBuf::from(line["backup"].as_str().expect("a backup line"));
        assert_eq!(path.parent(), Some(root), "{first}");
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(name.starts_with(&format!("backup-{from}-")), "{name}");
        for (p, mode) in [
            (path.clone(), 0o700),
            (path.join("bus"), 0o700),
            (path.join("bus/bus.sqlite"), 0o600),
        ] {
            let md = std::fs::symlink_metadata(&p).expect("backup file");
            assert_eq!(
                std::os::unix::fs::PermissionsExt::mode(&md.permissions()) & 0o777,
                mode,
                "{p:?}"
            );
        }
        let rest = Run {
            code: self.code,
            stdout: rest.to_string(),
            stderr: self.stderr.clone(),
        };
        (path, rest)
    }

    /// Each stdout line as JSON.
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    }
}

pub fn cli(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-migrate"))
        .args(args)
        .output()
        .expect("run mosaic-migrate");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// This build's broker refuses to open the store at `root`
/// (`schema-version`); the lock it took is given back.
pub fn this_broker_refuses(root: &Path) {
    let bus = BusDir::acquire(root).expect("lock");
    assert_eq!(Store::open(&bus.db_path()).err(), Some(Code::SchemaVersion));
    bus.release_lock();
}

pub fn refused(r: &Run, code: &str) {
    assert_eq!(r.code, 2, "stdout {} stderr {}", r.stdout, r.stderr);
    assert_eq!(r.stderr.trim(), json!({"error": code}).to_string());
    assert_eq!(r.stdout, "");
}

pub fn path(root: &tempfile::TempDir) -> &str {
    root.path().to_str().expect("utf-8 path")
}

/// A store as a 3b broker left it: the pinned 3b schema and its metadata,
/// with a claim, an event and a message in it.
pub fn store_3b(root: &Path) {
    let bus = BusDir::acquire(root).expect("lock");
    let c = Connection::open(bus.db_path()).expect("open");
    let pin = &lineage::VERSIONS[0];
    assert_eq!(pin.version, "3b");
    c.execute_batch("PRAGMA journal_mode = WAL;").expect("wal");
    c.execute_batch(pin.sql).expect("3b schema");
    c.execute(
        "INSERT INTO meta(key, value) VALUES ('schema_version', '3b'), ('schema_sha256', ?1)",
        [pin.sha256],
    )
    .expect("meta");
    c.execute_batch(
        "INSERT INTO role_claims(business, role, run, op, decision, by, at)
           VALUES ('acme', 'r1', 'run-old', 'claim', NULL, 'run-old', '2026-11-01T10:00:00.000Z');
         INSERT INTO events(id, business, kind, role, run, subject, body, at)
           VALUES ('ev-1', 'acme', 'action.allowed', 'r1', 'run-old', 'r0',
                   '{\"action\":\"message.send\"}', '2026-11-01T10:00:01.000Z');
         INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, at)
           VALUES ('m-1', 'acme', 'r1', 'run-old', 'r0', 'INFO', 'hello', '2026-11-01T10:00:01.001Z');",
    )
    .expect("3b evidence");
    drop(c);
    hand_over(bus, root);
}

/// Leaves a store made by hand as the broker leaves its files (0600,
/// whatever SQLite made the WAL and shared-memory files) and lets go of its
/// lock, so that `mosaic-migrate` may take it.
pub fn hand_over(bus: BusDir, root: &Path) {
    for f in ["bus.sqlite", "bus.sqlite-wal", "bus.sqlite-shm"] {
        let _ = std::fs::set_permissions(
            root.join("bus").join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        );
    }
    bus.release_lock();
}

/// The rows of every table the 3b store had, by the 3b columns.
pub fn rows_3b(root: &Path) -> Vec<String> {
    let c = db(root);
    let mut out = Vec::new();
    for (t, cols) in [
        ("events", "*"),
        ("messages", MESSAGE_COLUMNS_3F),
        (
            "role_claims",
            "seq, business, role, run, op, decision, by, at",
        ),
        ("decisions", "*"),
        ("deliveries", "*"),
    ] {
        out.extend(
            dump(&c, &format!("SELECT {cols} FROM {t} ORDER BY rowid"))
                .into_iter()
                .map(|row| format!("{t}: {row}")),
        );
    }
    out
}

/// The columns `messages` had before 3g added `to_name`.
pub const MESSAGE_COLUMNS_3F: &str =
    "seq, id, business, from_role, from_run, to_role, class, body, \
     in_reply_to, corrects, decision, request, at";

/// Every `sqlite_sequence` counter: `(table, counter)`.
pub fn counters(c: &Connection) -> Vec<(String, i64)> {
    c.prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
}

/// The full `sqlite_master` of a store, row by row.
pub fn master_rows(c: &Connection) -> Vec<(String, String, String, Option<String>)> {
    let mut s = c
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        .expect("prepare");
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
}

/// A store at `version` (3e or later) made from its pinned fixture, with
/// the 3e era's evidence in it.
pub fn store_populated(root: &Path, version: &str) {
    let bus = BusDir::acquire(root).expect("lock");
    let c = Connection::open(bus.db_path()).expect("open");
    let pin = lineage::VERSIONS
        .iter()
        .find(|p| p.version == version)
        .expect("a pinned version");
    c.execute_batch("PRAGMA journal_mode = WAL;").expect("wal");
    c.execute_batch(pin.sql).expect("schema");
    c.execute(
        "INSERT INTO meta(key, value) VALUES ('schema_version', ?2), ('schema_sha256', ?1),
           ('comment_cursor_epoch', '2026-11-01T09:00:00.000Z')",
        [pin.sha256, version],
    )
    .expect("meta");
    c.execute_batch(
        "INSERT INTO role_claims(business, role, run, op, by, at) VALUES
           ('acme', 'r1', 'run-1', 'claim', 'run-1', '2026-11-01T10:00:00.000Z'),
           ('acme', 'r0', 'run-0', 'claim', 'run-0', '2026-11-01T10:00:00.001Z');
         INSERT INTO projects(id, business, name, repo, by, at) VALUES
           ('p-1', 'acme', 'site', '/srv/records/site', 'Ada', '2026-11-01T10:00:00.500Z');
         INSERT INTO threads(id, business, project, instance, user, name, at) VALUES
           ('t-1', 'acme', 'p-1', 'assistant', 'Ada', 'launch plan', '2026-11-01T10:00:00.600Z');
         INSERT INTO thread_opens(thread, by, at) VALUES ('t-1', 'Ada', '2026-11-01T10:00:00.700Z');
         INSERT INTO thread_claims(business, thread, run, op, by, at) VALUES
           ('acme', 't-1', 'run-a', 'claim', 'run-a', '2026-11-01T10:00:00.800Z');
         INSERT INTO events(id, business, kind, role, run, subject, body, at) VALUES
           ('ev-1', 'acme', 'action.allowed', 'r1', 'run-1', 'r0',
            '{\"action\":\"message.send\"}', '2026-11-01T10:00:01.000Z');
         INSERT INTO decisions(id, business, raised_by_role, raised_by_run, action, target,
           class, routed_to, question, options, recommendation, approval_choice, blocking,
           project, at)
         VALUES ('d-1', 'acme', 'r1', 'run-1', 'prd.approve', NULL, 'gated', 'human', 'Ship?',
           '[{\"key\":\"yes\",\"text\":\"Yes\"},{\"key\":\"no\",\"text\":\"No\"}]',
           'yes', 'yes', 0, 'site', '2026-11-01T10:00:02.000Z'),
           ('d-2', 'acme', 'r0', 'run-0', 'policy.change', NULL, 'gated', 'human', 'Tighten?',
           '[{\"key\":\"yes\",\"text\":\"Yes\"},{\"key\":\"no\",\"text\":\"No\"}]',
           'no', 'yes', 0, NULL, '2026-11-01T10:00:02.001Z');
         INSERT INTO decision_events(decision, kind, by, choice, at)
           VALUES ('d-1', 'resolved', 'Ada', 'yes', '2026-11-01T10:00:02.002Z');
         INSERT INTO messages(id, business, from_role, from_run, to_role, class, body, request, at) VALUES
           ('m-1', 'acme', 'r1', 'run-1', 'r0', 'INFO', 'waiting one', NULL, '2026-11-01T10:00:03.000Z'),
           ('m-2', 'acme', 'human', 'human-cli', 'assistant', 'REQUEST', 'in the thread', NULL,
            '2026-11-01T10:00:03.001Z');
         INSERT INTO message_threads(message, thread, at) VALUES ('m-2', 't-1', '2026-11-01T10:00:03.002Z');
         INSERT INTO deliveries(message, run, at) VALUES ('m-2', 'run-a', '2026-11-01T10:00:04.000Z');",
    )
    .expect("3e evidence");
    drop(c);
    hand_over(bus, root);
}

/// The rows of `usage_records` (every column, `seq` first) and the table's
/// `sqlite_sequence` counter.
pub fn usage_rows(c: &Connection) -> (Vec<String>, Option<i64>) {
    let rows = dump(c, "SELECT * FROM usage_records ORDER BY seq");
    let counter = c
        .query_row(
            "SELECT max(seq) FROM sqlite_sequence WHERE name = 'usage_records'",
            [],
            |r| r.get(0),
        )
        .expect("counter");
    (rows, counter)
}

/// A populated 3h store with usage records a 3h broker wrote (account
/// null): a turn with a baseline and its known outcome, an unknown one
/// written with its seq (17) and a pending baseline after it.
pub fn store_3h_with_usage(root: &Path) {
    store_populated(root, "3h");
    let c = db(root);
    c.execute_batch(
        "INSERT INTO usage_records(business, run, role, turn, source, kind, baseline, at) VALUES
           ('acme', 'run-0', 'r0', 'm-1', 'claude-code', 'baseline',
            '{\"file\":\"9f86d0\",\"bytes\":10}', '2026-11-01T10:00:05.000Z');
         INSERT INTO usage_records(business, run, role, turn, source, kind, provider, model,
           input, output, cache_write, cache_read, at) VALUES
           ('acme', 'run-0', 'r0', 'm-1', 'claude-code', 'known', 'anthropic', 'claude-opus',
            9007199254740993, 9223372036854775807, 3, 4, '2026-11-01T10:00:05.001Z');
         INSERT INTO usage_records(seq, business, run, role, turn, source, kind, code, at) VALUES
           (17, 'acme', 'run-a', 'assistant', 'm-2', 'claude-code', 'unknown',
            'usage-parse-failed', '2026-11-01T10:00:05.002Z');
         INSERT INTO usage_records(business, run, role, turn, source, kind, baseline, at) VALUES
           ('acme', 'run-a', 'assistant', 'm-1', 'pi', 'baseline', '{\"bytes\":0}',
            '2026-11-01T10:00:05.003Z');",
    )
    .expect("3h usage records");
    // 3h reserves the account: a record can't carry one yet.
    let err = c
        .execute(
            "INSERT INTO usage_records(business, run, role, turn, source, kind, code, account, at)
             VALUES ('acme', 'run-0', 'r0', 'm-2', 'pi', 'unknown', 'x', 'work',
               '2026-11-01T10:00:06.000Z')",
            [],
        )
        .expect_err("account is reserved at 3h");
    assert!(err.to_string().contains("CHECK"), "{err}");
}
