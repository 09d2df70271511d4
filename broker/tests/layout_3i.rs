//! Schema 3i's physical layout (issue 34), in process on a real store: what
//! a send writes, that a send's authorization is still found where the
//! reads look for it although the secondary indexes of `events` leave it
//! out, and that no read of `events` or `messages` falls back to a scan.

mod common;

use common::Inproc;
use mosaic_bus::core::Caller;
use mosaic_bus::store::evidence::{self, Actor};
use mosaic_bus::store::{self, NOT_A_SEND};
use serde_json::{json, Value};
use std::os::unix::fs::FileExt;

fn env() -> Inproc {
    let mut e = Inproc::boot(json!({
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "r0", "delivery": "r0"},
            "roles": {
                "r0": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                "r1": {"authority": {"withinRole": ["message.send"], "crossRole": []}},
                "r2": {"authority": {"withinRole": ["message.send"], "crossRole": []}}
            }}},
        "readers": ["acme"],
    }));
    for r in ["r0", "r1", "r2"] {
        e.ok(&role(r), "role.claim", Value::Null);
    }
    e
}

fn role(r: &str) -> Caller {
    Caller::Role {
        business: "acme".into(),
        role: r.into(),
        run: format!("run-{r}"),
    }
}

fn human() -> Caller {
    Caller::Human {
        business: "acme".into(),
    }
}

fn reader() -> Caller {
    Caller::Reader {
        business: "acme".into(),
    }
}

/// A role's send in a batch of its own, as a single client's is.
fn send(e: &mut Inproc, from: &str, to: &str, body: &str) -> String {
    e.core.begin_batch().expect("begin");
    let sent = e.ok(&role(from), "message.send", json!({"to": to, "body": body}));
    e.core.commit_batch().expect("commit");
    sent["id"].as_str().expect("id").to_string()
}

/// `(mxFrame, salt)` from the WAL index header in the `-shm` file.
fn wal_index(e: &Inproc) -> (u32, [u8; 8]) {
    let mut shm = e.bus.db_path().into_os_string();
    shm.push("-shm");
    let f = std::fs::File::open(shm).expect("shm");
    let mut h = [0u8; 48];
    f.read_exact_at(&mut h, 0).expect("header");
    let mut salt = [0u8; 8];
    salt.copy_from_slice(&h[32..40]);
    (u32::from_ne_bytes([h[16], h[17], h[18], h[19]]), salt)
}

/// The pages a single-client send commits: its message row with its id and
/// recipient index entries, its authorization row, and the splits those
/// B-trees need now and then; no `sqlite_sequence` page and no page of any
/// index of `events` (its id's included). Through 3h a send committed about
/// 10.2 WAL frames (nine B-trees); the 3i layout about 4.5 (issue 34's goal:
/// at most 5).
#[test]
fn a_single_send_commits_at_most_five_pages_on_average() {
    let mut e = env();
    for i in 0..300 {
        send(&mut e, "r1", "r0", &format!("warm {i}"));
    }
    let mut last = wal_index(&e);
    let (mut frames, sends) = (0u64, 400u64);
    for i in 0..sends {
        send(&mut e, "r1", "r0", &format!("counted {i}"));
        let now = wal_index(&e);
        frames += u64::from(if now.1 == last.1 && now.0 >= last.0 {
            now.0 - last.0
        } else {
            now.0
        });
        last = now;
    }
    let per_send = frames as f64 / sends as f64;
    assert!(per_send <= 5.0, "{per_send} WAL frames per send");
    // The authorizations are in events, and none of them is in any of its
    // indexes: each index holds exactly the other events.
    let c = e.core.store.db().sql();
    let count = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).expect(sql) };
    let sends_stored = count(
        "SELECT count(*) FROM events WHERE kind = 'action.allowed'
           AND json_extract(body, '$.action') = 'message.send'",
    );
    assert_eq!(sends_stored, 700);
    let others = count(&format!("SELECT count(*) FROM events WHERE {NOT_A_SEND}"));
    assert_eq!(count("SELECT count(*) FROM events"), others + 700);
    for (index, condition) in [
        ("events_id", NOT_A_SEND.to_string()),
        ("events_kind", NOT_A_SEND.to_string()),
        ("events_run", format!("run IS NOT NULL AND {NOT_A_SEND}")),
        (
            "events_subject",
            format!("subject IS NOT NULL AND {NOT_A_SEND}"),
        ),
    ] {
        let in_index = count(&format!(
            "SELECT count(*) FROM events INDEXED BY {index} WHERE {condition}"
        ));
        let expected = count(&format!("SELECT count(*) FROM events WHERE {condition}"));
        assert_eq!(in_index, expected, "{index}");
        assert!(in_index < 10, "{index}: {in_index}");
    }
}

