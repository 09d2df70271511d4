//! Human, tester and known-token paths of the message verbs and the shared
//! reads, in process: a real `Core` on a real store in a private data root,
//! calling `handlers::dispatch` as the socket would after the proof gate.
//! (Shim sessions can't reach a child broker's socket yet.)

mod common;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::error::Code;
use mosaic_bus::store::Store;
use serde_json::{json, Value};
#[path = "support/mht_env.rs"]
mod mht_env;
use mht_env::{biz, human, reader, role, tester, Env};

#[test]
fn human_instruction_carries_its_human_input_as_request() {
    let mut e = Env::new();
    let cto = role("cto", "run-c");
    e.ok(&cto, "role.claim", Value::Null);
    let sent = e.ok(
        &human(),
        "message.send",
        json!({"to": "cto", "body": "Ship it", "class": "REQUEST"}),
    );
    let id = sent["id"].as_str().unwrap().to_string();
    let request = sent["request"].as_str().unwrap().to_string();
    // The request is the human.input event, written first and naming the message.
    let (kind, body): (String, String) = e
        .core
        .store
        .db()
        .sql()
        .query_row(
            "SELECT kind, body FROM events WHERE id = ?1",
            [&request],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(kind, "human.input");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["message"], json!(id));
    // A human send needs no authority and writes no action.allowed.
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE kind = 'action.allowed'"),
        0
    );
    let got = e.ok(&cto, "message.receive", Value::Null);
    let m = &got["messages"][0];
    assert_eq!(m["id"], json!(id));
    assert_eq!(m["request"], json!(request));
    assert_eq!(m["from_role"], json!("human"));
    assert_eq!(m["from_run"], json!("human-cli"));
    assert_eq!(m["class"], json!("REQUEST"));
}

#[test]
fn human_addresses_roles_only() {
    let mut e = Env::new();
    for to in ["tester", "human", "nobody", "_bus"] {
        assert_eq!(
            e.call(&human(), "message.send", json!({"to": to, "body": "x"})),
            Err(Code::UnknownRole),
            "{to}"
        );
    }
    // A reference to another business's message is not found.
    let other = Caller::Human {
        business: "beta".into(),
    };
    let theirs = e.ok(&other, "message.send", json!({"to": "pm", "body": "beta"}));
    assert_eq!(
        e.call(
            &human(),
            "message.send",
            json!({"to": "pm", "body": "x", "in_reply_to": theirs["id"]})
        ),
        Err(Code::MessageNotFound)
    );
    assert_eq!(
        e.call(
            &human(),
            "message.send",
            json!({"to": "pm", "body": "x", "corrects": theirs["id"]})
        ),
        Err(Code::MessageNotFound)
    );
    let d = e.raise("beta", "pm", "human", "gated");
    assert_eq!(
        e.call(
            &human(),
            "message.send",
            json!({"to": "pm", "body": "x", "decision": d})
        ),
        Err(Code::DecisionNotFound)
    );
    let mine = e.raise("acme", "pm", "human", "gated");
    let s = e.ok(
        &human(),
        "message.send",
        json!({"to": "pm", "body": "x", "decision": mine}),
    );
    let stored = e.message_decision(&s);
    assert_eq!(stored.as_deref(), Some(mine.as_str()));
}

