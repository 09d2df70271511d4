//! Each step proves its target pin and is one transaction: a failing one (a synthetic lineage, or the shipped 3h→3i made to fail or refusing a counter ahead of its rows) rolls back alone and a rerun resumes; the shipped lineage is pinned and ends where the broker runs.

use mosaic_bus::store::schema::{self, master_digest, sha256_hex, Pin};
use mosaic_bus::Code;
use mosaic_migrate::steps::Step;
use mosaic_migrate::{lineage, migrate, steps, Report};
use mosaic_tests::data_root;
use rusqlite::Connection;
use serde_json::json;
use std::path::Path;
#[path = "support/migrate_env.rs"]
mod migrate_env;
use migrate_env::{
    broker_store, cli, contents, counters, db, master_rows, path, store_3h_with_usage,
    this_broker_refuses, usage_rows,
};

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
