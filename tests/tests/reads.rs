//! The shared reads (`inbox`, `agents`, `trail`, `replies`, `messages`,
//! `state`, `requirements`, `tasks`) and the host ops that feed them
//! (`recordEvent`, `recordTask`) on real brokers. Reads write nothing.

use mosaic_tests::*;
use serde_json::{json, Value};

struct Env {
    root: tempfile::TempDir,
    b: Broker,
    pm: String,
    cto: String,
    reader: String,
    _procs: Vec<Sleeper>,
}

fn env_with(requirements: Option<Value>) -> Env {
    let root = data_root();
    let mut config = config(root.path());
    if let Some(r) = requirements {
        let path = root.path().join("requirements.json");
        std::fs::write(&path, r.to_string()).unwrap();
        config["requirements"] = json!(path.to_str().unwrap());
    }
    let (mut b, reply) = Broker::spawn(root.path(), config);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let procs: Vec<_> = (0..2).map(|_| sleeper()).collect();
    let pm = b.bind("pm", "run-pm", procs[0].id());
    let cto = b.bind("cto", "run-cto", procs[1].id());
    let reader = b.reader_cap();
    Env {
        root,
        b,
        pm,
        cto,
        reader,
        _procs: procs,
    }
}

impl Env {
    fn ok(&self, cap: &str, verb: &str, args: Value) -> Value {
        res(&self.b.call(cap, verb, args)).clone()
    }
    fn refused(&self, cap: &str, verb: &str, args: Value) -> String {
        err(&self.b.call(cap, verb, args)).to_string()
    }
    fn task(&mut self, task_ref: &str, fields: Value) -> Value {
        self.b.op(
            json!({"op": "recordTask", "business": "acme", "task_ref": task_ref,
                         "read_at": "2026-03-01T10:00:00.000Z", "fields": fields}),
        )
    }
}

#[test]
fn role_inbox_lists_waiting_and_unread_messages_and_reader_inbox_the_humans() {
    let e = env_with(None);
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let m1 = e.ok(&e.pm, "message.send", json!({"to": "cto", "body": "one"}));
    let m2 = e.ok(&e.pm, "message.send", json!({"to": "cto", "body": "two"}));
    let h = e.ok(
        &e.pm,
        "message.send",
        json!({"to": "human", "body": "for Ada"}),
    );
    let inbox = e.ok(&e.cto, "inbox", Value::Null);
    assert_eq!(inbox["role"], json!("cto"));
    assert_eq!(inbox["decisions"], json!([]));
    let ids: Vec<&Value> = inbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(ids, vec![&m1["id"], &m2["id"]]);
    assert_eq!(inbox["messages"][0]["delivered_at"], Value::Null);
    e.ok(&e.cto, "message.receive", Value::Null);
    e.ok(&e.cto, "message.read", json!({"id": m1["id"]}));
    let inbox = e.ok(&e.cto, "inbox", Value::Null);
    assert_eq!(inbox["messages"].as_array().unwrap().len(), 1);
    assert_eq!(inbox["messages"][0]["id"], m2["id"]);
    assert!(inbox["messages"][0]["delivered_at"].is_string());
    let human = e.ok(&e.reader, "inbox", Value::Null);
    assert_eq!(human["role"], json!("human"));
    assert_eq!(human["messages"].as_array().unwrap().len(), 1);
    assert_eq!(human["messages"][0]["id"], h["id"]);
    assert_eq!(e.ok(&e.pm, "inbox", Value::Null)["messages"], json!([]));
    assert_eq!(
        e.refused(&e.pm, "inbox", json!({"x": 1})),
        "invalid-request"
    );
    e.b.close();
}

#[test]
fn agents_gives_roles_claim_rows_and_readers_agent_state() {
    let e = env_with(None);
    assert_eq!(e.ok(&e.reader, "agents", Value::Null), json!([]));
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    e.ok(&e.cto, "role.release", Value::Null);
    let rows = e.ok(&e.pm, "agents", Value::Null);
    assert_eq!(
        rows.as_array().unwrap().len(),
        1,
        "released roles aren't listed: {rows}"
    );
    let row = rows[0].as_object().unwrap();
    assert_eq!(row["role"], json!("pm"));
    assert_eq!(row["run"], json!("run-pm"));
    assert_eq!(row["op"], json!("claim"));
    for k in ["state", "working", "inputNeeded", "stranded"] {
        assert!(
            !row.contains_key(k),
            "role sessions get claim rows only: {k}"
        );
    }
    let full = e.ok(&e.reader, "agents", Value::Null);
    assert_eq!(full[0]["state"], json!("idle"));
    assert_eq!(full[0]["working"], Value::Null);
    assert_eq!(full[0]["inputNeeded"], json!([]));
    assert_eq!(full[0]["stranded"], json!([]));
    assert_eq!(full[0]["at"], rows[0]["at"]);
    e.b.close();
}