/// 3i: "the definitions' messaging lists apply as for message.send". A
/// sender that declares lists must name the recipient in `sendTo`, a
/// recipient that declares them the sender in `receiveFrom` (by definition,
/// or `human`); a refusal is `not-authorized` and writes nothing. The
/// tester is outside the lists.
#[test]
fn messaging_lists_bind_message_send_when_declared() {
    let mut acme = biz("acme");
    // An arbiter may not declare messaging lists (3i): dev, which has none,
    // arbitrates here.
    acme["arbiters"] = json!({"technical": "dev", "delivery": "dev"});
    acme["roles"]["pm"]["definition"] = json!("product");
    acme["roles"]["pm"]["messaging"] =
        json!({"sendTo": ["cto", "human"], "receiveFrom": ["cto", "human"]});
    acme["roles"]["cto"]["messaging"] = json!({"sendTo": ["product"], "receiveFrom": ["product"]});
    acme["roles"]["dev"]["authority"]["withinRole"] = json!(["message.send"]);
    let mut e = Env::build(acme, None);
    let (pm, cto, dev) = (
        role("pm", "run-p"),
        role("cto", "run-c"),
        role("dev", "run-d"),
    );
    for r in [&pm, &cto, &dev] {
        e.ok(r, "role.claim", Value::Null);
    }
    // Listed both ways.
    e.ok(&pm, "message.send", json!({"to": "cto", "body": "plan"}));
    e.ok(&cto, "message.send", json!({"to": "pm", "body": "ok"}));
    e.ok(&pm, "message.send", json!({"to": "human", "body": "done"}));
    e.ok(&human(), "message.send", json!({"to": "pm", "body": "go"}));
    // dev declares no lists, but pm and cto only receive from their lists.
    let before = e.counts();
    let r0 = e.refusals().len();
    for (from, to) in [(&dev, "pm"), (&dev, "cto")] {
        assert_eq!(
            e.call(from, "message.send", json!({"to": to, "body": "x"})),
            Err(Code::NotAuthorized),
            "dev -> {to}"
        );
    }
    // pm's sendTo doesn't list dev; cto's lists don't name the human.
    assert_eq!(
        e.call(&pm, "message.send", json!({"to": "dev", "body": "x"})),
        Err(Code::NotAuthorized)
    );
    assert_eq!(
        e.call(&cto, "message.send", json!({"to": "human", "body": "x"})),
        Err(Code::NotAuthorized)
    );
    assert_eq!(
        e.call(&human(), "message.send", json!({"to": "cto", "body": "x"})),
        Err(Code::NotAuthorized)
    );
    // A refused send writes nothing of its own; each refusal is on record
    // against its caller (3i: refusal evidence), with no task to file it on.
    assert_eq!(e.counts(), before, "a refused send stores no message");
    let refused = |who: &str, run: &str| json!([who, run, null, "message.send", "not-authorized"]);
    assert_eq!(
        e.refusals()[r0..],
        [
            refused("dev", "run-d"),
            refused("dev", "run-d"),
            refused("pm", "run-p"),
            refused("cto", "run-c"),
            refused("human", "human-cli"),
        ]
    );
    // No lists on either side: anyone.
    e.ok(&dev, "message.send", json!({"to": "human", "body": "hi"}));
    e.ok(&human(), "message.send", json!({"to": "dev", "body": "hi"}));
    // The tester is outside the lists both ways.
    let t = e.ok(
        &tester(),
        "message.send",
        json!({"to": "cto", "body": "[mos test] ping"}),
    );
    e.ok(
        &cto,
        "message.send",
        json!({"to": "tester", "body": "pong", "in_reply_to": t["id"]}),
    );
}

