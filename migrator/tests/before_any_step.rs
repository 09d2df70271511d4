//! What `mosaic-migrate` checks before any step: its command line, a missing, current or damaged store, the broker's writer lock, and the backup it takes before its first step, or refuses first. The real binary on real SQLite files.

use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use mosaic_tests::data_root;
use rusqlite::Connection;
use serde_json::json;
use std::path::Path;
#[path = "support/migrate_env.rs"]
mod migrate_env;
use migrate_env::{
    broker_store, cli, contents, db, hand_over, path, refused, rows_3b, store_3b,
    this_broker_refuses,
};

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
/// (`upgrades.rs`'s 3b test and the others), in `--backup DIR` when told, none
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
    hand_over(bus, root.path());
    refused(&cli(&[path(&root)]), "schema-metadata");
}
