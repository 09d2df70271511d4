//! `message.send`, `message.receive` and `message.read` on real brokers over
//! the real socket (role and reader sessions; human and tester sessions are
//! covered in process in `broker/tests/messages_human_and_tester.rs`).

use mosaic_tests::*;
use serde_json::{json, Value};

struct Env {
    root: tempfile::TempDir,
    b: Broker,
    pm: String,
    cto: String,
    dev: String,
    reader: String,
    _procs: Vec<Sleeper>,
}

fn env() -> Env {
    let root = data_root();
    let mut b = Broker::start(root.path());
    let procs: Vec<_> = (0..3).map(|_| sleeper()).collect();
    let pm = b.bind("pm", "run-pm", procs[0].id());
    let cto = b.bind("cto", "run-cto", procs[1].id());
    let dev = b.bind("dev", "run-dev", procs[2].id());
    let reader = b.reader_cap();
    Env {
        root,
        b,
        pm,
        cto,
        dev,
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
}

#[test]
fn send_receive_read_between_roles_with_evidence() {
    let e = env();
    e.ok(&e.pm, "role.claim", Value::Null);
    let sent = e.ok(
        &e.pm,
        "message.send",
        json!({"to": "cto", "body": "Review the plan"}),
    );
    let id = sent["id"].as_str().unwrap().to_string();
    assert_eq!(
        sent["request"],
        Value::Null,
        "only human instructions carry a request"
    );
    let conn = db(e.root.path());
    let (class, from_role, from_run, to_role): (String, String, String, String) = conn
        .query_row(
            "SELECT class, from_role, from_run, to_role FROM messages WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        (
            class.as_str(),
            from_role.as_str(),
            from_run.as_str(),
            to_role.as_str()
        ),
        ("INFO", "pm", "run-pm", "cto"),
        "INFO is the default class"
    );
    // Every agent send writes action.allowed, subject the recipient role.
    let (role, run, subject, body): (String, String, String, String) = conn
        .query_row(
            "SELECT role, run, subject, body FROM events WHERE kind = 'action.allowed'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        (role.as_str(), run.as_str(), subject.as_str()),
        ("pm", "run-pm", "cto")
    );
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({"action": "message.send", "target": "cto", "message": id})
    );

    // Only the current holder receives.
    assert_eq!(
        e.refused(&e.cto, "message.receive", Value::Null),
        "not-holder"
    );
    assert_eq!(
        e.refused(&e.cto, "message.read", json!({"id": id})),
        "not-holder"
    );
    e.ok(&e.cto, "role.claim", Value::Null);
    let got = e.ok(&e.cto, "message.receive", Value::Null);
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["id"], json!(id));
    assert_eq!(msgs[0]["body"], json!("Review the plan"));
    assert_eq!(msgs[0]["request"], Value::Null);
    assert!(msgs[0]["delivered_at"].is_string());
    let run: String = conn
        .query_row(
            "SELECT run FROM deliveries WHERE message = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(run, "run-cto");
    // Delivered once.
    assert_eq!(
        e.ok(&e.cto, "message.receive", Value::Null),
        json!({"messages": []})
    );
    // Only the recipient acknowledges.
    assert_eq!(
        e.refused(&e.pm, "message.read", json!({"id": id})),
        "message-not-found"
    );
    let r = e.ok(&e.cto, "message.read", json!({"id": id}));
    assert_eq!(r["id"], json!(id));
    assert_eq!(r["already"], json!(false));
    let receipt: String = conn
        .query_row(
            "SELECT run FROM read_receipts WHERE message = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(receipt, "run-cto");

    // The trail shows content and delivery evidence in write order.
    let trail = e.ok(&e.reader, "trail", json!({"subject": id}));
    let records: Vec<&str> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["record"].as_str().unwrap())
        .collect();
    assert_eq!(records, vec!["event", "message", "delivery", "read"]);
    assert_eq!(trail[0]["kind"], json!("action.allowed"));
    e.b.close();
}