#[test]
fn human_receives_and_reads_messages_to_human() {
    let mut e = Env::new();
    let pm = role("pm", "run-p");
    e.ok(&pm, "role.claim", Value::Null);
    let s = e.ok(
        &pm,
        "message.send",
        json!({"to": "human", "body": "Done", "class": "RESULT"}),
    );
    let id = s["id"].clone();
    assert_eq!(s["request"], Value::Null);
    // Reading before delivery: never delivered.
    assert_eq!(
        e.call(&human(), "message.read", json!({"id": id})),
        Err(Code::NotDelivered)
    );
    let got = e.ok(&human(), "message.receive", Value::Null);
    assert_eq!(got["messages"].as_array().unwrap().len(), 1);
    assert_eq!(got["messages"][0]["id"], id);
    let run: String = e
        .core
        .store
        .db()
        .sql()
        .query_row(
            "SELECT run FROM deliveries WHERE message = ?1",
            [id.as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(run, "human-cli");
    assert_eq!(
        e.ok(&human(), "message.receive", Value::Null)["messages"],
        json!([])
    );
    let r = e.ok(&human(), "message.read", json!({"id": id}));
    assert_eq!(r["already"], json!(false));
    // A second acknowledgement writes nothing.
    let before = e.counts();
    assert_eq!(
        e.ok(&human(), "message.read", json!({"id": id}))["already"],
        json!(true)
    );
    assert_eq!(e.counts(), before);
    // The tester can't read the human's message.
    assert_eq!(
        e.call(&tester(), "message.read", json!({"id": id})),
        Err(Code::MessageNotFound)
    );
    // Unknown ids.
    assert_eq!(
        e.call(
            &human(),
            "message.read",
            json!({"id": "00000000-0000-4000-8000-000000000000"})
        ),
        Err(Code::MessageNotFound)
    );
}

#[test]
fn tester_rules() {
    let mut e = Env::new();
    let cto = role("cto", "run-c");
    e.ok(&cto, "role.claim", Value::Null);
    assert_eq!(
        e.call(
            &tester(),
            "message.send",
            json!({"to": "cto", "body": "hello"})
        ),
        Err(Code::TesterPrefix)
    );
    assert_eq!(
        e.call(
            &tester(),
            "message.send",
            json!({"to": "human", "body": "[mos test] hi"})
        ),
        Err(Code::UnknownRole)
    );
    assert_eq!(
        e.call(
            &tester(),
            "message.send",
            json!({"to": "tester", "body": "[mos test] hi"})
        ),
        Err(Code::UnknownRole)
    );
    let d = e.raise("acme", "cto", "human", "gated");
    assert_eq!(
        e.call(
            &tester(),
            "message.send",
            json!({"to": "cto", "body": "[mos test] hi", "decision": d})
        ),
        Err(Code::InvalidRequest)
    );
    let events = e.count("SELECT count(*) FROM events");
    let t = e.ok(
        &tester(),
        "message.send",
        json!({"to": "cto", "body": "[mos test] ping"}),
    );
    assert_eq!(t["request"], Value::Null);
    // No request and no event back a tester's message.
    assert_eq!(e.count("SELECT count(*) FROM events"), events);
    let (from_role, from_run, request): (String, String, Option<String>) = e
        .core
        .store
        .db()
        .sql()
        .query_row(
            "SELECT from_role, from_run, request FROM messages WHERE id = ?1",
            [t["id"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (from_role.as_str(), from_run.as_str(), request),
        ("tester", "tester-cli", None)
    );
    assert_eq!(
        e.call(
            &tester(),
            "message.send",
            json!({"to": "cto", "body": "[mos test] c", "corrects": t["id"]})
        ),
        Err(Code::InvalidRequest)
    );

    // A role answers at the tester address only in reply to a tester's message.
    let h = e.ok(
        &human(),
        "message.send",
        json!({"to": "cto", "body": "from human"}),
    );
    assert_eq!(
        e.call(
            &cto,
            "message.send",
            json!({"to": "tester", "body": "pong"})
        ),
        Err(Code::TesterReplyRequired)
    );
    assert_eq!(
        e.call(
            &cto,
            "message.send",
            json!({"to": "tester", "body": "pong", "in_reply_to": h["id"]})
        ),
        Err(Code::TesterReplyRequired)
    );
    let reply = e.ok(
        &cto,
        "message.send",
        json!({"to": "tester", "body": "pong", "in_reply_to": t["id"], "class": "RESULT"}),
    );
    // It reaches the tester, never the human's receive or feed.
    assert_eq!(
        e.ok(&human(), "message.receive", Value::Null)["messages"],
        json!([])
    );
    assert_eq!(e.ok(&human(), "messages", json!({}))["total"], json!(0));
    let got = e.ok(&tester(), "message.receive", Value::Null);
    assert_eq!(got["messages"][0]["id"], reply["id"]);
    e.ok(&tester(), "message.read", json!({"id": reply["id"]}));
    // The tester's replies view shows it.
    let r = e.ok(&tester(), "replies", json!({"id": t["id"]}));
    assert_eq!(r[0]["id"], reply["id"]);

    // Verbs outside the tester's set are tester-refused (L218), human-only
    // ones too; a row that names human-required for the tester
    // (instances, L214) wins over it (docs/decisions.md).
    let r0 = e.refusals().len();
    for (verb, code) in [
        ("state", Code::TesterRefused),
        ("requirements", Code::TesterRefused),
        ("role.claim", Code::TesterRefused),
        ("event.emit", Code::TesterRefused),
        ("credentials", Code::TesterRefused),
        ("launch.revoke", Code::TesterRefused),
        ("launch.restore", Code::TesterRefused),
        ("instances", Code::HumanRequired),
    ] {
        assert_eq!(e.call(&tester(), verb, Value::Null), Err(code), "{verb}");
        // Each on record against the tester.
        assert_eq!(
            e.refusals().last(),
            Some(&json!(["tester", "tester-cli", null, verb, code.as_str()]))
        );
    }
    assert_eq!(e.refusals().len(), r0 + 8);
    for verb in ["inbox", "agents", "tasks", "messages"] {
        e.ok(&tester(), verb, Value::Null);
    }
}

#[test]
fn requirements_are_for_role_sessions() {
    let file = json!({"prd": "PRD 1.6", "version": "1.6", "requirements": [{"id": "REQ-MSG-1", "title": "Send"}]});
    let mut e = Env::with_requirements(Some(file.clone()));
    assert_eq!(
        e.ok(&role("dev", "run-d"), "requirements", Value::Null),
        file
    );
    assert_eq!(
        e.call(&human(), "requirements", Value::Null),
        Err(Code::AgentRequired)
    );
    assert_eq!(
        e.call(&reader(), "requirements", Value::Null),
        Err(Code::ReadOnly)
    );
    assert_eq!(
        e.call(&role("dev", "run-d"), "requirements", json!({"x": 1})),
        Err(Code::InvalidRequest)
    );
    let mut none = Env::new();
    assert_eq!(
        none.ok(&role("dev", "run-d"), "requirements", Value::Null),
        json!({"prd": null, "version": null, "requirements": []})
    );
}

#[test]
fn human_inbox_and_messages_feed() {
    let mut e = Env::new();
    let pm = role("pm", "run-p");
    e.ok(&pm, "role.claim", Value::Null);
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            e.ok(
                &pm,
                "message.send",
                json!({"to": "human", "body": format!("m{i}")}),
            )["id"]
                .clone(),
        );
    }
    let d = e.raise("acme", "pm", "human", "gated");
    let _to_role = e.raise("acme", "pm", "cto", "cross-role");
    let inbox = e.ok(&human(), "inbox", Value::Null);
    assert_eq!(inbox["decisions"].as_array().unwrap().len(), 1);
    assert_eq!(inbox["decisions"][0]["id"], json!(d));
    assert_eq!(
        inbox["decisions"][0]["authorization"],
        json!({"action": "prd.approve", "target": null, "approvalChoice": "yes"})
    );
    assert_eq!(inbox["decisions"][0]["options"][1]["key"], json!("no"));
    assert_eq!(inbox["messages"].as_array().unwrap().len(), 5);
    assert_eq!(inbox["messages"][0]["id"], ids[0]);

    e.ok(&human(), "message.receive", Value::Null);
    e.ok(&human(), "message.read", json!({"id": ids[1]}));
    let page = e.ok(&reader(), "messages", json!({"limit": 2}));
    assert_eq!(page["total"], json!(5));
    assert_eq!(page["unread"], json!(4));
    assert_eq!(page["messages"][0]["id"], ids[4], "newest first");
    assert_eq!(page["messages"][1]["id"], ids[3]);
    assert_eq!(page["next"], ids[3]);
    let page2 = e.ok(
        &human(),
        "messages",
        json!({"limit": 2, "after": page["next"]}),
    );
    assert_eq!(page2["messages"][0]["id"], ids[2]);
    assert_eq!(page2["messages"][1]["id"], ids[1]);
    assert_eq!(page2["messages"][1]["read"], json!(true));
    assert_eq!(page2["messages"][0]["read"], json!(false));
    let page3 = e.ok(
        &human(),
        "messages",
        json!({"limit": 2, "after": page2["next"]}),
    );
    assert_eq!(page3["messages"].as_array().unwrap().len(), 1);
    assert_eq!(page3["next"], Value::Null);
    let inbox = e.ok(&human(), "inbox", Value::Null);
    assert_eq!(
        inbox["messages"].as_array().unwrap().len(),
        4,
        "read messages leave the inbox"
    );

    // Cursors outside the human feed, malformed args, role sessions.
    let to_role = e.ok(&human(), "message.send", json!({"to": "pm", "body": "x"}));
    assert_eq!(
        e.call(&human(), "messages", json!({"after": to_role["id"]})),
        Err(Code::MessageNotFound)
    );
    assert_eq!(
        e.call(&human(), "messages", json!({"after": "nope"})),
        Err(Code::MessageNotFound)
    );
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 201}),
        json!({"limit": "5"}),
        json!({"limit": 1.5}),
        json!({"x": 1}),
        json!({"after": 3}),
    ] {
        assert_eq!(
            e.call(&human(), "messages", bad.clone()),
            Err(Code::InvalidRequest),
            "{bad}"
        );
    }
    assert_eq!(
        e.ok(&human(), "messages", json!({"limit": 200}))["messages"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(
        e.call(&pm, "messages", Value::Null),
        Err(Code::HumanRequired)
    );
}

#[test]
fn replies_rules() {
    let mut e = Env::new();
    let pm = role("pm", "run-p");
    e.ok(&pm, "role.claim", Value::Null);
    let q = e.ok(&human(), "message.send", json!({"to": "pm", "body": "q"}));
    let a1 = e.ok(
        &pm,
        "message.send",
        json!({"to": "human", "body": "a1", "in_reply_to": q["id"]}),
    );
    let a2 = e.ok(
        &pm,
        "message.send",
        json!({"to": "human", "body": "a2", "in_reply_to": q["id"], "class": "RESULT"}),
    );
    let r = e.ok(&human(), "replies", json!({"id": q["id"]}));
    assert_eq!(
        r.as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].clone())
            .collect::<Vec<_>>(),
        vec![a1["id"].clone(), a2["id"].clone()]
    );
    assert_eq!(r[1]["class"], json!("RESULT"));
    assert_eq!(
        e.ok(&reader(), "replies", json!({"id": a1["id"]})),
        json!([])
    );
    assert_eq!(
        e.call(&pm, "replies", json!({"id": q["id"]})),
        Err(Code::HumanRequired)
    );
    assert_eq!(
        e.call(&human(), "replies", json!({"id": "nope"})),
        Err(Code::MessageNotFound)
    );
    let beta = Caller::Human {
        business: "beta".into(),
    };
    assert_eq!(
        e.call(&beta, "replies", json!({"id": q["id"]})),
        Err(Code::MessageNotFound)
    );
    assert_eq!(
        e.call(&human(), "replies", json!({})),
        Err(Code::InvalidRequest)
    );
    assert_eq!(
        e.call(&human(), "replies", json!({"id": q["id"], "x": 1})),
        Err(Code::InvalidRequest)
    );
    // The read writes no deliveries: the replies still reach the human's receive.
    assert_eq!(
        e.ok(&human(), "message.receive", Value::Null)["messages"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Trail of an unknown subject is empty, where replies refuses.
    assert_eq!(
        e.ok(&human(), "trail", json!({"subject": "nope"})),
        json!([])
    );
}

#[test]
fn human_and_reader_reads_write_nothing() {
    let mut e = Env::new();
    let pm = role("pm", "run-p");
    e.ok(&pm, "role.claim", Value::Null);
    let m = e.ok(&human(), "message.send", json!({"to": "pm", "body": "q"}));
    e.ok(
        &pm,
        "message.send",
        json!({"to": "human", "body": "a", "in_reply_to": m["id"]}),
    );
    e.raise("acme", "pm", "human", "gated");
    let before = e.counts();
    for c in [human(), reader(), tester()] {
        for (verb, args) in [
            ("inbox", Value::Null),
            ("agents", Value::Null),
            ("tasks", Value::Null),
            ("trail", json!({"subject": m["id"]})),
            ("replies", json!({"id": m["id"]})),
            ("messages", json!({"limit": 10})),
        ] {
            e.ok(&c, verb, args);
        }
    }
    e.ok(&human(), "state", Value::Null);
    e.ok(&pm, "inbox", Value::Null);
    e.ok(&pm, "agents", Value::Null);
    e.ok(&pm, "state", Value::Null);
    assert_eq!(e.counts(), before);
}

#[test]
fn within_role_decision_is_a_citation_cross_role_needs_authority() {
    let mut e = Env::new();
    let (pm, dev) = (role("pm", "run-p"), role("dev", "run-d"));
    e.ok(&pm, "role.claim", Value::Null);
    e.ok(&dev, "role.claim", Value::Null);
    let d = e.raise("acme", "pm", "human", "gated");
    // Cited repeatedly, never consumed, stored on the message, not in action.allowed.
    for _ in 0..2 {
        let s = e.ok(
            &pm,
            "message.send",
            json!({"to": "cto", "body": "per decision", "decision": d}),
        );
        let stored = e.message_decision(&s);
        assert_eq!(stored.as_deref(), Some(d.as_str()));
    }
    let bodies: Vec<String> = {
        let conn = e.core.store.db().sql();
        let mut st = conn
            .prepare("SELECT body FROM events WHERE kind = 'action.allowed' ORDER BY seq")
            .unwrap();
        let rows = st.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    assert_eq!(bodies.len(), 2);
    assert!(bodies.iter().all(|b| !b.contains(&d)), "{bodies:?}");
    assert_eq!(e.count("SELECT count(*) FROM decision_events"), 0);
    // The decision's trail lists the decision and the messages citing it, in write order.
    let trail = e.ok(&reader(), "trail", json!({"subject": d}));
    let recs: Vec<&str> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["record"].as_str().unwrap())
        .collect();
    assert_eq!(recs, vec!["decision", "message", "message"]);
    // A decision of another business is not found; a send outside the role needs authority.
    let other = e.raise("beta", "pm", "human", "gated");
    assert_eq!(
        e.call(
            &pm,
            "message.send",
            json!({"to": "cto", "body": "x", "decision": other})
        ),
        Err(Code::DecisionNotFound)
    );
    assert_eq!(
        e.call(
            &dev,
            "message.send",
            json!({"to": "cto", "body": "x", "decision": d})
        ),
        Err(Code::DecisionMismatch)
    );
    // Without a decision, a send outside the role needs one.
    assert_eq!(
        e.call(&dev, "message.send", json!({"to": "cto", "body": "x"})),
        Err(Code::DecisionRequired)
    );
    assert_eq!(
        e.count("SELECT count(*) FROM events WHERE role = 'dev' AND kind = 'action.allowed'"),
        0
    );
}

#[test]
fn unread_index_follows_commits_only_and_matches_a_reopen() {
    let mut e = Env::new();
    let (pm, cto) = (role("pm", "run-p"), role("cto", "run-c"));
    e.ok(&pm, "role.claim", Value::Null);
    e.ok(&cto, "role.claim", Value::Null);
    let a = e.ok(&pm, "message.send", json!({"to": "cto", "body": "a"}));
    let b = e.ok(&pm, "message.send", json!({"to": "cto", "body": "b"}));
    e.ok(&cto, "message.receive", Value::Null);
    e.ok(&cto, "message.read", json!({"id": a["id"]}));
    // A delivery and a receipt in a transaction that rolls back leave no trace.
    let c = e.ok(&pm, "message.send", json!({"to": "cto", "body": "c"}));
    let (cid, bid) = (
        c["id"].as_str().unwrap().to_string(),
        b["id"].as_str().unwrap().to_string(),
    );
    let r = e.core.store.write(|t| {
        mosaic_bus::store::messages::insert_delivery(t, &cid, "run-c")?;
        mosaic_bus::store::messages::insert_read_receipt(t, &bid, "run-c")?;
        Err::<(), _>(Code::InvalidRequest)
    });
    assert_eq!(r, Err(Code::InvalidRequest));
    let agents = e.ok(&human(), "agents", Value::Null);
    let row = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["role"] == "cto")
        .unwrap()
        .clone();
    assert_eq!(row["working"]["messages"], json!(1));
    // Reopening the store rebuilds the same index from the evidence.
    let cfg = e.core.config.clone();
    let store = Store::open(&e.bus.db_path()).unwrap();
    e.core = Core::new(store, cfg);
    assert_eq!(e.ok(&human(), "agents", Value::Null), agents);
    e.ok(&cto, "message.read", json!({"id": b["id"]}));
    let agents = e.ok(&human(), "agents", Value::Null);
    let row = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["role"] == "cto")
        .unwrap()
        .clone();
    assert_eq!(row["working"], Value::Null);
    assert_eq!(row["state"], json!("idle"));
}

#[test]
fn credentials_are_for_human_and_reader_sessions() {
    let mut e = Env::new();
    // No credentials loaded here: an empty list, never a refusal.
    assert_eq!(e.ok(&human(), "credentials", Value::Null), json!([]));
    assert_eq!(e.ok(&reader(), "credentials", Value::Null), json!([]));
    assert_eq!(
        e.call(&role("pm", "run-p"), "credentials", Value::Null),
        Err(Code::HumanRequired)
    );
    assert_eq!(
        e.call(&tester(), "credentials", Value::Null),
        Err(Code::TesterRefused)
    );
    assert_eq!(
        e.call(&human(), "credentials", json!({"business": "acme"})),
        Err(Code::InvalidRequest)
    );
}