#[test]
fn messages_feed_and_replies_for_readers_only() {
    let e = env_with(None);
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            e.ok(
                &e.pm,
                "message.send",
                json!({"to": "human", "body": format!("h{i}")}),
            )["id"]
                .clone(),
        );
    }
    let to_cto = e.ok(
        &e.pm,
        "message.send",
        json!({"to": "cto", "body": "not the human's"}),
    );
    let reply = e.ok(
        &e.cto,
        "message.send",
        json!({"to": "human", "body": "re", "in_reply_to": ids[0]}),
    );
    let page = e.ok(&e.reader, "messages", json!({"limit": 2}));
    assert_eq!(page["total"], json!(4));
    assert_eq!(page["unread"], json!(4));
    assert_eq!(page["messages"][0]["id"], reply["id"]);
    assert_eq!(page["messages"][0]["read"], json!(false));
    assert_eq!(page["next"], page["messages"][1]["id"]);
    let rest = e.ok(&e.reader, "messages", json!({"after": page["next"]}));
    assert_eq!(rest["messages"].as_array().unwrap().len(), 2);
    assert_eq!(rest["next"], Value::Null);
    assert_eq!(
        e.refused(&e.reader, "messages", json!({"after": to_cto["id"]})),
        "message-not-found"
    );
    assert_eq!(
        e.refused(&e.reader, "messages", json!({"limit": 500})),
        "invalid-request"
    );
    assert_eq!(e.refused(&e.pm, "messages", Value::Null), "human-required");
    let r = e.ok(&e.reader, "replies", json!({"id": ids[0]}));
    assert_eq!(r.as_array().unwrap().len(), 1);
    assert_eq!(r[0]["id"], reply["id"]);
    // Each row is the `messages` row `trail` gives the same session for the reply's id.
    let t = e.ok(&e.reader, "trail", json!({"subject": reply["id"]}));
    let row = t
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["record"] == json!("message") && x["id"] == reply["id"])
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(r[0], row);
    assert_eq!(
        e.refused(&e.pm, "replies", json!({"id": ids[0]})),
        "human-required"
    );
    assert_eq!(
        e.refused(&e.reader, "replies", json!({"id": "nope"})),
        "message-not-found"
    );
    e.b.close();
}

#[test]
fn requirements_state_and_unknown_trail() {
    let file = json!({"prd": "Mosaic PRD", "version": "1.6",
                      "requirements": [{"id": "REQ-MSG-1", "title": "Messages"}]});
    let e = env_with(Some(file.clone()));
    assert_eq!(e.ok(&e.pm, "requirements", Value::Null), file);
    assert_eq!(
        e.refused(&e.reader, "requirements", Value::Null),
        "read-only"
    );
    let st = e.ok(&e.reader, "state", Value::Null);
    assert_eq!(
        st,
        json!({"launch": {"state": "allowed", "at": null, "event": null},
               "tasks": {"open": [], "total": 0, "cap": 50}})
    );
    assert_eq!(e.ok(&e.pm, "state", Value::Null), st);
    assert_eq!(
        e.refused(&e.pm, "state", json!({"x": 1})),
        "invalid-request"
    );
    assert_eq!(
        e.ok(&e.reader, "trail", json!({"subject": "nothing-here"})),
        json!([])
    );
    e.b.close();
    let none = env_with(None);
    assert_eq!(
        none.ok(&none.pm, "requirements", Value::Null),
        json!({"prd": null, "version": null, "requirements": []})
    );
    none.b.close();
}

