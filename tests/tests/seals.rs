//! Seals through a real broker (DESIGN.md, "Seals and the operator's
//! tools"; `docs/seals.md`): a seal follows a commit within `sealSeconds`,
//! its root is the documented hash (checked by `mosaic_tests::sealcheck`,
//! written from the document alone), the anchors leave the data root (the
//! `seal` INFO line, the reader verb `seal`, the host op `seals`), close
//! seals the last commits, a crash's unsealed rows are sealed at the next
//! start, and the seals file is private, append-only and bound to its store.

use mosaic_tests::{config, data_root, sealcheck, sleeper, Broker};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn boot(root: &Path, seal_seconds: u64) -> Broker {
    let mut c = config(root);
    c["sealSeconds"] = json!(seal_seconds);
    let (b, reply) = Broker::spawn(root, c);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    b
}

/// Polls the reader verb `seal` until `done` holds for its answer.
fn wait_seal(b: &Broker, done: impl Fn(&Value) -> bool) -> Value {
    let reader = b.reader_cap();
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let r = b.call(&reader, "seal", Value::Null);
        assert_eq!(r["ok"], json!(true), "{r}");
        if done(&r["result"]) {
            return r["result"].clone();
        }
        assert!(Instant::now() < end, "no seal came: {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn covers(seal: &Value, table: &str, seq: i64) -> bool {
    seal["upto"][table].as_i64().is_some_and(|n| n >= seq)
}

/// The `seal` INFO lines of a broker's log: `(seq, root)`.
fn logged_seals(stderr: &str) -> Vec<(i64, String)> {
    stderr
        .lines()
        .filter(|l| l.contains(" INFO ") && l.contains(" seal "))
        .map(|l| {
            let field = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(k))
                    .unwrap_or_else(|| panic!("{k} in {l}"))
                    .to_string()
            };
            (field("seq=").parse().expect("seq"), field("root="))
        })
        .collect()
}

fn message_seqs(root: &Path) -> i64 {
    mosaic_tests::db(root)
        .query_row("SELECT coalesce(max(seq), 0) FROM messages", [], |r| {
            r.get(0)
        })
        .expect("messages")
}

fn assert_chain_is_the_documented_hash(root: &Path) -> Vec<sealcheck::Checked> {
    let checked = sealcheck::check(root);
    assert!(!checked.is_empty());
    for c in &checked {
        assert_eq!(c.stored, c.computed, "seal {}", c.seq);
    }
    checked
}

#[test]
fn a_seal_follows_a_commit_and_every_anchor_names_it() {
    let root = data_root();
    let mut b = boot(root.path(), 1);
    let run = sleeper();
    let cap = b.claimed("pm", "pm-1", run.id());
    let sent = b.call(
        &cap,
        "message.send",
        json!({"to": "human", "body": "sealed"}),
    );
    assert_eq!(sent["ok"], json!(true), "{sent}");
    let seq = message_seqs(root.path());
    assert!(seq >= 1);
    let newest = wait_seal(&b, |s| !s.is_null() && covers(s, "messages", seq));
    // The reader verb's shape: {seq, at, root, upto}.
    let keys: Vec<&str> = newest
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["at", "root", "seq", "upto"]);
    assert_eq!(newest["upto"].as_object().expect("upto").len(), 16);

    // The host op lists every seal, chained, {seq, at, prev, root, upto}.
    let listed = b.op(json!({"op": "seals", "id": 7}));
    assert_eq!(listed["ok"], json!(true), "{listed}");
    assert_eq!(listed["id"], json!(7));
    let list = listed["result"].as_array().expect("list").clone();
    assert!(!list.is_empty());
    assert_eq!(list[0]["seq"], json!(1));
    assert_eq!(list[0]["prev"], json!("0".repeat(64)));
    for w in list.windows(2) {
        assert_eq!(w[1]["prev"], w[0]["root"]);
        assert_eq!(w[1]["seq"].as_i64(), w[0]["seq"].as_i64().map(|n| n + 1));
    }
    let last = list.last().expect("last");
    assert!(last["seq"].as_i64() >= newest["seq"].as_i64());
    let after = b.op(json!({"op": "seals", "after": last["seq"]}));
    assert_eq!(after["result"], json!([]), "{after}");
    let one = b.op(json!({"op": "seals", "after": 0}));
    assert_eq!(one["result"], listed["result"]);
    for bad in [json!(-1), json!("1"), json!(1.5)] {
        let r = b.op(json!({"op": "seals", "after": bad}));
        assert_eq!(r["error"], json!("invalid-request"), "{bad}: {r}");
    }
    let r = b.op(json!({"op": "seals", "extra": 1}));
    assert_eq!(r["error"], json!("invalid-request"));

    // Each seal is logged at INFO with its seq and root.
    let logged = logged_seals(&b.stderr());
    for s in &list {
        let seq = s["seq"].as_i64().expect("seq");
        let root_hex = s["root"].as_str().expect("root").to_string();
        assert!(
            logged.contains(&(seq, root_hex)),
            "seal {seq} not logged: {logged:?}"
        );
    }

    // Who may ask: readers and the human, not a role.
    let r = b.call(&cap, "seal", Value::Null);
    assert_eq!(r["error"], json!("human-required"), "{r}");
    b.close();

    // The roots are the documented hash over the rows.
    let checked = assert_chain_is_the_documented_hash(root.path());
    assert!(checked.iter().any(|c| c.upto["messages"] >= seq));

    // seals.sqlite is private (and so is its WAL, when one is left).
    let md = std::fs::metadata(root.path().join("bus/seals.sqlite")).expect("seals file");
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
}

