//! `mosaic-bus backup` (DESIGN.md, "Seals and the operator's tools"): a
//! consistent copy through SQLite's online backup API while 32 clients
//! write through the real broker, private, verified before it answers, and
//! a data root a broker boots on; a destination that exists or is a
//! symlink refuses with nothing written; a copy that does not verify is
//! `backup-failed`, left for inspection.

use mosaic_tests::{bin, config, data_root, raw_request, sealcheck, sleeper, Broker};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn backup(root: &Path, dest: &Path) -> (i32, String, String) {
    let out = Command::new(bin("mosaic-bus"))
        .arg("backup")
        .arg("--data-root")
        .arg(root)
        .arg(dest)
        .output()
        .expect("run backup");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

fn message_ids(root: &Path) -> HashSet<String> {
    let c = mosaic_tests::db(root);
    let mut st = c.prepare("SELECT id FROM messages").expect("prepare");
    st.query_map([], |r| r.get(0))
        .expect("ids")
        .collect::<Result<_, _>>()
        .expect("rows")
}

#[test]
fn a_backup_taken_while_32_clients_write_is_consistent_private_verified_and_boots() {
    let root = data_root();
    let mut c = config(root.path());
    c["sealSeconds"] = json!(1);
    let (mut b, reply) = Broker::spawn(root.path(), c);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let run = sleeper();
    let cap = b.claimed("pm", "pm-1", run.id());
    // Some history first, so the copy has seals and rows before the load.
    for i in 0..50 {
        let r = b.call(
            &cap,
            "message.send",
            json!({"to": "human", "body": format!("before {i}")}),
        );
        assert_eq!(r["ok"], json!(true));
    }
    let reader = b.reader_cap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while b.call(&reader, "seal", Value::Null)["result"]["upto"]["messages"].as_i64() < Some(50) {
        assert!(std::time::Instant::now() < deadline, "no seal came");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..32)
        .map(|w| {
            let (stop, sent, socket, cap) =
                (stop.clone(), sent.clone(), b.socket.clone(), cap.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let req = json!({"cap": cap, "verb": "message.send",
                        "args": {"to": "human", "body": format!("client {w} message {i}")}});
                    let r = raw_request(&socket, format!("{req}\n").as_bytes());
                    assert_eq!(r["ok"], json!(true), "{r}");
                    sent.fetch_add(1, Ordering::SeqCst);
                    i += 1;
                }
            })
        })
        .collect();
    // Let the load get going, then copy in the middle of it.
    while sent.load(Ordering::SeqCst) < 500 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let dest_parent = data_root();
    let dest = dest_parent.path().join("copy");
    let (code, out, err) = backup(root.path(), &dest);
    let during = sent.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().expect("writer");
    }
    assert_eq!(code, 0, "{out} {err}");
    assert!(during > 500);
    let line: Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(line["ok"], json!(true), "{line}");
    assert_eq!(line["dest"], json!(dest.to_str().expect("utf-8")));
    assert!(line["seals"].as_u64() >= Some(1), "{line}");
    assert!(line["rows"].as_u64() >= Some(50), "{line}");

    // Private: 0700 directories, 0600 files, no lock, no socket.
    assert_eq!(mode(&dest), 0o700);
    assert_eq!(mode(&dest.join("bus")), 0o700);
    let mut names: Vec<String> = std::fs::read_dir(dest.join("bus"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["bus.sqlite", "seals.sqlite"]);
    for f in &names {
        assert_eq!(mode(&dest.join("bus").join(f)), 0o600, "{f}");
    }
    // Every seal in the copy is the documented hash of the copy's rows.
    for s in sealcheck::check(&dest) {
        assert_eq!(s.stored, s.computed, "seal {}", s.seq);
    }
    // Nothing in the copy the source doesn't have.
    b.close();
    let source = message_ids(root.path());
    let copy = message_ids(&dest);
    assert!(copy.len() >= 50 && copy.is_subset(&source));

    // The copy boots as a new data root (the broker's open checks the
    // whole store: integrity, foreign keys, every timestamp), serves, and
    // its seals go on from the copied chain.
    let mut c = config(&dest);
    c["sealSeconds"] = json!(1);
    let (mut b2, reply) = Broker::spawn(&dest, c);
    assert_eq!(reply["ok"], json!(true), "the copy boots: {reply}");
    let cap2 = b2.bind("pm", "pm-1", run.id());
    let r = b2.call(
        &cap2,
        "message.send",
        json!({"to": "human", "body": "after the restore"}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    b2.close();
    let out = Command::new(bin("mosaic-bus"))
        .args(["verify", "--data-root"])
        .arg(&dest)
        .output()
        .expect("verify");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_destination_that_exists_or_is_a_symlink_refuses_and_nothing_is_written() {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let run = sleeper();
    b.claimed("pm", "pm-1", run.id());
    let dir = data_root();
    let refused = |dest: &Path| {
        let (code, out, err) = backup(root.path(), dest);
        assert_eq!(code, 2, "{dest:?}: {out} {err}");
        assert_eq!(out, "");
        assert_eq!(err.trim(), r#"{"error":"backup-destination"}"#, "{dest:?}");
    };
    // An existing directory, empty: left empty.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    refused(&empty);
    assert_eq!(std::fs::read_dir(&empty).expect("list").count(), 0);
    // An existing file: left as it was.
    let file = dir.path().join("file");
    std::fs::write(&file, b"keep").expect("write");
    refused(&file);
    assert_eq!(std::fs::read(&file).expect("read"), b"keep");
    // A symlink to a directory: neither the link nor its target changes.
    let target = dir.path().join("target");
    std::fs::create_dir(&target).expect("mkdir");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    refused(&link);
    assert_eq!(std::fs::read_dir(&target).expect("list").count(), 0);
    assert!(std::fs::symlink_metadata(&link)
        .expect("link")
        .file_type()
        .is_symlink());
    // A dangling symlink: nothing is made where it points.
    let dangling = dir.path().join("dangling");
    let nowhere = dir.path().join("nowhere");
    std::os::unix::fs::symlink(&nowhere, &dangling).expect("symlink");
    refused(&dangling);
    assert!(std::fs::symlink_metadata(&nowhere).is_err());
    // A parent that doesn't exist: nothing is made.
    let orphan = dir.path().join("no/such/parent");
    refused(&orphan);
    assert!(!dir.path().join("no").exists());
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["dangling", "empty", "file", "link", "target"]);
    b.close();
}

#[test]
fn a_backup_of_nothing_or_a_malformed_command_line_refuses() {
    let root = data_root();
    let dest = data_root();
    let (code, _, err) = backup(root.path(), &dest.path().join("copy"));
    assert_eq!(code, 2);
    assert_eq!(err.trim(), r#"{"error":"store-missing"}"#);
    assert!(!dest.path().join("copy").exists());
    let p = root.path().to_str().expect("utf-8");
    for args in [
        vec!["backup"],
        vec!["backup", "--data-root", p],
        vec!["backup", "--data-root", p, "/tmp/a", "/tmp/b"],
        vec!["backup", "/tmp/a"],
        vec!["backup", "--data-root", p, "--follow", "/tmp/a"],
    ] {
        let out = Command::new(bin("mosaic-bus"))
            .args(&args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            r#"{"error":"usage"}"#
        );
    }
}

/// A store changed behind its guards still copies, but the copy does not
/// verify: the backup refuses with `backup-failed` (exit 2, nothing on
/// stdout) and leaves the copy for inspection, private, where `verify`
/// names the change.
#[test]
fn a_store_changed_behind_its_guards_is_backup_failed_and_the_copy_stays() {
    let root = data_root();
    let mut c = config(root.path());
    c["sealSeconds"] = json!(3600);
    let (mut b, reply) = Broker::spawn(root.path(), c);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let run = sleeper();
    let cap = b.claimed("pm", "pm-1", run.id());
    for i in 0..5 {
        let r = b.call(
            &cap,
            "message.send",
            json!({"to": "human", "body": format!("message {i}")}),
        );
        assert_eq!(r["ok"], json!(true), "{r}");
    }
    // Closing seals every row.
    b.close();
    // Lift the guard, change a sealed message, put the guard back with its
    // very text: the schema's digest is intact, only the seals can tell.
    let db = rusqlite::Connection::open(root.path().join("bus").join("bus.sqlite")).expect("open");
    let guard: String = db
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'messages_no_update'",
            [],
            |r| r.get(0),
        )
        .expect("guard");
    db.execute_batch(&format!(
        "DROP TRIGGER messages_no_update;
         UPDATE messages SET body = 'forged' WHERE seq = (SELECT min(seq) FROM messages);
         {guard};"
    ))
    .expect("tamper");
    drop(db);

    let dest_parent = data_root();
    let dest = dest_parent.path().join("copy");
    let (code, out, err) = backup(root.path(), &dest);
    assert_eq!(code, 2, "{out} {err}");
    assert_eq!(out, "");
    assert_eq!(err.trim(), r#"{"error":"backup-failed"}"#);
    assert_eq!(mode(&dest), 0o700);
    assert_eq!(mode(&dest.join("bus")), 0o700);
    let out = Command::new(bin("mosaic-bus"))
        .args(["verify", "--data-root"])
        .arg(&dest)
        .output()
        .expect("verify");
    let lines = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{lines}");
    let findings: Vec<Value> = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("finding").is_some())
        .collect();
    assert_eq!(findings.len(), 1, "{lines}");
    assert_eq!(findings[0]["finding"], json!("rows-differ"));
    assert_eq!(findings[0]["table"], json!("messages"));
}