#[test]
fn record_task_and_record_event_feed_tasks_state_and_trail() {
    let mut e = env_with(None);
    e.ok(&e.pm, "role.claim", Value::Null);
    let r = e.task("vikunja:3/41", json!({"title": "Ship", "done": false, "priority": 0,
        "assignees": ["acme-pm-bot"], "labels": [2], "bucket": "Todo", "description": "d", "project": 3}));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(r["result"]["task_ref"], json!("vikunja:3/41"));
    assert_eq!(
        e.task("vikunja:3/42", json!({"title": "Done", "done": true}))["ok"],
        json!(true)
    );
    let tomb = e.b.op(
        json!({"op": "recordTask", "id": 7, "business": "acme", "task_ref": "vikunja:3/43",
        "read_at": "2026-03-01T10:00:00.000Z", "tombstone": true}),
    );
    assert_eq!(tomb["ok"], json!(true));
    assert_eq!(tomb["id"], json!(7));
    for (op, code) in [
        (
            json!({"op": "recordTask", "business": "acme", "task_ref": "vikunja:3/44", "read_at": "2026-03-01 10:00:00", "fields": {}}),
            "invalid-request",
        ),
        (
            json!({"op": "recordTask", "business": "acme", "task_ref": "vikunja:3/44", "read_at": "2026-03-01T10:00:00.000Z", "fields": {}, "tombstone": true}),
            "invalid-request",
        ),
        (
            json!({"op": "recordTask", "business": "acme", "task_ref": "vikunja:3/44", "read_at": "2026-03-01T10:00:00.000Z", "fields": {"colour": "red"}}),
            "invalid-request",
        ),
        (
            json!({"op": "recordTask", "business": "acme", "task_ref": "task-44", "read_at": "2026-03-01T10:00:00.000Z", "fields": {}}),
            "invalid-request",
        ),
        // One task-ref form on every path: a snapshot under another tracker's
        // name could never be reviewed, pushed or refused against.
        (
            json!({"op": "recordTask", "business": "acme", "task_ref": "jira:3/44", "read_at": "2026-03-01T10:00:00.000Z", "fields": {}}),
            "invalid-request",
        ),
        (
            json!({"op": "recordTask", "business": "other", "task_ref": "vikunja:3/44", "read_at": "2026-03-01T10:00:00.000Z", "fields": {}}),
            "unknown-business",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "human.input", "body": {}}),
            "reserved-event",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "launch.revoked", "body": {}}),
            "reserved-event",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "launch.restored", "body": {}}),
            "reserved-event",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "review.requested", "body": {}}),
            "reserved-event",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "review.verdict", "body": {}}),
            "reserved-event",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "action.allowed", "body": {"action": "git.push.working"}}),
            "reserved-event",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "task.synced", "body": {"task_ref": "vikunja:3/41"}, "subject": "vikunja:3/42"}),
            "task-subject",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "task.created", "subject": "vikunja:3/41",
                "body": {"task_ref": "vikunja:3/41", "request": "00000000-0000-4000-8000-000000000000", "requirement": "REQ-MSG-1"}}),
            "human-input-required",
        ),
        (
            json!({"op": "recordEvent", "cap": e.reader, "kind": "task.synced", "body": {}}),
            "read-only",
        ),
        (
            json!({"op": "recordEvent", "cap": "not-a-cap", "kind": "task.synced", "body": {}}),
            "unknown-capability",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "task.synced", "body": {}, "extra": 1}),
            "invalid-request",
        ),
        (
            json!({"op": "recordEvent", "cap": e.pm, "kind": "task.synced", "body": []}),
            "invalid-request",
        ),
    ] {
        let reply = e.b.op(op.clone());
        assert_eq!(reply, json!({"ok": false, "error": code}), "{op}");
    }
    let ev = e.b.op(
        json!({"op": "recordEvent", "cap": e.pm, "kind": "task.synced",
        "body": {"task_ref": "vikunja:3/41", "note": "synced"}, "subject": "vikunja:3/41"}),
    );
    assert_eq!(ev["ok"], json!(true), "{ev}");
    let event = ev["result"]["event"].clone();
    assert!(event.is_string());
    let conn = db(e.root.path());
    let (business, role, run): (String, String, String) = conn
        .query_row(
            "SELECT business, role, run FROM events WHERE id = ?1",
            [event.as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (business.as_str(), role.as_str(), run.as_str()),
        ("acme", "pm", "run-pm"),
        "identity stamped from the cap"
    );

    let before = row_counts(e.root.path());
    let all = e.ok(&e.reader, "tasks", Value::Null);
    assert_eq!(
        all.as_array().unwrap().len(),
        3,
        "tombstones included: {all}"
    );
    assert_eq!(all[0]["priority"], json!(0));
    assert_eq!(all[2]["tombstone"], json!(true));
    let one = e.ok(&e.pm, "tasks", json!({"task_ref": "vikunja:3/42"}));
    assert_eq!(one["fields"]["title"], json!("Done"));
    assert_eq!(
        e.refused(&e.pm, "tasks", json!({"task_ref": "vikunja:3/99"})),
        "task-not-found"
    );
    let short = e.ok(&e.pm, "tasks", json!({"done": false}));
    assert_eq!(
        short,
        json!({"tasks": [{"task_ref": "vikunja:3/41", "title": "Ship", "done": false, "bucket": "Todo",
            "assignees": ["pm"], "labels": [2], "priority": 0, "requirement": null,
            "changed_at": all[0]["at"]}], "total": 1, "next": null})
    );
    assert_eq!(
        e.refused(&e.pm, "tasks", json!({"done": 1})),
        "invalid-request"
    );
    // A refused read leaves its refusal evidence, nothing else.
    assert_eq!(
        refusals(e.root.path()).last(),
        Some(&json!(["pm", "run-pm", null, "tasks", "invalid-request"]))
    );
    let st = e.ok(&e.pm, "state", Value::Null);
    assert_eq!(
        st["tasks"],
        json!({"open": [{"task_ref": "vikunja:3/41", "title": "Ship"}], "total": 1, "cap": 50})
    );
    let trail = e.ok(&e.reader, "trail", json!({"subject": "vikunja:3/41"}));
    let kinds: Vec<&str> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["record"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["task", "event"]);
    assert_eq!(trail[1]["id"], event);
    assert_eq!(row_counts(e.root.path()), before, "reads write nothing");
    e.b.close();
}