#[test]
fn receive_is_oldest_first_in_batches_of_one_hundred() {
    let e = env();
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let mut ids = Vec::new();
    for i in 0..105 {
        ids.push(
            e.ok(
                &e.pm,
                "message.send",
                json!({"to": "cto", "body": format!("m{i}")}),
            )["id"]
                .clone(),
        );
    }
    let first = e.ok(&e.cto, "message.receive", Value::Null);
    let first = first["messages"].as_array().unwrap();
    assert_eq!(first.len(), 100);
    assert_eq!(first[0]["id"], ids[0]);
    assert_eq!(first[99]["id"], ids[99]);
    let second = e.ok(&e.cto, "message.receive", Value::Null);
    let second: Vec<Value> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(second, ids[100..].to_vec());
    e.b.close();
}

/// A refused send stores nothing of its own (no message, no delivery, no
/// allowed event); each refusal by a resolved caller leaves one
/// `action.refused {action, code}` against that caller (3i; this test
/// asserted "nothing at all" before, which contradicts the spec), and a
/// reader's leaves none.
#[test]
fn send_refusals_store_nothing_but_their_evidence() {
    let e = env();
    // Not the holder of its own role.
    assert_eq!(
        e.refused(&e.pm, "message.send", json!({"to": "cto", "body": "x"})),
        "not-holder"
    );
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.dev, "role.claim", Value::Null);
    let before = row_counts(e.root.path());
    let r0 = refusals(e.root.path()).len();
    // What each refusal must have left: [role, run, subject, action, code].
    let mut want: Vec<Value> = Vec::new();
    let cases = [
        (json!({"to": "nobody", "body": "x"}), "unknown-role"),
        (json!({"to": "_bus", "body": "x"}), "unknown-role"),
        // BLOCK is a class of message.send now (3i row 143), under its
        // own rules: the pm's BLOCK to anyone but the chief of staff.
        (
            json!({"to": "cto", "body": "x", "class": "BLOCK"}),
            "block-recipient",
        ),
        (
            json!({"to": "cto", "body": "x", "class": "STAFF-REQUEST"}),
            "invalid-class",
        ),
        (
            json!({"to": "cto", "body": "x", "class": "info"}),
            "invalid-class",
        ),
        (
            json!({"to": "cto", "body": "x", "from_role": "human"}),
            "invalid-request",
        ),
        (json!({"to": "cto"}), "invalid-request"),
        (json!({"to": "cto", "body": ""}), "invalid-request"),
        (json!({"to": "cto", "body": 5}), "invalid-request"),
        (
            json!({"to": "cto", "body": "x", "in_reply_to": "00000000-0000-4000-8000-000000000000"}),
            "message-not-found",
        ),
        (
            json!({"to": "cto", "body": "x", "corrects": "nope"}),
            "message-not-found",
        ),
        (
            json!({"to": "cto", "body": "x", "decision": "00000000-0000-4000-8000-000000000000"}),
            "decision-not-found",
        ),
        (
            json!({"to": "tester", "body": "x"}),
            "tester-reply-required",
        ),
    ];
    for (args, code) in cases {
        assert_eq!(
            e.refused(&e.pm, "message.send", args.clone()),
            code,
            "{args}"
        );
        want.push(json!(["pm", "run-pm", null, "message.send", code]));
    }
    // A role without message.send in its withinRole needs an authorizing decision.
    assert_eq!(
        e.refused(&e.dev, "message.send", json!({"to": "pm", "body": "x"})),
        "decision-required"
    );
    assert_eq!(
        e.refused(
            &e.dev,
            "message.send",
            json!({"to": "pm", "body": "x", "decision": "00000000-0000-4000-8000-000000000000"})
        ),
        "decision-not-found"
    );
    for code in ["decision-required", "decision-not-found"] {
        want.push(json!(["dev", "run-dev", null, "message.send", code]));
    }
    // Readers never mutate, and leave no evidence.
    assert_eq!(
        e.refused(&e.reader, "message.send", json!({"to": "pm", "body": "x"})),
        "read-only"
    );
    assert_eq!(
        e.refused(&e.reader, "message.receive", Value::Null),
        "read-only"
    );
    assert_eq!(
        e.refused(&e.reader, "message.read", json!({"id": "x"})),
        "read-only"
    );
    assert_eq!(
        e.refused(&e.pm, "message.receive", json!({"x": 1})),
        "invalid-request"
    );
    assert_eq!(
        e.refused(&e.pm, "message.read", json!({})),
        "invalid-request"
    );
    assert_eq!(
        e.refused(&e.pm, "message.read", json!({"id": "nope"})),
        "message-not-found"
    );
    want.push(json!([
        "pm",
        "run-pm",
        null,
        "message.receive",
        "invalid-request"
    ]));
    want.push(json!([
        "pm",
        "run-pm",
        null,
        "message.read",
        "invalid-request"
    ]));
    want.push(json!([
        "pm",
        "run-pm",
        null,
        "message.read",
        "message-not-found"
    ]));
    assert_eq!(row_counts(e.root.path()), before);
    assert_eq!(refusals(e.root.path())[r0..], want[..]);
    e.b.close();
}