/// The trail of a message gives the send's authorization (found by time,
/// not through an index) for the first, a middle and the last message of a
/// long history with other senders, human sends and other events between,
/// and for each exactly its own: by the sender's run, about the recipient,
/// naming the message. A human's message has a request and no
/// authorization.
#[test]
fn trail_finds_each_sends_authorization_at_any_depth() {
    let mut e = env();
    let mut mine = Vec::new();
    let mut human_sent = None;
    for i in 0..600 {
        let (from, to) = match i % 3 {
            0 => ("r1", "r0"),
            1 => ("r2", "r1"),
            _ => ("r0", "r2"),
        };
        let id = send(&mut e, from, to, &format!("m{i}"));
        mine.push((id, from, to));
        if i % 50 == 7 {
            // Other events between the sends: a human message (its
            // human.input) and a recorded event.
            let h = e.ok(&human(), "message.send", json!({"to": "r2", "body": "hi"}));
            human_sent = h["id"].as_str().map(str::to_string);
            e.core
                .store
                .write(|t| {
                    evidence::insert_event(
                        t,
                        "acme",
                        "task.created",
                        Actor::of("r0", "run-r0"),
                        Some("vikunja:3/41"),
                        &json!({"task_ref": "vikunja:3/41"}),
                    )
                })
                .expect("event");
        }
    }
    for k in [0, 1, 299, 300, 598, 599] {
        let (id, from, to) = &mine[k];
        let trail = e.ok(&reader(), "trail", json!({"subject": id}));
        let allowed: Vec<&Value> = trail
            .as_array()
            .expect("records")
            .iter()
            .filter(|r| r["record"] == "event" && r["kind"] == "action.allowed")
            .collect();
        assert_eq!(allowed.len(), 1, "message {k}: {trail}");
        let a = allowed[0];
        assert_eq!(a["body"]["message"], json!(id), "message {k}");
        assert_eq!(a["run"], json!(format!("run-{from}")), "message {k}");
        assert_eq!(a["subject"], json!(to), "message {k}");
        assert_eq!(a["body"]["action"], "message.send");
        // Found through its message, never by its own id (`events_id`
        // leaves it out): as a trail subject that id is unknown, and an
        // unknown subject's trail is an empty list.
        let own = e.ok(&reader(), "trail", json!({"subject": a["id"]}));
        assert_eq!(own, json!([]), "message {k}");
    }
    let h = human_sent.expect("a human message");
    let trail = e.ok(&reader(), "trail", json!({"subject": h}));
    let kinds: Vec<&str> = trail
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["record"] == "event")
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["human.input"]);
}

/// `(SQL, full-scan steps)` of every statement the connection keeps
/// prepared (the store's statement cache), counters reset when `reset`.
fn scans(e: &Inproc, reset: bool) -> Vec<(String, i32)> {
    let conn = e.core.store.db().sql();
    let mut out = Vec::new();
    // SAFETY: the handle is the connection's own and outlives the loop;
    // sqlite3_next_stmt only walks the statements it owns, and each stays
    // prepared (in rusqlite's cache) while we read its counter and text.
    unsafe {
        let db = conn.handle();
        let mut stmt = rusqlite::ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
        while !stmt.is_null() {
            let steps = rusqlite::ffi::sqlite3_stmt_status(
                stmt,
                rusqlite::ffi::SQLITE_STMTSTATUS_FULLSCAN_STEP,
                i32::from(reset),
            );
            let sql = rusqlite::ffi::sqlite3_sql(stmt);
            if !sql.is_null() {
                let text = std::ffi::CStr::from_ptr(sql).to_string_lossy().into_owned();
                out.push((text, steps));
            }
            stmt = rusqlite::ffi::sqlite3_next_stmt(db, stmt);
        }
    }
    out
}

