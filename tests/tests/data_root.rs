//! The data root's files, modes and lock: private files, unsafe paths and files refused and kept, a leftover lock, a stale socket, a tampered store kept as evidence.

use mosaic_tests::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
#[path = "support/lifecycle_env.rs"]
mod lifecycle_env;
use lifecycle_env::{euid, mode, refused_with};

#[test]
fn boot_creates_private_files_and_close_removes_lock_and_socket() {
    let root = data_root();
    let b = Broker::start(root.path());
    let bus = root.path().join("bus");
    assert_eq!(
        b.boot["path"],
        json!(bus.join("bus.sock").to_str().unwrap())
    );
    assert_eq!(mode(&bus), 0o700);
    for f in ["bus.sqlite", "writer.lock", "bus.sock"] {
        assert_eq!(mode(&bus.join(f)), 0o600, "{f}");
    }
    assert_eq!(b.boot["launches"], json!([]));
    assert_eq!(b.boot["readers"][0]["business"], json!("acme"));
    b.close();
    assert!(!bus.join("writer.lock").exists());
    assert!(!bus.join("bus.sock").exists());
    assert!(bus.join("bus.sqlite").exists());
}

#[test]
fn unsafe_paths_refuse() {
    // A symlinked bus/ directory.
    let root = data_root();
    let elsewhere = data_root();
    std::os::unix::fs::symlink(elsewhere.path(), root.path().join("bus")).unwrap();
    let (_b, reply) = Broker::spawn(root.path(), config(root.path()));
    assert_eq!(reply["error"], json!("unsafe-path"));

    // A group-readable bus/.
    let root = data_root();
    std::fs::create_dir(root.path().join("bus")).unwrap();
    std::fs::set_permissions(root.path().join("bus"), PermissionsExt::from_mode(0o750)).unwrap();
    let (_b, reply) = Broker::spawn(root.path(), config(root.path()));
    assert_eq!(reply["error"], json!("unsafe-path"));

    // A loose database file.
    let root = data_root();
    Broker::start(root.path()).close();
    let db = root.path().join("bus/bus.sqlite");
    std::fs::set_permissions(&db, PermissionsExt::from_mode(0o644)).unwrap();
    let (_b, reply) = Broker::spawn(root.path(), config(root.path()));
    assert_eq!(reply["error"], json!("unsafe-path"));

    // A symlinked database file.
    let root = data_root();
    std::fs::create_dir(root.path().join("bus")).unwrap();
    std::fs::set_permissions(root.path().join("bus"), PermissionsExt::from_mode(0o700)).unwrap();
    let target = root.path().join("real.sqlite");
    std::fs::write(&target, b"").unwrap();
    std::os::unix::fs::symlink(&target, root.path().join("bus/bus.sqlite")).unwrap();
    let (_b, reply) = Broker::spawn(root.path(), config(root.path()));
    assert_eq!(reply["error"], json!("unsafe-path"));
}

#[test]
fn a_running_broker_holds_the_lock() {
    let root = data_root();
    let first = Broker::start(root.path());
    let (_second, reply) = Broker::spawn(root.path(), config(root.path()));
    assert_eq!(reply, json!({"ok": false, "error": "writer-locked"}));
    // The refused second broker must not have removed the first one's lock.
    assert!(root.path().join("bus/writer.lock").exists());
    first.close();
}

#[test]
fn sigkill_leaves_the_lock_until_an_operator_removes_it() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let run = sleeper();
    let cap = b.bind("pm", "run-1", run.id());
    let r = b.call(&cap, "role.claim", json!(null));
    assert_eq!(r["ok"], json!(true), "{r}");
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let lock = root.path().join("bus/writer.lock");
    assert!(lock.exists(), "a crash leaves writer.lock");

    for _ in 0..2 {
        let (_b2, reply) = Broker::spawn(root.path(), config(root.path()));
        assert_eq!(reply, json!({"ok": false, "error": "writer-locked"}));
        assert!(lock.exists(), "nothing reclaims the lock");
    }

    // The documented procedure: the old broker is gone, keep the DB/WAL/SHM,
    // remove only the stale lock (and socket), then restart.
    std::fs::remove_file(&lock).unwrap();
    let _ = std::fs::remove_file(root.path().join("bus/bus.sock"));
    let mut b3 = Broker::start(root.path());
    // The identical launch binds again, and the claim written before the kill is still there.
    let cap = b3.bind("pm", "run-1", run.id());
    let trail = b3.call(&cap, "trail", json!({"subject": "run-1"}));
    let records = trail["result"].as_array().unwrap();
    assert!(
        records
            .iter()
            .any(|r| r["record"] == "claim" && r["op"] == "claim"),
        "{trail}"
    );
    assert!(records.iter().any(|r| r["kind"] == "session.launched"));
    let again = b3.call(&cap, "role.claim", json!(null));
    assert_eq!(again["error"], json!("role-held"));
    b3.close();
}