#[test]
fn reads_write_nothing() {
    let e = env_with(None);
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let m = e.ok(&e.pm, "message.send", json!({"to": "human", "body": "hi"}));
    e.ok(&e.pm, "message.send", json!({"to": "cto", "body": "hi"}));
    let before = row_counts(e.root.path());
    for cap in [&e.reader, &e.pm, &e.cto] {
        for (verb, args) in [
            ("inbox", Value::Null),
            ("agents", Value::Null),
            ("tasks", Value::Null),
            ("tasks", json!({"limit": 5})),
            ("state", Value::Null),
            ("trail", json!({"subject": m["id"]})),
            ("trail", json!({"subject": "run-pm"})),
        ] {
            e.ok(cap, verb, args);
        }
    }
    e.ok(&e.reader, "messages", Value::Null);
    e.ok(&e.reader, "replies", json!({"id": m["id"]}));
    assert_eq!(row_counts(e.root.path()), before);
    // The human's message is still undelivered after all those reads.
    let inbox = e.ok(&e.reader, "inbox", Value::Null);
    assert_eq!(inbox["messages"][0]["delivered_at"], Value::Null);
    e.b.close();
}

/// `event.emit`: a role's holder writes `action.allowed` routine
/// observations, `{action:'routine', target?}` stamped with its identity;
/// any other kind, action or key, or a string outside 1..=256 bytes, is
/// `invalid-request` and writes nothing.
#[test]
fn event_emit_writes_routine_observations_only() {
    let e = env_with(None);
    e.ok(&e.pm, "role.claim", Value::Null);
    let emit = |body: Value, subject: Option<&str>| {
        let mut a = json!({"kind": "action.allowed", "body": body});
        if let Some(s) = subject {
            a["subject"] = json!(s);
        }
        a
    };
    let long = "x".repeat(257);
    let max = "x".repeat(256);
    let stored = |id: &Value| -> (String, Option<String>, String, String, Value) {
        db(e.root.path())
            .query_row(
                "SELECT kind, subject, role, run, body FROM events WHERE id = ?1",
                [id.as_str().unwrap()],
                |r| {
                    let body: String = r.get(4)?;
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        serde_json::from_str(&body).unwrap(),
                    ))
                },
            )
            .unwrap()
    };

    let r = e.ok(
        &e.pm,
        "event.emit",
        emit(
            json!({"action": "routine", "target": max}),
            Some("vikunja:3/41"),
        ),
    );
    assert!(r["at"].is_string(), "{r}");
    assert_eq!(
        stored(&r["event"]),
        (
            "action.allowed".into(),
            Some("vikunja:3/41".into()),
            "pm".into(),
            "run-pm".into(),
            json!({"action": "routine", "target": max})
        )
    );
    let r = e.ok(
        &e.pm,
        "event.emit",
        emit(json!({"action": "routine"}), None),
    );
    assert_eq!(stored(&r["event"]).1, None);
    assert_eq!(stored(&r["event"]).4, json!({"action": "routine"}));

    let before = row_counts(e.root.path());
    for bad in [
        emit(json!({"action": "routine", "target": long}), None),
        emit(json!({"action": "routine"}), Some(&long)),
        emit(json!({"action": "routine"}), Some("")),
        emit(json!({"action": "routine", "target": ""}), None),
        emit(json!({"action": "routine", "target": 7}), None),
        emit(
            json!({"action": "task.close", "target": "vikunja:3/41"}),
            None,
        ),
        emit(json!({"action": "git.push.working", "commit": "abc"}), None),
        json!({"kind": "action.refused", "body": {"action": "routine"}}),
        json!({"kind": "review.verdict", "body": {"action": "routine"}}),
        json!({"kind": "action.allowed", "body": "routine"}),
    ] {
        assert_eq!(
            e.refused(&e.pm, "event.emit", bad.clone()),
            "invalid-request",
            "{bad}"
        );
        assert_eq!(
            refusals(e.root.path()).last(),
            Some(&json!([
                "pm",
                "run-pm",
                null,
                "event.emit",
                "invalid-request"
            ])),
            "{bad}"
        );
    }
    // A run that doesn't hold its role emits nothing.
    assert_eq!(
        e.refused(
            &e.cto,
            "event.emit",
            emit(json!({"action": "routine"}), None)
        ),
        "not-holder"
    );
    assert_eq!(
        refusals(e.root.path()).last(),
        Some(&json!(["cto", "run-cto", null, "event.emit", "not-holder"]))
    );
    assert_eq!(row_counts(e.root.path()), before);
    e.b.close();
}