#[test]
fn close_seals_the_last_commits_and_a_crash_is_sealed_at_the_next_start() {
    let root = data_root();
    // An hour: no seal comes from the period during this test.
    let mut b = boot(root.path(), 3600);
    let run = sleeper();
    let cap = b.claimed("pm", "pm-1", run.id());
    let sent = b.call(&cap, "message.send", json!({"to": "human", "body": "one"}));
    assert_eq!(sent["ok"], json!(true), "{sent}");
    let first = message_seqs(root.path());
    let newest = b.call(&b.reader_cap(), "seal", Value::Null);
    assert!(
        newest["result"].is_null() || !covers(&newest["result"], "messages", first),
        "{newest}"
    );
    // A crash: nothing sealed the message.
    b.child.kill().expect("kill");
    b.child.wait().expect("reap");
    let sealed = sealcheck::check(root.path());
    assert!(sealed
        .iter()
        .all(|c| c.upto.get("messages").copied().unwrap_or(0) < first));

    // The operator's restart (docs/operations.md): the start seals it.
    std::fs::remove_file(root.path().join("bus/writer.lock")).expect("lock");
    let mut b = boot(root.path(), 3600);
    wait_seal(&b, |s| !s.is_null() && covers(s, "messages", first));
    // The identical launch binds again (its evidence is a new commit).
    let cap = b.bind("pm", "pm-1", run.id());
    // A commit after the last seal, then close: the close seals it.
    let r = b.op(json!({"op": "recordEvent", "cap": cap, "kind": "note.kept", "body": {}}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let events: i64 = mosaic_tests::db(root.path())
        .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
        .expect("events");
    b.close();
    let checked = assert_chain_is_the_documented_hash(root.path());
    let last = checked.last().expect("a seal");
    assert_eq!(last.upto["events"], events, "close sealed every event");
    assert!(last.upto["messages"] >= first);
}

#[test]
fn the_seals_file_is_append_only() {
    let root = data_root();
    let mut b = boot(root.path(), 3600);
    let run = sleeper();
    b.claimed("pm", "pm-1", run.id());
    b.close();
    let c = rusqlite::Connection::open(root.path().join("bus/seals.sqlite")).expect("open");
    let count = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM seals", [], |r| r.get(0))
            .expect("count")
    };
    // The close sealed the bind and the claim.
    let n = count(&c);
    assert!(n >= 1);
    let refused = |sql: &str| {
        let e = c.execute_batch(sql).expect_err(sql);
        assert!(e.to_string().contains("append-only"), "{sql}: {e}");
    };
    refused("UPDATE meta SET value = 'x' WHERE key = 'store'");
    refused("DELETE FROM meta");
    refused("INSERT INTO meta(key, value) VALUES ('store', 'x')");
    refused("UPDATE seals SET root = prev");
    refused("DELETE FROM seals");
    // Not the next seq, or not on the last root.
    let zeros = "0".repeat(64);
    refused(&format!(
        "INSERT INTO seals(seq, at, prev, root, upto, tables)
         VALUES ({}, '2999-01-01T00:00:00.000Z', '{zeros}', '{zeros}', '{{}}', '{{}}')",
        n + 2
    ));
    refused(&format!(
        "INSERT INTO seals(seq, at, prev, root, upto, tables)
         VALUES ({}, '2999-01-01T00:00:00.000Z', '{}', '{zeros}', '{{}}', '{{}}')",
        n + 1,
        "1".repeat(64)
    ));
    assert_eq!(count(&c), n);
}

/// Boots `root` expecting a refused start with `code` (exit 2, one line).
fn refused_boot(root: &Path, code: &str) {
    let (mut b, reply) = Broker::spawn(root, config(root));
    assert_eq!(reply, json!({"ok": false, "error": code}));
    let status = b.wait(Duration::from_secs(10)).expect("exits");
    assert_eq!(status.code(), Some(2));
    assert_eq!(b.stderr().trim(), json!({"error": code}).to_string());
    assert!(
        !root.join("bus/writer.lock").exists(),
        "a refused start gives the lock back"
    );
}

#[test]
fn a_seals_file_of_another_store_or_a_damaged_one_refuses_the_start() {
    let (a, b) = (data_root(), data_root());
    for r in [&a, &b] {
        let mut br = boot(r.path(), 1);
        let run = sleeper();
        br.claimed("pm", "pm-1", run.id());
        br.close();
    }
    let seals_b = b.path().join("bus/seals.sqlite");
    let keep = std::fs::read(&seals_b).expect("read");
    // Another store's seals.
    std::fs::copy(a.path().join("bus/seals.sqlite"), &seals_b).expect("copy");
    refused_boot(b.path(), "seals-foreign");
    // Not a SQLite file.
    std::fs::write(
        &seals_b,
        b"not a database, just text that is long enough".repeat(100),
    )
    .expect("write");
    refused_boot(b.path(), "seals-unreadable");
    // Truncated: the first page only.
    std::fs::write(&seals_b, &keep[..4096.min(keep.len())]).expect("truncate");
    refused_boot(b.path(), "seals-unreadable");
    // Empty (a truncation to nothing): no format, no store.
    std::fs::write(&seals_b, b"").expect("empty");
    refused_boot(b.path(), "seals-unreadable");
    // Put back, it starts again.
    std::fs::write(&seals_b, &keep).expect("restore");
    boot(b.path(), 1).close();
}
