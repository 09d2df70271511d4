//! `mosaic-migrate` on real stores: the command line against stores the
//! broker made and stores made from the pinned fixtures (3b, 3d…3h, each
//! taken to 3i), and the step runner against a synthetic lineage and
//! against the shipped 3h→3i step made to fail, all on real SQLite files
//! under the real writer lock.

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::schema::{self, master_digest, sha256_hex, Pin};
use mosaic_bus::store::Store;
use mosaic_bus::Code;
use mosaic_migrate::steps::Step;
use mosaic_migrate::{lineage, migrate, steps, Report};
use mosaic_tests::data_root;
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// The business these stores serve: r1 sends to r0; r0 may end a role
/// with a reason (`role.end`).
fn config(root: &Path) -> BootConfig {
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
fn broker_store(root: &Path) {
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
fn dump(c: &Connection, sql: &str) -> Vec<String> {
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

fn db(root: &Path) -> Connection {
    Connection::open(root.join("bus/bus.sqlite")).expect("open")
}

/// Everything a store holds that a migration must keep: the schema digest
/// and every evidence row, in order.
fn contents(root: &Path) -> (String, Vec<String>) {
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

/// Runs a statement with one trigger lifted, then puts the trigger back
/// with its very text: what someone editing the file by hand could do.
fn behind_trigger(root: &Path, trigger: &str, sql: &str) {
    let c = db(root);
    let text: String = c
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = ?1",
            [trigger],
            |r| r.get(0),
        )
        .expect("trigger");
    c.execute_batch(&format!("DROP TRIGGER {trigger}; {sql}; {text};"))
        .expect("tamper");
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The backup line a migration prints before its first step: checks
    /// the copy is a private data root named for the version `from` inside
    /// `root`, and returns its path and the run without that line.
    fn backed_up(&self, root: &Path, from: &str) -> (std::path::PathBuf, Run) {
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
    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    }
}

fn cli(args: &[&str]) -> Run {
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
fn this_broker_refuses(root: &Path) {
    let bus = BusDir::acquire(root).expect("lock");
    assert_eq!(Store::open(&bus.db_path()).err(), Some(Code::SchemaVersion));
    bus.release_lock();
}

fn refused(r: &Run, code: &str) {
    assert_eq!(r.code, 2, "stdout {} stderr {}", r.stdout, r.stderr);
    assert_eq!(r.stderr.trim(), json!({"error": code}).to_string());
    assert_eq!(r.stdout, "");
}

fn path(root: &tempfile::TempDir) -> &str {
    root.path().to_str().expect("utf-8 path")
}

#[test]
fn a_current_store_is_checked_and_left_as_it_was() {
    let root = data_root();
    broker_store(root.path());
    let before = contents(root.path());
    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!(
            "{}\n",
            json!({"ok": true, "from": "3i", "to": "3i", "steps": []})
        )
    );
    assert_eq!(contents(root.path()), before);
    assert!(
        !root.path().join("bus/writer.lock").exists(),
        "the lock is given back"
    );
    // The broker still opens it.
    let bus = BusDir::acquire(root.path()).expect("lock again");
    Store::open(&bus.db_path()).expect("the broker opens the store");
    bus.release_lock();
}

#[test]
fn a_missing_store_refuses_and_nothing_is_created() {
    let root = data_root();
    refused(&cli(&[path(&root)]), "store-missing");
    assert!(
        !root.path().join("bus").exists(),
        "no bus/ made for a missing store"
    );
    // bus/ without a database is still no store.
    std::fs::create_dir(root.path().join("bus")).expect("mkdir");
    std::fs::set_permissions(
        root.path().join("bus"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    refused(&cli(&[path(&root)]), "store-missing");
    assert!(!root.path().join("bus/bus.sqlite").exists());
    assert!(!root.path().join("bus/writer.lock").exists());
}

#[test]
fn the_command_line_takes_exactly_one_absolute_data_root() {
    refused(&cli(&[]), "usage");
    refused(&cli(&["/tmp", "/tmp"]), "usage");
    // An unknown option is one line naming it and --help.
    let force = cli(&["--force", "/tmp"]);
    assert_eq!(force.code, 2);
    assert_eq!(
        force.stderr,
        "mosaic-migrate: unknown option \"--force\"; see mosaic-migrate --help\n"
    );
    refused(&cli(&["relative/root"]), "data-root");
    refused(&cli(&["/nonexistent/mosaic-root"]), "data-root");
    let help = cli(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.starts_with("mosaic-migrate /absolute/dataRoot"));
}

/// Issue 30 item 10: the migration takes its own backup before its first
/// step, with the broker's online-backup code: beside the store by default
/// (the 3b test above and the others), in `--backup DIR` when told, none
/// with `--no-backup`; a backup it can't make refuses before any step.
#[test]
fn the_backup_goes_where_told_or_nowhere_on_purpose_and_a_bad_place_refuses_first() {
    // --backup DIR: there, named for the version it was at.
    let root = data_root();
    store_3b(root.path());
    let before = rows_3b(root.path());
    let dir = data_root();
    let r = cli(&[path(&root), "--backup", path(&dir)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (backup, rest) = r.backed_up(dir.path(), "3b");
    assert_eq!(rows_3b(&backup), before);
    let version: String = db(&backup)
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .expect("version");
    assert_eq!(version, "3b", "the backup is the store before the steps");
    assert_eq!(rest.json_lines().last().expect("ready")["ok"], json!(true));
    let names: Vec<String> = std::fs::read_dir(backup.join("bus"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["bus.sqlite"], "one private file, no WAL left");
    assert!(!std::fs::read_dir(root.path()).expect("list").any(|e| e
        .expect("entry")
        .file_name()
        .to_string_lossy()
        .starts_with("backup-")));

    // --no-backup: none anywhere, and the first line is the first step's.
    let root = data_root();
    store_3b(root.path());
    let r = cli(&["--no-backup", path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json_lines()[0]["step"], json!("3b-to-3c"));
    let entries: Vec<String> = std::fs::read_dir(root.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["bus"]);

    // A --backup that is no directory refuses before any step.
    let root = data_root();
    store_3b(root.path());
    let before = rows_3b(root.path());
    for bad in ["/nonexistent/backups", "/dev/null"] {
        refused(&cli(&[path(&root), "--backup", bad]), "backup-destination");
        assert_eq!(rows_3b(root.path()), before);
        this_broker_refuses(root.path());
    }
    // One or the other, once, with its value.
    refused(&cli(&[path(&root), "--backup"]), "usage");
    refused(
        &cli(&[path(&root), "--no-backup", "--backup", "/tmp"]),
        "usage",
    );
    refused(&cli(&[path(&root), "--no-backup", "--no-backup"]), "usage");
    refused(
        &cli(&[path(&root), "--backup", "/tmp", "--backup", "/tmp"]),
        "usage",
    );
    assert_eq!(rows_3b(root.path()), before);
}

#[test]
fn a_held_writer_lock_refuses_and_is_left_in_place() {
    let root = data_root();
    broker_store(root.path());
    let lock = root.path().join("bus/writer.lock");
    std::fs::write(&lock, "4242\n").expect("lock");
    std::fs::set_permissions(&lock, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    refused(&cli(&[path(&root)]), "writer-locked");
    assert_eq!(std::fs::read_to_string(&lock).expect("lock"), "4242\n");
}

#[test]
fn a_damaged_current_store_refuses_instead_of_passing_as_current() {
    // A row forged behind a lifted timestamp trigger.
    let root = data_root();
    broker_store(root.path());
    behind_trigger(
        root.path(),
        "events_at",
        "INSERT INTO events(id, business, kind, body, at) \
         VALUES ('forged', 'acme', 'note.made', '{}', '2000-01-01T00:00:00.000Z')",
    );
    refused(&cli(&[path(&root)]), "timestamp");
    assert!(!root.path().join("bus/writer.lock").exists());

    // A version nobody pinned.
    let root = data_root();
    broker_store(root.path());
    behind_trigger(
        root.path(),
        "meta_no_update",
        "UPDATE meta SET value = '3z' WHERE key = 'schema_version'",
    );
    refused(&cli(&[path(&root)]), "schema-version");

    // The schema changed by hand.
    let root = data_root();
    broker_store(root.path());
    db(root.path())
        .execute_batch("CREATE INDEX extra ON messages(body)")
        .expect("index");
    let before = contents(root.path());
    refused(&cli(&[path(&root)]), "schema-digest");
    assert_eq!(contents(root.path()), before, "a refusal changes nothing");

    // Not a bus database at all.
    let root = data_root();
    let bus = BusDir::acquire(root.path()).expect("lock");
    let c = Connection::open(bus.db_path()).expect("open");
    c.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE notes (x);")
        .expect("other db");
    drop(c);
    for f in ["bus.sqlite", "bus.sqlite-wal", "bus.sqlite-shm"] {
        let _ = std::fs::set_permissions(
            root.path().join("bus").join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        );
    }
    bus.release_lock();
    refused(&cli(&[path(&root)]), "schema-metadata");
}

/// A store as a 3b broker left it: the pinned 3b schema and its metadata,
/// with a claim, an event and a message in it.
fn store_3b(root: &Path) {
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
    for f in ["bus.sqlite", "bus.sqlite-wal", "bus.sqlite-shm"] {
        let _ = std::fs::set_permissions(
            root.join("bus").join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        );
    }
    bus.release_lock();
}

/// The rows of every table the 3b store had, by the 3b columns.
fn rows_3b(root: &Path) -> Vec<String> {
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
    for f in ["bus.sqlite", "bus.sqlite-wal", "bus.sqlite-shm"] {
        let _ = std::fs::set_permissions(
            root.join("bus").join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        );
    }
    bus.release_lock();
}

/// The columns `messages` had before 3g added `to_name`.
const MESSAGE_COLUMNS_3F: &str = "seq, id, business, from_role, from_run, to_role, class, body, \
     in_reply_to, corrects, decision, request, at";

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

/// Every `sqlite_sequence` counter: `(table, counter)`.
fn counters(c: &Connection) -> Vec<(String, i64)> {
    c.prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
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

/// The full `sqlite_master` of a store, row by row.
fn master_rows(c: &Connection) -> Vec<(String, String, String, Option<String>)> {
    let mut s = c
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        .expect("prepare");
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
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

/// A store at `version` (3e or later) made from its pinned fixture, with
/// the 3e era's evidence in it.
fn store_populated(root: &Path, version: &str) {
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
    for f in ["bus.sqlite", "bus.sqlite-wal", "bus.sqlite-shm"] {
        let _ = std::fs::set_permissions(
            root.join("bus").join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        );
    }
    bus.release_lock();
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

/// The rows of `usage_records` (every column, `seq` first) and the table's
/// `sqlite_sequence` counter.
fn usage_rows(c: &Connection) -> (Vec<String>, Option<i64>) {
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
fn store_3h_with_usage(root: &Path) {
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

/// 3h → 3i (issue 34): a table whose `sqlite_sequence` counter is ahead of
/// its rows handed out a `seq` whose row is gone; without AUTOINCREMENT
/// that `seq` could be handed out again, so the step refuses
/// (`migration-step`) and the store stays at 3h exactly as it was, counter
/// and all. Any table: `usage_records`, then `messages`.
#[test]
fn a_counter_ahead_of_its_rows_refuses_3i_and_leaves_the_store_at_3h() {
    for table in ["usage_records", "messages"] {
        let root = data_root();
        store_3h_with_usage(root.path());
        db(root.path())
            .execute(
                "UPDATE sqlite_sequence SET seq = seq + 22 WHERE name = ?1",
                [table],
            )
            .expect("counter");
        let before = contents(root.path());
        let counters_before = counters(&db(root.path()));
        let r = cli(&[path(&root)]);
        assert_eq!(r.code, 2, "{table}: {}", r.stdout);
        assert_eq!(
            r.stderr.trim(),
            json!({"error": "migration-step"}).to_string()
        );
        // Only the backup the migrator made before the step.
        let lines = r.json_lines();
        assert_eq!(lines.len(), 1, "{}", r.stdout);
        assert!(lines[0]["backup"].is_string(), "{}", r.stdout);
        assert_eq!(version_of(root.path()), "3h", "{table}");
        assert_eq!(contents(root.path()), before, "{table}");
        assert_eq!(counters(&db(root.path())), counters_before, "{table}");
        assert!(!root.path().join("bus/writer.lock").exists());
    }
}

/// The shipped 3h → 3i step, then a failure inside the same transaction.
fn rebuild_then_fail(c: &Connection) -> rusqlite::Result<Vec<String>> {
    let step = steps::STEPS
        .iter()
        .find(|s| s.name == "3h-to-3i")
        .expect("the shipped step");
    (step.apply)(c)?;
    Err(rusqlite::Error::QueryReturnedNoRows)
}

/// A 3h → 3i that fails, after its rebuild or at its final pin check,
/// leaves the store exactly at 3h: the old table, its rows, counter,
/// indexes and guards; a rerun of the shipped step then completes.
#[test]
fn a_failing_3h_to_3i_leaves_the_store_at_3h() {
    let root = data_root();
    store_3h_with_usage(root.path());
    let before = contents(root.path());
    let usage_before = usage_rows(&db(root.path()));
    let master_before = master_rows(&db(root.path()));
    let versions = lineage::VERSIONS;
    let at_3h = versions.iter().position(|p| p.version == "3h").expect("3h");
    let shipped = steps::STEPS
        .iter()
        .find(|s| s.name == "3h-to-3i")
        .expect("the shipped step");
    // A target pin the rebuild can't match.
    let mut wrong = versions[at_3h + 1];
    wrong.master = "0000";
    let failing = Step {
        apply: rebuild_then_fail,
        ..*shipped
    };
    for (pins, step) in [
        (vec![versions[at_3h], wrong], *shipped),
        (vec![versions[at_3h], versions[at_3h + 1]], failing),
    ] {
        let r = migrate(root.path(), &pins, &[step], &mut |_| {});
        assert_eq!(r, Err(Code::MigrationStep));
        assert_eq!(version_of(root.path()), "3h");
        assert_eq!(contents(root.path()), before);
        assert_eq!(usage_rows(&db(root.path())), usage_before);
        assert_eq!(master_rows(&db(root.path())), master_before);
        assert!(!root.path().join("bus/writer.lock").exists());
    }
    let r = cli(&[path(&root)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(version_of(root.path()), "3i");
    assert_eq!(usage_rows(&db(root.path())), (usage_before.0, None));
}

#[test]
fn the_shipped_lineage_is_pinned_and_ends_where_the_broker_runs() {
    for pin in lineage::VERSIONS {
        assert_eq!(
            sha256_hex(pin.sql.as_bytes()),
            pin.sha256,
            "{}",
            pin.version
        );
        let c = Connection::open_in_memory().expect("memory");
        c.execute_batch(pin.sql).expect("fixture runs");
        assert_eq!(
            master_digest(&c).expect("digest"),
            pin.master,
            "{}",
            pin.version
        );
    }
    let last = lineage::VERSIONS.last().expect("a version");
    assert_eq!(last.version, schema::CURRENT.version);
    assert_eq!(last.sha256, schema::CURRENT.sha256);
    assert_eq!(last.master, schema::CURRENT.master);
    // One step between each pair of neighbours, and no other.
    assert_eq!(steps::STEPS.len(), lineage::VERSIONS.len() - 1);
    for pair in lineage::VERSIONS.windows(2) {
        let n = steps::STEPS
            .iter()
            .filter(|s| s.from == pair[0].version && s.to == pair[1].version)
            .count();
        assert_eq!(n, 1, "{} -> {}", pair[0].version, pair[1].version);
    }
}

// --- the step runner on a synthetic lineage --------------------------------

const ONE: &str = "CREATE TABLE extra_one (seq INTEGER PRIMARY KEY, note TEXT NOT NULL);";
const TWO: &str = "CREATE TABLE extra_two (seq INTEGER PRIMARY KEY, note TEXT NOT NULL);";

fn add_one(c: &Connection) -> rusqlite::Result<Vec<String>> {
    c.execute_batch(ONE)?;
    Ok(vec!["one line from the first step".into()])
}
fn add_two(c: &Connection) -> rusqlite::Result<Vec<String>> {
    c.execute_batch(TWO)?;
    Ok(Vec::new())
}
/// Fails half way: its first statement is undone with it.
fn add_two_then_fail(c: &Connection) -> rusqlite::Result<Vec<String>> {
    c.execute_batch(TWO)?;
    c.execute_batch("CREATE TABLE messages (x)")?;
    Ok(Vec::new())
}
/// Runs cleanly but makes a schema other than its target's.
fn add_two_wrongly(c: &Connection) -> rusqlite::Result<Vec<String>> {
    c.execute_batch("CREATE TABLE extra_two (seq INTEGER PRIMARY KEY, note TEXT);")?;
    Ok(Vec::new())
}

/// The schema texts and pins of two made-up versions after 3b.
struct Synthetic {
    sql: Vec<String>,
    sha: Vec<String>,
    master: Vec<String>,
}

impl Synthetic {
    fn new() -> Synthetic {
        let base = schema::CURRENT.sql.to_string();
        let sql = vec![
            base.clone(),
            format!("{base}\n{ONE}\n"),
            format!("{base}\n{ONE}\n{TWO}\n"),
        ];
        let sha = sql.iter().map(|s| sha256_hex(s.as_bytes())).collect();
        let master = sql
            .iter()
            .map(|s| {
                let c = Connection::open_in_memory().expect("memory");
                c.execute_batch(s).expect("schema");
                master_digest(&c).expect("digest")
            })
            .collect();
        Synthetic { sql, sha, master }
    }

    fn pins(&self) -> Vec<Pin<'_>> {
        ["3i", "3i-t1", "3i-t2"]
            .iter()
            .enumerate()
            .map(|(i, v)| Pin {
                version: v,
                sql: &self.sql[i],
                sha256: &self.sha[i],
                master: &self.master[i],
            })
            .collect()
    }
}

fn steps_with(second: fn(&Connection) -> rusqlite::Result<Vec<String>>) -> [Step; 2] {
    [
        Step {
            from: "3i",
            to: "3i-t1",
            name: "3i-to-t1",
            apply: add_one,
        },
        Step {
            from: "3i-t1",
            to: "3i-t2",
            name: "t1-to-t2",
            apply: second,
        },
    ]
}

/// Migrates along the synthetic lineage; returns the outcome and the lines printed.
fn run_synthetic(
    root: &Path,
    syn: &Synthetic,
    second: fn(&Connection) -> rusqlite::Result<Vec<String>>,
) -> (Result<Report, Code>, Vec<String>) {
    let mut lines = Vec::new();
    let r = migrate(root, &syn.pins(), &steps_with(second), &mut |l: &str| {
        lines.push(l.to_string())
    });
    (r, lines)
}

fn version_of(root: &Path) -> String {
    db(root)
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .expect("version")
}

fn has_table(root: &Path, name: &str) -> bool {
    db(root)
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get::<_, i64>(0),
        )
        .expect("count")
        == 1
}

#[test]
fn steps_run_in_order_each_proving_its_target_and_keeping_every_row() {
    let root = data_root();
    broker_store(root.path());
    let (_, rows_before) = contents(root.path());
    let syn = Synthetic::new();
    let (report, lines) = run_synthetic(root.path(), &syn, add_two);
    let report = report.expect("migrates");
    assert_eq!(report.from, "3i");
    assert_eq!(report.to, "3i-t2");
    assert_eq!(report.steps, ["3i-to-t1", "t1-to-t2"]);
    assert_eq!(
        lines,
        [
            "one line from the first step".to_string(),
            json!({"step": "3i-to-t1", "from": "3i", "to": "3i-t1"}).to_string(),
            json!({"step": "t1-to-t2", "from": "3i-t1", "to": "3i-t2"}).to_string(),
        ]
    );
    let (digest, rows) = contents(root.path());
    assert_eq!(digest, syn.master[2]);
    assert_eq!(version_of(root.path()), "3i-t2");
    // Every evidence row is still there; meta changed only its version and digest.
    let evidence = |rs: &[String]| -> Vec<String> {
        rs.iter()
            .filter(|r| !r.starts_with("meta:"))
            .cloned()
            .collect()
    };
    assert_eq!(evidence(&rows), evidence(&rows_before));
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("meta:")).count(),
        rows_before
            .iter()
            .filter(|r| r.starts_with("meta:"))
            .count()
    );
    // The metadata guard is back.
    let err = db(root.path())
        .execute(
            "UPDATE meta SET value = 'x' WHERE key = 'schema_version'",
            [],
        )
        .expect_err("meta is guarded again");
    assert!(err.to_string().contains("append-only"), "{err}");
    // This build's broker does not run the newer store.
    this_broker_refuses(root.path());
    // Rerunning at the newest version is a checked no-op.
    let again =
        migrate(root.path(), &syn.pins(), &steps_with(add_two), &mut |_| {}).expect("no-op");
    assert!(again.steps.is_empty());
    assert_eq!(again.from, "3i-t2");
}

#[test]
fn a_failing_step_rolls_back_alone_and_a_rerun_resumes_after_the_last_good_one() {
    let root = data_root();
    broker_store(root.path());
    let syn = Synthetic::new();
    for broken in [add_two_then_fail as fn(&Connection) -> _, add_two_wrongly] {
        let (r, _) = run_synthetic(root.path(), &syn, broken);
        assert_eq!(r, Err(Code::MigrationStep));
        // The first step stays; nothing of the second is left.
        assert_eq!(version_of(root.path()), "3i-t1");
        assert!(has_table(root.path(), "extra_one"));
        assert!(!has_table(root.path(), "extra_two"));
        assert_eq!(contents(root.path()).0, syn.master[1]);
        assert!(!root.path().join("bus/writer.lock").exists());
    }
    let (report, lines) = run_synthetic(root.path(), &syn, add_two);
    let report = report.expect("resumes");
    assert_eq!(report.from, "3i-t1");
    assert_eq!(report.steps, ["t1-to-t2"]);
    assert_eq!(lines.len(), 1);
    assert_eq!(version_of(root.path()), "3i-t2");
}

#[test]
fn a_lineage_without_the_next_step_refuses_before_changing_anything() {
    let root = data_root();
    broker_store(root.path());
    let syn = Synthetic::new();
    let only_first = &steps_with(add_two)[..1];
    // The first step runs; the missing second refuses; the first stays.
    let r = migrate(root.path(), &syn.pins(), only_first, &mut |_| {});
    assert_eq!(r, Err(Code::MigrationStep));
    assert_eq!(version_of(root.path()), "3i-t1");
    // With no steps at all nothing changes.
    let root = data_root();
    broker_store(root.path());
    let before_none = contents(root.path());
    let r = migrate(root.path(), &syn.pins(), &[], &mut |_| {});
    assert_eq!(r, Err(Code::MigrationStep));
    assert_eq!(contents(root.path()), before_none);
}