/// The two bounded views hold their bound (3i L198, L210): `replies` gives
/// at most 50 replies, the oldest first, and `decisions {list:'recent'}`
/// the last 50 closed decisions, the newest close first.
#[test]
fn replies_and_the_recent_decisions_stop_at_fifty() {
    let e = env_with(None);
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let asked = e.ok(
        &e.pm,
        "message.send",
        json!({"to": "human", "body": "question"}),
    )["id"]
        .clone();
    let replies: Vec<Value> = (0..51)
        .map(|i| {
            e.ok(
                &e.cto,
                "message.send",
                json!({"to": "human", "body": format!("answer {i}"), "in_reply_to": asked}),
            )["id"]
                .clone()
        })
        .collect();
    let got = e.ok(&e.reader, "replies", json!({"id": asked}));
    let got: Vec<&Value> = got
        .as_array()
        .expect("list")
        .iter()
        .map(|r| &r["id"])
        .collect();
    let want: Vec<&Value> = replies[..50].iter().collect();
    assert_eq!(got, want, "the 50 oldest replies, oldest first");

    // 51 decisions closed at their raise (within-role), one left open.
    let raise = |choice: Option<&str>, action: &str| {
        let mut a = json!({"action": action, "target": "cto", "question": "Send?",
            "options": [{"key": "yes", "text": "Yes"}, {"key": "no", "text": "No"}],
            "recommendation": "yes", "blocking": false});
        if let Some(c) = choice {
            a["choice"] = json!(c);
        }
        e.ok(&e.pm, "decision.raise", a)["id"].clone()
    };
    let closed: Vec<Value> = (0..51)
        .map(|_| raise(Some("yes"), "message.send"))
        .collect();
    let open = raise(None, "prd.approve");
    let recent = e.ok(&e.reader, "decisions", json!({"list": "recent"}));
    let recent: Vec<&Value> = recent
        .as_array()
        .expect("list")
        .iter()
        .map(|r| &r["id"])
        .collect();
    let want: Vec<&Value> = closed[1..].iter().rev().collect();
    assert_eq!(recent, want, "the last 50 closes, the newest first");
    assert!(!recent.contains(&&open));
    e.b.close();
}
