//! `staff.request` (3i row 140, issue 23) through the real broker: runs
//! bound to real processes, the human through the real shim, the message
//! and its evidence read back from the real store.

use mosaic_tests::*;
use serde_json::{json, Value};
use std::path::Path;

const TASK: &str = "vikunja:3/41";

fn role(def: &str, within: Value) -> Value {
    json!({"definition": def, "authority": {"withinRole": within, "crossRole": []}})
}

/// acme: the chief of staff launches; `pm` may send, `pm-quiet`'s lists
/// don't reach the chief; `dev` is no pm. solo: its launcher is a pm.
fn config(root: &Path) -> Value {
    let mut quiet = role("pm", json!(["message.send"]));
    quiet["messaging"] = json!({"sendTo": ["dev"], "receiveFrom": ["human"]});
    json!({
        "dataRoot": root.to_str().expect("utf-8"),
        "businesses": {
            "acme": {
                "id": "acme", "human": "Ada",
                "arbiters": {"technical": "pm", "delivery": "pm"},
                "roles": {
                    "chief": role("chief-of-staff", json!(["message.send"])),
                    "pm": role("pm", json!(["message.send"])),
                    "pm-quiet": quiet,
                    "dev": role("dev", json!(["message.send"])),
                },
                "launch": {"by": "chief", "instances": ["pm", "pm-quiet", "dev"]},
            },
            "solo": {
                "id": "solo", "human": "Sol",
                "arbiters": {"technical": "lead", "delivery": "lead"},
                "roles": {"lead": role("pm", json!(["message.send"])),
                          "dev": role("dev", json!([]))},
                "launch": {"by": "lead", "instances": ["dev"]},
            },
        },
        "readers": ["acme"],
    })
}

#[test]
fn the_pm_asks_the_chief_of_staff_for_staff() {
    let dir = data_root();
    let root = dir.path();
    let (mut b, reply) = Broker::spawn(root, config(root));
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let procs: Vec<Sleeper> = (0..5).map(|_| sleeper()).collect();
    let chief = b.claimed_in("acme", "chief", "chief-1", procs[0].id());
    let pm = b.claimed_in("acme", "pm", "pm-1", procs[1].id());
    let quiet = b.claimed_in("acme", "pm-quiet", "pmq-1", procs[2].id());
    let dev = b.claimed_in("acme", "dev", "dev-1", procs[3].id());
    let lead = b.claimed_in("solo", "lead", "lead-1", procs[4].id());
    let human = ShimSession::human(&b);
    let good = json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 2}],
                      "note": "the launch week"});
    let c = db(root);
    let messages = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
            .expect("count")
    };

    // Who may: a pm instance only, to a chief-of-staff launcher, within
    // the messaging lists.
    assert_eq!(
        err(&b.call(&dev, "staff.request", good.clone())),
        "staff-request-refused"
    );
    assert_eq!(
        err(&b.call(&lead, "staff.request", good.clone())),
        "no-chief-of-staff"
    );
    assert_eq!(
        err(&b.call(&quiet, "staff.request", good.clone())),
        "not-authorized"
    );
    assert_eq!(
        err(&b.call(&b.reader_cap(), "staff.request", good.clone())),
        "read-only"
    );
    assert_eq!(
        err(&human.call("staff.request", good.clone())),
        "agent-required"
    );
    // Shapes.
    let many: Vec<Value> = (0..11)
        .map(|i| json!({"role": format!("r{i}"), "count": 1}))
        .collect();
    for (args, code) in [
        (json!({"task_ref": TASK, "roles": []}), "invalid-request"),
        (json!({"task_ref": TASK, "roles": many}), "invalid-request"),
        (
            json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 0}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 21}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 1.5}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 1},
                                            {"role": "dev", "count": 2}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 1, "x": 1}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": [{"role": "dev"}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": {"dev": 1}}),
            "invalid-request",
        ),
        (
            json!({"task_ref": "task-41", "roles": [{"role": "dev", "count": 1}]}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 1}], "to": "chief"}),
            "invalid-request",
        ),
        (
            json!({"task_ref": TASK, "roles": [{"role": "qa", "count": 1}]}),
            "unknown-role",
        ),
    ] {
        let r = b.call(&pm, "staff.request", args.clone());
        assert_eq!(err(&r), code, "{args}: {r}");
    }
    assert_eq!(messages(&c), 0, "no refusal wrote a message");

    // The request: one STAFF-REQUEST message to the chief of staff and its
    // action.allowed, granting nothing.
    let r = res(&b.call(&pm, "staff.request", good.clone())).clone();
    assert_eq!(r["to"], json!("chief"), "{r}");
    let id = r["message"].as_str().expect("message id").to_string();
    let (from, to, class, body): (String, String, String, String) = c
        .query_row(
            "SELECT from_role, to_role, class, body FROM messages WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("the message");
    assert_eq!(
        (from.as_str(), to.as_str(), class.as_str()),
        ("pm", "chief", "STAFF-REQUEST")
    );
    assert!(
        body.contains(TASK) && body.contains("2 dev") && body.contains("the launch week"),
        "{body}"
    );
    let allowed: String = c
        .query_row(
            "SELECT body FROM events WHERE kind = 'action.allowed' AND role = 'pm'
               AND json_extract(body, '$.operation') = 'staff.request'",
            [],
            |r| r.get(0),
        )
        .expect("the action.allowed");
    let allowed: Value = serde_json::from_str(&allowed).expect("json");
    assert_eq!(allowed["staff_for"], json!(TASK));
    assert_eq!(allowed["roles"], json!([{"role": "dev", "count": 2}]));
    assert_eq!(allowed["action"], json!("message.send"));
    assert_eq!(allowed["message"], json!(id));
    let got = res(&b.call(&chief, "message.receive", Value::Null)).clone();
    let got = got["messages"].as_array().cloned().unwrap_or_default();
    assert!(
        got.iter()
            .any(|m| m["id"] == json!(id) && m["class"] == json!("STAFF-REQUEST")),
        "{got:?}"
    );

    // No other path writes the class.
    let r = b.call(
        &pm,
        "message.send",
        json!({"to": "chief", "body": "staff?", "class": "STAFF-REQUEST"}),
    );
    assert_eq!(err(&r), "invalid-class");
    let r = human.call(
        "thread.send",
        json!({"thread": "t", "body": "staff?", "class": "STAFF-REQUEST"}),
    );
    assert_eq!(err(&r), "invalid-class");
    assert_eq!(messages(&c), 1);
    drop(c);
    b.close();
}