#[test]
fn every_file_under_bus_is_private_while_serving() {
    let root = data_root();
    let b = Broker::start(root.path());
    let bus = root.path().join("bus");
    assert_eq!(mode(&bus), 0o700);
    for f in [
        "bus.sqlite",
        "bus.sqlite-wal",
        "bus.sqlite-shm",
        "writer.lock",
        "bus.sock",
    ] {
        let md = std::fs::symlink_metadata(bus.join(f)).unwrap();
        assert_eq!(md.permissions().mode() & 0o777, 0o600, "{f}");
        assert!(!md.file_type().is_symlink(), "{f}");
    }
    b.close();
}

#[test]
fn data_root_must_be_an_absolute_existing_owned_directory() {
    let root = data_root();
    // A regular file.
    let file = root.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let mut cfg = config(root.path());
    cfg["dataRoot"] = json!(file);
    refused_with(root.path(), cfg, "data-root");
    // A symlink to a good directory.
    let real = data_root();
    let link = root.path().join("link");
    std::os::unix::fs::symlink(real.path(), &link).unwrap();
    let mut cfg = config(root.path());
    cfg["dataRoot"] = json!(link);
    refused_with(root.path(), cfg, "data-root");
    assert!(!real.path().join("bus").exists());
    // Not a path at all.
    let mut cfg = config(root.path());
    cfg["dataRoot"] = json!("");
    refused_with(root.path(), cfg, "data-root");
    // Another user's directory.
    let theirs = data_root();
    if euid() == 0 {
        std::os::unix::fs::chown(theirs.path(), Some(65534), Some(65534)).unwrap();
        let mut cfg = config(root.path());
        cfg["dataRoot"] = json!(theirs.path());
        refused_with(root.path(), cfg, "data-root");
        assert!(!theirs.path().join("bus").exists());
    } else {
        let mut cfg = config(root.path());
        cfg["dataRoot"] = json!("/");
        refused_with(root.path(), cfg, "data-root");
    }
}

/// Symlinks, wrong types and looser modes under `bus/` refuse the start with
/// `unsafe-path`, and the refused start leaves what it found in place, so a
/// second start refuses the same way.
#[test]
fn unsafe_files_under_bus_refuse_and_are_left_in_place() {
    use std::os::unix::fs::symlink;
    type Plant = fn(&std::path::Path);
    let cases: [(&str, Plant); 8] = [
        ("loose wal", |bus| {
            std::fs::write(bus.join("bus.sqlite-wal"), b"").unwrap();
            std::fs::set_permissions(bus.join("bus.sqlite-wal"), PermissionsExt::from_mode(0o644))
                .unwrap();
        }),
        ("symlinked shm", |bus| {
            std::fs::write(bus.join("elsewhere"), b"").unwrap();
            symlink(bus.join("elsewhere"), bus.join("bus.sqlite-shm")).unwrap();
        }),
        ("group-writable database", |bus| {
            std::fs::set_permissions(bus.join("bus.sqlite"), PermissionsExt::from_mode(0o620))
                .unwrap();
        }),
        ("a directory as the database", |bus| {
            std::fs::rename(bus.join("bus.sqlite"), bus.join("kept.sqlite")).unwrap();
            std::fs::create_dir(bus.join("bus.sqlite")).unwrap();
        }),
        ("a leftover socket open to others", |bus| {
            drop(std::os::unix::net::UnixListener::bind(bus.join("bus.sock")).unwrap());
            std::fs::set_permissions(bus.join("bus.sock"), PermissionsExt::from_mode(0o666))
                .unwrap();
        }),
        ("a regular file as the socket", |bus| {
            std::fs::write(bus.join("bus.sock"), b"").unwrap();
            std::fs::set_permissions(bus.join("bus.sock"), PermissionsExt::from_mode(0o600))
                .unwrap();
        }),
        ("a symlinked lock", |bus| {
            symlink("/nonexistent/writer.lock", bus.join("writer.lock")).unwrap();
        }),
        ("a directory as the lock", |bus| {
            std::fs::create_dir(bus.join("writer.lock")).unwrap();
        }),
    ];
    for (what, plant) in cases {
        let root = data_root();
        Broker::start(root.path()).close();
        let bus = root.path().join("bus");
        plant(&bus);
        let listing = |bus: &std::path::Path| {
            let mut v: Vec<_> = std::fs::read_dir(bus)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            v.sort();
            v
        };
        let before = listing(&bus);
        for _ in 0..2 {
            refused_with(root.path(), config(root.path()), "unsafe-path");
            assert_eq!(listing(&bus), before, "{what}: left in place");
        }
    }
}