#[test]
fn stranded_messages_are_never_redelivered_or_read_by_a_new_holder() {
    let mut e = env();
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let m = e.ok(
        &e.pm,
        "message.send",
        json!({"to": "cto", "body": "left unread"}),
    );
    let got = e.ok(&e.cto, "message.receive", Value::Null);
    assert_eq!(got["messages"][0]["id"], m["id"]);
    e.ok(&e.cto, "role.release", Value::Null);
    // A later message waits for the next holder.
    let later = e.ok(
        &e.pm,
        "message.send",
        json!({"to": "cto", "body": "for the next holder"}),
    );
    let p = sleeper();
    let cto2 = e.b.bind("cto", "run-cto-2", p.id());
    e._procs.push(p);
    e.ok(&cto2, "role.claim", Value::Null);
    let got = e.ok(&cto2, "message.receive", Value::Null);
    let ids: Vec<&Value> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(
        ids,
        vec![&later["id"]],
        "the stranded message is not redelivered"
    );
    assert_eq!(
        e.refused(&cto2, "message.read", json!({"id": m["id"]})),
        "not-holder"
    );
    assert_eq!(
        e.refused(&e.cto, "message.read", json!({"id": m["id"]})),
        "not-holder"
    );
    let agents = e.ok(&e.reader, "agents", Value::Null);
    let cto = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == "cto")
        .unwrap();
    assert_eq!(cto["run"], json!("run-cto-2"));
    assert_eq!(
        cto["stranded"],
        json!([{"id": m["id"], "from": "pm", "run": "run-cto", "at": cto["stranded"][0]["at"]}])
    );
    assert!(cto["stranded"][0]["at"].is_string());
    assert_eq!(cto["state"], json!("working"));
    assert_eq!(cto["working"]["messages"], json!(1));
    e.ok(&cto2, "message.read", json!({"id": later["id"]}));
    let agents = e.ok(&e.reader, "agents", Value::Null);
    let cto = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == "cto")
        .unwrap();
    assert_eq!(cto["state"], json!("idle"));
    assert_eq!(
        cto["stranded"].as_array().unwrap().len(),
        1,
        "stranded stays listed"
    );
    e.b.close();
}