/// With thousands of sends stored, no read of the store walks `events` or
/// `messages` from end to end: each read that looks events up by subject,
/// run or kind carries the condition its partial index is on, and the
/// trail's authorization lookup goes by key. Every read runs against a
/// store of 3,000 sends; no statement may take as many full-scan steps as
/// a tenth of that.
#[test]
fn no_read_of_events_or_messages_scans_the_table() {
    let mut e = env();
    let mut ids = Vec::new();
    for i in 0..3000 {
        let to = ["r0", "r1", "r2"][i % 3];
        let from = ["r1", "r2", "r0"][i % 3];
        ids.push(send(&mut e, from, to, &format!("m{i}")));
    }
    let decision = e.ok(
        &role("r1"),
        "decision.raise",
        json!({"action": "prd.approve", "question": "Ship?",
               "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
               "recommendation": "yes", "approvalChoice": "yes", "blocking": false}),
    );
    let decision = decision["id"].as_str().unwrap_or_default().to_string();
    e.ok(
        &human(),
        "message.send",
        json!({"to": "r0", "body": "from Ada"}),
    );
    scans(&e, true);
    let reads: Vec<(Caller, &str, Value)> = vec![
        (reader(), "trail", json!({"subject": ids[10]})),
        (reader(), "trail", json!({"subject": ids[2999]})),
        (reader(), "trail", json!({"subject": "run-r1"})),
        (reader(), "trail", json!({"subject": "vikunja:3/41"})),
        (reader(), "trail", json!({"subject": decision})),
        (reader(), "state", Value::Null),
        (reader(), "tasks", Value::Null),
        (reader(), "agents", Value::Null),
        (reader(), "inbox", Value::Null),
        (reader(), "messages", json!({"limit": 50})),
        (reader(), "replies", json!({"id": ids[5]})),
        (reader(), "decisions", json!({"list": "roles"})),
        (reader(), "decisions", json!({"list": "recent"})),
        (human(), "inbox", Value::Null),
        (role("r0"), "inbox", Value::Null),
        (role("r0"), "agents", Value::Null),
        (role("r0"), "state", Value::Null),
    ];
    for (caller, verb, args) in reads {
        e.ok(&caller, verb, args);
    }
    // The writes whose guards look an event up by id (a new event's id, a
    // human message's request, a human close's input) go through
    // `events_id` too: no guard walks the events of 3,000 sends.
    e.ok(
        &role("r2"),
        "message.send",
        json!({"to": "r0", "body": "after"}),
    );
    e.ok(
        &human(),
        "message.send",
        json!({"to": "r1", "body": "again"}),
    );
    e.ok(
        &human(),
        "decision.resolve",
        json!({"id": decision, "choice": "yes"}),
    );
    let conn = e.core.store.db();
    let b = "acme";
    let t = "vikunja:3/41";
    store::reviews::latest_push(conn, b, t).expect("push");
    store::reviews::was_pushed(conn, b, t, "0123").expect("pushed");
    store::reviews::has_verdict(conn, b, "req").expect("verdict");
    store::landings::latest_verdict(conn, b, t).expect("latest verdict");
    store::evidence::session_of(conn, b, "run-r1").expect("session");
    store::decisions::launch_latest(conn, b).expect("launch");
    store::reads::latest_event_of_kind(conn, b, "launch.revoked").expect("kind");
    store::reads::task_created_requirements(conn, b).expect("created");
    let all = scans(&e, false);
    let walked: Vec<&(String, i32)> = all.iter().filter(|(_, steps)| *steps >= 300).collect();
    assert!(walked.is_empty(), "{walked:#?}");
    // And by plan, whatever the data: no statement the reads keep prepared
    // walks a table or an index from end to end.
    let mut scanning = Vec::new();
    for (sql, _) in &all {
        // Reads only: an INSERT's plan lists the scans of the tables whose
        // rows would refer to the new one, which SQLite runs only while a
        // foreign key is broken.
        let head = sql.trim_start();
        if !(head.starts_with("SELECT") || head.starts_with("WITH")) {
            continue;
        }
        let mut plan = conn
            .sql()
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect(sql);
        // Unbound parameters are NULL: the plan is the same.
        let mut rows = plan.raw_query();
        let mut details = Vec::new();
        while let Some(r) = rows.next().expect("plan row") {
            details.push(r.get::<_, String>(3).expect("detail"));
        }
        for d in details {
            // The board's task refs are a CTE that seeks from one to the next.
            if d.starts_with("SCAN ") && d != "SCAN CONSTANT ROW" && d != "SCAN task_refs" {
                scanning.push(format!("{d}: {sql}"));
            }
        }
    }
    assert!(scanning.is_empty(), "{scanning:#?}");
}