#[test]
fn a_leftover_lock_of_any_mode_refuses_writer_locked_and_stays() {
    let root = data_root();
    Broker::start(root.path()).close();
    let lock = root.path().join("bus/writer.lock");
    std::fs::write(&lock, b"12345\n").unwrap();
    std::fs::set_permissions(&lock, PermissionsExt::from_mode(0o644)).unwrap();
    for _ in 0..2 {
        refused_with(root.path(), config(root.path()), "writer-locked");
        assert_eq!(std::fs::read(&lock).unwrap(), b"12345\n");
    }
}

/// After a crash the operator removes only the lock: the broker's own stale
/// socket (private) is replaced and the store serves again.
#[test]
fn a_private_stale_socket_is_replaced_once_the_lock_is_gone() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let bus = root.path().join("bus");
    assert!(bus.join("bus.sock").exists(), "a crash leaves the socket");
    std::fs::remove_file(bus.join("writer.lock")).unwrap();
    let b = Broker::start(root.path());
    let r = b.call(&b.reader_cap(), "trail", json!({"subject": "x"}));
    assert_eq!(r["ok"], json!(true), "{r}");
    b.close();
}

/// A store changed behind the broker's back refuses the boot with its code
/// (exit 2, one stderr line), is left byte for byte as it was, and keeps
/// refusing: nothing repairs or reinitializes it.
#[test]
fn a_tampered_store_refuses_the_boot_and_is_kept_as_evidence() {
    // Drops `trigger`, runs `sql`, puts the trigger back with its exact text.
    fn behind_the_guard(root: &std::path::Path, trigger: &str, sql: &str) {
        let c = rusqlite::Connection::open(root.join("bus/bus.sqlite")).unwrap();
        let original: String = c
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = ?1",
                [trigger],
                |r| r.get(0),
            )
            .unwrap();
        c.execute_batch(&format!("DROP TRIGGER {trigger}; {sql}; {original};"))
            .unwrap();
    }
    type Tamper = fn(&std::path::Path);
    let cases: [(&str, Tamper); 5] = [
        ("schema-version", |root| {
            behind_the_guard(
                root,
                "meta_no_update",
                "UPDATE meta SET value = '3a' WHERE key = 'schema_version'",
            )
        }),
        ("schema-metadata", |root| {
            behind_the_guard(
                root,
                "meta_no_delete",
                "DELETE FROM meta WHERE key = 'schema_sha256'",
            )
        }),
        ("schema-digest", |root| {
            let c = rusqlite::Connection::open(root.join("bus/bus.sqlite")).unwrap();
            c.execute_batch(
                "DROP TRIGGER events_no_update;
                 CREATE TRIGGER events_no_update BEFORE UPDATE ON events
                   WHEN NEW.id = 'never' BEGIN SELECT RAISE(ABORT, 'append-only'); END;",
            )
            .unwrap();
        }),
        ("journal-mode", |root| {
            let c = rusqlite::Connection::open(root.join("bus/bus.sqlite")).unwrap();
            c.execute_batch("PRAGMA journal_mode=DELETE;").unwrap();
        }),
        ("timestamp", |root| {
            behind_the_guard(
                root,
                "events_at",
                "INSERT INTO events(id, business, kind, body, at)
                   VALUES ('forged', 'acme', 'x.y', '{}', '2020-01-01 00:00:00');
                 INSERT INTO events(id, business, kind, body, at)
                   VALUES ('after', 'acme', 'x.y', '{}', '2999-01-01T00:00:00.000Z')",
            )
        }),
    ];
    for (code, tamper) in cases {
        let root = data_root();
        Broker::start(root.path()).close();
        tamper(root.path());
        let db = root.path().join("bus/bus.sqlite");
        let before = std::fs::read(&db).unwrap();
        for _ in 0..2 {
            refused_with(root.path(), config(root.path()), code);
            assert_eq!(
                std::fs::read(&db).unwrap(),
                before,
                "{code}: kept as it was"
            );
            assert!(!root.path().join("bus/writer.lock").exists(), "{code}");
            assert!(!root.path().join("bus/bus.sock").exists(), "{code}");
        }
    }
}