#[test]
fn replies_chain_and_reply_to_tester_rule() {
    let e = env();
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let q = e.ok(
        &e.pm,
        "message.send",
        json!({"to": "cto", "body": "q", "class": "REQUEST"}),
    );
    let a = e.ok(
        &e.cto,
        "message.send",
        json!({"to": "pm", "body": "a", "class": "RESULT", "in_reply_to": q["id"]}),
    );
    let c = e.ok(
        &e.cto,
        "message.send",
        json!({"to": "pm", "body": "a, corrected", "corrects": a["id"]}),
    );
    // A reply to a role's message is no reply to a tester.
    assert_eq!(
        e.refused(
            &e.cto,
            "message.send",
            json!({"to": "tester", "body": "x", "in_reply_to": q["id"]})
        ),
        "tester-reply-required"
    );
    let replies = e.ok(&e.reader, "replies", json!({"id": q["id"]}));
    assert_eq!(replies.as_array().unwrap().len(), 1);
    assert_eq!(replies[0]["id"], a["id"]);
    assert_eq!(replies[0]["in_reply_to"], q["id"]);
    let conn = db(e.root.path());
    let corrects: String = conn
        .query_row(
            "SELECT corrects FROM messages WHERE id = ?1",
            [c["id"].as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(Value::String(corrects), a["id"]);
    e.b.close();
}

/// A reply bigger than the socket buffer: the writer thread writes what the
/// socket takes without blocking and the connection's I/O task writes the
/// rest, so the client still reads the whole line and then end of file.
#[test]
fn a_reply_larger_than_the_socket_buffer_arrives_whole() {
    let e = env();
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let body = "x".repeat(50 * 1024);
    for _ in 0..20 {
        e.ok(&e.pm, "message.send", json!({"to": "cto", "body": body}));
    }
    // About 1 MiB of reply against a socket buffer of about 200 KiB.
    let got = e.ok(&e.cto, "message.receive", Value::Null);
    let msgs = got["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 20);
    assert!(msgs.iter().all(|m| m["body"] == json!(body)));
}

/// A reply always fits the client's 4 MiB cap: a backlog of large messages
/// comes over in several `message.receive` batches, oldest first, none
/// skipped or stranded; the inbox lists as many of them as fit (issue 34:
/// it stops its messages short of the cap); a read that would not fit
/// refuses `response-too-large` and writes nothing ("Oversized reads
/// refuse"): a `messages` page of 200 large messages to the human.
#[test]
fn large_backlogs_fit_the_client_reply_cap() {
    use mosaic_bus::client::Client;
    let e = env();
    e.ok(&e.pm, "role.claim", Value::Null);
    e.ok(&e.cto, "role.claim", Value::Null);
    let body = "x".repeat(60 * 1024);
    let sent: Vec<Value> = (0..80)
        .map(|_| e.ok(&e.pm, "message.send", json!({"to": "cto", "body": body}))["id"].clone())
        .collect();
    // All 80 would be about 4.8 MB: the inbox lists the first ones that fit.
    let inbox = e.ok(&e.cto, "inbox", Value::Null);
    let listed = inbox["messages"].as_array().expect("messages");
    assert!(listed.len() > 40 && listed.len() < 80, "{}", listed.len());
    assert_eq!(listed[0]["id"], sent[0]);
    for _ in 0..80 {
        e.ok(&e.pm, "message.send", json!({"to": "human", "body": body}));
    }
    let before = row_counts(e.root.path());
    let r = e.b.call(&e.reader, "messages", json!({"limit": 200}));
    assert_eq!(r, json!({"ok": false, "error": "response-too-large"}));
    let with_id = json!({"cap": e.reader, "verb": "messages", "args": {"limit": 200}, "id": 3});
    assert_eq!(
        raw_request(&e.b.socket, format!("{with_id}\n").as_bytes()),
        json!({"ok": false, "error": "response-too-large", "id": 3})
    );
    assert_eq!(
        row_counts(e.root.path()),
        before,
        "a refused read writes nothing"
    );
    // Every batch fits the Rust client's cap; together they are the backlog.
    let client = Client::new(&e.b.socket, e.cto.clone());
    let mut got = Vec::new();
    let mut batches = 0;
    loop {
        let r = client
            .call("message.receive", Value::Null)
            .expect("a message.receive reply fits the client's cap");
        let ms = r["messages"].as_array().expect("messages").clone();
        if ms.is_empty() {
            break;
        }
        batches += 1;
        got.extend(ms.iter().map(|m| m["id"].clone()));
    }
    assert!(batches >= 2, "{batches}");
    assert_eq!(got, sent);
    // All of them were delivered to this holder, so it can read each one.
    for id in &sent {
        e.ok(&e.cto, "message.read", json!({"id": id}));
    }
    e.b.close();
}