/// One reading of an instance's definition (issue 30): an instance with no
/// `definition` stands for the definition its key names, for every rule.
/// A definition-less `pm` gets the spec notices and may BLOCK (as
/// the project-records tests show), so it asks for staff as a pm too; and a
/// definition-less instance keyed `chief-of-staff` is the chief of staff
/// a staff request goes to. A definition-less key that names no such
/// definition is neither.
#[test]
fn a_definition_less_pm_asks_a_definition_less_chief_of_staff_for_staff() {
    let dir = data_root();
    let root = dir.path();
    let send = json!({"withinRole": ["message.send"], "crossRole": []});
    let config = json!({
        "dataRoot": root.to_str().expect("utf-8"),
        "businesses": {"acme": {
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "pm", "delivery": "pm"},
            "roles": {
                "chief-of-staff": {"authority": send},
                "pm": {"authority": send},
                "lead": {"authority": send},
                "dev": role("dev", json!([])),
            },
            "launch": {"by": "chief-of-staff", "instances": ["pm", "lead", "dev"]},
        }},
    });
    let (mut b, reply) = Broker::spawn(root, config);
    assert_eq!(reply["ok"], json!(true), "boot: {reply}");
    let procs: Vec<Sleeper> = (0..3).map(|_| sleeper()).collect();
    let chief = b.claimed_in("acme", "chief-of-staff", "chief-1", procs[0].id());
    let pm = b.claimed_in("acme", "pm", "pm-1", procs[1].id());
    let lead = b.claimed_in("acme", "lead", "lead-1", procs[2].id());
    let ask = json!({"task_ref": TASK, "roles": [{"role": "dev", "count": 1}]});
    assert_eq!(
        err(&b.call(&lead, "staff.request", ask.clone())),
        "staff-request-refused"
    );
    let r = res(&b.call(&pm, "staff.request", ask)).clone();
    assert_eq!(r["to"], json!("chief-of-staff"), "{r}");
    let got = res(&b.call(&chief, "message.receive", Value::Null)).clone();
    assert_eq!(got["messages"][0]["id"], r["message"], "{got}");
    assert_eq!(got["messages"][0]["class"], json!("STAFF-REQUEST"));
    b.close();
}
